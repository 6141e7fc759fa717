"""W2, per-element while: Newton's method on v**3 + a v - 1 = 0 from v = 1, until
|f| < 1e-10; the gradient of sum(v) with respect to a."""

from functools import partial

import numpy as np

import peers
from harness import Impl

NAME = "W2 per-element while"
TOLS = {"float64": 1e-10, "float32": 1e-6}   # float32: its residual stalls at 2.4e-7 (N = 10^6)
TOL = TOLS["float64"]                       # Warp's kernel, float64 only, reads this constant
CAP = 64          # for the peers that cannot run a while loop backwards: mask to CAP steps


def tol(d):
    return TOLS[d.get("precision", "float64")]


def cases(scale):
    n = {"quick": 20_000, "full": 200_000, "gpu": 10 ** 6, "tiny": 2_000}[scale]
    return [(f"N={n:,}", n)]


def make_data(n, rng):
    return {"a": np.exp(rng.uniform(-3.0, 3.0, size=n))}    # 1 to ~40 Newton steps


def residual(v, a):
    return v ** 3 + a * v - 1.0


def step(v, a):
    return v - (v ** 3 + a * v - 1.0) / (3.0 * v ** 2 + a)


def numpy_adjoint(d):
    a, tol_ = d["a"], tol(d)

    def forward():
        v = np.ones_like(a)
        active = np.arange(a.size)
        while active.size:
            active = active[np.abs(residual(v[active], a[active])) > tol_]
            v[active] = step(v[active], a[active])
        return v

    def gradient():
        v = np.ones_like(a)
        active = np.arange(a.size)
        history = []
        while True:
            active = active[np.abs(residual(v[active], a[active])) > tol_]
            if not active.size:
                break
            history.append((active, v[active].copy()))
            v[active] = step(v[active], a[active])
        state["bytes"] = sum(i.nbytes + h.nbytes for i, h in history)
        v_bar, a_bar = np.ones_like(a), np.zeros_like(a)
        for idx, vk in reversed(history):
            ak, g = a[idx], v_bar[idx]
            den = 3.0 * vk ** 2 + ak
            f = vk ** 3 + ak * vk - 1.0
            # v' = v - f / den:  dv'/dv = 1 - (den^2 - 6 v f) / den^2,
            #                    dv'/da = -(v den - f) / den^2
            a_bar[idx] += g * -(vk * den - f) / den ** 2
            v_bar[idx] = g * (1.0 - (den * den - f * 6.0 * vk) / den ** 2)
        return a_bar

    state = {}
    return Impl(forward, gradient, lambda: state["bytes"])


def dloop(d, retrace=True):
    """retrace=False: the `dloop-once` row (docs/guide.md, section 7)."""
    dl, tol_ = peers.dloop(), tol(d)

    def solve(a):
        return dl.while_loop(lambda v: np.abs(residual(v, a)) > tol_, lambda v: step(v, a),
                             np.ones_like(a))

    return peers.dloop_impl(dl.jit(solve, retrace=retrace),
                            dl.grad(lambda a: solve(a).sum(), retrace=retrace),
                            peers.on_device(d["a"]))


def _masked(where, abs_, tol_):
    def solve(a):
        v = a * 0 + 1.0
        for _ in range(CAP):
            v = where(abs_(residual(v, a)) > tol_, step(v, a), v)
        return v
    return solve


def jax_masked(d):
    jax = peers.jax()
    jnp, lax = jax.numpy, jax.lax
    a, tol_ = jnp.asarray(d["a"]), tol(d)

    def solve(a):
        body = lambda i, v: jnp.where(jnp.abs(residual(v, a)) > tol_, step(v, a), v)  # noqa
        return lax.fori_loop(0, CAP, body, jnp.ones_like(a))

    fwd, grad = jax.jit(solve), jax.jit(jax.grad(lambda a: solve(a).sum()))
    return Impl(lambda: fwd(a).block_until_ready(), lambda: grad(a).block_until_ready())


def torch_eager(d):
    torch = peers.torch()
    return peers.torch_impl(_masked(torch.where, torch.abs, tol(d)), lambda v: v.sum(), d["a"])


def _drjit(d, mode):
    dr = peers.drjit_types(d["a"])[0]
    kw, tol_ = peers.drjit_loop_options(mode, CAP), tol(d)

    def solve(a):
        (v, _) = dr.while_loop((dr.ones(type(a), dr.width(a)), a),
                               lambda v, a: dr.abs(residual(v, a)) > tol_,
                               lambda v, a: (step(v, a), a), **kw)
        return v

    return peers.drjit_impl(solve, [d["a"]])


def quadrants(d):
    qd, fp = peers.quadrants(d["a"])
    size, tol_ = d["a"].size, tol(d)
    a = qd.field(fp, shape=size, needs_grad=True)
    out = qd.field(fp, shape=size)
    loss = qd.field(fp, shape=(), needs_grad=True)

    @qd.func
    def solve_one(ak):
        v = 1.0
        while qd.abs(v ** 3 + ak * v - 1.0) > tol_:
            v = v - (v ** 3 + ak * v - 1.0) / (3.0 * v ** 2 + ak)
        return v

    @qd.kernel
    def solve():
        for t in range(size):
            out[t] = solve_one(a[t])

    @qd.kernel
    def total():
        for t in range(size):
            loss[None] += solve_one(a[t])

    a.from_numpy(d["a"])

    def gradient():
        with qd.ad.Tape(loss=loss):
            total()
        qd.sync()
        return a.grad.to_numpy

    return Impl(lambda: (solve(), qd.sync()), gradient)


def warp(d):
    wp = peers.warp(d["a"])
    f64 = wp.float64

    @wp.kernel
    def solve(a: wp.array(dtype=f64), out: wp.array(dtype=f64)):
        t = wp.tid()
        v = f64(1.0)
        ak = a[t]
        while wp.abs(v * v * v + ak * v - f64(1.0)) > f64(TOL):
            v = v - (v * v * v + ak * v - f64(1.0)) / (f64(3.0) * v * v + ak)
        out[t] = v

    size = d["a"].size

    def run(requires_grad):
        a = wp.array(d["a"], dtype=f64, requires_grad=requires_grad)
        out = wp.zeros(size, dtype=f64, requires_grad=requires_grad)
        return a, out

    def forward():
        a, out = run(False)
        wp.launch(solve, dim=size, inputs=[a, out])
        wp.synchronize()

    def gradient():
        a, out = run(True)
        tape = wp.Tape()
        with tape:
            wp.launch(solve, dim=size, inputs=[a, out])
        tape.backward(grads={out: wp.ones(size, dtype=f64)})
        wp.synchronize()
        return a.grad.numpy

    return Impl(forward, gradient)


SYSTEMS = {"numpy-adjoint": numpy_adjoint, "dloop": dloop,
           "dloop-once": partial(dloop, retrace=False), "jax-masked": jax_masked,
           "torch-eager": torch_eager, "drjit-evaluated": partial(_drjit, mode="evaluated"),
           "drjit-symbolic": partial(_drjit, mode="symbolic"), "quadrants": quadrants, "warp": warp}
