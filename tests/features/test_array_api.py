"""Every function the coverage table lists as supported, called through the namespace of a
traced array, against NumPy; differentiable ones also against finite differences."""

import pathlib
import sys

import numpy as np
import pytest

import dloop as dl
from dloop.trace import array_api
from helpers import assert_close, finite_difference

TOOLS = pathlib.Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
import array_api_coverage as coverage  # noqa: E402

A = np.array([[0.3, -1.2, 2.1], [1.5, 0.7, -0.4]])
B = np.array([[0.9, 0.4, -0.6], [-1.1, 0.2, 1.3]])
P = np.abs(A) + 0.5                       # positive
U = np.array([[0.3, -0.6, 0.2], [0.5, -0.1, 0.7]])   # inside (-1, 1)
I = np.array([[3, -2, 7], [0, 5, -1]])
K = np.array([[1, 2, 0], [3, 1, 2]])
M = np.array([[1.0, 2.0], [0.5, -1.0], [0.3, 0.4]])
V = np.array([0.5, -1.0, 2.0])

# name: (arguments, NumPy reference, positions of float arguments to differentiate)
CASES = {
    "abs": ((A,), np.abs, [0]), "acos": ((U,), np.arccos, [0]), "acosh": ((P + 1,), np.arccosh, [0]),
    "add": ((A, B), np.add, [0, 1]), "asin": ((U,), np.arcsin, [0]),
    "asinh": ((A,), np.arcsinh, [0]), "atan": ((A,), np.arctan, [0]),
    "atan2": ((A, B), np.arctan2, [0, 1]), "atanh": ((U,), np.arctanh, [0]),
    "bitwise_and": ((I, K), np.bitwise_and, []), "bitwise_left_shift": ((I, K), np.left_shift, []),
    "bitwise_invert": ((I,), np.invert, []), "bitwise_or": ((I, K), np.bitwise_or, []),
    "bitwise_right_shift": ((I, K), np.right_shift, []), "bitwise_xor": ((I, K), np.bitwise_xor, []),
    "ceil": ((A,), np.ceil, []), "clip": ((A, -0.5, 1.0), np.clip, [0]),
    "conj": ((A,), np.conj, [0]), "copysign": ((A, B), np.copysign, [0]),
    "cos": ((A,), np.cos, [0]), "cosh": ((A,), np.cosh, [0]), "divide": ((A, P), np.divide, [0, 1]),
    "equal": ((A, np.round(A)), np.equal, []), "exp": ((A,), np.exp, [0]),
    "expm1": ((A,), np.expm1, [0]), "floor": ((A,), np.floor, []),
    "floor_divide": ((A, P), np.floor_divide, []), "greater": ((A, B), np.greater, []),
    "greater_equal": ((A, B), np.greater_equal, []), "hypot": ((A, B), np.hypot, [0, 1]),
    "imag": ((A,), np.imag, []), "isfinite": ((A / np.array([1, 0, 1]),), np.isfinite, []),
    "isinf": ((A / np.array([1, 0, 1]),), np.isinf, []),
    "isnan": ((np.array([0.0, np.nan, 1.0]),), np.isnan, []), "less": ((A, B), np.less, []),
    "less_equal": ((A, B), np.less_equal, []), "log": ((P,), np.log, [0]),
    "log1p": ((P,), np.log1p, [0]), "log2": ((P,), np.log2, [0]), "log10": ((P,), np.log10, [0]),
    "logaddexp": ((A, B), np.logaddexp, [0, 1]),
    "logical_and": ((A > 0, B > 0), np.logical_and, []), "logical_not": ((A > 0,), np.logical_not, []),
    "logical_or": ((A > 0, B > 0), np.logical_or, []),
    "logical_xor": ((A > 0, B > 0), np.logical_xor, []), "maximum": ((A, B), np.maximum, [0, 1]),
    "minimum": ((A, B), np.minimum, [0, 1]), "multiply": ((A, B), np.multiply, [0, 1]),
    "negative": ((A,), np.negative, [0]), "not_equal": ((A, B), np.not_equal, []),
    "positive": ((A,), np.positive, [0]), "pow": ((P, B), np.power, [0, 1]),
    "real": ((A,), np.real, [0]), "remainder": ((A, P), np.remainder, [0]),
    "round": ((A * 3,), np.round, []), "sign": ((A,), np.sign, []),
    "signbit": ((np.array([-0.0, 0.0, -2.0]),), np.signbit, []), "sin": ((A,), np.sin, [0]),
    "sinh": ((A,), np.sinh, [0]), "square": ((A,), np.square, [0]), "sqrt": ((P,), np.sqrt, [0]),
    "subtract": ((A, B), np.subtract, [0, 1]), "tan": ((U,), np.tan, [0]),
    "tanh": ((A,), np.tanh, [0]), "trunc": ((A * 3,), np.trunc, []),
    # creation
    "asarray": ((A,), np.asarray, [0]), "empty_like": ((A,), lambda a: np.zeros_like(a), []),
    "full_like": ((A, 2.5), np.full_like, []), "ones_like": ((A,), np.ones_like, []),
    "zeros_like": ((A,), np.zeros_like, []), "tril": ((M @ M.T,), np.tril, [0]),
    "triu": ((M @ M.T,), np.triu, [0]),
    "meshgrid": ((V, A[0]), lambda a, b: np.stack(np.meshgrid(a, b)), [0, 1]),
    # manipulation
    "broadcast_arrays": ((V, A), lambda a, b: np.stack(np.broadcast_arrays(a, b)), [0, 1]),
    "broadcast_to": ((V, (2, 3)), np.broadcast_to, [0]),
    "concat": (([A, B],), lambda xs: np.concatenate(xs), [0]),
    "expand_dims": ((A, 1), np.expand_dims, [0]), "flip": ((A,), np.flip, [0]),
    "moveaxis": ((A[None], 0, 2), np.moveaxis, [0]),
    "permute_dims": ((A, (1, 0)), np.transpose, [0]), "repeat": ((A, 2), np.repeat, [0]),
    "reshape": ((A, (3, 2)), np.reshape, [0]), "roll": ((A, 2), np.roll, [0]),
    "squeeze": ((A[None], 0), np.squeeze, [0]), "stack": (([A, B], 1), np.stack, [0]),
    "tile": ((V, (2, 2)), np.tile, [0]),
    "unstack": ((A,), lambda a: np.stack(list(a)), [0]),
    # searching
    "argmax": ((A, 1), np.argmax, []), "argmin": ((A, 0), np.argmin, []),
    "count_nonzero": ((I,), np.count_nonzero, []),
    "searchsorted": ((np.sort(V), A), np.searchsorted, []),
    "where": ((A > 0, A, B), np.where, [1, 2]),
    # statistics
    "cumulative_sum": ((A, 1), lambda a, axis: np.cumsum(a, axis=axis), [0]),
    "max": ((A,), np.max, [0]), "mean": ((A,), np.mean, [0]), "min": ((A,), np.min, [0]),
    "prod": ((A,), np.prod, [0]), "std": ((A,), np.std, [0]), "sum": ((A,), np.sum, [0]),
    "var": ((A,), np.var, [0]),
    # indexing, sorting, utilities and 2024.12's additions
    "take": ((A, np.array([4, 0, 2])), lambda a, i: np.take(a, i), [0]),
    "take_along_axis": ((A, np.argsort(A, axis=1)), lambda a, i: np.take_along_axis(a, i, -1),
                        [0]),
    "argsort": ((np.array([[0.3, 0.1, 0.3], [2.0, -1.0, 2.0]]),),
                lambda a: np.argsort(a, kind="stable"), []),
    "sort": ((A,), np.sort, [0]), "any": ((A > 1.0,), np.any, []),
    "all": ((A > -2.0,), np.all, []), "diff": ((A,), np.diff, [0]),
    "cumulative_prod": ((V,), np.cumprod, [0]), "reciprocal": ((P,), np.reciprocal, [0]),
    "nextafter": ((A, B), np.nextafter, [0]), "astype": ((I, np.float64), np.asarray, []),
    # linear algebra
    "matmul": ((A, M), np.matmul, [0, 1]), "matrix_transpose": ((A,), np.transpose, [0]),
    "tensordot": ((A, M, 1), np.tensordot, [0, 1]),
    "vecdot": ((A, B), lambda a, b: np.sum(a * b, axis=-1), [0, 1]),
}
CONSTANTS = {"arange": (3, 11, 2), "linspace": (0.0, 1.0, 5), "eye": (3,), "zeros": ((2, 3),),
             "ones": ((2, 3),), "full": ((2, 3), 1.5), "empty": ((2, 3),)}


