"""The same array-API code on NumPy, array_api_strict and PyTorch inputs: results come back
in the caller's library, dtype and shape, with identical gradients."""

import array_api_compat
import numpy as np
import pytest

import dloop as dl

LIBRARIES = ["numpy", "array_api_strict", "torch"]


def _convert(library, x):
    if library == "numpy":
        return x
    module = pytest.importorskip(library)
    return module.from_numpy(x) if library == "torch" else module.asarray(x)


def _back(x):
    return np.from_dlpack(x.detach() if hasattr(x, "detach") else x) \
        if not isinstance(x, np.ndarray) else x


def model(x, n, w):
    """Written only against the array API namespace of its inputs."""
    xp = array_api_compat.array_namespace(x, w)

    def body(i, v):
        return v * 0.95 + xp.sin(v) * x * w[0]

    v = dl.fori_loop(0, n, body, x)

    def smooth(i, u):
        return u + 0.1 * (xp.roll(u, 1) - u)

    u = dl.fori_loop(0, 4, smooth, v)
    return xp.sum(u * u) + xp.sum(xp.tanh(w))


@pytest.mark.parametrize("library", LIBRARIES)
def test_identical_gradients_in_every_library(backend, library):
    x = np.linspace(0.1, 1.0, 6)
    n = np.array([0, 1, 2, 3, 5, 8])
    w = np.array([0.1, -0.3])
    g_ref = dl.grad(model, argnums=(0, 2))(x, n, w)
    args = [_convert(library, a) for a in (x, n, w)]
    value, (gx, gw) = dl.value_and_grad(model, argnums=(0, 2))(*args)
    for out in (value, gx, gw):
        assert array_api_compat.array_namespace(out).__name__.endswith(library)
    assert _back(gx).dtype == np.float64 and tuple(gx.shape) == x.shape
    np.testing.assert_array_equal(_back(gx), g_ref[0])
    np.testing.assert_array_equal(_back(gw), g_ref[1])
    out = dl.jit(lambda x: x * 2.0)(args[0])
    assert array_api_compat.array_namespace(out).__name__.endswith(library)


@pytest.mark.parametrize("library", ["array_api_strict", "torch"])
def test_loops_on_plain_arrays_of_other_libraries(backend, library):
    x = _convert(library, np.linspace(0.0, 1.0, 4))
    n = _convert(library, np.array([0, 1, 2, 3]))
    out = dl.fori_loop(0, n, lambda i, v: v * 2.0 + 1.0, x)
    assert array_api_compat.array_namespace(out).__name__.endswith(library)
    np.testing.assert_array_equal(_back(out), [0.0, 1 / 3 * 2 + 1, (2 / 3 * 2 + 1) * 2 + 1,
                                               ((1.0 * 2 + 1) * 2 + 1) * 2 + 1])


def test_float32_tensor_keeps_its_dtype(backend):
    torch = pytest.importorskip("torch")
    x = torch.linspace(0.1, 1.0, 5, dtype=torch.float32)
    g = dl.grad(lambda x: (x * x).sum())(x)
    assert g.dtype == torch.float32
    np.testing.assert_allclose(g.numpy(), 2 * x.numpy(), rtol=1e-6)


def test_vjp_returns_the_callers_library(backend):
    torch = pytest.importorskip("torch")
    x = torch.linspace(0.1, 1.0, 5, dtype=torch.float64)
    out, f_vjp = dl.vjp(lambda x: dl.fori_loop(0, 3, lambda i, v: v * v, x), x)
    (g,) = f_vjp(torch.ones(5, dtype=torch.float64))
    assert isinstance(out, torch.Tensor) and isinstance(g, torch.Tensor)
    np.testing.assert_allclose(g.numpy(), 8 * x.numpy() ** 7, rtol=1e-12)


def test_mixing_libraries_in_one_call_is_an_error(backend):
    torch = pytest.importorskip("torch")
    with pytest.raises(dl.DloopTypeError, match="mix arrays of numpy and torch"):
        dl.grad(lambda a, b: (a * b).sum())(np.ones(3), torch.ones(3, dtype=torch.float64))
