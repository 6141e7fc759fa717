"""The overflow contract: a fixed capacity too small for the loop raises AdstackOverflowError
naming the loop's line; nothing wrong is returned, and the process is left healthy."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dloop as dl
from helpers import assert_close


def _loss(x, n):
    return dl.fori_loop(0, n, lambda i, v: v * 0.9 + np.sin(v) * 0.1, x).sum()  # LOOP-LINE


def _loop_line():
    with open(__file__) as f:
        for k, text in enumerate(f, 1):
            if text.rstrip().endswith("# LOOP-LINE"):
                return f"{__file__}:{k}"


def test_fixed_capacity_too_small_raises_then_recovers(backend):
    x = np.linspace(0.1, 1.0, 50)
    n = np.full(50, 12)
    exact = dl.grad(lambda x: _loss(x, n))(x)
    dl.config.update("adstack_capacity", 5)
    with pytest.raises(dl.AdstackOverflowError) as e:
        dl.grad(lambda x: _loss(x, n))(x)
    message = str(e.value)
    assert _loop_line() in message
    assert "holds at most 5 entries" in message and "attempted 12 pushes" in message
    assert "adstack_capacity" in message
    dl.config.update("adstack_capacity", 12)        # exactly enough: no error
    assert_close(dl.grad(lambda x: _loss(x, n))(x), exact, rtol=0)
    dl.config.update("adstack_capacity", None)
    assert_close(dl.grad(lambda x: _loss(x, n))(x), exact, rtol=0)


def test_many_threads_overflowing_give_one_error(backend):
    size = 100_000 if backend != "interpret" else 20_000
    x = np.linspace(0.0, 1.0, size)
    dl.config.update("adstack_capacity", 2)
    with pytest.raises(dl.AdstackOverflowError) as e:
        dl.grad(lambda x: _loss(x, 7))(x)
    assert "attempted 7 pushes" in str(e.value)
    dl.config.update("adstack_capacity", None)
    g = dl.grad(lambda x: _loss(x, 7))(x)
    assert np.isfinite(g).all()


def test_nested_loop_overflow_in_reverse_sweep(backend):
    x = np.array([0.5, 0.7])
    n = np.array([3, 4])

    def loss(x):
        def outer(i, v):
            return dl.fori_loop(0, 6, lambda k, w: w * 0.99, v) * 0.5 + 0.1
        return dl.fori_loop(0, n, outer, x).sum()

    dl.config.update("adstack_capacity", 4)
    with pytest.raises(dl.AdstackOverflowError, match="attempted 6 pushes"):
        dl.grad(loss)(x)


def test_overflowing_child_process_exits_cleanly(backend):
    code = textwrap.dedent(f"""
        import numpy as np, dloop as dl
        dl.config.update("backend", "{backend}")
        dl.config.update("adstack_capacity", 1)
        x = np.linspace(0, 1, 1000)
        out, f_vjp = dl.vjp(lambda x: dl.fori_loop(0, 50, lambda i, v: v * 0.5, x), x)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    # The overflow raises in the child; a child that overflows while exiting does not abort.
    assert "AdstackOverflowError" in proc.stderr
    code_exit = textwrap.dedent(f"""
        import numpy as np, dloop as dl
        dl.config.update("backend", "{backend}")
        dl.config.update("adstack_capacity", 1)
        x = np.linspace(0, 1, 1000)
        try:
            dl.grad(lambda x: dl.fori_loop(0, 50, lambda i, v: v * 0.5, x).sum())(x)
        except dl.AdstackOverflowError:
            pass
    """)
    proc = subprocess.run([sys.executable, "-c", code_exit], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
