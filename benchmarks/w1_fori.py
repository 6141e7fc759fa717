"""W1, per-element fori: v <- 0.95 v + 0.1 x sin(v), n[j] times for element j; the gradient
of sum(v) with respect to x. Trip counts uniform in [0, 200), or skewed (1% at 1,000, the
rest at 10)."""

from functools import partial

import numpy as np

import peers
from harness import Impl

NAME = "W1 per-element fori"


def cases(scale):
    """scale: "quick", "full" (CPU), "gpu", or "tiny" (the GPU run's cases, shrunk)."""
    n, large = {"quick": (20_000, None), "full": (100_000, None), "gpu": (10 ** 6, 10 ** 7),
                "tiny": (2_000, 5_000)}[scale]
    return [(f"N={n:,} uniform", n, "uniform"), (f"N={n:,} skewed", n, "skewed")] + \
        ([(f"N={large:,} uniform", large, "uniform")] if large else [])


def make_data(n, kind, rng):
    x = rng.random(n)
    if kind == "uniform":
        trips = rng.integers(0, 200, size=n)
    else:
        trips = np.full(n, 10)
        trips[rng.choice(n, n // 100, replace=False)] = 1000
    return {"x": x, "n": trips}


def numpy_adjoint(d):
    """A careful hand-written adjoint: compacted history of the active elements only."""
    x, n = d["x"], d["n"]
    order = np.argsort(-n, kind="stable")          # active elements are a prefix each step
    xs, ns = x[order], n[order]
    counts = np.searchsorted(-ns, -np.arange(int(n.max()) + 1), side="right")[1:]

    def forward():
        v = xs.copy()
        for i, k in enumerate(counts):
            v[:k] = v[:k] * 0.95 + np.sin(v[:k]) * xs[:k] * 0.1
        out = np.empty_like(v)
        out[order] = v
        return out

    def gradient():
        v = xs.copy()
        history = []
        for k in counts:
            history.append(v[:k].copy())
            v[:k] = v[:k] * 0.95 + np.sin(v[:k]) * xs[:k] * 0.1
        state["bytes"] = sum(h.nbytes for h in history)
        v_bar, x_bar = np.ones_like(v), np.zeros_like(v)
        for h in reversed(history):
            k = h.size
            x_bar[:k] += v_bar[:k] * np.sin(h) * 0.1
            v_bar[:k] *= 0.95 + np.cos(h) * xs[:k] * 0.1
        g = np.empty_like(v)
        g[order] = x_bar + v_bar
        return g

    state = {}
    return Impl(forward, gradient, lambda: state["bytes"])


def tape_bytes(d):
    """The tape written once and read once: each element's trips plus two values (its input
    and output), at the data's precision."""
    return int(np.sum(d["n"] + 2)) * d["x"].itemsize


def dloop(d, retrace=True):
    """retrace=False: the `dloop-once` row (docs/guide.md, section 7)."""
    dl = peers.dloop()
    x, n = peers.on_device(d["x"]), peers.on_device(d["n"])

    def simulate(x):
        return dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x)

    return peers.dloop_impl(dl.jit(simulate, retrace=retrace),
                            dl.grad(lambda x: simulate(x).sum(), retrace=retrace), x)


def _jax(d, checkpoint):
    jax = peers.jax()
    jnp, lax = jax.numpy, jax.lax
    x, n = jnp.asarray(d["x"]), jnp.asarray(d["n"])
    longest = int(d["n"].max())

    def one(xj, nj):            # a scalar loop, masked to the longest trip count
        def body(i, v):
            return jnp.where(i < nj, v * 0.95 + jnp.sin(v) * xj * 0.1, v)
        return lax.fori_loop(0, longest, jax.checkpoint(body) if checkpoint else body, xj)

    simulate = jax.vmap(one)
    fwd = jax.jit(simulate)
    grad = jax.jit(jax.grad(lambda x: simulate(x, n).sum()))
    return Impl(lambda: fwd(x, n).block_until_ready(), lambda: grad(x).block_until_ready())


def jax_masked(d):
    return _jax(d, False)


def jax_checkpoint(d):
    return _jax(d, True)


def torch_eager(d):
    torch = peers.torch()
    n = peers.torch_tensor(d["n"])
    longest = int(d["n"].max())

    def simulate(x):
        v = x
        for i in range(longest):
            v = torch.where(i < n, v * 0.95 + torch.sin(v) * x * 0.1, v)
        return v

    return peers.torch_impl(simulate, lambda v: v.sum(), d["x"])


def _drjit(d, mode):
    dr, _, Int32 = peers.drjit_types(d["x"])
    n = Int32(d["n"].astype(np.int32))
    kw = peers.drjit_loop_options(mode, int(d["n"].max()))

    def run(x):
        i, v, _, _ = dr.while_loop((Int32(0), type(x)(x), x, n), lambda i, v, x, n: i < n,
                                   lambda i, v, x, n: (i + 1, v * 0.95 + dr.sin(v) * x * 0.1,
                                                       x, n), **kw)
        return v

    return peers.drjit_impl(run, [d["x"]])


def quadrants(d):
    qd, fp = peers.quadrants(d["x"])
    size = d["x"].size
    x = qd.field(fp, shape=size, needs_grad=True)
    n = qd.field(qd.i32, shape=size)
    out = qd.field(fp, shape=size)
    loss = qd.field(fp, shape=(), needs_grad=True)

    @qd.func
    def one(t):
        v = x[t]
        for _ in range(n[t]):
            v = v * 0.95 + qd.sin(v) * x[t] * 0.1
        return v

    @qd.kernel
    def simulate():
        for t in range(size):
            out[t] = one(t)

    @qd.kernel
    def total():
        for t in range(size):
            loss[None] += one(t)

    x.from_numpy(d["x"])
    n.from_numpy(d["n"].astype(np.int32))

    def forward():
        simulate()
        qd.sync()

    def gradient():
        with qd.ad.Tape(loss=loss):
            total()
        qd.sync()
        return x.grad.to_numpy

    return Impl(forward, gradient)


def warp(d):
    wp = peers.warp(d["x"])
    f64 = wp.float64

    @wp.kernel
    def simulate(x: wp.array(dtype=f64), n: wp.array(dtype=wp.int32), out: wp.array(dtype=f64)):
        t = wp.tid()
        v = x[t]
        for _ in range(n[t]):
            v = v * f64(0.95) + wp.sin(v) * x[t] * f64(0.1)
        out[t] = v

    size = d["x"].size
    n = wp.array(d["n"].astype(np.int32), dtype=wp.int32)

    def forward():
        x = wp.array(d["x"], dtype=f64)
        out = wp.zeros(size, dtype=f64)
        wp.launch(simulate, dim=size, inputs=[x, n, out])
        wp.synchronize()

    def gradient():
        x = wp.array(d["x"], dtype=f64, requires_grad=True)
        out = wp.zeros(size, dtype=f64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(simulate, dim=size, inputs=[x, n, out])
        tape.backward(grads={out: wp.ones(size, dtype=f64)})
        wp.synchronize()
        return x.grad.numpy

    return Impl(forward, gradient)


SYSTEMS = {"numpy-adjoint": numpy_adjoint, "dloop": dloop,
           "dloop-once": partial(dloop, retrace=False), "jax-masked": jax_masked,
           "jax-checkpoint": jax_checkpoint, "torch-eager": torch_eager,
           "drjit-evaluated": partial(_drjit, mode="evaluated"),
           "drjit-symbolic": partial(_drjit, mode="symbolic"),
           "quadrants": quadrants, "warp": warp}
