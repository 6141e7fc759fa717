"""The CUDA renderer without a GPU: every core op in every dtype compiles with NVRTC, constants
are exact, #line points at the user's code, and the offline check fails on bad CUDA C."""

import math
import re

import numpy as np
import pytest

import dloop as dl
import nvrtc_check
from dloop.kernel import kir
from dloop.kernel.core import TRANSCENDENTAL

try:
    from cupy.cuda import nvrtc
    nvrtc.getVersion()
    from dloop.backends.cuda import ops
    from dloop.backends.cuda.compile import CudaCompileError, compile_cuda
    from dloop.backends.cuda.render import render
    _WHY = None
except Exception as e:           # no CuPy, or CuPy without an NVRTC library
    _WHY = f"CUDA C cannot be compiled here: {type(e).__name__}: {e}"

pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")

I64, I32, F64, F32, B = (np.dtype(t) for t in (np.int64, np.int32, np.float64, np.float32, bool))
FLOATS, INTS = (F64, F32), (I64, I32)


def _elementwise(op, in_dtype, out_dtype, arity):
    """out[tid] = op(in0[tid], ...): one kernel around one Assign."""
    tid = kir.KVar(I64)
    args = [kir.KVar(in_dtype) for _ in range(arity)]
    out = kir.KVar(out_dtype)
    body = [kir.Load(a, k, tid) for k, a in enumerate(args)]
    body += [kir.Assign(out, op, tuple(args)), kir.Store(arity, tid, out)]
    kernel = kir.Kernel(f"{op}_{in_dtype.name}", tid, body)
    kernel.buffers = [kir.BufferSpec("in", in_dtype, k) for k in range(arity)] + [
        kir.BufferSpec("out", out_dtype, arity)]
    return kernel


def _cases():
    bool_out = ("lt", "le", "gt", "ge", "eq", "ne")
    for op in ("add", "sub", "mul", "neg", "lt", "le", "gt", "ge", "eq", "ne"):
        for dt in FLOATS + INTS:
            yield op, dt, B if op in bool_out else dt, 1 if op == "neg" else 2
    for dt in FLOATS:
        for op in ("div", "frem", "copysign", "pow", "atan2"):
            yield op, dt, dt, 2
        for op in ("abs", "floor", "ceil", "trunc", "round", "sqrt") + TRANSCENDENTAL:
            if op not in ("pow", "atan2"):
                yield op, dt, dt, 1
        for it in INTS:
            yield "ftoi", dt, it, 1
            yield "convert", it, dt, 1
        yield "convert", B, dt, 1
        yield "convert", dt, FLOATS[dt == F64], 1
    for dt in INTS + (B,):
        for op in ("and", "or", "xor"):
            yield op, dt, dt, 2
        yield "not", dt, dt, 1
    for dt in INTS:
        for op in ("idiv", "irem", "ishl", "ishr"):
            yield op, dt, dt, 2
        yield "convert", dt, INTS[dt == I64], 1
    yield "bitcast", F64, I64, 1
    yield "bitcast", I64, F64, 1
    yield "bitcast", F32, I32, 1
    yield "bitcast", I32, F32, 1


@pytest.mark.parametrize("op,dtype,out,arity", list(_cases()),
                         ids=lambda v: getattr(v, "name", str(v)))
def test_every_core_op_compiles(op, dtype, out, arity):
    source = render(_elementwise(op, dtype, out, arity))
    assert f"buf{arity}[" in source
    compile_cuda(source, nvrtc_check.ARCH)


def test_select_and_stack_kernel_compiles():
    tid, c, a, b, r = kir.KVar(I64), kir.KVar(B), kir.KVar(F32), kir.KVar(F32), kir.KVar(F32)
    kernel = kir.Kernel("sel", tid, [kir.Load(c, 0, tid), kir.Load(a, 1, tid),
                                     kir.Load(b, 1, tid), kir.Assign(r, "select", (c, a, b)),
                                     kir.Store(2, tid, r), kir.Store(0, tid, c)])
    kernel.buffers = [kir.BufferSpec("out", B, 0), kir.BufferSpec("in", F32, 1),
                      kir.BufferSpec("out", F32, 2)]
    source = render(kernel)
    assert "unsigned char* buf0" in source and "(unsigned char)" in source   # bools are bytes
    compile_cuda(source, nvrtc_check.ARCH)


