"""Importing optional peers: each missing one becomes a Skip with the reason."""

import importlib

import numpy as np

from harness import Impl, Skip


def need(module):
    try:
        return importlib.import_module(module)
    except Exception as e:
        raise Skip(f"{module} not installed ({type(e).__name__})") from None


def jax():
    jax = need("jax")
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    return jax


def quadrants():
    qd = need("quadrants")
    if not getattr(qd, "_dloop_bench_ready", False):
        qd.init(arch=qd.cpu, default_fp=qd.f64, ad_stack_experimental_enabled=True,
                log_level=qd.ERROR)
        qd._dloop_bench_ready = True
    return qd


def warp():
    wp = need("warp")
    wp.config.quiet = True
    wp.init()
    return wp


def torch_impl(run, loss, array):
    """An Impl for PyTorch eager: run(tensor) -> result; the gradient of loss(result) with
    respect to the tensor made from `array`."""
    torch = need("torch")

    def forward():
        with torch.no_grad():
            return run(torch.from_numpy(array))

    def gradient():
        x = torch.from_numpy(array).requires_grad_(True)
        loss(run(x)).backward()
        return x.grad.numpy()

    return Impl(forward, gradient)


def drjit_loop_options(mode, max_iterations):
    """dr.while_loop's keywords: symbolic mode needs a bound on the iterations to reverse."""
    return {"mode": mode, **({"max_iterations": max_iterations} if mode == "symbolic" else {})}


def drjit_impl(run, arrays):
    """An Impl for Dr.Jit: run(*Float64 arrays) -> the loss's per-element terms; the gradient
    is taken with respect to the first array."""
    dr = need("drjit")
    from drjit.llvm.ad import Float64

    def forward():
        out = run(*[Float64(a) for a in arrays])
        dr.eval(out)
        dr.sync_thread()      # the LLVM backend runs kernels asynchronously

    def gradient():
        inputs = [Float64(a) for a in arrays]
        dr.enable_grad(inputs[0])
        dr.backward(dr.sum(run(*inputs)))
        return np.array(dr.grad(inputs[0]))

    return Impl(forward, gradient)
