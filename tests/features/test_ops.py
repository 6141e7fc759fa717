"""Every supported operation in its three spellings (operators and methods, the array-API
namespace, NumPy functions), against NumPy's own results and, where differentiable, against
central finite differences."""

import array_api_compat
import numpy as np
import pytest

import dloop as dl
from helpers import assert_close, finite_difference

UNARY = {
    # name: (numpy function, array-API name, domain)
    "sin": (np.sin, "sin", (-3, 3)), "cos": (np.cos, "cos", (-3, 3)),
    "tan": (np.tan, "tan", (-1.2, 1.2)), "arcsin": (np.arcsin, "asin", (-0.9, 0.9)),
    "arccos": (np.arccos, "acos", (-0.9, 0.9)), "arctan": (np.arctan, "atan", (-3, 3)),
    "sinh": (np.sinh, "sinh", (-2, 2)), "cosh": (np.cosh, "cosh", (-2, 2)),
    "tanh": (np.tanh, "tanh", (-2, 2)), "exp": (np.exp, "exp", (-2, 2)),
    "expm1": (np.expm1, "expm1", (-2, 2)), "log": (np.log, "log", (0.1, 3)),
    "log1p": (np.log1p, "log1p", (-0.5, 3)), "log2": (np.log2, "log2", (0.1, 3)),
    "log10": (np.log10, "log10", (0.1, 3)), "sqrt": (np.sqrt, "sqrt", (0.1, 3)),
    "square": (np.square, "square", (-2, 2)), "abs": (np.abs, "abs", (-2, 2)),
    "negative": (np.negative, "negative", (-2, 2)),
}
NONDIFF_UNARY = {"sign": (np.sign, "sign"), "floor": (np.floor, "floor"),
                 "ceil": (np.ceil, "ceil")}
