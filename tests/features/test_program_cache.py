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
