"""The core ops that are not graph primitives, on every backend, against plain Python."""

import math
import struct

import numpy as np
import pytest
from opkernels import op_kernel, run

from dloop.backends.base import available

BACKENDS = ["interpret"] + [b for b in ("cpu",) if available(b)[0]]
rng = np.random.default_rng(3)


def _wrap(v, bits):
    return (v + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)


def _ints(dtype, n=400):
    i = np.iinfo(dtype)
    edge = [i.min, i.min + 1, -1, 0, 1, i.max, 7, -7]
    return np.concatenate([edge, rng.integers(i.min, i.max, n, endpoint=True),
                           rng.integers(-50, 50, n)]).astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_idiv_irem_truncate_like_c(backend, dtype):
    a = _ints(dtype)
    b = np.resize(_ints(dtype)[::-1], a.size)
    b = np.where((b == 0) | (b == -1), 3, b).astype(dtype)     # the caller's guarantee
    q = run(backend, op_kernel("idiv", [dtype, dtype], dtype), [a, b])
    r = run(backend, op_kernel("irem", [dtype, dtype], dtype), [a, b])
    for x, y, gq, gr in zip(a.tolist(), b.tolist(), q.tolist(), r.tolist()):
        want_q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        assert (gq, gr) == (want_q, x - want_q * y), (x, y)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,bits", [(np.int64, 64), (np.int32, 32)])
def test_shifts_in_range(backend, dtype, bits):
    a = _ints(dtype)
    n = rng.integers(0, bits, a.size).astype(dtype)
    left = run(backend, op_kernel("ishl", [dtype, dtype], dtype), [a, n])
    right = run(backend, op_kernel("ishr", [dtype, dtype], dtype), [a, n])
    for x, k, gl, gr in zip(a.tolist(), n.tolist(), left.tolist(), right.tolist()):
        assert (gl, gr) == (_wrap(x << k, bits), x >> k), (x, k)


@pytest.mark.parametrize("backend", BACKENDS)
def test_frem_is_c_fmod(backend):
    x = np.concatenate([[-0.0, 5.5, -5.5, np.inf, 1.0], 10.0 ** rng.uniform(-20, 20, 300)
                        * rng.choice([-1, 1], 300)])
    y = np.concatenate([[3.0, 2.0, 2.0, 2.0, 0.0], 10.0 ** rng.uniform(-20, 20, 300)])
    got = run(backend, op_kernel("frem", ["float64", "float64"], "float64"), [x, y])
    for a, b, g in zip(x.tolist(), y.tolist(), got.tolist()):
        want = math.fmod(a, b) if math.isfinite(a) and b != 0 else math.nan
        assert (math.isnan(g) and math.isnan(want)) or \
            (g == want and math.copysign(1, g) == math.copysign(1, want)), (a, b)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src,dst", [("float64", "int64"), ("float32", "int32"),
                                     ("float64", "int32")])
def test_ftoi_truncates_in_range(backend, src, dst):
    limit = 2.0 ** (np.iinfo(dst).bits - 1)
    x = rng.uniform(-1, 1, 500) * 2.0 ** rng.uniform(0, np.log2(limit), 500)
    x = np.concatenate([[-0.0, 0.5, -0.5, -limit], x]).astype(src)
    x = x[(x > -limit - 1) & (x < limit)]
    got = run(backend, op_kernel("ftoi", [src], dst), [x])
    assert got.tolist() == [int(v) for v in x.tolist()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bitcast_reinterprets(backend):
    x = np.array([1.0, -0.0, np.inf, 5e-324, -2.5])
    got = run(backend, op_kernel("bitcast", ["float64"], "int64"), [x])
    assert got.tolist() == [struct.unpack("<q", struct.pack("<d", v))[0] for v in x]
    back = run(backend, op_kernel("bitcast", ["int64"], "float64"), [got])
    assert back.tobytes() == x.tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_narrowing_convert_wraps(backend):
    a = _ints(np.int64)
    got = run(backend, op_kernel("convert", ["int64"], "int32"), [a])
    assert got.tolist() == [_wrap(v, 32) for v in a.tolist()]
