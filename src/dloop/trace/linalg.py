"""STAGE 1 — `xp.linalg`, the array API's linear-algebra extension, whole: compositions of
primitives (cross, vecdot, det up to 3 x 3, trace, diagonal, outer, vector_norm, matrix_norm,
matrix_power, matrix_rank, and the main namespace's matmul, matrix_transpose, tensordot) and
the decompositions, host primitives batched over leading axes with VJPs of their own (svd,
svdvals, eigh, eigvalsh, qr, cholesky, inv, solve, slogdet, pinv; det beyond 3 x 3 through
slogdet). np.linalg's spellings of the same functions are in NUMPY_FUNCTIONS."""

import math
import operator
from collections import namedtuple

import numpy as np

from ..errors import (DloopAttributeError, DloopNotImplementedError, DloopTypeError,
                      DloopValueError)
from . import arrays, indexing, numpy_functions, ops
from ..source import user_location
from .tracer import bind

matmul, matrix_transpose, tensordot = arrays.matmul, arrays.matrix_transpose, arrays.tensordot
outer = numpy_functions.outer


def _at(x, *key):
    """x[..., key]: entries of the last axes."""
    return indexing.getitem(x, (Ellipsis,) + key)


def vecdot(x1, x2, /, *, axis=-1):
    return arrays.vecdot(x1, x2, axis=axis)


def cross(x1, x2, /, *, axis=-1):
    x1, x2 = arrays.broadcast_arrays(ops._check_operand(x1), ops._check_operand(x2))
    if np.shape(x1)[axis] != 3:
        raise DloopValueError("linalg.cross needs vectors of 3 elements along axis",
                              user_location())
    a, b = (arrays.moveaxis(v, axis, -1) for v in (x1, x2))
    parts = [ops.subtract(ops.multiply(_at(a, j), _at(b, k)), ops.multiply(_at(a, k), _at(b, j)))
             for j, k in ((1, 2), (2, 0), (0, 1))]
    return arrays.moveaxis(arrays.stack(parts, axis=-1), -1, axis)


def det(x, /):
    """Closed forms (the cofactor expansion) for 1 x 1 to 3 x 3 matrices, sign * exp(log|det|)
    beyond (its gradient needs the inverse: a singular matrix is an error there)."""
    x = _matrices(x, "det", square=True)
    n = np.shape(x)[-1]
    if n == 0:
        # The empty product: 1 for each 0 x 0 matrix (NumPy's det), in x's dtype.
        return ops.add(ops.sum(x, axis=(-2, -1)), 1)
    if n > 3:
        sign, logabsdet = slogdet(x)
        return ops.multiply(sign, ops.unary("exp", logabsdet))
    if n == 1:
        return _at(x, 0, 0)
    if n == 2:
        return ops.subtract(ops.multiply(_at(x, 0, 0), _at(x, 1, 1)),
                            ops.multiply(_at(x, 0, 1), _at(x, 1, 0)))
    rows = [_at(x, k, slice(None)) for k in range(3)]
    # Not vecdot: it conjugates its first operand, which a complex determinant must not.
    return ops.sum(ops.multiply(rows[0], cross(rows[1], rows[2])), axis=-1)


def diagonal(x, /, *, offset=0):
    rows, cols = np.shape(x)[-2:]
    start, stop = max(0, -offset), min(rows, cols - offset)
    i = np.arange(start, max(start, stop))
    return _at(x, i, i + offset)


