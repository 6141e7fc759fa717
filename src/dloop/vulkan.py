"""Arrays that stay on a Vulkan device between calls: `dloop.vulkan.asarray(x)` copies x there
once; dloop's calls on such arrays run on the vulkan backend and return such arrays, with no
copy of inputs or results through the host (NumPy arrays cross PCIe at every call: on an
H100, 0.4 to 0.9 ms each way for 8 MB). No array library holds Vulkan memory, so this is
dloop's own, and a small one: compute with dloop.jit, dloop.grad and the rest, and read
values with np.asarray(a) (or float(a), int(a)).

A dloop.vulkan array is immutable: nothing writes it after asarray or the call that made it.
So a call that captures one (a loss closing over trip counts) keeps it as a constant without
a copy, and host sizing reads its values once for its lifetime (VulkanBackend.host_values).
It is pickled by value and re-uploaded when unpickled. A process forked after the device was
opened cannot use it (Vulkan drivers are not fork-safe): it raises a DloopError there."""

import numpy as np

from .api import _as_input
from .backends.base import get_backend
from .backends.vulkan.arrays import DeviceArray
from .errors import DloopError, DloopTypeError, DloopValueError
from .source import user_location

Array = DeviceArray          # for isinstance checks


def asarray(x, dtype=None):
    """x (a NumPy array, a list, a number, an array of another library, a dloop.vulkan array)
    as a dloop.vulkan array on the vulkan backend's device, of dtype `dtype` (default: x's;
    smaller integers widen to int64, as dloop's calls take them)."""
    where = user_location()
    try:
        backend = get_backend("vulkan")
    except DloopValueError as e:
        raise DloopValueError(
            f"dloop.vulkan arrays live on the vulkan backend's device, which is not usable "
            f"here: {str(e).rstrip('.')}. Install the binding and a driver (pip install "
            f"'dloop[vulkan]'; Mesa's lavapipe runs on any CPU), or keep NumPy arrays",
            where) from None
    if isinstance(x, DeviceArray) and x.backend is backend and dtype in (None, x.dtype):
        return x
    return backend.device_array(checked_values(x, dtype, where))


_WHAT = "dloop.vulkan.asarray's argument"


def checked_values(x, dtype, where):
    """x as the NumPy array (C order) a dloop.vulkan array of it holds: dtype `dtype` or x's,
    as dloop's calls take arrays (smaller integers widened to int64, other dtypes refused);
    a DloopError for what is no array."""
    try:
        if isinstance(x, (list, tuple)):
            x = np.asarray(x)
        values = _as_input(x, _WHAT, where)
        if dtype is not None:
            values = _as_input(values.astype(dtype), _WHAT, where)
    except DloopError:
        raise
    except (TypeError, ValueError) as e:     # a ragged list, a dtype NumPy does not know
        cls = DloopTypeError if isinstance(e, TypeError) else DloopValueError
        raise cls(f"{_WHAT} cannot be made an array: {e}", where) from None
    return np.asarray(values, order="C")
