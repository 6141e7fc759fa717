"""Matrix decompositions on traced arrays (xp.linalg and np.linalg spellings): gradients of
losses that do not depend on the decompositions' arbitrary signs and bases, batched, after a
per-element loop and inside a collective loop's body, against central finite differences of
the same code on NumPy; the repeated-value cases; one test per error."""

import pathlib
import sys

import numpy as np
import pytest

import dloop as dl
from helpers import (after_per_element_loop, assert_close, error_checker, finite_difference,
                     summed_collective_loop)

X = np.random.default_rng(3).uniform(-1.0, 1.0, 24)
N = np.array([2, 0, 3, 1, 2, 4, 1, 3, 0, 2, 1, 3] * 2)
R = np.random.default_rng(4)
W = {shape: R.standard_normal(shape) for shape in [(3,), (4, 3), (3, 4), (4, 4), (3, 3)]}
check_error = error_checker(__file__)


def _t(a):
    return np.matrix_transpose(a)


def _svd_terms(x, la):
    thin = x.reshape(2, 4, 3)
    u, s, vh = la.svd(thin, full_matrices=False)
    total = (s * W[3,]).sum() + (W[4, 3] * (u @ vh)).sum() + (W[4, 4] * (u @ _t(u))).sum()
    u, s, vh = la.svd(x[:12].reshape(3, 4), full_matrices=False)
    total = total + (W[3, 4] * (u @ vh)).sum() + (W[4, 4] * (_t(vh) @ vh)).sum()
    u, s, vh = la.svd(x[6:].reshape(2, 3, 3))           # full_matrices=True, square
    total = total + (W[3, 3] * (u @ vh)).sum() + (W[3, 3] * (u * s[..., None, :]) @ vh).sum()
    return total + (la.svdvals(thin) ** 2 * W[3,]).sum()


def _eigh_terms(x, la):
    a = x[6:].reshape(2, 3, 3)
    sym = _t(a) @ a + 0.5 * np.eye(3)
    w, v = la.eigh(sym)
    top = v[..., :, -1:]
    total = (w * W[3,]).sum() + (W[3, 3] * (top @ _t(top))).sum()
    return total + (la.eigvalsh(sym + _t(sym)) ** 2 * W[3,]).sum()


def _solver_terms(x, la):
    a3 = x[:18].reshape(2, 3, 3) + 3 * np.eye(3)
    a4 = x[8:24].reshape(4, 4) + 4 * np.eye(4)
    spd = a3 @ _t(a3) + np.eye(3)
    total = ((W[3, 3] * la.inv(a3)).sum() + (W[3,] * la.solve(a3, x[:3])).sum() +
             (W[4, 3][:, :2] * la.solve(a4, x[4:12].reshape(4, 2))).sum())
    total = total + (W[3, 3] * (la.cholesky(spd) + la.cholesky(spd, upper=True) ** 2)).sum()
    for m, mode in ((x[:12].reshape(4, 3), "reduced"), (x[:12].reshape(3, 4), "reduced"),
                    (x[:18].reshape(2, 3, 3), "complete")):
        q, r = la.qr(m, mode=mode)
        total = total + (q * W[q.shape[-2:]]).sum() + (r ** 2 * W[r.shape[-2:]]).sum()
    sign, logabsdet = la.slogdet(a3)
    total = total + (sign * logabsdet).sum() + la.det(a4) * 1e-2
    total = total + (W[3, 4] * la.pinv(x[:12].reshape(4, 3))).sum()
    for order in ("fro", "nuc", 2, -2, 1, -np.inf):
        total = total + la.matrix_norm(x[:12].reshape(4, 3), ord=order)
    return total + (W[3, 3] * (la.matrix_power(a3, 3) * 1e-2 + la.matrix_power(a3, -2))).sum()


def _terms(x, la):
    return _svd_terms(x, la) + _eigh_terms(x, la) + _solver_terms(x, la)


def _namespace(x, traced):
    """xp.linalg of traced arrays, or NumPy's for the reference."""
    return x.__array_namespace__().linalg if traced else np.linalg


def _per_element(x, traced, la):
    y = after_per_element_loop(N, x, traced)
    return _terms(y, la(y, traced))


def _collective(x, traced, la):
    return summed_collective_loop(lambda i, v: v * 0.99 + 0.01 * _terms(v, la(v, traced)) * v,
                                  x, traced)


