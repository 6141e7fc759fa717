"""SciPy's array-API functions inside dloop.grad, unchanged: after a per-element loop, and
inside a collective loop's body, each gradient compared with central finite differences of the
same program run on NumPy. Functions that cannot work for a reason on SciPy's side, and the
few that wait on a gap dloop has not closed (SCIPY_SIDE, DLOOP_SIDE), are expected failures
(strict: one that starts working fails the suite until it is moved)."""

import numpy as np
import pytest

import dloop as dl
from helpers import (after_per_element_loop, assert_close, finite_difference,
                     summed_collective_loop)
import scipy_cases_fft
import scipy_cases_more
from scipy_cases import CASES, X, _first

CASES = {**CASES, **scipy_cases_more.CASES, **scipy_cases_fft.CASES}

N = np.array([2, 0, 3, 1, 2, 4, 1, 3, 0, 2, 1, 3])

# name: SciPy's reason (see docs/scipy.md)
SCIPY_SIDE = {
    "stats.hmean": "branches in Python on the data (if xp.any(x < 0): warn)",
    "stats.pmean": "branches in Python on the data (if xp.any(x < 0): warn)",
    "stats.iqr": "stats.quantile branches in Python on whether the data has NaNs",
    "stats.median_abs_deviation": "stats.quantile branches in Python on whether the data has "
                                  "NaNs",
    "stats.quantile": "branches in Python on whether the data has NaNs",
    "stats.power_divergence": "checks in Python that the observed and expected sums agree",
    "stats.chisquare": "checks in Python that the observed and expected sums agree",
    "stats.fligner": "stats.quantile (the median) branches in Python on the data's NaNs",
    "stats.false_discovery_control": "checks in Python that the p-values lie in [0, 1]",
    "stats.yeojohnson_llf": "boolean-mask indexing (x[x >= 0]): a shape that depends on data",
    "stats.kruskal": "rankdata: boolean-mask indexing, a shape that depends on data",
    "stats.friedmanchisquare": "rankdata: boolean-mask indexing, a shape that depends on data",
    "stats.rankdata": "boolean-mask indexing, a shape that depends on data",
    "stats.mood": "rankdata: boolean-mask indexing, a shape that depends on data",
    "stats.chatterjeexi": "rankdata: boolean-mask indexing, a shape that depends on data",
    "stats.sigmaclip": "a Python while loop over data-dependent boolean-mask selections",
    "stats.mode": "unique_counts: a shape that depends on data",
    "stats.epps_singleton_2samp": "checks in Python that the evaluation points are positive",
    "differentiate.derivative": "boolean-mask indexing of the not-yet-converged abscissae",
    "differentiate.jacobian": "derivative: boolean-mask indexing of the abscissae",
    "differentiate.hessian": "derivative: boolean-mask indexing of the abscissae",
    "signal.filtfilt": "converts its arguments to NumPy (np.asarray(x))",
    "signal.iirnotch": "converts w0 and Q to Python floats (float(w0))",
    "signal.iirpeak": "converts w0 and Q to Python floats (float(w0))",
    "signal.iircomb": "converts w0 and Q to Python floats (float(w0))",
    "signal.gammatone": "converts freq to a Python float (float(freq))",
    "signal.cheb1ap": "computes with math.sqrt on rp (a Python float)",
    "signal.cheb2ap": "computes with math.sqrt on rs (a Python float)",
    "signal.ellipap": "computes with math.expm1 on rp (a Python float)",
    "signal.iirdesign": "branches in Python on the data (if xp.any(wp <= 0))",
    "signal.bode": "branches in Python on the data (if xp.all(den == 0))",
    "signal.impulse": "branches in Python on the data (if xp.all(den == 0))",
    "signal.sosfilt_zi": "a Python while loop on the data (while a[0] == 0.0)",
    "signal.place_poles": "branches in Python on the data (if sum(p == poles) > rank) and "
                          "iterates in Python",
}

# name: what dloop lacks, for a gap on dloop's side (none is open: docs/scipy.md); strict as
# well, so that closing one moves it to the passing list.
DLOOP_SIDE = {}


