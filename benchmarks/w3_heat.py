"""W3, collective loop: a 1-D heat equation with a cubic reaction term, stepped with roll for
a step count held in data; the gradient of sum(u_final ** 2) with respect to u0."""

from functools import partial

import numpy as np

import peers
from harness import Impl

NAME = "W3 collective heat"
DT, REACT = 0.2, 0.05


def cases(scale):
    size, steps = {"quick": (256, 200), "full": (4096, 1000), "gpu": (10 ** 6, 200),
                   "tiny": (256, 50)}[scale]
    return [(f"grid {size:,}, {steps} steps", size, steps)]


def make_data(size, steps, rng):
    u0 = 1.0 + 0.5 * np.sin(np.linspace(0, 6 * np.pi, size, endpoint=False)) + \
        0.1 * rng.random(size)
    return {"u0": u0, "steps": np.array(steps)}


def step(u, roll):
    return u + DT * (roll(u, 1) + roll(u, -1) - 2 * u) - REACT * u ** 3


def numpy_adjoint(d):
    u0, steps = d["u0"], int(d["steps"])

    def forward():
        u = u0
        for _ in range(steps):
            u = step(u, np.roll)
        return u

    def gradient():
        u, history = u0, []
        for _ in range(steps):
            history.append(u)
            u = step(u, np.roll)
        state["bytes"] = sum(h.nbytes for h in history)
        g = 2 * u
        for h in reversed(history):
            g = g * (1 - 2 * DT - 3 * REACT * h ** 2) + DT * (np.roll(g, -1) + np.roll(g, 1))
        return g

    state = {}
    return Impl(forward, gradient, lambda: state["bytes"])


def dloop(d, retrace=True):
    """retrace=False: the `dloop-once` row (docs/guide.md, section 7)."""
    dl, steps = peers.dloop(), d["steps"]

    def simulate(u):
        return dl.fori_loop(0, steps, lambda i, u: step(u, np.roll), u)

    return peers.dloop_impl(dl.jit(simulate, retrace=retrace),
                            dl.grad(lambda u: (simulate(u) ** 2).sum(), retrace=retrace),
                            peers.on_device(d["u0"]))


def _jax(d, checkpoint):
    jax = peers.jax()
    jnp, lax = jax.numpy, jax.lax
    u0, steps = jnp.asarray(d["u0"]), int(d["steps"])   # JAX needs the step count static
    body = lambda i, u: step(u, jnp.roll)  # noqa: E731
    body = jax.checkpoint(body) if checkpoint else body

    def simulate(u):
        return lax.fori_loop(0, steps, body, u)

    fwd, grad = jax.jit(simulate), jax.jit(jax.grad(lambda u: (simulate(u) ** 2).sum()))
    return Impl(lambda: fwd(u0).block_until_ready(), lambda: grad(u0).block_until_ready())


def jax_scan(d):
    return _jax(d, False)


def jax_checkpoint(d):
    return _jax(d, True)


def torch_eager(d):
    torch = peers.torch()
    steps = int(d["steps"])

    def simulate(u):
        for _ in range(steps):
            u = step(u, lambda v, s: torch.roll(v, s))
        return u

    return peers.torch_impl(simulate, lambda u: (u ** 2).sum(), d["u0"])


def warp(d):
    wp = peers.warp(d["u0"])
    f64 = wp.float64
    size, steps = d["u0"].size, int(d["steps"])

    @wp.kernel
    def advance(u: wp.array(dtype=f64), out: wp.array(dtype=f64), n: int):
        i = wp.tid()
        left = u[(i - 1 + n) % n]
        right = u[(i + 1) % n]
        c = u[i]
        out[i] = c + f64(DT) * (left + right - f64(2.0) * c) - f64(REACT) * c * c * c

    @wp.kernel
    def square_sum(u: wp.array(dtype=f64), loss: wp.array(dtype=f64)):
        i = wp.tid()
        wp.atomic_add(loss, 0, u[i] * u[i])

    def run(requires_grad):
        states = [wp.array(d["u0"], dtype=f64, requires_grad=requires_grad)]
        for _ in range(steps):
            states.append(wp.zeros(size, dtype=f64, requires_grad=requires_grad))
            wp.launch(advance, dim=size, inputs=[states[-2], states[-1], size])
        return states

    def forward():
        run(False)
        wp.synchronize()

    def gradient():
        tape = wp.Tape()
        with tape:
            states = run(True)
            loss = wp.zeros(1, dtype=f64, requires_grad=True)
            wp.launch(square_sum, dim=size, inputs=[states[-1], loss])
        tape.backward(loss=loss)
        wp.synchronize()
        return states[0].grad.numpy

    return Impl(forward, gradient, lambda: (steps + 1) * size * 8 * 2)


SYSTEMS = {"numpy-adjoint": numpy_adjoint, "dloop": dloop,
           "dloop-once": partial(dloop, retrace=False), "jax-scan": jax_scan,
           "jax-checkpoint": jax_checkpoint, "torch-eager": torch_eager, "warp": warp}