def _call(name, args, traced):
    """xp.name(*args) with the array arguments at positions `traced` replaced by tracers."""
    def fn(*arrays):
        it = iter(arrays)
        full = [next(it) if k in traced else a for k, a in enumerate(args)]
        out = getattr(arrays[0].__array_namespace__(), name)(*full)
        return array_api.stack(out) if isinstance(out, (list, tuple)) else out
    return fn


def _arrays(args):
    return [k for k, a in enumerate(args) if isinstance(a, np.ndarray)]


def test_every_supported_function_has_a_case():
    listed = {n for names in coverage.SECTIONS.values() for n in names.split()}
    supported = {n for n in listed if coverage.supported(n)}
    assert supported == set(CASES) | set(CONSTANTS) | coverage.NOT_ARRAY_FUNCTIONS


def test_coverage_table_is_current():
    path = TOOLS.parent / "docs" / "array_api_coverage.md"
    assert path.read_text() == coverage.table(), "run python tools/array_api_coverage.py"


@pytest.mark.parametrize("name", sorted(CASES))
def test_function_matches_numpy(backend, name):
    args, reference, diff = CASES[name]
    if name in ("concat", "stack"):
        fn = lambda a, b: getattr(a.__array_namespace__(), name)([a, b], *args[1:])  # noqa
        arrays = list(args[0])
    else:
        traced = _arrays(args)
        fn = _call(name, args, traced)
        arrays = [args[k] for k in traced]
    expected = reference(*args)
    got = dl.jit(fn)(*arrays)
    assert np.shape(got) == np.shape(expected)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)
    positions = [k for k in diff if k < len(arrays)] if name not in ("concat", "stack") else [0, 1]
    if not positions:
        return
    weights = np.cos(np.arange(np.size(expected)).reshape(np.shape(expected)) + 0.5)

    def loss(*xs):
        return (fn(*xs) * weights).sum()

    grads = dl.grad(loss, argnums=tuple(positions))(*arrays)
    for g, k in zip(grads, positions):
        def numeric(x, k=k):
            xs = list(arrays)
            xs[k] = x
            return (reference(*_rebuild(name, args, xs)) * weights).sum()
        assert_close(g, finite_difference(numeric, arrays[k]), rtol=1e-6, atol=1e-8)


