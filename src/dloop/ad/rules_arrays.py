"""STAGE 3 — VJP rules of the whole-array host primitives and the newer elementwise ones.
A decomposition's rule emits one host primitive (svd_vjp, eigh_vjp) that takes only the
cotangents that exist: an unused output's is None and costs nothing."""

from ..errors import DloopNotImplementedError
from ..ir import prims
from .rules import _one, _one_minus_square, _reciprocal, _unary, _zero_rule, conj
from .vjp import VJP_RULES

P = prims.REGISTRY

VJP_RULES[P["asinh"]] = _unary(lambda em, x, y: _reciprocal(em, em.op(
    "sqrt", em.add(em.mul(x, x), _one(em, x)))))
# 1 / (sqrt(x - 1) sqrt(x + 1)), not 1 / sqrt(x^2 - 1): the two differ in sign on part of
# the complex plane (acosh's cut is x < 1, that of sqrt(x^2 - 1) the imaginary axis too).
VJP_RULES[P["acosh"]] = _unary(lambda em, x, y: _reciprocal(em, em.mul(
    em.op("sqrt", em.op("sub", x, _one(em, x))), em.op("sqrt", em.add(x, _one(em, x))))))
VJP_RULES[P["atanh"]] = _unary(lambda em, x, y: _reciprocal(em, _one_minus_square(em, x)))
for _name in ("round", "trunc", "shl", "shr", "argreduce", "searchsorted", "argsort"):
    VJP_RULES[P[_name]] = _zero_rule


def _copysign_rule(em, op, bars, needs, context):
    a, b = op.inputs
    g = bars[0]
    sign = em.mul(em.op("copysign", _one(em, a), a), em.op("copysign", _one(em, a), b))
    return [em.unbroadcast(em.mul(g, sign), a.aval.shape) if needs[0] else None, None]


def _roll_rule(em, op, bars, needs, context):
    return [em.op("roll", bars[0], shift=tuple(-s for s in op.params["shift"]),
                  axes=op.params["axes"])]


def _flip(em, x, axis):
    key = tuple(slice(None, None, -1) if k == axis else slice(None)
                for k in range(x.aval.ndim))
    return em.op("static_slice", x, key=key, shape=x.aval.shape)


def _cumsum_rule(em, op, bars, needs, context):
    axis = op.params["axis"]
    return [_flip(em, em.op("cumsum", _flip(em, bars[0], axis), axis=axis), axis)]


def _concat_rule(em, op, bars, needs, context):
    axis, start, out = op.params["axis"], 0, []
    for x, need in zip(op.inputs, needs):
        size = x.aval.shape[axis]
        if need:
            key = (slice(None),) * axis + (slice(start, start + size),)
            out.append(em.op("static_slice", bars[0], key=key, shape=x.aval.shape))
        else:
            out.append(None)
        start += size
    return out


def _swap_last(em, x):
    axes = list(range(x.aval.ndim))
    axes[-2:] = axes[-1], axes[-2]
    return em.op("transpose", x, axes=tuple(axes))


def _matmul_rule(em, op, bars, needs, context):
    a, b = op.inputs
    g = bars[0]
    ga = em.unbroadcast(em.op("matmul", g, conj(em, _swap_last(em, b))), a.aval.shape) \
        if needs[0] else None
    gb = em.unbroadcast(em.op("matmul", conj(em, _swap_last(em, a)), g), b.aval.shape) \
        if needs[1] else None
    return [ga, gb]


VJP_RULES[P["copysign"]] = _copysign_rule
VJP_RULES[P["roll"]] = _roll_rule
VJP_RULES[P["cumsum"]] = _cumsum_rule
VJP_RULES[P["concat"]] = _concat_rule
VJP_RULES[P["matmul"]] = _matmul_rule


def _cumprod_rule(em, op, bars, needs, context):
    return [em.op("cumprod_vjp", op.inputs[0], bars[0], axis=op.params["axis"])]


