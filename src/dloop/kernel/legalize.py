"""STAGE 4 — legalization: rewrite a kernel so it uses only the core ops of kernel/core.py.

Composite graph primitives (NumPy's floor division and modulo, NaN-propagating max/min,
shifts by any amount, saturating float -> int, sign, integer abs/floor/...) become core ops
with NumPy's exact results, and each transcendental (op, dtype) that the backend does not
list in caps.native_math becomes kernel/mathlib.py code. Every renderer then implements the
core ops only, and every backend gets the same answers. Runs before rendering; idempotent.
"""

import dataclasses

import numpy as np

from . import exactdiv, kir, mathlib, mathlib32
from .core import CORE, DEVICE_MATH, TRANSCENDENTAL, Emitter

BOOL = np.dtype(bool)


def legalize(kernel, caps, wrapped_loads=False):
    """A new kernel equal in meaning to `kernel`, using core ops only. `caps.native_math`:
    the (op name, dtype name) pairs the backend renders natively. Wrapped loads
    (kir.Load.wrap) become selects unless `wrapped_loads`: the renderer then reads them."""
    def rewrite(s):
        if isinstance(s, kir.Assign):
            return _assign(s, caps)
        return _unwrapped(s) if not wrapped_loads else [s]
    return dataclasses.replace(kernel, body=_mapped(_sincos(kernel.body, caps), rewrite))


def sincos_pairs(stmts):
    """sin(a) and cos(a) of one value in one block, as {id(first): second, id(second): None}:
    one argument reduction serves both (CUDA's sincos, mathlib.sincos), and a reverse
    kernel needs both of a popped value (W1's body: sin's derivative)."""
    seen, pairs = {}, {}
    for s in stmts:
        if isinstance(s, kir.Assign) and s.op in ("sin", "cos") and \
                isinstance(s.args[0], kir.KVar):
            other = seen.get((s.args[0], "cos" if s.op == "sin" else "sin"))
            if other is not None and id(other) not in pairs:
                pairs[id(other)], pairs[id(s)] = s, None
            else:
                seen.setdefault((s.args[0], s.op), s)
    return pairs


def _sincos(stmts, caps):
    """stmts, at any depth, with each pair of sin and cos of one value that mathlib expands
    computed where the first of the two was, from one reduction (mathlib.sincos)."""
    return _in_blocks(stmts, lambda block: _sincos_block(block, caps))


def _sincos_block(stmts, caps):
    pairs = sincos_pairs(stmts)
    out = []
    for s in stmts:
        rule = _sincos_rule(s.out.dtype.name, caps) if id(s) in pairs else None
        if rule is None:
            out.append(s)
            continue
        partner = pairs[id(s)]
        if partner is None:
            continue                        # computed with the first of its pair
        sin, cos = (s, partner) if s.op == "sin" else (partner, s)
        e = Emitter()
        results = rule(e, e.wrap(s.args[0]))
        pair = _define(e.stmts, results[0], sin.out) + _define([], results[1], cos.out)
        out.extend(pair if getattr(caps, "rounded_division", True) else _refined(pair))
    return out


def _in_blocks(stmts, rewrite_block):
    """stmts with rewrite_block(block) (a new list) in place of every block of statements,
    nested ones first; it sees the For, If and While statements of its block with their own
    blocks already rewritten, and keeps them."""
    block = []
    for s in stmts:
        if isinstance(s, (kir.For, kir.If)):
            s = dataclasses.replace(s, body=_in_blocks(s.body, rewrite_block))
        elif isinstance(s, kir.While):
            s = dataclasses.replace(s, cond_body=_in_blocks(s.cond_body, rewrite_block),
                                    body=_in_blocks(s.body, rewrite_block))
        block.append(s)
    return rewrite_block(block)


def _mapped(stmts, rewrite):
    """stmts with rewrite(s) (a list of statements) in place of every statement that holds
    no block, at any depth."""
    return _in_blocks(stmts, lambda block: [
        out for s in block
        for out in ([s] if isinstance(s, (kir.For, kir.If, kir.While)) else rewrite(s))])


def unwrap_loads(kernel):
    """`kernel` with its wrapped loads as selects (legalize's default)."""
    return dataclasses.replace(kernel, body=_mapped(kernel.body, _unwrapped))


