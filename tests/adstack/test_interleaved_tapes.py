"""Interleaved tapes (kernel/kir.py, caps.tape_lanes = W) on the backends that size them on
the host and read negative starts as compact slices: the SIMD CPU renderer (a lane group
whose lanes push at one depth writes one vector, and any other pattern (lanes at different
depths, groups cut by a chunk's edge, bool and int carries) scatters) and Vulkan (groups of
32 threads). Both against closed forms and float64 central differences, over sizes that
leave partial groups and run on several threads."""

import numpy as np
import pytest

import dloop as dl
from dloop.adstack.layout import loop_layout
from dloop.backends.base import available, get_backend
from dloop.ir.graph import LoopInfo
from helpers import finite_difference, tape_slots


@pytest.fixture(autouse=True, params=["cpu", "vulkan"])
def backend(request):
    name = request.param
    ok, why = available(name)
    if not ok:
        pytest.skip(why)
    if get_backend(name).caps.tape_lanes == 1:
        pytest.skip(f"this host's {name} backend runs one lane")
    with dl.config.override(backend=name):
        yield name


@pytest.mark.parametrize("n", [1, 7, 8, 9, 1021, 70_001])
def test_lanes_at_one_depth(n, backend):
    """Trips in random order, so groups mix lengths and lanes drop out one by one."""
    trips = np.random.default_rng(n).integers(0, 40, n)
    x = np.random.default_rng(n + 1).uniform(0.5, 1.5, n)
    g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.97 + 0.01 * v * v, x).sum())

    def closed(x):
        v, d = x.copy(), np.ones_like(x)
        for i in range(int(trips.max(initial=0))):
            live = i < trips
            d = np.where(live, d * (0.97 + 0.02 * v), d)
            v = np.where(live, v * 0.97 + 0.01 * v * v, v)
        return d
    np.testing.assert_allclose(g(x), closed(x), rtol=1e-13)
    # Sorted groups pad little: the large cases interleave, at the predicted size.
    assert dl.memory_stats()["adstack_bytes_used"] == tape_slots(backend, trips)[0] * 8


@pytest.mark.parametrize("case", ["even", "one long in 64"])
def test_groups_that_pad_little_interleave(case, backend, monkeypatch):
    """Even trips interleave in element order; rare long elements get the elements sorted
    (by every backend's sort_cost), then interleaved. Both against a closed form, with
    interleaved starts (non-negative) and the predicted tape size."""
    from dloop.runtime import execute
    n = 20_000
    rng = np.random.default_rng(11)
    trips = np.full(n, 7)
    if case != "even":
        trips[rng.choice(n, n // 64, replace=False)] = 2000
    x = rng.uniform(0.5, 1.5, n)
    starts = []
    lay_out = execute.loop_layout

    def recorded(*args, **kwargs):
        layout = lay_out(*args, **kwargs)
        starts.append(int(np.asarray(layout.start).min()))
        return layout
    monkeypatch.setattr(execute, "loop_layout", recorded)
    g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.999 + 0.001, x).sum())(x)
    np.testing.assert_allclose(g, 0.999 ** trips, rtol=1e-12)
    assert starts and min(starts) >= 0
    assert dl.memory_stats()["adstack_bytes_used"] == tape_slots(backend, trips)[0] * 8