def _slice_vjp_rule(em, op, bars, needs, context):
    """static_slice_vjp places g into zeros at key; its transpose reads key back out."""
    g = op.inputs[0]
    return [em.op("static_slice", bars[0], key=op.params["key"], shape=g.aval.shape)]


VJP_RULES[P["cumprod"]] = _cumprod_rule
VJP_RULES[P["static_slice_vjp"]] = _slice_vjp_rule


def _present(bars):
    return [b for b in bars if b is not None], tuple(b is not None for b in bars)


def _svd_rule(em, op, bars, needs, context):
    m, n = op.inputs[0].aval.shape[-2:]
    if op.params["full_matrices"] and m != n and bars[0 if m > n else 2] is not None:
        raise DloopNotImplementedError(
            f"the gradient through {'u' if m > n else 'vh'} of linalg.svd(full_matrices=True) "
            f"of a {m} x {n} matrix: its last {abs(m - n)} {'column' if m > n else 'row'}(s) are "
            "not determined by the matrix. Use full_matrices=False", op.src)
    present, has = _present(bars)
    return [em.op("svd_vjp", *op.outputs, *present, has=has)]


def _svdvals_rule(em, op, bars, needs, context):
    u, s, vh = em.emit("svd", op.inputs, full_matrices=False)
    return [em.op("svd_vjp", u, s, vh, bars[0], has=(False, True, False))]


def _eigh_rule(em, op, bars, needs, context):
    present, has = _present(bars)
    return [em.op("eigh_vjp", *op.outputs, *present, has=has)]


def _eigvalsh_rule(em, op, bars, needs, context):
    w, v = em.emit("eigh", op.inputs)
    return [em.op("eigh_vjp", w, v, bars[0], has=(True, False))]


VJP_RULES[P["svd"]] = _svd_rule
VJP_RULES[P["svdvals"]] = _svdvals_rule
VJP_RULES[P["eigh"]] = _eigh_rule
VJP_RULES[P["eigvalsh"]] = _eigvalsh_rule


def _inv_rule(em, op, bars, needs, context):
    yt = _swap_last(em, op.outputs[0])
    return [em.op("neg", em.op("matmul", em.op("matmul", yt, bars[0]), yt))]


def _solve_rule(em, op, bars, needs, context):
    """x = a^-1 b: b_bar = a^-T x_bar, a_bar = -b_bar x^T (each summed over broadcast axes)."""
    a, b = op.inputs
    b_bar = em.op("solve", _swap_last(em, a), bars[0])
    a_bar = em.op("neg", em.op("matmul", b_bar, _swap_last(em, op.outputs[0])))
    return [em.unbroadcast(a_bar, a.aval.shape) if needs[0] else None,
            em.unbroadcast(b_bar, b.aval.shape) if needs[1] else None]


def _qr_rule(em, op, bars, needs, context):
    m, n = op.inputs[0].aval.shape[-2:]
    if op.params["complete"] and m > n and bars[0] is not None:
        raise DloopNotImplementedError(
            f"the gradient through q of linalg.qr(mode='complete') of a {m} x {n} matrix: its "
            f"last {m - n} column(s) are not determined by the matrix. Use mode='reduced'", op.src)
    present, has = _present(bars)
    return [em.op("qr_vjp", *op.outputs, *present, has=has)]


def _slogdet_rule(em, op, bars, needs, context):
    """The sign is piecewise constant; d log|det a| = a^-T."""
    g = bars[1]
    if g is None:
        return [None]
    a = op.inputs[0]
    g = em.broadcast(em.op("reshape", g, shape=g.aval.shape + (1, 1)), a.aval.shape)
    return [em.mul(g, _swap_last(em, em.op("inv", a)))]


