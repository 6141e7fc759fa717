"""STAGE 5 — vulkan: SPIR-V instructions for each core op of kernel/core.py and the
atomics."""

import numpy as np

from ...errors import DloopNotImplementedError
from ...source import user_location
from .rough import rough, rough_div
from .spirv import GLSL, Capability

# Operands of one dtype class -> opcode: (float, int, bool).
_BINARY = {
    "add": ("FAdd", "IAdd", None), "sub": ("FSub", "ISub", None),
    "mul": ("FMul", "IMul", None), "div": ("FDiv", None, None),
    "lt": ("FOrdLessThan", "SLessThan", None), "le": ("FOrdLessThanEqual", "SLessThanEqual", None),
    "gt": ("FOrdGreaterThan", "SGreaterThan", None),
    "ge": ("FOrdGreaterThanEqual", "SGreaterThanEqual", None),
    "eq": ("FOrdEqual", "IEqual", "LogicalEqual"),
    "ne": ("FUnordNotEqual", "INotEqual", "LogicalNotEqual"),
    "and": (None, "BitwiseAnd", "LogicalAnd"), "or": (None, "BitwiseOr", "LogicalOr"),
    "xor": (None, "BitwiseXor", "LogicalNotEqual"),
    "frem": ("FRem", None, None), "idiv": (None, "SDiv", None),
    "ishl": (None, "ShiftLeftLogical", None), "ishr": (None, "ShiftRightArithmetic", None),
}
_GLSL_UNARY = {"abs": "FAbs", "floor": "Floor", "ceil": "Ceil", "trunc": "Trunc",
               "round": "RoundEven", "sqrt": "Sqrt"}

_BOOL_ORDER = {"lt": (True, False, "LogicalAnd"), "le": (True, False, "LogicalOr"),
               "gt": (False, True, "LogicalAnd"), "ge": (False, True, "LogicalOr")}


def _kind(dtype):
    if dtype == bool:
        return 2
    return 0 if np.issubdtype(dtype, np.floating) else 1


def emit(r, op, args, dtype, out):
    fn, bool_t = r.fn, r.m.t_bool()
    out_t = r.vt(out)
    if op == "frem":
        return _frem(r, dtype, *args)
    if op == "irem":
        # x - y * (x / y), not OpSRem: NVIDIA's driver gave OpSRem the divisor's sign.
        x, y = args
        return fn.op("ISub", out_t, x, fn.op("IMul", out_t, y, fn.op("SDiv", out_t, x, y)))
    if op in _BINARY:
        if dtype == bool and op in _BOOL_ORDER:       # False < True
            neg_a, neg_b, join = _BOOL_ORDER[op]
            a, b = args
            a = fn.op("LogicalNot", bool_t, a) if neg_a else a
            b = fn.op("LogicalNot", bool_t, b) if neg_b else b
            return fn.op(join, bool_t, a, b)
        if op == "div":
            return rough_div(r, dtype, *args)
        opname = _BINARY[op][_kind(dtype)]
        if opname is None:
            raise NotImplementedError(f"core op {op} on {dtype}")
        return fn.op(opname, out_t, *args)
    if op == "neg":
        return fn.op("FNegate" if _kind(dtype) == 0 else "SNegate", out_t, args[0])
    if op == "not":
        return fn.op("LogicalNot" if dtype == bool else "Not", out_t, args[0])
    if op == "select":
        return fn.op("Select", out_t, *args)
    if op == "sqrt":
        return rough(r, dtype, glsl(r, "Sqrt", out_t, *args))
    if op in _GLSL_UNARY:
        return glsl(r, _GLSL_UNARY[op], out_t, *args)
    if op == "copysign":
        return _copysign(r, dtype, *args)
    if op == "ftoi":
        return fn.op("ConvertFToS", out_t, args[0])
    if op == "bitcast":
        if r.width(dtype) != r.width(out):
            raise DloopNotImplementedError(
                f"float64 math functions work on the bits of float64 values as int64, and "
                f"Vulkan device {r.f.name} lacks shaderInt64; use float32, or a device with "
                "shaderInt64", r.fn.src or user_location())
        return fn.op("Bitcast", out_t, args[0])
    if op == "convert":
        return _convert(r, args[0], dtype, out)
    if dtype == np.float32 and op in ("device_sin", "device_cos"):     # kernel/core.py
        return glsl(r, "Sin" if op == "device_sin" else "Cos", r.vt(dtype), args[0])
    raise NotImplementedError(f"kernel op {op} on {dtype} in a Vulkan kernel")


