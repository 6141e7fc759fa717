"""Complex values at the whole-array level: each operation's gradient with respect to a complex
input (dL/dRe + i dL/dIm, PyTorch's convention) against central finite differences in float64
of the same code on NumPy, over the real and the imaginary parts, on every backend; xp.fft;
complex values inside a collective loop's body; and the errors: a complex value inside a
per-element loop, grad of a complex-valued function."""

import inspect
import pathlib
import sys

import array_api_compat.numpy as anp
import numpy as np
import pytest

import dloop as dl
from helpers import assert_close, error_checker, finite_difference

check_error = error_checker(__file__)

Z = np.array([0.7 + 0.4j, -0.3 + 0.9j, 1.1 - 0.5j, 0.2 + 0.6j, -0.8 - 0.3j, 0.5 + 0.1j])
# The loss weighs the real and imaginary parts of a complex result differently, so that a
# gradient that mixes them up fails.
WEIGHT = np.array([0.9 - 0.3j, -0.4 + 1.2j, 0.6 + 0.5j, 1.3 - 0.8j, -0.7 - 0.2j, 0.2 + 1.1j])
IDX = np.array([4, 0, 2, 2, 5])


def _xp(z):
    return z.__array_namespace__() if hasattr(z, "__array_namespace__") else anp


def _weighted(xp, out):
    """A real loss of a real or complex result."""
    flat = xp.reshape(out, (-1,))
    w = np.resize(WEIGHT, flat.shape[0])
    if xp.isdtype(flat.dtype, "complex floating"):
        return xp.sum(xp.real(flat) * w.real + xp.imag(flat) * w.imag)
    return xp.sum(flat * w.real)


OPS = {
    "asarray": lambda xp, z: z * xp.asarray(np.array([1 + 2j, -0.5j, 3.0, 1j, 2 - 1j, 0.5])),
    "astype": lambda xp, z: xp.astype(xp.real(z), xp.complex128) * z,
    "add": lambda xp, z: z + z[::-1] + (2 - 1j),
    "subtract": lambda xp, z: z - 3.0 * z[::-1] - 1j,
    "multiply": lambda xp, z: z * z[::-1] * (0.5 + 2j),
    "divide": lambda xp, z: z / (z[::-1] + 2.0) + 1.0 / z,
    "power_small": lambda xp, z: z ** 3 + z ** -2,
    "power_large": lambda xp, z: z ** 7,
    "exp": lambda xp, z: xp.exp(z),
    "log": lambda xp, z: xp.log(z),
    "sqrt": lambda xp, z: xp.sqrt(z),
    "abs": lambda xp, z: xp.abs(z * z),
    "real": lambda xp, z: xp.real(z) * xp.imag(z) + z.real,
    "imag": lambda xp, z: xp.imag(z * z) + z.imag,
    "conj": lambda xp, z: xp.conj(z) * z[::-1],
    "sign": lambda xp, z: xp.sign(z * z) * z,
    "vecdot": lambda xp, z: xp.vecdot(z[:3], z[3:]) * z,
    "var": lambda xp, z: xp.var(xp.reshape(z, (2, 3)), axis=1) + xp.std(z),
    "angle": lambda xp, z: np.angle(z * (1 + 1j)),
    "sum": lambda xp, z: xp.sum(z * z) * z,
    "prod": lambda xp, z: xp.prod(z) * z + xp.prod(xp.reshape(z, (2, 3)), axis=1)[0],
    "mean": lambda xp, z: xp.mean(xp.reshape(z, (2, 3)) ** 2, axis=0),
    "where": lambda xp, z: xp.where(xp.real(z) > 0, z * z, xp.conj(z)),
    "slicing": lambda xp, z: z[1:5:2] * z[0],
    "gather": lambda xp, z: z[xp.asarray(IDX)] * z[1:],
    "reshape": lambda xp, z: xp.reshape(z, (3, 2)).T * 1j,
    "concat": lambda xp, z: xp.concat([z[:2] * 1j, z, xp.conj(z[3:])]),
    "stack": lambda xp, z: xp.stack([z, z * z], axis=1),
    "broadcasting": lambda xp, z: z[:3, None] * z[None, 3:] + xp.real(z)[:2, None, None],
    "det3": lambda xp, z: xp.linalg.det(xp.reshape(xp.concat([z, z[:3] * (1 - 2j)]), (3, 3))),
    "matmul": lambda xp, z: xp.reshape(z[:4], (2, 2)) @ xp.reshape(z[2:], (2, 2)),
    "real_kernel": lambda xp, z: xp.sin(xp.real(z)) * xp.exp(xp.imag(z)),
    "fft": lambda xp, z: xp.fft.fft(z * z),
    "ifft": lambda xp, z: xp.fft.ifft(z, n=8, norm="ortho") + xp.fft.ifft(z, n=4)[0],
    "fft_n": lambda xp, z: xp.fft.fft(z, n=4, norm="forward"),
    "fftn": lambda xp, z: xp.fft.fftn(xp.reshape(z, (2, 3)), s=(3, 4), axes=(0, 1)),
    "ifftn": lambda xp, z: xp.fft.ifftn(xp.reshape(z, (2, 3)), axes=(0,), norm="ortho"),
    "rfft": lambda xp, z: xp.fft.rfft(xp.real(z) * xp.imag(z)) +
    xp.fft.rfft(xp.imag(z), n=4, norm="ortho")[0],
    "irfft": lambda xp, z: xp.fft.irfft(z * z) + xp.fft.irfft(z[:4], n=7, norm="forward")[0],
    "rfftn": lambda xp, z: xp.fft.rfftn(xp.reshape(xp.real(z) - xp.imag(z), (2, 3))),
    "irfftn": lambda xp, z: xp.fft.irfftn(xp.reshape(z, (2, 3)), s=(2, 5), axes=(0, 1),
                                           norm="ortho"),
    "hfft": lambda xp, z: xp.fft.hfft(z, n=9),
    "ihfft": lambda xp, z: xp.fft.ihfft(xp.real(z) + 2 * xp.imag(z), norm="forward"),
    "fftfreq": lambda xp, z: z * xp.fft.fftfreq(6, d=0.5) + xp.fft.rfftfreq(6)[1],
    "fftshift": lambda xp, z: xp.fft.fftshift(z * z) + xp.fft.ifftshift(z),
    "fftshift_axes": lambda xp, z: xp.fft.fftshift(xp.reshape(z, (2, 3)), axes=1) * 1j,
}


