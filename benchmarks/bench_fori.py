"""Per-element fori_loop: dloop's forward and gradient against a vectorized NumPy forward
masked to the longest trip count, measured in the same run.

    python benchmarks/bench_fori.py [--n 100000] [--max-trips 200] [--backend cpu]

Targets: gradient / forward <= 4, and dloop's gradient faster than the NumPy forward."""

import argparse
import os
import platform
import numpy as np

import dloop as dl
from harness import median_time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--max-trips", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--backend", default="cpu")
    args = parser.parse_args()
    dl.config.update("backend", args.backend)
    rng = np.random.default_rng(0)
    x = rng.random(args.n)
    n = rng.integers(0, args.max_trips, size=args.n)

    def simulate(x):
        return dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x)

    forward = dl.jit(simulate)
    gradient = dl.grad(lambda x: simulate(x).sum())

    def numpy_forward():
        v = x.copy()
        for i in range(int(n.max())):
            v = np.where(i < n, v * 0.95 + np.sin(v) * x * 0.1, v)
        return v

    np.testing.assert_allclose(forward(x), numpy_forward(), rtol=1e-12)
    t_fwd = median_time(lambda: forward(x), args.repeats)
    t_grad = median_time(lambda: gradient(x), args.repeats)
    t_np = median_time(numpy_forward, max(3, args.repeats // 2))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"backend {args.backend}; N = {args.n:,}, trips uniform in [0, {args.max_trips})")
    print(f"dloop forward           {t_fwd * 1e3:9.1f} ms")
    print(f"dloop gradient          {t_grad * 1e3:9.1f} ms")
    print(f"NumPy masked forward    {t_np * 1e3:9.1f} ms")
    print(f"gradient / forward      {t_grad / t_fwd:9.2f}   (target <= 4)")
    print(f"gradient / NumPy fwd    {t_grad / t_np:9.2f}   (target < 1)")
    print(f"adstack bytes used      {dl.memory_stats()['adstack_bytes_used']:,}")


if __name__ == "__main__":
    main()
