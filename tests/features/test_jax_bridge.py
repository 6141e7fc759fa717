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
