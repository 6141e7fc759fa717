"""STAGE 5 — cpu: LLVM IR text -> optimized machine code for this CPU, JIT-loaded."""

import ctypes
import ctypes.util
import threading
from importlib import resources

import llvmlite.binding as llvm
import numpy as np

_lock = threading.Lock()          # every use of LLVM's compiler and JIT
_setup_lock = threading.Lock()    # the one-time set-up below
_state = {}


def _target_machine():
    """LLVM's target machine for this CPU, set up once: under its own lock, with "tm"
    published last, so that a thread that finds it finds the rest (a second thread's first
    call once read "mvec" while the first was still looking for libmvec)."""
    tm = _state.get("tm")
    if tm is not None:
        return tm
    with _setup_lock:
        if "tm" in _state:
            return _state["tm"]
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        tm = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=3, reloc="default", codemodel="jitdefault")
        _state["native"] = resources.files("dloop").joinpath(
            "_native/cpu/adstack.ll").read_text()
        _state["engines"] = []
        # Kernels may call glibc's vector math; objects loaded from the disk cache need its
        # symbols resolved before they are linked.
        name = ctypes.util.find_library("mvec")
        try:
            llvm.load_library_permanently(name)
            _state["mvec"] = True
        except (TypeError, OSError, RuntimeError):
            _state["mvec"] = False
        _state["tm"] = tm
    return tm


class CompiledKernel:
    """A JIT-compiled kernel: call(start, end, n_threads, *buffer_addresses)."""

    def __init__(self, engine, address, n_buffers):
        self.engine = engine            # keeps the machine code alive
        self.call = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * 3 +
                                             [ctypes.c_void_p] * n_buffers))(address)


def vector_width():
    """Lanes of 64 bits in the host's widest vector registers."""
    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        return 8
    return 4 if features.get("avx2") else 2


def vector_math(width):
    """The libmvec symbols this process can call at `width` lanes (64-bit lanes, and 32-bit
    lanes at the same lane count), loading glibc's libmvec if it is there."""
    _target_machine()
    found = set()
    if not _state["mvec"]:
        return frozenset()
    from ...kernel.core import TRANSCENDENTAL
    from .simd import mvec_name
    for fname in TRANSCENDENTAL:
        arity = 2 if fname in ("pow", "atan2") else 1
        for dtype in (np.float64, np.float32):
            symbol = mvec_name(fname, dtype, width, arity)
            if symbol and llvm.address_of_symbol(symbol):
                found.add(symbol)
    return frozenset(found)


def cache_identity():
    """What besides the kernel determines machine code: host CPU, LLVM and dloop versions."""
    tm = _target_machine()
    return (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(),
            ".".join(map(str, llvm.llvm_version_info)), str(tm.target_data))


def _loaded(code, take):
    """take(engine) for an execution engine holding object code (kept alive for the
    process), under the compile lock like every other use of LLVM here."""
    with _lock:
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        engine.finalize_object()
        _state["engines"].append(engine)
        return take(engine)


def load_object(code, n_buffers):
    return _loaded(code, lambda engine: CompiledKernel(
        engine, engine.get_function_address("dloop_kernel"), n_buffers))


def load_functions(code, signatures):
    """{name: ctypes function} from object code of host helpers (adstack/native.py), for
    signatures {name: (restype, argtypes)}; ctypes releases the GIL during each call."""
    return _loaded(code, lambda engine: {
        name: ctypes.CFUNCTYPE(restype, *argtypes)(engine.get_function_address(name))
        for name, (restype, argtypes) in signatures.items()})


def compile_llvm(ir_text, runtime=True):
    """Optimized object code for this CPU; runtime: link the adstack routines in."""
    with _lock:
        tm = _target_machine()
        module = llvm.parse_assembly(ir_text)
        module.triple = llvm.get_process_triple()
        module.data_layout = str(tm.target_data)
        if runtime:
            module.link_in(llvm.parse_assembly(_state["native"]))
        module.verify()
        builder = llvm.create_pass_builder(tm, llvm.PipelineTuningOptions(speed_level=3))
        builder.getModulePassManager().run(module, builder)
        return tm.emit_object(module)