def test_fft_extension_is_whole():
    """Every function of the standard's fft extension is in xp.fft, and OPS uses each."""
    sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "tools"))
    import array_api_coverage as coverage
    module, names = coverage.EXTENSIONS["Fourier transform extension (`xp.fft`)"]
    assert all(coverage.supported(f"{module}.{name}") for name in names.split())
    used = " ".join(inspect.getsource(op) for op in OPS.values())
    assert all(f"xp.fft.{name}(" in used for name in names.split())


def _fd_complex(f, z):
    """dL/dRe + i dL/dIm by central differences over each part."""
    re = finite_difference(lambda a: f(a + 1j * z.imag), z.real)
    im = finite_difference(lambda b: f(z.real + 1j * b), z.imag)
    return re + 1j * im


@pytest.mark.parametrize("name", list(OPS))
def test_gradient(backend, name):
    op = OPS[name]

    def loss(z):
        xp = _xp(z)
        return _weighted(xp, op(xp, z))
    value, got = dl.value_and_grad(loss)(Z)
    assert_close(value, loss(Z), rtol=1e-12)
    assert got.dtype == np.complex128
    assert_close(got, _fd_complex(loss, Z), rtol=1e-6, atol=1e-8)


def test_construction_from_real_parts(backend):
    """x + 1j * y from real arguments: gradients to each part."""
    def loss(x, y):
        xp = _xp(x)
        z = x + 1j * y
        return _weighted(xp, xp.exp(z) * z)
    x, y = Z.real.copy(), Z.imag.copy()
    gx, gy = dl.grad(loss, argnums=(0, 1))(x, y)
    assert_close(gx, finite_difference(lambda a: loss(a, y), x), rtol=1e-6, atol=1e-8)
    assert_close(gy, finite_difference(lambda b: loss(x, b), y), rtol=1e-6, atol=1e-8)


