"""One test per user error about how dloop is called (arguments, cotangents, auxiliary
outputs, nesting, dtypes, loop functions): its class, that the message names the line of
this file that caused it and says what to do, and that the next call still works."""

import numpy as np
import pytest

import dloop as dl
from helpers import assert_close, error_checker

X = np.linspace(0.1, 1.0, 4)
N = np.array([1, 2, 3, 4])


check = error_checker(__file__)


def test_argnums_of_the_wrong_type(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda x: x.sum(), argnums=1.0)  # E-argnums-type
    check(e, dl.DloopTypeError, "E-argnums-type", "argnums", "1.0", "tuple of ints")


def test_retrace_that_is_not_a_bool(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda x: x.sum(), retrace="no")  # E-retrace
    check(e, dl.DloopTypeError, "E-retrace", "retrace must be True or False", "'no'")
    with pytest.raises(dl.DloopTypeError) as e:
        dl.jit(lambda x: x, retrace=None)  # E-retrace-jit
    check(e, dl.DloopTypeError, "E-retrace-jit", "jit's retrace", "None")


def test_gradient_with_respect_to_an_integer_array(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda x: (x * 1.5).sum())(np.arange(4, dtype=np.int32))  # E-grad-int-array
    check(e, dl.DloopTypeError, "E-grad-int-array", "args[0]", "int32", "float")
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda p: p["w"].sum() * 2.0)({"w": 3})  # E-grad-int-leaf
    check(e, dl.DloopTypeError, "E-grad-int-leaf", "args[0]['w']", "int64", "float")


@pytest.mark.parametrize("kind", ["object", "datetime", "masked"])
def test_gradient_with_respect_to_a_value_dloop_does_not_compute_in(backend, kind):
    """Not a float, but not a value to leave out of argnums either: the conversion's own
    error, which says what to pass instead."""
    value, phrase = {"object": (np.array([1.0, 2.0], dtype=object), "dtype object"),
                     "datetime": (np.array(["2020-01-01"], "datetime64[D]"), "datetime64"),
                     "masked": (np.ma.masked_array(N, mask=[0, 1, 0, 0]), "masked array")}[kind]
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda x: (x * 1.5).sum())(value)  # E-grad-unsupported
    check(e, dl.DloopTypeError, "E-grad-unsupported", "args[0]", phrase)
    assert "argnums" not in str(e.value)


def test_grad_of_a_non_function(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(5)  # E-grad-int
    check(e, dl.DloopTypeError, "E-grad-int", "needs a function", "5")


def test_string_cotangent(backend):
    _, pullback = dl.vjp(lambda x: x * 2.0, X)
    with pytest.raises(dl.DloopTypeError) as e:
        pullback("abc")  # E-ct-str
    check(e, dl.DloopTypeError, "E-ct-str", "cotangent", "str")


def test_complex_cotangent(backend):
    _, pullback = dl.vjp(lambda x: x * 2.0, X)
    with pytest.raises(dl.DloopTypeError) as e:
        pullback(np.ones(4) * 1j)  # E-ct-complex
    check(e, dl.DloopTypeError, "E-ct-complex", "complex", "imaginary", "real float64")


def test_cotangent_of_the_wrong_shape(backend):
    _, pullback = dl.vjp(lambda x: x * 2.0, X)
    with pytest.raises(dl.DloopValueError) as e:
        pullback(np.ones(3))  # E-ct-shape
    check(e, dl.DloopValueError, "E-ct-shape", "(3,)", "(4,)")


def test_vjp_has_aux_on_a_single_output(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.vjp(lambda x: x * 2.0, X, has_aux=True)  # E-vjp-aux
    check(e, dl.DloopTypeError, "E-vjp-aux", "has_aux=True", "pair")


def test_grad_of_a_pair_without_has_aux(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda x: ((x * x).sum(), x))(X)  # E-aux
    check(e, dl.DloopTypeError, "E-aux", "has_aux=True", "tuple of 2")


def test_grad_with_has_aux_returns_the_aux(backend):
    g, aux = dl.grad(lambda x: ((x * x).sum(), x * 3.0), has_aux=True)(X)
    np.testing.assert_allclose(g, 2 * X)         # closed form
    np.testing.assert_allclose(aux, 3 * X)


def test_grad_of_grad(backend):
    inner = dl.grad(lambda y: (y * y * y).sum())
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.grad(lambda x: inner(x).sum())(X)  # E-nested
    check(e, dl.DloopNotImplementedError, "E-nested", "not supported yet", "outside")


def test_jit_inside_grad_joins_the_trace(backend):
    inner = dl.jit(lambda y: (y * y * y).sum())
    g = dl.grad(lambda x: inner(x) * 2.0)(X)
    np.testing.assert_allclose(g, 6 * X ** 2)     # closed form


def test_float16_input(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda x: (x * x).sum())(X.astype(np.float16))  # E-float16
    check(e, dl.DloopTypeError, "E-float16", "float16", "float32, float64", ".astype")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.uint32,
                                   np.uint64])
