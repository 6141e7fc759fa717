"""Sizing in traced programs: expressions where the trip counts are known at launch (no
counting pass), a counting pass otherwise; both exact."""

import array_api_compat
import numpy as np

import dloop as dl
from dloop.backends.base import get_backend
from helpers import tape_slots


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
