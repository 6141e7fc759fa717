"""Capacity expressions: printable, evaluated per element at launch; derived from loops."""

import numpy as np

from dloop.adstack import capacity as C
from dloop.adstack.layout import loop_layout
from dloop.ir.graph import LoopInfo, new_var


def test_trip_count_expression_prints_and_evaluates():
    lo, hi = new_var((4,), np.int64), new_var((), np.int64)
    expr = C.trip_count(C.Read(lo), C.Read(hi))
    assert str(expr) == f"max(({hi}[j] - {lo}[j]), 0)"
    env = {lo: np.array([0, 3, 9, 2]), hi: np.array(5)}
    np.testing.assert_array_equal(C.evaluate(expr, env, (4,)), [5, 2, 0, 3])


def test_max_over_range_of_the_outer_index_uses_the_ends():
    # for i in range(n[j]): for k in range(i): ...  -> inner capacity max(n[j] - 1, 0)
    n = new_var((4,), np.int64)
    inner = C.MaxOver(7, C.Const(0), C.Read(n), C.trip_count(C.Const(0), C.Index(7)))
    assert inner.body.trend(7) == 1
    assert str(inner) == f"max(i7 in [0, {n}[j])) max((i7 - 0), 0)"
    np.testing.assert_array_equal(C.evaluate(inner, {n: np.array([0, 1, 3, 6])}, (4,)),
                                  [0, 0, 2, 5])


def test_max_over_range_of_a_table_read_at_the_outer_index():
    # for i in range(lo[j], hi[j]): for k in range(m[i]): ...  (not monotone: iterate)
    lo, hi, m = new_var((3,), np.int64), new_var((3,), np.int64), new_var((6,), np.int64)
    body = C.trip_count(C.Const(0), C.Gather(m, (C.Index(1),)))
    assert body.trend(1) is None
    expr = C.MaxOver(1, C.Read(lo), C.Read(hi), body)
    env = {lo: np.array([0, 2, 4]), hi: np.array([3, 2, 6]), m: np.array([4, 9, 1, 7, 2, 5])}
    np.testing.assert_array_equal(C.evaluate(expr, env, (3,)), [9, 0, 5])


def test_trend_of_mixed_signs_is_unknown():
    n = new_var((2,), np.int64)
    assert (C.Index(0) - C.Index(0)).trend(0) is None
    assert (C.Read(n) - C.Index(0) * C.Const(2)).trend(0) == -1
    assert C.Binary("max", C.Index(0), C.Read(n)).trend(0) == 1


def test_layout_is_an_exclusive_prefix_sum():
    info = LoopInfo(loop_id=0, kind="fori", shape=(4,), carry_dtypes=(np.dtype(np.float64),) * 2
                    + (np.dtype(np.int64),), invariant_modes=(), body=None)
    layout = loop_layout(info, np.array([3, 0, 5, 1]))
    np.testing.assert_array_equal(layout.start, [0, 3, 3, 8])
    assert layout.regions == {"float64": (np.dtype(np.float64), 18),
                              "int64": (np.dtype(np.int64), 9)}


def test_interleaved_layout_gives_each_lane_group_disjoint_interleaved_slots():
    """With lanes L, a group of L threads shares its largest capacity and slot k of lane l of
    stack j sits at G * (start - lane) + lane + (j * cap + k) * L (kernel/kir.py): every
    slot of every element lands in the region once, and the regions hold the padded total."""
    rng = np.random.default_rng(3)
    n, lanes = 1000, 4
    dtypes = (np.dtype(np.float64),) * 2 + (np.dtype(np.int64),)
    info = LoopInfo(loop_id=0, kind="fori", shape=(n,), carry_dtypes=dtypes,
                    invariant_modes=(), body=None)
    need = rng.integers(0, 30, n)
    order = np.argsort(-need, kind="stable")
    layout = loop_layout(info, need, order, lanes=lanes)
    assert np.all(layout.cap >= need)
    slots = layout.regions["float64"][1]
    seen = np.zeros(slots, int)
    for e in range(n):
        lane = layout.start[e] % lanes
        for j in range(2):
            k = np.arange(need[e])
            seen[2 * (layout.start[e] - lane) + lane + (j * layout.cap[e] + k) * lanes] += 1
    assert seen.max() == 1 and seen.sum() == 2 * need.sum()
    # Threads run in `order`: the four of a group are neighbours in it and share a capacity.
    groups = layout.cap[order][: n // lanes * lanes].reshape(-1, lanes)
    assert np.all(groups == groups[:, :1])
    # Sorted by need, the padding is at most lanes x the longest capacity.
    assert slots // 2 - need.sum() <= lanes * need.max()


def test_interleaving_is_part_of_a_kernels_cache_key():
    """Compile caches are keyed by the kernel's text: two kernels that differ only in how
    their stacks are interleaved must not share a binary."""
    import dloop as dl
    from dloop.runtime import program
    kernels = []
    program.KERNEL_HOOKS.append(kernels.append)
    try:
        dl.grad(lambda x: dl.fori_loop(0, np.array([2, 3]), lambda i, v: v * 0.5, x).sum())(
            np.ones(2))
    finally:
        program.KERNEL_HOOKS.pop()
    kernel = next(k for k in kernels if k.stacks)
    texts = set()
    for lanes in (1, 4, 8):
        kernel.tape_lanes = lanes
        texts.add(str(kernel))
    assert len(texts) == 3
