"""Every positive float32 below 4096 through kernel/mathlib32.py's sin and cos, compiled for
the cpu backend, against NumPy's float64 result rounded to float32: how many are 0, 1, 2
and 3 or more ulps off, for the float64 reduction and the float32 one (a device without
float64). About 35 s per function and reduction on two cores.

    PYTHONPATH=src python tools/check_trig32.py [sin|cos] [float64|float32]
"""

import sys
from dataclasses import dataclass

import numpy as np

from dloop.backends.base import get_backend
from dloop.kernel import kir
from dloop.kernel.legalize import legalize


@dataclass(frozen=True)
class Caps:
    native_math: frozenset = frozenset()     # every transcendental expanded
    float64: bool = True


def kernel(op, caps):
    """out[tid] = op(x[tid]) for float32 x, legalized for `caps`."""
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    tid, x, y = kir.KVar(i64), kir.KVar(f32), kir.KVar(f32)
    body = [kir.Load(x, 0, tid), kir.Assign(y, op, (x,)), kir.Store(1, tid, y)]
    buffers = [kir.BufferSpec("in", f32, 0), kir.BufferSpec("out", f32, 1)]
    return legalize(kir.Kernel("trig32", tid, body, buffers), caps)


def main(ops, reductions):
    be = get_backend("cpu")
    for op in ops:
        for reduction in reductions:
            compiled = be.compile(kernel(op, Caps(float64=reduction == "float64")))
            counts = np.zeros(4, np.int64)
            end = int(np.float32(4096.0).view(np.int32))
            for start in range(0, end, 1 << 24):
                x = np.arange(start, min(start + (1 << 24), end), dtype=np.int32).view(np.float32)
                bufs = [be.upload(x, x.dtype), be.upload(np.zeros_like(x), x.dtype)]
                be.launch(compiled, x.size, bufs)
                got = be.to_numpy(bufs[1])
                want = getattr(np, op)(x.astype(np.float64)).astype(np.float32)
                apart = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32))
                apart[np.signbit(got) != np.signbit(want)] = 3      # across zero: count as far
                counts += np.bincount(np.minimum(apart, 3), minlength=4)
            print(f"{op} ({reduction} reduction): ulps 0, 1, 2, >= 3: {counts.tolist()}"
                  f" ({counts[1] / counts.sum():.2%} at 1)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:2] or ["sin", "cos"], sys.argv[2:3] or ["float64", "float32"])
