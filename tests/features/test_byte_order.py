"""Arrays in the other byte order ('>f8' on a little-endian host): kernels compute in the
native one, so arguments and captured arrays are converted on the way in. They were read
as raw bytes (1.0 became 3e-319), and a program traced for '>i8' was reused for '<i8'."""

import array_api_compat
import numpy as np

import dloop as dl
from helpers import assert_close

W = np.array([1.0, 2.0, 3.0])


def test_arguments(backend):
    w = W.astype(">f8")
    assert_close(dl.jit(lambda v, w: v * w)(W, w), W * W, rtol=0)
    assert_close(dl.grad(lambda w: (w * w).sum())(w), 2 * W, rtol=0)
    assert_close(dl.jit(lambda v: v * 2)(W.astype(">f4")), 2 * W, rtol=0)


def test_a_program_traced_for_the_other_byte_order_is_not_reused(backend):
    f = dl.jit(lambda k: k + 1)
    for dtype in (">i8", "<i8", "i1", ">i4"):
        np.testing.assert_array_equal(f(np.array([1, 2, 3], dtype)), [2, 3, 4], err_msg=dtype)


def test_captured_tables_and_loop_carries(backend):
    table = np.array([1.0, 2.0, 3.0], ">f8")
    n = np.array([1, 2, 3])

    def f(x):
        xp = array_api_compat.array_namespace(x)
        return dl.fori_loop(0, n, lambda i, v: v * x + xp.asarray(table)[i], x)
    x = np.array([2.0, 3.0, 4.0])
    expected = [2 * 2 + 1, (3 * 3 + 1) * 3 + 2, ((4 * 4 + 1) * 4 + 2) * 4 + 3]
    assert_close(dl.jit(f)(x), expected, rtol=1e-15)
    assert_close(dl.jit(f)(x.astype(">f8")), expected, rtol=1e-15)
    assert_close(dl.jit(lambda v: v.astype(">f8") * 2)(x), 2 * x, rtol=0)
