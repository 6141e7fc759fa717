"""One loss, written once against the array API, differentiated on several array libraries.

Pendulums with air damping are released from different angles and each is stepped for its
own number of time steps (a per-element `fori_loop` with an integer array of bounds). The
loss is their total remaining energy. It uses only the array-API namespace of its inputs, so
the same function runs on NumPy arrays, array_api_strict arrays (a library holding to the
standard and nothing else), PyTorch CPU tensors and, on a machine with a GPU, CuPy arrays.
dloop hands back gradients in the caller's library, and they are the same in every one.

Run: python examples/array_libraries.py [folder for the PNG]"""

import importlib

import array_api_compat
import numpy as np

import dloop as dl
from _figures import pyplot, save, skipped

G, DT = 9.81, 1e-3


def remaining_energy(angle, steps, params):
    """Energy per unit mass left in each pendulum after its steps, summed."""
    xp = array_api_compat.array_namespace(angle, params)
    damping, length = params[0], params[1]

    def tick(i, state):
        theta, omega = state
        omega = omega - DT * (G / length * xp.sin(theta) + damping * omega)
        return theta + DT * omega, omega

    theta, omega = dl.fori_loop(0, steps, tick, (angle, xp.zeros_like(angle)))
    return xp.sum(0.5 * (length * omega) ** 2 + G * length * (1.0 - xp.cos(theta)))


rng = np.random.default_rng(4)
angle = rng.uniform(0.2, 2.5, 24)                 # released from rest, in radians
steps = rng.integers(500, 4000, 24)               # observed for 0.5 to 4 s
params = np.array([0.3, 1.2])                      # damping in 1/s, length in m


def numpy_of(x, library):
    return x.get() if library == "cupy" else np.from_dlpack(x)


def cupy_usable():
    try:
        cupy = importlib.import_module("cupy")
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:          # not installed, no driver, or no device: all mean no CuPy
        return False


gradient = dl.grad(remaining_energy, argnums=(0, 2))
results = {}
for library in ("numpy", "array_api_strict", "torch", "cupy"):
    if library == "cupy" and not cupy_usable():
        print(f"{library:>17}: skipped, no CUDA device here")
        continue
    try:
        module = importlib.import_module(library)
    except ImportError:
        print(f"{library:>17}: skipped, not installed")
        continue
    convert = module.from_numpy if library == "torch" else module.asarray
    args = [convert(a) for a in (angle, steps, params)]
    try:
        d_angle, d_params = gradient(*args)
    except dl.DloopNotImplementedError as err:
        # CuPy arrays need the CUDA backend; this version of dloop says so instead of copying.
        print(f"{library:>17}: skipped, {str(err).splitlines()[0]}")
        continue
    kind = f"{type(d_angle).__module__}.{type(d_angle).__name__}"
    results[library] = (numpy_of(d_angle, library), numpy_of(d_params, library))
    print(f"{library:>17}: gradient of type {kind}; d/d(damping, length) = "
          f"{results[library][1]}")

reference = results["numpy"]
for library, (d_angle, d_params) in results.items():
    # The host libraries share the cpu backend and its bits; CuPy runs on the cuda backend,
    # whose operations round in another order: the same gradient to rounding.
    if library == "cupy":
        same = np.allclose(d_angle, reference[0], rtol=1e-12, atol=0) and \
            np.allclose(d_params, reference[1], rtol=1e-12, atol=0)
        word = "equal to rounding to" if same else "DIFFERENT from"
    else:
        same = np.array_equal(d_angle, reference[0]) and np.array_equal(d_params, reference[1])
        word = "identical to" if same else "DIFFERENT from"
    print(f"{library:>17}: {word} NumPy's gradient")
    assert same, f"{library} gave a different gradient"

# An independent check of the shared answer: central differences in the pendulum length.
h = 1e-6
energy = dl.jit(remaining_energy)
fd = (energy(angle, steps, params + [0, h]) - energy(angle, steps, params - [0, h])) / (2 * h)
print(f"d/d(length): dloop {reference[1][1]:.8f}, central differences {fd:.8f}")
assert abs(reference[1][1] - fd) < 1e-6 * max(1.0, abs(fd)), "gradient check failed"

plt = pyplot()
if plt is None:
    skipped("array_libraries.png")
else:
    fig, ax = plt.subplots(figsize=(8, 3.8), layout="constrained")
    markers = {"numpy": "o", "array_api_strict": "s", "torch": "^", "cupy": "x"}
    order = np.argsort(angle)
    for library, (d_angle, _) in results.items():
        ax.plot(angle[order], d_angle[order], markers[library], mfc="none", ms=9 - 2 *
                list(results).index(library), label=library)
    ax.set(xlabel="release angle (rad)", ylabel="d energy / d angle",
           title="one array-API loss, the same gradient from each library")
    ax.legend()
    save(fig, "array_libraries.png")
