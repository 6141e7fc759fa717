"""Recover a ball's drag and restitution coefficients from where it lands.

Sixty balls are thrown at different speeds and angles. Each flies with quadratic air drag and
bounces on the ground, losing a fraction of its vertical speed at every bounce, until it
bounces too weakly to leave the ground again: a different number of time steps per ball,
which is what a per-element `while_loop` runs. We observe the first three landing points of
every ball, with 5 cm of measurement noise, and fit the drag coefficient k and the
coefficient of restitution e with `scipy.optimize.minimize`, given dloop's gradient.

Run: python examples/projectile_fit.py [folder for the PNG]"""

import time

import numpy as np
from scipy.optimize import minimize

import dloop as dl
from _figures import pyplot, save, skipped

G = 9.81            # m/s^2
DT = 2e-3           # s, the time step
V_STOP = 1.0        # m/s: a ball bouncing up slower than this has stopped
# The parameters: k in units of 0.01/m (a tennis ball: about 2) and e, both of order one,
# as the optimizer's first steps assume.
TRUE = np.array([2.0, 0.70])
NOISE = 0.05                         # m, standard deviation of each observed landing point

rng = np.random.default_rng(1)
n_balls = 60
speed = rng.uniform(10.0, 16.0, n_balls)
angle = np.radians(rng.uniform(35.0, 65.0, n_balls))
start = {"x": np.zeros(n_balls), "y": np.full(n_balls, 1.0),
         "vx": speed * np.cos(angle), "vy": speed * np.sin(angle),
         "bounces": np.zeros(n_balls, np.int64),
         "rebound": np.zeros(n_balls),     # vertical speed after the last bounce
         "steps": np.zeros(n_balls, np.int64),
         "landing0": np.zeros(n_balls), "landing1": np.zeros(n_balls),
         "landing2": np.zeros(n_balls)}


def advance(x, y, vx, vy, k, dt):
    """A semi-implicit Euler step of length dt under gravity and quadratic drag."""
    drag = 0.01 * k * np.sqrt(vx ** 2 + vy ** 2)
    vx, vy = vx - dt * drag * vx, vy - dt * (G + drag * vy)
    return x + dt * vx, y + dt * vy, vx, vy


def step(s, k, e):
    """One time step; a ball that would go below the ground bounces within the step.

    Written with NumPy functions only, so it runs both inside dloop's loop and on plain
    arrays (for the plotted trajectories)."""
    x, y, vx, vy = advance(s["x"], s["y"], s["vx"], s["vy"], k, DT)
    hit = y < 0.0
    # The bounce happens where in the step the ball crosses the ground, and the rest of the
    # step is flown upwards. Then the landing point and the state after the bounce change
    # smoothly with k and e, instead of jumping when the crossing moves to the next step.
    # The denominator is 1 where the ball flies on, so the unused branch holds no 0/0.
    frac = s["y"] / np.where(hit, s["y"] - y, 1.0)
    x_c = s["x"] + frac * (x - s["x"])
    vx_c = s["vx"] + frac * (vx - s["vx"])
    rebound = -e * (s["vy"] + frac * (vy - s["vy"]))
    bx, by, bvx, bvy = advance(x_c, 0.0, vx_c, rebound, k, (1.0 - frac) * DT)
    new = {"x": np.where(hit, bx, x), "y": np.where(hit, np.maximum(by, 0.0), y),
           "vx": np.where(hit, bvx, vx), "vy": np.where(hit, bvy, vy),
           "bounces": s["bounces"] + hit,
           "rebound": np.where(hit, rebound, s["rebound"]),
           "steps": s["steps"] + 1}
    for j in range(3):
        key = f"landing{j}"
        new[key] = np.where(hit & (s["bounces"] == j), x_c, s[key])
    return new


def flying(s):
    """A ball flies until it rebounds too slowly; we follow it at least to its third landing,
    which we observe (a very low e would stop it before)."""
    return (s["bounces"] < 3) | (s["rebound"] > V_STOP)


