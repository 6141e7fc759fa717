"""Adstack sizing split over threads (adstack/parallel.py) gives what the one-thread NumPy
computation gives, and gradients sized that way are exact."""

import numpy as np
import pytest

import dloop as dl
from dloop.adstack import native, parallel
from dloop.adstack.native import scan_into
from dloop.runtime.execute import work_order


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_CHUNK", 1000)      # several parts on small arrays
    with dl.config.override(num_threads=4):
        yield


@pytest.mark.parametrize("n", [0, 1, 999, 4001, 12345])
def test_scan_gather_scatter_match_numpy(n):
    rng = np.random.default_rng(n)
    values = rng.integers(0, 1000, n)
    expected = np.zeros(n, np.int64)
    if n:
        np.cumsum(values[:-1], out=expected[1:])
    np.testing.assert_array_equal(parallel.exclusive_cumsum(values), expected)
    perm = rng.permutation(n)
    np.testing.assert_array_equal(parallel.take(values, perm), values[perm])
    out = np.full(n, -1, np.int64)
    parallel.scatter(out, perm, values)
    expected = np.empty(n, np.int64)
    expected[perm] = values
    np.testing.assert_array_equal(out, expected)
    start, total = parallel.starts_in_order(values, perm)
    in_order = np.zeros(n, np.int64)
    if n:
        np.cumsum(values[perm][:-1], out=in_order[1:])
    expected = np.empty(n, np.int64)
    expected[perm] = in_order
    np.testing.assert_array_equal(start, expected)
    assert total == int(values.sum())


@pytest.mark.parametrize("nbytes", [0, 1, 1000, 4099, 1 << 16])
def test_copy_in_parts_is_the_copy(nbytes):
    src = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    dst = np.zeros(nbytes + 8, np.uint8)
    parallel.copy(dst[3:3 + nbytes], src, part_bytes=1000)
    np.testing.assert_array_equal(dst[3:3 + nbytes], src)
    assert not dst[:3].any() and not dst[3 + nbytes:].any()


