"""STAGE 5 — cpu: LLVM IR text -> optimized machine code for this CPU, JIT-loaded."""

import ctypes
import threading
from importlib import resources

import llvmlite.binding as llvm

_lock = threading.Lock()
_state = {}


def _target_machine():
    if "tm" not in _state:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        _state["tm"] = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=3, reloc="default", codemodel="jitdefault")
        _state["native"] = resources.files("dloop").joinpath(
            "_native/cpu/adstack.ll").read_text()
        _state["engines"] = []
    return _state["tm"]


class CompiledKernel:
    """A JIT-compiled kernel: call(start, end, n_threads, *buffer_addresses)."""

    def __init__(self, engine, address, n_buffers):
        self.engine = engine            # keeps the machine code alive
        self.call = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * 3 +
                                             [ctypes.c_void_p] * n_buffers))(address)


def cache_identity():
    """What besides the kernel determines machine code: host CPU, LLVM and dloop versions."""
    tm = _target_machine()
    return (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(),
            ".".join(map(str, llvm.llvm_version_info)), str(tm.target_data))


def load_object(code, n_buffers):
    with _lock:
        tm = _target_machine()
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        engine.finalize_object()
        _state["engines"].append(engine)
        return CompiledKernel(engine, engine.get_function_address("dloop_kernel"), n_buffers)


def compile_llvm(ir_text):
    """Optimized object code for this CPU."""
    with _lock:
        tm = _target_machine()
        module = llvm.parse_assembly(ir_text)
        module.triple = llvm.get_process_triple()
        module.data_layout = str(tm.target_data)
        module.link_in(llvm.parse_assembly(_state["native"]))
        module.verify()
        builder = llvm.create_pass_builder(tm, llvm.PipelineTuningOptions(speed_level=3))
        builder.getModulePassManager().run(module, builder)
        return tm.emit_object(module)