def _rebuild(name, args, arrays):
    if name in ("concat", "stack"):
        return [list(arrays)] + list(args[1:])
    it = iter(arrays)
    traced = _arrays(args)
    return [next(it) if k in traced else a for k, a in enumerate(args)]


@pytest.mark.parametrize("name", sorted(CONSTANTS))
def test_creation_without_arrays(backend, name):
    expected = getattr(np, name)(*CONSTANTS[name]) if name != "empty" else np.zeros((2, 3))
    got = dl.jit(lambda x: getattr(x.__array_namespace__(), name)(*CONSTANTS[name]) + x * 0)(
        np.zeros(()))
    np.testing.assert_array_equal(got, expected)


def test_unsupported_function_names_itself(backend):
    with pytest.raises(dl.DloopNotImplementedError, match="'nonzero'"):
        dl.jit(lambda x: x.__array_namespace__().nonzero(x))(A)


def test_missing_name_is_an_attribute_error(backend):
    """Libraries probe the namespace with hasattr (SciPy: hasattr(xp, 'fft'))."""
    def probe(x):
        xp = x.__array_namespace__()
        assert not hasattr(xp, "nonzero") and hasattr(xp, "special") and hasattr(xp, "fft")
        with pytest.raises(AttributeError, match="'unique_values'"):
            xp.unique_values(x)
        return x
    dl.jit(probe)(A)