def test_small_and_unsigned_integer_bounds_are_accepted(backend, dtype):
    n = N.astype(dtype)
    g = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 2.0, x).sum())(X)
    np.testing.assert_allclose(g, 2.0 ** N)       # closed form
    g = dl.grad(lambda x: dl.fori_loop(dtype(1), dtype(3), lambda i, v: v * 1.5, x).sum())(X)
    np.testing.assert_allclose(g, np.full(4, 1.5 ** 2))
    out = dl.jit(lambda x, n: dl.fori_loop(0, n, lambda i, v: v * 2.0, x))(X, n)
    np.testing.assert_allclose(out, X * 2.0 ** N)


def test_uint64_bound_past_int64(backend):
    with pytest.raises(dl.DloopValueError) as e:
        dl.fori_loop(0, np.full(4, 2 ** 64 - 1, np.uint64), lambda i, v: v, X)  # E-u64
    check(e, dl.DloopValueError, "E-u64", "64-bit", "2**63 - 1")


def test_python_bound_past_int64(backend):
    with pytest.raises(dl.DloopValueError) as e:
        dl.fori_loop(0, 2 ** 70, lambda i, v: v, X)  # E-big-int
    check(e, dl.DloopValueError, "E-big-int", "64-bit")


def test_item_in_a_body(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, 3, lambda i, v: v * v.sum().item(), X)  # E-item
    check(e, dl.DloopTypeError, "E-item", "Python number", "np.where")


def test_body_with_the_wrong_number_of_parameters(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, N, lambda v: v * 2.0, X)  # E-arity
    check(e, dl.DloopTypeError, "E-arity", "body_fun", "body_fun(i, carry)")
    with pytest.raises(dl.DloopTypeError) as e:
        dl.while_loop(lambda v: v > 2.0, lambda i, v: v * 0.5, X)  # E-arity-while
    check(e, dl.DloopTypeError, "E-arity-while", "body_fun(carry)")


def test_python_float_for_an_integer_carry(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, 3, lambda i, c: (c[0] * 2.0, 0.5), (X, 1))  # E-int-carry
    check(e, dl.DloopTypeError, "E-int-carry", "0.5", "carry[1]", "int64")


def test_python_int_for_a_float_carry_is_fine(backend):
    out = dl.fori_loop(0, 3, lambda i, c: (c[0] * 2.0, 7), (X, 1.5))
    np.testing.assert_allclose(out[0], X * 8.0)
    assert out[1] == 7.0 and out[1].dtype == np.float64


def test_cond_returning_a_python_bool(backend):
    steps = []

    def cond(v):
        steps.append(1)
        return len(steps) < 3
    with pytest.raises(dl.DloopTypeError) as e:
        dl.while_loop(cond, lambda v: v * 0.5, X)  # E-cond-python
    check(e, dl.DloopTypeError, "E-cond-python", "traces cond_fun once", "carry")


def test_bad_max_steps(backend):
    with pytest.raises(dl.DloopValueError) as e:
        dl.while_loop(lambda v: v > 2.0, lambda v: v * 0.5, X, max_steps=-1)  # E-max-steps
    check(e, dl.DloopValueError, "E-max-steps", "max_steps", "non-negative int")


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "jit"])
def test_keyword_arguments(backend, transform):
    def loss(x, scale=1.0):
        return (x * scale).sum()
    wrapped = getattr(dl, transform)(loss)
    with pytest.raises(dl.DloopTypeError) as e:
        wrapped(X, scale=2.0)  # E-kwargs
    check(e, dl.DloopTypeError, "E-kwargs", "keyword arguments (scale)", "functools.partial")


def test_cotangent_of_another_structure(backend):
    _, pullback = dl.vjp(lambda x: {"pos": x * 2.0, "vel": x * 3.0}, X)
    with pytest.raises(dl.DloopTypeError) as e:
        pullback((X, X))  # E-ct-structure
    check(e, dl.DloopTypeError, "E-ct-structure", "structure of the function's output")
    assert_close(pullback({"vel": np.ones(4), "pos": np.zeros(4)})[0], np.full(4, 3.0),
                 rtol=0)


@pytest.mark.parametrize("kind", ["masked array", "np.matrix"])
def test_numpy_subclasses_whose_meaning_would_be_dropped(backend, kind):
    """A masked array's mask (its masked values were computed with) and np.matrix's
    product were silently dropped by the conversion to a plain array."""
    value = np.ma.masked_array(X, mask=[0, 1, 0, 0]) if kind == "masked array" \
        else np.matrix(X)
    with pytest.raises(dl.DloopTypeError) as e:
        dl.jit(lambda v: v * 2.0)(value)  # E-subclass-arg
    check(e, dl.DloopTypeError, "E-subclass-arg", kind, "args[0]")
    with pytest.raises(dl.DloopTypeError) as e:
        dl.jit(lambda v: v * value)(X)  # E-subclass-const
    check(e, dl.DloopTypeError, "E-subclass-const", kind, "captured")
