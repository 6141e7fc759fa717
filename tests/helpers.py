"""Independent answers for gradient tests: central finite differences in float64."""

import numpy as np


def finite_difference(f, x, eps=1e-6):
    """Central differences of a scalar function f at float64 array x, element by element."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros(x.shape)                # C order: reshape(-1) must be a view of it
    flat = g.reshape(-1)
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        flat[k] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def assert_close(actual, expected, rtol, atol=0.0):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = np.maximum(np.abs(expected), 1.0) if atol == 0.0 else np.abs(expected)
    err = np.abs(actual - expected)
    # A NaN where the answer is a number is off too (NaN > tol is False).
    bad = (err > rtol * scale + atol) | (np.isnan(actual) & ~np.isnan(expected))
    assert not bad.any(), f"max error {err.max():.3e}; {bad.sum()} of {bad.size} entries off"


def damped_sine(x, n):
    """Plain-Python reference: v <- 0.95 v + 0.1 x sin(v), n[j] times for element j."""
    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    for j in np.ndindex(x.shape):
        v = x[j]
        for _ in range(int(np.broadcast_to(n, x.shape)[j])):
            v = v * 0.95 + np.sin(v) * x[j] * 0.1
        out[j] = v
    return out


def _client_step(i, v):
    return v * 0.9 + 0.05 * np.sin(v) + 0.03


def after_per_element_loop(n, x, traced):
    """x after a per-element fori_loop (element j runs n[j] steps of a damped, shifted sine):
    traced by dloop, or run element by element in NumPy as the reference. The first half of
    the client-code tests (library functions applied to a loop's result)."""
    import dloop as dl
    if traced:
        return dl.fori_loop(0, n, _client_step, x)
    y = x.copy()
    for j in range(y.size):
        for i in range(n[j]):
            y[j] = _client_step(i, y[j])
    return y


def summed_collective_loop(body, x, traced, steps=2):
    """fori_loop(0, steps, body, x).sum() traced by dloop, or the same loop in Python: client
    code (body) inside a collective loop's body."""
    import dloop as dl
    if traced:
        return dl.fori_loop(0, steps, body, x).sum()
    for i in range(steps):
        x = body(i, x)
    return x.sum()


def compiled_backends():
    """Every backend of the table but the interpreter (the oracle the others are checked
    against), available here or not: suites parametrize over these and skip with the reason."""
    from dloop.backends import TABLE
    return [name for name in TABLE if name != "interpret"]


def error_checker(test_file):
    """check(excinfo, cls, marker, *phrases) for the tests of one file: the error is a
    DloopError of class cls, names the line of test_file that ends with `# marker`, contains
    each phrase, and leaves dloop working (a correct gradient right after)."""
    import dloop as dl

    def line_of(marker):
        with open(test_file) as f:
            for number, text in enumerate(f, 1):
                if text.rstrip().endswith(f"# {marker}") and "line_of" not in text:
                    return f"{test_file}:{number}"
        raise AssertionError(marker)

    def check(excinfo, cls, marker, *phrases):
        assert isinstance(excinfo.value, cls), type(excinfo.value)
        assert isinstance(excinfo.value, dl.DloopError)
        message = str(excinfo.value)
        assert line_of(marker) in message, message
        for phrase in phrases:
            assert phrase in message, message
        x, n = np.linspace(0.1, 1.0, 4), np.array([1, 2, 3, 4])
        g = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 2.0, x).sum())(x)
        np.testing.assert_allclose(g, 2.0 ** n)
    return check


def tape_slots(backend, *caps):
    """The slots that per-element stacks of capacities `caps` (one array per loop of the
    kernel) take on `backend`, per loop: the capacities' sum, or with caps.tape_lanes = L > 1
    (kernel/kir.py), L times each group of L threads' largest capacity, the threads running
    in the order the runtime gives them (by decreasing total capacity where it sorts), or
    the sum again where host sizing keeps a loop compact (adstack/layout.py)."""
    from dloop.backends.base import get_backend
    from dloop.adstack.layout import MAX_PADDING
    from dloop.runtime.execute import sorting_pays, work_order
    be = get_backend(backend)
    lanes = be.caps.tape_lanes
    caps = [np.asarray(c, dtype=np.int64) for c in caps]
    if lanes == 1:
        return [int(c.sum()) for c in caps]
    xp = be.xp if be.caps.sizes_on_device else np
    work = sum(caps)
    on_device = be.device_order(work, be.upload) if be.device_order is not None and \
        sorting_pays(work, be.caps, be.caps.device_sort_cost) else None
    if on_device is not None:
        order = be.to_numpy(on_device)
    elif sorting_pays(work, be.caps):
        order = be.to_numpy(work_order(xp.asarray(work), be))
    else:
        order = np.arange(work.size)
    out = []
    for c in caps:
        padded = np.zeros(-(-c.size // lanes) * lanes, np.int64)
        padded[:c.size] = c[order]
        slots = int(padded.reshape(-1, lanes).max(axis=1).sum()) * lanes
        # Host layouts keep a loop compact where interleaving pads it more (layout.py).
        compact = be.caps.compact_tapes and (slots - c.sum()) * MAX_PADDING > c.sum()
        out.append(int(c.sum()) if compact else slots)
    return out