def trace(x, /, *, offset=0, dtype=None):
    return ops.sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    a = ops.unary("abs", ops._check_operand(x))
    if ord == math.inf:
        return ops.max(a, axis=axis, keepdims=keepdims)
    if ord == -math.inf:
        return ops.min(a, axis=axis, keepdims=keepdims)
    if ord == 1:
        return ops.sum(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return ops.sum(ops.convert(ops.compare("ne", a, 0), a.dtype), axis=axis, keepdims=keepdims)
    total = ops.sum(ops.power(a, ord), axis=axis, keepdims=keepdims)
    return ops.power(total, 1.0 / ord)


SVDResult = namedtuple("SVDResult", "U S Vh")
EighResult = namedtuple("EighResult", "eigenvalues eigenvectors")
QRResult = namedtuple("QRResult", "Q R")
SlogdetResult = namedtuple("SlogdetResult", "sign logabsdet")

# Decompositions of concrete matrices (constants while tracing) are computed at once.
_NUMPY = {
    "svd": lambda x, full_matrices: tuple(np.linalg.svd(x, full_matrices=full_matrices)),
    "svdvals": lambda x: (np.linalg.svd(x, compute_uv=False),),
    "eigh": lambda x: tuple(np.linalg.eigh(x)),
    "eigvalsh": lambda x: (np.linalg.eigvalsh(x),),
    "inv": lambda x: (np.linalg.inv(x),),
    "solve": lambda a, b: (np.linalg.solve(a, b),),
    "cholesky": lambda x: (np.linalg.cholesky(x),),
    "qr": lambda x, complete: tuple(np.linalg.qr(x, "complete" if complete else "reduced")),
    "slogdet": lambda x: tuple(np.linalg.slogdet(x)),
    "pinv": lambda x, rtol: (np.linalg.pinv(x, rcond=rtol),),
}


def _matrices(x, name, square=False):
    x = ops._check_operand(x)
    shape = np.shape(x)
    if len(shape) < 2 or (square and shape[-1] != shape[-2]):
        raise DloopValueError(f"linalg.{name} needs {'square ' if square else ''}matrices in "
                              f"the last two axes, got shape {shape}: pass an array of shape "
                              f"(..., {'N, N' if square else 'M, N'})", user_location())
    return ops.convert(x, ops._floating(ops.result_dtype(x)))


def _decompose(name, *xs, **params):
    values = [ops._value(x) for x in xs]
    if any(v is None for v in values):
        if any(ops.result_dtype(x).kind == "c" for x in xs):
            # The VJPs of runtime/host_ops.py are written for real matrices (transposes,
            # not conjugate transposes).
            raise DloopNotImplementedError(
                f"linalg.{name} of complex matrices is not supported yet; decompose the real "
                "matrix this complex one is built from, or keep it constant", user_location())
        return bind(ops.P[name], list(xs), params)
    outs = _NUMPY[name](*(np.asarray(v) for v in values), **params)
    return [ops._constant(o) if ops.is_traced(*xs) else o for o in outs]


def svd(x, /, *, full_matrices=True):
    """Batched over leading axes. The gradient is exact for losses that do not depend on the
    arbitrary signs of u and vh where the singular values are distinct; at an exact repeat,
    for the polar factor u @ vh, projectors onto whole groups of repeated values and
    symmetric functions of them, and finite for every loss (runtime/host_ops.py _svd_vjp)."""
    x = _matrices(x, "svd")
    return SVDResult(*_decompose("svd", x, full_matrices=bool(full_matrices)))


def svdvals(x, /):
    return _decompose("svdvals", _matrices(x, "svdvals"))[0]


def eigh(x, /):
    """Eigenvalues in ascending order and eigenvectors of symmetric matrices (NumPy reads the
    lower triangle). The gradient is symmetric, the derivative with respect to x's symmetric
    part; degenerate eigenvalues are treated as in svd."""
    return EighResult(*_decompose("eigh", _matrices(x, "eigh", square=True)))


def eigvalsh(x, /):
    return _decompose("eigvalsh", _matrices(x, "eigvalsh", square=True))[0]


def inv(x, /):
    return _decompose("inv", _matrices(x, "inv", square=True))[0]


def solve(x1, x2, /):
    """x1^-1 x2; x2 is a stack of matrices (..., M, K), or one vector (M,) when 1-d."""
    a, b = _matrices(x1, "solve", square=True), ops._check_operand(x2)
    dt = ops._floating(ops.result_dtype(a, b))
    a, b = ops.convert(a, dt), ops.convert(b, dt)
    vector = np.ndim(b) == 1
    b = ops.reshape(b, (-1, 1)) if vector else b
    if np.ndim(b) < 2 or np.shape(b)[-2] != np.shape(a)[-1]:
        m = np.shape(a)[-1]
        raise DloopValueError(f"linalg.solve: x2 of shape {np.shape(x2)} does not fit "
                              f"matrices of shape {np.shape(a)[-2:]}: pass x2 of shape "
                              f"(..., {m}, K) or ({m},)", user_location())
    x = _decompose("solve", a, b)[0]
    return ops.reshape(x, np.shape(x)[:-1]) if vector else x


def cholesky(x, /, *, upper=False):
    """The lower factor l (x = l l^T), or l^T. The gradient is symmetric, as eigh's."""
    factor = _decompose("cholesky", _matrices(x, "cholesky", square=True))[0]
    return matrix_transpose(factor) if upper else factor


def qr(x, /, *, mode="reduced"):
    """The gradient holds where x has full rank (NumPy's signs are then locally constant)."""
    if mode not in ("reduced", "complete"):
        raise DloopValueError(f"linalg.qr: mode {mode!r} is not 'reduced' or 'complete'",
                              user_location())
    return QRResult(*_decompose("qr", _matrices(x, "qr"), complete=mode == "complete"))


def slogdet(x, /):
    return SlogdetResult(*_decompose("slogdet", _matrices(x, "slogdet", square=True)))


def _cutoff(s, rtol, shape):
    """rtol times the largest singular value; rtol defaults to max(M, N) * eps."""
    if rtol is None:
        rtol = max(shape[-2:]) * np.finfo(s.dtype).eps
    elif np.ndim(rtol) > 0:
        rtol = arrays.expand_dims(ops._check_operand(rtol), -1)
    return ops.multiply(rtol, ops.max(s, axis=-1, keepdims=True))


def pinv(x, /, *, rtol=None):
    """Singular values at or below rtol times the largest count as zero. The gradient holds
    where the rank does not change, repeated singular values included."""
    x = _matrices(x, "pinv")
    rtol = max(np.shape(x)[-2:]) * np.finfo(x.dtype).eps if rtol is None else rtol
    rtol = ops.broadcast_to(ops.convert(ops._check_operand(rtol), x.dtype), np.shape(x)[:-2])
    return _decompose("pinv", x, rtol)[0]


def matrix_rank(x, /, *, rtol=None):
    s = svdvals(x)
    return ops.sum(ops.compare("gt", s, _cutoff(s, rtol, np.shape(x))), axis=-1)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    x = _matrices(x, "matrix_norm")
    if ord == "fro":
        square = arrays.real(ops.multiply(arrays.conj(x), x))        # |x|^2, complex too
        out = ops.unary("sqrt", ops.sum(square, axis=(-2, -1)))
    elif ord in ("nuc", 2, -2):
        s = svdvals(x)
        out = ops.sum(s, axis=-1) if ord == "nuc" else (ops.max if ord == 2 else ops.min)(
            s, axis=-1)
    elif ord in (1, -1, math.inf, -math.inf):
        sums = ops.sum(ops.unary("abs", x), axis=-2 if abs(ord) == 1 else -1)
        out = (ops.max if ord > 0 else ops.min)(sums, axis=-1)
    else:
        raise DloopValueError(f"linalg.matrix_norm: ord {ord!r} is not one of 'fro', 'nuc', "
                              "1, -1, 2, -2, inf, -inf", user_location())
    return ops.reshape(out, np.shape(out) + (1, 1)) if keepdims else out


def matrix_power(x, n, /):
    """By repeated squaring; a negative n inverts first."""
    x = _matrices(x, "matrix_power", square=True)
    try:
        n = operator.index(n)
    except TypeError:
        raise DloopTypeError(f"linalg.matrix_power: the exponent must be a Python integer, got "
                             f"{type(n).__name__}", user_location()) from None
    if n < 0:
        x, n = inv(x), -n
    result = None
    while n:
        if n & 1:
            result = x if result is None else matmul(result, x)
        n >>= 1
        x = matmul(x, x) if n else x
    if result is None:
        return ops.broadcast_to(np.eye(np.shape(x)[-1], dtype=x.dtype), np.shape(x))
    return result


def _np_svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """hermitian only says how NumPy may compute it; the general SVD is the same result."""
    return svd(a, full_matrices=full_matrices) if compute_uv else svdvals(a)


def _np_eigh(name, fn):
    def call(a, UPLO="L"):
        if UPLO != "L":
            raise DloopNotImplementedError(f"np.linalg.{name}(UPLO={UPLO!r}) on traced arrays "
                                           "(the lower triangle is read): pass a symmetric "
                                           "matrix and leave UPLO out", user_location())
        return fn(a)
    return call


def _np_qr(a, mode="reduced"):
    if mode not in ("reduced", "complete"):
        raise DloopNotImplementedError(f"np.linalg.qr(mode={mode!r}) on traced arrays: use "
                                       "mode='reduced' or 'complete'", user_location())
    return qr(a, mode=mode)


def _np_pinv(a, rcond=None, hermitian=False, **kw):
    """NumPy's default cutoff is 1e-15 relative; rtol=None asks for the array API's."""
    return pinv(a, rtol=kw["rtol"] if "rtol" in kw else 1e-15 if rcond is None else rcond)


def _np_matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """tol is an absolute cutoff."""
    if tol is None:
        return matrix_rank(A, rtol=rtol)
    return ops.sum(ops.compare("gt", svdvals(A), tol), axis=-1)


def _np_norm(x, ord=None, axis=None, keepdims=False):
    """Matrix norms other than Frobenius (2-d x, or two axes) go to matrix_norm."""
    x = ops._check_operand(x)
    matrix = (axis is None and np.ndim(x) == 2) or (isinstance(axis, tuple) and len(axis) == 2)
    if not matrix or ord in (None, "fro"):
        return numpy_functions.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    axes = axis or (0, 1)
    out = matrix_norm(arrays.moveaxis(x, axes, (-2, -1)), ord=ord)
    if keepdims:
        shape = [1 if k in {a % np.ndim(x) for a in axes} else d for k, d in
                 enumerate(np.shape(x))]
        out = ops.reshape(out, tuple(shape))
    return out


# np.linalg's spellings of the same functions (trace/numpy_hooks.py adds them to its table).
NUMPY_FUNCTIONS = {
    np.linalg.svd: _np_svd, np.linalg.svdvals: lambda x: svdvals(x),
    np.linalg.eigh: _np_eigh("eigh", eigh), np.linalg.eigvalsh: _np_eigh("eigvalsh", eigvalsh),
    np.linalg.inv: lambda a: inv(a), np.linalg.solve: lambda a, b: solve(a, b),
    np.linalg.cholesky: lambda a, upper=False: cholesky(a, upper=upper),
    np.linalg.qr: _np_qr, np.linalg.slogdet: lambda a: slogdet(a),
    np.linalg.det: lambda a: det(a), np.linalg.pinv: _np_pinv,
    np.linalg.matrix_rank: _np_matrix_rank, np.linalg.norm: _np_norm,
    np.linalg.matrix_norm: lambda x, keepdims=False, ord="fro": matrix_norm(
        x, keepdims=keepdims, ord=ord),
    np.linalg.matrix_power: lambda a, n: matrix_power(a, n),
}


def __getattr__(name):
    raise DloopAttributeError(f"the array API function 'linalg.{name}' is not supported on "
                              "traced arrays yet", user_location())
