"""dloop.jax.function: a dloop loop inside JAX code, differentiated by jax.grad (also under
jax.jit), checked against central finite differences in float64."""

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is not installed")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import dloop as dl  # noqa: E402
import dloop.jax  # noqa: E402
from helpers import assert_close, finite_difference  # noqa: E402

N = np.array([2, 0, 3, 1])


def simulate(x, scale):
    def body(i, v):
        return v * 0.95 + np.sin(v) * scale * 0.1
    return dl.fori_loop(0, N, body, x)


@pytest.mark.parametrize("jit", [False, True])
def test_grad_matches_finite_differences(jit):
    f = dloop.jax.function(simulate)
    x = np.array([0.3, -0.7, 1.1, 0.5])
    scale = np.array([1.0, 0.5, 2.0, 1.5])

    def loss(x, scale):
        return jnp.sum(jnp.tanh(f(x, scale)) * jnp.arange(1.0, 5.0))
    grad = jax.grad(loss, argnums=(0, 1))
    gx, gs = (jax.jit(grad) if jit else grad)(jnp.asarray(x), jnp.asarray(scale))

    def numeric(x, scale):
        return float(np.sum(np.tanh(dl.jit(simulate)(x, scale)) * np.arange(1.0, 5.0)))
    assert_close(np.asarray(gx), finite_difference(lambda x: numeric(x, scale), x), rtol=1e-7,
                 atol=1e-9)
    assert_close(np.asarray(gs), finite_difference(lambda s: numeric(x, s), scale), rtol=1e-7,
                 atol=1e-9)


def test_integer_arguments_get_no_gradient():
    """Trip counts passed as an argument: jax.grad needs a float0 cotangent for them (it
    failed inside the callback)."""
    f = dloop.jax.function(lambda x, n: dl.fori_loop(0, n, lambda i, v: v * x, x * 1.0))
    x, n = jnp.array([1.0, 1.2, 1.3]), jnp.array([0, 1, 2])
    g = jax.grad(lambda x: f(x, n).sum())(x)
    np.testing.assert_allclose(g, (np.asarray(n) + 1) * np.asarray(x) ** np.asarray(n),
                               rtol=1e-14)


def test_numbers_vmap_and_one_output():
    f = dloop.jax.function(lambda x, s: x * s)
    x = jnp.array([1.0, 2.0])
    np.testing.assert_allclose(f(x, 0.5), [0.5, 1.0])
    np.testing.assert_allclose(jax.grad(lambda s: f(x, s).sum())(3.0), 3.0)
    np.testing.assert_allclose(jax.vmap(lambda r: f(r, 2.0))(jnp.ones((2, 3))), 2.0)
    with pytest.raises(dl.DloopTypeError, match="one array"):
        dloop.jax.function(lambda x: (x, x))(x)
    with pytest.raises(dl.DloopNotImplementedError, match="arrays or numbers"):
        dloop.jax.function(lambda x: x)((x, x))


def test_dloop_errors_arrive_as_dloop_errors():
    """An index out of range, found when the callback runs (it arrived as JaxRuntimeError)."""
    f = dloop.jax.function(lambda x: x[np.argmax(x) + 5] * x)
    with pytest.raises(dl.DloopIndexError):
        f(jnp.ones(3))


def test_without_x64_results_are_32_bit():
    table = np.linspace(1.0, 2.0, 4)
    f = dloop.jax.function(lambda x: x * table)
    jax.config.update("jax_enable_x64", False)
    try:
        x = jnp.ones(4)
        assert f(x).dtype == jnp.float32
        np.testing.assert_allclose(jax.grad(lambda x: f(x).sum())(x), table, rtol=1e-6)
    finally:
        jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("transform", ["jvp", "jacfwd", "hessian", "grad of grad"])
def test_forward_mode_and_second_derivatives_are_refused_clearly(transform):
    """They ended in JAX's own TypeError (jvp of a custom_vjp function) or ValueError (pure
    callbacks do not support JVP)."""
    f = dl.jax.function(lambda x: (x ** 3).sum())
    x = jnp.ones(3)
    run = {"jvp": lambda: jax.jvp(f, (x,), (x,)), "jacfwd": lambda: jax.jacfwd(f)(x),
           "hessian": lambda: jax.hessian(f)(x),
           "grad of grad": lambda: jax.grad(lambda y: jax.grad(f)(y).sum())(x)}[transform]
    with pytest.raises(dl.DloopNotImplementedError, match="first derivatives in reverse") as e:
        run()
    assert __file__ in str(e.value)
    np.testing.assert_allclose(np.asarray(jax.grad(f)(x)), 3.0)


def test_complex_gradients_follow_jax_convention():
    """dloop's complex cotangent is PyTorch's (dL/dRe + i dL/dIm), JAX's is its conjugate:
    handed over unconverted, every complex gradient came back conjugated."""
    z, w = jnp.array([1 + 2j, 3 - 1j]), jnp.array([0.5 - 1j, 2 + 0.3j])
    f = dloop.jax.function(lambda z, w: z * z * w)

    def loss(f):
        return lambda z, w: jnp.sum(jnp.abs(f(z, w)) ** 2 + jnp.real(f(z, w)) * 3.0)
    got = jax.grad(loss(f), argnums=(0, 1))(z, w)
    want = jax.grad(loss(lambda z, w: z * z * w), argnums=(0, 1))(z, w)
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-13)


def test_arguments_jax_does_not_differentiate_are_constants():
    """gammainc has no gradient in a: with a held constant, jax.grad in x failed."""
    special = pytest.importorskip("scipy.special")
    a, x = jnp.array([1.5, 2.0, 3.0]), jnp.array([0.5, 1.0, 1.5])
    f = dloop.jax.function(lambda a, x: special.gammainc(a, x))
    g = jax.grad(lambda x: f(a, x).sum())(x)
    np.testing.assert_allclose(g, jax.grad(lambda x: jax.scipy.special.gammainc(a, x).sum())(x),
                               rtol=1e-12)


def test_dloop_errors_in_the_backward_pass_arrive_as_dloop_errors():
    """The backward callback runs inside jax.grad, outside the call: its AdstackOverflowError
    arrived as JaxRuntimeError."""
    f = dloop.jax.function(lambda x: dl.fori_loop(0, np.array([5, 5, 5]),
                                                    lambda i, v: np.sin(v) * 1.1, x).sum())
    dl.config.update("adstack_capacity", 2)
    try:
        with pytest.raises(dl.AdstackOverflowError):
            jax.grad(f)(jnp.ones(3))
    finally:
        dl.config.update("adstack_capacity", None)


@pytest.mark.parametrize("fn, said", [(lambda x: {"a": x}, "{'a': *}"),
                                      (lambda x: (x, x), "(*, *)")])
def test_a_result_that_is_not_one_array_is_refused(fn, said):
    """A one-leaf dict ended in JaxRuntimeError (a TypeError inside the callback)."""
    with pytest.raises(dl.DloopTypeError, match="one array") as e:
        dloop.jax.function(fn)(jnp.ones(2))
    assert said in str(e.value) and __file__ in str(e.value)


def test_keyword_arguments_are_refused_as_by_jit():
    with pytest.raises(dl.DloopTypeError, match="keyword arguments") as e:
        dloop.jax.function(lambda x: x * 2)(x=jnp.ones(2))
    assert __file__ in str(e.value)
