"""The traced namespace's non-array parts (data type functions, inspection, constants), its
2024.12 nextafter bit for bit, and NumPy constants beside traced arrays in array-api-compat."""

import array_api_compat
import numpy as np
import pytest

import dloop as dl

X = np.array([0.5, -1.5, 2.0])


def _inside(check):
    """Run check(x, xp) while tracing, then the identity, so its asserts run under dl.jit."""
    def fn(x):
        check(x, x.__array_namespace__())
        return x
    dl.jit(fn)(X)


def test_data_type_functions():
    def check(x, xp):
        assert xp.result_type(x, 1) == np.float64
        assert xp.result_type(x.astype(xp.float32), 1.0) == np.float32
        assert xp.result_type(xp.int32, xp.int64) == np.int64
        assert xp.can_cast(xp.float32, x) and not xp.can_cast(x, xp.int64)
        assert xp.finfo(x).eps == np.finfo(np.float64).eps
        assert xp.iinfo(xp.int32).max == 2 ** 31 - 1
        assert xp.isdtype(x.dtype, "real floating") and not xp.isdtype(x.dtype, "integral")
        assert xp.isdtype(xp.int64, ("integral", "bool"))
    _inside(check)


def test_inspection_and_device():
    def check(x, xp):
        info = xp.__array_namespace_info__()
        assert info.default_device() == x.device and x.device in info.devices()
        assert info.default_dtypes()["real floating"] == np.float64
        assert set(info.dtypes(kind="real floating")) == {"float32", "float64"}
        assert info.capabilities()["data-dependent shapes"] is False
        assert x.to_device(x.device) is x
        assert array_api_compat.device(x) == x.device
    _inside(check)


def test_constants():
    def check(x, xp):
        assert (xp.e, xp.pi, xp.newaxis) == (np.e, np.pi, None)
        assert np.isinf(xp.inf) and np.isnan(xp.nan)
    _inside(check)


def test_nextafter_is_exact():
    a = np.array([0.0, -0.0, 1.0, 1.0, 2.0, 2.0, -4.0, 1e-310, 5e-324, np.inf, -np.inf, 3.0,
                  np.nan, 1.7976931348623157e308, 2.2250738585072014e-308])
    b = np.array([1.0, -1.0, 2.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 1.0, np.inf, 0.0])
    got = dl.jit(lambda a, b: a.__array_namespace__().nextafter(a, b))(a, b)
    np.testing.assert_array_equal(got, np.nextafter(a, b))


def test_numpy_constant_beside_traced_array_resolves_to_traced_namespace():
    kernel = np.array([0.25, 0.5, 0.25])

    def fn(x):
        xp = array_api_compat.array_namespace(x, kernel)
        assert xp is x.__array_namespace__()
        return xp.sum(x * xp.asarray(kernel))
    assert dl.grad(fn)(X).tolist() == kernel.tolist()
    # Outside tracing, nothing changes.
    assert array_api_compat.array_namespace(kernel) is array_api_compat.numpy


def test_constant_tracer_answers_bool():
    """xp.asarray of a constant stays a tracer (so it can be updated in place), yet checks on
    it still run, as on any NumPy constant."""
    def fn(x):
        xp = x.__array_namespace__()
        c = xp.asarray(np.array([1.0, 2.0]))
        assert bool(xp.all(c * 2 > 1.5)) is True and int(xp.ones(())) == 1
        return x
    dl.jit(fn)(X)


def test_traced_value_refuses_bool():
    with pytest.raises(dl.DloopTypeError, match="test_namespace.py"):
        dl.jit(lambda x: x if x[0] > 0 else -x)(X)


def test_iterating_over_a_constant_gives_its_rows():
    """SciPy maps int over xp.sum(xp.asarray(shapes)); a computed array still refuses."""
    def f(x):
        xp = x.__array_namespace__()
        sizes = [int(v) for v in xp.sum(xp.asarray([(2, 3), (1, 4)]), axis=0)]
        rows = [r for r in xp.asarray(np.array([[1.0, 2.0], [3.0, 4.0]]))]
        assert sizes == [3, 7] and len(rows) == 2
        return (x * rows[1][0] + x * rows[0][1]).sum()
    np.testing.assert_allclose(dl.grad(f)(np.ones(3)), np.full(3, 5.0))
    with pytest.raises(dl.DloopTypeError, match=r"(?s)iterating.*test_namespace.py"):
        dl.grad(lambda x: sum(v for v in x * 2.0))(np.ones(3))


def test_numpy_result_type_of_traced_arrays():
    def f(x):
        assert np.result_type(x, 1.0) == np.float64
        assert np.result_type(x.astype(np.float32), 1.0) == np.float32
        assert np.result_type(x, np.int32) == np.float64
        return x.sum()
    dl.grad(f)(np.ones(3))


def test_astype_of_a_numpy_array_is_a_copy():
    """Operands are converted without a copy while tracing, but astype (copy=True) of a
    NumPy array captured by the function still returns a new array: updating it in place
    leaves the captured one alone. With copy=False, or to another dtype, the values are the
    same."""
    table = np.array([1.0, 2.0, 3.0])

    def check(x, xp):
        copied = xp.astype(table, xp.float64)
        assert copied is not table
        copied[0] = 100.0
        assert table[0] == 1.0
        assert xp.astype(table, xp.float64, copy=False) is table
        assert np.array_equal(xp.astype(table, xp.float32), table.astype(np.float32))
    _inside(check)
