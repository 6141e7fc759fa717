"""Values a taped forward kernel passes only to its reverse kernel, which runs the same element
order, stay in slot order (runtime/program.py): written and read at the thread's slot, never
seen by the host in that order."""

import dataclasses

import numpy as np
import pytest

import dloop as dl
from dloop.backends.base import get_backend
from dloop.kernel import kir
from dloop.runtime import execute, program
from helpers import assert_close

N = 70_000      # past parallel.MIN_CHUNK: host sizing orders the elements too


def _data():
    rng = np.random.default_rng(5)
    return rng.uniform(-1.0, 1.0, N), rng.integers(0, 60, N)


def _closed_form(x, trips):
    """v <- 0.95 v + 0.1 x sin v, trips[i] times from v = x, and d v / d x by forward mode."""
    v, dv = x.copy(), np.ones_like(x)
    for k in range(int(trips.max())):
        live = k < trips
        v, dv = (np.where(live, 0.95 * v + 0.1 * x * np.sin(v), v),
                 np.where(live, (0.95 + 0.1 * x * np.cos(v)) * dv + 0.1 * np.sin(v), dv))
    return v, dv


def _host(a):
    """A NumPy copy of a NumPy or device array (CuPy's .get)."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _slot_accesses(kernel):
    """(buffer, 'load' | 'store') of every access indexed by the kernel's slot."""
    return [(s.buf, type(s).__name__.lower()) for s in kir.statements(kernel.body)
            if isinstance(s, (kir.Load, kir.Store)) and kernel.slot is not None
            and s.index is kernel.slot]


def _kernels_and_orders(fn, monkeypatch, *args):
    """fn(*args), the kernels compiled and the element orders chosen, with elements ordered
    wherever the backend can (sorting_pays would keep Vulkan's in element order)."""
    be = get_backend(dl.config.backend)
    monkeypatch.setattr(be, "caps", dataclasses.replace(be.caps, sort_cost=0))
    kernels, orders = [], []
    monkeypatch.setattr(program, "KERNEL_HOOKS", [kernels.append])
    monkeypatch.setattr(dl.api, "_PROGRAMS", type(dl.api._PROGRAMS)())
    order = execute.Execution._order

    def recorded(self, *a):
        orders.append(order(self, *a))
        return orders[-1]
    monkeypatch.setattr(execute.Execution, "_order", recorded)
    return fn(*args), kernels, orders


def test_the_reverse_reads_what_the_forward_wrote_at_the_same_slot(backend, monkeypatch):
    """The loss squares the loop's sum, a host step between the sweeps: the reverse kernel
    is a kernel of its own (without one, the two sweeps share a kernel)."""
    x, trips = _data()
    loss = lambda x: dl.fori_loop(0, trips, lambda i, v: 0.95 * v + 0.1 * x * np.sin(v),
                                  x).sum() ** 2
    got, kernels, orders = _kernels_and_orders(dl.grad(loss), monkeypatch, x)
    v, dv = _closed_form(x, trips)
    assert_close(got, 2 * v.sum() * dv, rtol=1e-10)     # the sum's order is its own
    forward, reverse = kernels[0], kernels[-1]           # between them, 2 * sum: 0-d
    if not get_backend(backend).caps.order_elements:
        assert forward.slot is None and reverse.slot is None
        return
    assert orders and orders[0] is not None
    assert not np.array_equal(_host(orders[0]), np.arange(N))      # really reordered
    outs = {k for k, b in enumerate(forward.buffers) if b.kind == "out"}
    stored = {b for b, how in _slot_accesses(forward) if how == "store"}
    # 0.1 * x and the tape's trip counts at the slot; the loop's result, which the host
    # sums, at the element
    assert len(outs) == 3 and len(stored) == 2 and stored < outs
    loaded = _slot_accesses(reverse)
    assert len(loaded) == 2 and {how for _, how in loaded} == {"load"}


