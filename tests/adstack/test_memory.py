"""Adstack memory: exact sizes, proportional to work, and the heap's growth policy."""

import numpy as np
import pytest

import dloop as dl
from dloop.errors import DloopMemoryError
from dloop.runtime.heap import Heap
from helpers import tape_slots


def _grad(x, n):
    return dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.9 + x * 0.1, x).sum())(x)


def test_bytes_used_is_total_trips_times_slot(backend):
    n = np.array([0, 3, 10, 1])
    _grad(np.ones(4), n)
    slots, = tape_slots(backend, n)
    assert slots >= n.sum()
    assert dl.memory_stats()["adstack_bytes_used"] == slots * 8
    assert dl.memory_stats()["adstack_bytes_reserved"] >= slots * 8


def test_storage_proportional_to_work_not_longest_trip(backend):
    size = 2000
    skewed = np.full(size, 10)
    skewed[: size // 100] = 1000
    uniform = np.full(size, skewed.sum() // size)
    uniform[: skewed.sum() - uniform.sum()] += 1
    assert uniform.sum() == skewed.sum()
    x = np.linspace(0, 1, size)
    _grad(x, skewed)
    used_skewed = dl.memory_stats()["adstack_bytes_used"]
    _grad(x, uniform)
    used_uniform = dl.memory_stats()["adstack_bytes_used"]
    # Within 1.2 x (trips + 2) slots: the padding of interleaved tapes (caps.tape_lanes) stays
    # below the two slots per element that the bound allows.
    assert used_skewed <= 1.2 * (skewed + 2).sum() * 8
    assert used_uniform <= 1.2 * (uniform + 2).sum() * 8
    assert used_skewed < size * 1000 * 8 / 10


def test_bytes_grow_linearly_with_trip_count(backend):
    x = np.ones(100)
    used = []
    for trips in (10, 20, 40):
        _grad(x, trips)
        used.append(dl.memory_stats()["adstack_bytes_used"])
    assert used == [tape_slots(backend, np.full(100, t))[0] * 8 for t in (10, 20, 40)]
    assert used[2] == 2 * used[1] == 4 * used[0]


def test_launch_without_elements_allocates_nothing(backend):
    _grad(np.zeros(0), np.zeros(0, np.int64))
    assert dl.memory_stats()["adstack_bytes_used"] == 0


class _Allocator:
    def __init__(self, fail_above=None):
        self.fail_above, self.calls = fail_above, []

    def __call__(self, nbytes):
        self.calls.append(nbytes)
        if self.fail_above is not None and nbytes > self.fail_above:
            raise MemoryError
        return np.zeros(nbytes, np.uint8)


def _heap(alloc):
    from dloop.backends.base import Caps, HostMemory

    class Memory(HostMemory):
        caps = Caps()

        def heap_alloc(self, nbytes):
            return alloc(nbytes)
    return Heap(Memory())


def test_heap_grows_to_twice_current_and_keeps_live_data():
    alloc = _Allocator()
    heap = _heap(alloc)
    lease = heap.lease()
    first = lease.alloc(1000, np.uint8)
    heap.view(first)[:] = 7
    lease.alloc(500, np.uint8)                      # needs 1024 + 500: grows to 2 x 1000
    lease.alloc(5000, np.uint8)                     # needs 1536 + 5000 > 2 x 2000: to that
    assert alloc.calls == [1000, 2000, 6536]
    assert (heap.view(first) == 7).all()            # each copy kept the live regions


def test_heap_retries_at_exactly_required():
    alloc = _Allocator(fail_above=1500)
    heap = _heap(alloc)
    lease = heap.lease()
    lease.alloc(1000, np.uint8)
    lease.alloc(400, np.uint8)
    assert alloc.calls == [1000, 2000, 1424]      # 2 x 1000 failed: exactly 1024 + 400
    assert heap.reserved == 1424


def test_heap_failure_is_a_clear_error():
    heap = _heap(_Allocator(fail_above=100))
    with pytest.raises(DloopMemoryError, match="1,000 bytes"):
        heap.lease().alloc(1000, np.uint8)


def test_max_adstack_bytes_is_enforced(backend):
    dl.config.update("max_adstack_bytes", 1000)
    try:
        with pytest.raises(DloopMemoryError, match="max_adstack_bytes"):
            _grad(np.ones(100), 10)
    finally:
        dl.config.update("max_adstack_bytes", 1 << 34)
    assert np.isfinite(_grad(np.ones(100), 10)).all()


def test_the_limit_counts_tapes_a_live_pullback_holds(backend):
    """The error blamed 'this launch' for bytes a live vjp pullback's tapes held below it."""
    x, n = np.ones(100), np.full(100, 10)
    _, pullback = dl.vjp(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.9 + x * 0.1, x), x)
    alone = dl.memory_stats()["adstack_bytes_used"]
    dl.config.update("max_adstack_bytes", alone + alone // 2)
    try:
        with pytest.raises(DloopMemoryError, match="held below it.*live vjp pullbacks"):
            _grad(x, n)
    finally:
        dl.config.update("max_adstack_bytes", 1 << 34)
    assert np.isfinite(pullback(np.ones(100))[0]).all()
    assert np.isfinite(_grad(x, n)).all()


def test_heap_is_reused_across_launches(backend):
    x = np.ones(1000)
    _grad(x, 20)
    reserved = dl.memory_stats()["adstack_bytes_reserved"]
    for _ in range(3):
        _grad(x, 20)
    assert dl.memory_stats()["adstack_bytes_reserved"] == reserved


def test_first_launch_with_only_empty_stacks(backend):
    import threading

    from dloop.backends.base import get_backend
    be = get_backend(backend)
    seen = {}

    def fresh_thread():                   # each thread has its own heap, which never grew
        x = np.array([0.5])
        seen["g"] = dl.grad(lambda x: dl.fori_loop(0, np.array([0]), lambda i, v: v * 2.0,
                                                   x).sum())(x)
        seen["buffer"] = be.heap.buffer
    t = threading.Thread(target=fresh_thread)
    t.start()
    t.join()
    assert seen["g"].tolist() == [1.0] and seen["buffer"] is None


def test_kept_pullback_pins_only_its_own_tapes(backend):
    """A live vjp pullback keeps its tapes; later calls reuse the heap above them instead of
    stacking one more tape per call."""
    n = np.full(1000, 50)
    _, pullback = dl.vjp(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.9, x), np.ones(1000))
    x = np.ones(2000)
    _grad(x, 40)
    reserved = dl.memory_stats()["adstack_bytes_reserved"]
    for _ in range(10):
        _grad(x, 40)
    assert dl.memory_stats()["adstack_bytes_reserved"] == reserved
    (g,) = pullback(np.ones(1000))
    np.testing.assert_allclose(g, np.full(1000, 0.9 ** 50))


def test_threads_have_their_own_heaps(backend):
    """Concurrent gradients of different functions and sizes equal the single-threaded ones,
    bit for bit (a shared heap once let one thread's growth move another's tapes)."""
    import threading
    rng = np.random.default_rng(0)
    cases = []
    for k in range(4):
        n = rng.integers(0, 40, size=100 + 37 * k)
        x = rng.random(100 + 37 * k)
        cases.append((dl.grad(lambda x, n=n, k=k: dl.fori_loop(
            0, n, lambda i, v: v * 0.97 + np.sin(v) * (0.1 + 0.01 * k), x).sum()), x))
    expected = [g(x) for g, x in cases]
    wrong = []

    def work(t):
        for r in range(10):
            g, x = cases[(t + r) % 4]
            if not np.array_equal(g(x), expected[(t + r) % 4]):
                wrong.append((t, r))
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_offsets_beyond_32_bits_are_refused_without_64_bit_integers(monkeypatch):
    """On a device whose kernels index with 32 bits (the toy backend of tests/toy_backend.py),
    a launch whose adstack offsets would not fit is refused before anything is allocated."""
    from dloop.backends import TABLE, Row
    monkeypatch.setitem(TABLE, "toy", Row("toy_backend", "ToyBackend", ()))
    previous = dl.config.backend
    dl.config.update("backend", "toy")
    try:
        n = np.array([2 ** 31])
        with pytest.raises(dl.DloopValueError, match="32 bits") as e, \
                dl.config.override(max_adstack_bytes=1 << 40):     # nothing is allocated
            dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.5, x).sum())(np.ones(1))
        assert __file__ in str(e.value)
        assert np.isfinite(_grad(np.ones(10), 5)).all()
    finally:
        dl.config.update("backend", previous)


def test_the_size_check_returns_the_exact_sum_past_its_float_filter(monkeypatch):
    """layout._check_size: where the float64 sum's margin overshoots max_adstack_bytes but
    the exact sum fits, the loop is accepted and the exact sum returned (loop_layout weighs
    a device layout's padding against it)."""
    from types import SimpleNamespace
    from dloop.adstack import layout
    cap = np.ones(1 << 16, np.int64)
    cap[0] = 1 << 46                   # longest x count passes 2^62: the float64 sum is used
    exact = int(sum(int(c) for c in cap))
    monkeypatch.setitem(vars(dl.config), "max_adstack_bytes", exact * 8)
    info = SimpleNamespace(carry_dtypes=[np.dtype(np.float64)], src=None)
    assert layout._slots_at_most(cap) * 8 > exact * 8          # the filter overshoots
    assert layout._check_size(info, cap) == exact
    monkeypatch.setitem(vars(dl.config), "max_adstack_bytes", exact * 8 - 1)
    with pytest.raises(DloopMemoryError, match="max_adstack_bytes"):
        layout._check_size(info, cap)