def _unwrapped(s):
    """A wrapped load as core ops: index - shift, plus size where negative; other statements
    as they are."""
    if not (isinstance(s, kir.Load) and s.wrap is not None):
        return [s]
    i64 = np.dtype(np.int64)
    shift, size = s.wrap
    at, negative, wrapped, index = kir.KVar(i64), kir.KVar(BOOL), kir.KVar(i64), kir.KVar(i64)
    return [kir.Assign(at, "sub", (s.index, kir.Const(shift, i64)), s.src),
            kir.Assign(negative, "lt", (at, kir.Const(0, i64)), s.src),
            kir.Assign(wrapped, "add", (at, kir.Const(size, i64)), s.src),
            kir.Assign(index, "select", (negative, wrapped, at), s.src),
            dataclasses.replace(s, index=index, wrap=None)]


def _is_float(dtype):
    return np.issubdtype(dtype, np.floating)


def _assign(s, caps):
    dtype = s.args[0].dtype
    rule = _rule(s.op, dtype, s.out.dtype, caps)
    if rule is None:
        return [s]
    e = Emitter()
    result = rule(e, *[e.wrap(a) for a in s.args])
    stmts = _define(e.stmts, result, s.out)
    if s.op in TRANSCENDENTAL and not getattr(caps, "rounded_division", True):
        stmts = _refined(stmts)
    return stmts


def _define(stmts, result, out):
    """stmts, then `out` defined as result."""
    if stmts and isinstance(stmts[-1], kir.Assign) and stmts[-1].out is result.x:
        # The last statement computes the result: it defines the original variable instead.
        last = stmts.pop()
        return stmts + [kir.Assign(out, last.op, last.args)]
    true = kir.Const(True, BOOL)
    return stmts + [kir.Assign(out, "select", (true, result.x, result.x))]


def _refined(stmts):
    """mathlib's statements (Assigns, and the Whiles of Emitter.branch) with a Newton step
    after each division and square root: its error bounds assume rounded ones."""
    return _mapped(stmts, _refine_division)


def _refine_division(s):
    refine = {"div": exactdiv.div_refined, "sqrt": exactdiv.sqrt_refined}.get(s.op)
    if refine is None:
        return [s]
    e = Emitter()
    return _define(e.stmts, refine(e, *[e.wrap(a) for a in s.args]), s.out)


def _sincos_rule(name, caps):
    """The rule (emitter, x) -> (sin x, cos x) for dtype `name`, or None."""
    if name == "float32":
        ours = mathlib32.sincos_expansion(caps)
        if ours is not None:
            return ours
    return mathlib.sincos_expansion(name, caps)


def _rule(op, dtype, out_dtype, caps):
    """The expansion of op on operands of `dtype`, or None where it is core already."""
    name = np.dtype(dtype).name
    if op in TRANSCENDENTAL:
        if (op, name) in caps.native_math:
            return None
        ours = mathlib32.expansion(op, caps) if name == "float32" else None
        return ours if ours is not None else mathlib.expansion(op, name, caps)
    if op == "convert":
        return _convert_rule(np.dtype(dtype), np.dtype(out_dtype))
    if op in DEVICE_MATH:
        return None
    if _is_float(dtype):
        if op in ("floordiv", "mod") and not getattr(caps, "rounded_division", True):
            return ROUGH_DIVISION_RULES[op]
        return FLOAT_RULES.get(op)
    if dtype == BOOL and op in BOOL_RULES:
        return BOOL_RULES[op]
    if op in INT_RULES:
        return INT_RULES[op]
    if op in CORE and op not in ("div",):
        return None
    raise NotImplementedError(f"kernel op {op} on {name} has no core expansion")


# -- conversions --

def _convert_rule(src, dst):
    if src == dst:
        return lambda e, x: x
    if dst == BOOL:
        return lambda e, x: x.ne(0)
    if _is_float(src) and not _is_float(dst):
        return lambda e, x: _saturating_ftoi(e, x, dst)
    return None


def _saturating_ftoi(e, x, dst):
    """core.saturating_convert from core ops: ftoi only sees in-range, non-NaN values."""
    info = np.iinfo(dst)
    lo, hi = float(info.min), float(info.max) + 1.0     # powers of two: exact in any float
    inside = (x >= lo) & (x < hi)
    r = e.op("ftoi", e.select(inside, x, 0.0), dtype=dst)
    outside = e.select(x >= hi, info.max, e.select(x < lo, info.min, e.const(0, dst)))
    return e.select(inside, r, outside)


# -- floats --

