"""retrace=False: a function traced once per argument signature, as jax.jit does. A call
with the same structure, shapes, dtypes and library runs the kept program without calling
the function, with this call's argument values; any other signature is traced; what the
function reads besides its arguments stays what the first trace read."""

import threading

import numpy as np
import pytest

import dloop as dl
from dloop import api


def counted(fn):
    calls = []

    def wrapper(*args):
        calls.append(1)
        return fn(*args)
    return wrapper, calls


def newton_loss(a):
    """sum of the roots of v^3 + a v - 1, by Newton's method from 1: a while loop whose
    trips depend on a."""
    def step(v):
        return v - (v ** 3 + a * v - 1.0) / (3.0 * v ** 2 + a)
    tol = 1e-13 if a.dtype == np.float64 else 1e-5      # what float32 can reach
    return dl.while_loop(lambda v: np.abs(v ** 3 + a * v - 1.0) > tol, step,
                         np.ones_like(a)).sum()


def root_and_slope(a):
    """The root by NumPy's own iteration, and its derivative by implicit differentiation:
    d/da (v^3 + a v - 1) = 0 gives dv/da = -v / (3 v^2 + a)."""
    v = np.ones_like(a)
    for _ in range(100):
        v = v - (v ** 3 + a * v - 1.0) / (3.0 * v ** 2 + a)
    return v, -v / (3.0 * v ** 2 + a)


def test_grad_traces_once_per_signature(backend):
    loss, calls = counted(newton_loss)
    grad = dl.grad(loss, retrace=False)
    rng = np.random.default_rng(0)
    for _ in range(3):
        a = np.exp(rng.uniform(-2.0, 2.0, 50))
        np.testing.assert_allclose(grad(a), root_and_slope(a)[1], rtol=1e-10, atol=0)
    assert len(calls) == 1
    a7 = np.exp(rng.uniform(-2.0, 2.0, 7))
    np.testing.assert_allclose(grad(a7), root_and_slope(a7)[1], rtol=1e-10, atol=0)
    assert len(calls) == 2                      # another shape
    got = grad(a7.astype(np.float32))
    assert got.dtype == np.float32 and len(calls) == 3       # another dtype
    np.testing.assert_allclose(got, root_and_slope(a7)[1], rtol=1e-4)
    grad(np.exp(rng.uniform(-2.0, 2.0, 50)))
    assert len(calls) == 3                      # the first signature's trace is kept


def test_a_kept_program_outlives_the_shared_program_cache(backend):
    grad = dl.grad(newton_loss, retrace=False)
    a = np.linspace(0.5, 3.0, 9)
    first = grad(a)
    api._PROGRAMS.clear()
    np.testing.assert_array_equal(grad(a), first)


def test_jit_keys_on_the_pytree_structure(backend):
    f, calls = counted(lambda d: d["x"] * 2.0 + d["y"])
    jitted = dl.jit(f, retrace=False)
    x, y = np.arange(4.0), np.ones(4)
    np.testing.assert_array_equal(jitted({"x": x, "y": y}), x * 2.0 + 1.0)
    np.testing.assert_array_equal(jitted({"y": x, "x": y}), y * 2.0 + x)
    assert len(calls) == 1
    g, calls = counted(lambda t: t[0] * 2.0 + t[1])
    jitted = dl.jit(g, retrace=False)
    jitted((x, y))
    np.testing.assert_array_equal(jitted([x, y]), x * 2.0 + 1.0)
    assert len(calls) == 2                      # a list is not a tuple


def test_numbers_passed_as_arguments_are_not_kept(backend):
    """Python numbers among the arguments are traced like 0-d arrays, so a new value needs
    no new trace and is used."""
    loss, calls = counted(lambda x, c: (np.sin(x) * c).sum())
    vg = dl.value_and_grad(loss, retrace=False)
    x = np.linspace(0.0, 1.0, 5)
    for c in (2.0, 3.0):
        value, g = vg(x, c)
        np.testing.assert_allclose(value, np.sin(x).sum() * c, rtol=1e-14)
        np.testing.assert_allclose(g, np.cos(x) * c, rtol=1e-14)
    assert len(calls) == 1


