"""STAGE 4 — int64 held in 32 bits: values that leave the int32 range fault, not wrap.

A Vulkan device without shaderInt64 computes a kernel's int64 values in 32 bits
(backends/vulkan/render.py, caps.index64 False). Uploads refuse values that do not fit, but
a product or a sum, a negation, or a float converted to int64 could pass 2^31 inside the
kernel and wrap there: a wrong value with no error, or an index wrapped back into bounds
before its check. Here every such op of the kernel's own code is followed by a test, in the
same arithmetic, of whether its exact result fits; a thread whose result did not raises a
fault, reported as a DloopValueError at the op's line (runtime/faults.py). The tests are
written at the width the device computes in, so they hold for 32 bits (and would for 64).
Shifts are not checked. Sizing code that the runtime compiles itself never runs there (it
needs 64-bit integers), and offsets into adstacks are checked at launch (execute.py)."""

import dataclasses

import numpy as np

from . import kir

I64, BOOL = np.dtype(np.int64), np.dtype(bool)
_CHECKED = ("add", "sub", "mul", "neg", "abs", "convert")
_INT32_RANGE = 2.0 ** 31


def guard_int32_range(kernel):
    """Make `kernel` (in place) fault where an int64 add, sub, mul, neg, abs or float
    conversion leaves the int32 range."""
    slots = {}

    def slot(src):
        if src not in slots:
            if kernel.buffer_index("faults") is None:
                kernel.buffers.append(kir.BufferSpec("faults", I64))
            kernel.faults.append(kir.FaultSpec("int32_range", src, {}))
            slots[src] = len(kernel.faults) - 1
        return slots[src]
    kernel.body = _guarded(kernel.body, slot)


def _guarded(stmts, slot):
    out = []
    for s in stmts:
        changes = {attr: _guarded(getattr(s, attr), slot) for attr in ("body", "cond_body")
                   if isinstance(getattr(s, attr, None), list)}
        if changes:
            s = dataclasses.replace(s, **changes)
        out.append(s)
        if isinstance(s, kir.Assign) and s.op in _CHECKED and np.dtype(s.out.dtype) == I64:
            bad = _escaped(out, s)
            if bad is not None:
                out.append(kir.If(bad, [kir.Fault(slot(s.src), kir.Const(1, I64))]))
    return out


def _escaped(out, s):
    """A bool: whether the exact result of `s` left the range its dtype is computed in, from
    its operands and its wrapped result (statements appended to `out`); None where it
    cannot."""
    r = s.out
    if s.op == "convert":
        (x,) = s.args
        if not np.issubdtype(np.dtype(x.dtype), np.floating):
            return None              # from a narrower integer or a bool: always fits
        top = kir.Const(_INT32_RANGE, np.dtype(x.dtype))
        low = kir.Const(-_INT32_RANGE, np.dtype(x.dtype))
        return _op(out, "or", _op(out, "ge", x, top, BOOL), _op(out, "lt", x, low, BOOL), BOOL)
    if s.op in ("neg", "abs"):
        (a,) = s.args
        # Only the most negative value has no opposite: it comes out unchanged (neg) or
        # negative (abs).
        if s.op == "abs":
            return _op(out, "lt", r, kir.Const(0, I64), BOOL)
        return _op(out, "and", _op(out, "eq", r, a, BOOL),
                   _op(out, "ne", a, kir.Const(0, I64), BOOL), BOOL)
    a, b = s.args
    if np.dtype(a.dtype) != I64 or np.dtype(b.dtype) != I64:
        return None
    zero = kir.Const(0, I64)
    if s.op == "add":            # both operands' signs differ from the result's
        both = _op(out, "and", _op(out, "xor", a, r), _op(out, "xor", b, r))
        return _op(out, "lt", both, zero, BOOL)
    if s.op == "sub":            # the operands' signs differ, and the result's from a's
        both = _op(out, "and", _op(out, "xor", a, b), _op(out, "xor", a, r))
        return _op(out, "lt", both, zero, BOOL)
    # mul: r / a must give b back (a not 0); a = -1 overflows only for the most negative b,
    # whose product wraps to b itself. idiv's divisor is kept from 0 and -1.
    minus_one = kir.Const(-1, I64)
    simple = _op(out, "and", _op(out, "ne", a, zero, BOOL), _op(out, "ne", a, minus_one, BOOL),
                 BOOL)
    divisor = kir.KVar(I64)
    out.append(kir.Assign(divisor, "select", (simple, a, kir.Const(1, I64))))
    lost = _op(out, "and", simple, _op(out, "ne", _op(out, "idiv", r, divisor), b, BOOL), BOOL)
    wrapped = _op(out, "and", _op(out, "eq", a, minus_one, BOOL),
                  _op(out, "and", _op(out, "eq", r, b, BOOL), _op(out, "ne", b, zero, BOOL),
                      BOOL), BOOL)
    return _op(out, "or", lost, wrapped, BOOL)


def _op(stmts, op, a, b, dtype=I64):
    out = kir.KVar(dtype)
    stmts.append(kir.Assign(out, op, (a, b)))
    return out
