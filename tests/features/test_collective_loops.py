"""Collective loops (scalar bounds or a 0-d condition, bodies that combine elements): results
against NumPy loops, gradients against finite differences and closed forms."""

import numpy as np
import pytest

import dloop as dl
from helpers import assert_close, finite_difference


def heat(u, steps):
    def body(i, u):
        lap = np.roll(u, 1) + np.roll(u, -1) - 2 * u
        return u + 0.1 * lap - 0.01 * u ** 3
    return dl.fori_loop(0, steps, body, u)


def heat_reference(u, steps):
    for _ in range(int(steps)):
        u = u + 0.1 * (np.roll(u, 1) + np.roll(u, -1) - 2 * u) - 0.01 * u ** 3
    return u


def test_heat_equation_with_step_count_in_a_0d_array(backend):
    u0 = np.sin(np.linspace(0, 2 * np.pi, 24, endpoint=False)) + 1.0
    steps = np.array(40)
    assert_close(dl.jit(lambda u: heat(u, steps))(u0), heat_reference(u0, 40), rtol=1e-12)
    g = dl.grad(lambda u: (heat(u, steps) ** 2).sum())(u0)
    assert_close(g, finite_difference(lambda u: (heat_reference(u, 40) ** 2).sum(), u0),
                 rtol=1e-6)
    # The tape holds one carry per step: 40 x 24 float64.
    assert dl.memory_stats()["adstack_bytes_used"] == 40 * 24 * 8


def test_step_count_computed_from_data(backend):
    u0 = np.linspace(0.5, 1.5, 8)
    steps = lambda u: (u.sum() * 2.0).astype(np.int64)  # noqa: E731  (int(8 * 2) = 16)
    out = dl.jit(lambda u: heat(u, steps(u)))(u0)
    assert_close(out, heat_reference(u0, 16), rtol=1e-12)


def power_iteration(a):
    v0 = np.ones(a.shape[0]) / np.sqrt(a.shape[0])

    def cond(c):
        return c[1] > 1e-13

    def body(c):
        v, _ = c
        w = a @ v
        w = w / np.sqrt((w * w).sum())
        return w, np.abs(w - v).max()

    return dl.while_loop(cond, body, (v0, np.array(1.0)))[0]


def test_power_iteration_gradient_matches_eigenvector_formula(backend):
    a = np.array([[4.0, 1.0, 0.0, 0.5], [1.0, 3.0, 1.0, 0.0], [0.0, 1.0, 2.0, 0.3],
                  [0.5, 0.0, 0.3, 1.0]])
    c = np.array([0.3, -1.0, 0.7, 0.2])
    lam, u = np.linalg.eigh(a)
    v = dl.jit(power_iteration)(a)
    v1 = u[:, -1] * np.sign(u[:, -1] @ v)
    assert_close(v, v1, rtol=1e-9)
    g = dl.grad(lambda a: power_iteration(a) @ c)(a)
    # dv = sum_{k != 1} u_k u_k^T dA v / (lambda_1 - lambda_k), so
    # dL/dA = sum_{k != 1} (c . u_k) u_k v^T / (lambda_1 - lambda_k)
    expected = sum(np.outer(u[:, k], v1) * (c @ u[:, k]) / (lam[-1] - lam[k]) for k in range(3))
    assert_close(g, expected, rtol=1e-6, atol=1e-9)


def test_per_element_loop_inside_collective_loop(backend):
    x = np.linspace(0.2, 1.0, 6)
    n = np.array([0, 1, 2, 3, 4, 5])

    def f(x):
        def outer(i, u):
            u = dl.fori_loop(0, n, lambda k, w: w * 0.9 + 0.05 * np.sin(w), u)
            return u - 0.1 * u.mean()
        return dl.fori_loop(0, 3, outer, x)

    def ref(x):
        u = x.copy()
        for _ in range(3):
            for j in range(6):
                for _ in range(n[j]):
                    u[j] = u[j] * 0.9 + 0.05 * np.sin(u[j])
            u = u - 0.1 * u.mean()
        return u

    assert_close(dl.jit(f)(x), ref(x), rtol=1e-12)
    assert_close(dl.grad(lambda x: (f(x) ** 2).sum())(x),
                 finite_difference(lambda x: (ref(x) ** 2).sum(), x), rtol=1e-6)


def test_collective_loop_over_invariants_inside_a_per_element_loop(backend):
    table = np.array([1.0, 2.0, 3.0])
    x = np.array([0.5, 1.0])
    n = np.array([2, 3])

    def f(x, table):
        def body(i, v):
            norm = dl.fori_loop(0, 2, lambda k, t: t / np.sqrt((t * t).sum()) * 2.0, table)
            return v * 0.5 + norm.sum() * 0.1
        return dl.fori_loop(0, n, body, x)

    def ref(x, table):
        t = table.copy()
        for _ in range(2):
            t = t / np.sqrt((t * t).sum()) * 2.0
        out = x.copy()
        for j in range(2):
            for _ in range(n[j]):
                out[j] = out[j] * 0.5 + t.sum() * 0.1
        return out

    assert_close(dl.jit(f)(x, table), ref(x, table), rtol=1e-12)
    gt = dl.grad(lambda t: f(x, t).sum())(table)
    assert_close(gt, finite_difference(lambda t: ref(x, t).sum(), table), rtol=1e-6,
                 atol=1e-9)


