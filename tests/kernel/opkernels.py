"""Kernels that apply one op per element, run on a backend, and a bitwise comparison."""

import numpy as np

from dloop.backends.base import get_backend
from dloop.kernel import kir

I64 = np.dtype(np.int64)


def op_kernel(op, in_dtypes, out_dtype):
    """out[tid] = op(in0[tid], in1[tid], ...)."""
    tid = kir.KVar(I64)
    ins = [kir.KVar(d) for d in in_dtypes]
    out = kir.KVar(out_dtype)
    body = [kir.Load(v, k, tid) for k, v in enumerate(ins)]
    body += [kir.Assign(out, op, tuple(ins)), kir.Store(len(ins), tid, out)]
    kernel = kir.Kernel(op, tid, body)
    kernel.buffers = [kir.BufferSpec("in", np.dtype(d), k) for k, d in enumerate(in_dtypes)]
    kernel.buffers.append(kir.BufferSpec("out", np.dtype(out_dtype), len(ins)))
    return kernel


def run(backend, kernel, inputs):
    """The kernel's 'out' buffer after running one thread per element of the inputs."""
    n = len(inputs[0])
    out_spec = kernel.buffers[len(inputs)]
    be = get_backend(backend)
    bufs = [be.upload(a, a.dtype) for a in inputs] + [be.upload(np.zeros(n, out_spec.dtype),
                                                                 out_spec.dtype)]
    be.launch(be.compile(kernel), n, bufs)
    be.synchronize()
    return be.to_numpy(bufs[-1])


def same_bits(a, b):
    """Equal bit patterns, any NaN equal to any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        return np.zeros(a.shape, bool)
    if np.issubdtype(a.dtype, np.floating):
        width = np.dtype(f"i{a.dtype.itemsize}")
        return (a.view(width) == b.view(width)) | (np.isnan(a) & np.isnan(b))
    return a == b


def assert_same_bits(got, want, inputs=()):
    ok = same_bits(got, want)
    if not ok.all():
        k = int(np.flatnonzero(~ok)[0])
        at = ", ".join(repr(x[k]) for x in inputs)
        raise AssertionError(f"{(~ok).sum()} differ; first at ({at}): got {got[k]!r}, "
                             f"want {want[k]!r}")