def _frem(r, dtype, x, y):
    """C's fmod, exact, from a division that may be a few ulps off (Vulkan allows 2.5 in
    float32, and float64 only as precise as float32). Drivers compute OpFRem as
    x - y trunc(x / y) (lavapipe: fmod(1, 1e-30) = 0). Here, with rem = |x| and a = |y|, a
    step scales a by 2^s (exactly) so that Q = rem / (a 2^s) < 2^(BITS+1); a division with
    relative error below 2^-20 is then within 1/4 of Q, so q = trunc(rem / (a 2^s) + 1/2)
    is floor(Q) or one more, rem - q a 2^s is computed exactly (Dekker's product: Vulkan may
    leave Fma unfused, and lavapipe does), and a negative result takes one a 2^s back.
    Quotients below 2^(BITS+1) take one loop-free step; larger ones loop first, each pass
    removing BITS bits, unless y is a power of two (x - y trunc(x 2^-e) is exact: no
    division at all): lavapipe stops an invocation's loops once their passes, all loops
    together and one more for each loop entered, reach 65,535 (docs/math.md), so every pass
    here shortens the user's loops (mathlib calls no frem). Then rem takes x's sign;
    fmod(x, +-inf) = x; inf or NaN in x, and NaN or 0 in y, give NaN."""
    fn, m = r.fn, r.m
    t, b, i32 = r.vt(dtype), m.t_bool(), r.i32
    parts = m.t_struct(t, i32)
    c = lambda v: r.const(v, dtype)     # noqa: E731
    bits = 17
    ax, ay = glsl(r, "FAbs", t, x), glsl(r, "FAbs", t, y)
    finite_x = fn.op("LogicalNot", b, fn.op("LogicalOr", b, fn.op("IsInf", b, x),
                                            fn.op("IsNan", b, x)))
    usable_y = fn.op("LogicalAnd", b, fn.op("FOrdGreaterThan", b, ay, c(0.0)),
                     fn.op("FOrdLessThan", b, ay, c(np.inf)))
    ok = fn.op("LogicalAnd", b, finite_x, usable_y)
    start = fn.op("Select", t, ok, ax, c(0.0))
    split_y = glsl(r, "FrexpStruct", parts, ay)
    exp_y = fn.op("CompositeExtract", i32, split_y, 1)
    pow2 = fn.op("FOrdEqual", b, fn.op("CompositeExtract", t, split_y, 0), c(0.5))

    def gap(rem):
        exp_r = fn.op("CompositeExtract", i32, glsl(r, "FrexpStruct", parts, rem), 1)
        return fn.op("ISub", i32, exp_r, exp_y)

    def step(rem, shift):
        # Both operands scaled near 1 first, so Dekker's split cannot overflow.
        exp_r = fn.op("CompositeExtract", i32, glsl(r, "FrexpStruct", parts, rem), 1)
        unit = glsl(r, "Ldexp", t, rem, fn.op("SNegate", i32, exp_r))
        scaled = glsl(r, "Ldexp", t, ay, fn.op("ISub", i32, shift, exp_r))
        ratio = rough_div(r, dtype, unit, scaled)
        q = glsl(r, "Trunc", t, fn.op("FAdd", t, ratio, c(0.5)))
        hi, lo = _two_prod(r, dtype, q, scaled)
        out = fn.op("FSub", t, fn.op("FSub", t, unit, hi), lo)
        out = fn.op("Select", t, fn.op("FOrdLessThan", b, out, c(0.0)),
                    fn.op("FAdd", t, out, scaled), out)
        return glsl(r, "Ldexp", t, out, exp_r)

    pre = fn.label
    header, cond, body, cont, merge = (m.id() for _ in range(5))
    fn.end("Branch", header)
    fn.begin(header)
    rem, phi = fn.phi(t, [(start, pre), (0, 0)])
    # A pass cap: a driver that flushes subnormals can make a pass remove nothing, and a
    # shader that never ends loses the device. Exact arithmetic needs at most ~125 passes.
    count, count_phi = fn.phi(i32, [(r.c32(0), pre), (0, 0)])
    fn.end("LoopMerge", merge, cont, 0)
    fn.end("Branch", cond)
    fn.begin(cond)
    far = fn.op("LogicalAnd", b, fn.op("FOrdGreaterThanEqual", b, rem, ay),
                fn.op("SGreaterThan", b, gap(rem), r.c32(bits)))
    far = fn.op("LogicalAnd", b, far, fn.op("LogicalNot", b, pow2))
    far = fn.op("LogicalAnd", b, far, fn.op("SLessThan", b, count, r.c32(2100)))
    fn.end("BranchConditional", far, body, merge)
    fn.begin(body)
    nxt = step(rem, fn.op("ISub", i32, gap(rem), r.c32(bits)))
    fn.end("Branch", cont)
    fn.begin(cont)
    type(fn).set_incoming(phi, 1, nxt, cont)
    type(fn).set_incoming(count_phi, 1, fn.op("IAdd", i32, count, r.c32(1)), cont)
    fn.end("Branch", header)
    fn.begin(merge)
    whole = glsl(r, "Trunc", t, glsl(r, "Ldexp", t, rem, fn.op("ISub", i32, r.c32(1), exp_y)))
    direct = fn.op("FSub", t, rem, glsl(r, "Ldexp", t, whole, fn.op("ISub", i32, exp_y,
                                                                     r.c32(1))))
    # A quotient past the float range: rem's last bit is worth more than y, so fmod is 0.
    direct = fn.op("Select", t, fn.op("IsInf", b, whole), c(0.0), direct)
    below = fn.op("Select", t, fn.op("FOrdLessThan", b, rem, ay), rem, step(rem, r.c32(0)))
    out = _copysign(r, dtype, fn.op("Select", t, pow2, direct, below), x)
    keep_x = fn.op("LogicalAnd", b, finite_x, fn.op("IsInf", b, y))
    return fn.op("Select", t, ok, out, fn.op("Select", t, keep_x, x, c(np.nan)))


