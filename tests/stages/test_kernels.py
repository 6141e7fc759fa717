"""Hand-built kernel IR, run by every backend and compared with the interpreter."""

import numpy as np
import pytest

from helpers import compiled_backends
from dloop.backends.base import available, get_backend
from dloop.kernel import kir

I64, F64 = np.dtype(np.int64), np.dtype(np.float64)


def _run(backend, kernel, n, buffers):
    ok, why = available(backend)
    if not ok:
        pytest.skip(why)
    be = get_backend(backend)
    bufs = [be.upload(b, b.dtype) for b in buffers]     # device memory where there is one
    be.launch(be.compile(kernel), n, bufs)
    be.synchronize()
    return [be.to_numpy(b) for b in bufs]


def _loop_with_stack():
    """For each thread: push x*k for k < n[tid], then pop them all, summing in reverse."""
    tid = kir.KVar(I64)
    x, cnt = kir.KVar(F64), kir.KVar(I64)
    k, acc, acc_out = kir.KVar(I64), kir.KVar(F64), kir.KVar(F64)
    val = kir.KVar(F64)
    kf = kir.KVar(F64)
    body_fwd = [kir.Assign(kf, "convert", (k,)), kir.Assign(val, "mul", (x, kf)),
                kir.Push(0, val)]
    r, r_acc, r_out, popped, total = (kir.KVar(I64), kir.KVar(F64), kir.KVar(F64),
                                      kir.KVar(F64), kir.KVar(F64))
    body_rev = [kir.Pop(popped, 0), kir.Assign(total, "add", (r_acc, popped))]
    stmts = [
        kir.Load(x, 0, tid), kir.Load(cnt, 1, tid),
        kir.StackInit(0, kir.Const(0, I64)),
        kir.For(k, kir.Const(0, I64), cnt, False, [acc], [kir.Const(0.0, F64)], body_fwd,
                [acc], [acc_out]),
        kir.For(r, kir.Const(0, I64), cnt, True, [r_acc], [kir.Const(0.0, F64)], body_rev,
                [total], [r_out]),
        kir.Store(2, tid, r_out),
    ]
    kernel = kir.Kernel("k", tid, stmts)
    kernel.buffers = [kir.BufferSpec("in", F64, 0), kir.BufferSpec("in", I64, 1),
                      kir.BufferSpec("out", F64, 2), kir.BufferSpec("faults", I64),
                      kir.BufferSpec("region", F64, (0, "float64")),
                      kir.BufferSpec("start", I64, 0), kir.BufferSpec("cap", I64, 0)]
    kernel.stacks = [kir.StackSpec(0, 0, F64, region=4, start=5, cap=6, group_size=1, index=0,
                                   fault_slot=0)]
    kernel.faults = [kir.FaultSpec("overflow", "here", {"loop_id": 0, "carry": 0,
                                                        "dtype": "float64"})]
    return kernel


def _buffers(x, n, cap):
    start = np.concatenate([[0], np.cumsum(cap)[:-1]]).astype(np.int64)
    return [x, n, np.zeros_like(x), np.zeros(2, np.int64), np.zeros(int(cap.sum())),
            start, cap.astype(np.int64)]


def test_printed_kernel_shows_stack_ops():
    text = str(_loop_with_stack())
    assert "push stack0" in text and "pop stack0" in text and "reversed(" in text


@pytest.mark.parametrize("backend", compiled_backends())
def test_compiled_stack_kernel_matches_interpreter(backend):
    x = np.array([1.0, 2.0, 3.0, 0.5])
    n = np.array([3, 0, 5, 1])
    kernel = _loop_with_stack()
    ref = _run("interpret", kernel, 4, _buffers(x, n, n))
    got = _run(backend, kernel, 4, _buffers(x, n, n))
    np.testing.assert_array_equal(got[2], ref[2])
    np.testing.assert_array_equal(ref[2], x * n * (n - 1) / 2)
    assert ref[3][0] == 0 and got[3][0] == 0


@pytest.mark.parametrize("backend", ["interpret"] + compiled_backends())
def test_overflow_sets_flag_skips_push_and_pop_clamps(backend):
    x = np.array([1.0, 2.0])
    n = np.array([4, 2])
    cap = np.array([2, 2])
    out = _run(backend, _loop_with_stack(), 2, _buffers(x, n, cap))
    faults = out[3]
    assert faults[0] == 1 and faults[1] == 4          # most pushes attempted: 4
    assert out[2][1] == 2.0 * (0 + 1)                 # the thread that fit is exact
    assert out[4][:2].tolist() == [0.0, 1.0]          # nothing written past its slice