def test_aux_outputs_come_from_this_calls_arguments(backend):
    def loss(x):
        y = dl.fori_loop(0, 3, lambda i, v: v * 0.5, x)
        return (y ** 2).sum(), y.max()
    vg = dl.value_and_grad(loss, has_aux=True, retrace=False)
    for x in (np.arange(1.0, 5.0), np.arange(5.0, 9.0)):
        (value, top), g = vg(x)
        np.testing.assert_allclose(value, ((x / 8) ** 2).sum(), rtol=1e-14)
        assert top == x.max() / 8
        np.testing.assert_allclose(g, 2 * x / 64, rtol=1e-14)


def test_a_result_updated_in_place_leaves_later_calls_alone(backend):
    """A constant the function returns (np.zeros here, or a captured array or a view of
    one) is the kept trace's, which later calls return again: each call's result is still
    its own array, as with NumPy, so that updating it in place changes nothing else."""
    w = np.arange(4.0)
    jitted = dl.jit(lambda x: (x * 2.0, np.zeros(3), w[1:]), retrace=False)
    for _ in range(2):
        _, zeros, tail = jitted(np.ones(2))
        np.testing.assert_array_equal(zeros, 0.0)
        np.testing.assert_array_equal(tail, [1.0, 2.0, 3.0])
        zeros += 1.0
        tail[:] = -1.0
    vg = dl.value_and_grad(lambda x: ((x ** 2).sum(), w), has_aux=True, retrace=False)
    for _ in range(2):
        (_, aux), g = vg(np.ones(2))
        np.testing.assert_array_equal(aux, np.arange(4.0))
        np.testing.assert_array_equal(g, 2.0)
        aux[:] = 7.0
    np.testing.assert_array_equal(w, np.arange(4.0))


SCALE = [2.0]


def test_what_the_function_reads_besides_its_arguments_is_the_first_traces(backend):
    """The contract that retrace=False trades for its speed: a global read by the function
    (a Python number here, an array or an attribute alike) keeps its first value. The
    default, retrace=True, reads it at every call, as NumPy would."""
    def loss(x):
        return (x * SCALE[0]).sum()
    once, every = dl.grad(loss, retrace=False), dl.grad(loss)
    x = np.ones(3)
    try:
        np.testing.assert_array_equal(once(x), 2.0)
        SCALE[0] = 5.0
        np.testing.assert_array_equal(once(x), 2.0)
        np.testing.assert_array_equal(every(x), 5.0)
    finally:
        SCALE[0] = 2.0


def test_a_failed_first_trace_is_not_kept(backend):
    state = {"fail": True}

    def loss(x):
        if state["fail"]:
            raise dl.DloopValueError("not yet")
        return (x ** 2).sum()
    grad = dl.grad(loss, retrace=False)
    x = np.arange(3.0)
    with pytest.raises(dl.DloopValueError, match="not yet"):
        grad(x)
    state["fail"] = False
    np.testing.assert_array_equal(grad(x), 2 * x)


def test_more_signatures_than_are_kept():
    f, calls = counted(lambda x: x * 3.0)
    jitted = dl.jit(f, retrace=False)
    sizes = range(1, api._Traces.SIZE + 6)
    for n in sizes:
        np.testing.assert_array_equal(jitted(np.ones(n)), 3.0)
    assert len(calls) == len(sizes)
    np.testing.assert_array_equal(jitted(np.ones(1)), 3.0)  # the oldest was given up
    assert len(calls) == len(sizes) + 1
    np.testing.assert_array_equal(jitted(np.ones(sizes[-1])), 3.0)
    assert len(calls) == len(sizes) + 1


def test_threads_share_the_kept_traces():
    grad = dl.grad(newton_loss, retrace=False)
    inputs = [np.exp(np.random.default_rng(k).uniform(-2.0, 2.0, 40)) for k in range(8)]
    results = [None] * len(inputs)

    def work(k):
        for _ in range(5):
            results[k] = grad(inputs[k])
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, g in zip(inputs, results):
        np.testing.assert_allclose(g, root_and_slope(a)[1], rtol=1e-10, atol=0)


def test_arrays_of_another_library_are_another_signature():
    xp = pytest.importorskip("array_api_strict")
    f, calls = counted(lambda x: x * 2.0)
    jitted = dl.jit(f, retrace=False)
    assert isinstance(jitted(np.ones(3)), np.ndarray)
    out = jitted(xp.ones(3, dtype=xp.float64))
    assert type(out) is type(xp.ones(1)) and len(calls) == 2
    np.testing.assert_array_equal(np.asarray(out), 2.0)
