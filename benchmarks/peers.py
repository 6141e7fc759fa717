"""Importing optional peers: each missing one becomes a Skip with the reason."""

import importlib

from harness import Skip


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