def _check(program, la, rtol=1e-6):
    got = dl.grad(lambda x: program(x, True, la))(X)
    assert_close(got, finite_difference(lambda x: program(x, False, la), X), rtol=rtol,
                 atol=1e-8)


@pytest.mark.parametrize("program", [_per_element, _collective], ids=["per-element",
                                                                       "collective"])
def test_gradients(backend, program):
    _check(program, _namespace)


@pytest.mark.parametrize("program", [_per_element, _collective], ids=["per-element",
                                                                       "collective"])
def test_numpy_spellings(program):
    """np.linalg.svd(tracer) etc. reach the same functions (the reference runs them on NumPy)."""
    _check(program, lambda x, traced: np.linalg)


def test_results_match_numpy():
    """Values and shapes, full and thin, against NumPy's (up to each vector's sign)."""
    def f(x):
        la = x.__array_namespace__().linalg
        m = x.reshape(2, 4, 3)
        return (*la.svd(m), *la.svd(m, full_matrices=False), *la.eigh(_t(m) @ m),
                la.svdvals(m), la.eigvalsh(_t(m) @ m))
    m = X.reshape(2, 4, 3)
    expected = (*np.linalg.svd(m), *np.linalg.svd(m, full_matrices=False),
                *np.linalg.eigh(_t(m) @ m), np.linalg.svdvals(m), np.linalg.eigvalsh(_t(m) @ m))
    for got, want in zip(dl.jit(f)(X), expected, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=1e-10, atol=1e-12)


def test_solvers_match_numpy():
    m4, m43 = X[8:].reshape(4, 4) + 4 * np.eye(4), X[:12].reshape(4, 3)
    spd = m4 @ m4.T

    def run(la, x):
        a, b = x[8:].reshape(4, 4) + 4 * np.eye(4), x[:12].reshape(4, 3)
        return (la.inv(a), la.solve(a, b), la.solve(a, x[:4]), la.cholesky(a @ _t(a)),
                *la.qr(b), *la.qr(b, mode="complete"), *la.slogdet(a), la.det(a), la.pinv(b),
                la.matrix_norm(b, ord=2, keepdims=True), la.matrix_power(a, 5),
                la.matrix_power(a, 0), la.matrix_rank(b), la.matrix_rank(b @ _t(b)))
    expected = run(np.linalg, X)
    assert np.linalg.matrix_rank(m43 @ m43.T) == 3 and np.linalg.det(spd) > 0
    got = dl.jit(lambda x: run(x.__array_namespace__().linalg, x))(X)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


def test_linalg_extension_is_whole():
    """Every function of the standard's linalg extension is there; the ones the main namespace
    also has are the same functions (test_array_api.py checks those)."""
    sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "tools"))
    import array_api_coverage as coverage
    module, names = coverage.EXTENSIONS["Linear algebra extension (`xp.linalg`)"]
    assert all(coverage.supported(f"{module}.{name}") for name in names.split())

    def f(x):
        xp = x.__array_namespace__()
        a, b = x[:12].reshape(3, 4), x[12:].reshape(4, 3)
        return (xp.linalg.matmul(a, b), xp.linalg.matrix_transpose(a),
                xp.linalg.tensordot(a, b, axes=1), xp.linalg.outer(x[:3], x[3:7]))
    a, b = X[:12].reshape(3, 4), X[12:].reshape(4, 3)
    for got, want in zip(dl.jit(f)(X), (a @ b, a.T, np.tensordot(a, b, 1), np.outer(X[:3], X[3:7])),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-14)


def test_numpy_matrix_norms():
    """np.linalg.norm of a matrix with ord 2, 'nuc', 1 and -inf is a matrix norm, not the
    vector norm of its entries."""
    def f(x, orders=(2, -2, "nuc", 1, -np.inf, "fro", None)):
        m = x.reshape(2, 4, 3)
        return sum(np.linalg.norm(m[0], order) for order in orders) + \
            np.linalg.norm(m, 2, axis=(2, 1), keepdims=True).sum()
    value, got = dl.value_and_grad(f)(X)
    np.testing.assert_allclose(value, f(X), rtol=1e-12)
    assert_close(got, finite_difference(f, X), rtol=1e-6, atol=1e-8)


