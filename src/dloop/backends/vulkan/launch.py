"""STAGE 5 — vulkan: the backend. Kernels are legalized, rendered to SPIR-V (kept in the disk
cache) and made compute pipelines once per kernel; a launch binds its buffers and records one
dispatch, submitted with the call's other recorded work when the host next waits
(device.py): synchronize() submits it and waits for every fence.

Memory: device arrays are arrays.DeviceArray; the adstack heap is one device buffer, regions
are views of it at offsets aligned to minStorageBufferOffsetAlignment. A buffer is recycled
only when nothing references it, and queued submissions reference every buffer they bind, so
release() has nothing to do: a replaced heap buffer lives until its last submission ends."""

import hashlib
import math
import os
import subprocess
import tempfile
import threading

import numpy as np

from ...errors import DloopMemoryError, DloopNotImplementedError, DloopTypeError, DloopValueError
from ...kernel import kir
from ...source import user_location
from ...trace import captured_copies
from ..base import KEPT_UPLOAD_BYTES, Backend, Caps
from . import device as vkdevice
from . import order, sizing
from .arrays import DeviceArray, from_storage, slot_bytes, storage_dtype, to_storage
from .render import render

_INT32_LIMIT = 2 ** 31
_default = {}
_default_lock = threading.Lock()


def default_device():
    with _default_lock:
        if "device" not in _default:
            try:
                _default["device"] = vkdevice.Device()
            except vkdevice.VulkanUnavailable as e:
                _default["device"] = e
        found = _default["device"]
    if isinstance(found, Exception):
        raise found
    return found


class Artifact:
    """A compiled kernel: its pipeline, and the workgroup size its shader was rendered
    with (Features.workgroup), which its dispatch must use."""
    __slots__ = ("pipeline", "n_buffers", "counters", "workgroup")

    def __init__(self, pipeline, n_buffers, counters, workgroup):
        self.pipeline, self.n_buffers, self.counters = pipeline, n_buffers, counters
        self.workgroup = workgroup


# Mesa's lavapipe ends every loop of a shader invocation after this many iterations, with no
# error (LP_MAX_TGSI_LOOP_ITERATIONS); a shader cannot observe it, so loops sized at launch
# that reach it are refused.
_LAVAPIPE_LOOP_LIMIT = 65_535

# Sizing runs on the host, where ordering 10^6 elements (sort, gather, scatters) took about
# 11 ms on the H100 machine's cores, while a GPU lane-iteration is cheap: W1's gradient
# (uniform trips, 78 idle lane-iterations per element unordered) took 37 ms ordered against
# 30 ms unordered on NVIDIA's driver, and with one element in 100 at 1000 trips (about 260
# idle) 34 against 33 ms. Elements are ordered on the host only where far more lanes would
# idle. From 2^16 elements they are ordered on the device (order.py), which costs about as
# much as W1's uniform trips idle (78 lane-iterations per element): at 10^6 on the H100,
# sorted and not, 12.3 against 12.8 ms (float64) and 11.0 against 10.6 (float32), while
# one element in 100 at 1000 trips (about 270 idle) took 10.5 against 16.5 ms.
_SORT_COST = 256
_DEVICE_SORT_COST = 64


