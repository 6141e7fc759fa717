"""fori_loop gradients against central finite differences (float64) and closed forms."""

import numpy as np

import dloop as dl
from helpers import assert_close, damped_sine, finite_difference


def _elementwise_fd(f, x, eps=1e-6):
    """For per-element programs (element j depends on x[j] only), perturbing every element at
    once gives each element's derivative: central differences, all elements in one pass."""
    return (f(x + eps) - f(x - eps)) / (2 * eps)


def test_per_element_bounds(backend):
    rng = np.random.default_rng(1)
    x = rng.random(200)
    n = rng.integers(0, 60, size=200)

    def loss(x):
        return dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x).sum()

    g = dl.grad(loss)(x)
    assert g.dtype == np.float64 and g.shape == x.shape
    assert_close(g, _elementwise_fd(lambda x: damped_sine(x, n), x), rtol=1e-6)


def test_scalar_bounds_elementwise_body(backend):
    x = np.linspace(0.2, 2.0, 9)

    def loss(x):
        return (dl.fori_loop(0, 7, lambda i, v: np.tanh(v) * x + 0.1 * i, x) ** 2).sum()

    def ref(x):
        v = x.copy()
        for i in range(7):
            v = np.tanh(v) * x + 0.1 * i
        return (v ** 2).sum()

    assert_close(dl.grad(loss)(x), finite_difference(ref, x), rtol=1e-6)


def test_closed_form_geometric_growth(backend):
    # v_n = x * a**n, so d(sum v_n)/dx_j = a**n_j.
    x = np.array([1.0, 2.0, 3.0, 4.0])
    n = np.array([0, 1, 5, 10])
    g = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 1.1, x).sum())(x)
    assert_close(g, 1.1 ** n, rtol=1e-12)


def test_nested_inner_bound_is_outer_index(backend):
    n = np.array([0, 1, 3, 6])
    x = np.array([0.3, 0.5, 0.7, 0.9])

    def run(x, xp_sin):
        def outer(i, v):
            inner = dl.fori_loop(0, i, lambda k, w: w * 0.9 + xp_sin(w) * 0.05 * k, v)
            return inner + 0.1 * x * v
        return dl.fori_loop(0, n, outer, x)

    def ref(x):
        out = x.copy()
        for j in range(4):
            v = x[j]
            for i in range(n[j]):
                w = v
                for k in range(i):
                    w = w * 0.9 + np.sin(w) * 0.05 * k
                v = w + 0.1 * x[j] * v
            out[j] = v
        return out

    g = dl.grad(lambda x: run(x, np.sin).sum())(x)
    assert_close(g, _elementwise_fd(ref, x), rtol=1e-6)


def test_tuple_carry(backend):
    x = np.array([0.5, 1.0, 1.5])
    n = np.array([4, 0, 9])

    def sim(x):
        def body(i, c):
            p, q = c
            return p + 0.1 * q, q - 0.1 * np.sin(p) * x
        return dl.fori_loop(0, n, body, (x, np.zeros_like(x)))

    def ref(x):
        p, q = x.copy(), np.zeros_like(x)
        for j in range(3):
            for _ in range(n[j]):
                p[j], q[j] = p[j] + 0.1 * q[j], q[j] - 0.1 * np.sin(p[j]) * x[j]
        return p * q + p

    g = dl.grad(lambda x: (lambda pq: (pq[0] * pq[1] + pq[0]).sum())(sim(x)))(x)
    assert_close(g, _elementwise_fd(ref, x), rtol=1e-6)


def test_shared_scalar_parameter_is_summed_deterministically(backend):
    rng = np.random.default_rng(2)
    x = rng.random(5000)
    n = rng.integers(0, 30, size=5000)

    def loss(k):
        return dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * k * 0.1, x).sum()

    def ref(k):
        v = x.copy()
        for i in range(n.max()):
            v = np.where(i < n, v * 0.95 + np.sin(v) * k * 0.1, v)
        return v.sum()

    k = np.float64(0.7)
    g = dl.grad(loss)(k)
    assert np.shape(g) == ()
    assert_close(g, finite_difference(lambda k: ref(k), np.array(0.7)), rtol=1e-6)
    runs = {dl.grad(loss)(k).tobytes() for _ in range(5)}
    assert len(runs) == 1, "gradients of a shared parameter differ between runs"


