"""np.where's unused branch never poisons a gradient: where a branch was not taken, the
cotangents derived from it stay zero even where its partial derivatives are NaN or infinite
(sqrt of a negative number, a NaN placeholder). Each gradient is checked against a
closed form or central finite differences of the same function in NumPy."""

import numpy as np

import dloop as dl
from helpers import assert_close, finite_difference

X = np.array([0.3, -2.5, 0.7, -1.0, 0.2, 4.0])


def test_sqrt_of_the_branch_not_taken(backend):
    g = dl.grad(lambda x: np.where(x > 0, np.sqrt(x), 0.0).sum())(X)
    assert_close(g, np.where(X > 0, 0.5 / np.sqrt(np.abs(X)), 0.0), rtol=1e-12)


def test_nan_placeholders_left_out_of_a_mean(backend):
    """SciPy's trimmed variance: values outside the limits become NaN, their squared
    deviations are dropped with np.where after they were computed, and the mean they were
    taken from depends on every kept value."""
    def trimmed_var(x):
        y = np.where(x > 0, x, np.nan)
        kept = ~np.isnan(y)
        mean = np.where(kept, y, 0.0).sum() / kept.sum()
        d = y - mean
        return np.where(kept, d * d, 0.0).sum()

    with np.errstate(invalid="ignore"):
        expected = finite_difference(trimmed_var, X)
    assert_close(dl.grad(trimmed_var)(X), expected, rtol=1e-6)


def test_branch_taken_keeps_its_nan(backend):
    """Only the branch not taken is cleaned: sqrt of a negative value that np.where selected
    gives a NaN gradient, as it should."""
    g = dl.grad(lambda x: np.where(x < 1.0, np.sqrt(x), x).sum())(X)
    assert np.isnan(g[X < 0]).all()
    kept = X >= 0
    assert_close(g[kept], np.where(X < 1.0, 0.5 / np.sqrt(np.abs(X)), 1.0)[kept], rtol=1e-12)


def test_branch_not_taken_behind_a_reduction_reshape_or_broadcast(backend):
    """The branch not taken is cleaned through a sum, a slice, a broadcast and a reshape
    between np.where and the overflowing exp (SciPy's logsumexp computes such a fallback
    and drops it: its gradient at 800 was NaN instead of softmax's 1)."""
    x = np.array([800.0, 1.0, 2.0])

    def after_sum(x):
        t = np.exp(x).sum()
        return np.where(np.isinf(t), x.max(), t)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(dl.grad(after_sum)(x), [1.0, 0.0, 0.0])
    keep = np.array([True, False])
    cases = [
        (lambda x: np.where(keep[:, None], np.exp(x)[:, None] * np.ones(3), 0.0).sum(),
         [3 * np.e, 0.0]),
        (lambda x: np.where(keep[1:], np.exp(x)[1:], 0.0).sum() +
         np.where(keep, np.exp(x), x).sum(), [np.e, 1.0]),
        (lambda x: np.where(keep[::-1], np.exp(x).reshape(1, 2), x.reshape(1, 2)).sum(),
         [1.0, 1.0]),
    ]
    for f, want in cases[:2]:
        assert_close(dl.grad(f)(np.array([1.0, 800.0])), want, rtol=1e-15)
    f, want = cases[2]
    assert_close(dl.grad(f)(np.array([800.0, 0.0])), want, rtol=1e-15)


def test_inside_a_per_element_loop(backend):
    n = np.array([3, 1, 4, 2, 0, 5])

    def loss(x, traced):
        def step(i, v):
            return np.where(v > 0, np.sqrt(v) + 0.1, v * 0.5)
        if traced:
            return dl.fori_loop(0, n, step, x).sum()
        out = x.copy()
        for j in range(x.size):
            for _ in range(n[j]):
                out[j] = step(0, out[j])
        return out.sum()

    with np.errstate(invalid="ignore"):
        expected = finite_difference(lambda x: loss(x, False), X)
    assert_close(dl.grad(lambda x: loss(x, True))(X), expected, rtol=1e-6)


def test_inside_a_collective_loop(backend):
    def step(i, v):
        return v * 0.9 + 0.1 * np.where(v > 0, np.sqrt(v), 0.0).sum()

    def loss(x, traced):
        if traced:
            return dl.fori_loop(0, 3, step, x).sum()
        for i in range(3):
            x = step(i, x)
        return x.sum()

    with np.errstate(invalid="ignore"):
        expected = finite_difference(lambda x: loss(x, False), X)
    assert_close(dl.grad(lambda x: loss(x, True))(X), expected, rtol=1e-6)


def test_nan_placeholder_behind_a_max_or_prod(backend):
    """m = x.max(axis=1) with a NaN in a row that np.where then drops: the row's gradient is
    0, not the max rule's 0 / 0 (prod: 0 * inf)."""
    x = np.array([[1.0, 3.0, 2.0], [np.nan, 1.0, 2.0]])
    g = dl.grad(lambda x: np.where(np.isnan(x.max(axis=1)), 0.0, x.max(axis=1)).sum())(x)
    np.testing.assert_array_equal(g, [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    g = dl.grad(lambda x: np.where(np.isnan(x.prod(axis=1)), 0.0, x.prod(axis=1)).sum())(x)
    np.testing.assert_array_equal(g, [[6.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