def test_svd_at_repeated_singular_values():
    """A signed permutation scaled to singular values (2, 2, 1), exactly: the polar factor
    u @ vh, the projector onto the plane of the repeated value and symmetric functions of the
    singular values are smooth there, and their gradient is exact."""
    x0 = np.array([[0.0, 2.0, 0.0], [0.0, 0.0, -2.0], [1.0, 0.0, 0.0]]).ravel()
    s0 = np.linalg.svd(x0.reshape(3, 3), compute_uv=False)
    assert s0[0] == s0[1] != s0[2], s0      # the case under test really is repeated

    def f(x, la):
        u, s, vh = la.svd(x.reshape(3, 3))
        plane = u[:, :2]
        return ((W[3, 3] * (u @ vh + plane @ _t(plane))).sum() + s.sum() +
                (s ** 2 * np.array([0.7, 0.7, -1.2])).sum())
    got = dl.grad(lambda x: f(x, x.__array_namespace__().linalg))(x0)
    assert_close(got, finite_difference(lambda x: f(x, np.linalg), x0), rtol=1e-6, atol=1e-8)


def test_pinv_at_repeated_singular_values():
    """pinv is smooth at repeated singular values, but through svd's VJP its gradient would
    miss a term there: it has a VJP of its own."""
    x0 = np.array([[0.0, 2.0, 0.0], [0.0, 0.0, -2.0], [1.0, 0.0, 0.0]]).ravel()

    def f(x, la):
        return (W[3, 3] * la.pinv(x.reshape(3, 3))).sum()
    got = dl.grad(lambda x: f(x, x.__array_namespace__().linalg))(x0)
    assert_close(got, finite_difference(lambda x: f(x, np.linalg), x0), rtol=1e-6, atol=1e-8)


def test_eigh_at_repeated_eigenvalues():
    """diag(1, 1, 3) + sym(x) at x = 0: the projector onto the repeated eigenvalue's plane,
    symmetric functions of the eigenvalues and the top eigenvector's projector are smooth
    there; a loss of the plane's arbitrary basis is not, and its gradient is still finite."""
    def f(x, la, basis=False):
        a = x.reshape(3, 3)
        w, v = la.eigh(np.diag([1.0, 1.0, 3.0]) + a + _t(a))
        plane, top = v[:, :2], v[:, 2:]
        total = ((W[3, 3] * (plane @ _t(plane) + 2 * top @ _t(top))).sum() +
                 (w * np.array([0.7, 0.7, -1.2])).sum() + (w ** 2).sum())
        return total + (v[:, 0] * W[3,]).sum() if basis else total
    x0 = np.zeros(9)
    w0 = np.linalg.eigvalsh(np.diag([1.0, 1.0, 3.0]))
    assert w0[0] == w0[1], w0
    got = dl.grad(lambda x: f(x, x.__array_namespace__().linalg))(x0)
    assert_close(got, finite_difference(lambda x: f(x, np.linalg), x0), rtol=1e-6, atol=1e-8)
    assert np.all(np.isfinite(dl.grad(lambda x: f(x, x.__array_namespace__().linalg, True))(
        x0)))


def test_selected_away_decomposition_gets_zero_cotangent():
    """SciPy's Rotation.from_matrix pattern: decompose, then keep the original matrix with
    xp.where. At the identity every singular value is 1 and the discarded branch's zero
    cotangent must stay zero (not 0 * inf = nan)."""
    def f(x):
        xp = x.__array_namespace__()
        m = x.reshape(3, 3)
        u, _, vh = xp.linalg.svd(m)
        w, v = xp.linalg.eigh(m)
        keep = xp.ones((3, 3), dtype=bool)
        return (W[3, 3] * (xp.where(keep, m, u @ vh) + xp.where(keep, m, v * w))).sum()
    got = dl.grad(f)(np.eye(3).ravel())
    np.testing.assert_array_equal(got, 2 * W[3, 3].ravel())


def test_full_matrices_gradient_through_the_undetermined_part():
    def f(x):
        u, s, vh = x.__array_namespace__().linalg.svd(x.reshape(4, 3))  # full
        return (u @ u).sum()
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.grad(f)(X[:12])
    check_error(e, dl.DloopNotImplementedError, "full", "full_matrices=False")


