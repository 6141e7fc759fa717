"""Python complex numbers as carries (or returned for a complex carry), results that were
read-only broadcasts of a constant, vjp's advice for an integer primal, and the loop index,
which promotes as the Python int of NumPy's loop does."""

import numpy as np
import pytest

import dloop as dl


def test_python_complex_carry_runs_as_numpy(backend):
    def reference(v):
        for _ in range(3):
            v = v * 1j + 1
        return v
    got = dl.fori_loop(0, 3, lambda i, v: v * 1j + 1, 1 + 0j)         # a Python complex
    assert got.dtype == np.complex128 and np.allclose(got, reference(1 + 0j))
    got = dl.fori_loop(0, 2, lambda i, c: (c[0] * 1j, c[1] + 1), (np.ones(2, complex), 1j))
    assert np.allclose(got[0], -np.ones(2)) and np.allclose(got[1], 2 + 1j)


@pytest.mark.parametrize("value", [2.0, 3, 1j])
def test_python_number_returned_for_a_complex_carry(backend, value):
    """A Python int or float for a complex carry was a KeyError from inside dloop."""
    got = dl.fori_loop(0, 2, lambda i, v: value, np.array(1 + 1j))
    assert got.dtype == np.complex128 and got == value
    got = dl.jit(lambda z: dl.fori_loop(0, 3, lambda i, v: value, z))(np.array(1 + 1j))
    assert got == value


def test_python_complex_for_a_real_carry_is_a_dloop_error(backend):
    with pytest.raises(dl.DloopTypeError, match="make the initial carry a complex array"):
        dl.fori_loop(0, 2, lambda i, v: 1j, np.array(1.0))
    with pytest.raises(dl.DloopTypeError, match="bool"):
        dl.fori_loop(0, 2, lambda i, v: True, np.array(1 + 0j))


@pytest.mark.parametrize("make", [lambda a: np.ones_like(a), lambda a: np.zeros_like(a),
                                  lambda a: np.full_like(a, 3.0),
                                  lambda a: a.__array_namespace__().ones_like(a),
                                  lambda a: (a * 2, np.zeros_like(np.stack([a, a])))])
def test_results_are_writeable_as_numpy_s(backend, make):
    """np.ones_like(x) of a traced x came back as a read-only broadcast: out[0] = 5 raised
    NumPy's ValueError where NumPy's own np.ones_like gives an array to write to."""
    x = np.array([1.1, 0.7, 1.3])
    out = dl.jit(make)(x)
    for leaf, expected in zip(out if isinstance(out, tuple) else (out,),
                              make(x) if isinstance(out, tuple) else (make(x),)):
        leaf[...] = 99.0                          # NumPy's result takes the update
    again = dl.jit(make)(x)                       # and the next call is not changed by it
    for leaf, expected in zip(again if isinstance(again, tuple) else (again,),
                              make(x) if isinstance(again, tuple) else (make(x),)):
        assert np.array_equal(leaf, expected)


def test_vjp_of_an_integer_primal_does_not_advise_argnums():
    x, n = np.array([1.1, 0.7]), np.array([2, 3])
    with pytest.raises(dl.DloopTypeError) as e:
        dl.vjp(lambda x, n: dl.fori_loop(0, n, lambda i, v: v * v, x), x, n)
    assert "argnums" not in str(e.value) and "functools.partial" in str(e.value)


INDEX_BODIES = [lambda i, v: v + i, lambda i, v: v * (i + 1) * 0.5, lambda i, v: v + 0.1 * i,
                lambda i, v: v - i / 4, lambda i, v: v + (-i) ** 2 * 0.01,
                lambda i, v: np.multiply(v, i % 3 + 1)]


@pytest.mark.parametrize("body", INDEX_BODIES)
@pytest.mark.parametrize("bounds", ["python", "per-element"])
def test_the_loop_index_promotes_as_a_python_int(backend, body, bounds):
    """NumPy's loop, for i in range(lo, hi), gives Python ints, which keep a float32 carry
    float32: an int64 index made v + i float64 and the loop a DloopTypeError."""
    x = np.linspace(0.5, 1.5, 4).astype(np.float32)
    hi = 4 if bounds == "python" else np.array([0, 1, 3, 4])
    got = dl.fori_loop(0, hi, body, x)
    want = x.copy()
    for k, n in enumerate(np.broadcast_to(hi, x.shape)):
        for i in range(n):
            want[k:k + 1] = body(i, want[k:k + 1])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6)
    g = dl.grad(lambda x: dl.fori_loop(0, hi, body, x).sum())(x)
    assert g.dtype == np.float32


