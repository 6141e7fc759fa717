"""The SPIR-V renderer on hand-built kernels, against the interpreter: every elementwise op on
special values (signed zeros, infinities, NaN, extremes), atomics with and without native
float atomics, while loops, counters, and OpLine pointing at the user's lines."""

import shutil
import subprocess

import numpy as np
import pytest

from dloop.backends.base import available, get_backend
from dloop.kernel import kir

ok, why = available("vulkan")
if not ok:
    pytest.skip(why, allow_module_level=True)

I64 = np.dtype(np.int64)
F32, F64, I32, BOOL = (np.dtype(t) for t in (np.float32, np.float64, np.int32, bool))
# No subnormals: Vulkan keeps them only under DenormPreserve, which lavapipe lacks.
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, -3.0, 7.25, 1e-30, -1e30, np.inf, -np.inf,
           np.nan]
INTS = [0, 1, -1, 2, -7, 13, 100, -2 ** 31, 2 ** 31 - 1, 31, 32, 63, 64]


def _pairs(values, dtype):
    a, b = np.meshgrid(np.array(values, dtype), np.array(values, dtype))
    return a.reshape(-1), b.reshape(-1)


def _elementwise(op, in_dtypes, out_dtype):
    tid = kir.KVar(I64)
    ins = [kir.KVar(d) for d in in_dtypes]
    out = kir.KVar(out_dtype)
    body = [kir.Load(v, k, tid) for k, v in enumerate(ins)]
    body += [kir.Assign(out, op, tuple(ins), src="/user/prog.py:7"),
             kir.Store(len(ins), tid, out)]
    kernel = kir.Kernel(f"op_{op}", tid, body)
    kernel.buffers = [kir.BufferSpec("in", d, k) for k, d in enumerate(in_dtypes)]
    kernel.buffers.append(kir.BufferSpec("out", out_dtype, len(ins)))
    return kernel


def _run(name, kernel, arrays, n):
    be = get_backend(name)
    bufs = [be.upload(a, a.dtype) for a in arrays]
    be.launch(be.compile(kernel), n, bufs)
    be.synchronize()
    return [be.to_numpy(b) for b in bufs]


def _compare(op, arrays, out_dtype, ulps=0):
    kernel = _elementwise(op, [a.dtype for a in arrays], out_dtype)
    n = arrays[0].size
    bufs = list(arrays) + [np.zeros(n, out_dtype)]
    want = _run("interpret", kernel, bufs, n)[-1]
    got = _run("vulkan", kernel, bufs, n)[-1]
    if np.issubdtype(out_dtype, np.floating):
        assert np.array_equal(np.isnan(got), np.isnan(want)), (op, arrays, got, want)
        finite = np.isfinite(want)
        assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
        spacing = np.abs(np.spacing(want[finite].astype(out_dtype)))
        err = np.abs(got[finite] - want[finite])
        assert (err <= ulps * spacing).all(), (op, err.max(), arrays[0][finite][err.argmax()])
        exact = finite & (want == 0)
        assert np.array_equal(np.signbit(got[exact]), np.signbit(want[exact])), op
    else:
        np.testing.assert_array_equal(got, want, err_msg=op)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "max", "min", "copysign", "floordiv",
                                "mod", "lt", "le", "gt", "ge", "eq", "ne"])
def test_float_binary_ops(op, dtype):
    out = BOOL if op in ("lt", "le", "gt", "ge", "eq", "ne") else dtype
    _compare(op, _pairs(SPECIAL, dtype), out)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("op", ["div", "sqrt"])
def test_float_division_and_sqrt(op, dtype):
    # Vulkan lets float32 division and sqrt be off by a few ulps (NVIDIA's are): allow 3.
    arrays = _pairs(SPECIAL, dtype) if op == "div" else (np.array(SPECIAL, dtype),)
    _compare(op, arrays, dtype, ulps=3 if dtype == F32 else 0)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("op", ["neg", "abs", "floor", "ceil", "trunc", "round", "sign"])
def test_float_unary_ops(op, dtype):
    _compare(op, (np.array(SPECIAL + [2.5, -0.5, 1.5], dtype),), dtype)


@pytest.mark.parametrize("src,dst", [(F32, I32), (F64, I64), (F32, I64), (F64, I32), (F32, F64),
                                     (F64, F32), (I32, F32), (I64, F64), (I64, I32), (I32, I64),
                                     (F32, BOOL), (I64, BOOL), (BOOL, F32), (BOOL, I64)])
