"""x[idx] = v on traced arrays: the tracer is rebound to the updated value, gradients flow to
both the untouched part of x and to v; zeros_like/full_like/zeros give updatable arrays."""

import numpy as np
import pytest

import dloop as dl
from helpers import (after_per_element_loop, assert_close, finite_difference,
                     summed_collective_loop)

X = np.array([0.3, -1.2, 2.1, 0.7, -0.4, 1.5])
W = np.cos(np.arange(6.0) + 0.5)


def _numpy_xp(x):
    return np if isinstance(x, np.ndarray) else x.__array_namespace__()


UPDATES = {
    "slice": lambda x, xp: _set(x * 1.0, slice(1, 4), x[:3] ** 2),
    "step": lambda x, xp: _set(x * 1.0, slice(None, None, 2), 0.5),
    "integer": lambda x, xp: _set(x * 1.0, 2, x[0] * x[1]),
    "mask": lambda x, xp: _set(x * 1.0, x > 0.5, 0.0),
    "traced mask, traced value": lambda x, xp: _set(x * 1.0, x < 0, xp.sum(x)),
    "zeros then fill": lambda x, xp: _set(xp.zeros(6), slice(1, None), x[:-1] * 2),
    "zeros_like then fill": lambda x, xp: _set(xp.zeros_like(x), slice(None, 3), xp.sin(x[3:])),
    "full_like, 2-d": lambda x, xp: xp.reshape(_set(xp.full_like(xp.reshape(x, (2, 3)), 1.5),
                                                    (slice(None), 1), x[:2]), (6,)),
}


def _set(y, key, value):
    y[key] = value
    return y


@pytest.mark.parametrize("name", sorted(UPDATES))
def test_update_value_and_gradient(name):
    update = UPDATES[name]
    got = dl.jit(lambda x: update(x, _numpy_xp(x)))(X)
    np.testing.assert_allclose(got, update(X.copy(), np))
    grad = dl.grad(lambda x: (update(x, _numpy_xp(x)) * W).sum())(X)
    expected = finite_difference(lambda x: (update(x.copy(), np) * W).sum(), X)
    assert_close(grad, expected, rtol=1e-7, atol=1e-9)


def test_copy_is_not_rebound():
    def fn(x):
        xp = x.__array_namespace__()
        y = xp.asarray(x, copy=True)
        y[0] = 5.0
        return x + 0 * y
    np.testing.assert_array_equal(dl.jit(fn)(X), X)


def _through_views(x, xp):
    """Writes through views and in-place operators, as NumPy code makes them."""
    y = xp.reshape(x * 1.0, (2, 3))
    y[1][2] = x[0] ** 2                      # a view of a view: y's row 1
    row = y[0]
    row[1:] *= x[3:5]                        # an in-place operator on a view
    y.T[2, 0] = -x[1]
    y.transpose(1, 0)[0] += 1.0
    flat = y.reshape(6)
    flat[4] = flat[4] * x[5]
    alias = y
    alias -= 0.25 * x[2]                     # another name for y
    z = +y                                   # a copy
    z[0, 0] = 100.0
    return y


def _kick(v, dv):
    v += dv                                  # a helper that updates its argument


VIEW_CASES = {
    "views and in-place operators": _through_views,
    "helper updating its argument": lambda x, xp: (lambda v: (_kick(v, x[::-1]), v)[1])(x * 2.0),
    "a slice of a fresh array": lambda x, xp: (lambda a: (a[2:4].__iadd__(x[:2] * 3), a)[1])(
        xp.zeros_like(x)),
}


@pytest.mark.parametrize("name", sorted(VIEW_CASES))
def test_updates_through_views_reach_the_base(name, backend):
    """y[1][2] = v, r = y[0]; r[1:] *= w, y.T[...] = v, y.reshape(...)[k] = v and x += v
    change the array they view or name, as in NumPy (they were lost: a tracer was rebound
    alone). The values and the gradient against NumPy's."""
    case = VIEW_CASES[name]
    got = dl.jit(lambda x: case(x, _numpy_xp(x)))(X)
    np.testing.assert_allclose(got, case(X.copy(), np), rtol=1e-15)
    grad = dl.grad(lambda x: (case(x, _numpy_xp(x)).reshape(-1) * W).sum())(X)
    expected = finite_difference(lambda x: (case(x.copy(), np).reshape(-1) * W).sum(), X)
    assert_close(grad, expected, rtol=1e-7, atol=1e-9)