def _two_prod(r, dtype, a, b):
    """(p, e) with p + e = a b exactly, from correctly rounded products and sums only."""
    fn, t = r.fn, r.vt(dtype)
    splitter = r.const(2.0 ** 27 + 1 if dtype.itemsize == 8 else 2.0 ** 12 + 1, dtype)
    add = lambda u, v: fn.op("FAdd", t, u, v)     # noqa: E731
    sub = lambda u, v: fn.op("FSub", t, u, v)     # noqa: E731
    mul = lambda u, v: fn.op("FMul", t, u, v)     # noqa: E731

    def split(v):
        big = mul(splitter, v)
        high = sub(big, sub(big, v))
        return high, sub(v, high)
    p = mul(a, b)
    (ah, al), (bh, bl) = split(a), split(b)
    err = add(add(add(sub(mul(ah, bh), p), mul(ah, bl)), mul(al, bh)), mul(al, bl))
    return p, err


def glsl(r, name, t, *args):
    return r.fn.op("ExtInst", t, r.glsl, GLSL[name], *args)


def _convert(r, x, src, dst):
    fn, t = r.fn, r.vt(dst)
    if src == bool:
        return fn.op("Select", t, x, r.const(1, dst), r.const(0, dst))
    if dst == bool:
        return fn.op("FUnordNotEqual" if _kind(src) == 0 else "INotEqual", t, x,
                     r.const(0, src))
    fs, fd = _kind(src) == 0, _kind(dst) == 0
    if fs and fd:
        return fn.op("FConvert", t, x)
    if fd:
        return fn.op("ConvertSToF", t, x)
    if fs:
        return fn.op("ConvertFToS", t, x)
    return fn.op("SConvert", t, x)


