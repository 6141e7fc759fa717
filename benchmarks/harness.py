"""Measuring one system on one workload: forward and gradient times (median after a warm-up
call; the warm-up's excess over the median is reported as compile time), peak gradient memory
as the system itself accounts for it, and the gradient's difference from NumPy's adjoint.

An Impl's calls must finish their work before returning (a device synchronize on a GPU), so
that asynchronous launches are timed. gradient() returns the gradient where it was computed,
or a function that fetches it: the copy to NumPy for the correctness check is not timed."""

import multiprocessing
import os
import time
from dataclasses import dataclass

import numpy as np


GATE = {"float64": 1e-8, "float32": 1e-4}     # largest correct rel diff, by precision


@dataclass
class Settings:
    """Where the systems run; set in every process that measures (the spawned ones included)."""
    device: str = "cpu"          # peers' and inputs' device: "cpu" or "cuda"
    backend: str = None          # dloop's backend; None leaves dloop's configuration alone


SETTINGS = Settings()


class Skip(Exception):
    """A peer that is not installed, or whose API cannot express the workload."""


@dataclass
class Impl:
    forward: object               # () -> result
    gradient: object              # () -> gradient (any array type) or a function fetching it
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
    precision: str = "float64"

    def correct(self):
        return self.rel_diff is not None and self.rel_diff <= GATE[self.precision]


def prepare(data, precision):
    """(data for the systems, data for the NumPy adjoint): floating arrays rounded to
    `precision`; the adjoint gets the same rounded values back in float64, so its answer is for
    the very inputs the systems see and the difference measures only their arithmetic."""
    def cast(d, dtype):
        return {k: v.astype(dtype) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
                for k, v in d.items()}
    ours = cast(data, np.dtype(precision))
    reference = cast(ours, np.float64)
    ours["precision"] = reference["precision"] = precision
    return ours, reference


def to_numpy(value):
    """A gradient as float64 NumPy, from any system's array type, or from a fetching function."""
    value = value() if callable(value) else value
    if type(value).__module__.startswith("cupy"):
        value = value.get()
    elif hasattr(value, "detach"):          # a torch tensor, possibly on the GPU
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


# Timed calls go on past `repeats` until they have taken this long (at most MAX_CALLS): a
# median of 5 calls of 2 ms on a GPU moved by a third between runs of one process (clocks
# ramping up, a stray host interrupt), where 0.25 s of calls settles it. The same rule for
# every system: slow ones still run `repeats` times.
MIN_TIMED_S = 0.25
MAX_CALLS = 200


def median_time(fn, repeats):
    """Median seconds of fn() over at least `repeats` calls, after one warm-up call."""
    return _timed(fn, repeats)[1]


def _timed(fn, repeats):
    start = time.perf_counter()
    out = fn()
    first = time.perf_counter() - start
    times = []
    while len(times) < repeats or (sum(times) < MIN_TIMED_S and len(times) < MAX_CALLS):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    median = float(np.median(times))
    return out, median, max(first - median, 0.0)


def measure(workload, case, system, make, data, reference, repeats):
    row = Row(workload, case, system, precision=data.get("precision", "float64"))
    try:
        impl = make(data)
        _, row.forward_s, c_fwd = _timed(impl.forward, repeats)
        grad, row.gradient_s, c_grad = _timed(impl.gradient, repeats)
        row.compile_s = c_fwd + c_grad
        row.memory_bytes = impl.memory() if impl.memory else None
        grad = to_numpy(grad)
        if reference is not None:
            row.rel_diff = float(np.max(np.abs(grad - reference)) /
                                 max(np.max(np.abs(reference)), 1e-300))
    except Skip as e:
        row.note = f"skipped: {e}"
    except Exception as e:       # a peer failing is a result to show, not a crash
        row.note = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
    return row


def _child(send, settings, fn, args):
    global SETTINGS
    SETTINGS = settings
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)            # a native crash's dump would bury the table
    send.send(fn(*args))


def isolated(fn, args, timeout, method="fork", settings=None):
    """fn(*args) in a child process: (result, None), or (None, why) when the child died or
    hung. "spawn" gives a child with no CUDA state of its parent's, as CUDA requires."""
    ctx = multiprocessing.get_context(method)
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, settings or SETTINGS, fn, args), daemon=True)
    proc.start()
    send.close()
    try:
        result = receive.recv() if receive.poll(timeout) else None
    except EOFError:               # the child died before sending
        result = None
    proc.join(5)
    if result is not None:
        return result, None
    if proc.is_alive():
        proc.kill()
        return None, f"no result in {timeout} s"
    return None, f"the process ended with code {proc.exitcode}"


def measure_isolated(workload, case, system, make, data, reference, repeats, timeout=600,
                     method="fork"):
    """measure() in a child process: a peer that aborts the process (an LLVM fatal error, a
    segfault) or hangs becomes a row saying so instead of ending the run. Peers are imported
    only in the children."""
    row, why = isolated(measure, (workload, case, system, make, data, reference, repeats),
                        timeout, method)
    if row is None:
        verb = "skipped" if why.startswith("no result") else "failed"
        row = Row(workload, case, system, note=f"{verb}: {why}",
                  precision=data.get("precision", "float64"))
    return row


def fmt(value, scale=1.0, digits=1):
    return "-" if value is None else f"{value * scale:.{digits}f}"


def table(rows):
    cw = max([22] + [len(r.case) for r in rows])
    sw = max([18] + [len(r.system) for r in rows])
    head = (f"{'workload':24} {'case':{cw}} {'system':{sw}} {'fwd ms':>9} {'grad ms':>9} "
            f"{'grad/fwd':>8} {'compile s':>9} {'grad MB':>9} {'rel diff':>9}  note")
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio = r.gradient_s / r.forward_s if r.forward_s and r.gradient_s else None
        rel = "-" if r.rel_diff is None else f"{r.rel_diff:.1e}"
        lines.append(f"{r.workload:24} {r.case:{cw}} {r.system:{sw}} {fmt(r.forward_s, 1e3):>9} "
                     f"{fmt(r.gradient_s, 1e3):>9} {fmt(ratio, 1, 2):>8} "
                     f"{fmt(r.compile_s, 1, 2):>9} {fmt(r.memory_bytes, 1e-6):>9} "
                     f"{rel:>9}  {r.note}")
    return "\n".join(lines)


def ratios(rows):
    """dloop / peer gradient time, per workload and case, from this run's rows: for the
    `dloop` row (tracing at every call) and the `dloop-once` row (retrace=False)."""
    cw = max([22] + [len(r.case) for r in rows])
    lines = [f"{'workload':24} {'case':{cw}} {'dloop row':10} {'grad / peer grad':>16}  peer"]
    for r in rows:
        if not r.system.startswith("dloop") or r.gradient_s is None:
            continue
        for p in rows:
            if (p.workload, p.case) == (r.workload, r.case) and \
                    not p.system.startswith("dloop") and p.gradient_s:
                lines.append(f"{r.workload:24} {r.case:{cw}} {r.system:10} "
                             f"{r.gradient_s / p.gradient_s:>16.2f}  {p.system}")
    return "\n".join(lines)
