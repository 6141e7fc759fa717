"""Host primitives: whole-array work done by the array library, between kernels. NumPy's
functions dispatch to the arrays' own library (CuPy's on the cuda backend); creation
functions follow an operand through `like=`."""

import numpy as np

from ..ir import prims
from ..ir.semantics import evaluate, stable_argsort

HOST_IMPLS = {}


def _reduce(x, *, op, axes):
    fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[op]
    return fn(x, axis=axes)


def _unbroadcast(g, *, shape):
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, d in enumerate(shape)
                                      if d == 1 and g.shape[lead + k] != 1)
    return np.sum(g, axis=axes).reshape(shape) if axes else g.reshape(shape)


def _slice_vjp(g, *, key, shape):
    out = np.zeros(shape, dtype=g.dtype, like=g)
    out[key] = g
    return out


def _conj(x):
    return np.conj(x) if x.dtype.kind == "c" else x


def _prod_vjp(x, g, *, axes):
    """Cotangent of prod(x, axes): g times the product of the other elements, computed by
    exclusive prefix and suffix products so that zeros in x are handled exactly."""
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
    flat = moved.reshape(moved.shape[:x.ndim - len(axes)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=x.dtype, like=x)
    # [1, x0, x1, ...] cut to x's length (not [1] + x[:-1], one too long where x is empty).
    before = np.cumprod(np.concatenate([ones, flat], axis=-1)[..., :-1], axis=-1)
    after = np.flip(np.cumprod(np.concatenate([ones, np.flip(flat, -1)], axis=-1)[..., :-1],
                               axis=-1), -1)
    # Complex cotangents are dL/dRe + i dL/dIm: g times the conjugate.
    others = _conj((before * after).reshape(moved.shape))
    out = others * np.reshape(g, g.shape + (1,) * len(axes))
    return np.moveaxis(out, range(x.ndim - len(axes), x.ndim), axes)


def _scatter_add(g, *idx, shape):
    out = np.zeros(shape, dtype=g.dtype, like=g)
    idx = tuple(np.where(i < 0, i + d, i) for i, d in zip(idx, shape))
    np.add.at(out, idx, g)
    return out


def _cumprod_vjp(x, g, *, axis):
    """Cotangent of cumprod along `axis`, exact where x has zeros: with s_j = g_j +
    x_{j+1} s_{j+1} (a reverse recurrence), dx_j = s_j * prod(x_k for k < j)."""
    x, g = np.moveaxis(_conj(x), axis, -1), np.moveaxis(g, axis, -1)   # conj: see _prod_vjp
    s = np.empty_like(g)
    running = np.zeros(g.shape[:-1], dtype=g.dtype)
    for j in reversed(range(x.shape[-1])):
        nxt = x[..., j + 1] if j + 1 < x.shape[-1] else np.zeros_like(running)
        running = g[..., j] + nxt * running
        s[..., j] = running
    before = np.cumprod(np.concatenate([np.ones_like(x[..., :1]), x[..., :-1]], axis=-1),
                        axis=-1)
    return np.moveaxis(s * before, -1, axis)


def _mT(x):
    return np.swapaxes(x, -1, -2)


def _diag(d):
    """Matrices with diagonal d (CuPy's eye refuses the device argument NumPy's like= adds)."""
    k = d.shape[-1]
    out = np.zeros(d.shape + (k,), dtype=d.dtype, like=d)
    out.reshape(d.shape[:-1] + (k * k,))[..., ::k + 1] = d
    return out


def _skew(j):
    return j - _mT(j)


def _reciprocal_or_zero(d):
    """1 / d, and 0 where d is 0: the factors of a decomposition's VJP that belong to
    repeated values (see _svd_vjp)."""
    zero = d == 0
    return np.where(zero, 0, 1 / np.where(zero, 1, d))


def _cotangents(bars, has):
    bars = iter(bars)
    return [next(bars) if present else None for present in has]


def _svd_vjp(u, s, vh, *bars, has):
    """Cotangent of x = u diag(s) vh, from those of u, s and vh (None where unused). With
    J = u^T u_bar, K = v^T v_bar, A = J - J^T, B = K - K^T, the off-diagonal core is
    ((A + B)_ij / (s_j - s_i) + (A - B)_ij / (s_j + s_i)) / 2, the usual F_ij = 1 / (s_j^2 -
    s_i^2) form split so that a loss invariant under rotations of u and v within a repeated
    singular value stays exact at s_i == s_j where A + B is 0 around the point, not only at it
    (the polar factor u @ vh, projectors onto whole groups of repeated values, symmetric
    functions of them). Where s_i == s_j (or s_i + s_j == 0) the factor is 0, not inf: SciPy
    computes a decomposition and then selects the original matrix with xp.where, so the
    decomposition receives a zero cotangent that must not become 0 * inf = nan. At an exact
    repeat the cotangents do not determine the limit of (A + B)_ij / (s_j - s_i) for other
    losses (pinv's has one, hence its own primitive), and a loss of the subspace's arbitrary
    basis has no derivative: the result leaves that term out and stays finite."""
    ubar, sbar, vhbar = _cotangents(bars, has)
    k = s.shape[-1]
    u, vh = u[..., :k], vh[..., :k, :]        # full_matrices: the rule checked the extra part
    core = _diag(sbar) if sbar is not None else np.zeros(s.shape + (k,), s.dtype, like=s)
    if ubar is not None or vhbar is not None:
        a = _skew(_mT(u) @ ubar) if ubar is not None else 0
        b = _skew(vh @ _mT(vhbar)) if vhbar is not None else 0
        si, sj = s[..., :, None], s[..., None, :]
        core = core + 0.5 * ((a + b) * _reciprocal_or_zero(sj - si) +
                             (a - b) * _reciprocal_or_zero(sj + si))
    out = u @ core @ vh
    s_inv = _reciprocal_or_zero(s)
    if ubar is not None and u.shape[-2] > k:  # thin: the part of u_bar outside span(u)
        out = out + ((ubar - u @ (_mT(u) @ ubar)) * s_inv[..., None, :]) @ vh
    if vhbar is not None and vh.shape[-1] > k:
        out = out + u @ (s_inv[..., :, None] * (vhbar - (vhbar @ _mT(vh)) @ vh))
    return out


def _eigh_vjp(w, v, *bars, has):
    """Cotangent of a symmetric x = v diag(w) v^T: v (diag(w_bar) + F o (C - C^T) / 2) v^T,
    C = v^T v_bar, F_ij = 1 / (w_j - w_i), symmetric because only x's symmetric part is read.
    F is 0 at repeated eigenvalues, as in _svd_vjp and for the same reasons."""
    wbar, vbar = _cotangents(bars, has)
    core = _diag(wbar) if wbar is not None else np.zeros(v.shape, v.dtype, like=v)
    if vbar is not None:
        c = _mT(v) @ vbar
        core = core + 0.5 * _skew(c) * _reciprocal_or_zero(w[..., None, :] - w[..., :, None])
    return v @ core @ _mT(v)


def _solve_right(x, a):
    """x a^-1, by a solve with a^T."""
    return _mT(np.linalg.solve(_mT(a), _mT(x)))


def _cholesky_vjp(l, lbar):
    """Cotangent of x = l l^T: l^-T Phi(l^T l_bar) l^-1, Phi the lower triangle with the
    diagonal halved, then its symmetric part (only x's symmetric part is read)."""
    p = np.tril(_mT(l) @ lbar)
    p = p - 0.5 * _diag(np.diagonal(p, axis1=-2, axis2=-1))
    out = _solve_right(np.linalg.solve(_mT(l), p), l)
    return 0.5 * (out + _mT(out))


def _qr_square_vjp(q, r, qbar, rbar):
    """x = q r with m >= n (r square): (q_bar + q copyltu(M)) r^-T, M = r r_bar^T - q_bar^T q,
    copyltu the symmetric matrix with M's lower triangle."""
    m = (r @ _mT(rbar) if rbar is not None else 0) - (_mT(qbar) @ q if qbar is not None else 0)
    sym = np.tril(m) + _mT(np.tril(m, -1))
    b = q @ sym + (qbar if qbar is not None else 0)
    return _solve_right(b, _mT(r))


def _qr_vjp(q, r, *bars, has):
    """Cotangent of x = q r. A wide x = [x1 | x2] (m < n) has r = [r1 | r2] with x1 = q r1
    square and x2 = q r2: r2's cotangent reaches x2 as q r2_bar and q as x2 r2_bar^T, then
    the square rule finishes."""
    qbar, rbar = _cotangents(bars, has)
    k = min(q.shape[-2], r.shape[-1])
    q, r = q[..., :k], r[..., :k, :]          # complete: the rule checked q's extra columns
    rbar = rbar[..., :k, :] if rbar is not None else None
    if r.shape[-1] == k:
        return _qr_square_vjp(q, r, qbar, rbar)
    r1, r1bar = r[..., :k], rbar[..., :k] if rbar is not None else None
    if rbar is None:
        x2bar = np.zeros(q.shape[:-1] + (r.shape[-1] - k,), q.dtype, like=q)
    else:
        x2bar = q @ rbar[..., k:]
        x2 = q @ r[..., k:]
        qbar = x2 @ _mT(rbar[..., k:]) + (qbar if qbar is not None else 0)
    return np.concatenate([_qr_square_vjp(q, r1, qbar, r1bar), x2bar], axis=-1)


def _pinv(a, rtol):
    """Written out with svd: CuPy's pinv takes a scalar cutoff only."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    big = s > rtol[..., None] * np.max(s, axis=-1, keepdims=True)
    s_inv = np.where(big, 1 / np.where(big, s, 1), 0)
    return _mT(vh) @ (s_inv[..., :, None] * _mT(u))


HOST_IMPLS[prims.reduce_p] = _reduce
HOST_IMPLS[prims.reshape_p] = lambda x, *, shape: np.reshape(x, shape)
HOST_IMPLS[prims.transpose_p] = lambda x, *, axes: np.transpose(x, axes)
HOST_IMPLS[prims.cumsum_p] = lambda x, *, axis: np.cumsum(x, axis=axis)
HOST_IMPLS[prims.concat_p] = lambda *xs, axis: np.concatenate(xs, axis=axis)
HOST_IMPLS[prims.matmul_p] = np.matmul
HOST_IMPLS[prims.argreduce_p] = lambda x, *, op, axis, keepdims: (
    np.argmax if op == "max" else np.argmin)(x, axis=axis, keepdims=keepdims)
HOST_IMPLS[prims.searchsorted_p] = lambda a, v, *, side: np.searchsorted(a, v, side=side)
HOST_IMPLS[prims.unbroadcast_p] = _unbroadcast
HOST_IMPLS[prims.static_slice_p] = lambda x, *, key, shape: np.asarray(x[key], like=x)
HOST_IMPLS[prims.static_slice_vjp_p] = _slice_vjp
HOST_IMPLS[prims.prod_vjp_p] = _prod_vjp
HOST_IMPLS[prims.scatter_add_p] = _scatter_add
HOST_IMPLS[prims.argsort_p] = stable_argsort
HOST_IMPLS[prims.cumprod_p] = lambda x, *, axis: np.cumprod(x, axis=axis)
HOST_IMPLS[prims.cumprod_vjp_p] = _cumprod_vjp
HOST_IMPLS[prims.svd_p] = lambda x, *, full_matrices: tuple(
    np.linalg.svd(x, full_matrices=full_matrices))
HOST_IMPLS[prims.svdvals_p] = lambda x: np.linalg.svd(x, compute_uv=False)
HOST_IMPLS[prims.svd_vjp_p] = _svd_vjp
HOST_IMPLS[prims.eigh_p] = lambda x: tuple(np.linalg.eigh(x))
HOST_IMPLS[prims.eigvalsh_p] = lambda x: np.linalg.eigvalsh(x)
HOST_IMPLS[prims.eigh_vjp_p] = _eigh_vjp
HOST_IMPLS[prims.inv_p] = lambda x: np.linalg.inv(x)
HOST_IMPLS[prims.solve_p] = lambda a, b: np.linalg.solve(a, b)
HOST_IMPLS[prims.cholesky_p] = lambda x: np.linalg.cholesky(x)
HOST_IMPLS[prims.cholesky_vjp_p] = _cholesky_vjp
HOST_IMPLS[prims.qr_p] = lambda x, *, complete: tuple(
    np.linalg.qr(x, mode="complete" if complete else "reduced"))
HOST_IMPLS[prims.qr_vjp_p] = _qr_vjp
HOST_IMPLS[prims.slogdet_p] = lambda x: tuple(np.linalg.slogdet(x))
HOST_IMPLS[prims.pinv_p] = _pinv


def _pinv_truncation_vjp(a, rtol, g):
    """VJP of the truncation a -> u diag(s * keep) vh that pinv(a, rtol) inverts, applied to
    g. With M = u^T g v: the core is M on kept x kept (no division, so exact at repeated kept
    values), 0 on dropped x dropped, and on kept i x dropped j (s_i > s_j, so no 0/0)
    (s_i (M_ij + M_ji) / (s_i - s_j) + s_i (M_ij - M_ji) / (s_i + s_j)) / 2 and its mirror.
    Where every dropped value is 0 this is the identity on g (the rank-r rule's result)."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    k = s.shape[-1]
    keep = s > rtol[..., None] * np.max(s, axis=-1, keepdims=True)
    sk = np.where(keep, s, 0)
    m = _mT(u) @ g @ _mT(vh)
    si, sj, ski, skj = s[..., :, None], s[..., None, :], sk[..., :, None], sk[..., None, :]
    mt = _mT(m)
    diff, total = sj - si, sj + si
    f_minus = np.where(diff == 0, 1.0, (skj - ski) / np.where(diff == 0, 1, diff))
    f_plus = np.where(total == 0, 0.0, (skj + ski) / np.where(total == 0, 1, total))
    core = 0.5 * ((m + mt) * f_minus + (m - mt) * f_plus)
    both_dropped = ~keep[..., :, None] & ~keep[..., None, :]
    core = np.where(both_dropped, 0, core)
    out = u @ core @ vh
    vk = _mT(vh) * keep[..., None, :]          # kept right vectors, as columns
    uk = u * keep[..., None, :]
    if u.shape[-2] > k:      # g's part outside span(u), on kept right vectors
        out = out + (g - u @ (_mT(u) @ g)) @ vk @ _mT(vk)
    if vh.shape[-1] > k:
        out = out + uk @ _mT(uk) @ (g - (g @ _mT(vh)) @ vh)
    return out


HOST_IMPLS[prims.pinv_truncation_vjp_p] = _pinv_truncation_vjp


def _elementwise(name):
    """An elementwise primitive as a host step: the kernels' reference meaning on whole arrays
    (the scheduler runs elementwise ops on complex values this way)."""
    return lambda *args, **params: evaluate(name, args, params)


for _prim in prims.REGISTRY.values():
    if _prim.kind == "elementwise":
        HOST_IMPLS[_prim] = _elementwise(_prim.name)
HOST_IMPLS[prims.roll_p] = lambda x, *, shift, axes: np.roll(x, shift, axes)
HOST_IMPLS[prims.real_p] = np.real
HOST_IMPLS[prims.imag_p] = np.imag
HOST_IMPLS[prims.conj_p] = np.conj
HOST_IMPLS[prims.complex_abs_p] = np.abs
HOST_IMPLS[prims.fft_p] = lambda x, *, axes, inverse, norm: (
    np.fft.ifftn if inverse else np.fft.fftn)(x, axes=axes, norm=norm)
HOST_IMPLS[prims.rfft_p] = lambda x, *, axis, norm: np.fft.rfft(x, axis=axis, norm=norm)


def _irfft_vjp(g, *, axis, n, norm):
    out = np.fft.rfft(g, axis=axis, norm=prims.ADJOINT_NORM[norm])
    weight = np.full(out.shape[axis], 2.0)
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    return out * np.asarray(weight, like=out).reshape((-1,) + (1,) * (g.ndim - 1 - axis))


HOST_IMPLS[prims.irfft_vjp_p] = _irfft_vjp
HOST_IMPLS[prims.irfft_p] = lambda x, *, axis, n, norm: np.fft.irfft(x, n, axis=axis,
                                                                     norm=norm)
