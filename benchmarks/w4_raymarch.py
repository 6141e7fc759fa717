"""W4, ray marching: sphere tracing of a signed distance field (three spheres), one ray per
element, while the distance is above a tolerance and the step count below a cap; the
gradient of a depth-image loss with respect to the spheres' radii, shared by all rays."""

from functools import partial

import numpy as np

import peers
from harness import Impl

NAME = "W4 ray marching"
CENTERS = np.array([[0.0, 0.0, 4.0], [1.2, 0.3, 5.0], [-1.0, -0.6, 4.5]])
RADII = np.array([1.0, 0.7, 0.6])
TOLS = {"float64": 1e-6, "float32": 1e-4}   # float32's t has steps of ~5e-7 near t = 4
TOL, CAP, FAR = TOLS["float64"], 128, 20.0  # TOL: for Warp's kernel, float64 only
HIT = 10.0        # rays that end nearer than this hit a sphere; only they enter the loss


def tol(d):
    return TOLS[d.get("precision", "float64")]


def cases(scale):
    side = {"quick": 64, "full": 256, "gpu": 1000, "tiny": 32}[scale]
    return [(f"{side}x{side} rays", side)]


def make_data(side, rng):
    u, v = np.meshgrid(np.linspace(-0.6, 0.6, side), np.linspace(-0.6, 0.6, side))
    d = np.stack([u.ravel(), v.ravel(), np.ones(side * side)])
    d /= np.linalg.norm(d, axis=0)
    target = 4.0 + 0.5 * rng.random(side * side)
    return {"dx": d[0], "dy": d[1], "dz": d[2], "target": target, "radii": RADII.copy()}


def sdf(t, dx, dy, dz, radii, sqrt, minimum):
    """Distance at p = t * d (camera at the origin) to the nearest sphere."""
    best = None
    for k in range(3):
        cx, cy, cz = (float(c) for c in CENTERS[k])    # weak scalars keep float32 data
        dist = sqrt((t * dx - cx) ** 2 + (t * dy - cy) ** 2 + (t * dz - cz) ** 2) - radii[k]
        best = dist if best is None else minimum(best, dist)
    return best


def loss_of(depth, target, where):
    """Squared depth error over the rays that hit a sphere (a missed ray marches away, and the
    derivative of its depth grows without bound)."""
    return where(depth < HIT, (depth - target) ** 2, 0.0).sum()


def numpy_adjoint(d):
    dx, dy, dz, target, radii = d["dx"], d["dy"], d["dz"], d["target"], d["radii"]
    tol_ = tol(d)

    def march(record):
        t = np.zeros_like(dx)
        active = np.arange(dx.size)
        history = []
        for _ in range(CAP):
            dist = sdf(t[active], dx[active], dy[active], dz[active], radii, np.sqrt, np.minimum)
            keep = (dist > tol_) & (t[active] < FAR)
            active, dist = active[keep], dist[keep]
            if not active.size:
                break
            if record:
                history.append((active, t[active].copy()))
            t[active] += dist
        return t, history

    def gradient():
        t, history = march(True)
        state["bytes"] = sum(i.nbytes + h.nbytes for i, h in history)
        t_bar = np.where(t < HIT, 2 * (t - target), 0.0)
        r_bar = np.zeros(3)
        for idx, tk in reversed(history):
            px, py, pz = tk * dx[idx], tk * dy[idx], tk * dz[idx]
            dists = np.stack([np.sqrt((px - c[0]) ** 2 + (py - c[1]) ** 2 + (pz - c[2]) ** 2)
                              for c in CENTERS])
            values = dists - radii[:, None]
            k = np.argmin(values, axis=0)          # ties go to the first sphere, as np.minimum
            c = CENTERS[k].T
            norm = dists[k, np.arange(idx.size)]
            grad_t = ((px - c[0]) * dx[idx] + (py - c[1]) * dy[idx] + (pz - c[2]) * dz[idx]) / norm
            g = t_bar[idx]
            np.subtract.at(r_bar, k, g)            # t' = t + (|p - c_k| - r_k)
            t_bar[idx] = g * (1.0 + grad_t)
        return r_bar

    state = {}
    return Impl(lambda: march(False)[0], gradient, lambda: state["bytes"])


def dloop(d, retrace=True):
    """retrace=False: the `dloop-once` row (docs/guide.md, section 7)."""
    dl, xp, tol_ = peers.dloop(), peers.array_module(), tol(d)
    dx, dy, dz, target = (peers.on_device(d[k]) for k in ("dx", "dy", "dz", "target"))

    def render(radii):
        def cond(c):
            t, k = c
            dist = sdf(t, dx, dy, dz, radii, np.sqrt, np.minimum)
            return (dist > tol_) & (t < FAR) & (k < CAP)

        def body(c):
            t, k = c
            return t + sdf(t, dx, dy, dz, radii, np.sqrt, np.minimum), k + 1

        t, _ = dl.while_loop(cond, body, (xp.zeros_like(dx), xp.zeros(dx.shape, xp.int64)))
        return t

    return peers.dloop_impl(dl.jit(render, retrace=retrace),
                            dl.grad(lambda r: loss_of(render(r), target, np.where),
                                    retrace=retrace),
                            peers.on_device(d["radii"]))


