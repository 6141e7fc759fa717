"""Long, skewed loops with no configuration, against hand-written NumPy adjoints."""

import numpy as np

import dloop as dl
from helpers import tape_slots


def _trips(rng, size, longest):
    n = rng.integers(0, 20, size=size)
    n[rng.choice(size, 5, replace=False)] = longest       # a long tail
    n[:3] = 0
    return n


def numpy_damped_sine_adjoint(x, n):
    """Gradient of sum(v_final) for v <- 0.95 v + 0.1 x sin(v), n[j] steps, written by hand:
    a masked forward keeping every iterate, then the reverse recurrence."""
    v = x.copy()
    history = []
    for i in range(int(n.max())):
        history.append(v)
        v = np.where(i < n, v * 0.95 + np.sin(v) * x * 0.1, v)
    v_bar = np.ones_like(x)
    x_bar = np.zeros_like(x)
    for i in reversed(range(int(n.max()))):
        v_i = history[i]
        active = i < n
        x_bar += np.where(active, v_bar * np.sin(v_i) * 0.1, 0.0)
        v_bar = np.where(active, v_bar * (0.95 + np.cos(v_i) * x * 0.1), v_bar)
    return x_bar + v_bar


def test_fori_with_5000_trips(backend):
    rng = np.random.default_rng(10)
    x = rng.random(64)
    n = _trips(rng, 64, 5000)
    g = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1,
                                       x).sum())(x)
    np.testing.assert_allclose(g, numpy_damped_sine_adjoint(x, n), rtol=0, atol=1e-9)
    assert dl.memory_stats()["adstack_bytes_used"] == tape_slots(backend, n)[0] * 8


def test_while_with_3000_trips(backend):
    # v <- v - rate * (v - target) + 0.01 sin(v) until v is within 1e-3 of `target`; slow rates
    # give long loops. Gradient of sum(v_final) with respect to the rates.
    rng = np.random.default_rng(11)
    target = 0.5
    v0 = np.full(40, 3.0)
    rate = rng.uniform(0.05, 0.5, size=40)
    rate[:4] = 2.5 / 3000            # about 3000 steps

    def solve(rate):
        return dl.while_loop(lambda v: np.abs(v - target) > 1e-3,
                             lambda v: v - rate * (v - target) + 0.001 * np.sin(v) * rate, v0)

    g = dl.grad(lambda r: solve(r).sum())(rate)
    v, history, active = v0.copy(), [], []
    while True:
        live = np.abs(v - target) > 1e-3
        if not live.any():
            break
        history.append(v)
        active.append(live)
        v = np.where(live, v - rate * (v - target) + 0.001 * np.sin(v) * rate, v)
    trips = np.sum(active, axis=0)
    assert trips.max() >= 2900
    v_bar, r_bar = np.ones_like(v), np.zeros_like(v)
    for v_i, live in zip(reversed(history), reversed(active)):
        r_bar += np.where(live, v_bar * (-(v_i - target) + 0.001 * np.sin(v_i)), 0.0)
        v_bar = np.where(live, v_bar * (1 - rate + 0.001 * np.cos(v_i) * rate), v_bar)
    np.testing.assert_allclose(g, r_bar, rtol=0, atol=1e-9)
    assert dl.memory_stats()["adstack_bytes_used"] == tape_slots(backend, trips)[0] * 8