def test_the_loop_index_under_numpy_functions_and_integer_carries(backend):
    """np.sin(i) of a Python int is a NumPy float64, which is not weak: the carry would
    become float64, refused as in a loop body of any dtype change. Toward an integer carry
    the index keeps its own dtype (its values never wrap): int32 bounds keep an int32 carry,
    Python ones make v + i int64, refused."""
    x32 = np.ones(3, np.float32)
    for body in (lambda i, v: v + np.sin(i), lambda i, v: np.dot(v, i)):
        with pytest.raises(dl.DloopTypeError, match="float32.*float64"):
            dl.fori_loop(0, 3, body, x32)
    k = np.arange(3, dtype=np.int32)
    got = dl.fori_loop(np.int32(0), np.int32(3), lambda i, v: v + i, k)
    assert got.dtype == np.int32 and got.tolist() == [3, 4, 5]
    with pytest.raises(dl.DloopTypeError, match="int32.*int64"):
        dl.fori_loop(0, 3, lambda i, v: v + i, k)


def test_the_loop_index_under_bitwise_operators_and_comparisons():
    """i & 1, i >> 1, ~i, divmod(i, 3) and (i > 2) * 0.5 are Python numbers in NumPy's loop,
    and keep a float32 carry float32 as v + i does (they were int64 / bool arrays: float64,
    a DloopTypeError)."""
    x = np.linspace(0.5, 1.5, 4).astype(np.float32)
    bodies = [lambda i, v: v + (i & 1), lambda i, v: v + (i >> 1) + (i << 1),
              lambda i, v: v + (i | 2) - (i ^ 1), lambda i, v: v + ~i,
              lambda i, v: v + divmod(i, 3)[1], lambda i, v: v + (i > 2) * 0.5]
    for body in bodies:
        want = x.copy()
        for i in range(5):
            want = body(i, want)
        got = dl.fori_loop(0, 5, body, x)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_an_int32_index_plus_a_python_int_keeps_its_dtype():
    """With int32 bounds, i + 1 and 2 * i were int32 (as before the index promoted weakly);
    the all-weak promotion made them int64, and an int32 carry's v + (i + 1) an error."""
    k = np.zeros(3, np.int32)
    n = np.array([2, 3, 4], np.int32)
    got = dl.fori_loop(0, n, lambda i, v: v + (i + 1) + 2 * i, k)
    assert got.dtype == np.int32 and got.tolist() == [5, 12, 22]
    got = dl.fori_loop(np.int32(0), np.int32(4), lambda i, v: v + (i + 1), k)
    assert got.dtype == np.int32 and got.tolist() == [10, 10, 10]


def test_an_update_of_a_name_bound_to_the_index_leaves_the_index_alone():
    """j = i; j += 1 rebinds j, as for the Python int of NumPy's loop: it updated the index
    itself in place, so that a later i read i + 1."""
    def body(i, v):
        j = i
        j += 1
        return v + i * j
    want = 0
    for i in range(4):
        want += i * (i + 1)
    assert dl.fori_loop(0, 4, body, np.zeros(2, np.int64)).tolist() == [want, want]


def test_a_numpy_float64_times_the_index_is_not_weak():
    """i * np.float64(0.5) is a NumPy float64 in NumPy's loop (np.float64 subclasses float,
    which made it weak here, and v + i * np.float64(0.5) float32, unlike np.float64(0.5) * i)."""
    x32 = np.ones(3, np.float32)
    for body in (lambda i, v: v + i * np.float64(0.5), lambda i, v: v + np.float64(0.5) * i):
        with pytest.raises(dl.DloopTypeError, match="float32.*float64"):
            dl.fori_loop(0, 3, body, x32)


def test_numpy_functions_of_the_index_are_numpy_values():
    """np.reshape(i, ()), np.squeeze(i), np.transpose(i), np.conj(i) and xp.asarray(i) are
    NumPy arrays in NumPy's loop (v + them is float64 for a float32 v); returning the index
    itself kept it weak, a silent float32 where np.abs(i) or xp.asarray(i, copy=True) were
    float64."""
    x32 = np.ones(3, np.float32)
    for body in (lambda i, v: v + np.reshape(i, ()), lambda i, v: v + np.squeeze(i),
                 lambda i, v: v + np.transpose(i), lambda i, v: v + np.conj(i),
                 lambda i, v: v + v.__array_namespace__().asarray(i)):
        with pytest.raises(dl.DloopTypeError, match="float32.*float64"):
            dl.fori_loop(0, 3, body, x32)
