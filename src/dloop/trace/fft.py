"""STAGE 1 — `xp.fft`, the array API's Fourier transform extension (2023.12), on traced arrays.
The transforms are host primitives over whole arrays (fft, rfft, irfft); a length `n` or `s`
other than the input's crops or pads with zeros in the graph first, so each primitive's VJP
is its adjoint transform alone. hfft and ihfft are irfft and rfft of the conjugate."""

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..errors import DloopTypeError, DloopValueError
from ..ir.prims import ADJOINT_NORM, real_dtype
from ..source import user_location
from . import arrays, ops
from .ops import P, bind1
from .tracer import Tracer

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")


def _operand(x, norm):
    if norm not in _NORMS:
        raise DloopValueError(f"norm={norm!r}: expected one of {', '.join(_NORMS)}",
                              user_location())
    return ops._check_operand(x)


def _folded(x):
    """x's concrete value where it has one (a NumPy array, a constant tracer), else None."""
    value = ops._value(x)
    return None if value is None else np.asarray(value)


def _result(x, value):
    return ops._constant(value) if isinstance(x, Tracer) else value


def _complex(x):
    dt = ops.result_dtype(x)
    return ops.convert(x, dt if dt.kind == "c" else np.result_type(ops._floating(dt),
                                                                    np.complex64))


def _real(x, name):
    dt = ops.result_dtype(x)
    if dt.kind == "c":
        raise DloopTypeError(f"fft.{name} needs a real input, got {dt.name}; pass xp.real(x), "
                             "or use fft.fft for a complex signal", user_location())
    return ops.convert(x, ops._floating(dt))


def _axis(x, axis):
    try:
        return normalize_axis_index(axis, np.ndim(x))
    except (np.exceptions.AxisError, TypeError):
        raise DloopValueError(f"axis {axis} is out of range for an array of {np.ndim(x)} "
                              "dimensions", user_location()) from None


def _resize(x, axis, n):
    """x cropped or padded with zeros to length n along axis."""
    size = np.shape(x)[axis]
    if n < 1:
        raise DloopValueError(f"invalid number of data points ({n}) for a Fourier transform",
                              user_location())
    if n < size:
        return x[(slice(None),) * axis + (slice(0, n),)]
    if n > size:
        shape = list(np.shape(x))
        shape[axis] = n - size
        zeros = ops._constant(np.zeros(shape, ops.result_dtype(x))) \
            if isinstance(x, Tracer) else np.zeros(shape, x.dtype)
        return arrays.concat([x, zeros], axis=axis)
    return x


def _axes_and_sizes(x, s, axes):
    """The array API's reading of (s, axes): axes default to the last len(s) axes (all axes
    without s), sizes to the input's."""
    if axes is None:
        axes = tuple(range(np.ndim(x))) if s is None else \
            tuple(range(np.ndim(x) - len(s), np.ndim(x)))
    axes = tuple(_axis(x, a) for a in axes)
    if len(set(axes)) != len(axes):
        raise DloopValueError(f"axes {axes} repeat an axis", user_location())
    if s is None:
        s = tuple(np.shape(x)[a] for a in axes)
    elif len(s) != len(axes):
        raise DloopValueError(f"s {tuple(s)} and axes {axes} differ in length",
                              user_location())
    s = tuple(np.shape(x)[a] if n == -1 else int(n) for a, n in zip(axes, s))
    return axes, s


def _c2c(x, s, axes, norm, inverse):
    x = _complex(x)
    axes, s = _axes_and_sizes(x, s, axes)
    for a, n in zip(axes, s):
        x = _resize(x, a, n)
    if not axes:
        return x
    value = _folded(x)
    if value is not None:
        fn = np.fft.ifftn if inverse else np.fft.fftn
        return _result(x, fn(value, axes=axes, norm=norm).astype(x.dtype))
    return bind1(P["fft"], [x], {"axes": axes, "inverse": inverse, "norm": norm})


