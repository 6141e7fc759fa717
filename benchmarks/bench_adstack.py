"""Adstack memory and time on a skewed workload: 1% of the elements run 1,000 steps, the rest
10. Compared, in the same run, with a uniform workload of the same total number of steps, and
with what sizing every element for the longest trip would take.

    python benchmarks/bench_adstack.py [--n 1000000] [--backend cpu]"""

import argparse
import numpy as np

import dloop as dl
from harness import median_time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="cpu")
    args = parser.parse_args()
    dl.config.update("backend", args.backend)
    rng = np.random.default_rng(0)
    x = rng.random(args.n)
    skewed = np.full(args.n, 10)
    skewed[rng.choice(args.n, args.n // 100, replace=False)] = 1000
    uniform = np.full(args.n, skewed.sum() // args.n)
    uniform[: skewed.sum() - uniform.sum()] += 1

    def gradient(n):
        return dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1,
                                              x).sum())

    slot = 8
    print(f"backend {args.backend}; N = {args.n:,}; skewed: 1% at 1,000 steps, 99% at 10; "
          f"uniform: the same {skewed.sum():,} steps spread evenly")
    rows = []
    for name, n in (("skewed", skewed), ("uniform", uniform)):
        grad = gradient(n)
        t = median_time(lambda: grad(x), args.repeats)
        used = dl.memory_stats()["adstack_bytes_used"]
        rows.append((name, t, used))
        print(f"{name:8} gradient {t * 1e3:8.1f} ms   adstack_bytes_used {used:>15,}")
    worst = args.n * (int(skewed.max()) + 2) * slot
    print(f"threads x (longest trip + 2) x slot size: {worst:,} bytes "
          f"({worst / rows[0][2]:.1f}x what the skewed run used)")
    print(f"skewed / uniform: time {rows[0][1] / rows[1][1]:.2f}, "
          f"bytes {rows[0][2] / rows[1][2]:.3f}")


if __name__ == "__main__":
    main()
