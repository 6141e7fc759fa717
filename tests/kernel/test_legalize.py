"""legalize(): composites become core ops with bit-identical results, on every backend."""

from dataclasses import dataclass

import numpy as np
import pytest
from opkernels import assert_same_bits, op_kernel, run

from dloop.backends.base import available, get_backend
from dloop.kernel import kir
from dloop.kernel.core import CORE, TRANSCENDENTAL
from dloop.kernel.legalize import legalize

F64, F32, I64, I32, BOOL = (np.dtype(t) for t in ("float64", "float32", "int64", "int32",
                                                   "bool"))
BACKENDS = ["interpret"] + [b for b in ("cpu",) if available(b)[0]]


@dataclass(frozen=True)
class Caps:
    native_math: frozenset


NATIVE = Caps(frozenset((op, d) for op in TRANSCENDENTAL for d in ("float32", "float64")))
NO_MATH = Caps(frozenset())
rng = np.random.default_rng(8)


def _floats(dtype, n=3000):
    f = np.finfo(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -3.0,
                        7.0, f.tiny, -f.tiny, f.tiny / 8, f.max, -f.max, 2.0**31, -2.0**31,
                        2.0**63, -2.0**63, 2.0**63 - 2**10, 1e300, -1e300], dtype=np.float64)
    mag = 10.0 ** rng.uniform(-40, 40, n)
    rand = mag * rng.choice([-1.0, 1.0], n)
    small = rng.integers(-20, 20, n) / rng.choice([1.0, 2.0, 4.0], n)
    with np.errstate(over="ignore"):
        return np.concatenate([special, rand, small]).astype(dtype)


def _ints(dtype, n=3000):
    i = np.iinfo(dtype)
    special = np.array([i.min, i.min + 1, -1, 0, 1, i.max, i.max - 1, -7, 7, 3, -3, 64, 32])
    return np.concatenate([special, rng.integers(i.min, i.max, n, endpoint=True),
                           rng.integers(-100, 100, n)]).astype(dtype)


def _values(dtype):
    if dtype == BOOL:
        return rng.integers(0, 2, 500).astype(bool)
    return _floats(dtype) if dtype.kind == "f" else _ints(dtype)


def _pairs(dtype, op):
    a = _values(dtype)
    if op in ("shl", "shr"):
        b = rng.integers(-70, 70, a.size).astype(dtype)
        return [a, b]
    sa = a[:30]                          # every pair of special values, then shuffled pairs
    x, y = np.meshgrid(sa, sa)
    return [np.concatenate([x.ravel(), a]), np.concatenate([y.ravel(), rng.permutation(a)])]


BINARY = [(op, d) for op in ("floordiv", "mod", "max", "min") for d in (F64, F32, I64, I32)] + \
    [(op, d) for op in ("shl", "shr") for d in (I64, I32)] + \
    [("max", BOOL), ("min", BOOL), ("add", BOOL), ("mul", BOOL)]
UNARY = [("sign", d) for d in (F64, F32, I64, I32)] + \
    [(op, d) for op in ("abs", "floor", "ceil", "round", "trunc") for d in (I64, I32, BOOL)]
CONVERT = [(F64, I64), (F64, I32), (F32, I64), (F32, I32), (F64, BOOL), (I64, BOOL),
           (I64, I32), (I32, I64), (I32, F32), (I64, F64), (BOOL, F64), (F64, F32)]


def _core_only(stmts):
    for s in kir.statements(stmts):
        if isinstance(s, kir.Assign):
            assert s.op in CORE, s.op


def _check(kernel, inputs, caps=NO_MATH):
    before = str(kernel)
    legal = legalize(kernel, caps)
    assert str(kernel) == before                 # the input kernel is not changed
    _core_only(legal.body)
    assert legalize(legal, caps).body == legal.body   # idempotent
    want = run("interpret", kernel, inputs)
    for backend in BACKENDS:
        assert_same_bits(run(backend, legal, inputs), want, inputs)
    for backend in BACKENDS[1:]:             # compiled backends legalize by themselves too
        assert_same_bits(run(backend, kernel, inputs), want, inputs)


@pytest.mark.parametrize("op,dtype", BINARY, ids=[f"{o}-{d}" for o, d in BINARY])
def test_binary_composite_is_bit_exact(op, dtype):
    _check(op_kernel(op, [dtype, dtype], dtype), _pairs(dtype, op))


@pytest.mark.parametrize("op,dtype", UNARY, ids=[f"{o}-{d}" for o, d in UNARY])
def test_unary_composite_is_bit_exact(op, dtype):
    _check(op_kernel(op, [dtype], dtype), [_values(dtype)])


@pytest.mark.parametrize("src,dst", CONVERT, ids=[f"{s}-{d}" for s, d in CONVERT])
def test_convert_is_bit_exact(src, dst):
    _check(op_kernel("convert", [src], dst), [_values(src)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src", [F64, F32])
def test_float_to_int_saturates_and_nan_gives_zero(backend, src):
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 2.7, -2.7, -0.0, 2.0**62,
                  -2.0**63, 2.0**31, -2.0**31 - 4096], dtype=src)
    m, n = np.iinfo(np.int64), np.iinfo(np.int32)
    want64 = [0, m.max, m.min, m.max, m.min, 2, -2, 0, 2**62, m.min, 2**31, -2**31 - 4096]
    want32 = [0, n.max, n.min, n.max, n.min, 2, -2, 0, n.max, n.min, n.max, n.min]
    np.testing.assert_array_equal(run(backend, op_kernel("convert", [src], I64), [x]), want64)
    np.testing.assert_array_equal(run(backend, op_kernel("convert", [src], I32), [x]), want32)


