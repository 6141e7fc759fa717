"""STAGE 5 — cuda: the backend. Kernels are compiled by NVRTC to a cubin for the current
device and launched on CuPy's current stream, one thread per element; device arrays are CuPy
arrays. Launches are asynchronous: heap buffers replaced while work is queued are kept until
synchronize() has passed that work."""

import functools
import threading

import cupy
import numpy as np

from ..base import Backend
from .compile import compile_cuda, header_text, nvrtc_version
from . import sizing
from .render import BLOCK, CUDA_CAPS, KERNEL_NAME, Renderer
from .steps import StepDriver, device_copy


@functools.lru_cache(maxsize=None)
def _target(capability):
    """NVRTC's target for a GPU of compute capability `capability` ('90'): its own cubin
    where this NVRTC knows the architecture, else PTX for the newest one it knows below it
    (a newer GPU, or one between two it knows), which the driver compiles for the GPU; a
    GPU older than every architecture it knows is refused."""
    from cupy.cuda import nvrtc
    known = sorted(nvrtc.getSupportedArchs())
    cc = int(capability)
    if cc in known:
        return f"sm_{cc}"
    below = [k for k in known if k < cc]
    if below:
        return f"compute_{below[-1]}"
    raise ValueError(f"this GPU (compute capability {cc / 10:.1f}) is older than every "
                     f"architecture the installed NVRTC compiles for (from {known[0] / 10:.1f})")


class CudaKernel:
    def __init__(self, cubin):
        self.module = cupy.cuda.function.Module()
        self.module.load(cubin)
        self.function = self.module.get_function(KERNEL_NAME)


class CudaBackend(Backend):
    name = "cuda"
    caps = CUDA_CAPS
    xp = cupy
    stream_ordered = True
    interleave = staticmethod(sizing.interleaved)
    order_by_work = staticmethod(sizing.tile_order)
    all_equal = staticmethod(sizing.all_equal)

    def __init__(self):
        super().__init__()
        self._retired = []          # (event, replaced heap buffer) queued work may still read
        self._retired_lock = threading.Lock()

    @classmethod
    def probe(cls):
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:          # CuPy raises its own error types per failing library
            return False, f"backend 'cuda' found no usable GPU: {type(e).__name__}: {e}"
        if count == 0:
            return False, "backend 'cuda' found no CUDA device"
        try:
            _target(cupy.cuda.Device().compute_capability)
        except ValueError as e:
            return False, f"backend 'cuda': {e}"
        return True, ""

    # -- compile --
    def _arch(self):
        return _target(cupy.cuda.Device().compute_capability)

    def render(self, kernel, variant=None):
        """variant "rows": the entry that reads its arguments from a row (steps.py)."""
        return Renderer(kernel, rows=variant == "rows").render()

    def build(self, source, kernel):
        arch = self._arch()
        return compile_cuda(source, arch, cubin=arch.startswith("sm_"))

    def load(self, binary, source, kernel):
        return CudaKernel(binary)

    def cache_identity(self):
        # The header is part of every kernel's source, so its text is part of the key.
        return (nvrtc_version(), self._arch(), header_text())

    # -- memory --
    def empty(self, shape, dtype):
        return cupy.empty(shape, dtype)

    def zeros(self, shape, dtype):
        return cupy.zeros(shape, dtype)

    def upload(self, x, dtype):
        if isinstance(x, cupy.ndarray) and x.dtype == dtype and x.flags.c_contiguous:
            # the usual case, at every launch: no conversion (and no new view of a 1-D
            # array: CuPy's reshape costs a few us)
            return x if x.ndim == 1 else x.reshape(-1)
        return cupy.ascontiguousarray(cupy.asarray(x, dtype=dtype)).reshape(-1)

    def owned_copy(self, x, dtype):
        """One copy on the stream: CuPy's own copy costs several times the host time."""
        if not (isinstance(x, cupy.ndarray) and x.dtype == dtype and x.flags.c_contiguous):
            return super().owned_copy(x, dtype)
        out = cupy.empty(x.shape, dtype)
        device_copy(out.data.ptr, x.data.ptr, x.nbytes, cupy.cuda.get_current_stream().ptr)
        return out

    def to_host(self, x):
        """Host steps run in CuPy on the device: only stray NumPy values (literals, NumPy
        inputs) are copied in."""
        return cupy.asarray(x)

    def to_numpy(self, x):
        return cupy.asnumpy(x)

    def heap_alloc(self, nbytes):
        try:
            return cupy.empty(nbytes, dtype=np.uint8)
        except cupy.cuda.memory.OutOfMemoryError:
            raise MemoryError(nbytes) from None

    def heap_copy(self, dst, src, nbytes):
        dst[:nbytes] = src[:nbytes]

    def heap_region(self, raw, offset, nbytes, dtype):
        if raw is None:
            return cupy.empty(0, dtype)
        return raw[offset:offset + nbytes].view(dtype)

    def heap_store(self, region, x):
        region[:] = cupy.asarray(x).reshape(-1)

    def heap_load(self, region):
        return region.copy()

    def release(self, raw):
        """Keep `raw` until the work queued so far has finished: an event marks that point."""
        event = cupy.cuda.Event(block=False, disable_timing=True)
        event.record()
        with self._retired_lock:
            self._retired = self._pending_buffers() + [(event, raw)]

    def _pending_buffers(self):
        return [(e, r) for e, r in self._retired if not e.done]

    # -- execution --
    def step_driver(self, plan, mode, n_index, n_carry, n_inv):
        return StepDriver(self, plan, mode, n_index, n_carry, n_inv)

    def address(self, array):
        return array.data.ptr

    def launch(self, kernel, n_threads, buffers):
        grid = (n_threads + BLOCK - 1) // BLOCK
        kernel.function((grid,), (BLOCK,), (np.int64(n_threads), *buffers))

    def synchronize(self):
        cupy.cuda.get_current_stream().synchronize()
        with self._retired_lock:         # buffers other threads' streams still use stay
            self._retired = self._pending_buffers()