def _pinv_rule(em, op, bars, needs, context):
    """Where the rank is constant (Golub and Pereyra): with p = pinv(a),
    a_bar = -p^T g p^T + (1 - a p) g^T p p^T + p^T p g^T (1 - p a). Not through svd: its VJP
    cannot tell this loss's limit at repeated singular values."""
    a, p, g = op.inputs[0], op.outputs[0], bars[0]
    mm = lambda x, y: em.op("matmul", x, y)  # noqa: E731
    pt, gt = _swap_last(em, p), _swap_last(em, g)
    gt_ppt, ptp_gt = mm(gt, mm(p, pt)), mm(mm(pt, p), gt)
    out = em.op("sub", gt_ppt, mm(a, mm(p, gt_ppt)))
    out = em.add(out, em.op("sub", ptp_gt, mm(ptp_gt, mm(p, a))))
    out = em.op("sub", out, mm(pt, mm(g, pt)))
    # The formula differentiates pinv of a rank-r matrix; pinv(a, rtol) is that of a's rank-r
    # truncation, whose own VJP carries the cotangent back to a.
    return [em.op("pinv_truncation_vjp", a, op.inputs[1], out), None]


VJP_RULES[P["inv"]] = _inv_rule
VJP_RULES[P["solve"]] = _solve_rule
VJP_RULES[P["cholesky"]] = lambda em, op, bars, needs, context: [
    em.op("cholesky_vjp", op.outputs[0], bars[0])]
VJP_RULES[P["qr"]] = _qr_rule
VJP_RULES[P["slogdet"]] = _slogdet_rule
VJP_RULES[P["pinv"]] = _pinv_rule


# Complex values. A cotangent is dL/dRe + i dL/dIm (see rules.conj): real(z) passes g back
# as g + 0i, imag(z) as 0 + ig, conj(z) as conj(g), |z| as g z / |z| (0 at z = 0).
def _as_complex(em, g, like):
    return em.op("convert", g, dtype=like.aval.dtype)


def _complex_abs_rule(em, op, bars, needs, context):
    z, r, g = op.inputs[0], op.outputs[0], bars[0]
    zero = em.op("eq", r, em.lit(0.0, r))
    scale = em.op("select", zero, em.lit(0.0, r),
                  em.op("div", g, em.op("select", zero, _one(em, r), r)))
    return [em.mul(_as_complex(em, scale, z), z)]


VJP_RULES[P["real"]] = lambda em, op, bars, needs, context: [
    _as_complex(em, bars[0], op.inputs[0])]
VJP_RULES[P["imag"]] = lambda em, op, bars, needs, context: [
    em.mul(_as_complex(em, bars[0], op.inputs[0]), em.lit(1j, op.inputs[0]))]
VJP_RULES[P["conj"]] = lambda em, op, bars, needs, context: [em.op("conj", bars[0])]
VJP_RULES[P["complex_abs"]] = _complex_abs_rule

# The transforms are linear: the cotangent is the adjoint applied to g, the opposite
# transform with the opposite normalization (prims.ADJOINT_NORM).


def _fft_rule(em, op, bars, needs, context):
    p = op.params
    return [em.op("fft", bars[0], axes=p["axes"], inverse=not p["inverse"],
                  norm=prims.ADJOINT_NORM[p["norm"]])]


def _rfft_rule(em, op, bars, needs, context):
    """rfft keeps the first n // 2 + 1 frequencies of the full transform of a real x: the
    cotangent is the real part of the full transform's adjoint of g padded with zeros."""
    x, g, axis = op.inputs[0], bars[0], op.params["axis"]
    shape = x.aval.shape[:axis] + (x.aval.shape[axis],) + g.aval.shape[axis + 1:]
    key = (slice(None),) * axis + (slice(0, g.aval.shape[axis]),)
    padded = em.op("static_slice_vjp", g, key=key, shape=shape)
    full = em.op("fft", padded, axes=(axis,), inverse=True,
                 norm=prims.ADJOINT_NORM[op.params["norm"]])
    return [em.op("real", full)]


VJP_RULES[P["fft"]] = _fft_rule
VJP_RULES[P["rfft"]] = _rfft_rule
VJP_RULES[P["irfft"]] = lambda em, op, bars, needs, context: [
    em.op("irfft_vjp", bars[0], **op.params)]