def test_int_floordiv_by_minus_one_and_zero():
    m = np.iinfo(np.int64)
    x = np.array([m.min, m.max, 7, -7, 5], np.int64)
    y = np.array([-1, -1, 0, 2, -2], np.int64)
    for backend in BACKENDS:
        q = run(backend, op_kernel("floordiv", [I64, I64], I64), [x, y])
        r = run(backend, op_kernel("mod", [I64, I64], I64), [x, y])
        np.testing.assert_array_equal(q, [m.min, -m.max, 0, -4, -3])    # MIN // -1 wraps
        np.testing.assert_array_equal(r, [0, 0, 0, 1, -1])


# -- random programs: nested loops of composite and core ops --

_OPS = {F64: ["add", "sub", "mul", "div", "floordiv", "mod", "max", "min", "sign", "neg",
              "abs", "floor", "copysign", "sin", "exp", "atan2", "tanh"],
        I64: ["add", "sub", "mul", "floordiv", "mod", "max", "min", "shl", "shr", "sign",
              "abs", "xor", "and"]}
_ARITY = {"sign": 1, "neg": 1, "abs": 1, "floor": 1, "sin": 1, "exp": 1, "tanh": 1}


def _random_block(r, pool, depth):
    stmts = []
    for _ in range(r.integers(4, 9)):
        if depth < 2 and r.random() < 0.15:
            stmts.append(_random_loop(r, pool, depth))
            continue
        if r.random() < 0.2:
            src = pool[F64 if r.random() < 0.5 else I64]
            dst = I64 if src is pool[F64] else F64
            x = src[r.integers(len(src))]
            out = kir.KVar(dst)
            stmts.append(kir.Assign(out, "convert", (x,)))
            pool[dst].append(out)
            continue
        dtype = F64 if r.random() < 0.6 else I64
        op = r.choice(_OPS[dtype])
        args = tuple(pool[dtype][r.integers(len(pool[dtype]))]
                     for _ in range(_ARITY.get(op, 2)))
        out = kir.KVar(dtype)
        stmts.append(kir.Assign(out, str(op), args))
        pool[dtype].append(out)
    return stmts


def _random_loop(r, pool, depth):
    k, c, y, o = kir.KVar(I64), kir.KVar(F64), kir.KVar(F64), kir.KVar(F64)
    inner = {F64: pool[F64] + [c], I64: pool[I64] + [k]}
    body = _random_block(r, inner, depth + 1)
    body.append(kir.Assign(y, "add", (c, inner[F64][-1])))
    init = pool[F64][r.integers(len(pool[F64]))]
    loop = kir.For(k, kir.Const(0, I64), kir.Const(int(r.integers(0, 4)), I64), False, [c],
                   [init], body, [y], [o])
    pool[F64].append(o)
    return loop


def _random_kernel(seed):
    r = np.random.default_rng(seed)
    tid = kir.KVar(I64)
    x, i = kir.KVar(F64), kir.KVar(I64)
    pool = {F64: [x, kir.Const(1.5, F64)], I64: [i, kir.Const(3, I64)]}
    body = [kir.Load(x, 0, tid), kir.Load(i, 1, tid)] + _random_block(r, pool, 0)
    body.append(kir.Store(2, tid, pool[F64][-1]))
    body.append(kir.Store(3, tid, pool[I64][-1]))
    kernel = kir.Kernel(f"random{seed}", tid, body)
    kernel.buffers = [kir.BufferSpec("in", F64, 0), kir.BufferSpec("in", I64, 1),
                      kir.BufferSpec("out", F64, 2), kir.BufferSpec("out", I64, 3)]
    return kernel


def _run_random(backend, kernel, x, i):
    bufs = [x.copy(), i.copy(), np.zeros_like(x), np.zeros_like(i)]
    be = get_backend(backend)
    be.launch(be.compile(kernel), x.size, bufs)
    return bufs[2], bufs[3]


@pytest.mark.parametrize("seed", range(12))
def test_random_kernel_keeps_its_meaning(seed):
    kernel = _random_kernel(seed)
    x, i = _floats(F64, 300), _ints(I64, 300)
    i = np.concatenate([i, rng.integers(-70, 70, i.size)])
    x = np.resize(x, i.size)
    want = _run_random("interpret", kernel, x, i)
    native = legalize(kernel, NATIVE)
    _core_only(native.body)
    for got, w in zip(_run_random("interpret", native, x, i), want):
        assert_same_bits(got, w)
    # Without native math every backend runs the same core ops: identical bits.
    soft = legalize(kernel, NO_MATH)
    _core_only(soft.body)
    got = _run_random("interpret", soft, x, i)
    for backend in BACKENDS[1:]:
        for g, w in zip(_run_random(backend, soft, x, i), got):
            assert_same_bits(g, w)
    # Software math differs from NumPy's by an ulp or two, which later ops may amplify;
    # the composites around it stay exact, so nearly all elements agree closely.
    close = np.isclose(got[0], want[0], rtol=1e-12, atol=0, equal_nan=True)
    assert close.mean() > 0.98