def test_dict_of_parameters_and_has_aux(backend):
    params = {"decay": np.array(0.9), "force": np.array([0.1, 0.2, 0.3])}
    u0 = np.array([1.0, 0.0, -1.0])

    def loss(p):
        def body(i, u):
            return p["decay"] * u + p["force"] * np.roll(u, 1)
        u = dl.fori_loop(0, 5, body, u0)
        return (u ** 2).sum(), {"final": u}

    def ref(decay, force):
        u = u0.copy()
        for _ in range(5):
            u = decay * u + force * np.roll(u, 1)
        return (u ** 2).sum()

    g, aux = dl.grad(loss, has_aux=True)(params)
    assert set(g) == {"decay", "force"} and np.shape(g["decay"]) == ()
    assert_close(aux["final"], dl.jit(lambda p: loss(p)[1]["final"])(params), rtol=0)
    assert_close(g["decay"], finite_difference(lambda d: ref(d, params["force"]),
                                               params["decay"]), rtol=1e-6)
    assert_close(g["force"], finite_difference(lambda f: ref(params["decay"], f),
                                               params["force"]), rtol=1e-6)


def test_carries_of_different_shapes(backend):
    m0 = np.eye(3)
    v0 = np.array([1.0, 2.0])

    def f(s):
        def body(i, c):
            m, v = c
            return m @ (np.eye(3) * s + 0.1), v * s
        return dl.fori_loop(0, 3, body, (m0, v0))

    def ref(s):
        m, v = m0, v0
        for _ in range(3):
            m, v = m @ (np.eye(3) * s + 0.1), v * s
        return m.sum() + v.sum()

    s = np.array(0.8)
    m, v = dl.jit(f)(s)
    assert m.shape == (3, 3) and v.shape == (2,)
    assert_close(dl.grad(lambda s: (lambda c: c[0].sum() + c[1].sum())(f(s)))(s),
                 finite_difference(ref, s), rtol=1e-6)


def test_nested_pytree_carry_with_none_and_namedtuple(backend):
    from collections import namedtuple
    State = namedtuple("State", ["pos", "extra"])
    x = np.array([0.5, 1.5])

    def f(x):
        def body(i, c):
            state, (nothing, scale) = c
            return State(state.pos * scale, None), (None, scale)
        out, _ = dl.fori_loop(0, 3, body, (State(x, None), (None, np.float64(0.5))))
        return out.pos.sum()

    assert_close(dl.grad(f)(x), np.full(2, 0.125), rtol=1e-12)


def _heat_loss(x, steps):
    return dl.fori_loop(0, steps, lambda i, v: np.roll(v, 1) * 0.5 + v * 0.1, x).sum()


def test_collective_tape_too_large_is_refused_up_front(backend):
    with pytest.raises(dl.DloopMemoryError, match="max_adstack_bytes") as e:
        dl.grad(_heat_loss)(np.ones(4), np.int64(2 ** 62))
    assert __file__ in str(e.value)
    np.testing.assert_allclose(dl.grad(_heat_loss)(np.ones(4), np.int64(3)), 0.6 ** 3)


def test_fixed_capacity_applies_to_collective_tapes(backend):
    dl.config.update("adstack_capacity", 3)
    with pytest.raises(dl.AdstackOverflowError, match="at least 5") as e:
        dl.grad(_heat_loss)(np.ones(4), np.int64(5))
    assert __file__ in str(e.value)
    np.testing.assert_allclose(dl.grad(_heat_loss)(np.ones(4), np.int64(3)), 0.6 ** 3)


def test_per_element_while_loop_in_a_collective_body_gradient(backend):
    """The reverse sweep runs the body's VJP, which tapes and reverses the inner while loop
    in one kernel; its counting kernel runs only up to the taped loop (it lowered the
    reverse loop too, whose stacks the count sizes: a KeyError)."""
    x = np.linspace(1.1, 1.9, 16)

    def loss(x):
        def body(i, u):
            halved = dl.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, u * (1.5 + i))
            return halved + 0.1 * np.roll(u, 1)
        return dl.fori_loop(0, 3, body, x).sum()

    def reference(x):
        u = x.copy()
        for i in range(3):
            v = u * (1.5 + i)
            for j in range(v.size):
                while v[j] > 1.0:
                    v[j] *= 0.5
            u = v + 0.1 * np.roll(u, 1)
        return u.sum()

    assert_close(dl.grad(loss)(x), finite_difference(reference, x), rtol=1e-6)