def test_value_and_grad_two_argnums(backend):
    x = np.array([0.1, 0.4, 0.8])
    a = np.array(1.3)
    n = np.array([3, 5, 2])

    def f(x, a):
        return dl.fori_loop(0, n, lambda i, v: v * 0.9 + np.cos(v * a) * 0.1, x).sum() * a

    def ref(x, a):
        v = x.copy()
        for j in range(3):
            for _ in range(n[j]):
                v[j] = v[j] * 0.9 + np.cos(v[j] * a) * 0.1
        return v.sum() * a

    value, (gx, ga) = dl.value_and_grad(f, argnums=(0, 1))(x, a)
    assert_close(value, ref(x, a), rtol=1e-12)
    assert_close(gx, finite_difference(lambda x: ref(x, a), x), rtol=1e-6)
    assert_close(ga, finite_difference(lambda a: ref(x, a), a), rtol=1e-6)
    # argnums as NumPy integers, as np.arange makes them (refused before)
    _, (gx2, ga2) = dl.value_and_grad(f, argnums=(np.int64(0), np.int32(1)))(x, a)
    np.testing.assert_array_equal(gx2, gx)
    np.testing.assert_array_equal(ga2, ga)
    np.testing.assert_array_equal(dl.grad(f, argnums=np.int64(1))(x, a), ga)


def test_gradients_that_are_one_value_are_separate_arrays(backend):
    """The gradients of (a + b) by a and by b are one value of the program: both came back
    as one array, and updating one in place (an optimizer's g_a *= lr) changed the other."""
    a, b = np.linspace(0.1, 1.0, 5), np.linspace(1.0, 2.0, 5)

    def loss(a, b):
        return dl.fori_loop(0, 3, lambda i, v: v * 0.5, a + b).sum()
    ga, gb = dl.grad(loss, argnums=(0, 1))(a, b)
    _, pullback = dl.vjp(lambda a, b: a + b, a, b)
    pa, pb = pullback(np.ones(5))
    ga *= 2.0
    pa *= 2.0
    assert_close(ga, np.full(5, 0.25), rtol=0, atol=0)
    assert_close(gb, np.full(5, 0.125), rtol=0, atol=0)
    assert_close(pb, np.ones(5), rtol=0, atol=0)
    # One computed value (on Vulkan a device array, which has no copy() of its own).
    _, pullback = dl.vjp(lambda a, b: np.sin(a + b), a, b)
    pa, pb = pullback(np.ones(5))
    pa *= 2.0
    assert_close(pb, np.cos(a + b), rtol=1e-15, atol=0)


def test_float32(backend):
    rng = np.random.default_rng(3)
    x = rng.random(50).astype(np.float32)
    n = rng.integers(0, 20, size=50)
    g = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * np.float32(0.95) +
                                       np.sin(v) * x * np.float32(0.1), x).sum())(x)
    assert g.dtype == np.float32
    expected = _elementwise_fd(lambda x: damped_sine(x, n), x.astype(np.float64))
    assert_close(g, expected, rtol=1e-3)


def test_vjp_random_cotangent(backend):
    rng = np.random.default_rng(4)
    x = rng.random(30)
    n = rng.integers(0, 25, size=30)
    ct = rng.standard_normal(30)
    out, f_vjp = dl.vjp(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1,
                                               x), x)
    assert_close(out, damped_sine(x, n), rtol=1e-12)
    (g,) = f_vjp(ct)
    assert_close(g, ct * _elementwise_fd(lambda x: damped_sine(x, n), x), rtol=1e-6)
    (g2,) = f_vjp(2 * ct)       # the tape survives a first backward sweep
    assert_close(g2, 2 * g, rtol=1e-12)


def test_vjp_whose_outputs_are_its_residuals(backend):
    """exp's output is the residual its pullback reads, and so is the aux: the caller gets
    copies (Vulkan's device arrays have no copy method: vjp raised AttributeError), and
    changing them in place leaves the pullback alone."""
    x = np.linspace(-1.0, 1.0, 6)
    def f(x):
        y = np.exp(x)
        return y, y
    out, f_vjp, aux = dl.vjp(f, x, has_aux=True)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-14)
    np.testing.assert_allclose(aux, np.exp(x), rtol=1e-14)
    out += 1.0
    aux += 1.0
    (g,) = f_vjp(np.full(6, 2.0))
    np.testing.assert_allclose(g, 2.0 * np.exp(x), rtol=1e-14)


def test_all_zero_trip_counts(backend):
    x = np.linspace(0, 1, 8)
    g = dl.grad(lambda x: (dl.fori_loop(0, np.zeros(8, np.int64), lambda i, v: v * 3.0, x) ** 2)
                .sum())(x)
    assert_close(g, 2 * x, rtol=1e-12)


