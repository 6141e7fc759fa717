"""A Vulkan device without shaderInt64 (the feature masked) computes int64 in 32 bits: a
value that leaves the int32 range inside a kernel raises a DloopValueError at its line
(kernel/int32_range.py) instead of wrapping; values within it compute as on every backend."""

import numpy as np
import pytest

import dloop as dl
from dloop.errors import DloopValueError


def _on(backend, fn, *args):
    with dl.config.override(backend=backend):
        return fn(*args)


@pytest.fixture
def narrow(masked):
    return masked("int64")


def _raises_here(fn, *args):
    with pytest.raises(DloopValueError, match="int32 range") as info:
        _on("vulkan", fn, *args)
    assert "test_vulkan_int32.py" in str(info.value)


@pytest.mark.parametrize("name, fn, fits, passes", [
    ("mul", lambda a: a * 100000, [3, -7, 21474], [21475, 3]),
    ("mul by -1", lambda a: a * np.int64(-1), [5, -(2 ** 31 - 1)], [-(2 ** 31)]),
    ("add", lambda a: a + (2 ** 31 - 10), [9, -5], [10]),
    ("sub", lambda a: a - (2 ** 31 - 10), [-10, 5], [-11]),
    ("neg", lambda a: -a, [2 ** 31 - 1, -5], [-(2 ** 31)]),
    ("abs", lambda a: np.abs(a), [-(2 ** 31 - 1), 4], [-(2 ** 31)]),
])
def test_int64_arithmetic_that_leaves_int32_raises(narrow, name, fn, fits, passes):
    f = dl.jit(fn)
    ok = np.array(fits, np.int64)
    np.testing.assert_array_equal(_on("vulkan", f, ok), fn(ok))
    _raises_here(f, np.array(passes, np.int64))
    np.testing.assert_array_equal(_on("vulkan", f, ok), fn(ok))     # usable after it


def test_floats_converted_to_int64_past_int32_raise(narrow):
    f = dl.jit(lambda x: x.astype(np.int64))
    ok = np.array([2.5, -3.5, 2.0 ** 31 - 128, -2.0 ** 31, np.nan], np.float32)
    np.testing.assert_array_equal(_on("vulkan", f, ok), _on("interpret", f, ok))
    _raises_here(f, np.array([1e10, 1.0], np.float32))
    _raises_here(f, np.array([-3e9], np.float32))


def test_an_index_computed_past_int32_raises_instead_of_wrapping_in_bounds(narrow):
    """m * 2^32 + i wraps to i in 32 bits, an index in bounds: the product faults first."""
    table = np.linspace(1.0, 2.0, 8).astype(np.float32)

    def gather(x, m):
        xp = x.__array_namespace__()
        return dl.fori_loop(0, 3, lambda i, v: v + xp.asarray(table)[m * 65536 * 65536 + i], x)
    x, m = np.ones(4, np.float32), np.ones(4, np.int64)
    _raises_here(dl.jit(gather), x, m)
    np.testing.assert_allclose(_on("vulkan", dl.jit(gather), x, 0 * m),
                               1 + table[0] + table[1] + table[2], rtol=1e-6)


def test_loops_with_int64_counters_and_indices_run_as_before(narrow):
    """A per-element loop's trip counts, index and int64 carries within int32: no fault, the
    gradient of the cpu backend."""
    n = np.arange(300) % 17
    x = np.linspace(0.5, 1.2, 300)

    def loss(x):
        def body(i, carry):
            v, k = carry
            return v * 0.97 + 0.01 * v * v * (k % 5), k + i * 3
        return dl.fori_loop(0, n, body, (x, np.ones(300, np.int64)))[0].sum()
    got = _on("vulkan", dl.grad(loss), x)
    np.testing.assert_allclose(got, _on("cpu", dl.grad(loss), x), rtol=1e-13)