BINARY = {
    "add": (np.add, "add", lambda a, b: a + b), "subtract": (np.subtract, "subtract",
                                                            lambda a, b: a - b),
    "multiply": (np.multiply, "multiply", lambda a, b: a * b),
    "divide": (np.divide, "divide", lambda a, b: a / b),
    "power": (np.power, "pow", lambda a, b: a ** b),
    "arctan2": (np.arctan2, "atan2", None), "maximum": (np.maximum, "maximum", None),
    "minimum": (np.minimum, "minimum", None),
    "floor_divide": (np.floor_divide, "floor_divide", lambda a, b: a // b),
    "remainder": (np.remainder, "remainder", lambda a, b: a % b),
}
COMPARE = {"less": lambda a, b: a < b, "less_equal": lambda a, b: a <= b,
           "greater": lambda a, b: a > b, "greater_equal": lambda a, b: a >= b,
           "equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b}


def _x(domain, n=7):
    return np.linspace(domain[0], domain[1], n) + 0.013


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_three_spellings_and_gradient(backend, name):
    np_fn, api_name, domain = UNARY[name]
    x = _x(domain)
    spellings = [np_fn, lambda v: getattr(array_api_compat.array_namespace(v), api_name)(v)]
    for fn in spellings:
        assert_close(dl.jit(fn)(x), np_fn(x), rtol=1e-13)
        g = dl.grad(lambda v: fn(v).sum())(x)
        assert_close(g, finite_difference(lambda v: np_fn(v).sum(), x), rtol=1e-6)


def test_unary_operators(backend):
    x = _x((-2, 2))
    assert_close(dl.jit(lambda v: -v)(x), -x, rtol=0)
    assert_close(dl.jit(lambda v: abs(v))(x), abs(x), rtol=0)
    assert_close(dl.grad(lambda v: abs(-v).sum())(x), np.sign(x), rtol=0)


@pytest.mark.parametrize("name", list(NONDIFF_UNARY))
def test_piecewise_constant_unary(backend, name):
    np_fn, api_name = NONDIFF_UNARY[name]
    x = np.array([-2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7])
    assert_close(dl.jit(np_fn)(x), np_fn(x), rtol=0)
    xp_fn = lambda v: getattr(v.__array_namespace__(), api_name)(v)  # noqa: E731
    assert_close(dl.jit(xp_fn)(x), np_fn(x), rtol=0)
    assert_close(dl.grad(lambda v: np_fn(v).sum())(x), np.zeros_like(x), rtol=0)


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_three_spellings_and_gradient(backend, name):
    np_fn, api_name, operator = BINARY[name]
    a = np.array([0.5, 1.7, 2.3, 0.9, 3.1])
    b = np.array([1.3, 0.6, 2.9, 0.4, 1.1])
    spellings = [np_fn, lambda u, w: getattr(array_api_compat.array_namespace(u), api_name)(u, w)]
    if operator:
        spellings.append(operator)
    for fn in spellings:
        assert_close(dl.jit(fn)(a, b), np_fn(a, b), rtol=1e-13)
        ga, gb = dl.grad(lambda u, w: fn(u, w).sum(), argnums=(0, 1))(a, b)
        assert_close(ga, finite_difference(lambda u: np_fn(u, b).sum(), a), rtol=1e-6)
        assert_close(gb, finite_difference(lambda w: np_fn(a, w).sum(), b), rtol=1e-6)


@pytest.mark.parametrize("name", list(COMPARE))
def test_comparisons(backend, name):
    a = np.array([1.0, 2.0, 3.0, np.nan])
    b = np.array([2.0, 2.0, 1.0, 1.0])
    expected = getattr(np, name)(a, b)
    assert dl.jit(getattr(np, name))(a, b).dtype == np.bool_
    np.testing.assert_array_equal(dl.jit(getattr(np, name))(a, b), expected)
    np.testing.assert_array_equal(dl.jit(COMPARE[name])(a, b), expected)


def test_logical_operations(backend):
    p = np.array([True, True, False, False])
    q = np.array([True, False, True, False])
    for fn in (np.logical_and, np.logical_or, np.logical_xor, lambda u, w: u & w,
               lambda u, w: u | w, lambda u, w: u ^ w):
        np.testing.assert_array_equal(dl.jit(fn)(p, q), fn(p, q))
    np.testing.assert_array_equal(dl.jit(np.logical_not)(p), ~p)
    np.testing.assert_array_equal(dl.jit(lambda u: ~u)(p), ~p)


def test_where_maximum_minimum_clip(backend):
    x = np.linspace(-2, 2, 9) + 0.01
    f = lambda v: np.where(v > 0, v ** 2, np.clip(v, -1.0, 0.5)) + np.maximum(v, 0.3)  # noqa
    assert_close(dl.jit(f)(x), f(x), rtol=1e-14)
    assert_close(dl.grad(lambda v: f(v).sum())(x), finite_difference(lambda v: f(v).sum(), x),
                 rtol=1e-6)


@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "min", "prod"])
def test_reductions_three_spellings(backend, reduction):
    x = np.array([[0.5, -1.2, 2.0], [1.5, 0.7, -0.3]])
    np_fn = getattr(np, reduction)
    for fn in (np_fn, lambda v: getattr(v, reduction)(),
               lambda v: getattr(v.__array_namespace__(), reduction)(v)):
        assert_close(dl.jit(fn)(x), np_fn(x), rtol=1e-14)
        assert_close(dl.grad(lambda v: fn(v))(x), finite_difference(np_fn, x), rtol=1e-6)
    for axis in (0, 1):
        f = lambda v: (np_fn(v, axis=axis, keepdims=True) * v).sum()  # noqa: E731
        assert_close(dl.jit(f)(x), f(x), rtol=1e-14)
        assert_close(dl.grad(f)(x), finite_difference(f, x), rtol=1e-6)