def test_complex64_and_promotion(backend):
    z64 = Z.astype(np.complex64)

    def f(z, x):
        xp = _xp(z)
        out = z * x                                   # complex64 * float64 -> complex128
        assert out.dtype == np.complex128 and xp.result_type(z, x) == np.complex128
        assert (z * np.float32(2)).dtype == np.complex64
        return out
    got = dl.jit(f)(z64, Z.real)
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got, z64.astype(np.complex128) * Z.real, rtol=1e-7)
    g = dl.grad(lambda z: _weighted(_xp(z), z * z))(z64)
    assert g.dtype == np.complex64
    assert_close(g, _fd_complex(lambda z: _weighted(anp, z * z), Z), rtol=1e-5, atol=1e-6)


def test_dtype_inspection():
    def f(z):
        xp = _xp(z)
        assert xp.isdtype(z.dtype, "complex floating")
        assert not xp.isdtype(xp.real(z).dtype, "complex floating")
        assert xp.real(z).dtype == np.float64
        assert xp.finfo(z.dtype).eps == np.finfo(np.float64).eps
        assert xp.finfo(xp.complex64).bits == 32
        assert xp.fft.fftfreq(4, dtype=xp.float32).dtype == np.float32
        return xp.abs(z)
    np.testing.assert_allclose(dl.jit(f)(Z), np.abs(Z))


def test_jit_returns_complex(backend):
    f = dl.jit(lambda z, x: (anp.fft.fft(z * x), x * 2.0))
    got, twice = f(Z, Z.real)
    np.testing.assert_allclose(got, np.fft.fft(Z * Z.real), rtol=1e-12)
    np.testing.assert_allclose(twice, Z.real * 2.0)


def test_vjp_of_complex_output(backend):
    """vjp's cotangent of a complex output is dL/dRe + i dL/dIm of the output."""
    out, f_vjp = dl.vjp(lambda z: z * z, Z)
    (g,) = f_vjp(WEIGHT)
    expected = _fd_complex(lambda z: np.sum((z * z).real * WEIGHT.real +
                                            (z * z).imag * WEIGHT.imag), Z)
    np.testing.assert_allclose(out, Z * Z)
    assert_close(g, expected, rtol=1e-6, atol=1e-8)


def _filtered(v, traced):
    """A real carry through a complex filter: fft, a complex gain, the real part back."""
    xp = v.__array_namespace__() if traced else anp
    gain = np.exp(-0.3j * np.arange(6))
    return v * 0.9 + 0.1 * xp.real(xp.fft.ifft(xp.fft.fft(v) * gain)) + \
        0.05 * xp.abs(v + 1j * v[::-1])


def test_inside_collective_loop(backend):
    def program(x, traced):
        if traced:
            return dl.fori_loop(0, 3, lambda i, v: _filtered(v, True), x).sum()
        for _ in range(3):
            x = _filtered(x, False)
        return x.sum()
    x = Z.real.copy()
    got = dl.grad(lambda x: program(x, True))(x)
    assert_close(got, finite_difference(lambda x: program(x, False), x), rtol=1e-6, atol=1e-8)


def test_complex_carry_of_collective_loops(backend):
    def fori(z):
        out = dl.fori_loop(0, 3, lambda i, c: c * (0.9 + 0.1j) + 0.05 * anp.sum(c * c), z)
        return _weighted(anp, out)

    def reference(z):
        for _ in range(3):
            z = z * (0.9 + 0.1j) + 0.05 * np.sum(z * z)
        return _weighted(anp, z)

    def whiles(z):
        _, out = dl.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] * c[1] * 0.5),
                               (0, z))
        return _weighted(anp, out)
    assert_close(dl.grad(fori)(Z), _fd_complex(reference, Z), rtol=1e-6, atol=1e-8)
    assert_close(dl.grad(whiles)(Z), _fd_complex(lambda z: _weighted(anp, z ** 4 / 8), Z),
                 rtol=1e-6, atol=1e-8)


def test_after_per_element_loop(backend):
    """A per-element loop's result, then complex work on the whole array."""
    n = np.array([2, 0, 3, 1, 2, 4])

    def program(x, traced):
        if traced:
            y = dl.fori_loop(0, n, lambda i, v: v * 0.9 + 0.1 * np.sin(v), x)
        else:
            y = x.copy()
            for j in range(y.size):
                for _ in range(n[j]):
                    y[j] = y[j] * 0.9 + 0.1 * np.sin(y[j])
        xp = y.__array_namespace__() if traced else anp
        return _weighted(xp, xp.fft.rfft(y) * (1 + 2j))
    x = Z.real.copy()
    got = dl.grad(lambda x: program(x, True))(x)
    assert_close(got, finite_difference(lambda x: program(x, False), x), rtol=1e-6, atol=1e-8)