def jax_masked(d):
    jax = peers.jax()
    jnp, lax = jax.numpy, jax.lax
    dx, dy, dz, target = (jnp.asarray(d[k]) for k in ("dx", "dy", "dz", "target"))
    tol_ = tol(d)

    def render(radii):
        def body(i, t):
            dist = sdf(t, dx, dy, dz, radii, jnp.sqrt, jnp.minimum)
            return jnp.where((dist > tol_) & (t < FAR), t + dist, t)
        return lax.fori_loop(0, CAP, body, jnp.zeros_like(dx))

    fwd = jax.jit(render)
    grad = jax.jit(jax.grad(lambda r: loss_of(render(r), target, jnp.where)))
    r = jnp.asarray(d["radii"])
    return Impl(lambda: fwd(r).block_until_ready(), lambda: grad(r).block_until_ready())


def torch_eager(d):
    torch, tol_ = peers.torch(), tol(d)
    dx, dy, dz, target = (peers.torch_tensor(d[k]) for k in ("dx", "dy", "dz", "target"))

    def render(radii):
        t = torch.zeros_like(dx)
        for _ in range(CAP):
            dist = sdf(t, dx, dy, dz, radii, torch.sqrt, torch.minimum)
            t = torch.where((dist > tol_) & (t < FAR), t + dist, t)
        return t

    return peers.torch_impl(render, lambda t: loss_of(t, target, torch.where), d["radii"])


def _drjit(d, mode):
    dr, Float, Int32 = peers.drjit_types(d["dx"])
    dx, dy, dz, target = (Float(d[k]) for k in ("dx", "dy", "dz", "target"))
    kw, tol_ = peers.drjit_loop_options(mode, CAP), tol(d)
    # dr.minimum emits llvm.minimum.f64, which the x86 backend of the LLVM it loads here cannot
    # select ("Cannot select: fminimum"); a select is the same minimum for finite values.
    minimum = lambda a, b: dr.select(a < b, a, b)  # noqa: E731

    def render(radii):
        def cond(t, k, radii):
            dist = sdf(t, dx, dy, dz, radii, dr.sqrt, minimum)
            return (dist > tol_) & (t < FAR) & (k < CAP)

        def body(t, k, radii):
            return t + sdf(t, dx, dy, dz, radii, dr.sqrt, minimum), k + 1, radii

        t, _, _ = dr.while_loop((dr.zeros(Float, dr.width(dx)), Int32(0), radii), cond, body,
                                **kw)
        return t

    def gradient():
        radii = [Float(r) for r in d["radii"]]
        for r in radii:
            dr.enable_grad(r)
        depth = render(radii)
        dr.backward(dr.sum(dr.select(depth < HIT, (depth - target) ** 2, 0.0)))
        grads = [dr.grad(r) for r in radii]
        dr.eval(grads)
        dr.sync_thread()
        return lambda: np.array([g[0] for g in grads])

    def forward():
        t = render([Float(r) for r in d["radii"]])
        dr.eval(t)
        dr.sync_thread()      # both backends run kernels asynchronously

    return Impl(forward, gradient)


def warp(d):
    wp = peers.warp(d["dx"])
    f64 = wp.float64

    @wp.func
    def sphere(t: f64, x: f64, y: f64, z: f64, cx: f64, cy: f64, cz: f64, r: f64):
        return wp.sqrt((t * x - cx) * (t * x - cx) + (t * y - cy) * (t * y - cy) +
                       (t * z - cz) * (t * z - cz)) - r

    @wp.func
    def field(t: f64, x: f64, y: f64, z: f64, c: wp.array(dtype=f64),
              radii: wp.array(dtype=f64)):
        best = sphere(t, x, y, z, c[0], c[1], c[2], radii[0])
        best = wp.min(best, sphere(t, x, y, z, c[3], c[4], c[5], radii[1]))
        return wp.min(best, sphere(t, x, y, z, c[6], c[7], c[8], radii[2]))

    @wp.kernel
    def render(dx: wp.array(dtype=f64), dy: wp.array(dtype=f64), dz: wp.array(dtype=f64),
               c: wp.array(dtype=f64), radii: wp.array(dtype=f64), target: wp.array(dtype=f64),
               loss: wp.array(dtype=f64)):
        i = wp.tid()
        t = f64(0.0)
        k = int(0)
        dist = field(t, dx[i], dy[i], dz[i], c, radii)
        while dist > f64(TOL) and t < f64(FAR) and k < CAP:
            t = t + dist
            k = k + 1
            dist = field(t, dx[i], dy[i], dz[i], c, radii)
        if t < f64(HIT):
            wp.atomic_add(loss, 0, (t - target[i]) * (t - target[i]))

    arrays = [wp.array(d[k], dtype=f64) for k in ("dx", "dy", "dz")]
    arrays.append(wp.array(CENTERS.ravel(), dtype=f64))
    target = wp.array(d["target"], dtype=f64)
    size = d["dx"].size

    def run(requires_grad):
        radii = wp.array(d["radii"], dtype=f64, requires_grad=requires_grad)
        loss = wp.zeros(1, dtype=f64, requires_grad=requires_grad)
        return radii, loss

    def forward():
        radii, loss = run(False)
        wp.launch(render, dim=size, inputs=[*arrays, radii, target, loss])
        wp.synchronize()

    def gradient():
        radii, loss = run(True)
        tape = wp.Tape()
        with tape:
            wp.launch(render, dim=size, inputs=[*arrays, radii, target, loss])
        tape.backward(loss=loss)
        wp.synchronize()
        return radii.grad.numpy

    return Impl(forward, gradient)


SYSTEMS = {"numpy-adjoint": numpy_adjoint, "dloop": dloop,
           "dloop-once": partial(dloop, retrace=False), "jax-masked": jax_masked,
           "torch-eager": torch_eager, "drjit-evaluated": partial(_drjit, mode="evaluated"),
           "drjit-symbolic": partial(_drjit, mode="symbolic"), "warp": warp}