def _r2c(x, axis, n, norm):
    x = _real(x, "rfft")
    axis = _axis(x, axis)
    x = _resize(x, axis, np.shape(x)[axis] if n is None else n)
    value = _folded(x)
    if value is not None:
        out = np.fft.rfft(value, axis=axis, norm=norm)
        return _result(x, out.astype(np.result_type(x.dtype, np.complex64)))
    return bind1(P["rfft"], [x], {"axis": axis, "norm": norm})


def _c2r(x, axis, n, norm):
    x = _complex(x)
    axis = _axis(x, axis)
    n = 2 * (np.shape(x)[axis] - 1) if n is None else int(n)
    if n < 1:
        raise DloopValueError(f"invalid number of data points ({n}) for an inverse real Fourier "
                              "transform: pass n >= 1 (the default, 2 * (m - 1), is 0 for a "
                              "spectrum of length 1)", user_location())
    x = _resize(x, axis, n // 2 + 1)
    value = _folded(x)
    if value is not None:
        return _result(x, np.fft.irfft(value, n, axis=axis, norm=norm).astype(
            real_dtype(x.dtype)))
    return bind1(P["irfft"], [x], {"axis": axis, "n": n, "norm": norm})


def fft(x, /, *, n=None, axis=-1, norm="backward"):
    x = _operand(x, norm)
    return _c2c(x, None if n is None else (n,), (axis,), norm, False)


def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    x = _operand(x, norm)
    return _c2c(x, None if n is None else (n,), (axis,), norm, True)


def fftn(x, /, *, s=None, axes=None, norm="backward"):
    return _c2c(_operand(x, norm), s, axes, norm, False)


def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    return _c2c(_operand(x, norm), s, axes, norm, True)


def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    return _r2c(_operand(x, norm), axis, n, norm)


def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    return _c2r(_operand(x, norm), axis, n, norm)


def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    """rfft along the last axis, then fft along the others."""
    x = _operand(x, norm)
    axes, s = _axes_and_sizes(x, s, axes)
    if not axes:
        return _complex(_real(x, "rfftn"))
    out = _r2c(x, axes[-1], s[-1], norm)
    return _c2c(out, s[:-1], axes[:-1], norm, False) if len(axes) > 1 else out


def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    """ifft along all axes but the last, then irfft along the last (its output length is
    s[-1], by default 2 * (m - 1) for an input of length m)."""
    x = _operand(x, norm)
    if s is None:
        axes, s = _axes_and_sizes(x, None, axes)
        s = s[:-1] + (2 * (s[-1] - 1),) if axes else s
    else:
        axes, s = _axes_and_sizes(x, s, axes)
    if not axes:
        return ops.convert(_complex(x), real_dtype(_complex(x).dtype))
    if len(axes) > 1:
        x = _c2c(x, s[:-1], axes[:-1], norm, True)
    return _c2r(x, axes[-1], s[-1], norm)


def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The transform of a signal with Hermitian symmetry, given by its first half: a real
    spectrum."""
    x = _operand(x, norm)
    return _c2r(arrays.conj(_complex(x)), axis, n, ADJOINT_NORM[norm])


def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    x = _operand(x, norm)
    return arrays.conj(_r2c(x, axis, n, ADJOINT_NORM[norm]))


def _frequencies(values, d, dtype):
    dtype = np.dtype(dtype or np.float64)
    if isinstance(d, Tracer):
        return ops.divide(ops.convert(arrays.constant(values), dtype), ops.convert(d, dtype))
    return arrays.constant((values / d).astype(dtype))


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    return _frequencies(np.fft.fftfreq(int(n)), d, dtype)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    return _frequencies(np.fft.rfftfreq(int(n)), d, dtype)


def _shift(x, axes, sign):
    x = ops._check_operand(x)
    axes = tuple(range(np.ndim(x))) if axes is None else \
        (axes,) if isinstance(axes, int) else tuple(axes)
    axes = tuple(_axis(x, a) for a in axes)
    shifts = tuple(sign * (np.shape(x)[a] // 2) for a in axes)
    return arrays.roll(x, shifts, axis=axes) if axes else x


def fftshift(x, /, *, axes=None):
    return _shift(x, axes, 1)


def ifftshift(x, /, *, axes=None):
    return _shift(x, axes, -1)

