"""The cuda step driver's graphs (backends/cuda/steps.py): a collective loop's steps queued as
CUDA graphs of 2^k steps, the rest launched one by one, against the NumPy adjoint; graphs
reused across trip counts and dropped when too many are kept; and threads, on their own
streams and on one stream, getting the serial results bit for bit."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import dloop as dl
from dloop.backends.base import available

_OK, _WHY = available("cuda")
pytestmark = pytest.mark.skipif(not _OK, reason=_WHY)

if _OK:
    import cupy as cp
    from dloop.backends.cuda import steps as cuda_steps

DT, REACT = 0.2, 0.05


def _step(u):
    return u + DT * (np.roll(u, 1) + np.roll(u, -1) - 2 * u) - REACT * u ** 3


def _loss(trips):
    """sum(u_T ** 2) after `trips` heat steps, the trip count held in data."""
    n = np.array(trips)
    return lambda u: (dl.fori_loop(0, n, lambda i, u: _step(u), u) ** 2).sum()


def _numpy_gradient(u0, trips):
    u, history = u0, []
    for _ in range(trips):
        history.append(u)
        u = _step(u)
    g = 2 * u
    for h in reversed(history):
        g = g * (1 - 2 * DT - 3 * REACT * h ** 2) + DT * (np.roll(g, -1) + np.roll(g, 1))
    return g


def _u0(size, dtype=np.float64, scale=1.0):
    x = np.linspace(0, 6 * np.pi, size, endpoint=False)
    return (scale * (1.0 + 0.5 * np.sin(x))).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_steps_in_graphs_and_one_by_one_match_the_numpy_adjoint(dtype, monkeypatch):
    sizes = []
    run = cuda_steps._StepGraph.run
    monkeypatch.setattr(cuda_steps._StepGraph, "run",
                        lambda self, values, stream: (sizes.append(self.size),
                                                      run(self, values, stream))[1])
    monkeypatch.setattr(cuda_steps, "GRAPHS_KEPT", 2)     # and drop graphs on the way
    u0 = _u0(1000, dtype)
    rtol = 1e-12 if dtype == np.float64 else 2e-4
    for trips in (3, 8, 13, 37, 256 + 19, 37, 1):
        g = dl.grad(_loss(trips))(cp.asarray(u0))
        expected = _numpy_gradient(u0.astype(np.float64), trips)
        np.testing.assert_allclose(cp.asnumpy(g), expected, rtol=rtol, atol=rtol,
                                   err_msg=f"{trips} steps")
    # 13 = 8 + 5 and 37 = 32 + 5 at first, 275 = 256 + 16 + 3; 37 again: a graph of its own
    assert {256, 37, 32, 16, 8} <= set(sizes)


def test_threads_on_their_own_streams_and_on_one_get_the_serial_results():
    grad = dl.grad(_loss(45))
    inputs = [cp.asarray(_u0(4096, scale=1 + 0.05 * k)) for k in range(6)]
    expected = [cp.asnumpy(grad(x)) for x in inputs]
    for own_stream in (True, False):
        results, errors = {}, []

        def work(k):
            try:
                stream = cp.cuda.Stream(non_blocking=True) if own_stream else \
                    cp.cuda.Stream.null
                with stream:
                    results[k] = [cp.asnumpy(grad(inputs[k])) for _ in range(4)]
            except Exception as e:              # reported below, with the thread's input
                errors.append((k, e))

        threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for k, want in enumerate(expected):
            for got in results[k]:
                np.testing.assert_array_equal(got, want, err_msg=f"thread {k}")


@pytest.mark.parametrize("trips", [5, 20, 40, 40, 300])
def test_a_body_reading_the_index_gets_each_step_s_index(trips):
    """The index goes to graphs' rows step by step: steps 3 .. trips + 2 scale u by
    (1 + i / 1000), so the gradient of the sum is the product, and a value adds i / 2."""
    n = np.array(trips + 3)
    u = cp.linspace(0.5, 1.5, 300)
    grad = dl.grad(lambda u: dl.fori_loop(3, n, lambda i, u: u * (1 + i / 1000), u).sum())
    index = np.arange(3, trips + 3)
    np.testing.assert_allclose(cp.asnumpy(grad(u)), np.full(300, np.prod(1 + index / 1000)),
                               rtol=1e-12)
    value = dl.jit(lambda u: dl.fori_loop(3, n, lambda i, u: u + i / 2, u))(u)
    np.testing.assert_allclose(cp.asnumpy(value), cp.asnumpy(u) + index.sum() / 2, rtol=1e-13)


def test_threads_on_the_per_thread_default_stream_get_the_serial_results():
    """CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1: every thread's default stream has the handle
    cudaStreamPerThread, and a graph kept under it had its table rewritten by one thread
    while another thread's launch of it still read it (2 to 21 calls of 240 wrong on an
    H100)."""
    script = """if 1:
        import threading, numpy as np, cupy as cp, dloop as dl
        n = np.array(64)
        f = dl.jit(lambda u: dl.fori_loop(
            0, n, lambda i, u: u + 0.2 * (np.roll(u, 1) - u) - 0.05 * u ** 3, u))
        xs = [cp.linspace(0, 1 + k / 10, 1 << 18) for k in range(8)]
        want = [cp.asnumpy(f(x)) for x in xs]
        same = []
        def work(k):
            for _ in range(100):
                same.append(np.array_equal(cp.asnumpy(f(xs[k])), want[k]))
        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert cp.cuda.get_current_stream().ptr == cp.cuda.runtime.streamPerThread
        print(same.count(False), len(same))
    """
    env = {**os.environ, "CUPY_CUDA_PER_THREAD_DEFAULT_STREAM": "1"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "800"]


def test_graphs_keep_their_kernels_loaded_when_the_compiled_entry_is_replaced(monkeypatch):
    """Threads making a driver's first graph at once each compile the row entries; the
    backend keeps the last one compiled, and the module of one it dropped was unloaded under
    the graphs made from it (CUDA_ERROR_INVALID_HANDLE). Here the replacement is forced."""
    from dloop.backends.cuda.launch import CudaBackend
    compile_ = CudaBackend.compile

    def compile_twice(self, kernel, variant=None):
        artifact = compile_(self, kernel, variant)
        if variant is not None:         # another thread's compile replaces it in the cache
            self._artifacts.pop(f"{variant}\n{self.legalize(kernel)}")
            compile_(self, kernel, variant)
        return artifact
    monkeypatch.setattr(CudaBackend, "compile", compile_twice)
    monkeypatch.setattr("dloop.api._PROGRAMS", type(dl.api._PROGRAMS)())
    n, bias = np.array(64), float(np.random.default_rng().uniform(0.25, 0.75))
    f = dl.jit(lambda u: dl.fori_loop(0, n, lambda i, u: u * 1.001 + bias + 0 * np.roll(u, 1),
                                      u))
    want = np.ones(1 << 16)
    for _ in range(64):
        want = want * 1.001 + bias
    np.testing.assert_allclose(cp.asnumpy(f(cp.ones(1 << 16))), want, rtol=1e-13)


def test_making_graphs_while_another_thread_synchronizes_the_device(monkeypatch):
    """Graphs are made node by node, not by stream capture, during which a device-wide
    synchronize in another thread fails (cudaErrorStreamCaptureUnsupported) and breaks the
    capture. Here every call makes a graph (one kept, step counts alternating) while another
    thread synchronizes the device in a loop."""
    monkeypatch.setattr(cuda_steps, "GRAPHS_KEPT", 1)
    u0 = _u0(4096)
    grads = {trips: dl.grad(_loss(trips)) for trips in (8, 16, 32, 64)}
    done, errors = threading.Event(), []

    def synchronize():
        try:
            while not done.is_set():
                cp.cuda.Device().synchronize()
        except Exception as e:              # reported below
            errors.append(e)

    other = threading.Thread(target=synchronize)
    other.start()
    try:
        for _ in range(10):
            for trips, grad in grads.items():
                np.testing.assert_allclose(cp.asnumpy(grad(cp.asarray(u0))),
                                           _numpy_gradient(u0, trips), rtol=1e-12,
                                           err_msg=f"{trips} steps")
    finally:
        done.set()
        other.join()
    assert errors == []


def test_a_graph_the_driver_refuses_leaves_the_steps_launched_one_by_one(monkeypatch,
                                                                          capsys):
    """Where libcuda refuses a graph (graphs.py raises), the steps are launched one by one,
    with the same gradient, and the debug dump says so."""
    refused = []

    def refuse(launches):
        refused.append(len(launches))
        raise RuntimeError("cuGraphCreate failed: CUDA_ERROR_OUT_OF_MEMORY (2)")
    monkeypatch.setattr(cuda_steps, "KernelChain", refuse)
    monkeypatch.setattr("dloop.api._PROGRAMS", type(dl.api._PROGRAMS)())
    u0 = _u0(1000)
    with dl.config.override(debug=True):
        g = dl.grad(_loss(40))(cp.asarray(u0))
    np.testing.assert_allclose(cp.asnumpy(g), _numpy_gradient(u0, 40), rtol=1e-12)
    assert refused
    assert "launched one by one: RuntimeError: cuGraphCreate failed" in capsys.readouterr().out