@pytest.mark.parametrize("dtype", [F64, F32])
def test_float_constants_are_exact(dtype):
    rng = np.random.default_rng(0)
    decades = np.finfo(dtype).maxexp * 3 // 10            # stay inside the dtype's range
    values = np.concatenate([rng.standard_normal(50) * 10.0 ** rng.integers(-decades, decades, 50),
                             [0.0, -0.0, 0.1, 1 / 3, np.finfo(dtype).tiny,
                              np.finfo(dtype).max]]).astype(dtype)
    assert np.isfinite(values).all()
    for v in values:
        text = ops.const(float(v), dtype)
        back = float.fromhex(text.removesuffix("f"))
        assert np.array(back, dtype) == v and math.copysign(1, back) == math.copysign(1, v)
    assert "__longlong_as_double(9218868437227405312LL)" == ops.const(math.inf, F64)
    assert ops.const(math.nan, F32).startswith("__int_as_float(")


@pytest.mark.parametrize("dtype", [F64, F32])
def test_negating_a_negative_constant_compiles(dtype):
    """neg of a negative literal: `(-(-0x1p+1))`, not `(--0x1p+1)`, a decrement NVRTC rejects
    (constant folding keeps it out of traced programs, but the renderer must not rely on that)."""
    from dloop.backends.cuda.render import render
    tid, out = kir.KVar(I64), kir.KVar(dtype)
    kernel = kir.Kernel("negc", tid, [kir.Assign(out, "neg", (kir.Const(-2.0, dtype),)),
                                      kir.Store(0, tid, out)])
    kernel.buffers = [kir.BufferSpec("out", dtype, 0)]
    compile_cuda(render(kernel), nvrtc_check.ARCH)


def test_integer_constants_include_the_minimum():
    assert ops.const(-(1 << 63), I64) == "(-9223372036854775807LL - 1)"
    assert ops.const(-(1 << 31), I32) == "(-2147483647 - 1)"
    assert ops.const(7, I64) == "7LL" and ops.const(True, B) == "true"


def _kernels_of(fn, *args, monkeypatch):
    seen = []
    monkeypatch.setattr("dloop.runtime.program.KERNEL_HOOKS", [seen.append])
    monkeypatch.setattr("dloop.api._PROGRAMS", type(dl.api._PROGRAMS)())
    fn(*args)
    return seen


def test_line_directives_name_the_user_lines(monkeypatch):
    x, n = np.linspace(0.1, 1.0, 5), np.array([0, 1, 2, 3, 4])

    def loss(x):
        def body(i, v):
            return np.sin(v) * 0.5 + v            # BODY
        return dl.fori_loop(0, n, body, x).sum()  # LOOP

    kernels = _kernels_of(dl.grad(loss), x, monkeypatch=monkeypatch)
    sources = "\n".join(render(k) for k in kernels)
    lines = open(__file__).read().splitlines()
    for tag in ("# BODY", "# LOOP"):
        number = next(k for k, line in enumerate(lines, 1) if line.endswith(tag))
        assert f'#line {number} "{__file__}"' in sources


def test_line_info_names_only_the_user_lines(monkeypatch):
    """`#line N` numbers the line after it N, and the lines after that N+1, N+2, ...: the
    renderer wrote one directive per change of user line, so the 2nd, 3rd ... statement of
    line N (and the closing braces after it) were attributed to lines N+1, N+2 ... of the
    user's file (other code, blank lines, or past its end) in NVRTC's messages and in the
    line table that profilers and debuggers read (-lineinfo)."""
    x, n = np.linspace(0.1, 1.0, 5), np.array([0, 1, 2, 3, 4])

    def loss(x):
        def body(i, v):
            return np.sin(v) * 0.5 + v * v        # BODY

        return dl.fori_loop(0, n, body, x).sum()  # LOOP

    lines = open(__file__).read().splitlines()
    allowed = {k for k, line in enumerate(lines, 1) if line.endswith(("# BODY", "# LOOP"))}
    kernels = _kernels_of(dl.grad(loss), x, monkeypatch=monkeypatch)
    assert kernels
    for kernel in kernels:
        ptx = compile_cuda(render(kernel), nvrtc_check.ARCH, extra=("-lineinfo",)).decode()
        files = dict(re.findall(r'\.file\s+(\d+)\s+"([^"]+)"', ptx))
        ours = {k for k, path in files.items() if path.endswith("test_cuda_render.py")}
        assert ours, files
        used = {int(line) for f, line in re.findall(r"\.loc\s+(\d+)\s+(\d+)", ptx) if f in ours}
        assert used and used <= allowed, (sorted(used), sorted(allowed))


