"""STAGE 5 — cuda: a chain of kernel launches as one CUDA graph, made node by node through the
driver API (ctypes on libcuda, which CuPy has loaded). CuPy makes graphs only by stream
capture, and while any stream of a device captures, a device-wide synchronize in another
thread (`cupy.cuda.Device().synchronize()`, `torch.cuda.synchronize()`) fails and ends the
capture: a dloop call would break its neighbours' code."""

import ctypes
import sys
import threading

_lock = threading.Lock()
_api = {}


class _KernelNode(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h); the v1 struct is its first ten fields."""
    _fields_ = [("func", ctypes.c_void_p),
                ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared_bytes", ctypes.c_uint),
                ("params", ctypes.c_void_p), ("extra", ctypes.c_void_p),
                ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


def _driver():
    """(libcuda, the kernel-node function): its _v2 form where the driver has it (CUDA 12 and
    later), else the first."""
    with _lock:
        if not _api:
            lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
            handle, size_t = ctypes.c_void_p, ctypes.c_size_t
            out = ctypes.POINTER(handle)
            for name, args in (("cuGraphCreate", [out, ctypes.c_uint]),
                               ("cuGraphInstantiateWithFlags", [out, handle,
                                                                ctypes.c_ulonglong]),
                               ("cuGraphLaunch", [handle, handle]),
                               ("cuGraphDestroy", [handle]),
                               ("cuGraphExecDestroy", [handle]),
                               ("cuGetErrorName", [ctypes.c_int,
                                                   ctypes.POINTER(ctypes.c_char_p)])):
                getattr(lib, name).argtypes = args
                getattr(lib, name).restype = ctypes.c_int
            add = getattr(lib, "cuGraphAddKernelNode_v2", None) or lib.cuGraphAddKernelNode
            add.argtypes = [out, handle, ctypes.POINTER(handle), size_t,
                            ctypes.POINTER(_KernelNode)]
            add.restype = ctypes.c_int
            _api.update(lib=lib, add=add)
    return _api["lib"], _api["add"]


def _check(status, what):
    if status:
        lib, _ = _driver()
        name = ctypes.c_char_p()
        lib.cuGetErrorName(status, ctypes.byref(name))
        raise RuntimeError(f"{what} failed: {(name.value or b'?').decode()} ({status})")


class KernelChain:
    """launches: (CUfunction address, blocks, threads per block, address of the launch's
    argument pointers), run in this order, each after the one before, by launch(stream).
    The arguments are copied into the graph when it is made."""

    def __init__(self, launches):
        lib, add = _driver()
        graph = ctypes.c_void_p()
        _check(lib.cuGraphCreate(ctypes.byref(graph), 0), "cuGraphCreate")
        try:
            node = None
            for function, blocks, threads, arguments in launches:
                params = _KernelNode(function, (blocks, 1, 1), (threads, 1, 1), 0,
                                     arguments, None, None, None)
                after = None if node is None else ctypes.byref(node)
                node = ctypes.c_void_p()
                _check(add(ctypes.byref(node), graph, after, 0 if after is None else 1,
                           ctypes.byref(params)), "cuGraphAddKernelNode")
            self.exec = ctypes.c_void_p()
            _check(lib.cuGraphInstantiateWithFlags(ctypes.byref(self.exec), graph, 0),
                   "cuGraphInstantiate")
        finally:
            lib.cuGraphDestroy(graph)      # the executable graph does not need it

    def launch(self, stream_ptr):
        lib, _ = _driver()
        _check(lib.cuGraphLaunch(self.exec, stream_ptr), "cuGraphLaunch")

    def __del__(self):
        # A graph still running is freed when it completes (cuGraphExecDestroy).
        exec_ = getattr(self, "exec", None)
        if exec_ and _api:
            try:
                _api["lib"].cuGraphExecDestroy(exec_)
            except Exception:       # the driver library already gone at the interpreter's exit
                pass
