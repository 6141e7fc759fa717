"""kernel/mathlib.py where float division and square root are a few ulps off (Vulkan allows
it; NVIDIA's driver is): legalized for such a backend (caps.rounded_division False, which
adds a Newton step to each quotient and root), run on the interpreter with every division
and square root moved 1 to 3 ulps, each function stays within its documented bound. And
fusing products into adds, which the Vulkan renderer forbids (NoContraction), would break
pow's exact products: the harness sees it."""

from dataclasses import dataclass

import numpy as np
import pytest
from opkernels import op_kernel, run
from rough import FUSED, fuse, rough_division
from test_mathlib import BINARY, MAX_ULPS, UNARY, inputs, reference, ulps

from dloop.kernel import core, mathlib32
from dloop.kernel.legalize import legalize

N = 60_000


@dataclass(frozen=True)
class Caps:
    native_math: frozenset = frozenset()
    rounded_division: bool = False


@dataclass(frozen=True)
class CapsWithout64(Caps):
    float64: bool = False


def _sample(args, n=N):
    return [np.concatenate([a[:200], a[200:: a.size // n]]) for a in args]


def _measure(op, dtype, kernel_of=lambda k: k, n=N, caps=Caps()):
    # The special values (which lead) and an even sample of the rest.
    args = _sample(inputs(op, dtype), n)
    kernel = kernel_of(legalize(op_kernel(op, [dtype] * len(args), dtype), caps))
    with rough_division(3):
        got = run("interpret", kernel, args)
    err = ulps(got, reference(op, args))
    zeros = (got == 0) & (reference(op, args) == 0)
    return np.where(zeros & (np.signbit(got) != np.signbit(reference(op, args))), np.inf, err)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("op", UNARY + BINARY)
def test_within_documented_ulps_under_rough_division(op, dtype):
    assert _measure(op, dtype).max() <= MAX_ULPS[dtype][op]


@pytest.mark.parametrize("op", ["sin", "cos", "tan", "atan", "atan2", "asin", "acos", "exp",
                                "log", "expm1", "log1p", "log2", "log10", "pow"])
def test_float32_code_without_float64_within_bound_under_rough_division(op):
    """kernel/mathlib32.py's float32-only code (a device without float64), its quotients
    refined the same way (tan from 4096 on is the quotient of the device's own sin and cos,
    left out, as in test_mathlib.py)."""
    err = _measure(op, "float32", caps=CapsWithout64())
    if op == "tan":
        x = _sample(inputs(op, "float32"))[0]
        err = err[np.abs(x) < mathlib32.LIMIT]
    assert err.max() <= MAX_ULPS["float32"][op]


def test_rough_division_needs_the_newton_step():
    """Without it (rounded_division True), atan2 goes past its bound: the test can fail."""
    args = [a[:N] for a in inputs("atan2", "float64")]
    kernel = legalize(op_kernel("atan2", ["float64"] * 2, "float64"), Caps(rounded_division=True))
    with rough_division(3):
        got = run("interpret", kernel, args)
    assert ulps(got, reference("atan2", args)).max() > MAX_ULPS["float64"]["atan2"]


def test_contraction_would_break_pow(monkeypatch):
    for name, fn in FUSED.items():
        monkeypatch.setitem(core.EVALUATE, name, fn)
    assert _measure("pow", "float64", fuse, n=20_000).max() > 100
