"""A loose device on the interpreter, as Vulkan allows and NVIDIA's driver is:
rough_division moves every `div` (and `sqrt`) result a few ulps (OpFDiv: 2.5 ulps in float32;
float64 only as precise as float32), by a hash of the exact result's bits, so every run moves
the same values the same way, in both directions; fuse contracts products into adds;
loose_device runs whole programs so, with the transcendentals from kernel/mathlib.py."""

import contextlib
import dataclasses

import numpy as np

from dloop import api
from dloop.backends.base import Caps, get_backend
from dloop.backends.interpret import run as interpret_run
from dloop.backends.interpret.launch import InterpretBackend
from dloop.kernel import core, kir
from dloop.kernel.legalize import legalize


def nudge(x, ulps):
    """x moved by k ulps, 1 <= |k| <= ulps, k from x's bits; zeros, infinities and NaN stay."""
    x = np.asarray(x)
    width = np.dtype(f"u{x.dtype.itemsize}")
    bits = x.view(width).astype(np.uint64)
    h = (bits * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(24)
    k = (h % np.uint64(ulps)).astype(np.int64) + 1
    k = np.where((h >> np.uint64(20)) & np.uint64(1), k, -k)
    sign_bit = np.uint64(1) << np.uint64(8 * x.dtype.itemsize - 1)
    magnitude = (bits & ~sign_bit).astype(np.int64)
    top = np.finfo(x.dtype).max.view(width).astype(np.int64)
    moved = np.clip(magnitude + k, 1, top).astype(np.uint64) | (bits & sign_bit)
    out = moved.astype(width).view(x.dtype)
    keep = (x == 0) | ~np.isfinite(x)
    return np.where(keep, x, out)


@contextlib.contextmanager
def rough_division(ulps=3, ops=("div", "sqrt")):
    """Inside: the interpreter's float `ops` are `ulps` off (see nudge)."""
    exact = interpret_run.evaluate

    def evaluate(op, args, params):
        out = exact(op, args, params)
        if op in ops and np.issubdtype(np.asarray(out).dtype, np.floating):
            return nudge(out, ulps)
        return out
    interpret_run.evaluate = evaluate
    try:
        yield
    finally:
        interpret_run.evaluate = exact


# -- contraction: what a driver free to fuse a * b + c into one rounding computes --

def _two_prod(a, b):
    p = a * b
    split = 2.0 ** ((np.finfo(a.dtype).nmant + 2) // 2) + 1.0
    c = a * split
    ah = c - (c - a)
    c = b * split
    bh = c - (c - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def fma(a, b, c):
    """a b + c rounded once (to within the last bit in rare double-rounding cases)."""
    with np.errstate(all="ignore"):
        if a.dtype == np.float32:
            wide = a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)
            return wide.astype(np.float32)
        p, e = _two_prod(a, b)
        s = p + c
        bb = s - p
        t = (p - (s - bb)) + (c - bb)
        out = s + (t + e)
        return np.where(np.isfinite(out), out, p + c)


FUSED = {"fma_add": lambda a, b, c, out: fma(a, b, c),
         "fma_sub": lambda a, b, c, out: fma(a, b, -c),
         "fma_rsub": lambda a, b, c, out: fma(-a, b, c)}


def fuse(kernel):
    """kernel with every float add or subtract of a product contracted into one fused op
    (the product stays for its other uses), as a driver may do without NoContraction."""
    products = {}

    def block(stmts):
        out = []
        for s in stmts:
            if isinstance(s, kir.Assign) and s.out.dtype.kind == "f":
                if s.op == "mul":
                    products[s.out] = s.args
                elif s.op in ("add", "sub") and any(a in products for a in s.args):
                    first = s.args[0] in products
                    m, c = (s.args[0], s.args[1]) if first else (s.args[1], s.args[0])
                    op = "fma_add" if s.op == "add" else ("fma_sub" if first else "fma_rsub")
                    s = kir.Assign(s.out, op, (*products[m], c), s.src)
            for inner in ("body", "cond_body"):
                if hasattr(s, inner):
                    s = dataclasses.replace(s, **{inner: block(getattr(s, inner))})
            out.append(s)
        return out
    return dataclasses.replace(kernel, body=block(kernel.body))


@contextlib.contextmanager
def loose_device(ulps=3, fused=True):
    """Inside: the interpreter backend legalizes like a Vulkan device with float64 (every
    transcendental from kernel/mathlib.py, caps.rounded_division False), optionally fuses
    products into adds (fuse), and runs divisions and square roots `ulps` off."""
    caps = Caps(native_math=frozenset(), rounded_division=False)
    plain = InterpretBackend.legalize

    def loose(self, kernel):
        kernel = legalize(kernel, caps)
        return fuse(kernel) if fused else kernel
    def forget():         # programs and kernels compiled in the other mode
        api._PROGRAMS.clear()
        get_backend("interpret")._artifacts.clear()
    forget()
    InterpretBackend.legalize = loose
    core.EVALUATE.update(FUSED)
    try:
        with rough_division(ulps) if ulps else contextlib.nullcontext():
            yield
    finally:
        InterpretBackend.legalize = plain
        for k in FUSED:
            core.EVALUATE.pop(k)
        forget()
