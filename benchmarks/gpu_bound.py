"""The hand-written bound for W1's gradient on the GPU: the project's reference kernel from its
shared/gpu folder (adstack_bound.py, measured there on an H200), adapted to the harness's Impl
and to float32. dloop's CUDA backend is measured against it.

One tape slot per iteration actually run, in one of three layouts:
  compact      element j's slots at start[j] + k, start = exclusive prefix sum of n
  warp         slot k of a warp's 32 lanes contiguous, each warp sized by its longest element
  sorted-warp  elements ordered by n first (argsort), then the warp layout: homogeneous warps
A gradient call includes the sizing work (prefix sums, argsort, permutation), the forward and
the reverse kernel; the tape buffer is allocated once beforehand, as a heap would be.

Without a GPU (the dry run) the kernels are emulated in NumPy, element-parallel over the same
addresses, so the layouts' indexing is checked against the NumPy adjoint; the CUDA source is
then compiled by NVRTC where it is installed, as a syntax check."""

from functools import partial

import numpy as np

import peers
from harness import Impl, Skip

SRC = r"""
typedef REAL real;
#define STEP(v, xv) ((v) * (real)0.95 + sin(v) * (xv) * (real)0.1)
extern "C" __global__ void fwd_plain(const real* x, const int* n, real* out, long long N) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (j >= N) return;
  real xv = x[j], v = xv; int nj = n[j];
  for (int k = 0; k < nj; ++k) v = STEP(v, xv);
  out[j] = v;
}
// slot k of element j at base[j] + k (stride 1), or base[j / 32] + j % 32 + 32 k (stride 32)
extern "C" __global__ void fwd_tape(const real* x, const int* n, const long long* base, int stride,
                                    real* tape, real* out, long long N) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (j >= N) return;
  real xv = x[j], v = xv; int nj = n[j];
  long long b = stride == 1 ? base[j] : base[j >> 5] + (j & 31);
  for (int k = 0; k < nj; ++k) { tape[b + (long long)k * stride] = v; v = STEP(v, xv); }
  out[j] = v;
}
extern "C" __global__ void bwd_tape(const real* x, const int* n, const long long* base, int stride,
                                    const real* tape, real* gx, long long N) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (j >= N) return;
  real xv = x[j], g = 1, acc = 0; int nj = n[j];
  long long b = stride == 1 ? base[j] : base[j >> 5] + (j & 31);
  for (int k = nj - 1; k >= 0; --k) {
    real v = tape[b + (long long)k * stride], s, c; sincos(v, &s, &c);
    acc += g * s * (real)0.1; g = g * ((real)0.95 + c * xv * (real)0.1);
  }
  gx[j] = g + acc;
}
"""
NAMES = ("fwd_plain", "fwd_tape", "bwd_tape")
TPB = 256


def source(dtype):
    return SRC.replace("REAL", "float" if dtype == np.float32 else "double")


def kernels(dtype):
    """(fwd_plain, fwd_tape, bwd_tape), each called as kernel(grid, block, args)."""
    if peers.on_gpu():
        mod = peers.need("cupy").RawModule(code=source(dtype), options=("-std=c++17",))
        return tuple(mod.get_function(k) for k in NAMES)
    nvrtc_check(source(dtype))
    return _fwd_plain, _fwd_tape, _bwd_tape


def nvrtc_check(src):
    try:
        from cupy.cuda import nvrtc
        prog = nvrtc.createProgram(src, "gpu_bound.cu", [], [])
    except Exception:               # no NVRTC here: the emulation alone is checked
        return
    try:
        nvrtc.compileProgram(prog, ["-arch=compute_90", "-std=c++17"])
    except Exception as e:
        raise RuntimeError(f"NVRTC: {nvrtc.getProgramLog(prog)}") from e
    finally:
        nvrtc.destroyProgram(prog)


def _step(v, x):
    return v * 0.95 + np.sin(v) * x * 0.1


def _slots(base, stride, size):
    j = np.arange(size)
    return base[j] if stride == 1 else base[j >> 5] + (j & 31)


def _fwd_plain(grid, block, args):
    x, n, out, size = args
    v = x.copy()
    for k in range(int(n.max(initial=0))):
        live = k < n
        v[live] = _step(v[live], x[live])
    out[:] = v


def _fwd_tape(grid, block, args):
    x, n, base, stride, tape, out, size = args
    b, v = _slots(base, int(stride), int(size)), x.copy()
    for k in range(int(n.max(initial=0))):
        live = k < n
        tape[b[live] + k * int(stride)] = v[live]
        v[live] = _step(v[live], x[live])
    out[:] = v


def _bwd_tape(grid, block, args):
    x, n, base, stride, tape, gx, size = args
    b = _slots(base, int(stride), int(size))
    g, acc = np.ones_like(x), np.zeros_like(x)
    for k in range(int(n.max(initial=0)) - 1, -1, -1):
        live = k < n
        v = tape[b[live] + k * int(stride)]
        acc[live] += g[live] * np.sin(v) * 0.1
        g[live] *= 0.95 + np.cos(v) * x[live] * 0.1
    gx[:] = g + acc


def grid(m):
    return ((m + TPB - 1) // TPB,)


def warp_bases(xp, n):
    m = -(-n.size // 32) * 32
    npad = xp.zeros(m, xp.int32)
    npad[: n.size] = n
    wmax = npad.reshape(-1, 32).max(axis=1).astype(xp.int64) * 32
    return xp.cumsum(wmax) - wmax, int(wmax.sum())


def bound(d, layout):
    xp = peers.array_module()
    if layout not in ("compact", "warp", "sorted-warp"):
        raise Skip(f"no layout {layout!r}")
    x, n = xp.asarray(d["x"]), xp.asarray(d["n"].astype(np.int32))
    size = x.size
    fwd_plain, fwd_tape, bwd_tape = kernels(x.dtype)
    if layout == "compact":
        slots = int(d["n"].sum())
    else:
        slots = warp_bases(xp, xp.sort(n) if layout == "sorted-warp" else n)[1]
    tape = xp.empty(max(slots, 1), x.dtype)

    def forward():
        out = xp.empty_like(x)
        fwd_plain(grid(size), (TPB,), (x, n, out, np.int64(size)))
        peers.synchronize()
        return out

    def gradient():
        out, gs = xp.empty_like(x), xp.empty_like(x)
        if layout == "compact":
            n64 = n.astype(xp.int64)
            base, stride, xs, ns = xp.cumsum(n64) - n64, 1, x, n
        else:
            perm = xp.argsort(n) if layout == "sorted-warp" else None
            xs, ns = (x, n) if perm is None else (x[perm], n[perm])
            base, stride = warp_bases(xp, ns)[0], 32
        fwd_tape(grid(size), (TPB,), (xs, ns, base, np.int32(stride), tape, out, np.int64(size)))
        out.sum()                  # the loss, as the reference kernel computes it
        bwd_tape(grid(size), (TPB,), (xs, ns, base, np.int32(stride), tape, gs, np.int64(size)))
        if layout == "sorted-warp":
            gx = xp.empty_like(x)
            gx[perm] = gs
            gs = gx
        peers.synchronize()
        return gs

    return Impl(forward, gradient, lambda: slots * x.itemsize)


SYSTEMS = {f"cupy-bound {layout}": partial(bound, layout=layout)
           for layout in ("compact", "warp", "sorted-warp")}