class VulkanBackend(Backend):
    name = "vulkan"
    host_results = True
    rough = False       # tests: divisions and square roots a few ulps off (vulkan/rough.py)

    @classmethod
    def probe(cls):
        try:
            default_device()
        except vkdevice.VulkanUnavailable as e:
            return False, f"backend 'vulkan': {e}"
        return True, ""

    def check_settings(self):
        """The device was opened with the vulkan_device and vulkan_mask of that moment."""
        try:
            now = vkdevice.settings()[:2]
        except vkdevice.VulkanUnavailable as e:
            raise DloopValueError(str(e), user_location()) from None
        if now != self.device.chosen:
            choice, mask = self.device.chosen
            raise DloopValueError(
                f"vulkan_device and vulkan_mask are read once, when dloop opens the Vulkan "
                f"device (here {self.features.name}, opened with vulkan_device={choice!r}, "
                f"vulkan_mask={','.join(sorted(mask)) or None!r}); changed since, they would "
                "be ignored: set them before the first Vulkan call, or start a new process",
                user_location())

    def __init__(self, device=None):
        """device: a device.Device (tests make ones with masked features); the default is
        chosen by the vulkan_device / vulkan_mask settings."""
        super().__init__()
        self.device = device or default_device()
        f = self.features = self.device.features
        # native_math: none. Vulkan lets drivers make GLSL.std.450's transcendentals loose
        # (sin: 2^-11 absolute; log2 near 1: 2^-21; lavapipe's asin 2e-4 off), so every one
        # is kernel/mathlib.py's (float32 through float64, rounded once, but sin and cos:
        # mathlib32.py), and a device without float64 takes their float32 code; GLSL's Sin
        # and Cos serve only core.py's device_sin and device_cos (float32 from 4096 there).
        self.caps = Caps(float64=f.float64, index64=f.int64,
                         float_atomic_add=f.float32_atomic_add, int64_atomics=f.int64_atomics,
                         bool_bytes=4, max_buffer_bytes=f.max_range,
                         align=max(64, f.align),
                         native_math=frozenset(), order_elements=True, lockstep=32,
                         tape_lanes=order.LANES, compact_tapes=True, sort_cost=_SORT_COST,
                         device_sort_cost=_DEVICE_SORT_COST,
                         rounded_division=False,
                         max_loop_trips=_LAVAPIPE_LOOP_LIMIT if "llvmpipe" in f.name
                         else None)
        self._empty = None

    # -- compile --
    def render(self, kernel):
        self._check_float64(kernel)
        self._check_bindings(kernel)
        words = render(kernel, self.features, self.rough)
        code = np.asarray(words, dtype="<u4").tobytes()
        if self.device.validate:
            validate(code)
        return code

    def build(self, source, kernel):
        return source

    def _check_bindings(self, kernel):
        """A pipeline with more storage buffers than the device allows per shader is
        undefined behaviour (lavapipe crashes in vkQueueSubmit): refuse it here."""
        if len(kernel.buffers) <= self.features.max_buffers:
            return
        raise DloopNotImplementedError(
            f"this loop's kernel binds {len(kernel.buffers)} arrays, more than the "
            f"{self.features.max_buffers} storage buffers per shader that Vulkan device "
            f"{self.features.name} allows (maxPerStageDescriptorStorageBuffers). Pass the "
            "arrays it reads as fewer, stacked arrays (xp.stack([a, b, c]) indexed inside), "
            "or run this call on the cpu or cuda backend",
            next((st.src for st in kernel.body if getattr(st, "src", None)), None))

    def load(self, binary, source, kernel):
        key = hashlib.sha256(binary).digest()
        pipeline = self.device.pipeline(key, binary, len(kernel.buffers))
        return Artifact(pipeline, len(kernel.buffers), len(kernel.counters),
                        self.features.workgroup)

    def cache_identity(self):
        # The device and every feature render reads.
        return (repr(self.features), self.rough)

    def _check_float64(self, kernel):
        if self.features.float64:
            return
        where = _first_float64(kernel.body)
        uses = where is not None or any(np.dtype(b.dtype) == np.float64 for b in kernel.buffers)
        if uses:
            raise DloopTypeError(
                f"float64 arrays need shaderFloat64, which Vulkan device "
                f"{self.features.name} lacks; use float32 (x.astype(np.float32)), or another "
                "device or backend", where or user_location())

    # -- memory --
    def _array(self, shape, dtype, zero):
        dtype = np.dtype(dtype)
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        itemsize = storage_dtype(dtype, self.features.int64).itemsize
        n = math.prod(int(s) for s in shape) * itemsize
        buf = self.device.alloc(max(n, 4))
        if zero or n == 0:       # empty arrays read as zeros, like the interpreter's
            self.device.fill_zero(buf, 0, max(n, 4))
        return DeviceArray(self, buf, 0, shape, dtype)

    def empty(self, shape, dtype):
        return self._array(shape, dtype, False)

    def zeros(self, shape, dtype):
        return self._array(shape, dtype, True)

    def upload(self, x, dtype, now=False):
        """now: write at once, not deferred to the next submission (device.write): the
        caller may change x as soon as this returns."""
        dtype = np.dtype(dtype)
        if isinstance(x, DeviceArray):
            if x.dtype == dtype and x.backend is self:
                return x.reshape(-1)
            x = x.backend.to_numpy(x)      # (another device's: through the host)
        data = to_storage(np.asarray(x), dtype, self.features.int64, self.features.name)
        out = self._array((data.size,), dtype, False)
        self.device.write(out.buffer, 0, data, now=now)
        return out

    def device_array(self, values):
        """NumPy values as a held device array (a dloop.vulkan array) of their shape."""
        values = np.asarray(values)
        out = self.upload(values, values.dtype, now=True).reshape(values.shape)
        out.held = True
        return out

    def host_values(self, x):
        """A held array's values on the host read once, kept (read-only) for its lifetime,
        and known to kept_upload as having x as their device copy: W1's trip counts held on
        the device are sized from at every call without crossing to the host again, and
        the sizing memo finds the same host array unchanged without comparing it."""
        if not (isinstance(x, DeviceArray) and x.held and x.backend is self):
            return self.to_numpy(x)
        if x.host is None:
            host = self.to_numpy(x)
            captured_copies.freeze(host)
            if x.nbytes <= KEPT_UPLOAD_BYTES:      # (larger, it would push out all others)
                # (a view of x's buffer, not x, which holds `host`: x can still be freed)
                self.keep_upload(host, x.reshape(x.shape))
            x.host = host
        return x.host

    def to_host(self, x):
        return self.to_numpy(x)

    def to_numpy(self, x):
        if not isinstance(x, DeviceArray):
            return np.asarray(x)
        return self.to_numpy_all([x])[0]

    def to_numpy_all(self, arrays):
        if any(x.backend is not self for x in arrays):
            # Another device's arrays (tests install masked devices) are read by it: its read
            # waits for the work that makes them, and this device's queue holds none of it.
            return [x.backend.to_numpy(x) for x in arrays]
        raws = self.device.read_many([(x.buffer, x.offset, x.nbytes) for x in arrays])
        return [from_storage(raw.view(x.storage), x.dtype, x.shape)
                for raw, x in zip(raws, arrays)]

    def heap_alloc(self, nbytes):
        return self.device.alloc(nbytes)

    def heap_copy(self, dst, src, nbytes):
        self.device.copy(dst, src, nbytes)

    def heap_region(self, raw, offset, nbytes, dtype):
        if raw is None:
            if self._empty is None:
                self._empty = self.zeros((0,), np.int32).buffer
            return DeviceArray(self, self._empty, 0, (0,), dtype)
        return DeviceArray(self, raw, offset, (nbytes // slot_bytes(dtype),), dtype)

    def heap_store(self, region, x):
        self.device.wait_all()          # the region may be read by queued work
        data = to_storage(np.asarray(x), region.dtype, self.features.int64, self.features.name)
        self.device.write(region.buffer, region.offset, data)

    def heap_load(self, region):
        return self.to_numpy(region)

    def compact_starts(self, cap, upload):
        return sizing.compact_starts(self, cap, upload)

    def device_order(self, work, upload):
        return order.element_order(self, work, upload)

    def device_interleave(self, cap, in_order, by_slot, upload):
        return order.interleaved(self, cap, in_order, by_slot, upload)

    # -- execution --
    def launch(self, artifact, n_threads, buffers):
        if not n_threads:
            return
        if n_threads >= _INT32_LIMIT:
            raise DloopValueError(f"a launch of {n_threads:,} elements; the Vulkan backend "
                                  f"runs at most {_INT32_LIMIT - 1:,} per kernel: split the "
                                  "call", user_location())
        if not self.features.int64:
            self._check_offsets(buffers, n_threads * max(artifact.counters, 1))
        bindings = [self._binding(b) for b in buffers]
        self.device.dispatch(artifact.pipeline, bindings, n_threads,
                             [b.buffer for b in buffers], artifact.workgroup)

    def _binding(self, array):
        nbytes = array.nbytes
        if nbytes > self.features.max_range:
            raise DloopMemoryError(
                f"one buffer of this launch needs {nbytes:,} bytes, more than the "
                f"{self.features.max_range:,} (maxStorageBufferRange) one binding of Vulkan "
                f"device {self.features.name} can address; use fewer elements per call",
                user_location())
        return array.buffer, array.offset, max(nbytes, 4)

    def _check_offsets(self, buffers, counted):
        largest = max([b.size for b in buffers] + [counted])
        if largest >= _INT32_LIMIT:
            raise DloopValueError(
                f"this launch addresses {largest:,} elements of one buffer, but Vulkan device "
                f"{self.features.name} lacks shaderInt64, so offsets are 32-bit and reach "
                f"{_INT32_LIMIT - 1:,}; use fewer elements or shorter loops per call, or a "
                "device with shaderInt64", user_location())

    def synchronize(self):
        self.device.wait_all()


def _first_float64(stmts):
    """The source line of the first statement that makes or reads a float64, or None."""
    f64 = np.dtype(np.float64)
    for s in stmts:
        values = [getattr(s, a, None) for a in ("out", "value")] + list(getattr(s, "args", ()))
        # (a dtype compares equal to None: NumPy reads None as float64)
        if any(v is not None and v.dtype == f64 for v in values):
            return s.src or user_location()
        for attr in ("body", "cond_body"):
            inner = _first_float64(getattr(s, attr, None) or [])
            if inner is not None:
                return inner
        if isinstance(s, (kir.For, kir.While)) and any(c.dtype == f64 for c in s.carries):
            return s.src or user_location()
    return None


def validate(code):
    """spirv-val on a module (tests turn this on): an invalid module is a dloop bug."""
    with tempfile.NamedTemporaryFile(suffix=".spv", delete=False) as fh:
        fh.write(code)
    try:
        run = subprocess.run(["spirv-val", "--target-env", "vulkan1.2", fh.name],
                             capture_output=True, text=True)
    finally:
        os.unlink(fh.name)
    if run.returncode:
        raise RuntimeError(f"dloop made an invalid SPIR-V module:\n{run.stdout}{run.stderr}")
