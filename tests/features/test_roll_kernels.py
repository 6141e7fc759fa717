"""np.roll inside fused kernels, against NumPy: the wrapped loads of a roll along the
outermost axis (kernel/lower.py `_roll`), which the cpu backend runs in thread pieces on which
each load is contiguous (backends/cpu/render.py) and the others as selects, and the general
per-axis form. Gradients through rolls in a collective loop against finite differences."""

import numpy as np
import pytest

import dloop as dl
from dloop.backends.cpu.render import MAX_PIECES, wrap_pieces
from dloop.kernel.schedule import MAX_REPLAYED
from dloop.kernel import kir
from helpers import assert_close, finite_difference

CASES = [
    ((1,), 1, 0), ((2,), 1, 0), ((7,), 3, 0), ((7,), -1, 0), ((7,), 9, 0), ((7,), -15, 0),
    ((7,), 0, 0), ((4096,), 1, 0), ((1000,), -37, 0), ((5, 6), 2, 0), ((5, 6), -1, 1),
    ((1, 9), 4, 1), ((3, 4, 5), 2, 0), ((3, 4, 5), (1, 2), (0, 2)),
]


@pytest.mark.parametrize("shape,shift,axis", CASES)
def test_roll_in_a_kernel_matches_numpy(backend, shape, shift, axis):
    x = np.random.default_rng(1).standard_normal(shape)
    f = dl.jit(lambda x: np.roll(x, shift, axis=axis) * 2.0 + x)
    assert_close(f(x), np.roll(x, shift, axis=axis) * 2.0 + x, rtol=0)


@pytest.mark.parametrize("shifts", [(1, -1), (1, 2, -3), tuple(range(1, MAX_PIECES + 3))])
def test_several_rolls_in_one_kernel(backend, shifts):
    """Up to MAX_PIECES - 1 distinct shifts run in pieces on cpu; more fall back to selects."""
    x = np.random.default_rng(2).standard_normal(301)

    def f(x):
        total = x
        for k, s in enumerate(shifts):
            total = total + (k + 1.0) * np.roll(x, s)
        return total

    assert_close(dl.jit(f)(x), f(x), rtol=1e-15)


def test_a_rolled_array_broadcast_against_a_larger_one(backend):
    """The kernel's threads cover (4, 9) but the roll reads a (9,) array: the general form."""
    x, y = np.arange(9.0), np.random.default_rng(3).standard_normal((4, 9))
    f = lambda x, y: np.roll(x, 2) * y + y  # noqa: E731
    assert_close(dl.jit(f)(x, y), f(x, y), rtol=0)


def test_pieces_of_a_kernel():
    tid = kir.KVar(np.dtype(np.int64))

    def kernel(*wraps):
        body = [kir.Load(kir.KVar(np.dtype(np.float64)), 0, tid, wrap=w) for w in wraps]
        return kir.Kernel("k", tid, body, [kir.BufferSpec("in", np.dtype(np.float64), 0)])

    assert wrap_pieces(kernel((1, 10), (9, 10))) == [(0, 1), (1, 9), (9, 10)]
    assert wrap_pieces(kernel()) is None
    assert wrap_pieces(kernel((1, 10), (2, 12))) is None          # two sizes
    assert wrap_pieces(kernel(*[(s, 64) for s in range(1, MAX_PIECES + 1)])) is None


@pytest.mark.parametrize("n_steps", [299, 300])
def test_heat_with_rolls_gradient_matches_finite_differences(backend, n_steps):
    """Two carries rolled both ways over two chunks of a step driver's steps, an odd and an
    even number of them (the cuda driver swaps buffers at every step)."""
    rng = np.random.default_rng(5)
    u0, v0 = rng.uniform(0.5, 1.5, 40), rng.uniform(-0.5, 0.5, 40)
    steps = np.array(n_steps)

    def loss(u):
        def body(i, c):
            u, v = c
            return (u + 0.1 * (np.roll(v, 3) - np.roll(u, -1)) - 0.01 * u ** 3,
                    0.9 * v + 0.05 * np.roll(u, 1))
        u, v = dl.fori_loop(0, steps, body, (u, v0))
        return (u ** 2).sum() + (v * u).sum()

    g = dl.grad(loss)(u0)
    assert_close(g, finite_difference(loss, u0), rtol=1e-6, atol=1e-9)

    def simulate(u, v):
        for _ in range(n_steps):
            u, v = (u + 0.1 * (np.roll(v, 3) - np.roll(u, -1)) - 0.01 * u ** 3,
                    0.9 * v + 0.05 * np.roll(u, 1))
        return u, v
    out = dl.jit(lambda u: dl.fori_loop(0, steps, lambda i, c: (
        c[0] + 0.1 * (np.roll(c[1], 3) - np.roll(c[0], -1)) - 0.01 * c[0] ** 3,
        0.9 * c[1] + 0.05 * np.roll(c[0], 1)), (u, v0)))(u0)
    for got, want in zip(out, simulate(u0, v0)):
        assert_close(got, want, rtol=1e-13)


def _kernels_made(monkeypatch):
    seen = []
    monkeypatch.setattr("dloop.runtime.program.KERNEL_HOOKS", [seen.append])
    return seen


def test_a_roll_of_an_expression_reads_its_operands(backend, monkeypatch):
    """roll(expression) becomes the expression of rolled operands (kernel/schedule.py): one
    kernel, the same values, the expression still there for its unrolled use."""
    seen = _kernels_made(monkeypatch)
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(50), rng.standard_normal(50)

    def f(x, y):
        e = 0.2 * x * y + np.sin(x) - 3.0
        return np.roll(e, 2) + np.roll(e, -1) * e

    assert_close(dl.jit(f)(x, y), f(x, y), rtol=1e-15)
    assert len(seen) == 1


@pytest.mark.parametrize("case", ["long", "broadcast"])
def test_rolls_that_stay_where_they_are(backend, monkeypatch, case):
    """An expression longer than MAX_REPLAYED ops, or one with an operand broadcast along
    the rolled axis, is rolled as a finished array: two kernels, the same values."""
    seen = _kernels_made(monkeypatch)
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((4, 6)), rng.standard_normal(6)

    def f(x, y):
        e = x * y if case == "broadcast" else x
        for k in range(MAX_REPLAYED + 1 if case == "long" else 0):
            e = e * 0.5 + k
        return np.roll(e, 1, axis=1) + x

    assert_close(dl.jit(f)(x, y), f(x, y), rtol=1e-15)
    assert len(seen) == 2
