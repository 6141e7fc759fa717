"""Float-to-integer conversion saturates, identically in the reference semantics and every
backend: NaN gives 0, values beyond the integer type give its min or max."""

import numpy as np
import pytest

import dloop as dl
from dloop.ir import semantics

X = np.array([np.nan, np.inf, -np.inf, 1e300, -1e300, 3.7, -3.7, 0.0, 2.0 ** 63, -2.0 ** 63,
              2.0 ** 31, -2.0 ** 31 - 1.0, 2147483647.5])


def _expected(x, dtype):
    """Written out element by element, independently of semantics.convert."""
    info = np.iinfo(dtype)
    out = []
    for v in x:
        if np.isnan(v):
            out.append(0)
        elif v >= info.max:
            out.append(info.max)
        elif v <= info.min:
            out.append(info.min)
        else:
            out.append(int(v))          # Python's int() truncates toward zero
    return np.array(out, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_reference_semantics_saturate(dtype):
    np.testing.assert_array_equal(semantics.convert(X, dtype), _expected(X, dtype))


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_backends_saturate_in_kernels(backend, dtype):
    # x + 0.0 makes the conversion run inside a kernel rather than fold as a constant.
    got = dl.jit(lambda x: (x + 0.0).astype(dtype))(X)
    np.testing.assert_array_equal(got, _expected(X, dtype))
