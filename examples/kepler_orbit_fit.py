"""Fit a planet's orbital elements to observed positions, through Kepler's equation.

Where a body is on its orbit at time t follows from Kepler's equation M = E - e sin E: the
mean anomaly M = 2 pi (t - tau) / P grows uniformly in time, and the eccentric anomaly E,
which gives the position, is its root. Each observation time is solved by Newton's method
until the residual is below 1e-13, a per-element `while_loop` whose iteration count depends
on M and e. dloop differentiates through those iterations; we compare its derivatives with
the implicit-function theorem's, then fit the five orbital elements to 40 noisy positions
with `scipy.optimize.minimize`.

Run: python examples/kepler_orbit_fit.py [folder for the PNG]"""

import time

import numpy as np
from scipy.optimize import minimize

import dloop as dl
from _figures import pyplot, save, skipped

NAMES = ("a (AU)", "e", "omega", "P (yr)", "tau (yr)")
# semi-major axis, eccentricity, argument of periapsis, period, time of periapsis
TRUE = np.array([1.5, 0.35, 0.8, 1.8, 0.3])
GUESS = np.array([1.3, 0.2, 0.5, 1.7, 0.2])
NOISE = 0.01             # AU in each coordinate

rng = np.random.default_rng(2)
times = np.sort(rng.uniform(0.0, 3.0, 40))


def kepler(M, e):
    """E with E - e sin E = M, per element, and the Newton iterations each took."""
    def unsolved(c):
        E, _ = c
        return np.abs(E - e * np.sin(E) - M) > 1e-13

    def newton(c):
        E, k = c
        return E - (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E)), k + 1

    # Starting from E = M, Newton's method converges for every M when e is below about 0.8.
    return dl.while_loop(unsolved, newton, (M, np.zeros(M.shape, np.int64)))


def positions(elements, t):
    """x and y of the body at times t, shape (2, len(t))."""
    a, e, omega, period, tau = (elements[j] for j in range(5))
    E, _ = kepler(2 * np.pi * (t - tau) / period, e)
    # In the orbit's own frame (periapsis along x), then turned by omega.
    u, w = a * (np.cos(E) - e), a * np.sqrt(1.0 - e ** 2) * np.sin(E)
    return np.stack([u * np.cos(omega) - w * np.sin(omega),
                     u * np.sin(omega) + w * np.cos(omega)])


observed = dl.jit(positions)(TRUE, times) + NOISE * rng.standard_normal((2, times.size))

# dloop's derivatives of E through the Newton iterations, against the implicit-function
# theorem applied to F(E, M, e) = E - e sin E - M = 0 at the converged E:
#   dE/dM = 1 / (1 - e cos E),  dE/de = sin E / (1 - e cos E).
M = 2 * np.pi * (times - TRUE[4]) / TRUE[3]
e = np.full(times.size, TRUE[1])
E, pullback = dl.vjp(lambda M, e: kepler(M, e)[0], M, e)
dM, de = pullback(np.ones_like(E))        # elementwise, so these are per-element derivatives
iterations = dl.jit(kepler)(M, e)[1]
implicit_dM, implicit_de = 1 / (1 - e * np.cos(E)), np.sin(E) / (1 - e * np.cos(E))
print(f"Newton iterations per observation: {iterations.min()} to {iterations.max()}")
print(f"{'t (yr)':>7} {'dE/dM dloop':>14} {'implicit':>14} {'dE/de dloop':>14} {'implicit':>14}")
for j in range(0, times.size, 8):
    print(f"{times[j]:>7.3f} {dM[j]:>14.10f} {implicit_dM[j]:>14.10f} "
          f"{de[j]:>14.10f} {implicit_de[j]:>14.10f}")
worst = max(np.max(np.abs(dM - implicit_dM)), np.max(np.abs(de - implicit_de)))
print(f"largest difference: {worst:.1e}")
assert worst < 1e-9, "dloop's derivative of the Newton solve disagrees with the implicit one"


def misfit(elements):
    """Squared position errors in units of the noise: about 80 at the true elements."""
    return (((positions(elements, times) - observed) / NOISE) ** 2).sum()


value_and_grad = dl.value_and_grad(misfit)
start_value = float(value_and_grad(GUESS)[0])
begin = time.perf_counter()
fit = minimize(lambda x: tuple(map(np.asarray, value_and_grad(x))), GUESS, jac=True,
               method="L-BFGS-B",
               bounds=[(0.1, 10.0), (0.0, 0.8), (None, None), (0.5, 5.0), (None, None)])
elapsed = time.perf_counter() - begin
print(f"{fit.nfev} evaluations of the misfit and its gradient in {elapsed:.2f} s; "
      f"misfit {start_value:.0f} -> {fit.fun:.0f}")
print(f"{'':>10}" + "".join(f"{n:>10}" for n in NAMES))
for name, x in (("true", TRUE), ("guess", GUESS), ("fitted", fit.x)):
    print(f"{name:>10}" + "".join(f"{c:>10.4f}" for c in x))
# 40 positions at 1% of the orbit's size pin every element to better than 0.02.
assert np.max(np.abs(fit.x - TRUE)) < 0.02, "the fit did not recover the orbit"

plt = pyplot()
if plt is None:
    skipped("kepler_orbit_fit.png")
else:
    fig, ax = plt.subplots(figsize=(5.5, 5), layout="constrained")
    for elements, style, label in ((GUESS, ":", "initial guess"), (fit.x, "-", "fitted"),
                                   (TRUE, "k--", "true")):
        one_period = np.linspace(0.0, elements[3], 400)
        orbit = dl.jit(positions)(elements, one_period)
        ax.plot(orbit[0], orbit[1], style, label=label)
    ax.plot(observed[0], observed[1], "k.", label="observed")
    ax.plot(0, 0, "*", color="orange", ms=14, label="star")
    ax.set(xlabel="x (AU)", ylabel="y (AU)", aspect="equal", title="Kepler orbit fit")
    ax.legend(loc="center", bbox_to_anchor=(0.45, 0.35), fontsize="small")
    save(fig, "kepler_orbit_fit.png")
