"""Collective fori loops whose bodies are only kernels run their steps natively on the cpu
backend (runtime/steps.py, backends/cpu/steps.py) and from one loop of queued launches on
cuda (backends/cuda/steps.py): the same results and gradients as the
host-driven loop (the other backends), including invariant cotangents, integer carries,
chunks of steps in both directions and faults; bodies that do not qualify fall back."""

import numpy as np
import pytest

import dloop as dl
from dloop.runtime.execute import Execution
from helpers import assert_close, finite_difference

DRIVEN = ("cpu", "cuda")        # backends with a step driver


def _count_host_steps(monkeypatch):
    """The number of body programs run from Python, step by step."""
    calls = []
    real = Execution.run_body
    monkeypatch.setattr(Execution, "run_body",
                        lambda self, body, args: calls.append(1) or real(self, body, args))
    return calls


def _heat(u, steps, rate):
    def body(i, u):
        return u + rate * (np.roll(u, 1) + np.roll(u, -1) - 2 * u) - 0.01 * u ** 3
    return dl.fori_loop(0, steps, body, u)


def _heat_numpy(u, steps, rate):
    history = []
    for _ in range(steps):
        history.append(u)
        u = u + rate * (np.roll(u, 1) + np.roll(u, -1) - 2 * u) - 0.01 * u ** 3
    return u, history


def test_many_steps_run_natively_with_the_numpy_adjoint(backend, monkeypatch):
    """700 steps: several chunks of steps per native call, forward and reverse. The gradient
    is checked against the hand-written adjoint of the NumPy loop."""
    calls = _count_host_steps(monkeypatch)
    u0 = 1.0 + 0.3 * np.sin(np.linspace(0, 2 * np.pi, 96, endpoint=False))
    steps = np.array(700)
    out = dl.jit(lambda u: _heat(u, steps, 0.2))(u0)
    g = dl.grad(lambda u: (_heat(u, steps, 0.2) ** 2).sum())(u0)
    u, history = _heat_numpy(u0, 700, 0.2)
    bar = 2 * u
    for h in reversed(history):
        bar = bar * (1 - 0.4 - 0.03 * h ** 2) + 0.2 * (np.roll(bar, -1) + np.roll(bar, 1))
    assert_close(out, u, rtol=1e-13)
    assert_close(g, bar, rtol=1e-12)
    if backend in DRIVEN:
        assert calls == []


def test_invariant_cotangents_and_integer_carries(backend, monkeypatch):
    """A parameter captured by the body (its cotangent is summed over steps) and an int64
    counter carried beside the state."""
    calls = _count_host_steps(monkeypatch)
    rng = np.random.default_rng(4)
    u0, p0 = rng.uniform(0.5, 1.5, 16), rng.uniform(0.9, 1.0, 16)

    def run(u, p):
        def body(i, c):
            u, k = c
            return u * p + 0.05 * np.roll(u, 1) + 0.001 * k, k + i
        return dl.fori_loop(0, 30, body, (u, np.zeros(16, np.int64)))

    def loss(u, p):
        return (run(u, p)[0] ** 2).sum()
    gu, gp = dl.grad(loss, argnums=(0, 1))(u0, p0)

    def reference(u, p):
        k = np.zeros(16, np.int64)
        for i in range(30):
            u, k = u * p + 0.05 * np.roll(u, 1) + 0.001 * k, k + i
        return (u ** 2).sum()
    assert_close(gu, finite_difference(lambda u: reference(u, p0), u0), rtol=1e-6)
    assert_close(gp, finite_difference(lambda p: reference(u0, p), p0), rtol=1e-6)
    np.testing.assert_array_equal(dl.jit(run)(u0, p0)[1], np.full(16, sum(range(30))))
    if backend in DRIVEN:
        assert calls == []


def test_a_body_with_a_host_step_runs_host_driven_and_says_so(backend, capsys):
    u0 = np.linspace(0.2, 1.0, 12)

    def run(u):
        # u.mean() is a whole-array reduction: a host step between the body's kernels.
        return dl.fori_loop(0, 5, lambda i, u: u * 0.9 + 0.1 * u.mean(), u)

    def reference(u):
        for _ in range(5):
            u = u * 0.9 + 0.1 * u.mean()
        return (u ** 3).sum()
    with dl.config.override(debug=True):
        g = dl.grad(lambda u: (run(u) ** 3).sum())(u0)
    assert_close(g, finite_difference(reference, u0), rtol=1e-6)
    if backend in DRIVEN:
        assert "runs host-driven: its body has a host step (reduce)" in capsys.readouterr().out


def test_an_index_fault_in_a_late_step_is_reported_and_the_next_call_is_right(backend):
    """Each step mixes u with a permutation of itself, weights summing to 1: the gradient
    of sum(u) is exactly 1. In the bad call the last step's index is out of range."""
    perm = np.array([1, 2, 0])

    def loss(x, steps, bad):
        def step(i, u):
            idx = perm + (i == steps - 1) * (bad - perm)
            return u * 0.999 + 0.001 * u[idx]
        return dl.fori_loop(0, steps, step, x).sum()
    x = np.array([1.0, 2.0, 3.0])
    with pytest.raises(dl.DloopIndexError):
        dl.grad(lambda x: loss(x, 600, np.array([1, 7, 0])))(x)
    assert_close(dl.grad(lambda x: loss(x, 600, perm))(x), np.ones(3), rtol=1e-12)