def test_conversions(src, dst):
    if src == BOOL:
        x = np.array([True, False, True])
    elif np.issubdtype(src, np.floating):
        x = np.array(SPECIAL + [3e9, -3e9, 1e19, -1e19, 2.0 ** 31, 2.0 ** 63], src)
    else:
        x = np.array(INTS + [2 ** 40 if src == I64 else 5], src)
    _compare("convert", (x,), dst)


@pytest.mark.parametrize("dtype", [I32, I64])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "max", "min", "floordiv", "mod", "and",
                                "or", "xor", "shl", "shr", "lt", "ge", "eq", "ne"])
def test_integer_binary_ops(op, dtype):
    out = BOOL if op in ("lt", "ge", "eq", "ne") else dtype
    _compare(op, _pairs(INTS, dtype), out)


@pytest.mark.parametrize("dtype", [I32, I64])
@pytest.mark.parametrize("op", ["neg", "abs", "sign", "not"])
def test_integer_unary_ops(op, dtype):
    _compare(op, (np.array(INTS, dtype),), dtype)


@pytest.mark.parametrize("op", ["and", "or", "xor", "lt", "le", "gt", "ge", "eq", "ne", "max",
                                "min", "add", "mul"])
def test_bool_ops(op):
    _compare(op, _pairs([True, False], BOOL), BOOL)


# On devices with float64, float32 transcendentals are kernel/mathlib.py's float64 code
# rounded once: within an ulp of NumPy's (which is itself not always correctly rounded).
MATH_ULPS = {}


@pytest.mark.parametrize("op", ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                                "tanh", "asinh", "acosh", "atanh", "exp", "expm1", "log",
                                "log1p", "log2", "log10"])
def test_float32_transcendentals(op):
    rng = np.random.default_rng(3)
    x = np.concatenate([np.array(SPECIAL, F32), rng.uniform(-3, 3, 200).astype(F32),
                        np.array([1e-6, -1e-6, 0.99, 1.01, 20.0, -20.0], F32)])
    if op in ("sin", "cos", "tan"):
        x = x[~(np.abs(x) > 1e4)]      # huge arguments: GLSL gives no accuracy there
    _compare(op, (x,), F32, ulps=MATH_ULPS.get(op, 2))


@pytest.mark.parametrize("op", ["pow", "atan2"])
def test_float32_binary_transcendentals(op):
    vals = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 3.0, -3.0, 2.5, np.inf, -np.inf, np.nan]
    _compare(op, _pairs(vals, F32), F32, ulps=MATH_ULPS.get(op, 2))


def _atomic_kernel(dtype):
    """Thread t adds x[t] into acc[t % 3]."""
    tid = kir.KVar(I64)
    x, slot = kir.KVar(dtype), kir.KVar(I64)
    body = [kir.Load(x, 0, tid), kir.Assign(slot, "mod", (tid, kir.Const(3, I64))),
            kir.AtomicAdd(1, slot, x)]
    kernel = kir.Kernel("atomic", tid, body)
    kernel.buffers = [kir.BufferSpec("in", dtype, 0), kir.BufferSpec("accum", dtype, ("accum", 0))]
    return kernel


@pytest.mark.parametrize("dtype", [F32, F64, I32, I64])
def test_atomic_add(dtype):
    """float64 has no atomic add on lavapipe: the compare-exchange loop is what runs."""
    n = 3000
    x = (np.arange(n) % 7 + 1).astype(dtype)      # small integers: every order sums exactly
    got = _run("vulkan", _atomic_kernel(dtype), [x, np.zeros(3, dtype)], n)[1]
    np.testing.assert_array_equal(got, [x[k::3].sum() for k in range(3)])


