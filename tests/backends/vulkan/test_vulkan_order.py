"""The element order and the interleaved layout that Vulkan computes on the device
(backends/vulkan/order.py) for capacities sized on the host: the same permutation and layout
as the array-namespace definitions, bit for bit, the cases left to the host or kept compact,
and gradients of launches that use them against closed forms."""

from types import SimpleNamespace

import numpy as np
import pytest

import dloop as dl
from dloop.adstack import parallel
from dloop.adstack.layout import _interleaved, loop_layout
from dloop.backends.base import available
from helpers import assert_close

ok, why = available("vulkan")
if not ok:
    pytest.skip(why, allow_module_level=True)

from dloop.backends.vulkan import order, sizing   # noqa: E402


def _works(n):
    rng = np.random.default_rng(n)
    return {"uniform": rng.integers(0, 200, n), "negative and zero": rng.integers(-3, 2, n),
            "one long in 100": np.where(rng.random(n) < 0.01, 1000, rng.integers(0, 20, n)),
            "2^40": rng.integers(0, 1 << 40, n), "all zero": np.zeros(n, np.int64)}


@pytest.mark.parametrize("mask", ["", "unified", "unified,mapped"])
def test_the_device_order_is_order_by_tiles(masked, mask):
    """Counts per (key, chunk), one scan, placement: parallel.order_by_tiles' permutation for
    sizes that leave partial chunks and a partial last tile, and for the work shapes that
    decide its key (negative work, a shift for work past 255, equal keys kept in element
    order). Small launches and devices without int64 decline."""
    be = masked(mask)
    for n in (sizing.MIN_ELEMENTS, 70_001, 200_003):
        for name, work in _works(n).items():
            got = order.element_order(be, work, be.upload)
            np.testing.assert_array_equal(be.to_numpy(got), parallel.order_by_tiles(work, np),
                                          err_msg=f"{name}, n = {n}")
    assert order.element_order(be, np.ones(sizing.MIN_ELEMENTS - 1, np.int64),
                               be.upload) is None
    assert order.element_order(masked("int64"), np.ones(1 << 17, np.int64), be.upload) is None


