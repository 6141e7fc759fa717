"""mathlib's work for rare inputs, run only where an element needs it: the Payne-Hanek
reduction of huge trig arguments sits under Emitter.branch (a While of at most one pass), and
remainders by constant powers of two are exact without frem. Launches that mix huge and small
arguments make SIMD lanes and GPU threads disagree about the branch; every backend must stay
within the documented bounds, with the interpreter's bits where its division is rounded. On Vulkan the branch is a selection, not a loop: lavapipe counts
every loop pass of an invocation against one limit of 65,535."""

import contextlib

import numpy as np
import pytest
from opkernels import assert_same_bits, op_kernel, run
from rough import rough_division
from test_mathlib import NO_MATH, Caps, assert_within_bound, exact_division, reference, ulps

import dloop as dl
from dloop.backends.base import available, get_backend
from dloop.kernel import kir, mathlib
from dloop.kernel.core import Emitter, runs_once
from dloop.kernel.legalize import _refined, legalize
from dloop.kernel.verify import check_kernel

I64 = np.dtype(np.int64)


def _on(*names):
    return [pytest.param(b, marks=pytest.mark.skipif(not available(b)[0],
                                                     reason=available(b)[1]))
            for b in names]


BACKENDS = _on("interpret", "cpu", "cpu-scalar", "vulkan", "cuda")


def _emitted_kernel(dtype, build, n_in=1, then=lambda stmts: stmts):
    """out[tid] = build(e, *inputs) for one Emitter's core ops (passed through `then`)."""
    e, tid = Emitter(), kir.KVar(I64)
    ins = [kir.KVar(dtype) for _ in range(n_in)]
    result = build(e, *[e.wrap(x) for x in ins])
    body = [kir.Load(x, k, tid) for k, x in enumerate(ins)] + then(e.stmts)
    kernel = kir.Kernel("emitted", tid, body + [kir.Store(n_in, tid, result.x)])
    kernel.buffers = [kir.BufferSpec("in", np.dtype(dtype), k) for k in range(n_in)]
    kernel.buffers.append(kir.BufferSpec("out", np.dtype(dtype), n_in))
    return kernel


# -- remainders by powers of two --

def _remainder_points(dtype):
    f = np.finfo(dtype)
    rng = np.random.default_rng(11)
    special = [0.0, 1.0, 2.0, 3.0, 4.0, 8.0, 0.5, 3.5, 4.0 - f.eps, 5.75, 2.0 ** 52 + 1,
               2.0 ** 60 + 4, 1e300, f.max, f.tiny, f.smallest_subnormal,
               3 * f.smallest_subnormal, f.tiny / 3, np.inf, np.nan]
    mags = 2.0 ** rng.uniform(np.log2(f.smallest_subnormal), np.log2(f.max), 3000)
    ints = rng.integers(-2 ** 20, 2 ** 20, 1000) / 4.0
    with np.errstate(over="ignore"):
        x = np.concatenate([special, mags, ints]).astype(dtype)
    return np.concatenate([x, -x])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("p", [1.0, 2.0, 4.0, 2.0 ** 40])
def test_remainder_by_a_power_of_two_is_fmod(backend, dtype, p):
    """C's fmod bit for bit: signed zeros of exact multiples, huge and subnormal x, inf, NaN.
    Vulkan keeps subnormals only under DenormPreserve (NVIDIA's driver flushes float32 ones):
    there the subnormal points are left out."""
    x = _remainder_points(dtype)
    if backend == "vulkan":
        x = x[~(np.abs(x) < np.finfo(dtype).tiny) | (x == 0)]
    kernel = _emitted_kernel(dtype, lambda e, v: mathlib._rem_pow2(e, v, p))
    with np.errstate(invalid="ignore"):
        want = np.fmod(x, np.asarray(p, dtype))
    assert_same_bits(run(backend, kernel, [x]), want, [x])


def test_remainder_refuses_a_divisor_that_is_not_a_power_of_two():
    with pytest.raises(AssertionError):
        mathlib._rem_pow2(Emitter(), Emitter().const(1.0, np.float64), 3.0)


# -- huge and small trig arguments in one launch --