def test_while_loop_with_counter():
    """Collatz steps per element, through a While with a carried int and a CountMax."""
    tid = kir.KVar(I64)
    x, v, steps, v2, s2, out_v, out_s = (kir.KVar(I64) for _ in range(7))
    going, odd = kir.KVar(BOOL), kir.KVar(BOOL)
    half, triple, triple1, r = (kir.KVar(I64) for _ in range(4))
    cond_body = [kir.Assign(going, "gt", (v, kir.Const(1, I64)))]
    body = [kir.Assign(r, "mod", (v, kir.Const(2, I64))),
            kir.Assign(odd, "eq", (r, kir.Const(1, I64))),
            kir.Assign(half, "floordiv", (v, kir.Const(2, I64))),
            kir.Assign(triple, "mul", (v, kir.Const(3, I64))),
            kir.Assign(triple1, "add", (triple, kir.Const(1, I64))),
            kir.Assign(v2, "select", (odd, triple1, half)),
            kir.Assign(s2, "add", (steps, kir.Const(1, I64))),
            kir.CountMax(0, s2)]
    stmts = [kir.Load(x, 0, tid),
             kir.While([v, steps], [x, kir.Const(0, I64)], cond_body, going, body, [v2, s2],
                       [out_v, out_s]),
             kir.Store(1, tid, out_s)]
    kernel = kir.Kernel("collatz", tid, stmts, counters=[0])
    kernel.buffers = [kir.BufferSpec("in", I64, 0), kir.BufferSpec("out", I64, 1),
                      kir.BufferSpec("counts", I64)]
    x = np.arange(1, 40, dtype=np.int64)
    bufs = [x, np.zeros_like(x), np.zeros_like(x)]
    want = _run("interpret", kernel, bufs, x.size)
    got = _run("vulkan", kernel, bufs, x.size)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])
    assert want[1][26] == 111                      # 27 takes 111 steps


needs_tools = pytest.mark.skipif(shutil.which("spirv-val") is None,
                                 reason="spirv-tools is not installed (apt-get install spirv-tools)")


@needs_tools
def test_oplines_name_the_user_lines(tmp_path):
    be = get_backend("vulkan")
    code = be.render(_elementwise("add", [F32, F32], F32))
    path = tmp_path / "k.spv"
    path.write_bytes(code)
    text = subprocess.run(["spirv-dis", str(path)], capture_output=True, text=True).stdout
    assert 'OpString "/user/prog.py"' in text
    assert "OpLine %" in text and " 7 0" in text


@needs_tools
def test_the_thread_guard_compares_unsigned(tmp_path):
    """Invocations past n do nothing: their global id compared with n as unsigned integers,
    since a 2-D dispatch near 2^31 threads pads past 2^31 - 1, whose ids a signed comparison
    would take for negative ones below n."""
    be = get_backend("vulkan")
    path = tmp_path / "k.spv"
    path.write_bytes(be.render(_elementwise("add", [F32, F32], F32)))
    text = subprocess.run(["spirv-dis", str(path)], capture_output=True, text=True).stdout
    guard = next(line for line in text.splitlines() if "OpBranchConditional" in line)
    condition = guard.split()[1]
    assert f"{condition} = OpULessThan" in text


@needs_tools
@pytest.mark.parametrize("dtype", [F32, F64])
def test_modules_for_features_lavapipe_lacks_validate(dtype):
    """NVIDIA's driver has float64 atomic add and keeps subnormals: the modules made for it
    (never run here) still pass spirv-val."""
    import dataclasses

    from dloop.backends.vulkan.launch import validate
    from dloop.backends.vulkan.render import render
    from dloop.kernel.legalize import legalize

    be = get_backend("vulkan")
    features = dataclasses.replace(be.features, float64_atomic_add=True, float32_atomic_add=True,
                                   denorm_preserve32=True, denorm_preserve64=True)
    words = render(legalize(_atomic_kernel(dtype), be.caps), features)
    code = np.asarray(words, dtype="<u4").tobytes()
    validate(code)
    assert (words[0], len(code) % 4) == (0x07230203, 0)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_fmod_is_exact_for_every_quotient_size(dtype):
    """Quotients from below 1 to the whole exponent range: the loop-free step and the loop
    for huge quotients both give C's fmod bit for bit."""
    rng = np.random.default_rng(5)
    top = 300 if dtype == F64 else 38
    x = (rng.uniform(-1, 1, 400) * 10.0 ** rng.uniform(-top, top, 400)).astype(dtype)
    y = (rng.uniform(-1, 1, 400) * 10.0 ** rng.uniform(-top, top, 400)).astype(dtype)
    y[:50] = 4.0
    got = _run("vulkan", _elementwise("frem", [dtype, dtype], dtype),
               [x, y, np.zeros_like(x)], x.size)[-1]
    want = np.fmod(x, y)
    keep = np.abs(want) >= np.finfo(dtype).tiny         # no subnormals on lavapipe
    np.testing.assert_array_equal(got[keep], want[keep])
    assert keep.sum() > 300
