"""STAGE 2 — the primitive table: each primitive's name, kind and abstract evaluation.
VJP rules (ad/rules.py, ad/loops.py), kernel lowerings (kernel/lower.py) and host
implementations (runtime/host_ops.py) are registered in tables keyed by these objects."""

import numpy as np

from ..errors import DloopValueError
from ..source import user_location
from . import elementwise
from .graph import Aval

BOOL = np.dtype(bool)
INT64 = np.dtype(np.int64)


class Primitive:
    """kind: 'elementwise' (one value per element, fusable into kernels), 'gather' (indexed read
    of a whole array, fusable), 'loop' (a per-element loop, fusable), 'host' (runs on whole
    arrays through the array library), or 'collective' (a loop over whole arrays, driven from
    the host, each iteration running the body's own program)."""

    def __init__(self, name, kind, abstract_eval):
        self.name = name
        self.kind = kind
        self.abstract_eval = abstract_eval

    def __repr__(self):
        return self.name

    @property
    def fusable(self):
        return self.kind in ("elementwise", "gather", "loop")


def broadcast_shapes(*shapes):
    # The usual cases, one shape and 0-d operands, 30x cheaper than NumPy's.
    found = ()
    for shape in shapes:
        if shape and shape != found:
            if found:
                try:
                    return tuple(np.broadcast_shapes(*shapes))
                except ValueError:
                    raise DloopValueError(
                        f"shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast "
                        "against each other", user_location()) from None
            found = shape
    return tuple(found)


def same_eval(*avals, **_):
    """Most elementwise primitives: the operands' broadcast shape, the last one's dtype
    (trace/tracer.py has a fast path for operands of one shape)."""
    return [(broadcast_shapes(*(a.shape for a in avals)), avals[-1].dtype)]


def _to_bool(*avals, **_):
    return [(broadcast_shapes(*(a.shape for a in avals)), BOOL)]


def _select(c, a, b, **_):
    return [(broadcast_shapes(c.shape, a.shape, b.shape), a.dtype)]


REGISTRY = {}


def _make(name, kind, abstract_eval):
    prim = Primitive(name, kind, abstract_eval)
    REGISTRY[name] = prim
    return prim


# Elementwise primitives take operands of one dtype (tracing inserts converts) and broadcast.
for _row in elementwise.ROWS:
    _make(_row.name, "elementwise", _to_bool if _row.result_is_bool else
          _select if _row.name == "select" else same_eval)
COMPARE = tuple(r.name for r in elementwise.ROWS if r.result_is_bool)
LOGICAL = ("and", "or", "xor")
not_p, select_p = REGISTRY["not"], REGISTRY["select"]
convert_p = _make("convert", "elementwise", lambda a, *, dtype: [(a.shape, np.dtype(dtype))])
broadcast_p = _make("broadcast_to", "elementwise", lambda a, *, shape: [(tuple(shape), a.dtype)])


def _gather_eval(table, *idx):
    return [(broadcast_shapes(*(i.shape for i in idx)), table.dtype)]


# gather(table, i0, i1, ...): table[i0, i1, ...] with one integer index array per axis.
gather_p = _make("gather", "gather", _gather_eval)
# accumulate(table, i0, ..., g): inside a loop body's VJP, adds g to the cotangent of the
# table at [i0, ...]; an effect with no result (the loop's backward op returns the sums).
accumulate_p = _make("accumulate", "gather", lambda table, *rest: [])


def _reduced_shape(shape, axes):
    return tuple(d for k, d in enumerate(shape) if k not in axes)


# Host primitives: whole-array work done by the array library.
reduce_p = _make("reduce", "host",
                 lambda a, *, op, axes: [(_reduced_shape(a.shape, axes), a.dtype)])
reshape_p = _make("reshape", "host", lambda a, *, shape: [(tuple(shape), a.dtype)])
transpose_p = _make("transpose", "host",
                    lambda a, *, axes: [(tuple(a.shape[k] for k in axes), a.dtype)])
# roll reads its operand shifted: each element gathers one element of the whole array.
roll_p = _make("roll", "gather", lambda a, *, shift, axes: [(a.shape, a.dtype)])
cumsum_p = _make("cumsum", "host", lambda a, *, axis: [(a.shape, a.dtype)])


def _concat_eval(*avals, axis):
    size = sum(a.shape[axis] for a in avals)
    shape = list(avals[0].shape)
    shape[axis] = size
    return [(tuple(shape), avals[0].dtype)]


def _matmul_eval(a, b):
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return [(batch + (a.shape[-2], b.shape[-1]), a.dtype)]


