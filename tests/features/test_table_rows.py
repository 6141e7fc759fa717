"""A row of a 2-D table read by a traced index in a per-element loop (row = xp.asarray(table)[k],
then row[j]), and table[k] as a whole row outside loops; gradients to the carry and to the
table against finite differences."""

import numpy as np

import dloop as dl
from helpers import assert_close, finite_difference

TABLE = np.cos(np.arange(12.0)).reshape(4, 3)
ROW = np.array([3, 0, 2, 1, 1])
N = np.array([1, 2, 3, 0, 2])
X = np.linspace(0.1, 0.5, 5)


def _run(x, table, traced):
    def body(i, v):
        xp = v.__array_namespace__() if traced else np
        row = xp.asarray(table)[ROW if traced else ROW[j]]
        return v * 0.5 + row[i % 3] * np.sin(v) + row[0] * 0.1
    if traced:
        return (dl.fori_loop(0, N, body, x) * np.arange(1.0, 6.0)).sum()
    out = x.copy()
    for j in range(x.size):
        for i in range(N[j]):
            out[j] = body(i, out[j])
    return (out * np.arange(1.0, 6.0)).sum()


def test_row_of_table_in_per_element_loop(backend):
    gx, gt = dl.grad(lambda x, t: _run(x, t, True), argnums=(0, 1))(X, TABLE)
    assert_close(gx, finite_difference(lambda x: _run(x, TABLE, False), X), rtol=1e-7,
                 atol=1e-9)
    assert_close(gt, finite_difference(lambda t: _run(X, t, False), TABLE), rtol=1e-7,
                 atol=1e-9)


def test_whole_rows_outside_loops():
    def loss(x):
        rows = x.__array_namespace__().asarray(TABLE)[ROW]
        return (rows * x[:, None]).sum()
    np.testing.assert_allclose(dl.grad(loss)(X), TABLE[ROW].sum(axis=1))


def test_sliced_row_of_table_in_per_element_loop(backend):
    """table[k, 1:] and table[1:, k] in a per-element body: each element's part of a row or
    column, indexed again (statically and by the loop counter) down to one value."""
    def run(x, table, traced):
        def body(i, v):
            xp = v.__array_namespace__() if traced else np
            t = xp.asarray(table)
            k = ROW if traced else ROW[j]
            row, col = t[k, 1:], t[1:, k % 3]
            return v * 0.5 + row[i % 2] * np.sin(v) + row[-1] * 0.1 + col[::-1][1] * v
        if traced:
            return (dl.fori_loop(0, N, body, x) * np.arange(1.0, 6.0)).sum()
        out = x.copy()
        for j in range(x.size):
            for i in range(N[j]):
                out[j] = body(i, out[j])
        return (out * np.arange(1.0, 6.0)).sum()

    gx, gt = dl.grad(lambda x, t: run(x, t, True), argnums=(0, 1))(X, TABLE)
    assert_close(gx, finite_difference(lambda x: run(x, TABLE, False), X), rtol=1e-7,
                 atol=1e-9)
    assert_close(gt, finite_difference(lambda t: run(X, t, False), TABLE), rtol=1e-7,
                 atol=1e-9)
