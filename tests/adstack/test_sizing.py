"""Sizing in traced programs: expressions where the trip counts are known at launch (no
counting pass), a counting pass otherwise; both exact."""

import array_api_compat
import numpy as np
import pytest

import dloop as dl
from dloop.adstack import capacity
from dloop.backends.base import get_backend
from helpers import assert_close, finite_difference, tape_slots


def _grad_and_stats(backend, loss, x):
    be = get_backend(backend)
    before = be.count_launches
    g = dl.grad(loss)(x)
    return g, dl.memory_stats()["adstack_bytes_used"], be.count_launches - before


def test_inner_bound_is_outer_index_uses_an_expression(backend):
    n = np.array([0, 1, 4, 7])
    x = np.linspace(0.1, 0.4, 4)

    def loss(x):
        def outer(i, v):
            return dl.fori_loop(0, i, lambda k, w: w * 0.99 + 0.01, v) * 0.9
        return dl.fori_loop(0, n, outer, x).sum()

    g, used, counts = _grad_and_stats(backend, loss, x)
    assert counts == 0
    # outer stack: n[j] slots; inner stack: the longest inner run, n[j] - 1.
    assert used == sum(tape_slots(backend, n, np.maximum(n - 1, 0))) * 8


def test_inner_bound_read_from_a_table_at_the_outer_index(backend):
    m = np.array([3, 0, 8, 2, 5])
    n = np.array([2, 5, 0])
    x = np.array([0.2, 0.5, 0.8])

    def loss(x):
        def outer(i, v):
            bound = array_api_compat.array_namespace(i).asarray(m)[i]
            return dl.fori_loop(0, bound, lambda k, w: w * 0.9 + 0.1, v)
        return dl.fori_loop(0, n, outer, x).sum()

    g, used, counts = _grad_and_stats(backend, loss, x)
    assert counts == 0
    inner = [max(m[:k], default=0) for k in n]
    assert used == sum(tape_slots(backend, n, inner)) * 8
    expected = np.array([np.prod([0.9 ** m[i] for i in range(k)]) for k in n])
    np.testing.assert_allclose(g, expected, rtol=1e-12)


def test_while_loop_and_carry_dependent_bound_are_counted(backend):
    x = np.array([3.0, 9.0, 0.5])
    g, used, counts = _grad_and_stats(
        backend, lambda x: dl.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, x).sum(), x)
    assert counts == 1 and used == sum(tape_slots(backend, [2, 4, 0])) * 8

    def carried_bound(x):
        def outer(i, c):
            v, k = c
            return dl.fori_loop(0, k, lambda t, w: w * 0.5, v), k + 1
        return dl.fori_loop(0, 3, outer, (x, np.zeros(3, np.int64)))[0].sum()

    g, used, counts = _grad_and_stats(backend, carried_bound, x)
    assert counts == 1
    # outer: 3 elements x 3 trips x (float, int) stacks; inner: 3 elements x its longest run, 2
    outer, inner = tape_slots(backend, [3, 3, 3], [2, 2, 2])
    assert used == outer * 2 * 8 + inner * 8
    np.testing.assert_allclose(g, 0.5 ** 3 * np.ones(3), rtol=1e-12)


@pytest.mark.parametrize("scale", [65536, -65536])
def test_an_inner_bound_of_int32_arithmetic_that_wraps(backend, scale):
    """(i + 1) * scale * 65536 + 3 wraps to 3 in int32, in NumPy and in the kernel; the
    capacity expression saturated instead (an overflow 'please report', or a refusal to
    allocate 2^33 iterations). Such a bound is counted."""
    x, n = np.array([0.5, 0.7]), np.array([2, 2], np.int32)

    def f(x):
        def outer(i, v):
            k = (i + 1) * scale * 65536 + 3
            return dl.fori_loop(0, k, lambda t, w: w * w * 0.9 + 0.01, v)
        return dl.fori_loop(0, n, outer, x).sum()

    def reference(x):
        for _ in range(6):
            x = x * x * 0.9 + 0.01
        return x.sum()
    assert_close(dl.grad(f)(x), finite_difference(reference, x), rtol=1e-8)


def test_an_inner_bound_read_from_a_table_over_a_long_outer_range(backend, monkeypatch):
    """Its capacity is a maximum over the outer range, evaluated in blocks of the range (one
    step at a time took 16 s at 10^6): the one long inner loop, near the end, in the last
    of several blocks (blocks made small here), must be found, or the tape would
    overflow."""
    monkeypatch.setattr(capacity, "RANGE_BLOCK", 64)
    steps = 1000
    m = np.zeros(steps, np.int64)
    m[steps - 7] = 5
    m[100] = 2

    def f(x):
        xp = array_api_compat.array_namespace(x)
        table = xp.asarray(m)

        def outer(i, v):
            return dl.fori_loop(0, table[i], lambda j, w: w * w * 0.5 + 0.25, v)
        return dl.fori_loop(0, steps, outer, x).sum()

    def reference(x):
        for _ in range(7):
            x = x * x * 0.5 + 0.25
        return x.sum()
    x = np.array([0.3, 0.8])
    assert_close(dl.grad(f)(x), finite_difference(reference, x), rtol=1e-8)


@pytest.mark.parametrize("compact_from", [1, 10 ** 9])
def test_a_gathered_inner_bound_with_one_long_element(backend, monkeypatch, compact_from):
    """One element whose outer loop runs far longer than the rest: the range maximum of its
    gathered inner bound goes on over that element alone once the others have finished
    (capacity._Kept; over all of them, sizing took 9 s at 10^4 elements where the loop ran
    in 0.05 s). Both walks size the same tapes and give the chain rule's gradient."""
    monkeypatch.setattr(capacity, "COMPACT_FROM", compact_from)
    n = np.zeros(64, np.int64)
    n[::9], n[40] = 2, 300
    m = np.arange(300) % 4
    x = np.linspace(0.1, 0.9, 64)

    def f(x):
        xp = x.__array_namespace__()

        def outer(i, v):
            return dl.fori_loop(0, xp.asarray(m)[i], lambda j, w: w * 0.99 + 0.001 * x, v)
        return dl.fori_loop(0, n, outer, x).sum()

    inner = np.array([m[:k].sum() for k in n])          # inner steps each element runs
    a = 0.99 ** inner
    want = a + 0.001 * (1 - a) / 0.01                  # d/dx of the affine recurrence
    assert_close(dl.grad(f)(x), want, rtol=1e-12)
    # The inner stack holds one outer iteration's pushes: its capacity is the range maximum.
    # cuda interleaves a warp's tapes at the warp's longest capacity (design.md 17).
    longest = np.array([m[:k].max() if k else 0 for k in n])
    used, exact = dl.memory_stats()["adstack_bytes_used"], (n.sum() + longest.sum()) * 8
    assert used >= exact if backend == "cuda" else used == exact
