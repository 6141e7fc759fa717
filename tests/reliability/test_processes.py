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
