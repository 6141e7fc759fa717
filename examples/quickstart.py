"""dloop quickstart: differentiate a loop whose trip count differs per element.

Each element j of x is iterated n[j] times by v <- 0.95 v + 0.1 x sin(v); we take the
gradient of the sum of the results with respect to x and check it against central finite
differences."""

import time

import numpy as np

import dloop as dl

rng = np.random.default_rng(0)
x = rng.random(100_000)
n = rng.integers(0, 200, size=100_000)          # a different trip count per element


def simulate(x):
    def body(i, v):
        return v * 0.95 + np.sin(v) * x * 0.1       # NumPy calls on traced values are captured
    return dl.fori_loop(0, n, body, x)              # element j runs n[j] times


loss = lambda x: simulate(x).sum()  # noqa: E731
g = dl.grad(loss)(x)                              # compiles on the first call
start = time.perf_counter()
g = dl.grad(loss)(x)
elapsed = time.perf_counter() - start
tape_bytes = dl.memory_stats()["adstack_bytes_used"]

# Independent check: the program is elementwise, so perturbing every element at once gives
# each element's derivative by central differences (float64).
eps = 1e-6
run = dl.jit(simulate)
fd = (run(x + eps) - run(x - eps)) / (2 * eps)
err = np.max(np.abs(g - fd) / np.maximum(np.abs(fd), 1.0))

print(f"gradient of {x.size:,} elements, {n.sum():,} loop iterations in all: "
      f"{elapsed * 1e3:.1f} ms on the '{dl.config.backend or 'cpu'}' backend")
print(f"{'j':>5} {'n[j]':>5} {'dloop gradient':>16} {'finite difference':>18}")
for j in range(5):
    print(f"{j:>5} {n[j]:>5} {g[j]:>16.10f} {fd[j]:>18.10f}")
print(f"max relative difference from finite differences: {err:.2e}")
print(f"adstack memory used: {tape_bytes / 1e6:.1f} MB "
      f"(= iterations x 8 bytes: {n.sum() * 8 / 1e6:.1f} MB)")
assert err < 1e-6, "gradient check failed"
