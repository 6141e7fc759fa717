"""Exactness that must not depend on the driver's division: floor division, modulo and fmod
stay NumPy's bit for bit on lavapipe with every division and square root moved 1 to 3 ulps
(vulkan/rough.py: what Vulkan allows and NVIDIA's driver does), and float adds, subtracts
and multiplies reach the driver marked NoContraction."""

import numpy as np
import pytest

from dloop.backends.base import available, get_backend
from dloop.backends.vulkan import spirv as S
from dloop.kernel import kir

ok, why = available("vulkan")
if not ok:
    pytest.skip(why, allow_module_level=True)

from dloop.backends.vulkan.launch import VulkanBackend  # noqa: E402

I64, F32, F64 = np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.float64)


def _kernel(op, dtype, n_in=2):
    tid = kir.KVar(I64)
    ins = [kir.KVar(dtype) for _ in range(n_in)]
    out = kir.KVar(dtype)
    body = [kir.Load(v, k, tid) for k, v in enumerate(ins)]
    body += [kir.Assign(out, op, tuple(ins)), kir.Store(n_in, tid, out)]
    kernel = kir.Kernel(f"rough_{op}", tid, body)
    kernel.buffers = [kir.BufferSpec("in", dtype, k) for k in range(n_in)]
    kernel.buffers.append(kir.BufferSpec("out", dtype, n_in))
    return kernel


@pytest.fixture(scope="module")
def rough():
    be = VulkanBackend(get_backend("vulkan").device)
    be.rough = True
    return be


def _run(be, kernel, arrays):
    n = arrays[0].size
    bufs = [be.upload(a, a.dtype) for a in arrays] + [be.upload(np.zeros(n, arrays[0].dtype),
                                                                arrays[0].dtype)]
    be.launch(be.compile(kernel), n, bufs)
    be.synchronize()
    return be.to_numpy(bufs[-1])


def _hard_pairs(dtype, n=6000, seed=11):
    """Quotients near integers and half-integers up to 2^(p+10), the whole exponent range,
    and every pair of special values. No subnormals: lavapipe flushes them."""
    rng = np.random.default_rng(seed)
    f = np.finfo(dtype)
    bits = f.nmant + 1
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, -3.0, 0.1, 7.0,
                        float(f.max), -float(f.max), float(f.tiny), 3.0e23, -3.0e23,
                        2.0 ** bits, 2.0 ** bits - 1, 1e20], dtype)
    sx, sy = (v.ravel() for v in np.meshgrid(special, special))
    with np.errstate(all="ignore"):
        y = 2.0 ** rng.uniform(-60, 60, n) * rng.choice([-1.0, 1.0], n)
        q = np.floor(2.0 ** rng.uniform(0, bits + 10, n)) * rng.choice([-1.0, 1.0], n)
        q = np.where(rng.random(n) < 0.2, q + 0.5, q)
        x = (q * y).astype(dtype)
        x = np.where(rng.random(n) < 0.5, x, np.nextafter(x, -x))
        lo, hi = np.log2(float(f.tiny)), np.log2(float(f.max))
        wide = [2.0 ** rng.uniform(lo, hi, n) * rng.choice([-1.0, 1.0], n) for _ in "xy"]
        x = np.concatenate([sx, x, wide[0]]).astype(dtype)
        y = np.concatenate([sy, y.astype(dtype), wide[1]]).astype(dtype)
        tiny = lambda v: (v != 0) & (np.abs(v) < f.tiny)        # noqa: E731
        keep = ~tiny(x) & ~tiny(y) & ~tiny(np.fmod(x, y)) & ~tiny(np.remainder(x, y))
    return x[keep], y[keep]


def _bits(a):
    a = np.asarray(a)
    return np.where(np.isnan(a), np.nan, a).view(f"i{a.dtype.itemsize}")


