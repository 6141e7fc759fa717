"""STAGE 1 — the array API's data type functions and inspection utilities on traced arrays.
Dtypes are NumPy's; these answer from the dtype alone, so they never need a concrete value."""

import numpy as np

from ..errors import DloopTypeError
from ..source import user_location
from .tracer import Tracer

DEVICE = "cpu"


def _compat():
    """array-api-compat's NumPy namespace, imported when first asked: it imports
    numpy.typing and numpy.f2py, half a second of a first trace that never needs them."""
    import array_api_compat.numpy
    return array_api_compat.numpy


def _dtype(x):
    if isinstance(x, (Tracer, np.ndarray, np.generic)):
        return x.dtype
    try:
        return np.dtype(x)
    except TypeError:
        raise DloopTypeError(f"expected an array or a dtype, got {type(x).__name__}",
                             user_location()) from None


def result_type(*arrays_and_dtypes):
    """Array-API promotion: Python scalars are weak (they take the arrays' dtype)."""
    strong = [_dtype(x) for x in arrays_and_dtypes
              if not isinstance(x, (bool, int, float, complex))]
    weak = [x for x in arrays_and_dtypes if isinstance(x, (bool, int, float, complex))]
    if not strong:
        return np.result_type(*weak)
    return np.result_type(*strong, *weak)


def can_cast(from_, to):
    return bool(np.can_cast(_dtype(from_), np.dtype(to)))


def finfo(type):
    return np.finfo(_dtype(type))


def iinfo(type):
    return np.iinfo(_dtype(type))


def isdtype(dtype, kind):
    return _compat().isdtype(np.dtype(dtype), kind)


class Info:
    """What `xp.__array_namespace_info__()` returns: one CPU device, NumPy's dtypes, and no
    data-dependent output shapes (boolean indexing, nonzero and unique need a concrete value)."""

    def capabilities(self):
        return {"boolean indexing": False, "data-dependent shapes": False,
                "max dimensions": 64}

    def default_device(self):
        return DEVICE

    def devices(self):
        return [DEVICE]

    def default_dtypes(self, *, device=None):
        return {"real floating": np.dtype(np.float64), "complex floating":
                np.dtype(np.complex128), "integral": np.dtype(np.int64),
                "indexing": np.dtype(np.int64)}

    def dtypes(self, *, device=None, kind=None):
        return _compat().__array_namespace_info__().dtypes(kind=kind)


def __array_namespace_info__():
    return Info()