@pytest.mark.parametrize("n", [0, 1, 4001, 40_000])
def test_equal_in_parts_finds_any_difference(n):
    """40,000 elements: 4 parts of 10,000 (4 * MIN_CHUNK each)."""
    a = np.random.default_rng(n).integers(0, 1000, n)
    assert parallel.equal(a, a.copy())
    for at in {0, n // 3, n - 1} if n else ():
        b = a.copy()
        b[at] += 1
        assert not parallel.equal(a, b)
    grid = a[: n - n % 5].reshape(5, -1)
    assert parallel.equal(grid, grid.copy()) and parallel.equal(grid.T, grid.T.copy())
    if grid.size:
        other = grid.T.copy()
        other[-1, -1] -= 1
        assert not parallel.equal(grid.T, other)      # strided: compared in one part


def test_small_arrays_are_equal_by_their_bits():
    """Up to 4 KB, equal() compares bytes: the same bits size the same, so a NaN matches
    itself, and -0.0 against 0.0 only sizes again."""
    nan = np.array([1.0, np.nan])
    assert parallel.equal(nan, nan.copy())
    assert not parallel.equal(np.array([-0.0]), np.array([0.0]))
    assert parallel.equal(np.arange(512, dtype=np.int64), np.arange(512, dtype=np.int64))
    assert not parallel.equal(np.arange(512, dtype=np.int64),       # 4096 bytes
                              np.arange(1, 513, dtype=np.int64))
    beyond = np.full(513, np.nan)                                   # by value past 4 KB
    assert not parallel.equal(beyond, beyond.copy())


@pytest.mark.parametrize("n", [0, 1, 2, 17, 4001, 12345])
def test_compiled_scan_matches_numpy(n):
    """adstack/scan.py, alone (offset, scale, inverted) and through the parts of
    exclusive_cumsum, against NumPy's cumsum."""
    rng = np.random.default_rng(n)
    values = rng.integers(0, 1 << 40, n)
    before = np.zeros(n, np.int64)
    if n:
        np.cumsum(values[:-1], out=before[1:])
    out = np.full(n, 7, np.int64)
    assert scan_into(values, out, offset=-5, scale=3) == -5 + 3 * int(values.sum())
    np.testing.assert_array_equal(out, -5 + 3 * before)
    assert scan_into(values, out, invert=True) == int(values.sum())
    np.testing.assert_array_equal(out, ~before)
    np.testing.assert_array_equal(parallel.exclusive_cumsum(values, invert=True), ~before)
    small = (values % 1000).astype(np.int32)
    np.testing.assert_array_equal(parallel.exclusive_cumsum(small),
                                  np.concatenate([[0], np.cumsum(small, dtype=np.int64)])[:n])


@pytest.mark.parametrize("lanes", [4, 8, 32])
def test_sampled_padding_counts_each_sampled_group(lanes):
    rng = np.random.default_rng(lanes)
    values = rng.integers(0, 100, 10_007)
    groups = values[:len(values) // lanes * lanes].reshape(-1, lanes)[::3]
    padding, total, count = parallel.sampled_padding(values, lanes, len(values) // lanes // 3)
    assert (padding, total, count) == (int(groups.max(axis=1).sum()) * lanes - int(
        groups.sum()), int(groups.sum()), groups.size)


@pytest.mark.parametrize("n", [0, 1, 999, 4001, 12345])
@pytest.mark.parametrize("lanes", [3, 4, 8, 16])    # 3: the per-lane loops only
@pytest.mark.parametrize("ordered", [False, True])
def test_interleaved_layout_in_parts_matches_one_pass(n, lanes, ordered):
    """Each group of `lanes` threads (in run order) shares its largest capacity; groups'
    slots follow each other, each thread at its lane."""
    rng = np.random.default_rng(n)
    cap = rng.integers(0, 50, n)
    order = rng.permutation(n) if ordered else None
    start, raised, total = parallel.interleaved(cap, order, lanes)
    run = np.arange(n) if order is None else order
    groups = -(-n // lanes)
    padded = np.zeros(groups * lanes, np.int64)
    padded[:n] = cap[run]
    group_cap = padded.reshape(groups, lanes).max(axis=1)
    group_start = np.concatenate([[0], np.cumsum(group_cap * lanes)[:-1]]).astype(np.int64)
    thread = np.arange(n)
    np.testing.assert_array_equal(raised[run], group_cap[thread // lanes])
    np.testing.assert_array_equal(start[run], group_start[thread // lanes] + thread % lanes)
    assert total == int(group_cap.sum()) * lanes
    own_start, own, own_total = parallel.interleaved(cap, order, lanes, shared=False)
    assert own is cap and own_total == total
    np.testing.assert_array_equal(own_start, start)
    padding = total - int(cap.sum())
    if padding:
        assert parallel.interleaved(cap, order, lanes, int(cap.sum()) // padding + 1) is None
        assert parallel.interleaved(cap, order, lanes, int(cap.sum()) // padding) is not None


@pytest.mark.parametrize("n", [0, 1, 999, 4001, 12345])
def test_work_order_is_a_permutation_sorted_within_each_part(n):
    rng = np.random.default_rng(n)
    work = rng.integers(0, 5000, n)
    order = work_order(work)
    np.testing.assert_array_equal(np.sort(order), np.arange(n))
    key = 255 - (work >> max(0, int(work.max(initial=0)).bit_length() - 8))
    for lo, hi in parallel.parts(n):
        part = order[lo:hi]
        assert np.all((part >= lo) & (part < hi))
        assert np.all(np.diff(key[part]) >= 0)            # longest work first
        np.testing.assert_array_equal(part, lo + np.argsort(key[lo:hi], kind="stable"))


def test_gradient_sized_in_parts_is_exact():
    rng = np.random.default_rng(0)
    n_elems = 20_000
    trips = rng.integers(0, 30, n_elems)
    x = rng.random(n_elems)
    g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.9, x).sum())(x)
    np.testing.assert_allclose(g, 0.9 ** trips, rtol=1e-13)


def test_threads_needing_different_pools_share_it_safely():
    """Launches of different sizes from several threads at once (2 and 4 parts here): one may
    replace the pool with a larger one while another submits; every result stays exact."""
    import threading
    rng = np.random.default_rng(3)
    inputs = [rng.integers(0, 100, n) for n in [2500, 9000, 2100, 12000] * 3]
    errors = []

    def work(values):
        try:
            for _ in range(5):
                expected = np.concatenate([[0], np.cumsum(values)[:-1]])
                np.testing.assert_array_equal(parallel.exclusive_cumsum(values), expected)
        except Exception as e:          # reported below, on the test's thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(v,)) for v in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_elements_are_ordered_only_where_lanes_would_idle():
    """On the cpu backend (lanes = the host's vector width), loops of nearly equal length
    keep element order (no sort, no permuted layout); uniform trips in [0, 200) are sorted.
    Both gradients are exact either way."""
    from dloop.backends.base import available, get_backend
    from dloop.runtime.execute import sorting_pays
    if not available("cpu")[0]:
        pytest.skip("needs the cpu backend")
    caps = get_backend("cpu").caps
    rng = np.random.default_rng(0)
    even = rng.integers(3, 6, 4096)         # a Newton solve's 3 to 5 steps
    spread = rng.integers(0, 200, 4096)
    assert not sorting_pays(even, caps)
    assert sorting_pays(spread, caps)
    with dl.config.override(backend="cpu"):
        for trips in (even, spread):
            x = rng.random(trips.size)
            g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.9, x).sum())(x)
            np.testing.assert_allclose(g, 0.9 ** trips, rtol=1e-13)


def test_element_order_is_kept_read_only_and_reused(monkeypatch):
    """Kernels compiled to run in an order that run in element order read one kept,
    read-only 0 .. n-1 per size and backend (Backend.element_order), made once, not per
    launch; the reverse kernel reuses the forward's decision instead of deciding again. A
    second backend of the same name (another device) keeps its own."""
    from dloop.backends.base import available, get_backend
    from dloop.backends.cpu.launch import CpuBackend
    from dloop.runtime import execute
    if not available("cpu")[0]:
        pytest.skip("needs the cpu backend")
    made, decided = [], []
    real, real_order = np.arange, execute.Execution._order
    # Only the aranges of a launch's size count: interleaved layouts add lane offsets.
    monkeypatch.setattr(np, "arange",
                        lambda *a, **k: (max(a) >= 5000 and made.append(a)) or real(*a, **k))
    monkeypatch.setattr(execute.Execution, "_order",
                        lambda self, *a: decided.append(1) or real_order(self, *a))
    be = get_backend("cpu")
    monkeypatch.setattr(be, "_element_orders", {})
    order = be.element_order(5000)
    assert order is be.element_order(5000)
    np.testing.assert_array_equal(order, real(5000))
    assert not order.flags.writeable and len(made) == 1
    assert CpuBackend().element_order(5000) is not order
    made.clear()
    trips = np.random.default_rng(1).integers(3, 6, 5000)     # keeps element order
    x = np.random.default_rng(2).random(trips.size)
    with dl.config.override(backend="cpu"):
        f = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.9, x).sum())
        for _ in range(3):
            np.testing.assert_allclose(f(x), 0.9 ** trips, rtol=1e-13)
    # Decided by the first call's forward kernel; later calls reuse its sizing (same trips).
    assert len(made) == 0 and len(decided) == 1


@pytest.mark.parametrize("n", [999, 4001, 12345])
def test_capacities_evaluated_in_parts_match_one_thread(n):
    """trips = max(hi - lo, 0) * 3 + k, over threads, equals the whole-array evaluation bit
    for bit, saturated elements (bounds near 2**63) included; a read broadcast along part of
    the shape is evaluated whole."""
    from dloop.adstack import capacity
    from dloop.ir.graph import Aval, Var
    rng = np.random.default_rng(n)
    lo_v, hi_v, k_v = (Var(Aval((n,), np.dtype(np.int64))) for _ in range(3))
    expr = capacity.Binary("+", capacity.Binary("*", capacity.trip_count(
        capacity.Read(lo_v), capacity.Read(hi_v)), capacity.Const(3)), capacity.Read(k_v))
    hi = rng.integers(-5, 300, n)
    hi[::97] = 2 ** 63 - 1
    env = {lo_v: rng.integers(0, 50, n), hi_v: hi, k_v: np.array(7)}
    assert capacity._flat_reads(expr, env, (n,)) is not None
    split = capacity.evaluate(expr, env, (n,))
    with dl.config.override(num_threads=1):
        whole = capacity.evaluate(expr, env, (n,))
    np.testing.assert_array_equal(split, whole)
    assert split.max() == capacity.SATURATED
    env[lo_v] = rng.integers(0, 50, (1, n))[:, :n]
    assert capacity._flat_reads(expr, env, (3, n)) is None


@pytest.mark.parametrize("n", [1, 7, 1000, 1 << 17])
def test_extremes_are_numpy_s_in_one_pass(n, monkeypatch):
    """parallel.extremes: the compiled pass's least, largest and (wrapping) total are
    NumPy's, for contiguous int64 arrays (in one part per thread from 4 * MIN_CHUNK
    elements) and for others (NumPy's own reductions then)."""
    rng = np.random.default_rng(n)
    values = rng.integers(-2 ** 62, 2 ** 62, n)     # sums that wrap
    values[n // 2] = -2 ** 63                       # each extreme in a part of its own
    values[-1] = 2 ** 63 - 1
    compiled, parts = native.extremes, []
    monkeypatch.setattr(native, "extremes", lambda v: parts.append(v.size) or compiled(v))
    for array in (values, values[::2], values.astype(np.int32)):
        if array.size:
            want = (int(array.min()), int(array.max()), int(array.sum(dtype=np.int64)))
            assert parallel.extremes(array) == want
    first = [n // 4] * 4 if n == 1 << 17 else [n]      # the contiguous array's parts
    assert parts[:len(first)] == first


def test_extremes_in_parts_wrap_a_total_past_int64_as_numpy_does():
    """Four parts of 2^62 each: each part's sum fits, their total 2^64 wraps to 0, as NumPy's
    int64 sum does."""
    values = np.zeros(1 << 17, np.int64)
    values[:: 1 << 15] = 1 << 62
    assert len(parallel.parts(values.size, np, 4 * parallel.MIN_CHUNK)) == 4
    assert int(values.sum()) == 0
    assert parallel.extremes(values) == (0, 1 << 62, 0)


def test_extremes_are_remembered_within_one_sizing(monkeypatch):
    """Inside remembering() one array's extremes are computed once, however many times
    sizing asks; outside it, and for another array, again."""
    calls = []
    compiled = native.extremes
    monkeypatch.setattr(native, "extremes", lambda v: calls.append(1) or compiled(v))
    a, b = np.arange(10, dtype=np.int64), np.arange(5, dtype=np.int64)
    with parallel.remembering():
        assert parallel.extremes(a) == parallel.extremes(a) == (0, 9, 45)
        assert parallel.extremes(b) == (0, 4, 10)
    assert len(calls) == 2
    parallel.extremes(a)
    assert len(calls) == 3


def test_extremes_soon_start_a_device_s_pass_at_once_and_read_it_when_called(monkeypatch):
    """extremes_soon, which a guessed launch's trip counts are summed up with before its
    wait: a device's registered pass is started when asked and read only when the returned
    function is called; host arrays give their extremes, an empty one (0, 0, 0)."""
    events = []

    class Device(np.ndarray):
        pass

    def start(values):
        events.append("start")
        return lambda: events.append("read") or (1, 2, 3)
    monkeypatch.setitem(parallel.DEVICE_EXTREMES, Device, start)
    soon = parallel.extremes_soon(np.arange(4, dtype=np.int64).view(Device))
    assert events == ["start"]
    assert soon() == (1, 2, 3) and events == ["start", "read"]
    assert parallel.extremes_soon(np.array([4, -1, 7], np.int64))() == (-1, 7, 10)
    assert parallel.extremes_soon(np.zeros(0, np.int64))() == (0, 0, 0)