def _copysign(r, dtype, a, b):
    """|a| with b's sign bit, on the bits: float64 as two 32-bit words (the high word holds
    the sign), so no 64-bit integers are needed."""
    fn, i32 = r.fn, r.i32
    if dtype.itemsize == 4:
        bits = [fn.op("Bitcast", i32, x) for x in (a, b)]
        magnitude = fn.op("BitwiseAnd", i32, bits[0], r.c32(0x7FFFFFFF))
        sign = fn.op("BitwiseAnd", i32, bits[1], r.c32(0x80000000))
        return fn.op("Bitcast", r.vt(dtype), fn.op("BitwiseOr", i32, magnitude, sign))
    vec = r.m.t_vector(i32, 2)
    wa, wb = (fn.op("Bitcast", vec, x) for x in (a, b))
    hi_a = fn.op("CompositeExtract", i32, wa, 1)
    hi_b = fn.op("CompositeExtract", i32, wb, 1)
    hi = fn.op("BitwiseOr", i32, fn.op("BitwiseAnd", i32, hi_a, r.c32(0x7FFFFFFF)),
               fn.op("BitwiseAnd", i32, hi_b, r.c32(0x80000000)))
    return fn.op("Bitcast", r.vt(dtype), fn.op("CompositeInsert", vec, hi, wa, 1))


def _scope(r, storage):
    if storage.itemsize == 8 and not np.issubdtype(storage, np.floating):
        r.m.capability(Capability["Int64Atomics"])
    return r.c32(1), r.c32(0)          # Device scope, relaxed semantics


def atomic_max(r, buf, index, value):
    t = r.vt(r._storage[buf])
    scope, sem = _scope(r, r._storage[buf])
    r.fn.op("AtomicSMax", t, r.pointer(buf, index), scope, sem, value)


def atomic_add(r, buf, index, value):
    dtype, storage = np.dtype(r.k.buffers[buf].dtype), r._storage[buf]
    fn, m = r.fn, r.m
    scope, sem = _scope(r, storage)
    ptr = r.pointer(buf, index)
    if not np.issubdtype(dtype, np.floating):
        fn.op("AtomicIAdd", r.vt(storage), ptr, scope, sem, value)
        return
    if np.issubdtype(storage, np.floating):
        m.extension("SPV_EXT_shader_atomic_float_add")
        m.capability(Capability["AtomicFloat64AddEXT" if dtype.itemsize == 8 else
                                "AtomicFloat32AddEXT"])
        fn.op("AtomicFAddEXT", r.vt(dtype), ptr, scope, sem, value)
        return
    # No float atomics: compare-exchange on the integer bits until no other thread came
    # between the read and the write.
    it, ft = r.vt(storage), r.vt(dtype)
    first = fn.op("Load", it, ptr)
    pre = fn.label
    header, body, cont, merge = (m.id() for _ in range(4))
    fn.end("Branch", header)
    fn.begin(header)
    expected, phi = fn.phi(it, [(first, pre), (0, 0)])
    fn.end("LoopMerge", merge, cont, 0)
    fn.end("Branch", body)
    fn.begin(body)
    new = fn.op("Bitcast", it, fn.op("FAdd", ft, fn.op("Bitcast", ft, expected), value))
    seen = fn.op("AtomicCompareExchange", it, ptr, scope, sem, sem, new, expected)
    done = fn.op("IEqual", m.t_bool(), seen, expected)
    fn.end("BranchConditional", done, merge, cont)
    fn.begin(cont)
    type(fn).set_incoming(phi, 1, seen, cont)
    fn.end("Branch", header)
    fn.begin(merge)