def test_large_launches_on_cpu_use_the_thread_pool_instead(capsys):
    """The cpu driver calls each kernel on one thread: a body launching 2**16 threads or
    more runs host-driven, spreading each launch over the pool, and says why."""
    from dloop.backends.base import available
    if not available("cpu")[0]:
        pytest.skip("needs the cpu backend")
    u0 = np.linspace(0.0, 1.0, 70_000)
    with dl.config.override(backend="cpu", debug=True):
        out = dl.jit(lambda u: dl.fori_loop(0, 3, lambda i, u: np.roll(u, 1) * 0.5 + 1.0,
                                            u))(u0)
    assert_close(out, np.roll(u0, 3) * 0.125 + 1.75, rtol=1e-15)
    assert "its launches (70,000 threads) are large enough for threads" in \
        capsys.readouterr().out


@pytest.mark.parametrize("n_steps", [7, 300])
def test_two_carries_out_of_one_value(backend, n_steps):
    """A body returning one value as both carries: the drivers copy the carries after each
    step instead of writing them in place (runtime/steps.py carry_pairs)."""
    u0, v0 = np.linspace(0.5, 1.0, 24), np.linspace(-0.2, 0.2, 24)
    steps = np.array(n_steps)

    def run(u):
        def body(i, c):
            w = 0.6 * np.roll(c[0], 1) + 0.3 * c[1] + 0.01
            return w, w
        return dl.fori_loop(0, steps, body, (u, v0))

    def reference(u):
        v = v0
        for _ in range(n_steps):
            u = v = 0.6 * np.roll(u, 1) + 0.3 * v + 0.01
        return u, v
    for got, want in zip(dl.jit(run)(u0), reference(u0)):
        assert_close(got, want, rtol=1e-13)
    loss = lambda u: (run(u)[0] ** 2).sum()  # noqa: E731
    assert_close(dl.grad(loss)(u0),
                 finite_difference(lambda u: (reference(u)[0] ** 2).sum(), u0), rtol=1e-6)


@pytest.mark.parametrize("n_steps", [1, 2, 3, 300])
def test_an_invariant_cotangent_that_is_also_a_carry_cotangent(backend, n_steps):
    """sin(u + p) gives u and p one cotangent value: a reverse driver that swapped the carry
    cotangent's buffers between steps accumulated p's from the stale one on every other step
    (from 2 steps on, about 20% off); the driver now keeps such writes in place."""
    u0, p0, s0 = np.linspace(0.1, 1.0, 8), np.linspace(-0.5, 0.5, 8), np.array([1., 2., 3.])

    def f(u, p):
        def body(i, c):
            return np.sin(c[0] + p), 1.5 * c[1]          # two shapes: a collective loop
        u, s = dl.fori_loop(0, np.array(n_steps), body, (u, s0))
        return (u ** 2).sum() + (s ** 2).sum()

    def reference(u, p):
        for _ in range(n_steps):
            u = np.sin(u + p)
        return (u ** 2).sum()
    du, dp = dl.grad(f, argnums=(0, 1))(u0, p0)
    assert_close(dp, finite_difference(lambda p: reference(u0, p), p0), rtol=1e-6, atol=1e-9)
    assert_close(du, finite_difference(lambda u: reference(u, p0), u0), rtol=1e-6, atol=1e-9)


def test_repeated_calls_with_new_values(backend):
    """The same loop called again and again with new values of the same shape: drivers are
    kept per body program, and each call must read that call's values."""
    steps = np.array(40)
    base = 1.0 + 0.3 * np.sin(np.linspace(0, 2 * np.pi, 64, endpoint=False))
    f = dl.jit(lambda u: _heat(u, steps, 0.2))
    g = dl.grad(lambda u: (_heat(u, steps, 0.2) ** 2).sum())
    for k in range(5):
        u0 = base * (1.0 + 0.05 * k)
        u, history = _heat_numpy(u0, 40, 0.2)
        bar = 2 * u
        for h in reversed(history):
            bar = bar * (1 - 0.4 - 0.03 * h ** 2) + 0.2 * (np.roll(bar, -1) + np.roll(bar, 1))
        assert_close(f(u0), u, rtol=1e-13)
        assert_close(g(u0), bar, rtol=1e-12)


@pytest.mark.parametrize("layout", ["computed .T", "Fortran-ordered argument"])
def test_an_invariant_that_is_not_c_ordered(backend, layout):
    """The drivers add flat cotangents into an invariant's gradient by address: its
    accumulator was zeros_like(invariant), F-ordered for a transposed one, and the gradient
    came back transposed (cpu, cpu-scalar)."""
    x0 = np.arange(12.0).reshape(3, 4) / 10
    q0 = np.linspace(0.1, 0.9, 12).reshape(4, 3)
    weights = np.arange(12.0).reshape(3, 4)

    def loss(x, q, loop):
        p = q.T if layout == "computed .T" else q
        u = loop(lambda i, c: np.sin(np.roll(c, 1, axis=1) + p), x)
        return (u * weights).sum()

    def python_loop(body, c):
        for i in range(2):
            c = body(i, c)
        return c
    q_in = q0 if layout == "computed .T" else np.asfortranarray(q0.T)
    g = dl.grad(lambda x, q: loss(x, q, lambda b, c: dl.fori_loop(0, 2, b, c)),
                argnums=1)(x0, q_in)
    assert_close(g, finite_difference(lambda q: loss(x0, q, python_loop), q_in), rtol=1e-7,
                 atol=1e-9)
