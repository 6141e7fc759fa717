"""The software math of kernel/mathlib.py against NumPy: 10^6 points per function and
dtype, log-uniform over the whole range plus each function's interesting region and the
special values; the bound per function is the documented one (docs/math.md)."""

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from opkernels import assert_same_bits, op_kernel, run

from dloop.backends.base import available, get_backend
from dloop.kernel import kir, mathlib, mathlib32
from dloop.kernel.legalize import legalize

N = 10 ** 6
SLICE = 200_000
UNARY = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
         "acosh", "atanh", "exp", "expm1", "log", "log1p", "log2", "log10")
BINARY = ("pow", "atan2")
NUMPY = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
         "acosh": np.arccosh, "atanh": np.arctanh, "atan2": np.arctan2, "pow": np.power}
# The documented bounds (docs/math.md): max ulps from NumPy's float64 answer, rounded to
# float32 for float32 (NumPy's own float32 functions are themselves a few ulps off).
MAX_ULPS = {
    "float64": {"sin": 1, "cos": 1, "tan": 2, "asin": 2, "acos": 2, "atan": 1, "sinh": 1,
                "cosh": 1, "tanh": 1, "asinh": 2, "acosh": 2, "atanh": 2, "exp": 1,
                "expm1": 1, "log": 1, "log1p": 1, "log2": 1, "log10": 1, "pow": 1,
                "atan2": 1},
    "float32": {op: 1 for op in UNARY + BINARY},
}


@dataclass(frozen=True)
class Caps:
    native_math: frozenset
    rounded_division: bool = True


NO_MATH = Caps(frozenset())


def ulps(got, want):
    """Distance in units in the last place (consecutive floats are 1 apart); NaN against
    NaN is 0, NaN against a number is infinite."""
    got, want = np.asarray(got), np.asarray(want)
    width = np.dtype(f"i{got.dtype.itemsize}")
    gi, wi = got.view(width).astype(np.int64), want.view(width).astype(np.int64)
    sign = np.int64(np.iinfo(width).max)
    go = np.where(gi < 0, -(gi & sign), gi)
    wo = np.where(wi < 0, -(wi & sign), wi)
    same_side = (go >= 0) == (wo >= 0)
    with np.errstate(over="ignore"):
        d = np.where(same_side, np.abs(go - wo).astype(np.float64),
                     np.abs(go.astype(np.float64)) + np.abs(wo.astype(np.float64)))
    d = np.where(np.isnan(got) & np.isnan(want), 0, d)
    return np.where(np.isnan(got) != np.isnan(want), np.inf, d)


def _special(dtype):
    f = np.finfo(dtype)
    v = [0.0, np.inf, np.nan, f.tiny, f.tiny / 2 ** 10, f.smallest_subnormal, f.max, 1.0,
         0.5, 2.0, 1e-300, 1e300, 709.78, 709.79, 710.5, 745.1, 745.2, 88.7, 89.0, 103.9,
         104.0, 0.34657359, 22.0, 2.0 ** 28, 2.0 ** 28 + 1, np.pi, np.pi / 2, np.pi / 4,
         1 - 2 ** -53, 1 + 2 ** -52, 3.0, 10.0, 1e22, 4.2e8, 1e-8, 37.5, 40.0,
         252.89820861816406]      # the float32 below 4096 nearest a multiple of pi/2
    v = np.array(v)
    with np.errstate(over="ignore"):
        return np.concatenate([v, -v]).astype(dtype)


def _near_multiples_of_pio2():
    """Where an argument reduction loses most: the floats nearest k pi/2 and their
    neighbours (x - k pi/2 down to 2^-61 of x), and floats k 2^-25 to k 2^-23 from k pi/2;
    for k from 1 to 2^27 (both Cody-Waite reductions)."""
    pio2 = sum(map(Fraction, mathlib.PIO2_PARTS))
    ks = list(range(1, 65)) + [2 ** j + d for j in range(7, 28) for d in (-1, 0, 1)] + \
        [666_000, 667_544, 3_141_592, 98_765_432]
    out = []
    for k in ks:
        near = float(k * pio2)                 # rounded once: the float nearest k pi/2
        out += [near, np.nextafter(near, 0.0), np.nextafter(near, np.inf),
                np.nextafter(np.nextafter(near, 0.0), 0.0)]
        out += [float(k * pio2 + sign * k * Fraction(2) ** -24 * f)
                for sign in (-1, 1) for f in (Fraction(1, 2), 1, 2)]
    out = np.array(out)
    return np.concatenate([out, -out])