def _mixed(dtype):
    """Patterns that split SIMD vectors (2 to 8 lanes) and GPU subgroups (32 or 64 threads)
    in every way between the three reductions (below 2^20, below 2^28, beyond): all small,
    all huge, alternating, one larger among 63 smaller and one smaller among 63 larger,
    random; signs, both sides of 2^20 and 2^28, and the far end of the range."""
    rng = np.random.default_rng(5)
    top = 60 if dtype == "float64" else 127

    def magnitudes(lo, hi):
        return rng.choice([-1.0, 1.0], 64 * 8) * 2.0 ** rng.uniform(lo, hi, 64 * 8)
    small, medium, huge = magnitudes(-30, 19.99), magnitudes(20, 27.99), magnitudes(28, top)
    edge = [2.0 ** 28, -2.0 ** 28, np.nextafter(2.0 ** 28, 0), 2.0 ** 20, -2.0 ** 20,
            np.nextafter(2.0 ** 20, 0), 1e300, -1e300, 1.7e308]
    lane = np.arange(64)
    one_huge = np.where(lane == 17, huge[:64], small[:64])
    one_small = np.where(lane == 40, small[64:128], huge[64:128])
    alternate = np.where(lane % 2 == 0, small[128:192], huge[128:192])
    one_medium = np.where(lane == 5, medium[:64], small[192:256])
    medium_huge = np.where(lane % 3 == 0, medium[64:128], huge[192:256])
    pick = rng.integers(0, 3, 256)
    mix = np.where(pick == 0, huge[256:], np.where(pick == 1, medium[256:], small[256:]))
    with np.errstate(over="ignore"):
        x = np.concatenate([small[:64], medium[128:192], huge[:64], alternate, one_huge,
                            one_small, one_medium, medium_huge, mix, edge])
        return x.astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
def test_huge_and_small_arguments_in_one_launch(backend, op, dtype):
    x = _mixed(dtype)
    be = get_backend(backend)
    kernel = legalize(op_kernel(op, [dtype], dtype), Caps(frozenset(), be.caps.rounded_division))
    got = run(backend, kernel, [x])
    assert_within_bound(op, dtype, [x], got, reference(op, [x]))
    if exact_division(be):
        assert_same_bits(got, run("interpret", kernel, [x]), [x])


def test_rare_reductions_are_off_the_common_path():
    """sin's straight-line code is the two-part Cody-Waite reduction and the kernels (79 core
    ops); the four-part reduction near multiples of pi/2 is in a branch (37), the seven-part
    one for |x| >= 2^20 in another (68), and the Payne-Hanek reduction for |x| >= 2^28 (689)
    in a branch of that one; each runs at most once, and the kernel verifies."""
    kernel = legalize(op_kernel("sin", ["float64"], "float64"), NO_MATH)
    check_kernel(kernel)
    body = kernel.body
    branches = [s for s in body if isinstance(s, kir.While)]
    assert len(branches) == 2 and all(runs_once(b) for b in branches)
    near, beyond = branches
    assert not any(isinstance(s, kir.While) for s in near.body)
    inner = [s for s in beyond.body if isinstance(s, kir.While)]
    assert len(inner) == 1 and runs_once(inner[0])
    assert len(body) < 100 and len(near.body) < 50 and len(beyond.body) < 80
    assert len(inner[0].body) > 500


# -- Emitter.branch --

def _branch_kernel(dtype):
    """x > 1: (x * 3 - 1, x / 4); else the defaults (x, -x); out = sum of the pair."""
    def build(e, x):
        a, b = e.branch(x > 1.0, lambda: [x * 3.0 - 1.0, x * 0.25], [x, -x])
        return a + b
    return _emitted_kernel(dtype, build)


@pytest.mark.parametrize("backend", BACKENDS)
def test_branch_values_where_taken_and_defaults_elsewhere(backend):
    x = np.array([0.5, 2.0, -3.0, 1.0, 8.0, np.nan, np.inf, 1.5] * 9)
    with np.errstate(invalid="ignore"):
        want = np.where(x > 1.0, x * 3.0 - 1.0 + x * 0.25, x - x)
    assert_same_bits(run(backend, _branch_kernel("float64"), [x]), want, [x])


