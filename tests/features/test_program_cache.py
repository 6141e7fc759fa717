"""Programs are reused across calls whose traces print the same canonical text; a reused
program must still see this call's constants, and any other change must not reuse it."""

import numpy as np
import pytest

import dloop as dl
from dloop import api


def make_loss(n, scale):
    return lambda x: dl.fori_loop(0, n, lambda i, v: v * scale, x).sum()


def test_reused_program_reads_the_new_constants(backend):
    x = np.ones(3)
    api._PROGRAMS.clear()
    g1 = dl.grad(make_loss(np.array([1, 2, 3]), 0.5))(x)
    g2 = dl.grad(make_loss(np.array([3, 0, 1]), 0.5))(x)     # same text, other bounds
    assert len(api._PROGRAMS) == 1
    np.testing.assert_array_equal(g1, 0.5 ** np.array([1, 2, 3]))
    np.testing.assert_array_equal(g2, 0.5 ** np.array([3, 0, 1]))


def test_python_scalars_shapes_and_lines_are_part_of_the_key(backend):
    x = np.ones(3)
    n = np.array([1, 2, 3])
    g = dl.grad(make_loss(n, 0.5))(x)
    np.testing.assert_array_equal(dl.grad(make_loss(n, 0.25))(x), 0.25 ** n)
    np.testing.assert_array_equal(dl.grad(make_loss(n[:2], 0.5))(x[:2]), g[:2])


def test_errors_from_a_reused_program_name_this_call(backend):
    x = np.linspace(0.1, 1.0, 4)

    def loss(x):
        return dl.fori_loop(0, 6, lambda i, v: v * 0.5, x).sum()

    dl.grad(loss)(x)
    dl.config.update("adstack_capacity", 2)
    with pytest.raises(dl.AdstackOverflowError, match="attempted 6 pushes"):
        dl.grad(loss)(x)


def test_a_captured_array_updated_after_its_use_keeps_the_values_it_was_used_with(backend):
    """The values of a captured array are read when the program runs, after the function
    returned: held by reference, every use saw its last values (24 and [4, 4, 4] below,
    where NumPy gives 18 and [3, 3, 3]), a loop included."""
    def f(x):
        w = np.ones(3)
        y = x * w
        w *= 2.0
        return (y + x * w).sum()

    def g(x):
        scale = np.full(3, 0.5)
        y = dl.fori_loop(0, np.array([1, 2, 3]), lambda i, v: v * scale, x)
        scale[:] = 10.0
        return y.sum()

    x = np.array([1.0, 2.0, 3.0])
    assert dl.jit(f)(x) == f(x) == 18.0
    np.testing.assert_array_equal(dl.grad(f)(x), [3.0, 3.0, 3.0])
    out, pullback = dl.vjp(f, x)
    assert out == 18.0
    np.testing.assert_array_equal(pullback(1.0)[0], [3.0, 3.0, 3.0])
    assert dl.jit(g)(np.ones(3)) == 0.875
    np.testing.assert_array_equal(dl.grad(g)(np.ones(3)), [0.5, 0.25, 0.125])


def test_a_captured_array_used_twice_unchanged_is_one_constant():
    w = np.linspace(0.1, 1.0, 5)
    x = np.ones(5)
    np.testing.assert_array_equal(dl.jit(lambda x: x * w + w)(x), x * w + w)
    from dloop.trace import tracer
    with tracer.Builder(None) as b:
        assert b.const_var(w) is b.const_var(w)
        assert b.consts[b.const_var(w)] is not w          # a copy: w may change later
        frozen = np.arange(3.0)
        frozen.flags.writeable = False                   # (its owner may set it back)
        assert b.consts[b.const_var(frozen)] is not frozen


@pytest.mark.parametrize("values", [
    np.array([0.5, np.nan, -0.0]), np.array([1, 2, 3], dtype=np.int32),
    np.array([True, False]), np.array([0.5, 2.0], dtype=">f8"),
    np.array([1 + 2j, np.nan], dtype=np.complex128)])
def test_a_captured_array_compared_for_changes_by_its_bits(values):
    """Unchanged (NaN and -0.0 included, byte-swapped and complex arrays by value): one
    constant; changed in place, a second one."""
    from dloop.trace import tracer
    with tracer.Builder(None) as b:
        first = b.const_var(values)
        assert b.const_var(values) is first
        values[0] = values[1]
        assert b.const_var(values) is not first
