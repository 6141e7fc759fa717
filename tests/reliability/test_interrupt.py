"""Ctrl-C during a long gradient: KeyboardInterrupt reaches the caller soon, no worker runs
on after it, and the next call in the same process gives the right gradient."""

import subprocess
import sys
import textwrap

import pytest

from dloop.backends.base import available

pytestmark = pytest.mark.skipif(not available("cpu")[0], reason="needs the cpu backend")

SCRIPT = textwrap.dedent("""
    import os, signal, threading, time
    import numpy as np
    import dloop as dl
    from dloop.backends.cpu.launch import CpuBackend
    # Ctrl-C raises KeyboardInterrupt even where the parent process ignores SIGINT (a
    # background job's children inherit that).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    dl.config.update("backend", "cpu")
    dl.config.update("num_threads", {threads})
    rng = np.random.default_rng(0)
    x = rng.random(200_000)
    n = rng.integers(0, 3000, size=200_000)

    def loss(x, n):
        return dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x).sum()

    small = slice(0, 3000)
    before = dl.grad(loss)(x[small], n[small])
    # Ctrl-C 0.3 s into the big call's first launch, however fast the machine traces,
    # compiles and sizes before it.
    launching = threading.Event()
    real_launch = CpuBackend.launch

    def launch(self, *args):
        launching.set()
        return real_launch(self, *args)
    CpuBackend.launch = launch

    def press_ctrl_c():
        launching.wait()
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=press_ctrl_c, daemon=True).start()
    start = time.monotonic()
    try:
        dl.grad(loss)(x, n)
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted after", round(time.monotonic() - start, 2))
    # No worker still computes: CPU time stops growing once the call has returned.
    cpu = time.process_time(); time.sleep(0.5); spent = time.process_time() - cpu
    print("cpu while idle", round(spent, 3))
    CpuBackend.launch = real_launch
    after = dl.grad(loss)(x[small], n[small])
    print("same", np.array_equal(before, after))
    # and it is the right gradient: central differences in float64 on a few elements
    h = 1e-6
    for j in (0, 1, 2):
        e = np.zeros(3000); e[j] = h
        fd = (loss(x[small] + e, n[small]) - loss(x[small] - e, n[small])) / (2 * h)
        assert abs(fd - after[j]) < 1e-5 * max(1.0, abs(fd)), (j, fd, after[j])
    print("fd ok")
""")


@pytest.mark.parametrize("threads", [1, 2])
def test_ctrl_c_during_a_long_gradient(threads):
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(threads=threads)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert "interrupted" in lines, proc.stdout
    assert float(lines["interrupted"].split()[-1]) < 10.0, proc.stdout
    assert float(lines["cpu"].split()[-1]) < 0.1, proc.stdout
    assert lines["same"] == "True", proc.stdout
    assert "fd ok" in proc.stdout


LLVM_SCRIPT = textwrap.dedent("""
    import _thread, gc, signal
    import numpy as np
    import llvmlite.binding as llvm
    from llvmlite.binding import ffi
    import dloop as dl
    signal.signal(signal.SIGINT, signal.default_int_handler)
    dl.config.update("backend", "cpu")
    dl.config.update("cache_dir", "")          # every kernel compiled
    x = np.random.default_rng(0).random(600)

    def loss(c):
        return lambda x: (dl.fori_loop(0, 20, lambda i, v: v * c + np.sin(v) * x, x) ** 2).sum()
    dl.grad(loss(0.9))(x)

    class Interrupting:
        # Ctrl-C as the C call returns (a real SIGINT is raised at the same point).
        def __init__(self, real):
            self.real = real

        def __call__(self, *args):
            result = self.real(*args)
            _thread.interrupt_main()
            return result

        def __getattr__(self, name):
            return getattr(self.real, name)
    where = {where!r}
    if where == "engine":
        real = llvm.ObjectFileRef.from_data
        llvm.ObjectFileRef.from_data = staticmethod(Interrupting(real))
    else:
        real = ffi.lib._fntab[where]
        ffi.lib._fntab[where] = Interrupting(real)
    try:
        dl.grad(loss(0.8))(x)
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted")
    if where == "engine":
        llvm.ObjectFileRef.from_data = staticmethod(real)
    else:
        ffi.lib._fntab[where] = real
    gc.collect()
    h = 1e-6
    for c in (0.7, 0.6, 0.5):
        g = dl.grad(loss(c))(x)
        for j in (0, 1):
            e = np.zeros(600); e[j] = h
            fd = (loss(c)(x + e) - loss(c)(x - e)) / (2 * h)
            assert abs(fd - g[j]) < 1e-6 * max(1.0, abs(fd)), (c, j, fd, g[j])
    print("fd ok")
""")


@pytest.mark.parametrize("where", ["engine", "LLVMPY_LinkModules", "LLVMPY_DisposeString"])
def test_ctrl_c_inside_llvm_leaves_later_compiles_working(where):
    """llvmlite hands LLVM objects over in two steps (a C call, then Python bookkeeping); a
    KeyboardInterrupt between them freed the shared target machine, a linked module or a
    string twice, and a later compile or garbage collection crashed the process (SIGSEGV,
    'double free'). The compiler now runs where Ctrl-C is not raised, and the Ctrl-C
    reaches the caller once it has finished."""
    proc = subprocess.run([sys.executable, "-c", LLVM_SCRIPT.format(where=where)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "interrupted" in proc.stdout.split() and "fd ok" in proc.stdout, proc.stdout


HELPER_SCRIPT = textwrap.dedent("""
    import os, signal, threading, time
    from dloop.backends.cpu import compile as llvm_compile
    signal.signal(signal.SIGINT, signal.default_int_handler)
    finished = []

    def slow():
        time.sleep(1.0)
        finished.append(True)
        return 7
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    try:
        llvm_compile._uninterrupted(slow)
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted after", round(time.monotonic() - start, 2), "finished", finished)
""")


def test_ctrl_c_during_a_compile_waits_for_it():
    """A Ctrl-C while LLVM runs on its helper thread reaches the caller once the helper has
    finished: a Thread.join interrupted on Python 3.11 and 3.12 marked the running helper
    stopped, the Ctrl-C came back at once, and the process crashed at exit with the helper
    still inside LLVM."""
    proc = subprocess.run([sys.executable, "-c", HELPER_SCRIPT], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    words = proc.stdout.split()
    assert words[0] == "interrupted" and float(words[2]) >= 0.95, proc.stdout
    assert words[-1] == "[True]", proc.stdout
