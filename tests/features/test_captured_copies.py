"""A large captured array's copy is kept from one trace to the next (trace/captured_copies.py)
and reused only while the array holds the same bits: a change in place between calls, or
inside the function after a use, must give the gradient of the new values."""

import gc

import numpy as np
import pytest

import dloop as dl
from dloop.trace import captured_copies, tracer

N = captured_copies.MIN_BYTES // 8 + 3            # float64 / int64 elements: above the bound


def _loss(trips, scale):
    return lambda x: dl.fori_loop(0, trips, lambda i, v: v * scale, x).sum()


@pytest.mark.parametrize("where", ["trips", "scale"])
def test_a_large_captured_array_changed_between_calls_gives_the_new_gradient(where, backend):
    """d/dx sum(x * scale^trips) = scale^trips, per element: exact in float64 for scales
    that are powers of two."""
    rng = np.random.default_rng(0)
    trips = rng.integers(0, 6, N)
    scale = np.full(N, 0.5)
    x = rng.uniform(0.5, 1.5, N)
    grad = dl.grad(_loss(trips, scale))
    np.testing.assert_array_equal(grad(x), scale ** trips)
    np.testing.assert_array_equal(grad(x), scale ** trips)        # the kept copy reused
    if where == "trips":
        trips[::7] += 3                                     # longer loops: a larger tape
    else:
        scale[N // 2:] = 0.25
    np.testing.assert_array_equal(grad(x), scale ** trips)
    np.testing.assert_array_equal(grad(x), scale ** trips)


def test_a_large_captured_array_changed_after_its_use_in_the_function():
    w = np.ones(N)
    x = np.linspace(0.0, 1.0, N)

    def f(x):
        y = x * w
        w[:] = 2.0
        out = (y + x * w).sum()
        w[:] = 1.0                    # as the next call finds it
        return out

    for _ in range(2):
        np.testing.assert_array_equal(dl.grad(f)(x), np.full(N, 3.0))


def test_the_kept_copy_is_reused_read_only_and_forgotten_with_its_array():
    w = np.arange(float(N))
    with tracer.Builder(None) as b:
        first = b.consts[b.const_var(w)]
    with tracer.Builder(None) as b:
        second = b.consts[b.const_var(w)]
    assert second is first and first is not w
    np.testing.assert_array_equal(first, w)
    assert not first.flags.writeable and captured_copies.immutable(first)
    w[-1] = -1.0
    with tracer.Builder(None) as b:
        third = b.consts[b.const_var(w)]
    assert third is not first and third[-1] == -1.0
    assert not captured_copies.immutable(first)                # replaced
    del w, b                       # (the builder keeps what it traced)
    gc.collect()
    assert not captured_copies.immutable(third)


def test_kept_copies_are_bounded_least_recently_used_first(monkeypatch):
    monkeypatch.setattr(captured_copies, "MAX_BYTES", 2 * N * 8)
    arrays = [np.full(N, float(k)) for k in range(3)]
    copies = [captured_copies.copy_of(a) for a in arrays]
    assert [captured_copies.immutable(c) for c in copies] == [False, True, True]
    assert captured_copies.copy_of(arrays[1]) is copies[1]
    assert captured_copies.copy_of(arrays[0]) is not copies[0]      # made anew, kept again
    assert [captured_copies.immutable(c) for c in copies] == [False, True, False]


def test_small_and_strided_arrays_are_copied_every_time():
    small = np.ones(16)
    strided = np.ones(2 * N)[::2]
    assert captured_copies.copy_of(small) is None
    assert captured_copies.copy_of(strided) is None


def test_threads_tracing_with_one_large_captured_array():
    """Threads that capture the same array share its kept copy (or make their own while
    another is made): every gradient is that of the array's values."""
    from concurrent.futures import ThreadPoolExecutor
    rng = np.random.default_rng(1)
    trips = rng.integers(0, 6, N)
    x = rng.uniform(0.5, 1.5, N)
    grad = dl.grad(_loss(trips, 0.5))
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: grad(x), range(12)))
    for g in results:
        np.testing.assert_array_equal(g, 0.5 ** trips)