def _float_divmod(e, x, y, rounded=True):
    """NumPy's npy_divmod, step by step: (floor quotient, remainder with the divisor's sign).
    rounded=False: the backend's division may be a few ulps off, so the quotient comes from
    exactdiv.div_rn, and x / y where it is a zero or infinity from the signs."""
    mod = e.op("frem", x, y)
    num = x - mod
    if rounded:
        div, quotient = num / y, x / y
    else:
        # num is 0, NaN, or at least |y| / 2: no subnormal quotient. y = 0 is done below.
        ok = (e.op("abs", num) < np.inf) & num.ne(0) & (e.op("abs", y) < np.inf) & y.ne(0)
        one = e.const(1.0, x.dtype)
        exact = exactdiv.div_rn(e, e.select(ok, num, one), e.select(ok, y, one))
        div = e.select(ok, exact, e.select(num.ne(num), num, e.const(0.0, x.dtype)))
        zero = exactdiv.signed_zero(e, x, y)
        quotient = e.select(y.eq(0), exactdiv.div_by_zero(e, x, y), zero)
    fix = mod.ne(0) & ((y < 0) ^ (mod < 0))
    mod = e.select(fix, mod + y, e.select(mod.ne(0), mod, e.op("copysign", 0.0, y)))
    div = e.select(fix, div - 1.0, div)
    fl = e.op("floor", div)
    fl = e.select(div - fl > 0.5, fl + 1.0, fl)
    fl = e.select(div.ne(0), fl, e.op("copysign", 0.0, quotient))
    y_zero = y.eq(0)
    return e.select(y_zero, quotient, fl), e.select(y_zero, e.op("frem", x, y), mod)


def _float_maxmin(cmp):
    def rule(e, x, y):
        pick = e.select(getattr(x, cmp)(y), x, y)
        return e.select(x.ne(x), x, pick)        # a NaN in y is picked already
    return rule


def _float_sign(e, x):
    # NumPy: sign(-0.0) is +0.0 and sign(NaN) is NaN.
    rest = e.select(x.ne(x), x, e.const(0.0, x.dtype))
    return e.select(x > 0, 1.0, e.select(x < 0, -1.0, rest))


FLOAT_RULES = {
    "floordiv": lambda e, x, y: _float_divmod(e, x, y)[0],
    "mod": lambda e, x, y: _float_divmod(e, x, y)[1],
    "max": _float_maxmin("__gt__"),
    "min": _float_maxmin("__lt__"),
    "sign": _float_sign,
}
ROUGH_DIVISION_RULES = {
    "floordiv": lambda e, x, y: _float_divmod(e, x, y, rounded=False)[0],
    "mod": lambda e, x, y: _float_divmod(e, x, y, rounded=False)[1],
}


# -- integers --

def _int_divmod(e, x, y):
    """Python's floor division and modulo; a zero divisor gives 0 (NumPy), and -1 is done
    by negation, since MIN / -1 traps in C and LLVM."""
    zero, minus_one = y.eq(0), y.eq(-1)
    safe = e.select(zero | minus_one, 1, y)
    q, r = e.op("idiv", x, safe), e.op("irem", x, safe)
    fix = r.ne(0) & ((r < 0) ^ (safe < 0))
    q = e.select(fix, q - 1, q)
    r = e.select(fix, r + safe, r)
    q = e.select(minus_one, -x, q)
    return e.select(zero, 0, q), e.select(zero, 0, r)


def _shift(left):
    """Amounts outside [0, bit width) give 0 for <<, and the sign (0 or -1) for >>, as
    NumPy's and ir/elementwise.py's."""
    def rule(e, x, n):
        bits = x.dtype.itemsize * 8
        outside = (n < 0) | (n >= bits)
        amount = e.select(outside, bits - 1, n)
        if left:
            return e.select(outside, 0, e.op("ishl", x, amount))
        return e.op("ishr", x, amount)
    return rule


INT_RULES = {
    "floordiv": lambda e, x, y: _int_divmod(e, x, y)[0],
    "mod": lambda e, x, y: _int_divmod(e, x, y)[1],
    "max": lambda e, x, y: e.select(x > y, x, y),
    "min": lambda e, x, y: e.select(x < y, x, y),
    "sign": lambda e, x: e.select(x > 0, 1, e.select(x < 0, -1, e.const(0, x.dtype))),
    "abs": lambda e, x: e.select(x < 0, -x, x),
    "shl": _shift(True),
    "shr": _shift(False),
}
for _op in ("floor", "ceil", "round", "trunc"):
    INT_RULES[_op] = lambda e, x: x

BOOL_RULES = {
    "max": lambda e, x, y: x | y,
    "min": lambda e, x, y: x & y,
    "add": lambda e, x, y: x | y,
    "mul": lambda e, x, y: x & y,
    "abs": lambda e, x: x,
}
for _op in ("floor", "ceil", "round", "trunc"):
    BOOL_RULES[_op] = lambda e, x: x
