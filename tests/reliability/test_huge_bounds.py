"""Huge trip counts are a DloopMemoryError naming the loop's line, decided before anything
is allocated or launched, and the next call is right. Each case runs in its own process:
before this was fixed, some of them crashed the interpreter."""

import subprocess
import sys
import textwrap

import pytest

from dloop.backends import TABLE
from dloop.backends.base import available

CASES = {
    "scalar 2**62": "dl.fori_loop(0, 2 ** 62, body, x)",
    "per-element 2**61": "dl.fori_loop(0, np.full(4, 2 ** 61), body, x)",
    "int64 span": "dl.fori_loop(np.full(4, -2 ** 63), np.full(4, 2 ** 63 - 1), body, x)",
    "uint64 2**63-1": "dl.fori_loop(0, np.full(4, 2 ** 63 - 1, np.uint64), body, x)",
    "nested": "dl.fori_loop(0, np.full(4, 3), lambda i, v: dl.fori_loop(0, 2 ** 62, body, v), x)",
    "fixed capacity": "dl.fori_loop(0, np.full(4, 3), body, x)",
}

SCRIPT = textwrap.dedent("""
    import numpy as np, dloop as dl
    dl.config.update("backend", {backend!r})
    x = np.linspace(0.1, 1.0, 4)
    body = lambda i, v: v * 1.5
    n = np.array([1, 2, 3, 4])
    good = lambda: dl.grad(lambda x: dl.fori_loop(0, n, body, x).sum())(x)
    if {warm}:
        good()            # a gradient ran before: the heap holds a buffer
    if {fixed}:
        dl.config.update("adstack_capacity", 2 ** 62)
    try:
        dl.grad(lambda x: ({call}).sum())(x)  # HERE
        print("no error")
    except dl.DloopMemoryError as e:
        print("line", str(e).splitlines()[-1].strip())
        print("bytes", "max_adstack_bytes" in str(e))
    dl.config.update("adstack_capacity", None)
    print("after", np.allclose(good(), 1.5 ** n))
    print("reserved", dl.memory_stats()["adstack_bytes_reserved"])
""")


@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("backend", list(TABLE))
def test_huge_trip_count_is_a_memory_error(backend, case, warm):
    ok, why = available(backend)
    if not ok:
        pytest.skip(why)
    script = SCRIPT.format(backend=backend, warm=warm, fixed=case == "fixed capacity",
                           call=CASES[case])
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    here = next(k for k, t in enumerate(script.splitlines(), 1) if t.endswith("# HERE"))
    assert out.get("line") == f"at <string>:{here}", proc.stdout
    assert out["bytes"] == "True" and out["after"] == "True", proc.stdout
    assert int(out["reserved"]) < 1 << 20, "a huge buffer was allocated"