def test_complex_in_per_element_loop_is_an_error():
    n = np.array([1, 2, 3, 1, 2, 1])

    def f(x):
        return dl.fori_loop(0, n, lambda i, v: (v * (1 + 1j)).real, x).sum()  # per-element
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.grad(f)(Z.real.copy())
    check_error(e, dl.DloopNotImplementedError, "per-element",
                "complex value", "outside the per-element loop")


def test_complex_carry_of_per_element_loop_is_an_error():
    def f(z):
        return dl.fori_loop(0, np.array([1, 2, 3, 1, 2, 1]), lambda i, v: v * 2.0, z)  # carry
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.jit(f)(Z)
    check_error(e, dl.DloopNotImplementedError, "carry", "complex value",
                "outside the per-element loop")


def test_complex_condition_of_per_element_while_is_an_error():
    def f(x):
        return dl.while_loop(lambda v: abs(v * 1j) < 2.0, lambda v: v * 1.5, x)  # condition
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.jit(f)(Z.real.copy())
    check_error(e, dl.DloopNotImplementedError, "condition", "complex value",
                "outside the per-element loop")


def test_nan_and_inf_tests(backend):
    z = np.array([1 + 1j, complex(np.nan, 1), complex(1, np.inf), complex(-np.inf, np.nan)])

    def f(z):
        xp = _xp(z)
        return xp.isnan(z), xp.isinf(z), xp.isfinite(z)
    for got, want in zip(dl.jit(f)(z), (np.isnan(z), np.isinf(z), np.isfinite(z)),
                         strict=True):
        np.testing.assert_array_equal(got, want)


def test_grad_of_complex_output_is_an_error():
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda z: (z * z).sum())(Z)  # complex loss
    check_error(e, dl.DloopTypeError, "complex loss", "complex", "real part",
                "absolute value")


def test_rfft_of_complex_is_an_error():
    def f(z):
        return _xp(z).fft.rfft(z)  # rfft of complex
    with pytest.raises(dl.DloopTypeError) as e:
        dl.jit(f)(Z)
    check_error(e, dl.DloopTypeError, "rfft of complex", "real input", "fft.fft")


@pytest.mark.parametrize("call, marker", [
    (lambda xp, z: xp.maximum(z, 0.5), "maximum"),  # real-only maximum
    (lambda xp, z: z < 0.5, "less"),  # real-only less
    (lambda xp, z: xp.max(z), "max"),  # real-only max
    (lambda xp, z: xp.floor(z), "floor"),  # real-only floor
])
def test_real_only_function_of_complex_is_an_error(call, marker):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.jit(lambda z: call(_xp(z), z))(Z)
    check_error(e, dl.DloopTypeError, f"real-only {marker}", "not defined for complex values",
                "complex128", "xp.real(z)")


def test_special_of_complex_is_an_error():
    with pytest.raises(dl.DloopTypeError) as e:
        dl.jit(lambda z: _xp(z).special.erf(z))(Z)  # special
    check_error(e, dl.DloopTypeError, "special", "take real values", "xp.abs(z)")


def test_decomposition_of_complex_is_an_error():
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.jit(lambda z: _xp(z).linalg.inv(z[:4].reshape(2, 2)))(Z)  # decomposition
    check_error(e, dl.DloopNotImplementedError, "decomposition", "linalg.inv",
                "complex matrices")


def test_torch_and_array_api_strict_complex_arrays():
    """Complex arrays of other libraries come in and go back through the same conversions."""
    torch = pytest.importorskip("torch")
    import array_api_strict as xs
    z = torch.tensor(Z)
    got = dl.grad(lambda z: _weighted(_xp(z), z * z))(z)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.complex128
    assert_close(got.numpy(), _fd_complex(lambda z: _weighted(anp, z * z), Z), rtol=1e-6,
                 atol=1e-8)
    out = dl.jit(lambda z: z * 1j)(xs.asarray(Z))
    assert out.dtype == xs.complex128
    np.testing.assert_allclose(np.asarray(out), Z * 1j)
