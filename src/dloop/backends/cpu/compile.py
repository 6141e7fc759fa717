"""STAGE 5 — cpu: LLVM IR text -> optimized machine code for this CPU, JIT-loaded."""

import ctypes
import ctypes.util
import os
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
    return _uninterrupted(_set_up)


def _set_up():
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
        # Asked once: every llvmlite call on the caller's thread can be cut by Ctrl-C.
        features = llvm.get_host_cpu_features()
        _state["width"] = 8 if features.get("avx512f") else 4 if features.get("avx2") else 2
        _state["identity"] = (llvm.get_host_cpu_name(), features.flatten(),
                              ".".join(map(str, llvm.llvm_version_info)), str(tm.target_data))
        _state["tm"] = tm
    return tm


def _uninterrupted(fn):
    """fn() on a helper thread, where Ctrl-C is never raised: llvmlite hands ownership of
    LLVM objects over in two steps (a C call, then Python bookkeeping such as
    `src.detach()` in link_modules or keeping the engine), and a KeyboardInterrupt between
    them frees an object LLVM still uses (the shared target machine, a linked module): a
    later compile or garbage collection crashed. A Ctrl-C meanwhile is re-raised once fn
    has finished. The wait is on an event, not Thread.join: a join that Ctrl-C interrupts
    marks a still-running thread stopped on Python 3.11 and 3.12 (bpo-45274's handler), so
    a retried join returned at once, and the process crashed at exit with the helper still
    inside LLVM. The event is checked, not waited for once: a Ctrl-C may be raised just
    after the wait has seen it set."""
    if threading.current_thread() is not threading.main_thread():
        return fn()
    result = []
    done = threading.Event()

    def work():
        try:
            result.append((True, fn()))
        except BaseException as e:          # handed to the caller
            result.append((False, e))
        finally:
            done.set()
    threading.Thread(target=work, name="dloop-llvm", daemon=True).start()
    interrupted = None
    while not done.is_set():
        try:
            done.wait()
        except KeyboardInterrupt as e:
            interrupted = e
    if interrupted is not None:
        raise interrupted
    ok, value = result[0]
    if not ok:
        raise value
    return value


class CompiledKernel:
    """A JIT-compiled kernel: call(start, end, n_threads, *buffer_addresses), and where the
    module has them (chunks.py) chunks(job, limit, n_threads, *buffer_addresses) and
    await_idle(job, spins)."""

    def __init__(self, engine, address, n_buffers, chunks_address=0, await_address=0):
        self.engine = engine            # keeps the machine code alive
        self.call = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * 3 +
                                             [ctypes.c_void_p] * n_buffers))(address)
        self.chunks = ctypes.CFUNCTYPE(
            ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
            *[ctypes.c_void_p] * n_buffers)(chunks_address) if chunks_address else None
        self.await_idle = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)(
            await_address) if await_address else None


def vector_width():
    """Lanes of 64 bits in the host's widest vector registers."""
    _target_machine()
    return _state["width"]


def vector_math(width):
    """The libmvec symbols this process can call at `width` lanes (64-bit lanes, and 32-bit
    lanes at the same lane count), loading glibc's libmvec if it is there."""
    _target_machine()
    found = _state.get(("mvec", width))
    if found is None:
        found = _state[("mvec", width)] = _uninterrupted(lambda: _vector_math(width))
    return found


def _vector_math(width):
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
    _target_machine()
    return _state["identity"]


def _loaded(code, take):
    """take(engine) for an execution engine holding object code (kept alive for the
    process), under the compile lock like every other use of LLVM here."""
    return _uninterrupted(lambda: _loaded_now(code, take))


def _loaded_now(code, take):
    with _lock:
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        engine.finalize_object()
        _state["engines"].append(engine)
        return take(engine)


def load_object(code, n_buffers):
    return _loaded(code, lambda engine: CompiledKernel(
        engine, engine.get_function_address("dloop_kernel"), n_buffers,
        engine.get_function_address("dloop_chunks"),
        engine.get_function_address("dloop_await_idle")))


def load_functions(code, signatures):
    """{name: ctypes function} from object code of host helpers (adstack/native.py), for
    signatures {name: (restype, argtypes)}; ctypes releases the GIL during each call."""
    return _loaded(code, lambda engine: {
        name: ctypes.CFUNCTYPE(restype, *argtypes)(engine.get_function_address(name))
        for name, (restype, argtypes) in signatures.items()})


def compile_llvm(ir_text, runtime=True):
    """Optimized object code for this CPU; runtime: link the adstack routines in."""
    return _uninterrupted(lambda: _compile_now(ir_text, runtime))


def _compile_now(ir_text, runtime):
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


# A fork while another thread compiles (or frees an LLVM object) would leave the child
# dloop's and llvmlite's locks held forever (its first compile hung): the fork waits for
# the compile to finish. The order is the compile's (_lock, then _setup_lock at a first
# compile, then llvmlite's own, reentrant lock, which every llvmlite call takes: garbage
# collection frees LLVM objects outside dloop's locks). llvmlite's lock is private API:
# where a version lacks it, forking during a compile stays unsupported (docs/threads.md).
_llvmlite_lock = getattr(getattr(llvm.ffi.lib, "_lock", None), "_lock", None)
_fork_locks = [_lock, _setup_lock] + ([_llvmlite_lock] if _llvmlite_lock else [])


def _before_fork():
    for lock in _fork_locks:
        lock.acquire()


def _after_fork():
    for lock in reversed(_fork_locks):
        lock.release()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork,
                    after_in_child=_after_fork)
