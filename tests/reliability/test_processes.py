"""dloop in child processes: os.fork() after a parallel kernel ran (multiprocessing's
default on Linux), and process pools started by fork and by spawn, each bit-identical to
the parent's single-threaded results. Every check runs in a subprocess with a time limit,
since the failure being tested is a hang."""

import os
import subprocess
import sys
import textwrap

import pytest

from dloop.backends.base import available

pytestmark = pytest.mark.skipif(not available("cpu")[0], reason="needs the cpu backend")

HERE = os.path.dirname(os.path.abspath(__file__))


def run_script(body, timeout=240):
    script = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, {here!r})
        import numpy as np
        import dloop as dl
        import reliability_workload as workload
        dl.config.update("backend", "cpu")
    """).format(here=HERE) + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_fork_after_a_parallel_kernel():
    out = run_script("""
        expected = workload.references()       # ran parallel kernels: the pool has threads
        pid = os.fork()
        if pid == 0:
            ok = all(workload.run(k) == expected[k] for k in range(workload.CALLS))
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    assert "child 0" in out, out


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_process_pool(method):
    out = run_script(f"""
        import multiprocessing
        expected = workload.references()
        if __name__ == "__main__":
            with multiprocessing.get_context({method!r}).Pool(2) as pool:
                got = pool.map(workload.run, range(workload.CALLS))
            print("same", sum(a == b for a, b in zip(got, expected)), len(expected))
    """)
    assert "same 24 24" in out, out


@pytest.mark.skipif(not available("vulkan")[0], reason=available("vulkan")[1])
def test_a_forked_child_is_told_it_cannot_use_the_parent_s_vulkan_device():
    """Vulkan drivers are not fork-safe (a child's first driver call hung on lavapipe): a
    forked child that calls the Vulkan backend gets a DloopError saying what to do and can
    run the same call on the cpu backend; the parent's device goes on giving the same
    gradient."""
    out = run_script("""
        dl.config.update("backend", "vulkan")
        x = np.linspace(0.5, 1.5, 1000)
        n = np.arange(1000) % 7
        grad = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * x, x).sum())
        want = (n + 1) * x ** n
        first = np.asarray(grad(x))
        assert np.allclose(first, want, rtol=1e-12)
        pid = os.fork()
        if pid == 0:
            try:
                grad(x)
                print("child: no error")
            except dl.DloopError as e:
                print("child refused:", "forked" in str(e) and "spawn" in str(e))
            with dl.config.override(backend="cpu"):
                print("child cpu:", np.allclose(np.asarray(grad(x)), want, rtol=1e-12))
            sys.stdout.flush()
            os._exit(0)                       # as multiprocessing's workers end
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        print("parent again:", np.array_equal(np.asarray(grad(x)), first))
    """, timeout=120)
    assert "child refused: True" in out and "child cpu: True" in out, out
    assert "child exit 0" in out and "parent again: True" in out, out


@pytest.mark.skipif(not available("vulkan")[0], reason=available("vulkan")[1])
def test_a_forked_child_ends_normally_without_the_driver():
    """A child forked after the parent opened the Vulkan device, ending through sys.exit:
    the device's atexit close and buffer recycling skip the driver there. (On NVIDIA's
    driver such a child crashed at exit whether or not it used dloop: docs/threads.md.)"""
    from dloop.backends.vulkan.launch import default_device
    if "NVIDIA" in default_device().features.name:
        pytest.xfail("NVIDIA's driver crashes a forked child at its normal exit")
    out = run_script("""
        dl.config.update("backend", "vulkan")
        x = np.linspace(0.5, 1.5, 1000)
        n = np.arange(1000) % 7
        grad = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * x, x).sum())
        first = np.asarray(grad(x))
        pid = os.fork()
        if pid == 0:
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        print("parent again:", np.array_equal(np.asarray(grad(x)), first))
    """, timeout=120)
    assert "child exit 0" in out and "parent again: True" in out, out


def test_fork_while_another_thread_compiles():
    """A fork while another thread was inside LLVM left llvmlite's lock held in the child,
    whose first compile then hung (14 forks in 15). The fork now waits for the compile."""
    out = run_script("""
        import threading, time
        dl.config.update("cache_dir", "")       # every call compiles
        x = np.random.default_rng(0).random(600)

        def loss(c):
            return lambda x: (dl.fori_loop(0, 20, lambda i, v: v * c + np.sin(v) * x,
                                           x) ** 2).sum()
        dl.grad(loss(0.5))(x)
        stop = []

        def compile_forever():
            k = 0
            while not stop:
                k += 1
                dl.grad(loss(0.9 + 1e-4 * k))(x)
        threading.Thread(target=compile_forever, daemon=True).start()
        read, write = os.pipe()
        for trial in range(6):
            time.sleep(0.05 * trial)
            c = 0.25 + 0.01 * trial             # a new kernel: the child compiles it
            pid = os.fork()
            if pid == 0:
                os.write(write, dl.grad(loss(c))(x).tobytes())
                os._exit(0)
            code = workload.wait_child(pid, 30)
            if code is None:
                print("child hung")
            else:
                same = os.read(read, 1 << 20) == dl.grad(loss(c))(x).tobytes()
                print("child", code, "same", same)
        stop.append(True)
    """)
    assert out.count("child 0 same True") == 6, out


def test_exit_while_a_daemon_thread_computes():
    """The interpreter exits while a daemon thread is inside gradient calls: Python before
    3.14 ends that thread by unwinding its stack wherever it waits for the GIL, and inside
    optree's C++ code (the pytree library dloop used) that aborted every such exit."""
    for _ in range(2):
        run_script("""
            import threading, time
            x = np.random.default_rng(0).random(100)
            f = dl.grad(lambda p: (dl.fori_loop(0, 3, lambda i, v: v * p["a"][0] + p["b"][1],
                                                p["a"][0]) ** 2).sum())
            p = {"a": (x,), "b": [x, x]}
            f(p)

            def forever():
                while True:
                    f(p)
            threading.Thread(target=forever, daemon=True).start()
            time.sleep(0.05)
        """)


@pytest.mark.parametrize("lock", ["api._PROGRAMS_LOCK", "base._instances_lock",
                                  "base.get_backend('cpu')._heaps_lock", "traces.lock"])
def test_fork_while_another_thread_holds_a_lock_of_dloops(lock):
    """A fork that lands while another thread is inside one of dloop's short critical
    sections (storing a program it just compiled, making a heap) left that lock held in the
    child, whose next call waited for it forever."""
    out = run_script(f"""
        import threading, time
        from dloop import api
        from dloop.backends import base
        x = np.linspace(0.5, 1.5, 600)

        def loss(x):
            return (dl.fori_loop(0, 20, lambda i, v: v * 0.5 + x, x) ** 2).sum()

        once = dl.grad(loss, retrace=False)
        expected = once(x).tobytes()
        traces = next(iter(api._ALL_TRACES))
        held, release = threading.Event(), threading.Event()

        def hold(lock):
            with lock:
                held.set()
                release.wait()
        threading.Thread(target=hold, args=({lock},), daemon=True).start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            got = []                   # a new thread: a heap of its own is made
            thread = threading.Thread(target=lambda: got.append(dl.grad(loss)(x).tobytes()))
            thread.start()
            thread.join()
            same = got == [expected] and once(x).tobytes() == expected and \\
                dl.grad(lambda x: loss(x) * 2.0)(x).tobytes() != expected
            os._exit(0 if same else 3)
        release.set()
        code = workload.wait_child(pid, 60)
        print("child hung" if code is None else f"child {{code}}")
    """)
    assert "child 0" in out, out
