"""Importing optional peers, each on the device harness.SETTINGS names and in the inputs'
precision: a missing one becomes a Skip with the reason. Every Impl built here synchronizes
its device before returning and leaves the copy to NumPy to the harness, untimed."""

import importlib

import numpy as np

import harness
from harness import Impl, Skip


def need(module):
    try:
        return importlib.import_module(module)
    except Exception as e:
        raise Skip(f"{module} not installed ({type(e).__name__})") from None


def on_gpu():
    return harness.SETTINGS.device == "cuda"


def single(array):
    return np.asarray(array).dtype == np.float32


# dloop: inputs as CuPy arrays on the GPU (its CUDA backend returns CuPy arrays).

def dloop():
    import dloop as dl
    if harness.SETTINGS.backend is not None:
        dl.config.update("backend", harness.SETTINGS.backend)
    return dl


def array_module():
    return need("cupy") if on_gpu() else np


def on_device(array):
    """An input array on the device; 0-d values (step counts) stay on the host."""
    return array_module().asarray(array) if np.ndim(array) else array


def synchronize():
    if on_gpu():
        need("cupy").cuda.get_current_stream().synchronize()


def synced(fn):
    def call():
        out = fn()
        synchronize()
        return out
    return call


def dloop_impl(forward, gradient, *args):
    """dloop's Impl: forward(*args) and gradient(*args), with args already on the device."""
    dl = dloop()
    return Impl(synced(lambda: forward(*args)), synced(lambda: gradient(*args)),
                lambda: dl.memory_stats()["adstack_bytes_used"])


# JAX: float64 enabled, so a float32 input stays float32 (Python constants are weak).

def jax():
    jax = need("jax")
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cuda" if on_gpu() else "cpu")
    if on_gpu() and jax.devices()[0].platform != "gpu":
        raise Skip(f"JAX found no GPU ({jax.devices()[0].platform})")
    return jax


# PyTorch eager.

def torch():
    torch = need("torch")
    if on_gpu() and not torch.cuda.is_available():
        raise Skip("this PyTorch build has no CUDA")
    return torch


def torch_tensor(array):
    torch_ = torch()
    return torch_.from_numpy(np.ascontiguousarray(array)).to("cuda" if on_gpu() else "cpu")


def torch_sync():
    if on_gpu():
        torch().cuda.synchronize()


def torch_impl(run, loss, array):
    """An Impl for PyTorch eager: run(tensor) -> result; the gradient of loss(result) with
    respect to the tensor made from `array` (on the device once, outside the timing)."""
    torch_ = torch()
    base = torch_tensor(array)

    def forward():
        with torch_.no_grad():
            out = run(base)
        torch_sync()
        return out

    def gradient():
        x = base.detach().requires_grad_(True)      # a fresh leaf: no accumulated grad
        loss(run(x)).backward()
        torch_sync()
        return x.grad

    return Impl(forward, gradient)


# Dr.Jit: drjit.cuda.ad on the GPU, drjit.llvm.ad on the CPU.

def drjit_types(array):
    """(drjit, the float type for `array`'s precision, Int32) on the chosen device."""
    dr = need("drjit")
    mod = importlib.import_module("drjit.cuda.ad" if on_gpu() else "drjit.llvm.ad")
    if on_gpu() and not dr.has_backend(dr.JitBackend.CUDA):
        raise Skip("Dr.Jit found no CUDA device")
    return dr, mod.Float32 if single(array) else mod.Float64, mod.Int32


def drjit_loop_options(mode, max_iterations):
    """dr.while_loop's keywords: symbolic mode needs a bound on the iterations to reverse."""
    return {"mode": mode, **({"max_iterations": max_iterations} if mode == "symbolic" else {})}


def drjit_impl(run, arrays):
    """An Impl for Dr.Jit: run(*float arrays) -> the loss's per-element terms; the gradient
    is taken with respect to the first array."""
    dr, Float, _ = drjit_types(arrays[0])
    base = [Float(a) for a in arrays]
    dr.eval(base)               # the upload happens here, not in the first timed call
    dr.sync_thread()

    def forward():
        out = run(*base)
        dr.eval(out)
        dr.sync_thread()      # both backends run kernels asynchronously

    def gradient():
        inputs = [Float(base[0]), *base[1:]]
        dr.enable_grad(inputs[0])
        dr.backward(dr.sum(run(*inputs)))
        grad = dr.grad(inputs[0])
        dr.eval(grad)
        dr.sync_thread()
        return grad

    return Impl(forward, gradient)


# Quadrants: one init per process (each peer runs in its own), CUDA arch on the GPU.

def quadrants(array):
    """(quadrants, its float type for `array`'s precision)."""
    qd = need("quadrants")
    fp = qd.f32 if single(array) else qd.f64
    if not getattr(qd, "_dloop_bench_ready", False):
        qd.init(arch=qd.cuda if on_gpu() else qd.cpu, default_fp=fp,
                ad_stack_experimental_enabled=True, log_level=qd.ERROR)
        qd._dloop_bench_ready = True
    return qd, fp


def warp(array):
    """Warp on the CPU in float64 only: it is not among the GPU peers, its gradients through
    data-dependent loops being wrong already (see docs/benchmarks.md)."""
    if single(array):
        raise Skip("this benchmark's Warp kernels are float64 only")
    wp = need("warp")
    wp.config.quiet = True
    wp.init()
    return wp