def test_values_the_caller_gets_stay_in_element_order(backend, monkeypatch):
    """The loop's result goes back to the caller (an aux) and into the loss: the forward
    kernel writes it at its element, while the values only the reverse reads are at the
    slot."""
    x, trips = _data()

    def loss(x):
        v = dl.fori_loop(0, trips, lambda i, v: 0.95 * v + 0.1 * x * np.sin(v), x)
        return v.sum(), v
    (got, aux), kernels, _ = _kernels_and_orders(dl.grad(loss, has_aux=True), monkeypatch, x)
    v, dv = _closed_form(x, trips)
    assert_close(got, dv, rtol=1e-12)
    assert_close(aux, v, rtol=1e-12)
    forward = kernels[0]
    if get_backend(backend).caps.order_elements:
        outs = [k for k, b in enumerate(forward.buffers) if b.kind == "out"]
        stored = {b for b, how in _slot_accesses(forward) if how == "store"}
        if len(kernels) == 1:       # the sweeps share a kernel: the loop's result and the
            assert len(outs) == 2 and not stored     # gradient, both at the element
        else:                       # (lavapipe): 0.1 * x and the trips for the reverse
            assert len(outs) == 3 and len(stored) == 2


def test_a_kernel_that_tapes_its_own_loop_reads_at_the_element(backend, monkeypatch):
    """The first loop's result, scaled by its mean (a host step), starts a second taped loop:
    that kernel orders its elements by its own trips, so it reads the first kernel's output
    at the element. The gradient is checked along a random direction against central
    differences of the NumPy loss."""
    x, trips = _data()
    trips2 = trips[::-1].copy()

    def loss(x, xp=dl):
        v = xp.fori_loop(0, trips, lambda i, v: 0.95 * v + 0.1 * x * np.sin(v), x)
        v = v * v.mean()
        return xp.fori_loop(0, trips2, lambda i, w: 0.95 * w + 0.1 * v * np.sin(w), v).sum()

    class Host:
        @staticmethod
        def fori_loop(lo, hi, body, v):
            for k in range(int(hi.max())):
                v = np.where(k < hi, body(k, v), v)
            return v
    got, kernels, _ = _kernels_and_orders(dl.grad(loss), monkeypatch, x)
    d = np.random.default_rng(6).standard_normal(N)
    eps = 1e-6
    want = (loss(x + eps * d, Host) - loss(x - eps * d, Host)) / (2 * eps)
    assert abs(got @ d - want) <= 1e-6 * abs(want)
    if get_backend(backend).caps.order_elements:
        second = next(k for k in kernels
                      if any(b.kind == "order" for b in k.buffers) and k is not kernels[0]
                      and not any(how == "load" for _, how in _slot_accesses(k)))
        assert second is not None


@pytest.mark.parametrize("power", [1, 2])
def test_layouts_kept_in_slot_order_give_the_same_gradient(monkeypatch, power):
    """caps.slot_layouts (the cuda backend's): the kernels that tape and reverse the loop
    read their stacks' start and capacity at the slot, and the layout leaves them in slot
    order. Here on the interpreter, whose layout is then the array-namespace version, with
    the elements really reordered and interleaved in groups of 32 as on a GPU. power 1: the
    two sweeps in one kernel; 2: the loss squares the sum, and the reverse is a kernel of
    its own."""
    previous = dl.config.backend
    dl.config.update("backend", "interpret")
    try:
        be = get_backend("interpret")
        monkeypatch.setattr(be, "caps", dataclasses.replace(
            be.caps, order_elements=True, lockstep=32, tape_lanes=32, slot_layouts=True))
        x, trips = _data()
        loss = lambda x: dl.fori_loop(0, trips, lambda i, v: 0.95 * v + 0.1 * x * np.sin(v),
                                      x).sum() ** power
        got, kernels, orders = _kernels_and_orders(dl.grad(loss), monkeypatch, x)
    finally:
        dl.config.update("backend", previous)
    v, dv = _closed_form(x, trips)
    assert_close(got, power * v.sum() ** (power - 1) * dv, rtol=1e-10)
    taping = [k for k in kernels if k.stacks]
    assert len(taping) == power and all(k.stacks_by_slot for k in taping)
    assert not np.array_equal(_host(orders[0]), np.arange(N))