def test_prod_gradient_with_a_zero(backend):
    x = np.array([2.0, 0.0, 3.0, 4.0])
    assert_close(dl.grad(np.prod)(x), [0.0, 24.0, 0.0, 0.0], rtol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_astype_and_promotion(backend, dtype):
    x = np.array([0.0, 1.0, 2.5, -3.5])
    assert dl.jit(lambda v: v.astype(dtype))(x).dtype == dtype
    np.testing.assert_array_equal(dl.jit(lambda v: v.astype(dtype))(x), x.astype(dtype))
    i32 = np.array([1, 2, 3], dtype=np.int32)
    assert dl.jit(lambda v: v + 1)(i32).dtype == np.int32       # Python scalars are weak
    assert dl.jit(lambda v: v * 1.5)(i32).dtype == np.float64
    assert dl.jit(lambda v: v / 2)(i32).dtype == np.float64
    f32 = np.ones(3, np.float32)
    assert dl.jit(lambda v: v * 2.0)(f32).dtype == np.float32
    assert dl.jit(lambda v, w: v + w)(f32, np.ones(3)).dtype == np.float64


def test_integer_division_semantics(backend):
    a = np.array([7, -7, 7, -7, 5], dtype=np.int64)
    b = np.array([2, 2, -2, -2, 0], dtype=np.int64)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(dl.jit(lambda u, w: u // w)(a, b), a // b)
        np.testing.assert_array_equal(dl.jit(lambda u, w: u % w)(a, b), a % b)
    fa, fb = a.astype(float), np.array([2.0, 2.0, -2.0, -2.0, 3.0])
    np.testing.assert_array_equal(dl.jit(lambda u, w: u // w)(fa, fb), fa // fb)
    np.testing.assert_array_equal(dl.jit(lambda u, w: u % w)(fa, fb), fa % fb)


def test_broadcasting_and_gradient_unbroadcast(backend):
    a = np.linspace(0, 1, 6).reshape(2, 3)
    b = np.array([0.5, 1.0, 2.0])
    c = np.array(1.5)
    f = lambda u, w, s: (np.sin(u * w) + s * w).sum()  # noqa: E731
    ga, gb, gc = dl.grad(f, argnums=(0, 1, 2))(a, b, c)
    assert gb.shape == (3,) and np.shape(gc) == ()
    assert_close(ga, finite_difference(lambda u: f(u, b, c), a), rtol=1e-6)
    assert_close(gb, finite_difference(lambda w: f(a, w, c), b), rtol=1e-6)
    assert_close(gc, finite_difference(lambda s: f(a, b, s), c), rtol=1e-6)


def test_static_indexing_and_transpose(backend):
    x = np.arange(12.0).reshape(3, 4)
    f = lambda v: (v[1] * 2.0).sum() + v[:, ::2].sum() + v[0, 3] + v.T[0].sum()  # noqa: E731
    assert_close(dl.jit(f)(x), f(x), rtol=1e-14)
    assert_close(dl.grad(f)(x), finite_difference(f, x), rtol=1e-6)


def test_gather_outside_loops_and_gradient(backend):
    table = np.array([1.0, 2.0, 3.0, 4.0])
    idx = np.array([3, 0, 0, -1])
    f = lambda t: (t[idx] ** 2).sum()  # noqa: E731
    assert_close(dl.jit(lambda t: t[idx])(table), table[idx], rtol=0)
    assert_close(dl.grad(f)(table), finite_difference(f, table), rtol=1e-6)


def test_gather_from_a_table_computed_just_before(backend):
    # The table is made by an elementwise op of the same shape as the gather: the gather
    # must read the finished array, not one element of it.
    x = np.arange(5.0)
    idx = np.array([4, 3, 2, 1, 0])
    f = lambda v: ((v * 2.0)[idx] + v) ** 2  # noqa: E731
    assert_close(dl.jit(f)(x), f(x), rtol=0)
    assert_close(dl.grad(lambda v: f(v).sum())(x), finite_difference(lambda v: f(v).sum(), x),
                 rtol=1e-6)


def test_hypot_of_an_infinite_operand_is_infinite(backend):
    """IEEE 754 and NumPy: hypot(inf, nan) is inf."""
    a = np.array([np.inf, np.inf, -np.inf, np.nan, 3.0, 0.0])
    b = np.array([np.nan, np.inf, np.inf, -np.inf, 4.0, 0.0])
    np.testing.assert_array_equal(dl.jit(np.hypot)(a, b), np.hypot(a, b))
