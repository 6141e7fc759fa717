"""Many Python threads calling dloop at once get exactly the single-threaded results, and
changing num_threads while others run breaks nothing."""

import threading

import pytest

import dloop as dl
from dloop.backends.base import available

import reliability_workload as workload

pytestmark = pytest.mark.skipif(not available("cpu")[0], reason="needs the cpu backend")


def _in_threads(n_threads, target):
    errors = []

    def guarded(t):
        try:
            target(t)
        except BaseException as e:       # reported by the main thread
            errors.append((t, repr(e)))
    threads = [threading.Thread(target=guarded, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def _mixed_calls_in_threads(backend, n_threads, calls_each):
    """(t, j, k) of every call k, the j-th of thread t, whose result differs from the
    single-threaded one on `backend`."""
    with dl.config.override(backend=backend):
        expected = workload.references()
        mismatches = []

        def worker(t):
            for j in range(calls_each):
                k = (t * 7 + j * 5) % workload.CALLS
                if workload.run(k) != expected[k]:
                    mismatches.append((t, j, k))
        _in_threads(n_threads, worker)
    return mismatches


def test_eight_threads_fifty_mixed_calls_are_bit_identical():
    mismatches = _mixed_calls_in_threads("cpu", 8, 50)
    assert not mismatches, f"{len(mismatches)} of 400 results differ: {mismatches[:10]}"


def test_changing_num_threads_while_other_threads_launch():
    """jit calls only: they use no adstack heap, so this checks the pool alone."""
    jit_calls = [k for k in range(workload.CALLS) if k % 6 == 3]
    with dl.config.override(backend="cpu"):
        expected = workload.references()
        mismatches = []
        stop = threading.Event()

        def changer():
            k = 0
            while not stop.is_set():
                dl.config.update("num_threads", 1 + k % 3)
                k += 1

        def worker(t):
            for j in range(12):
                k = jit_calls[(t + j) % len(jit_calls)]
                if workload.run(k) != expected[k]:
                    mismatches.append((t, j, k))
        flipper = threading.Thread(target=changer)
        flipper.start()
        try:
            _in_threads(4, worker)
        finally:
            stop.set()
            flipper.join()
            dl.config.update("num_threads", None)
    assert not mismatches, mismatches


@pytest.mark.skipif(not available("vulkan")[0], reason=available("vulkan")[1])
def test_threads_share_the_vulkan_device():
    """Several threads' copies and launches are recorded into the device's one open command
    buffer and submitted together (backends/vulkan/device.py): each thread still gets the
    single-threaded result, bit for bit."""
    mismatches = _mixed_calls_in_threads("vulkan", 4, 12)
    assert not mismatches, f"{len(mismatches)} of 48 results differ: {mismatches[:10]}"


@pytest.mark.skipif(not available("vulkan")[0], reason=available("vulkan")[1])
def test_threads_share_the_vulkan_device_order():
    """Launches large enough for Vulkan's element order and tape layout on the device
    (backends/vulkan/order.py: sizing kernels compiled once per backend, scans that read
    back chunk sums) from three threads at once: each call gives the single-threaded
    gradient, bit for bit."""
    import numpy as np
    rng = np.random.default_rng(9)
    n = 70_000
    trips = np.where(rng.random(n) < 0.02, 250, rng.integers(0, 20, n))
    xs = [np.linspace(0.5, 1.5, n) * (1 + 0.1 * k) for k in range(3)]
    grad = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.9 + 0.05 * x * v,
                                          x).sum())
    with dl.config.override(backend="vulkan"):
        expected = [np.asarray(grad(x)) for x in xs]
        mismatches = []

        def worker(t):
            for j in range(3):
                k = (t + j) % 3
                if not np.array_equal(np.asarray(grad(xs[k])), expected[k]):
                    mismatches.append((t, j, k))
        _in_threads(3, worker)
    assert not mismatches, mismatches


def test_threads_setting_up_the_cpu_compiler_together(monkeypatch):
    """The cpu compiler's one-time set-up (LLVM's target, libmvec) taken by two threads at
    once: the second waits for the first's, where it once read a half-made state
    (KeyError 'mvec'). find_library is slowed to widen the window it took."""
    import ctypes.util
    import time

    from dloop.backends.cpu import compile as cpu_compile
    monkeypatch.setattr(cpu_compile, "_state", {})
    find = ctypes.util.find_library

    def slow(name):
        time.sleep(0.3)
        return find(name)
    monkeypatch.setattr(ctypes.util, "find_library", slow)
    found, errors = [], []

    def first_use():
        try:
            found.append(cpu_compile.vector_math(cpu_compile.vector_width()))
        except Exception as e:             # reported below
            errors.append(repr(e))
    threads = [threading.Thread(target=first_use) for _ in range(2)]
    threads[0].start()
    time.sleep(0.1)
    threads[1].start()
    for t in threads:
        t.join()
    assert not errors and len(found) == 2 and found[0] == found[1]


def test_a_setting_changed_by_another_thread_during_a_sizing_is_not_kept(monkeypatch):
    """Another thread's config.override(adstack_capacity=5) began and ended while this
    thread's launch was being sized: the sizing read the setting several times, kept
    capacities of 5 under the key of exact sizing, and every later call with those trip
    counts overflowed. Events around the sizing make the window certain."""
    import numpy as np

    from dloop.runtime import execute
    n = (np.arange(4000) % 40).astype(np.int64)
    x = np.linspace(0.5, 1.5, 4000)
    g = dl.grad(lambda x, n: dl.fori_loop(0, n, lambda i, v: v * 0.9, x).sum())
    with dl.config.override(backend="cpu"):
        g(x, n.copy())
        sizing, sized, entered, left = (threading.Event() for _ in range(4))
        real = execute.Execution._capacities

        def capacities(self, *args, **kwargs):
            sizing.set()
            entered.wait(10)
            out = real(self, *args, **kwargs)
            sized.set()
            left.wait(10)
            return out
        monkeypatch.setattr(execute.Execution, "_capacities", capacities)

        def other():
            sizing.wait(10)
            with dl.config.override(adstack_capacity=5):
                entered.set()
                sized.wait(10)
            left.set()
        thread = threading.Thread(target=other)
        thread.start()
        try:
            g(x, (n + 1) % 40)
        except dl.AdstackOverflowError:
            pass                 # this call may have run under the other thread's setting
        thread.join()
        monkeypatch.setattr(execute.Execution, "_capacities", real)
        np.testing.assert_allclose(g(x, (n + 1) % 40), 0.9 ** ((n + 1) % 40), rtol=1e-13)


def test_threads_that_outlive_the_main_script_still_launch():
    """Worker threads still running when the main script ends (Python then waits for them)
    found concurrent.futures' pools shut down by its exit hook: every cpu launch raised
    RuntimeError('cannot schedule new futures after interpreter shutdown')."""
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent("""
        import threading, time
        import numpy as np, dloop as dl
        dl.config.update("backend", "cpu")
        x = np.linspace(0.5, 1.5, 5000)
        n = (np.arange(5000) % 30).astype(np.int64)
        g = dl.grad(lambda x, n: dl.fori_loop(0, n, lambda i, v: v * 0.9, x).sum())
        g(x, n)
        def worker():
            time.sleep(0.5)
            w = dl.grad(lambda x: dl.while_loop(lambda v: v < 10.0, lambda v: v * 1.5,
                                                x * 1.0).sum())
            print("grad", np.allclose(g(x, n), 0.9 ** n), "while", w(x).shape, flush=True)
        threading.Thread(target=worker).start()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "grad True while (5000,)" in proc.stdout, proc.stderr
