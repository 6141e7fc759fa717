"""W1's gradient (per-element fori, trip counts uniform in [0, 200), or skewed: in [0, 20) with
one element in 100 at 1000) on every dloop backend available here, and on the CPU backends at
1, 2, 4, ... threads, in one run.

    python benchmarks/backends.py [--n 1000000] [--threads 1,2,4,8,16] [--repeats 5]
                                  [--backends cpu,cuda,cuda-host,vulkan,vulkan-host] [--skewed]
                                  [--rounds 1]

Prints milliseconds per gradient (median after three warm-up calls, device synchronised
inside the timed call) and each backend's largest relative difference from the first
backend's gradient. With --rounds R, the backends take turns R times in the one process,
and a summary gives each one's median over the rounds and its time over the first
backend's, round by round and their median: on the GPU machine (a virtual machine) the
time of one process's calls moved by up to 30% from one process to the next, cuda's and
Vulkan's alike, so backends compared in separate runs differed by as much; taking turns in
one process they share its conditions, and the median over rounds passes over a round
where one backend's calls ran unusually fast or slow (docs/benchmarks.md). `cuda` gets
CuPy arrays and `vulkan` dloop.vulkan arrays, which stay on the device; `cuda-host` and
`vulkan-host` are those backends given NumPy arrays, so their times include the copies of
x and of the trip counts' check to the GPU and the gradient's back."""

import argparse
import os
import sys
import time

import numpy as np

import dloop as dl
from dloop.backends import TABLE
from dloop.backends.base import available


def gradient(n):
    def loss(x):
        return dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x).sum()
    return dl.grad(loss)


def timed(fn, repeats, sync):
    for _ in range(3):             # the first calls after another backend's are slower
        fn()
        sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - start)
    return out, float(np.median(times))


def on_backend(name, x, n, repeats):
    dl.config.update("backend", name.removesuffix("-host"))
    sync, to_numpy = (lambda: None), np.asarray
    if name == "cuda":
        import cupy
        x, n = cupy.asarray(x), cupy.asarray(n)
        sync, to_numpy = cupy.cuda.get_current_stream().synchronize, cupy.asnumpy
    if name == "vulkan":            # (a call on them returns once the device is done)
        import dloop.vulkan
        x, n = dloop.vulkan.asarray(x), dloop.vulkan.asarray(n)
    g, seconds = timed(lambda: gradient(n)(x), repeats, sync)
    return to_numpy(g), seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e6)
    parser.add_argument("--threads", default=",".join(
        str(t) for t in (1, 2, 4, 8, 16, 32) if t <= (os.cpu_count() or 1)))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backends", default="cpu,cpu-scalar,cuda,cuda-host,vulkan,vulkan-host")
    parser.add_argument("--skewed", action="store_true")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    size = int(args.n)
    rng = np.random.default_rng(0)
    n = rng.integers(0, 200, size=size)
    trips = "uniform in [0, 200)"
    if args.skewed:
        n = np.where(rng.random(size) < 0.01, 1000, rng.integers(0, 20, size=size))
        trips = "in [0, 20), one in 100 at 1000"
    print(f"W1 gradient, N = {size:,}, trips {trips}; {os.cpu_count()} cores")
    reference = {}
    for dtype in (np.float64, np.float32):
        x = rng.random(size).astype(dtype)
        times = {}                         # (backend, threads) -> [ms, one a round]
        for turn in range(args.rounds):
            for name in args.backends.split(","):
                row = name.removesuffix("-host")
                ok, why = available(row) if row in TABLE else (False, "not in this version")
                if not ok:
                    if turn == 0:
                        print(f"  {np.dtype(dtype).name:8} {name:11} skipped: {why}")
                    continue
                counts = [int(t) for t in args.threads.split(",")] \
                    if name.startswith("cpu") else [None]
                for threads in counts:
                    dl.config.update("num_threads", threads)
                    try:
                        g, seconds = on_backend(name, x, n, args.repeats)
                    except dl.DloopError as e:
                        print(f"  {np.dtype(dtype).name:8} {name:11} failed: "
                              f"{str(e).splitlines()[0]}")
                        continue
                    ref = reference.setdefault(np.dtype(dtype).name, g)
                    diff = float(np.max(np.abs(g - ref)) / np.max(np.abs(ref)))
                    label = f"{threads} threads" if threads else ""
                    times.setdefault((name, label), []).append(seconds * 1e3)
                    print(f"  {np.dtype(dtype).name:8} {name:11} {label:11} "
                          f"{seconds * 1e3:9.2f} ms   rel diff {diff:.1e}", flush=True)
        if args.rounds > 1:
            summarize(np.dtype(dtype).name, times)
    dl.config.update("num_threads", None)
    return 0


def summarize(dtype, times):
    """Each backend's median over the rounds, and its time over the first backend's: each
    round's ratio, and their median."""
    first = next(iter(times.values()), None)
    for (name, label), ms in times.items():
        ratios = [a / b for a, b in zip(ms, first)]
        print(f"  {dtype:8} {name:11} {label:11} median of {len(ms)} rounds "
              f"{np.median(ms):6.2f} ms; over the first: "
              f"{' '.join(f'{r:.2f}' for r in ratios)}, median {np.median(ratios):.2f}",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