NUMPY = {"floordiv": np.floor_divide, "mod": np.remainder, "frem": np.fmod}


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("op", ["floordiv", "mod", "frem"])
def test_exact_with_rough_division(rough, op, dtype):
    x, y = _hard_pairs(dtype)
    with np.errstate(all="ignore"):
        want = NUMPY[op](x, y)
    for be in (rough, get_backend("vulkan")):
        got = _run(be, _kernel(op, dtype), [x, y])
        bad = _bits(got) != _bits(want)
        assert not bad.any(), (be.rough, bad.sum(), x[bad][:3], y[bad][:3], got[bad][:3])


@pytest.mark.parametrize("dtype", [F32, F64])
def test_rough_mode_moves_divisions(rough, dtype):
    """The mode is live: quotients move 1 to 3 ulps, both ways, and special ones stay."""
    x, y = _hard_pairs(dtype)
    with np.errstate(all="ignore"):
        want = x / y
    plain = VulkanBackend(rough.device)
    if (_bits(_run(plain, _kernel("div", dtype), [x, y])) != _bits(want)).any():
        pytest.skip("this device's own division is not correctly rounded (NVIDIA's float32 "
                    "is not), so moves cannot be measured from NumPy's quotient; lavapipe's is")
    got = _run(rough, _kernel("div", dtype), [x, y])
    moved = np.abs(_bits(got).astype(np.int64) - _bits(want).astype(np.int64))
    normal = np.isfinite(want) & (np.abs(want) >= np.finfo(dtype).tiny) & \
        (np.abs(want) < np.finfo(dtype).max)
    assert set(np.unique(moved[normal])) == {1, 2, 3}
    fixed = (want == 0) | ~np.isfinite(want)
    assert fixed.sum() > 50 and (_bits(got[fixed]) == _bits(want[fixed])).all()


def test_float_arithmetic_is_never_contracted():
    """A driver may fuse a * b + c unless the result is decorated NoContraction, and the
    exact-product steps of the math library need every product rounded by itself."""
    kernel = _kernel("floordiv", F64)
    be = get_backend("vulkan")
    words = list(np.frombuffer(be.render(be.legalize(kernel)), "<u4"))
    k, arith, decorated = 5, set(), set()
    names = {S.OP[n]: n for n in ("FAdd", "FSub", "FMul", "Decorate")}
    while k < len(words):
        count, code = words[k] >> 16, words[k] & 0xFFFF
        name = names.get(code)
        if name == "Decorate" and words[k + 2] == S.Decoration["NoContraction"]:
            decorated.add(words[k + 1])
        elif name is not None and name != "Decorate":
            arith.add(words[k + 2])
        k += count
    assert len(arith) > 100 and arith <= decorated


# Documented bounds (docs/math.md) of the float64 functions with quotients or square roots.
MATH_BOUNDS = {"atan2": 1, "tan": 2, "asin": 2, "acosh": 2, "atanh": 2, "cosh": 1}


@pytest.mark.parametrize("op", sorted(MATH_BOUNDS))
def test_math_within_bounds_with_rough_division(rough, op):
    """kernel/mathlib.py on lavapipe with rough divisions and roots, Newton steps included."""
    if not rough.features.float64:
        pytest.skip("the device has no float64")
    rng = np.random.default_rng(3)
    n = 20000
    x = np.concatenate([rng.uniform(-1, 1, n), 2.0 ** rng.uniform(-60, 60, n)])
    if op == "acosh":
        x = 1 + np.abs(x)
    y = np.concatenate([2.0 ** rng.uniform(-60, 60, n), rng.uniform(-1, 1, n)])
    args = [x, y] if op == "atan2" else [x]
    got = _run(rough, _kernel(op, F64, len(args)), args)
    with np.errstate(all="ignore"):
        want = getattr(np, {"atan2": "arctan2", "asin": "arcsin", "acosh": "arccosh",
                            "atanh": "arctanh"}.get(op, op))(*args)
    finite = np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    err = np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]))
    assert err.max() <= MATH_BOUNDS[op], (op, err.max(), x[finite][err.argmax()])