def simulate(params):
    """Every ball's state when it has stopped."""
    k, e = params[0], params[1]
    # Element j of the carry keeps stepping while ball j flies: each ball runs its own
    # number of steps, and reverse mode replays exactly those.
    return dl.while_loop(flying, lambda s: step(s, k, e), start)


def landing_points(params):
    """The first three landing points of every ball, shape (3, n_balls)."""
    end = simulate(params)
    return np.stack([end["landing0"], end["landing1"], end["landing2"]])


observed = dl.jit(landing_points)(TRUE) + NOISE * rng.standard_normal((3, n_balls))


def misfit(params):
    """Squared landing-point errors in units of the noise: about 180 at the true values."""
    return (((landing_points(params) - observed) / NOISE) ** 2).sum()


value_and_grad = dl.value_and_grad(misfit)

# The gradient, checked once against central differences of the compiled forward pass.
guess = np.array([4.0, 0.50])
value, g = value_and_grad(guess)
forward, h = dl.jit(misfit), 1e-6
fd = np.array([(forward(guess + h * d) - forward(guess - h * d)) / (2 * h) for d in np.eye(2)])
print(f"gradient at the guess  dloop: {g}   central differences: {fd}")
assert np.allclose(g, fd, rtol=1e-4), "gradient check failed"

begin = time.perf_counter()
fit = minimize(lambda p: tuple(map(np.asarray, value_and_grad(p))), guess, jac=True,
               method="L-BFGS-B", bounds=[(0.0, 20.0), (0.1, 0.95)])
elapsed = time.perf_counter() - begin
steps = dl.jit(simulate)(fit.x)["steps"]

print(f"{fit.nfev} evaluations of the misfit and its gradient in {elapsed:.2f} s "
      f"({steps.min()} to {steps.max()} time steps per ball)")
print(f"{'':>16} {'k (0.01/m)':>10} {'e':>8}")
for name, p in (("true", TRUE), ("initial guess", guess), ("recovered", fit.x)):
    print(f"{name:>16} {p[0]:>10.5f} {p[1]:>8.4f}")
print(f"misfit {value:.0f} at the guess, {fit.fun:.0f} at the fit "
      f"(about {3 * n_balls} expected from the noise alone)")
# With 180 landing points at 5 cm of noise, both coefficients are pinned to well under 2%.
assert np.all(np.abs(fit.x - TRUE) <= 0.02 * TRUE), "the fit did not recover k and e"


def trajectory(params, balls):
    """x(t), y(t) of some balls, stepped in plain NumPy with the same step function."""
    s = {key: value[balls] for key, value in start.items()}
    path = [(s["x"], s["y"])]
    while np.any(flying(s)):
        moving = flying(s)
        new = step(s, params[0], params[1])
        s = {key: np.where(moving, new[key], s[key]) for key in s}
        path.append((s["x"], s["y"]))
    return np.array(path)        # (time, x or y, ball)


plt = pyplot()
if plt is None:
    skipped("projectile_fit.png")
else:
    balls = [0, 1, 2, 3]
    fig, ax = plt.subplots(figsize=(8, 4))
    for params, style, label in ((guess, ":", "initial guess"), (fit.x, "-", "fitted")):
        path = trajectory(params, balls)
        for j in range(len(balls)):
            ax.plot(path[:, 0, j], path[:, 1, j], style, color=f"C{j}", lw=1,
                    label=label if j == 0 else None)
    for j, ball in enumerate(balls):
        ax.plot(observed[:, ball], np.zeros(3), "x", color=f"C{j}", ms=8,
                label="observed landings" if j == 0 else None)
    ax.set(xlabel="x (m)", ylabel="height (m)",
           title=f"fitted k = {fit.x[0] / 100:.4f}/m, e = {fit.x[1]:.3f} "
                 f"(true {TRUE[0] / 100}, {TRUE[1]})")
    ax.legend()
    fig.tight_layout()
    save(fig, "projectile_fit.png")
