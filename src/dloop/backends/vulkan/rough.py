"""STAGE 5 — vulkan, for tests: a rough float division and square root on any device.

Vulkan lets OpFDiv be 2.5 ulps off in float32 and float64 only as precise as float32, and
NVIDIA's driver is not correctly rounded, while lavapipe is. With a backend's `rough` set,
every division and square root result (finite, nonzero) is moved 1 to 3 ulps, up or down
by a hash of its bits, so lavapipe runs what a loose driver might: the code that must stay
exact or within its bounds (kernel/exactdiv.py, ops._frem, kernel/mathlib.py) is tested
on it. float64 needs
shaderInt64 for this; without it, float64 results are left as they are."""

import numpy as np

_HASH = {4: 0x9E3779B1, 8: 0x9E3779B97F4A7C15}


def rough(r, dtype, value):
    """value as it is, or nudged when the renderer is in the rough test mode."""
    if not r.rough or (dtype.itemsize == 8 and not r.f.int64):
        return value
    fn, b = r.fn, r.m.t_bool()
    idt = np.dtype(f"int{8 * dtype.itemsize}")
    it, t = r.vt(idt), r.vt(dtype)
    c = lambda v: r.const(v, idt)     # noqa: E731
    bits = fn.op("Bitcast", it, value)
    sign_bit = 1 << (8 * dtype.itemsize - 1)
    mult = _HASH[dtype.itemsize] - 2 * sign_bit          # the same bits, as a signed value
    h = fn.op("ShiftRightLogical", it, fn.op("IMul", it, bits, c(mult)),
              c(8 * dtype.itemsize - 8))
    k = fn.op("IAdd", it, fn.op("IAdd", it, fn.op("BitwiseAnd", it, h, c(1)),
                                fn.op("BitwiseAnd", it, fn.op("ShiftRightLogical", it, h, c(1)),
                                      c(1))), c(1))                   # 1, 2 or 3
    down = fn.op("INotEqual", b, fn.op("BitwiseAnd", it, h, c(4)), c(0))
    k = fn.op("Select", it, down, fn.op("SNegate", it, k), k)
    magnitude = fn.op("BitwiseAnd", it, bits, c(sign_bit - 1))
    top = int(np.finfo(dtype).max.view(idt))
    moved = fn.op("IAdd", it, magnitude, k)
    moved = fn.op("Select", it, fn.op("SLessThan", b, moved, c(1)), c(1), moved)
    moved = fn.op("Select", it, fn.op("SGreaterThan", b, moved, c(top)), c(top), moved)
    moved = fn.op("BitwiseOr", it, moved, fn.op("BitwiseAnd", it, bits, c(-sign_bit)))
    keep = fn.op("LogicalOr", b, fn.op("FOrdEqual", b, value, r.const(0.0, dtype)),
                 fn.op("LogicalOr", b, fn.op("IsInf", b, value), fn.op("IsNan", b, value)))
    return fn.op("Select", t, keep, value, fn.op("Bitcast", t, moved))


def rough_div(r, dtype, a, b):
    return rough(r, dtype, r.fn.op("FDiv", r.vt(dtype), a, b))