def test_in_place_operators_keep_the_dtype_by_numpy_s_rule():
    def f(x):
        y = x.astype(np.float32)
        y *= np.ones(6)                      # float64 operand: y stays float32
        k = (x > 0).astype(np.int32)
        k += 2
        return y, k
    y, k = dl.jit(f)(X)
    assert y.dtype == np.float32 and k.dtype == np.int32
    np.testing.assert_array_equal(k, (X > 0) + 2)

    def bad(x):
        k = (x > 0).astype(np.int32)
        k += 1.5                             # E-same-kind
        return k
    with pytest.raises(dl.DloopTypeError, match=r"(?s)same-kind.*test_inplace.py"):
        dl.jit(bad)(X)


def test_in_place_update_of_a_loop_carry():
    def body(i, v):
        v += 0.5 * v[::-1]
        v[0] *= 0.9
        return v
    want = X.copy()
    for i in range(3):
        want = body(i, want)
    np.testing.assert_allclose(dl.jit(lambda x: dl.fori_loop(0, 3, body, x))(X), want,
                               rtol=1e-15)
    f = dl.jit(lambda x: dl.fori_loop(0, 3, body, x.astype(np.float32)))(X)
    assert f.dtype == np.float32


def test_update_inside_collective_loop():
    def step(i, v):
        v = v * 1.0
        v[1:] = v[:-1] * 0.5 + v[1:] * 0.5
        return v

    def run(x, traced):
        if traced:
            return (dl.fori_loop(0, 3, step, x) * W).sum()
        for i in range(3):
            x = step(i, x.copy())
        return (x * W).sum()

    assert_close(dl.grad(lambda x: run(x, True))(X), finite_difference(
        lambda x: run(x, False), X), rtol=1e-7, atol=1e-9)


# Integer-array and traced-integer keys, mixed with slices. Repeated indices: the last write
# wins, as in NumPy's assignment, and only it gets a gradient. `_k(x)` is a traced integer
# (an argmax) where x is traced, the same integer on NumPy.
def _k(x):
    return _numpy_xp(x).argmax(x) % 2


SCATTERS = {
    "int array, repeated": lambda x: _set(x * 1.0, np.array([0, 4, 0, -1]), x[2:] ** 2),
    "int array and slice": lambda x: _set(x.reshape(2, 3) * 1.0, (np.array([1, 0, 1]),
                                                                  slice(1, None)),
                                          x[:2] * 3.0),
    "slice and int array": lambda x: _set(x.reshape(2, 3) * 1.0, (slice(None),
                                                                  np.array([2, -1])),
                                          x[:2].reshape(2, 1) * x[4]),
    "traced int and slice": lambda x: _set(x.reshape(2, 3) * 1.0, (_k(x), slice(0, 2)), x[3:5]),
    "traced int array": lambda x: _set(x * 1.0, _numpy_xp(x).stack([_k(x), _k(x) + 2, _k(x)]),
                                       x[3:] * 2.0),
}


def _loss(y):
    return (y.reshape(-1) * W).sum()


def _per_element(fn, x, traced):
    return _loss(fn(after_per_element_loop(np.array([2, 0, 3, 1, 2, 4]), x, traced)))


def _collective(fn, x, traced):
    return summed_collective_loop(lambda i, v: v * 0.99 + 0.01 * _loss(fn(v)) * v, x, traced)


@pytest.mark.parametrize("program", [_per_element, _collective])
@pytest.mark.parametrize("name", sorted(SCATTERS))
def test_scatter_value_and_gradient(name, program):
    fn = SCATTERS[name]
    got = dl.jit(lambda x: program(fn, x, True))(X)
    np.testing.assert_allclose(got, program(fn, X.copy(), False), rtol=1e-12)
    grad = dl.grad(lambda x: program(fn, x, True))(X)
    assert_close(grad, finite_difference(lambda x: program(fn, x, False), X), rtol=1e-6,
                 atol=1e-9)


def test_row_of_matrix_by_loop_counter_in_collective_loop():
    """A[i, 1:3] read and written with i the loop counter; A[:, i] likewise."""
    def body(i, a):
        a = a * 1.0
        a[i, 1:3] = a[i + 1, 2:4] * 0.5 + np.sin(a[i, 1:3])
        a[:, i] = a[:, i] * a[i, 0]
        return a

    def run(x, traced):
        a = np.cos(np.arange(24.0)).reshape(4, 6) * x
        if traced:
            a = dl.fori_loop(0, 3, body, a)
        else:
            for i in range(3):
                a = body(i, a)
        return (a * np.sin(np.arange(24.0)).reshape(4, 6)).sum()

    assert_close(dl.grad(lambda x: run(x, True))(X), finite_difference(
        lambda x: run(x, False), X), rtol=1e-7, atol=1e-9)


