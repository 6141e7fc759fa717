"""The cuda backend's semantics: its CUDA C against the interpreter and NumPy, on a GPU
(NumPy references computed on the CPU; skipped without one). Each test pins a NumPy edge
case the CUDA C must reproduce exactly (integer division and modulo by 0 and -1, shifts out
of range, saturating float -> int, NaN and signed zeros in max/min/sign/copysign, round half
to even, int -> float rounding, bools, uint64 inputs, float32 loops staying float32)."""

import warnings

import numpy as np
import pytest

import dloop as dl
from dloop.backends.base import available

_GPU_OK, _GPU_WHY = available("cuda")
needs_gpu = pytest.mark.skipif(not _GPU_OK, reason=_GPU_WHY)


@pytest.fixture
def cuda():
    if not _GPU_OK:
        pytest.skip(_GPU_WHY)
    previous = dl.config.backend
    dl.config.update("backend", "cuda")
    yield
    dl.config.update("backend", previous)


def _numpy(f, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f(*args)


def _same(got, want):
    got = [np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))]
    want = [np.asarray(w) for w in (want if isinstance(want, tuple) else (want,))]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w)
        if w.dtype.kind == "f":            # signed zeros too (a NaN's sign is unspecified)
            numbers = ~np.isnan(w)
            np.testing.assert_array_equal(np.signbit(g[numbers]), np.signbit(w[numbers]))


@needs_gpu
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_modulo_and_shifts_at_the_edges(cuda, dtype):
    lo = np.iinfo(dtype).min
    x = np.array([7, -7, 7, -7, lo, lo, 5, -1, 0, np.iinfo(dtype).max], dtype)
    y = np.array([2, 2, -2, -2, -1, 0, 0, -1, -3, -1], dtype)
    s = np.array([0, 1, -1, 63, 64, 31, 32, 200, -64, 3], dtype)

    def f(x, y, s):
        return x // y, x % y, x << s, x >> s, x * y, -x, np.abs(x), np.sign(x)
    _same(dl.jit(f)(x, y, s), _numpy(f, x, y, s))


@needs_gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_edges_match_numpy(cuda, dtype):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.5, -2.5, 0.5, -0.5, 1.5, 7.0, -7.0,
                  1e30, 5e-324 if dtype == np.float64 else 1e-45], dtype)
    y = np.array([0.0, -0.0, np.nan, -0.0, 0.0, -2.0, 2.0, np.inf, -np.inf, 0.0, 3.0, -3.0,
                  -1.0, 2.0], dtype)

    def f(x, y):
        return (x // y, x % y, np.maximum(x, y), np.minimum(x, y), np.copysign(x, y),
                np.sign(x), np.round(x), np.floor(x), np.ceil(x), np.trunc(x), np.abs(x), -x,
                x / y, np.sqrt(x), x < y, x != y)
    _same(dl.jit(f)(x, y), _numpy(f, x, y))


@needs_gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_to_int_saturates_and_nan_gives_zero(cuda, dtype):
    """docs/math.md's pinned rule (core.saturating_convert), not C's undefined cast."""
    from dloop.kernel.core import saturating_convert
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, -3e9, 2.0 ** 31, -2.0 ** 31,
                  2.0 ** 63, -2.0 ** 63, -2.7, 2.7, -0.0], dtype)
    got = dl.jit(lambda x: (x.astype(np.int32), x.astype(np.int64), x.astype(bool)))(x)
    _same(got, (saturating_convert(x, np.int32), saturating_convert(x, np.int64),
                x.astype(bool)))


@needs_gpu
def test_int_to_float_rounds_once_to_nearest_even(cuda):
    v = np.array([2 ** 24 + 1, -(2 ** 24 + 1), 2 ** 53 + 1, -(2 ** 53 + 1), 2 ** 63 - 1,
                  -2 ** 63, 2 ** 62 + 2 ** 38 + 1, (1 << 40) + (1 << 16) + 1], np.int64)
    got = dl.jit(lambda v: (v.astype(np.float32), v.astype(np.float64),
                            v.astype(np.int32)))(v)
    _same(got, (v.astype(np.float32), v.astype(np.float64), v.astype(np.int32)))


@needs_gpu
def test_bools_and_uint64_inputs(cuda):
    b, c = np.array([True, False, True, False]), np.array([True, True, False, False])
    f = lambda b, c: (b & c, b | c, b ^ c, ~b, b < c, np.maximum(b, c), b + c, b * c,  # noqa
                      b.astype(np.float32), np.where(b, 1.5, -0.0))
    _same(dl.jit(f)(b, c), f(b, c))
    u = np.array([0, 1, 2 ** 40, 2 ** 63 - 1], np.uint64)
    np.testing.assert_array_equal(dl.jit(lambda u: u * 2)(u), u.astype(np.int64) * 2)


@needs_gpu
def test_float32_loop_stays_in_float32(cuda):
    """A float32 carry with float32 constants: each step rounds to float32 (the CUDA C holds
    no double literal or double math function for it)."""
    n = np.array([0, 1, 5, 17])
    x = np.linspace(0.25, 1.0, 4).astype(np.float32)
    a = np.float32(0.7)
    got = dl.jit(lambda x: dl.fori_loop(0, n, lambda i, v: v * a + np.float32(0.1), x))(x)
    want = x.copy()
    for j in range(4):
        for _ in range(n[j]):
            want[j] = want[j] * a + np.float32(0.1)
    _same(got, want)