def test_runs_once_tells_branches_from_loops():
    (branch,) = [s for s in _branch_kernel("float64").body if isinstance(s, kir.While)]
    assert runs_once(branch)
    never_false = kir.While(branch.carries, branch.inits, branch.cond_body, branch.cond,
                            branch.body, [kir.Const(True, np.dtype(bool))] + branch.yields[1:],
                            branch.outs)
    assert not runs_once(never_false)
    # while i < 3: i += 1
    i, more, nxt, out = kir.KVar(I64), kir.KVar(np.dtype(bool)), kir.KVar(I64), kir.KVar(I64)
    counting = kir.While([i], [kir.Const(0, I64)],
                         [kir.Assign(more, "lt", (i, kir.Const(3, I64)))],
                         more, [kir.Assign(nxt, "add", (i, kir.Const(1, I64)))], [nxt], [out])
    assert not runs_once(counting)


def test_newton_steps_reach_into_branches():
    """Under a division a few ulps off, a quotient inside a branch gets its Newton step too
    (legalize for caps.rounded_division False): within half an ulp and a hair, not 3."""
    rng = np.random.default_rng(2)
    a, b = rng.uniform(1, 2, 20_000), rng.uniform(1, 2, 20_000)

    def kernel(refine):
        return _emitted_kernel("float64", lambda e, x, y: e.branch(x > 0.0, lambda: [x / y],
                                                                    [x])[0],
                               n_in=2, then=_refined if refine else lambda stmts: stmts)
    with rough_division(3):
        rough = run("interpret", kernel(False), [a, b])
        refined = run("interpret", kernel(True), [a, b])
    assert ulps(rough, a / b).max() >= 2
    assert ulps(refined, a / b).max() <= 1


# -- lavapipe's loop limit --

VULKAN = pytest.mark.skipif(not available("vulkan")[0], reason=available("vulkan")[1])


def _sum_of_sines(trips):
    def f(a):
        return dl.fori_loop(0, np.full(a.shape, trips), lambda j, v: v + np.sin(a + j),
                            a * 0.0).sum()
    return f


@contextlib.contextmanager
def _backend(name):
    previous = dl.config.backend
    dl.config.update("backend", name)
    try:
        yield
    finally:
        dl.config.update("backend", previous)


@VULKAN
def test_a_long_loop_of_huge_sines_runs_to_the_end_on_vulkan():
    """60,000 trips, each calling sin with a huge argument in some elements and a small one in
    others: as a loop, each branch would add a pass or two to lavapipe's count, and the user's
    loop would stop near 30,000 trips without a word. Checked against NumPy's closed forms."""
    a = np.array([0.3, 1e10, -2.5, -7.0e15, 1.0, 3e20, 0.0, 2.0 ** 28])
    trips = 60_000
    j = np.arange(trips)
    with _backend("vulkan"):
        value, grad = dl.value_and_grad(_sum_of_sines(trips))(a)
    np.testing.assert_allclose(value, np.sin(a[:, None] + j).sum(), rtol=1e-10)
    np.testing.assert_allclose(grad, np.cos(a[:, None] + j).sum(axis=1), rtol=1e-10,
                               atol=1e-9)


@VULKAN
def test_huge_sines_past_the_driver_limit_are_refused_on_lavapipe():
    if "llvmpipe" not in get_backend("vulkan").features.name:
        pytest.skip("only lavapipe ends loops early")
    with _backend("vulkan"), pytest.raises(dl.DloopNotImplementedError, match="65,535"):
        dl.grad(_sum_of_sines(100_000))(np.array([1e10, 0.5]))


@VULKAN
def test_the_vulkan_branch_is_a_selection():
    """sin's module has no OpLoopMerge: its one branch is an OpSelectionMerge."""
    be = get_backend("vulkan")
    kernel = legalize(op_kernel("sin", ["float64"], "float64"), NO_MATH)
    words = np.frombuffer(be.render(kernel), dtype="<u4")
    opcodes, k = [], 5
    while k < len(words):
        opcodes.append(int(words[k]) & 0xFFFF)
        k += int(words[k]) >> 16
    loop_merge, selection_merge = 246, 247
    assert loop_merge not in opcodes and selection_merge in opcodes