def test_the_generated_adstack_kernels_compile(monkeypatch):
    """A taped loop with a counting pass (a while loop): push, pop, counters and faults."""
    x = np.linspace(0.1, 1.0, 6)

    def loss(x):
        def body(c):
            return c[0] * 1.5, c[1] + 1
        out = dl.while_loop(lambda c: c[0] < 4.0, body, (x, np.zeros(6, np.int32)))
        return out[0].sum()

    kernels = _kernels_of(dl.grad(loss), x, monkeypatch=monkeypatch)
    sources = [render(k) for k in kernels]
    joined = "\n".join(sources)
    for helper in ("dloop_push<", "dloop_pop<", "counter0 ="):
        assert helper in joined
    for s in sources:
        compile_cuda(s, nvrtc_check.ARCH)


def test_the_layout_kernels_compile():
    """The cuda backend's fused interleaved layout (backends/cuda/sizing.py)."""
    from dloop.backends.cuda import sizing
    compile_cuda(sizing.SOURCE, nvrtc_check.ARCH)


def test_compile_error_carries_the_nvrtc_log():
    source = render(_elementwise("add", F64, F64, 2)).replace("buf2[", "bufX[")
    with pytest.raises(CudaCompileError, match=r"identifier \"bufX\" is undefined"):
        compile_cuda(source, nvrtc_check.ARCH)


@pytest.mark.skipif(not nvrtc_check.status()[0], reason=nvrtc_check.status()[1])
def test_offline_check_fails_a_test_on_bad_cuda_c(monkeypatch):
    """The check the suite runs on every kernel: broken CUDA C for `add` must fail the test."""
    monkeypatch.setitem(ops.EXPR, "add", lambda a, dt, out: f"({a[0]} +* {a[1]})")
    monkeypatch.setattr("dloop.api._PROGRAMS", type(dl.api._PROGRAMS)())
    monkeypatch.setattr(nvrtc_check, "_compiled", set())
    nvrtc_check.flush()                   # what earlier fixtures made is not this test's
    dl.jit(lambda x: x * 3.0 + 2.0)(np.linspace(0.1, 1.0, 7))
    with pytest.raises(pytest.fail.Exception, match="does not compile"):
        nvrtc_check.flush()


@pytest.mark.parametrize("dtype", [F64, F32, I64, I32], ids=lambda d: d.name)
def test_atomic_add_compiles_in_every_dtype(dtype):
    tid, i, v = kir.KVar(I64), kir.KVar(I64), kir.KVar(dtype)
    kernel = kir.Kernel("acc", tid, [kir.Load(i, 0, tid), kir.Load(v, 1, tid),
                                     kir.AtomicAdd(2, i, v)])
    kernel.buffers = [kir.BufferSpec("in", I64, 0), kir.BufferSpec("in", dtype, 1),
                      kir.BufferSpec("accum", dtype, ("accum", 1))]
    source = render(kernel)
    assert "atomicAdd(" in source
    compile_cuda(source, nvrtc_check.ARCH)


def test_row_entries_of_a_collective_loop_s_kernels_compile(monkeypatch):
    """The step graphs' kernels (backends/cuda/steps.py) take their arguments from a row:
    a heat step (roll, a reaction term, an integer index read) and its reverse, taped, in
    every dtype a row holds."""
    u0, p = np.linspace(0.5, 1.5, 16), np.float32(0.1)
    odd, shift = np.arange(16) % 2 == 1, np.arange(16, dtype=np.int32) % 3

    def loss(u, p):
        def body(i, u):
            u = u + 0.2 * (np.roll(u, 1) - u) - p * u ** 3 + (i % 3) * 1e-3
            return np.where(odd, u, u * 0.99) + (shift > 1) * u * 1e-4
        return (dl.fori_loop(0, 20, body, u) ** 2).sum()

    kernels = _kernels_of(dl.grad(loss), u0.astype(np.float32), p, monkeypatch=monkeypatch)
    kernels += _kernels_of(dl.grad(loss), u0, np.float64(p), monkeypatch=monkeypatch)
    loads = set()
    for k in kernels:
        source = render(k, rows=True)
        assert "(const long long* __restrict__ row)" in source
        assert "const long long n_threads = " in source
        compile_cuda(source, nvrtc_check.ARCH)
        loads.update(re.findall(r"__ldg\(&(buf\d+)", source))
    assert loads
