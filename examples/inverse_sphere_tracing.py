"""Recover a scene's geometry from a depth image, through sphere tracing.

The scene is a ground plane with two domes (spheres centred on the ground), blended smoothly
into it, described by a signed distance function (SDF). A camera above looks down at it. Each
pixel's ray advances by the distance to the nearest surface until it is within 1e-5 of one:
rays that meet the plane head-on stop after a few steps, rays that graze a dome take dozens.
That is a per-element `while_loop`, one element per pixel. From a target depth image we recover
the domes' positions and radii by gradient descent on the squared depth error.

Run: python examples/inverse_sphere_tracing.py [folder for the PNG]"""

import time

import numpy as np

import dloop as dl
from _figures import pyplot, save, skipped

SIDE = 64                      # pixels per image side
TOL, FAR, MAX_STEPS = 1e-5, 40.0, 300
BLEND = 0.5                    # how far the smooth union spreads a dome into the ground
# x, z and radius of each dome: the truth, and where the descent starts.
TRUE = np.array([-0.8, 0.6, 1.0, 1.1, -0.4, 0.7])
START = np.array([-0.4, 0.2, 0.8, 0.7, 0.0, 0.9])

# A pinhole camera 7 m above the scene, looking down at it, one ray per pixel. From nearly
# overhead no dome hides the ground behind it, so every pixel's depth changes smoothly with
# the scene; at a silhouette edge it would jump, and the gradient would miss the jump.
tilt = np.radians(85.0)
u, v = np.meshgrid(np.linspace(-0.4, 0.4, SIDE), np.linspace(0.4, -0.4, SIDE))
forward, up = np.array([0.0, -np.sin(tilt), np.cos(tilt)]), np.array([0.0, np.cos(tilt),
                                                                      np.sin(tilt)])
rays = forward[:, None] + u.ravel() * np.array([1.0, 0.0, 0.0])[:, None] + \
    v.ravel() * up[:, None]
rays /= np.linalg.norm(rays, axis=0)
origin = -7.0 * forward
dx, dy, dz = rays


def smooth_min(a, b):
    """A union of two shapes with a rounded seam of width BLEND (Quilez's polynomial smooth
    minimum). It never exceeds min(a, b), so sphere tracing stays safe."""
    h = np.clip(0.5 + 0.5 * (b - a) / BLEND, 0.0, 1.0)
    return b + (a - b) * h - BLEND * h * (1.0 - h)


def scene(t, p):
    """Signed distance to the scene at the point t along each ray."""
    x, y, z = origin[0] + t * dx, origin[1] + t * dy, origin[2] + t * dz
    dist = y                                       # the ground plane y = 0
    for cx, cz, r in ((p[0], p[1], p[2]), (p[3], p[4], p[5])):
        dist = smooth_min(dist, np.sqrt((x - cx) ** 2 + y ** 2 + (z - cz) ** 2) - r)
    return dist


def depth(p):
    """The distance along each pixel's ray to the first surface, and the steps it took."""
    def marching(c):
        t, dist, steps = c
        return (dist > TOL) & (t < FAR) & (steps < MAX_STEPS)

    def march(c):
        t, dist, steps = c
        return t + dist, scene(t + dist, p), steps + 1

    start = (np.zeros(SIDE * SIDE), scene(0.0, p), np.zeros(SIDE * SIDE, np.int64))
    t, _, steps = dl.while_loop(marching, march, start)
    return t, steps


target, target_steps = dl.jit(depth)(TRUE)
assert np.all(target < FAR), "every ray should meet the ground"
print(f"target image: {SIDE}x{SIDE} rays, {target_steps.min()} to {target_steps.max()} "
      f"sphere-tracing steps per ray ({target_steps.sum():,} in all)")


def loss(p):
    return ((depth(p)[0] - target) ** 2).mean()


value_and_grad = dl.value_and_grad(loss)

# Adam: gradient descent with a step per parameter scaled by the gradient's running size, so
# positions and radii move at similar rates even though the image reacts to them unequally.
# The step shrinks by 3% per iteration to settle at the end.
p, m, s = START.copy(), np.zeros(6), np.zeros(6)
beta1, beta2 = 0.9, 0.99
history = []
begin = time.perf_counter()
for it in range(1, 101):
    value, g = value_and_grad(p)
    history.append(float(value))
    m = beta1 * m + (1 - beta1) * g
    s = beta2 * s + (1 - beta2) * g ** 2
    rate = 0.04 * 0.97 ** it
    p = p - rate * (m / (1 - beta1 ** it)) / (np.sqrt(s / (1 - beta2 ** it)) + 1e-12)
elapsed = time.perf_counter() - begin

print(f"{len(history)} gradient steps in {elapsed:.2f} s; loss {history[0]:.3g} -> "
      f"{history[-1]:.3g}")
print(f"{'':>10}" + "".join(f"{n:>8}" for n in ("x1", "z1", "r1", "x2", "z2", "r2")))
for name, q in (("true", TRUE), ("start", START), ("recovered", p)):
    print(f"{name:>10}" + "".join(f"{c:>8.4f}" for c in q))
# The target is noise-free: every coordinate comes back to within 1 cm.
assert np.max(np.abs(p - TRUE)) < 1e-2, "the descent did not recover the scene"

plt = pyplot()
if plt is None:
    skipped("inverse_sphere_tracing.png")
else:
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.2), layout="constrained")
    images = (("target", target), ("start", dl.jit(depth)(START)[0]),
              ("recovered", dl.jit(depth)(p)[0]))
    for ax, (title, image) in zip(axes, images):
        shown = ax.imshow(image.reshape(SIDE, SIDE), cmap="viridis_r", vmin=target.min(),
                          vmax=target.max())
        ax.set(title=f"{title} depth", xticks=[], yticks=[])
    fig.colorbar(shown, ax=axes[:3], label="depth (m)")
    axes[3].semilogy(history)
    axes[3].set(title="loss", xlabel="gradient step")
    save(fig, "inverse_sphere_tracing.png")