def test_index_out_of_range_names_the_line():
    def fn(x):
        y = x * 1.0
        y[np.array([1, 6])] = 1.0  # static
        return y
    with pytest.raises(dl.DloopIndexError, match=r"(?s)out of bounds.*test_inplace.py"):
        dl.jit(fn)(X)


def test_traced_index_out_of_range_names_the_line():
    def fn(x):
        y = x * 1.0
        y[dl.fori_loop(0, 2, lambda i, k: k + 3, np.int64(0)), None] = 1.0  # traced
        return y
    with pytest.raises(dl.DloopIndexError, match=r"(?s)out of bounds.*test_inplace.py:\d+"):
        dl.jit(fn)(X)
    with pytest.raises(dl.DloopIndexError) as info:
        dl.jit(fn)(X)
    assert str(info.value).count("test_inplace.py") == 1


def test_traced_index_into_an_empty_axis_is_dloop_s_index_error():
    """x[i] with a traced i on an axis of length 0: the view's strides were taken at
    position 0 while tracing, which NumPy refused with an internal IndexError."""
    line = test_traced_index_into_an_empty_axis_is_dloop_s_index_error.__code__.co_firstlineno
    with pytest.raises(dl.DloopIndexError, match=rf"(?s)out of bounds for an array of shape "
                       rf"\(0, 3\).*test_inplace.py:{line + 6}"):
        dl.jit(lambda x, i: x[i] * 2.0)(np.zeros((0, 3)), np.array(0))


def test_mask_update_with_array_value_names_the_line():
    def fn(x):
        y = x * 1.0
        y[x > 0] = x[:3]
        return y
    with pytest.raises(dl.DloopNotImplementedError, match=r"(?s)True count.*test_inplace.py"):
        dl.jit(fn)(X)


@pytest.mark.parametrize("key, cls, phrase", [
    ((0, np.array([1]), 2), dl.DloopIndexError, "too many indices"),
    ((np.array([1]), "a"), dl.DloopTypeError, "unsupported index"),
])
def test_bad_array_key_names_the_line(key, cls, phrase):
    def fn(x):
        return x.reshape(2, 3)[key]  # bad key
    with pytest.raises(cls, match=rf"(?s){phrase}.*test_inplace.py"):
        dl.jit(fn)(X)


COPY_CASES = {
    "an element is a scalar": lambda y: y[0, 0],
    "y ** 1": lambda y: y ** 1,
    "y ** 1.0": lambda y: y ** 1.0,
    "np.tile(y, 1)": lambda y: np.tile(y, 1),
    "np.conj of real": np.conj,
    "xp.clip without bounds": lambda y: _numpy_xp(y).clip(y),
    "xp.positive": lambda y: _numpy_xp(y).positive(y),
    "y.flatten()": lambda y: y.flatten(),
}


@pytest.mark.parametrize("name", sorted(COPY_CASES))
def test_results_numpy_copies_do_not_write_back(name):
    """NumPy returns new arrays from these (an element of every axis is a scalar): updating
    the result must leave y alone (it wrote y back: y[0, 0] += y[1], y ** 1.0 += 100)."""
    case = COPY_CASES[name]

    def f(x):
        y = x.reshape(2, 3) * 1.0
        out = case(y)
        out += 100.0
        return y, out
    got_y, got_out = dl.jit(f)(X)
    want_y, want_out = f(X.copy())
    np.testing.assert_array_equal(got_y, want_y)
    np.testing.assert_array_equal(got_out, want_out)


def test_matmul_in_place_and_bool_diff():
    def f(x):
        a = x[:4].reshape(2, 2) * 1.0
        alias = a
        a @= a
        return alias, np.diff(x > 0)
    for got, want in zip(dl.jit(f)(X), f(X.copy())):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def test_a_view_updated_after_its_base_starts_from_the_base_s_values():
    """Overlapping views, and a row updated after its matrix: the later update used the view's
    old values and wrote them back over the earlier one."""
    def f(x):
        y = x.reshape(2, 3) * 1.0
        left, right = y[:, :2], y[:, 1:]
        left *= 2.0
        right += 1.0
        row = y[0]
        y[0, 1] = 50.0 * x[2]
        row[2] = -3.0
        inner = row[1:]
        y[0, 2] = 7.0
        inner[0] += 1.0                      # a view of a view, both stale
        return y
    np.testing.assert_array_equal(dl.jit(f)(X), f(X.copy()))
    g = dl.grad(lambda x: (f(x).reshape(-1) * W).sum())(X)
    assert_close(g, finite_difference(lambda x: (f(x.copy()).reshape(-1) * W).sum(), X),
                 rtol=1e-7, atol=1e-9)


