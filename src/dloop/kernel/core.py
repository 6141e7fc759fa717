"""STAGE 4 — the core ops: what every renderer implements after kernel/legalize.py has run.

Each is a plain IEEE-754 / two's-complement machine operation that C, CUDA, LLVM and SPIR-V
all have directly. Operands of a binary op share one dtype; `out` is the result variable.

  add sub mul        float: IEEE, round to nearest even, each rounded once (never fused).
                     int: wrapping. bool: never.
  div                float only. Correctly rounded, like sqrt, except where the backend's
                     caps.rounded_division is False (Vulkan: a few ulps); legalize then
                     keeps the composites exact by itself (kernel/exactdiv.py).
  neg                float: flips the sign bit (so -0.0 and NaN too). int: wrapping 0 - x.
  lt le gt ge eq     float: ordered, False when either operand is NaN. int: signed.
                     bool: unsigned (False < True).
  ne                 float: unordered, True when either operand is NaN.
  and or xor not     bool: logical. int: bitwise.
  select(c, a, b)    a where c else b.
  abs floor ceil     float only; abs clears the sign bit; round is round-half-to-even.
  trunc round sqrt   sqrt is correctly rounded (IEEE).
  copysign(a, b)     float only: |a| with the sign bit of b.
  idiv irem          int: C truncating quotient and remainder (remainder has the sign of the
                     dividend). The caller guarantees a divisor that is neither 0 nor -1.
  frem               float: C fmod, exact, sign of the dividend; NaN for x = inf or y = 0.
  ishl ishr          int: shift left / arithmetic shift right by an amount in [0, bits).
  ftoi               float -> int (the out dtype), truncating toward zero; the caller
                     guarantees the argument is not NaN and its truncation is in range.
  bitcast            same-width float <-> int reinterpretation of the bits.
  convert            only the always-defined conversions: int -> wider or narrower int
                     (sign-extend / wrap), bool -> int or float (0, 1), int -> float and
                     float -> float (round to nearest even). Never float -> int, never -> bool.
  TRANSCENDENTAL     sin ... atan2 pow: only where the backend's caps.native_math lists the
                     (op, dtype) pair; legalize replaces the others by kernel/mathlib.py code.

  device_sin         float32: the backend's own sin and cos, however loose (GLSL's), never
  device_cos         expanded: mathlib32 emits them for arguments from 4096 on backends without
                     float64 (Vulkan on such a device); every renderer has them.

Besides Assigns of these ops, legalized code may hold kir.While loops that end after one pass
(Emitter.branch: mathlib's work for rare inputs); runs_once() recognises them, so that a
renderer may emit a selection instead of a loop.

The interpreter evaluates core ops that are not graph primitives with EVALUATE below, and
every `convert` (core or not) with the pinned saturating rule of saturating_convert.
"""

import numpy as np

from . import kir

TRANSCENDENTAL = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
                  "acosh", "atanh", "exp", "expm1", "log", "log1p", "log2", "log10", "pow",
                  "atan2")
FLOAT_ONLY = ("div", "abs", "floor", "ceil", "trunc", "round", "sqrt", "copysign", "frem",
              "ftoi") + TRANSCENDENTAL
DEVICE_MATH = ("device_sin", "device_cos")
CORE = frozenset(("add", "sub", "mul", "neg", "lt", "le", "gt", "ge", "eq", "ne", "and", "or",
                  "xor", "not", "select", "idiv", "irem", "ishl", "ishr", "bitcast", "convert")
                 + FLOAT_ONLY)


def saturating_convert(x, dtype):
    """The pinned float -> int rule, the same on every backend: truncate toward zero, then
    clamp to the integer range; NaN gives 0. Other conversions are NumPy's astype."""
    x, dtype = np.asarray(x), np.dtype(dtype)
    if not (np.issubdtype(x.dtype, np.floating) and np.issubdtype(dtype, np.integer)):
        return x.astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = float(info.min), float(info.max) + 1.0      # both powers of two: exact floats
    safe = np.where((x >= lo) & (x < hi), x, 0)
    out = np.trunc(safe).astype(dtype)
    out = np.where(x >= hi, info.max, out)
    return np.where(x < lo, info.min, out).astype(dtype)


