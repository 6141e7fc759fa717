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