def test_a_view_read_after_its_base_changed_sees_the_change():
    """NumPy's views share memory: a row, a reshape and a transpose taken before updates of
    their base read the updated values (they read the values of when they were taken), and
    so do copies made of them afterwards."""
    def f(x):
        y = x.reshape(2, 3) * 1.0
        row, flat, t = y[0], y.reshape(-1), y.T
        inner = row[1:]
        y[0, 1] = 5.0 * x[4]
        y += x[:3]
        copied = inner.copy()
        y[0, 2] = -2.0
        return row * 2.0, flat + 0.0, t[1], inner.sum(), copied
    for got, want in zip(dl.jit(f)(X), f(X.copy())):
        np.testing.assert_array_equal(got, want)

    def loss(x):
        a, b, c, d, e = f(x)
        return (a * W[:3]).sum() + (b * W).sum() + (c * W[3:5]).sum() + d + (e * W[:2]).sum()
    assert_close(dl.grad(loss)(X), finite_difference(lambda x: loss(x.copy()), X), rtol=1e-7,
                 atol=1e-9)


def test_a_reshape_is_a_view_exactly_where_numpy_s_is():
    """A reshape of a transposed or strided view is a copy in NumPy: updates of it and of
    its base do not reach each other. A reshape of a contiguous slice is a view."""
    def f(x):
        y = x.reshape(2, 3) * 1.0
        by_column, every_other = y.T.reshape(-1), y[:, ::2].reshape(-1)
        tail, last_row = y[:, 1:].reshape(-1), y[1:].reshape(-1)
        y += 1.0
        by_column[0] = 100.0
        last_row[0] = -5.0 * x[2]
        every_other *= 3.0
        return y, by_column, every_other, tail, last_row, np.ravel(y.T)
    for got, want in zip(dl.jit(f)(X), f(X.copy())):
        np.testing.assert_array_equal(got, want)

    def loss(x):
        return sum((np.reshape(r, -1) * W[:r.size]).sum() for r in f(x))
    assert_close(dl.grad(loss)(X), finite_difference(lambda x: loss(x.copy()), X), rtol=1e-7,
                 atol=1e-9)


def test_flip_ravel_and_sort_in_place_as_numpy():
    """np.flip and xp.flip are views (an update of one writes the base); ravel is a view
    only of a C-contiguous array (a[:, :1] could be reshaped as a view, but ravel copies);
    x.sort() updates x in place, so its views read the sorted values."""
    def f(x, namespace):
        a = x.reshape(2, 3) * 1.0
        flip = namespace(a).flip if namespace(a) is not np else np.flip
        r = flip(a)
        r[0, 0] = -7.0 * x[1]
        column = np.ravel(a[:, :1])
        column[0] = 99.0
        row, b = a[0], a[:, ::-1] * 1.0
        b.sort()
        a.sort()
        b[1].sort()
        return a, row, b, column
    for namespace in (lambda a: np, lambda a: getattr(a, "__array_namespace__", lambda: np)()):
        for got, want in zip(dl.jit(lambda x: f(x, namespace))(X), f(X.copy(), namespace)):
            np.testing.assert_array_equal(got, want)

    def loss(x):
        return sum((np.reshape(r, -1) * W[:r.size]).sum() for r in f(x, lambda a: np))
    assert_close(dl.grad(loss)(X), finite_difference(lambda x: loss(x.copy()), X), rtol=1e-7,
                 atol=1e-9)


def test_a_long_chain_of_views_reads_its_base():
    """v = v[1:] 1,200 times, then the base updated: making the last view again
    recursed once per link, past Python's recursion limit."""
    def f(x):
        y = x * 1.0
        v = y
        for _ in range(1200):
            v = v[1:]
        y[-1] = 5.0 * x[0]
        return v.sum()
    x = np.arange(1210.0)
    np.testing.assert_array_equal(dl.jit(f)(x), f(x.copy()))


@pytest.mark.parametrize("fn, cls, phrase", [
    (lambda x: (lambda y: y.__iadd__(x[:3]))(x[:1] * 1.0), dl.DloopValueError, "is not x.s"),
    (lambda x: x.ravel(order="K"), dl.DloopNotImplementedError, "order='C' or order='F'"),
    (lambda x: x.T.flatten(order="A"), dl.DloopNotImplementedError, "memory layout"),
    (lambda x: x.reshape(2, 3).T.reshape(-1, copy=False), dl.DloopValueError, "needs a copy"),
    (lambda x: np.where(x > 0, (x > 0).astype(np.int32), 2 ** 40), dl.DloopValueError,
     "out of range for int32"),
])
def test_refused_updates_and_spellings_name_the_line(fn, cls, phrase):
    line = fn.__code__.co_firstlineno
    with pytest.raises(cls, match=rf"(?s){phrase}.*test_inplace.py:{line}"):
        dl.jit(fn)(X)