def test_standard_semantics_numpy_leaves_open():
    """Each once wrong: roll with an axis named twice (a shift was dropped), broadcast_to a
    smaller shape (truncated), clip by wider bounds and tril/triu of bools (dtype changed),
    asarray of a Python scalar (not updatable), reshape(copy=)."""
    def f(x):
        xp = x.__array_namespace__()
        v = xp.arange(5.0) + x[0, 0] * 0
        total = xp.asarray(0.0)
        total += x[1, 2]
        return (xp.roll(v, (1, 1), axis=(0, 0)), xp.roll(x, (1, 2), axis=(1, -1)),
                xp.clip(x.astype(np.float32), xp.asarray([-0.5, 0.0, 0.5])),
                xp.tril(x > 0), xp.triu(x > 0, 1), total, xp.reshape(x, (3, 2), copy=True))
    got = dl.jit(f)(A)
    want = (np.roll(np.arange(5.0), 2), np.roll(A, 3, axis=1),
            np.clip(A.astype(np.float32), np.float32([-0.5, 0.0, 0.5]), None),
            np.tril(A > 0), np.triu(A > 0, 1), A[1, 2], A.reshape(3, 2))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype
    for bad in (lambda x, xp: xp.broadcast_to(x, (3,)), lambda x, xp: xp.broadcast_to(x, (1, 3)),
                lambda x, xp: xp.roll(x, (1, 2), axis=1)):
        with pytest.raises(dl.DloopValueError, match="test_array_api.py"):
            dl.jit(lambda x: bad(x, x.__array_namespace__()))(A)


@pytest.mark.parametrize("call", [
    lambda xp, x: xp.squeeze(x, axis=5), lambda xp, x: xp.flip(x, axis=5),
    lambda xp, x: xp.concat([]), lambda xp, x: xp.stack([]), lambda xp, x: xp.eye(-1),
    lambda xp, x: xp.broadcast_arrays(x, x[0, :2]), lambda xp, x: xp.repeat(x, -1),
    lambda xp, x: x[::0], lambda xp, x: -(x > 0), lambda xp, x: (x > 0) ** (x > 1),
    lambda xp, x: np.square(x > 0),
])
def test_refused_arguments_are_dloop_errors_naming_the_line(call):
    """Arguments NumPy's helpers refuse inside dloop's functions came out as their raw
    ValueError / IndexError / TypeError, naming no line of the user's."""
    line = call.__code__.co_firstlineno
    with pytest.raises(dl.DloopError, match=rf"test_array_api.py:{line}"):
        dl.jit(lambda x: call(x.__array_namespace__(), x))(A)


def test_the_user_s_own_errors_pass_unchanged():
    def f(x):
        raise ValueError("mine")
    with pytest.raises(ValueError, match="^mine$") as e:
        dl.jit(f)(A)
    assert not isinstance(e.value, dl.DloopError)


def test_missing_ndarray_method_is_a_dloop_attribute_error():
    with pytest.raises(dl.DloopAttributeError, match=r"(?s)'view'.*test_array_api.py"):
        dl.jit(lambda x: x.view(np.float64))(A)
    assert not dl.jit(lambda x: x * hasattr(x, "view"))(A).any()


def test_numpy_reductions_accumulate_in_the_dtype_given():
    b, i = A > 0, np.array([[3, -8, 1], [7, 2, -3]], np.int32)

    def f(b, i):
        return (np.sum(b, axis=0, dtype=bool), np.mean(i, dtype=np.int64),
                np.sum(i, dtype=np.int32), np.prod(i, axis=1, dtype=np.int32), i < 2 ** 40,
                i == 2 ** 70, np.argsort(i[0], stable=True), i.astype(np.int64) < 2 ** 63,
                i.astype(np.int64) > -2 ** 63 - 1)
    for got, want in zip(dl.jit(f)(b, i), f(b, i)):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


@pytest.mark.parametrize("call", [
    lambda x: np.tile(x, np.array(2)), lambda x: np.tile(x, np.int64(2)),
    lambda x: np.tile(x, (np.int64(2), 1)), lambda x: np.repeat(x, np.int64(2)),
    lambda x: np.repeat(x, np.array(2), axis=0)])
def test_counts_as_numpy_integers_and_0d_arrays(call):
    """np.tile(x, np.array(2)) ended in 'iteration over a 0-d array', np.repeat refused a
    NumPy integer as per-element counts."""
    np.testing.assert_array_equal(dl.jit(call)(A), call(A))