def _points(op, dtype, rng, n=N):
    f = np.finfo(dtype)
    lo, hi = np.log2(f.smallest_subnormal), np.log2(f.max)
    sign = rng.choice([-1.0, 1.0], n)
    full = sign * 2.0 ** rng.uniform(lo, hi, n)               # log-uniform, every exponent
    if op in ("asin", "acos", "atanh"):
        local = sign * (1 - 2.0 ** rng.uniform(-54, 0, n))      # near 0 and near 1
    elif op == "acosh":
        local = 1 + 2.0 ** rng.uniform(-54, 12, n)
    elif op in ("sin", "cos", "tan"):
        local = sign * 2.0 ** rng.uniform(-30, 60, n)      # both reductions
    elif op in ("log", "log2", "log10", "log1p"):
        local = np.abs(full) if op != "log1p" else sign * 2.0 ** rng.uniform(-60, 10, n)
        local = np.concatenate([local[: n // 2], 1 + rng.uniform(-0.4, 0.5, n - n // 2)])
    else:
        scale = {"float64": 800.0, "float32": 105.0}[np.dtype(dtype).name]
        local = sign * np.minimum(2.0 ** rng.uniform(-60, np.log2(scale), n), scale)
    hard = _near_multiples_of_pio2() if op in ("sin", "cos", "tan") else []
    with np.errstate(over="ignore"):
        x = np.concatenate([_special(dtype), hard, full[: n // 4], local]).astype(dtype)
    return x[:n]


def _pow_points(dtype, rng, n=N):
    x = _points("exp", dtype, rng, n)
    ln_max = np.log(np.finfo(dtype).max)
    k = n // 3
    # Results in range: y log|x| spread over the whole exponent range.
    ax = 2.0 ** rng.uniform(np.log2(np.finfo(dtype).tiny), np.log2(np.finfo(dtype).max), k)
    t = rng.uniform(-ln_max * 1.05, ln_max, k)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        y_fit = t / np.log(ax)
    ints = rng.integers(-40, 40, n - 2 * k).astype(np.float64)
    y = np.concatenate([y_fit, _points("exp", dtype, rng, k), ints])
    x = np.concatenate([ax * rng.choice([-1.0, 1.0], k), x[k:]])
    s = _special(dtype)                                      # every pair of special values
    sx, sy = np.meshgrid(s, np.concatenate([s, [3.0, -3.0, 0.5, -1.0]]))
    with np.errstate(over="ignore"):
        x = np.concatenate([sx.ravel(), x]).astype(dtype)[:n]
        y = np.concatenate([sy.ravel(), y]).astype(dtype)[:n]
    return [x, y]


def inputs(op, dtype, seed=4):
    rng = np.random.default_rng(seed)
    if op == "pow":
        return _pow_points(dtype, rng)
    if op == "atan2":
        return [_points("exp", dtype, rng), _points("exp", dtype, rng)[::-1].copy()]
    return [_points(op, dtype, rng)]


def reference(op, args):
    """NumPy's float64 answer, rounded to the arguments' dtype."""
    wide = [a.astype(np.float64) for a in args]
    with np.errstate(all="ignore"):
        return NUMPY.get(op, getattr(np, op, None))(*wide).astype(args[0].dtype)


def measure(op, dtype, backend="interpret"):
    """(ulp errors, inputs, got, want) of the software op on `backend`."""
    args = inputs(op, dtype)
    kernel = legalize(op_kernel(op, [dtype] * len(args), dtype), NO_MATH)
    # In slices: the interpreter keeps every intermediate value (sin has ~750).
    got = np.concatenate([run(backend, kernel, [a[k:k + SLICE] for a in args])
                          for k in range(0, args[0].size, SLICE)])
    want = reference(op, args)
    return ulps(got, want), args, got, want


CASES = [(op, d) for op in UNARY + BINARY for d in ("float64", "float32")]
BACKENDS = ["interpret"] + [b for b in ("cpu",) if available(b)[0]]


def assert_within_bound(op, dtype, args, got, want):
    err = ulps(got, want)
    numbers = ~np.isnan(got) & ~np.isnan(want)
    sign = np.signbit(got) != np.signbit(want)        # ulps() does not see -0.0 against 0.0
    err = np.where(numbers & sign & (got == 0) & (want == 0), np.inf, err)
    if err.max() > MAX_ULPS[dtype][op]:
        k = int(np.argmax(err))
        at = ", ".join(repr(a[k]) for a in args)
        raise AssertionError(f"{op}({at}) = {got[k]!r}, NumPy {want[k]!r}: {err[k]} ulps")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o}-{d}" for o, d in CASES])
def test_within_documented_ulps(op, dtype, backend):
    err, args, got, want = measure(op, dtype, backend)
    assert_within_bound(op, dtype, args, got, want)


def exact_division(be):
    """Whether the backend's float division and square root are correctly rounded: all
    here but Vulkan on a GPU driver (NVIDIA's are a few ulps off; lavapipe's are exact)."""
    return be.caps.rounded_division or "llvmpipe" in be.features.name


COMPILED = [(op, "float64") for op in UNARY + BINARY] + [("sin", "float32"), ("cos", "float32")]


@pytest.mark.parametrize("backend", [
    pytest.param(b, marks=pytest.mark.skipif(not available(b)[0], reason=available(b)[1]))
    for b in ("cpu", "cpu-scalar", "vulkan", "cuda")])
@pytest.mark.parametrize("op,dtype", COMPILED, ids=[f"{o}-{d}" for o, d in COMPILED])
def test_compiled_backends_agree(op, dtype, backend):
    """The bounds hold on the compiled backends, for the code legalized as for them (with
    Newton steps where division is rough), and, where their division is correctly rounded,
    with the interpreter's bits for that code. The trig points mix huge and small arguments
    in one launch, so mathlib's branch runs for some lanes and threads only (float32 sin and
    cos, whose code is their own, mathlib32.py: its float64 branch from |x| = 4096)."""
    be = get_backend(backend)
    args = [a[:100_000] for a in inputs(op, dtype)]
    caps = Caps(frozenset(), be.caps.rounded_division)
    kernel = legalize(op_kernel(op, [dtype] * len(args), dtype), caps)
    got = run(backend, kernel, args)
    assert_within_bound(op, dtype, args, got, reference(op, args))
    if exact_division(be):
        assert_same_bits(got, run("interpret", kernel, args), args)


@dataclass(frozen=True)
class CapsWithout64(Caps):
    float64: bool = False


def test_float32_sin_and_cos_reduce_in_float64_only_where_the_device_has_it():
    """mathlib32 reduces in float64 where the backend has it (the parts' products and one
    difference) and runs the series in float32; without float64 it reduces in float32 and
    leaves arguments from 4096 to the device's own sin and cos, in the branch."""
    kernel = _trig_kernel("float32", ("sin", "cos"))
    ops = [s for s in legalize(kernel, NO_MATH).body if isinstance(s, kir.Assign)]
    wide = sum(1 for s in ops if s.out.dtype == np.float64)
    narrow = sum(1 for s in ops if s.out.dtype == np.float32)
    assert 5 <= wide <= 15 and narrow >= 20, (wide, narrow)    # the branch's are nested
    assert mathlib32.sincos_expansion(Caps(frozenset({("cos", "float32")}))) is None
    narrow = legalize(kernel, CapsWithout64(frozenset()))
    alone = [s for s in kir.statements(narrow.body) if isinstance(s, kir.Assign)]
    assert not any(s.out.dtype == np.float64 for s in alone)
    # One reduction for the pair, and the device's own functions once each (core.py), which
    # a second legalization leaves alone: it changes nothing.
    assert sorted(s.op for s in alone if "sin" in s.op or "cos" in s.op) == [
        "device_cos", "device_sin"]
    assert _rounds(narrow) == 1
    for caps in (NO_MATH, CapsWithout64(frozenset())):
        # Outside the branches, no conversion-rate op (round, trunc, ftoi): mathlib's
        # nearest_quadrant.
        main = [s for s in legalize(kernel, caps).body if isinstance(s, kir.Assign)]
        assert not {s.op for s in main} & {"round", "trunc", "ftoi", "floor"}
    for caps in (NO_MATH, CapsWithout64(frozenset())):
        once = legalize(kernel, caps)
        assert legalize(once, caps).body == once.body


NARROW = ["sin", "cos", "tan", "atan", "atan2", "asin", "acos", "exp", "log", "expm1", "log1p",
          "log2", "log10", "pow"]


@pytest.mark.parametrize("op", NARROW)
def test_float32_code_without_float64_is_within_the_bound(op):
    """mathlib32's float32-only code, on the interpreter over the 10^6 points (sin and cos
    from 4096 on are the backend's own function: NumPy's here, and tan their quotient, left
    out); no float64 value in it."""
    args = inputs(op, "float32")
    if op == "tan":
        args = [args[0][np.abs(args[0]) < mathlib32.LIMIT]]
    kernel = legalize(op_kernel(op, ["float32"] * len(args), "float32"),
                      CapsWithout64(frozenset()))
    assert not any(isinstance(s, kir.Assign) and s.out.dtype == np.float64
                   for s in kir.statements(kernel.body))
    got = np.concatenate([run("interpret", kernel, [a[k:k + SLICE] for a in args])
                          for k in range(0, args[0].size, SLICE)])
    assert_within_bound(op, "float32", args, got, reference(op, args))


def _trig_kernel(dtype, ops):
    """out_k[tid] = ops[k](x[tid]) for each k: sin and cos of one loaded value."""
    tid, x = kir.KVar(np.dtype(np.int64)), kir.KVar(np.dtype(dtype))
    outs = [kir.KVar(np.dtype(dtype)) for _ in ops]
    body = [kir.Load(x, 0, tid)] + [kir.Assign(o, op, (x,)) for o, op in zip(outs, ops)]
    body += [kir.Store(1 + k, tid, o) for k, o in enumerate(outs)]
    buffers = [kir.BufferSpec("in", np.dtype(dtype), 0)]
    buffers += [kir.BufferSpec("out", np.dtype(dtype), 1 + k) for k in range(len(ops))]
    return kir.Kernel("trig", tid, body, buffers)


def _run_outs(backend, kernel, x):
    be = get_backend(backend)
    bufs = [be.upload(x, x.dtype)] + [be.upload(np.zeros_like(x), x.dtype)
                                      for _ in kernel.buffers[1:]]
    be.launch(be.compile(kernel), x.size, bufs)
    be.synchronize()
    return [be.to_numpy(b) for b in bufs[1:]]


@pytest.mark.parametrize("backend", ["interpret"] + [
    pytest.param(b, marks=pytest.mark.skipif(not available(b)[0], reason=available(b)[1]))
    for b in ("cpu", "vulkan", "cuda")])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("rounded", [True, False])
def test_sin_and_cos_of_one_value_share_one_reduction(backend, dtype, rounded):
    """legalize() computes sin(x) and cos(x) of one x from one argument reduction
    (mathlib.sincos: a reverse kernel of sin needs both), each bit for bit what the
    separate expansions give, huge arguments (the Payne-Hanek branch) included."""
    caps = Caps(frozenset(), rounded)
    x = inputs("sin", dtype)[0][::10]              # every kind of point, huge ones too
    pair = legalize(_trig_kernel(dtype, ("cos", "sin")), caps)
    assert _rounds(pair, top=True) == 1
    got = _run_outs(backend, pair, x)
    for op, value in zip(("cos", "sin"), got):
        kernel = legalize(_trig_kernel(dtype, (op,)), caps)
        assert _rounds(kernel) == _rounds(pair)       # the branches' reductions once too
        alone, = _run_outs(backend, kernel, x)
        assert_same_bits(value, alone, [x])


_MAGIC = {1.5 * 2.0 ** 52, 1.5 * 2.0 ** 23}


def _rounds(kernel, top=False):
    """The argument reductions of `kernel` (or of its top level): mathlib.nearest_quadrant's
    adds of 1.5 * 2^p, and Payne-Hanek's round."""
    body = kernel.body if top else kir.statements(kernel.body)
    return sum(1 for s in body if isinstance(s, kir.Assign) and (s.op == "round" or (
        s.op == "add" and any(isinstance(a, kir.Const) and a.value in _MAGIC
                              for a in s.args))))


@pytest.mark.parametrize("backend", ["interpret"] + [
    pytest.param(b, marks=pytest.mark.skipif(not available(b)[0], reason=available(b)[1]))
    for b in ("cpu", "vulkan", "cuda")])
def test_sin_and_cos_share_one_reduction_without_float64(backend):
    """The same for mathlib32's float32 reduction (a device without float64), whose large
    arguments are the backend's own sin and cos (core.py's device_sin and device_cos, which
    every renderer has): one reduction, each result the separate one's bit for bit."""
    caps = CapsWithout64(frozenset())
    x = inputs("sin", "float32")[0][::10]
    pair = legalize(_trig_kernel("float32", ("cos", "sin")), caps)
    assert _rounds(pair) == 1
    got = _run_outs(backend, pair, x)
    for op, value in zip(("cos", "sin"), got):
        alone, = _run_outs(backend, legalize(_trig_kernel("float32", (op,)), caps), x)
        assert_same_bits(value, alone, [x])


if __name__ == "__main__":            # prints the figures of docs/math.md
    import sys
    for op, dtype in CASES if len(sys.argv) < 2 else [(sys.argv[1], sys.argv[2])]:
        err, args, got, want = measure(op, dtype)
        k = int(np.argmax(err))
        print(f"{op:6} {dtype}: max {err.max():g} ulps at {[a[k] for a in args]} "
              f"(got {got[k]!r}, NumPy {want[k]!r}); mean {err.mean():.3f}")


@pytest.fixture
def vulkan_without_float64(monkeypatch):
    """A Vulkan backend whose device lacks float64 (the feature masked), as 'vulkan'."""
    ok, why = available("vulkan")
    if not ok:
        pytest.skip(why)
    import dloop as dl
    from dloop.backends import base
    from dloop.backends.vulkan import device as vkdevice
    from dloop.backends.vulkan.launch import VulkanBackend
    monkeypatch.setitem(vars(dl.config), "vulkan_mask", "float64")
    be = VulkanBackend(vkdevice.Device())
    monkeypatch.setitem(base._instances, "vulkan", be)
    return be


@pytest.mark.parametrize("op", NARROW)
def test_float32_code_on_a_vulkan_device_without_float64(op, vulkan_without_float64):
    """On such a device (lavapipe, masked) float32 sin, cos and tan below 4096, atan, atan2,
    asin, acos, exp, log, expm1, log1p, log2, log10, pow and hyperbolic ones are mathlib's
    and mathlib32's: 1 ulp at most from the correctly rounded result, where GLSL's may be
    2^-11 (sin), 4096 ulps (atan), 3 + 2|x| ulps (exp) or 2^-21 (log and log2 near 1) off;
    larger sin, cos and tan arguments are GLSL's sin and cos."""
    be = vulkan_without_float64
    assert (op, "float32") not in be.caps.native_math
    args = [a[:200_000] for a in inputs(op, "float32")]
    got = run("vulkan", op_kernel(op, ["float32"] * len(args), "float32"), args)
    kept = np.abs(args[0]) < mathlib32.LIMIT if op in ("sin", "cos", "tan") else \
        np.ones(args[0].size, bool)
    if not be.features.denorm_preserve32:
        # A device that flushes float32 subnormals (NVIDIA's driver) computes with zeros.
        tiny = np.finfo(np.float32).tiny
        for a in args + [reference(op, args)]:
            kept &= ~((a != 0) & (np.abs(a) < tiny))
    assert kept.sum() > 50_000
    mine = [a[kept] for a in args]
    assert_within_bound(op, "float32", mine, got[kept], reference(op, mine))
