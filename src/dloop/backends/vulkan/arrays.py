"""STAGE 5 — vulkan: device arrays. A DeviceArray is a typed view of a device buffer (a whole
array, or a heap region at an offset). Its dtype is the kernel-IR dtype; `storage` is what
the device holds: bool as 32-bit integers, int64 as int32 on devices without shaderInt64
(values that do not fit are refused on upload, never wrapped; values a kernel computes
there that leave int32 raise a fault, kernel/int32_range.py).

Users hold them too, as `dloop.vulkan` arrays (dloop/vulkan.py): made by asarray, returned
by calls on them. Those are `held`: nothing writes them again, and the users' API has no
way to, so a call may keep one as a constant without copying it, and the host's copy of its
values, read once for sizing (VulkanBackend.host_values), stays right for its lifetime."""

import math

import numpy as np

from ...errors import DloopError, DloopValueError
from ...source import user_location


def storage_dtype(dtype, int64):
    dtype = np.dtype(dtype)
    if dtype == bool:
        return np.dtype(np.int32)
    if dtype == np.int64 and not int64:
        return np.dtype(np.int32)
    return dtype


def slot_bytes(dtype):
    """Bytes per element in heap regions, as the runtime sizes them (Caps.bool_bytes = 4)."""
    dtype = np.dtype(dtype)
    return 4 if dtype == bool else dtype.itemsize


class DeviceArray:
    __slots__ = ("backend", "buffer", "offset", "shape", "dtype", "storage", "held", "host")
    dloop_backend = "vulkan"     # what libraries.py knows it by
    def __init__(self, backend, buffer, offset, shape, dtype):
        self.backend, self.buffer, self.offset = backend, buffer, offset
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.storage = storage_dtype(dtype, backend.features.int64)
        self.held = False        # a user holds it: never written again (module docstring)
        self.host = None         # a held array's values on the host, once read (read-only)

    @property
    def size(self):
        return math.prod(self.shape)        # np.prod costs ~10 us on a short tuple

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def nbytes(self):
        """Bytes on the device."""
        return self.size * self.storage.itemsize

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if -1 in shape:
            known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
            shape = tuple(self.size // max(known, 1) if s == -1 else s for s in shape)
        return DeviceArray(self.backend, self.buffer, self.offset, shape, self.dtype)

    def astype(self, dtype):
        """The values as `dtype`, a new array on the device (converted on the host)."""
        if np.dtype(dtype) == self.dtype:
            return self
        return self.backend.device_array(np.asarray(self).astype(dtype))

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("a dloop.vulkan array lives on the Vulkan device: converting it "
                             "to NumPy copies it (np.asarray(a), or copy=True)")
        out = self.backend.to_numpy(self)
        return out if dtype is None else out.astype(dtype)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d dloop.vulkan array")
        return self.shape[0]

    def __float__(self):
        return float(self.__array__())

    def __int__(self):
        return int(self.__array__())

    def __bool__(self):
        return bool(self.__array__())

    def __reduce__(self):
        # Pickled by value (a process that unpickles it has its own device), re-uploaded
        # there by dloop.vulkan.asarray.
        from ...vulkan import asarray
        return asarray, (self.__array__(),)

    def __repr__(self):
        try:
            values = repr(self.__array__())
        except DloopError:        # a forked child, say: the device is not reachable here
            return f"dloop.vulkan array(shape={self.shape}, dtype={self.dtype.name})"
        return f"dloop.vulkan {values}"


def to_storage(x, dtype, int64, device_name):
    """x (NumPy) as the bytes a device array of dtype holds."""
    x = np.ascontiguousarray(x, dtype=dtype).reshape(-1)
    storage = storage_dtype(dtype, int64)
    if storage == x.dtype:
        return x
    if x.dtype == np.int64 and x.size and (x.min() < -2 ** 31 or x.max() >= 2 ** 31):
        raise DloopValueError(
            f"an int64 array holds values beyond the int32 range, and Vulkan device "
            f"{device_name} lacks shaderInt64, so it holds int64 arrays in 32 bits; pass "
            "values within int32, or use a device with shaderInt64", user_location())
    return x.astype(storage)


def from_storage(raw, dtype, shape):
    dtype = np.dtype(dtype)
    if dtype == bool:
        return (raw != 0).reshape(shape)
    return raw.astype(dtype, copy=False).reshape(shape)