@pytest.mark.parametrize("n", [9, 4_099])
def test_groups_in_element_order_and_out_of_it(n, backend):
    """Rare long elements sorted first leave the rest in element order: groups of
    consecutive elements read, write and push as vectors, the others gather and scatter.
    Values stored by element, a 0-d input read by every lane and both gradients against a
    closed form: v_n = a (0.99^n + s (1 - 0.99^n))."""
    rng = np.random.default_rng(5)
    trips = np.full(n, 6)
    trips[rng.choice(n, max(1, n // 50), replace=False)] = 300
    a, s = rng.uniform(0.5, 2.0, n), np.float64(0.3)

    def f(a, s):
        v = dl.fori_loop(0, trips, lambda i, v: v * 0.99 + s * a * 0.01, a)
        return (v * v).sum(), v
    (_, v), (ga, gs) = dl.value_and_grad(f, argnums=(0, 1), has_aux=True)(a, s)
    decay = 0.99 ** trips
    c = decay + s * (1 - decay)
    np.testing.assert_allclose(v, a * c, rtol=1e-12)
    np.testing.assert_allclose(ga, 2 * a * c * c, rtol=1e-12)
    np.testing.assert_allclose(gs, np.sum(2 * a * a * c * (1 - decay)), rtol=1e-12)


def test_lanes_at_different_depths():
    """An inner loop of per-element length refilled per outer step: lanes of a group reach
    their pops and pushes at different depths."""
    n = 2_000
    rng = np.random.default_rng(3)
    outer, inner = rng.integers(0, 6, n), rng.integers(0, 9, n)
    x = rng.uniform(0.1, 1.0, n)

    def loss(x):
        def step(i, v):
            return dl.fori_loop(0, inner, lambda k, w: np.sin(w) * 0.9 + 0.05, v) * 1.01
        return dl.fori_loop(0, outer, step, x).sum()

    got = dl.grad(loss)(x)
    pick = rng.choice(n, 12, replace=False)
    want = finite_difference(lambda xs: loss_numpy(xs, outer[pick], inner[pick]), x[pick])
    np.testing.assert_allclose(got[pick], want, rtol=1e-7, atol=1e-9)


def loss_numpy(x, outer, inner):
    v = x.copy()
    for j in range(x.size):
        for _ in range(outer[j]):
            for _ in range(inner[j]):
                v[j] = np.sin(v[j]) * 0.9 + 0.05
            v[j] *= 1.01
    return v.sum()


def test_bool_and_int_carries_beside_a_float():
    """A while loop carrying a flag, a counter and a value: three stacks of three dtypes,
    each in its own region."""
    n = 4_099
    a = np.random.default_rng(4).uniform(0.2, 3.0, n)

    def solve(a):
        def body(c):
            v, k, up = c
            return np.where(up, v * 1.1, v * 0.95), k + 1, ~up
        v, k, _ = dl.while_loop(lambda c: c[0] < a + 1.0, body,
                                (np.full_like(a, 0.5), np.zeros(n, np.int64),
                                 np.ones(n, bool)))
        return (v * a).sum()

    got = dl.grad(solve)(a)
    v, up = np.full(n, 0.5), np.ones(n, bool)
    live = v < a + 1.0
    while live.any():
        v = np.where(live, np.where(up, v * 1.1, v * 0.95), v)
        up = np.where(live, ~up, up)
        live = v < a + 1.0
    # The trip count is locally constant in a: d(v a)/da = v.
    np.testing.assert_allclose(got, v, rtol=1e-13)


def test_a_layout_that_interleaving_would_pad_stays_compact(backend):
    """One long element among short ones: interleaved, its group would take W x 1000 slots
    for 1030 steps. The host layout keeps such a loop compact (negative starts, kir.py), and
    interleaves loops whose groups are about even."""
    lanes = get_backend(backend).caps.tape_lanes
    info = LoopInfo(loop_id=0, kind="fori", shape=(4,), carry_dtypes=(np.dtype(np.float64),),
                    invariant_modes=(), body=None)
    skewed = loop_layout(info, np.array([10, 1000, 10, 10]), lanes=lanes, compact=True)
    assert np.all(skewed.start < 0) and skewed.regions["float64"][1] == 1030
    np.testing.assert_array_equal(~skewed.start, [0, 10, 1010, 1020])
    even = loop_layout(info, np.full(4 * lanes, 30), lanes=lanes, compact=True)
    assert np.all(even.start >= 0) and even.regions["float64"][1] == 30 * 4 * lanes
    np.testing.assert_array_equal(even.start[:lanes], np.arange(lanes))

    trips = np.array([10, 1000, 10, 10])
    x = np.array([0.3, 0.6, 0.9, 1.2])
    g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v - 0.001 * v * v, x).sum())(x)
    assert dl.memory_stats()["adstack_bytes_used"] == 1030 * 8
    v, d = x.copy(), np.ones_like(x)
    for i in range(1000):
        live = i < trips
        d = np.where(live, d * (1 - 0.002 * v), d)
        v = np.where(live, v - 0.001 * v * v, v)
    np.testing.assert_allclose(g, d, rtol=1e-13)


def test_a_loop_whose_interleaved_tape_would_pass_the_limit_stays_compact(backend):
    """Trips of 4 or 5 in element order pad by about 11% interleaved: within the layout's
    1/4, but past a max_adstack_bytes that the exact tape fits, so the loop stays compact
    rather than being refused."""
    lanes = get_backend(backend).caps.tape_lanes
    info = LoopInfo(loop_id=0, kind="fori", shape=(20_000,),
                    carry_dtypes=(np.dtype(np.float64),), invariant_modes=(), body=None)
    trips = np.random.default_rng(0).integers(4, 6, 20_000)
    exact = int(trips.sum())
    padded = loop_layout(info, trips, lanes=lanes, compact=True).regions["float64"][1]
    assert exact < padded <= exact * 1.25
    with dl.config.override(max_adstack_bytes=exact * 8 + 1024):
        layout = loop_layout(info, trips, lanes=lanes, compact=True)
        assert np.all(layout.start < 0) and layout.regions["float64"][1] == exact
        x = np.random.default_rng(1).uniform(0.5, 0.9, trips.size)
        g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.9 + 0.01 * v * v,
                                           x).sum())(x)
    v, d = x.copy(), np.ones_like(x)
    for i in range(5):
        live = i < trips
        d = np.where(live, d * (0.9 + 0.02 * v), d)
        v = np.where(live, v * 0.9 + 0.01 * v * v, v)
    np.testing.assert_allclose(g, d, rtol=1e-13)
