"""The kernel IR verifier rejects malformed kernels (it runs after every lowering, so every
kernel the other tests build has passed it)."""

import numpy as np
import pytest

from dloop.kernel import kir
from dloop.kernel.verify import KernelIRError, check_kernel

I64, F64 = np.dtype(np.int64), np.dtype(np.float64)


def _kernel(body, buffers):
    tid = kir.KVar(I64)
    return kir.Kernel("k", tid, body(tid), [kir.BufferSpec(*b) for b in buffers])


def test_a_well_formed_kernel_passes():
    x, y = kir.KVar(F64), kir.KVar(F64)
    k = _kernel(lambda tid: [kir.Load(x, 0, tid), kir.Assign(y, "mul", (x, x)),
                             kir.Store(1, tid, y)], [("in", F64), ("out", F64)])
    assert check_kernel(k) is k


def test_use_before_definition():
    x, y = kir.KVar(F64), kir.KVar(F64)
    k = _kernel(lambda tid: [kir.Assign(y, "mul", (x, x)), kir.Store(1, tid, y)],
                [("in", F64), ("out", F64)])
    with pytest.raises(KernelIRError, match="used before it is defined"):
        check_kernel(k)


def test_loop_body_values_do_not_leak_out():
    k_, acc, out, inner = kir.KVar(I64), kir.KVar(F64), kir.KVar(F64), kir.KVar(F64)
    loop = kir.For(k_, kir.Const(0, I64), kir.Const(3, I64), False, [acc],
                   [kir.Const(0.0, F64)], [kir.Assign(inner, "add", (acc, acc))], [inner], [out])
    k = _kernel(lambda tid: [loop, kir.Store(0, tid, inner)], [("out", F64)])
    with pytest.raises(KernelIRError, match="used before it is defined"):
        check_kernel(k)


def test_store_into_an_input_buffer():
    x = kir.KVar(F64)
    k = _kernel(lambda tid: [kir.Load(x, 0, tid), kir.Store(0, tid, x)], [("in", F64)])
    with pytest.raises(KernelIRError, match="kind 'in'"):
        check_kernel(k)


def test_buffer_dtype_must_match():
    x = kir.KVar(np.float32)
    k = _kernel(lambda tid: [kir.Load(x, 0, tid)], [("in", F64)])
    with pytest.raises(KernelIRError, match="holds float64"):
        check_kernel(k)


def test_stack_must_exist():
    x = kir.KVar(F64)
    k = _kernel(lambda tid: [kir.Load(x, 0, tid), kir.Push(0, x)], [("in", F64)])
    with pytest.raises(KernelIRError, match="stack 0 does not exist"):
        check_kernel(k)


@pytest.mark.parametrize("op, a, b, out", [("sub", np.int32, np.int32, np.int64),
                                           ("add", np.int64, np.int32, np.int64),
                                           ("lt", np.float32, np.float64, bool)])
def test_operands_of_one_machine_type(op, a, b, out):
    """An int32 loop bound minus an int64 constant would render as a 32-bit operation with a
    64-bit result: the verifier refuses it before any renderer sees it."""
    x, y, z = kir.KVar(np.dtype(a)), kir.KVar(np.dtype(b)), kir.KVar(np.dtype(out))
    k = _kernel(lambda tid: [kir.Load(x, 0, tid), kir.Load(y, 1, tid),
                             kir.Assign(z, op, (x, y))], [("in", a), ("in", b)])
    with pytest.raises(KernelIRError, match=f"{op} mixes"):
        check_kernel(k)
