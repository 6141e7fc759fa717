"""Measuring one system on one workload: forward and gradient times (median after a warm-up
call; the warm-up's excess over the median is reported as compile time), peak gradient memory
as the system itself accounts for it, and the gradient's difference from NumPy's adjoint."""

import multiprocessing
import os
import time
from dataclasses import dataclass

import numpy as np


class Skip(Exception):
    """A peer that is not installed, or whose API cannot express the workload."""


@dataclass
class Impl:
    forward: object               # () -> result
    gradient: object              # () -> gradient as a NumPy array
    memory: object = None         # () -> bytes the gradient's tape took, or None


@dataclass
class Row:
    workload: str
    case: str
    system: str
    forward_s: float = None
    gradient_s: float = None
    compile_s: float = None
    memory_bytes: int = None
    rel_diff: float = None
    note: str = ""


def median_time(fn, repeats):
    """Median seconds of fn() over `repeats` calls, after one warm-up call."""
    return _timed(fn, repeats)[1]


def _timed(fn, repeats):
    start = time.perf_counter()
    out = fn()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    median = float(np.median(times))
    return out, median, max(first - median, 0.0)


def measure(workload, case, system, make, data, reference, repeats):
    row = Row(workload, case, system)
    try:
        impl = make(data)
        _, row.forward_s, c_fwd = _timed(impl.forward, repeats)
        grad, row.gradient_s, c_grad = _timed(impl.gradient, repeats)
        row.compile_s = c_fwd + c_grad
        row.memory_bytes = impl.memory() if impl.memory else None
        if reference is not None:
            grad = np.asarray(grad, dtype=np.float64)
            row.rel_diff = float(np.max(np.abs(grad - reference)) /
                                 max(np.max(np.abs(reference)), 1e-300))
    except Skip as e:
        row.note = f"skipped: {e}"
    except Exception as e:       # a peer failing is a result to show, not a crash
        row.note = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
    return row


def measure_isolated(workload, case, system, make, data, reference, repeats, timeout=600):
    """measure() in a forked child process: a peer that aborts the process (an LLVM fatal
    error, a segfault) or hangs becomes a row saying so instead of ending the run. Peers are
    imported only in the children."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child():
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)        # a native crash's dump would bury the table
        send.send(measure(workload, case, system, make, data, reference, repeats))

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    send.close()
    try:
        row = receive.recv() if receive.poll(timeout) else None
    except EOFError:               # the child died before sending
        row = None
    proc.join(5)
    if row is None:
        if proc.is_alive():
            proc.kill()
        row = Row(workload, case, system,
                  note=f"failed: the process ended with code {proc.exitcode}" if
                  proc.exitcode not in (None, 0) else f"failed: no result in {timeout} s")
    return row


def fmt(value, scale=1.0, digits=1):
    return "-" if value is None else f"{value * scale:.{digits}f}"


def table(rows):
    head = (f"{'workload':24} {'case':22} {'system':18} {'fwd ms':>9} {'grad ms':>9} "
            f"{'grad/fwd':>8} {'compile s':>9} {'grad MB':>9} {'rel diff':>9}  note")
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio = r.gradient_s / r.forward_s if r.forward_s and r.gradient_s else None
        rel = "-" if r.rel_diff is None else f"{r.rel_diff:.1e}"
        lines.append(f"{r.workload:24} {r.case:22} {r.system:18} {fmt(r.forward_s, 1e3):>9} "
                     f"{fmt(r.gradient_s, 1e3):>9} {fmt(ratio, 1, 2):>8} "
                     f"{fmt(r.compile_s, 1, 2):>9} {fmt(r.memory_bytes, 1e-6):>9} "
                     f"{rel:>9}  {r.note}")
    return "\n".join(lines)


def ratios(rows):
    """dloop / peer gradient time, per workload and case, from this run's rows."""
    lines = [f"{'workload':24} {'case':22} {'dloop grad / peer grad':>24}  peer"]
    for r in rows:
        if r.system != "dloop" or r.gradient_s is None:
            continue
        for p in rows:
            if (p.workload, p.case) == (r.workload, r.case) and p.system != "dloop" and \
                    p.gradient_s:
                lines.append(f"{r.workload:24} {r.case:22} {r.gradient_s / p.gradient_s:>24.2f}"
                             f"  {p.system}")
    return "\n".join(lines)