def _arg_eval(a, *, op, axis, keepdims):
    shape = tuple(1 if k == axis else d for k, d in enumerate(a.shape)) if keepdims else \
        tuple(d for k, d in enumerate(a.shape) if k != axis)
    return [(shape, INT64)]


concat_p = _make("concat", "host", _concat_eval)
matmul_p = _make("matmul", "host", _matmul_eval)       # operands of 2 or more dimensions
argreduce_p = _make("argreduce", "host", _arg_eval)   # argmax / argmin along one axis
searchsorted_p = _make("searchsorted", "host",
                       lambda a, v, *, side: [(v.shape, INT64)])
unbroadcast_p = _make("unbroadcast", "host", lambda a, *, shape: [(tuple(shape), a.dtype)])
static_slice_p = _make("static_slice", "host",
                       lambda a, *, key, shape: [(tuple(shape), a.dtype)])
static_slice_vjp_p = _make("static_slice_vjp", "host",
                           lambda g, *, key, shape: [(tuple(shape), g.dtype)])
prod_vjp_p = _make("prod_vjp", "host", lambda a, g, *, axes: [(a.shape, a.dtype)])
scatter_add_p = _make("scatter_add", "host",
                      lambda g, *idx, shape: [(tuple(shape), g.dtype)])
# argsort along one axis (stable; descending keeps equal elements in order).
argsort_p = _make("argsort", "host", lambda a, *, axis, descending: [(a.shape, INT64)])
cumprod_p = _make("cumprod", "host", lambda a, *, axis: [(a.shape, a.dtype)])
cumprod_vjp_p = _make("cumprod_vjp", "host", lambda a, g, *, axis: [(a.shape, a.dtype)])


def _svd_eval(a, *, full_matrices):
    *batch, m, n = a.shape
    k = min(m, n)
    u, vh = ((m, m), (n, n)) if full_matrices else ((m, k), (k, n))
    return [(tuple(batch) + u, a.dtype), (tuple(batch) + (k,), a.dtype),
            (tuple(batch) + vh, a.dtype)]


def _eigh_eval(a):
    return [(a.shape[:-1], a.dtype), (a.shape, a.dtype)]


# Decompositions over the last two axes, batched over the leading ones. Their VJP primitives
# take the forward inputs and outputs, then the cotangents listed in `has` (an unused output
# has none), and return the input's cotangent.
svd_p = _make("svd", "host", _svd_eval)                    # u, s, vh
svdvals_p = _make("svdvals", "host", lambda a: _svd_eval(a, full_matrices=False)[1:2])
svd_vjp_p = _make("svd_vjp", "host", lambda u, s, vh, *bars, has: [
    (u.shape[:-1] + vh.shape[-1:], u.dtype)])
eigh_p = _make("eigh", "host", _eigh_eval)                 # eigenvalues (ascending), vectors
eigvalsh_p = _make("eigvalsh", "host", lambda a: _eigh_eval(a)[:1])
eigh_vjp_p = _make("eigh_vjp", "host", lambda w, v, *bars, has: [(v.shape, v.dtype)])


def _solve_eval(a, b):
    return [(broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], b.dtype)]


def _qr_eval(a, *, complete):
    *batch, m, n = a.shape
    k = m if complete else min(m, n)
    return [(tuple(batch) + (m, k), a.dtype), (tuple(batch) + (k, n), a.dtype)]


def _like_first(a, *rest, **_):
    return [(a.shape, a.dtype)]


inv_p = _make("inv", "host", _like_first)
solve_p = _make("solve", "host", _solve_eval)             # b of shape (..., M, K)
cholesky_p = _make("cholesky", "host", _like_first)       # lower
cholesky_vjp_p = _make("cholesky_vjp", "host", _like_first)
qr_p = _make("qr", "host", _qr_eval)                      # q, r
qr_vjp_p = _make("qr_vjp", "host", lambda q, r, *bars, has: [
    (q.shape[:-1] + r.shape[-1:], q.dtype)])
slogdet_p = _make("slogdet", "host", lambda a: [(a.shape[:-2], a.dtype)] * 2)  # sign, log|det|
# pinv(a, rtol): rtol of a's batch shape; singular values at or below rtol * max are dropped.
pinv_p = _make("pinv", "host", lambda a, rtol: [(a.shape[:-2] + a.shape[:-3:-1], a.dtype)])
# The VJP of a -> its rank-r truncation u diag(s * keep) vh, applied to a cotangent g of it.
pinv_truncation_vjp_p = _make("pinv_truncation_vjp", "host",
                              lambda a, rtol, g: [(a.shape, a.dtype)])


def real_dtype(dtype):
    """The dtype of a complex dtype's parts (float64 for complex128); real dtypes map to
    themselves."""
    dtype = np.dtype(dtype)
    return np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype


def _parts_eval(a):
    return [(a.shape, real_dtype(a.dtype))]