def _idiv(a, b):
    return ((a - np.fmod(a, b)) // b).astype(a.dtype)


def _shift(fn):
    return lambda a, b: fn(a, np.clip(b, 0, a.dtype.itemsize * 8 - 1)).astype(a.dtype)


def _ftoi(x, dtype):
    return np.trunc(x).astype(dtype)


def _bitcast(x, dtype):
    return np.ascontiguousarray(x).view(dtype)


# (args, out dtype) -> array. Garbage lanes (those a later select discards) are computed
# too, so these never trap.
EVALUATE = {
    "idiv": lambda a, b, out: _idiv(a, np.where(b == 0, 1, b)),
    "irem": lambda a, b, out: np.fmod(a, np.where(b == 0, 1, b)),
    "frem": lambda a, b, out: np.fmod(a, b),
    "ishl": lambda a, b, out: _shift(np.left_shift)(a, b),
    "ishr": lambda a, b, out: _shift(np.right_shift)(a, b),
    "ftoi": lambda x, out: _ftoi(x, out),
    "bitcast": lambda x, out: _bitcast(x, out),
    "convert": lambda x, out: saturating_convert(x, out),
    "device_sin": lambda x, out: np.sin(x),
    "device_cos": lambda x, out: np.cos(x),
}


def evaluate(op, args, out_dtype):
    with np.errstate(all="ignore"):
        return EVALUATE[op](*args, out_dtype)


class V:
    """A value under construction: Python operators emit core ops through the Emitter.
    Plain Python numbers become constants of the other operand's dtype."""
    __slots__ = ("e", "x")

    def __init__(self, e, x):
        self.e, self.x = e, x

    @property
    def dtype(self):
        return self.x.dtype

    def _bin(self, op, other, swap=False):
        other = self.e.lift(other, self.dtype)
        a, b = (other, self) if swap else (self, other)
        return self.e.op(op, a, b)

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __truediv__(self, o): return self._bin("div", o)
    def __rtruediv__(self, o): return self._bin("div", o, True)
    def __and__(self, o): return self._bin("and", o)
    def __or__(self, o): return self._bin("or", o)
    def __xor__(self, o): return self._bin("xor", o)
    def __invert__(self): return self.e.op("not", self)
    def __neg__(self): return self.e.op("neg", self)
    def __lt__(self, o): return self._bin("lt", o)
    def __le__(self, o): return self._bin("le", o)
    def __gt__(self, o): return self._bin("gt", o)
    def __ge__(self, o): return self._bin("ge", o)
    def eq(self, o): return self._bin("eq", o)
    def ne(self, o): return self._bin("ne", o)


_BOOL_OUT = ("lt", "le", "gt", "ge", "eq", "ne")


class Emitter:
    """Collects the Assign statements of core ops; values are V."""

    def __init__(self):
        self.stmts = []

    def const(self, value, dtype):
        dtype = np.dtype(dtype)
        return V(self, kir.Const(dtype.type(value).item(), dtype))

    def lift(self, x, dtype):
        return x if isinstance(x, V) else self.const(x, dtype)

    def wrap(self, x):
        return V(self, x)

    def op(self, name, *args, dtype=None):
        """Emit `name` on args (V or numbers: a number takes the dtype of the first V)."""
        ref = next(a.dtype for a in args if isinstance(a, V))
        args = [self.lift(a, ref) for a in args]
        if dtype is None:
            dtype = np.dtype(bool) if name in _BOOL_OUT else args[-1].dtype
        out = kir.KVar(dtype)
        self.stmts.append(kir.Assign(out, name, tuple(a.x for a in args)))
        return V(self, out)

    def select(self, c, a, b):
        ref = a.dtype if isinstance(a, V) else b.dtype
        return self.op("select", c, self.lift(a, ref), self.lift(b, ref))

    def convert(self, x, dtype):
        return x if x.dtype == np.dtype(dtype) else self.op("convert", x, dtype=dtype)

    def bitcast(self, x, dtype):
        return self.op("bitcast", x, dtype=dtype)

    def branch(self, cond, build, defaults):
        """build()'s values where cond holds, else `defaults` (V, one per value build returns;
        numbers among build's values take the default's dtype): for work that only rare
        inputs need, which straight-line selects would make every input pay for. It is a
        kir.While whose `first` carry ends it after one pass, so every renderer runs it as
        any loop (SIMD lanes and GPU threads that disagree run it masked), with build()'s
        ops inside it."""
        bool_ = np.dtype(bool)
        first = kir.KVar(bool_)
        carries = [kir.KVar(d.dtype) for d in defaults]
        outer, self.stmts = self.stmts, []
        go = self.wrap(first) & cond
        cond_body, self.stmts = self.stmts, []
        results = [self.lift(r, d.dtype) for r, d in zip(build(), defaults, strict=True)]
        body, self.stmts = self.stmts, outer
        outs = [kir.KVar(d.dtype) for d in defaults]
        self.stmts.append(kir.While(
            [first] + carries, [kir.Const(True, bool_)] + [d.x for d in defaults], cond_body,
            go.x, body, [kir.Const(False, bool_)] + [r.x for r in results],
            [kir.KVar(bool_)] + outs))
        return [V(self, o) for o in outs]


def runs_once(s):
    """Whether kir statement s is a While that ends after at most one pass, as
    Emitter.branch makes: its first carry starts True and yields False, and its condition is
    that carry and something else. A renderer may emit it as a selection (an if with values
    out) instead of a loop."""
    if not (isinstance(s, kir.While) and s.carries and s.cond_body):
        return False
    last, first = s.cond_body[-1], s.carries[0]
    return (isinstance(last, kir.Assign) and last.out is s.cond and last.op == "and"
            and first in last.args and s.inits[0] == kir.Const(True, np.dtype(bool))
            and s.yields[0] == kir.Const(False, np.dtype(bool)))