def _per_element(fn, x, traced):
    return _first(fn(after_per_element_loop(N, x, traced))).sum()


def _collective(fn, x, traced):
    return summed_collective_loop(lambda i, v: v * 0.99 + 0.01 * _first(fn(v)).sum(), x,
                                  traced)


def _case(name, program):
    fn = CASES[name]
    got = dl.grad(lambda x: program(fn, x, True))(X)
    expected = finite_difference(lambda x: program(fn, x, False), X)
    assert np.all(np.isfinite(expected)), "the case itself is not differentiable here"
    assert_close(got, expected, rtol=1e-5, atol=1e-7)


def _params():
    for name in CASES:
        reason = SCIPY_SIDE.get(name) or DLOOP_SIDE.get(name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_after_per_element_loop(name):
    _case(name, _per_element)


@pytest.mark.parametrize("name", list(_params()))
def test_inside_collective_loop(name):
    _case(name, _collective)


def test_cases_cover_scipy_capabilities():
    """The cases are SciPy's own list: every function its xp_capabilities table declares
    array-API capable off NumPy in these modules has a case (or a reason it has none)."""
    from scipy._lib._array_api import xp_capabilities_table
    declared = set()
    for f, cap in xp_capabilities_table.items():
        module = f.__module__.split(".")[1]
        if module in MODULES and not cap["np_only"] and not cap["cpu_only"]:
            declared.add(f"{module}.{getattr(f, '__qualname__', f.__name__)}")
    missing = declared - set(CASES) - set(NO_CASE)
    assert not missing, sorted(missing)
    assert not set(CASES) - declared, sorted(set(CASES) - declared)


# scipy.interpolate (RBFInterpolator) and scipy.ndimage are not generated here.
MODULES = ("special", "stats", "integrate", "constants", "optimize", "cluster", "linalg",
           "differentiate", "signal", "spatial", "fft")


# Declared capable, but not functions of an array that a gradient could flow through.
NO_CASE = {
    "integrate.qmc_quad": "integrates a Python callable over a box",
    "integrate.tanhsinh": "integrates a Python callable (adaptive, data-dependent steps)",
    "integrate.nsum": "sums a Python callable (adaptive, data-dependent steps)",
    "integrate.cubature": "integrates a Python callable (adaptive)",
    "stats.bootstrap": "resamples with a random generator; a statistic of random draws",
    "stats.monte_carlo_test": "a statistic of random draws",
    "stats.permutation_test": "a statistic of random permutations",
    "stats.power": "simulates with a random generator",
    "stats._xp_searchsorted": "a private helper",
    **scipy_cases_more.NO_CASE,
}


def test_logsumexp_far_past_overflow():
    """SciPy computes log(sum(exp(a))) as a fallback and drops it with xp.where when it
    overflowed: the dropped branch behind the sum made the gradient NaN (design.md 23)."""
    import scipy.special as special
    x = np.array([800.0, 1.0, 2.0])
    e = np.exp(x - 800.0)
    assert_close(dl.grad(special.logsumexp)(x), e / e.sum(), rtol=1e-15)
    g = dl.grad(lambda x: special.logsumexp(x.reshape(2, 2) * 1000, axis=1).sum())(
        np.array([0.9, 0.1, 0.2, 0.8]))
    assert_close(g, [1000.0, 0.0, 0.0, 1000.0], rtol=1e-15, atol=1e-200)


def test_oaconvolve_adds_through_views():
    """scipy.signal.oaconvolve (cpu_only in SciPy's table, but it runs) adds each block's
    overlap in place through a view of the result (ret_overpart += overpart)."""
    import scipy.signal as signal
    k = np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(dl.jit(lambda x: signal.oaconvolve(x, k))(X), np.convolve(X, k),
                               rtol=1e-13)
    w = np.cos(np.arange(X.size + 2.0))
    got = dl.grad(lambda x: (signal.oaconvolve(x, k) * w).sum())(X)
    assert_close(got, np.convolve(w, k[::-1], mode="valid"), rtol=1e-12)