def _fft_length(a, axis, n):
    shape = list(a.shape)
    shape[axis] = n
    return tuple(shape)


# Complex values: whole-array work only (kernel/schedule.py sends every op that reads or
# makes a complex value to the host). real, imag and abs take a complex operand; conj any.
real_p = _make("real", "host", _parts_eval)
imag_p = _make("imag", "host", _parts_eval)
conj_p = _make("conj", "host", _like_first)
complex_abs_p = _make("complex_abs", "host", _parts_eval)
# Discrete Fourier transforms, the length along each axis already set by the caller (padding
# and cropping are slices and concatenations in the graph). fft: complex to complex over
# `axes` (inverse: the inverse transform). rfft: real input, the n // 2 + 1 non-negative
# frequencies along `axis`. irfft: those frequencies to a real signal of length n.
fft_p = _make("fft", "host", _like_first)
# The norm of a transform's adjoint, which is the opposite transform: "backward" scales the
# inverse by 1/n, "forward" the forward one, "ortho" both by 1/sqrt(n).
ADJOINT_NORM = {"backward": "forward", "forward": "backward", "ortho": "ortho"}
rfft_p = _make("rfft", "host", lambda a, *, axis, norm: [
    (_fft_length(a, axis, a.shape[axis] // 2 + 1), np.result_type(a.dtype, np.complex64))])
irfft_p = _make("irfft", "host", lambda a, *, axis, n, norm: [
    (_fft_length(a, axis, n), real_dtype(a.dtype))])
# irfft's VJP: the rfft of the cotangent, the frequencies that appear twice in the real
# signal (all but 0 and n / 2) counted twice.
irfft_vjp_p = _make("irfft_vjp", "host", lambda g, *, axis, n, norm: rfft_p.abstract_eval(
    g, axis=axis, norm=norm))


# Per-element loops. Inputs: bounds (fori: lower, upper), carries (element shape),
# invariants. params['info'] is a trace.loops.LoopInfo. See ad/loops.py for tape and bwd.
def _loop_eval(*avals, info):
    return [(info.shape, d) for d in info.carry_dtypes]


def _loop_tape_eval(*avals, info):
    return _loop_eval(*avals, info=info) + [(info.shape, INT64, True)]


def _loop_bwd_eval(token, *avals, info, wrt, body_vjp):
    """Inputs: token, bounds, carry cotangents, invariants. Outputs: cotangents of the
    initial carries in wrt.carries, per-element cotangents of wrt.invariants, then the
    cotangents of the gathered tables in wrt.tables (whole arrays)."""
    invariants = avals[info.n_bounds + info.n_carry:]
    return [(info.shape, info.carry_dtypes[k]) for k in wrt.carries] + \
           [(info.shape, invariants[k].dtype) for k in wrt.invariants] + \
           [(invariants[k].shape, invariants[k].dtype) for k in wrt.tables]


loop_p = _make("loop", "loop", _loop_eval)
loop_tape_p = _make("loop_tape", "loop", _loop_tape_eval)
loop_bwd_p = _make("loop_bwd", "loop", _loop_bwd_eval)


def out_avals(prim, in_avals, params):
    outs = []
    for spec in prim.abstract_eval(*in_avals, **params):
        shape, dtype = spec[0], spec[1]
        is_tape = len(spec) > 2 and spec[2]
        if not all(type(d) is int for d in shape):      # NumPy integers from shape arithmetic
            shape = tuple(int(d) for d in shape)
        outs.append(Aval(tuple(shape), dtype if isinstance(dtype, np.dtype) else np.dtype(dtype),
                         is_tape))
    return outs


# Collective loops: inputs [lower, upper] (fori), carries, invariants, as per-element loops;
# params['info'] is an ir.graph.CollectiveInfo whose body is an array-level graph.
def _cloop_eval(*avals, info):
    return [(a.shape, a.dtype) for a in info.carry_avals]


def _cloop_tape_eval(*avals, info):
    return _cloop_eval(*avals, info=info) + [((), INT64, True)]


def _cloop_bwd_eval(token, *avals, info, wrt, body_vjp):
    assert not wrt.tables, "collective loops take table cotangents as ordinary outputs"
    invariants = avals[info.n_bounds + info.n_carry:]
    return [(info.carry_avals[k].shape, info.carry_avals[k].dtype) for k in wrt.carries] + \
           [(invariants[k].shape, invariants[k].dtype) for k in wrt.invariants]


cloop_p = _make("cloop", "collective", _cloop_eval)
cloop_tape_p = _make("cloop_tape", "collective", _cloop_tape_eval)
cloop_bwd_p = _make("cloop_bwd", "collective", _cloop_bwd_eval)
