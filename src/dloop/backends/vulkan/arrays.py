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

from ...errors import DloopError, DloopTypeError, DloopValueError
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
        if math.prod(int(s) for s in shape) != self.size:
            # A user's array may be reshaped too: another size would read past its values.
            raise DloopValueError(f"cannot reshape a dloop.vulkan array of size {self.size} "
                                  f"into shape {tuple(shape)}", user_location())
        return DeviceArray(self.backend, self.buffer, self.offset, shape, self.dtype)

    def astype(self, dtype):
        """The values as `dtype`, a new array on the device (converted on the host), as
        dloop.vulkan.asarray(a, dtype) makes it: smaller integers widen to int64, and dtypes
        dloop does not compute in are refused (no call would take the array)."""
        if np.dtype(dtype) == self.dtype:
            return self
        from ...vulkan import checked_values   # (the users' layer: its checks and messages)
        return self.backend.device_array(checked_values(self.__array__(), dtype,
                                                        user_location()))

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise DloopValueError("a dloop.vulkan array lives on the Vulkan device: converting "
                                  "it to NumPy copies it (np.asarray(a), or copy=True)",
                                  user_location())
        out = self.backend.to_numpy(self)
        return out if dtype is None else out.astype(dtype)

    def __getitem__(self, key):
        raise DloopTypeError(
            "a dloop.vulkan array is not indexed on the host: index it inside a dloop "
            "function (dl.jit(lambda a: a[i])(a)), or read it first (np.asarray(a)[i])",
            user_location())

    def __len__(self):
        if not self.shape:
            raise DloopTypeError("len() of a 0-d dloop.vulkan array", user_location())
        return self.shape[0]

    def _scalar(self, convert):
        if self.size != 1:
            # NumPy's errors here: ValueError for bool(), TypeError for float() and int()
            cls = DloopValueError if convert is bool else DloopTypeError
            raise cls(f"only a dloop.vulkan array of one element converts to a Python "
                      f"{convert.__name__}; this one has shape {self.shape}", user_location())
        return convert(self.__array__().reshape(()))

    def __float__(self):
        return self._scalar(float)

    def __int__(self):
        return self._scalar(int)

    def __bool__(self):
        return self._scalar(bool)

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
