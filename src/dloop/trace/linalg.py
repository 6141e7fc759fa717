"""STAGE 1 — `xp.linalg`, the array API's linear-algebra extension, in part: what needs no
decomposition (cross, vecdot, det of matrices up to 3 x 3, trace, diagonal, outer, vector_norm,
and the main namespace's matmul, matrix_transpose, tensordot). svd, eigh, qr, cholesky, inv
and solve are not here, so `hasattr(xp.linalg, "svd")` is False."""

import math
from collections import namedtuple

import numpy as np

from ..errors import DloopAttributeError, DloopNotImplementedError, DloopValueError
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
    """Closed forms (the cofactor expansion) for 1 x 1 to 3 x 3 matrices."""
    n = np.shape(x)[-1]
    if np.ndim(x) < 2 or np.shape(x)[-2] != n:
        raise DloopValueError(f"linalg.det needs square matrices, got shape {np.shape(x)}",
                              user_location())
    if n > 3:
        raise DloopNotImplementedError("linalg.det of matrices larger than 3 x 3 on traced "
                                       "arrays (it needs an LU decomposition)", user_location())
    if n == 1:
        return _at(x, 0, 0)
    if n == 2:
        return ops.subtract(ops.multiply(_at(x, 0, 0), _at(x, 1, 1)),
                            ops.multiply(_at(x, 0, 1), _at(x, 1, 0)))
    rows = [_at(x, k, slice(None)) for k in range(3)]
    return vecdot(rows[0], cross(rows[1], rows[2]))


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
    total = ops.sum(ops.power(a, ord), axis=axis, keepdims=keepdims)
    return ops.power(total, 1.0 / ord)


SVDResult = namedtuple("SVDResult", "U S Vh")
EighResult = namedtuple("EighResult", "eigenvalues eigenvectors")

# Decompositions of concrete matrices (constants while tracing) are computed at once.
_NUMPY = {
    "svd": lambda x, full_matrices: tuple(np.linalg.svd(x, full_matrices=full_matrices)),
    "svdvals": lambda x: (np.linalg.svd(x, compute_uv=False),),
    "eigh": lambda x: tuple(np.linalg.eigh(x)),
    "eigvalsh": lambda x: (np.linalg.eigvalsh(x),),
}


def _matrices(x, name, square=False):
    x = ops._check_operand(x)
    shape = np.shape(x)
    if len(shape) < 2 or (square and shape[-1] != shape[-2]):
        raise DloopValueError(f"linalg.{name} needs {'square ' if square else ''}matrices in "
                              f"the last two axes, got shape {shape}", user_location())
    return ops.convert(x, ops._floating(ops.result_dtype(x)))


def _decompose(name, x, **params):
    value = ops._value(x)
    if value is None:
        return bind(ops.P[name], [x], params)
    outs = _NUMPY[name](np.asarray(value), **params)
    return [ops._constant(o) if ops.is_traced(x) else o for o in outs]


def svd(x, /, *, full_matrices=True):
    """Batched over leading axes. The gradient is exact for losses that do not depend on the
    arbitrary signs and bases of u and vh (at repeated singular values); see
    runtime/host_ops.py _svd_vjp for what it means at an exact repeat."""
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


# np.linalg's spellings of the same functions (trace/numpy_hooks.py adds them to its table).
NUMPY_FUNCTIONS = {np.linalg.svd: _np_svd, np.linalg.svdvals: lambda x: svdvals(x),
                   np.linalg.eigh: _np_eigh("eigh", eigh),
                   np.linalg.eigvalsh: _np_eigh("eigvalsh", eigvalsh)}


def __getattr__(name):
    raise DloopAttributeError(f"the array API function 'linalg.{name}' is not supported on "
                              "traced arrays yet", user_location())