def test_empty_array(backend):
    x = np.zeros(0)
    g = dl.grad(lambda x: dl.fori_loop(0, np.zeros(0, np.int64), lambda i, v: v * 3.0, x).sum())(x)
    assert g.shape == (0,) and g.dtype == np.float64


def test_gather_from_constant_table(backend):
    table = np.array([0.5, -0.25, 0.75, 0.1])
    x = np.array([0.3, 0.6, 0.9])
    n = np.array([4, 1, 3])

    def f(x):
        def body(i, v):
            xp = v.__array_namespace__()
            return v + xp.asarray(table)[i] * np.sin(v)
        return dl.fori_loop(0, n, body, x)

    def ref(x):
        v = x.copy()
        for j in range(3):
            for i in range(n[j]):
                v[j] = v[j] + table[i] * np.sin(v[j])
        return v

    assert_close(dl.grad(lambda x: f(x).sum())(x), _elementwise_fd(ref, x), rtol=1e-6)


def test_grad_computes_no_value_it_discards(backend, monkeypatch):
    """grad's program leaves out what only the loss's value needs (here the final sum, a host
    step: on a GPU, a read of the whole carry), and gives value_and_grad's gradient; with
    has_aux, the aux is still computed."""
    from dloop.ir import prims
    from dloop.runtime import execute
    sums = []
    reduce = execute.HOST_IMPLS[prims.reduce_p]

    def counted(*args, **params):
        sums.append(params)
        return reduce(*args, **params)
    monkeypatch.setitem(execute.HOST_IMPLS, prims.reduce_p, counted)
    n = np.array([3, 0, 5, 2])
    x = np.array([0.5, 1.0, 1.5, 2.0])

    def loss(x):
        return dl.fori_loop(0, n, lambda i, v: v * 0.9 + 0.01 * v * v, x).sum()
    g = dl.grad(loss)(x)
    assert not sums
    value, same = dl.value_and_grad(loss)(x)
    assert len(sums) == 1
    np.testing.assert_array_equal(g, same)
    with_aux, aux = dl.grad(lambda x: (loss(x), x.max()), has_aux=True)(x)
    np.testing.assert_array_equal(with_aux, g)
    assert float(aux) == 2.0
    v, d = x.copy(), np.ones_like(x)
    for i in range(5):
        live = i < n
        d = np.where(live, d * (0.9 + 0.02 * v), d)
        v = np.where(live, v * 0.9 + 0.01 * v * v, v)
    assert_close(g, d, rtol=1e-13)
    assert_close(value, v.sum(), rtol=1e-13)


def test_per_element_lower_and_upper_bounds_index_in_body(backend):
    """Reversed loops whose lanes run different spans from different starts (empty and
    inverted ones included) in each vector group: every element sees its own indices hi - 1
    down to lo, in the order the forward sweep ran them forward."""
    rng = np.random.default_rng(7)
    size = 203
    x = rng.uniform(0.2, 1.5, size)
    lo = rng.integers(-5, 20, size)
    hi = lo + rng.integers(-3, 30, size)

    def step(i, v, x):
        return v * np.cos(0.1 * i) + 0.2 * np.sin(v * x + 0.05 * i)

    def ref(x):
        out = x.copy()
        for j in range(size):
            v = x[j]
            for i in range(lo[j], hi[j]):
                v = step(i, v, x[j])
            out[j] = v
        return out

    g = dl.grad(lambda x: dl.fori_loop(lo, hi, lambda i, v: step(i, v, x), x).sum())(x)
    assert_close(g, _elementwise_fd(ref, x), rtol=1e-6)


def test_a_pullback_uses_the_values_of_its_forward_pass(backend):
    """A pullback runs later than its forward pass: an input or a captured table changed in
    place meanwhile (an optimizer's x -= step) silently changed the gradient."""
    x0, table0 = np.array([0.3, 0.5, 0.9]), np.array([0.8, 0.9, 0.7])
    n = np.array([2, 3, 4])
    x, table = x0.copy(), table0.copy()

    def f(x):
        return dl.fori_loop(0, n, lambda i, v: v * v * table, x)

    def reference(x):
        for _ in range(4):
            x = np.where(n > _, x * x * table0, x)
        return x.sum()
    _, pullback = dl.vjp(f, x)
    x += 0.1
    table[:] = 0.5
    assert_close(pullback(np.ones(3))[0], finite_difference(reference, x0), rtol=1e-7)
