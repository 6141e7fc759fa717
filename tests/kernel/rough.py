"""A rough float division for the interpreter: every `div` (and `sqrt`) result is moved a few
ulps, as Vulkan allows (OpFDiv: 2.5 ulps in float32; float64 only as precise as float32)
and NVIDIA's driver does. The ulps come from a hash of the exact result's bits, so every
run moves the same values the same way, and both directions are taken."""

import contextlib

import numpy as np

from dloop.backends.interpret import run as interpret_run


def nudge(x, ulps):
    """x moved by k ulps, 1 <= |k| <= ulps, k from x's bits; zeros, infinities and NaN stay."""
    x = np.asarray(x)
    width = np.dtype(f"u{x.dtype.itemsize}")
    bits = x.view(width).astype(np.uint64)
    h = (bits * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(24)
    k = (h % np.uint64(ulps)).astype(np.int64) + 1
    k = np.where((h >> np.uint64(20)) & np.uint64(1), k, -k)
    sign_bit = np.uint64(1) << np.uint64(8 * x.dtype.itemsize - 1)
    magnitude = (bits & ~sign_bit).astype(np.int64)
    top = np.finfo(x.dtype).max.view(width).astype(np.int64)
    moved = np.clip(magnitude + k, 1, top).astype(np.uint64) | (bits & sign_bit)
    out = moved.astype(width).view(x.dtype)
    keep = (x == 0) | ~np.isfinite(x)
    return np.where(keep, x, out)


@contextlib.contextmanager
def rough_division(ulps=3, ops=("div", "sqrt")):
    """Inside: the interpreter's float `ops` are `ulps` off (see nudge)."""
    exact = interpret_run.evaluate

    def evaluate(op, args, params):
        out = exact(op, args, params)
        if op in ops and np.issubdtype(np.asarray(out).dtype, np.floating):
            return nudge(out, ulps)
        return out
    interpret_run.evaluate = evaluate
    try:
        yield
    finally:
        interpret_run.evaluate = exact