def test_order_tiles_hold_whole_chunks():
    """The order's tiles are multiples of the device's chunks, at most 256 of them."""
    for n in (1, 1 << 16, (1 << 16) + 1, 1 << 24, (1 << 24) + 1, 10 ** 9):
        tile = parallel.order_tile(n)
        assert tile % order.CHUNK == 0 and -(-n // tile) <= 256 and tile >= parallel.ORDER_TILE


def test_the_device_order_over_many_small_tiles(masked, monkeypatch):
    """Tiles of 512 elements (ORDER_TILE lowered): 137 of them for 70,001 elements, each
    sorted on its own within the classes of work, as order_by_tiles defines."""
    be = masked("")
    monkeypatch.setattr(parallel, "ORDER_TILE", 300)
    n = 70_001
    assert parallel.order_tile(n) == 512
    for name, work in _works(n).items():
        got = be.to_numpy(order.element_order(be, work, be.upload))
        np.testing.assert_array_equal(got, parallel.order_by_tiles(work, np), err_msg=name)


@pytest.mark.parametrize("by_slot", [False, True])
def test_the_device_layout_is_the_host_interleave(masked, by_slot):
    """Group maxima through the order, their scan, each element's start and raised capacity:
    layout._interleaved's, scattered to the elements (or left at the slots), and its total."""
    be = masked("unified")
    n = 100_003
    cap = np.maximum(_works(n)["uniform"], 0)
    ordered = parallel.order_by_tiles(cap, np)
    start, raised, total = order.interleaved(be, cap, be.upload(ordered, np.int64), by_slot,
                                             be.upload)
    want_raised, want_start, want_total = _interleaved(cap[ordered], order.LANES, np)
    if not by_slot:
        scattered = np.empty_like(cap), np.empty_like(cap)
        scattered[0][ordered], scattered[1][ordered] = want_start, want_raised
        want_start, want_raised = scattered
    np.testing.assert_array_equal(be.to_numpy(start), want_start)
    np.testing.assert_array_equal(be.to_numpy(raised), want_raised)
    assert total == want_total


def test_a_loop_that_the_device_layout_would_pad_stays_compact(masked):
    """One long element per warp, in element order: interleaving would pad the tape 30-fold,
    so loop_layout keeps the loop compact (negative starts, kir.py) with its exact sum."""
    be = masked("unified")
    n = 1 << 17
    cap = np.where(np.arange(n) % order.LANES == 0, 1000, 1).astype(np.int64)
    info = SimpleNamespace(carry_dtypes=[np.dtype(np.float64)], src=None)
    laid = loop_layout(info, cap, be.upload(np.arange(n), np.int64), np, order.LANES,
                       compact=True, pack=lambda c: be.compact_starts(c, be.upload),
                       interleave=lambda c, o, s: order.interleaved(be, c, o, s, be.upload))
    np.testing.assert_array_equal(be.to_numpy(laid.start), ~(np.cumsum(cap) - cap))
    assert laid.regions["float64"][1] == int(cap.sum())


def _spy(monkeypatch):
    """Records the device's orders and interleaved layouts, and the loops laid out compact,
    in the calls that follow."""
    seen = []
    element_order, interleaved = order.element_order, order.interleaved
    compact_starts = sizing.compact_starts

    def ordered(*args):
        got = element_order(*args)
        seen.append("ordered" if got is not None else "host")
        return got

    def laid(*args):
        seen.append("interleaved")
        return interleaved(*args)

    def compact(*args):
        seen.append("compact")
        return compact_starts(*args)
    monkeypatch.setattr(order, "element_order", ordered)
    monkeypatch.setattr(order, "interleaved", laid)
    monkeypatch.setattr(sizing, "compact_starts", compact)
    return seen


def _closed_form(x, trips, rate, coupling):
    """v <- rate v + coupling x, trips times from v = x: dv/dx."""
    powers = rate ** trips
    return powers + coupling * (1 - powers) / (1 - rate)


def test_a_sorted_loop_gets_its_order_and_layout_from_the_device(masked, monkeypatch):
    """10^5 elements of trips in [0, 20) but one in 50 at 250 (about 115 idle lane-iterations
    per element unordered; below 256 the order's key is the trip count itself, so sorted
    warps hold equal trips and interleave without padding): ordered and interleaved on the
    device, forward and reverse kernels sharing the order; the gradient is the closed
    form's."""
    masked("unified")
    seen = _spy(monkeypatch)
    n = 100_000
    rng = np.random.default_rng(4)
    trips = np.where(rng.random(n) < 0.02, 250, rng.integers(0, 20, n))
    x = np.random.default_rng(5).uniform(0.5, 1.5, n)
    g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.9 + 0.05 * x,
                                       x).sum())(x)
    assert seen == ["ordered", "interleaved"]
    assert_close(g, _closed_form(x, trips, 0.9, 0.05), rtol=1e-13)


def test_loops_that_the_order_does_not_sort_stay_compact(masked, monkeypatch):
    """Two loops of independent trip counts in one kernel: the order follows their sum, so
    each loop's warps hold trip counts from 0 to 200 and interleaving one would nearly double
    its tape; each declines to compact slices, which suit any order, and the gradient is
    still the closed form's."""
    masked("unified")
    seen = _spy(monkeypatch)
    n = 80_000
    rng = np.random.default_rng(6)
    first, second = rng.integers(0, 200, n), rng.integers(0, 200, n)
    x = rng.uniform(0.5, 1.5, n)

    def loss(x):
        v = dl.fori_loop(0, first, lambda i, v: v * 0.99 + 0.01 * x, x)
        return dl.fori_loop(0, second, lambda i, w: w * 0.98, v).sum()
    g = dl.grad(loss)(x)
    assert seen == ["ordered"] + ["interleaved", "compact"] * 2, seen
    assert_close(g, _closed_form(x, first, 0.99, 0.01) * 0.98 ** second, rtol=1e-13)
