"""A fixed mix of grad / vjp / jit calls of different shapes on the CPU backend, shared by
the thread, fork and spawn tests (a spawned process imports it by name)."""

import os
import time

import numpy as np

import dloop as dl

SIZES = (7, 600, 1500, 2500)      # below and above the CPU backend's parallel threshold


def _data(k):
    rng = np.random.default_rng(1000 + k)
    size = SIZES[k % len(SIZES)]
    return rng.random(size) + 0.1, rng.integers(0, 40, size=size)


def _damped(x, n):
    return dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x)


def _halving(x):
    return dl.while_loop(lambda v: v > 0.01, lambda v: v * 0.5 + 0.001 * x, x * 10.0)


def _collective(x):
    return dl.fori_loop(0, 5, lambda i, v: v - 0.1 * (v - v.mean()) * np.cos(v), x)


def run(k):
    """Call k of the mix: the result's bytes."""
    x, n = _data(k)
    kind = k % 6
    if kind == 0:
        out = dl.grad(lambda x: (_damped(x, n) ** 2).sum())(x)
    elif kind == 1:
        out = dl.grad(lambda x: (_halving(x) * x).sum())(x)
    elif kind == 2:
        value, pullback = dl.vjp(lambda x: _damped(x, n) * _halving(x), x)
        out = np.concatenate([value, pullback(np.cos(x))[0]])
    elif kind == 3:
        out = dl.jit(lambda x: _damped(x, n) + _collective(x))(x)
    elif kind == 4:
        out = dl.grad(lambda x: (_collective(x) ** 2).sum())(x)
    else:
        value, g = dl.value_and_grad(lambda x: np.sin(_damped(x, n + 3)).sum())(x)
        out = np.concatenate([[value], g])
    return np.asarray(out).tobytes()


CALLS = 24


def references():
    return [run(k) for k in range(CALLS)]


def wait_child(pid, seconds):
    """A forked child's exit code, or None where it has not ended within `seconds` (a hang,
    what the fork tests look for): then it is killed."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None