def test_full_matrices_without_that_part_is_differentiable():
    """A 3 x 4 matrix: the full vh's last row is arbitrary, but a loss of u and s only is a
    function of the matrix."""
    def f(x, la):
        u, s, vh = la.svd(x.reshape(3, 4))
        return ((u * W[3,]) @ _t(u)).sum() + (s * W[3,]).sum()
    got = dl.grad(lambda x: f(x, x.__array_namespace__().linalg))(X[:12])
    assert_close(got, finite_difference(lambda x: f(x, np.linalg), X[:12]), rtol=1e-6,
                 atol=1e-8)


@pytest.mark.parametrize("call, marker, phrase", [
    (lambda x: x.__array_namespace__().linalg.svd(x[:3]), "svd1", "matrices"),  # svd1
    (lambda x: x.__array_namespace__().linalg.eigh(x[:12].reshape(3, 4)),  # eigh34
     "eigh34", "square"),
])
def test_not_matrices(call, marker, phrase):
    with pytest.raises(dl.DloopValueError) as e:
        dl.grad(lambda x: call(x)[0].sum())(X)
    check_error(e, dl.DloopValueError, marker, phrase)


def test_numpy_eigh_of_the_upper_triangle():
    def f(x):
        return np.linalg.eigh(x[:9].reshape(3, 3), UPLO="U")[0].sum()  # upper
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.grad(f)(X)
    check_error(e, dl.DloopNotImplementedError, "upper", "UPLO", "symmetric")


def test_singular_matrix():
    def f(x):
        return np.linalg.inv(x[:9].reshape(3, 3) * 0.0).sum()  # singular
    with pytest.raises(dl.DloopValueError) as e:
        dl.grad(f)(X)
    check_error(e, dl.DloopValueError, "singular", "regularize")


def test_complete_qr_gradient_through_the_undetermined_part():
    def f(x):
        la = x.__array_namespace__().linalg
        q, r = la.qr(x[:12].reshape(4, 3), mode="complete")  # qr-complete
        return q.sum()
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.grad(f)(X)
    check_error(e, dl.DloopNotImplementedError, "qr-complete", "mode='reduced'")


@pytest.mark.parametrize("call, marker, phrase", [
    (lambda la, x: la.qr(x[:9].reshape(3, 3), mode="r")[0], "mode-r", "'complete'"),  # mode-r
    (lambda la, x: la.solve(x[:9].reshape(3, 3), x[:4]), "solve-4", "does not fit"),  # solve-4
    (lambda la, x: la.matrix_norm(x[:9].reshape(3, 3), ord=3), "ord-3", "'nuc'"),  # ord-3
])
def test_bad_arguments(call, marker, phrase):
    with pytest.raises(dl.DloopValueError) as e:
        dl.grad(lambda x: call(x.__array_namespace__().linalg, x).sum())(X)
    check_error(e, dl.DloopValueError, marker, phrase)


def test_numpy_qr_modes_without_a_gradient():
    def f(x):
        return np.linalg.qr(x[:9].reshape(3, 3), mode="r").sum()  # np-qr-r
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.grad(f)(X)
    check_error(e, dl.DloopNotImplementedError, "np-qr-r", "mode='reduced'")


@pytest.mark.parametrize("shape", [(2, 2), (4, 3), (3, 4), (2, 3, 3)])
def test_pinv_with_dropped_singular_values(shape):
    """pinv(a, rtol) inverts a's truncation to the singular values above rtol * max: where
    that rank does not change, its gradient includes how the truncation moves with a (the
    rank-r formula alone was 30% off for a 2 x 2 matrix whose smaller value is dropped)."""
    x0 = np.random.default_rng(7).uniform(-1.0, 1.0, int(np.prod(shape)))
    w = np.random.default_rng(8).standard_normal(shape[:-2] + shape[:-3:-1])
    s = np.linalg.svd(x0.reshape(shape), compute_uv=False)
    rtol = (s[..., -1] + s[..., -2]) / 2 / s[..., 0]        # the smallest value dropped
    assert (np.abs(s[..., -2:] - (rtol * s[..., 0])[..., None]) > 0.05).all(), s

    def f(x, la):
        return (w * la.pinv(x.reshape(shape), rtol=rtol)).sum()
    got = dl.grad(lambda x: f(x, x.__array_namespace__().linalg))(x0)
    assert_close(got, finite_difference(lambda x: f(x, np.linalg), x0), rtol=1e-6, atol=1e-7)
