"""Capacity expressions on hand-built values: printable, evaluated per element at launch."""

import numpy as np

from dloop.adstack import capacity
from dloop.adstack.layout import loop_layout
from dloop.ir.graph import LoopInfo, new_var


def test_trip_count_expression_prints_and_evaluates():
    lo, hi = new_var((4,), np.int64), new_var((), np.int64)
    expr = capacity.trip_count(capacity.Read(lo), capacity.Read(hi))
    assert str(expr) == f"max(({hi}[j] - {lo}[j]), 0)"
    env = {lo: np.array([0, 3, 9, 2]), hi: np.array(5)}
    np.testing.assert_array_equal(capacity.evaluate(expr, env, (4,)), [5, 2, 0, 3])


def test_nested_guard_zeroes_capacity_when_the_outer_loop_does_not_run():
    n = new_var((3,), np.int64)
    outer = capacity.trip_count(capacity.Const(0), capacity.Read(n))
    inner = capacity.trip_count(capacity.Const(2), capacity.Const(7)) * capacity.Positive(outer)
    assert str(inner) == f"(max((7 - 2), 0) * [max(({n}[j] - 0), 0) > 0])"
    np.testing.assert_array_equal(capacity.evaluate(inner, {n: np.array([0, 1, 9])}, (3,)),
                                  [0, 5, 5])


def test_layout_is_an_exclusive_prefix_sum():
    info = LoopInfo(loop_id=0, kind="fori", shape=(4,), carry_dtypes=(np.dtype(np.float64),) * 2
                    + (np.dtype(np.int64),), invariant_modes=(), body=None)
    layout = loop_layout(info, np.array([3, 0, 5, 1]))
    np.testing.assert_array_equal(layout.start, [0, 3, 3, 8])
    assert layout.regions == {"float64": (np.dtype(np.float64), 18),
                              "int64": (np.dtype(np.int64), 9)}
