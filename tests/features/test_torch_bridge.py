"""dloop.torch.function: a dloop loop inside a PyTorch model, reached by loss.backward() and
checked by torch.autograd.gradcheck (finite differences in float64)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import dloop as dl  # noqa: E402
import dloop.torch  # noqa: E402

N = np.array([2, 0, 3, 1])


def simulate(x, scale):
    def body(i, v):
        return v * 0.95 + np.sin(v) * scale * 0.1
    return dl.fori_loop(0, N, body, x)


def test_gradcheck():
    f = dloop.torch.function(simulate)
    x = torch.tensor([0.3, -0.7, 1.1, 0.5], dtype=torch.float64, requires_grad=True)
    scale = torch.tensor([1.0, 0.5, 2.0, 1.5], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (x, scale), eps=1e-6, atol=1e-8)


def test_inside_a_model_backward_reaches_parameters():
    layer = torch.nn.Linear(4, 4, dtype=torch.float64)
    f = dloop.torch.function(lambda x: simulate(x, 1.0))
    x = torch.tensor([0.3, -0.7, 1.1, 0.5], dtype=torch.float64)
    loss = f(layer(x)).pow(2).sum()
    loss.backward()
    # The same model with the loop written in PyTorch: the gradients must agree.
    reference = layer(x)
    outs = []
    for j in range(4):
        v = reference[j]
        for _ in range(N[j]):
            v = v * 0.95 + torch.sin(v) * 0.1
        outs.append(v)
    weight_grad = layer.weight.grad.clone()
    layer.zero_grad()
    torch.stack(outs).pow(2).sum().backward()
    torch.testing.assert_close(weight_grad, layer.weight.grad, rtol=1e-10, atol=1e-12)


def test_tensor_requiring_grad_passed_directly_is_an_error():
    x = torch.tensor([0.3, -0.7, 1.1, 0.5], dtype=torch.float64, requires_grad=True)
    with pytest.raises(dl.DloopTypeError, match=r"(?s)dloop.torch.function.*test_torch_bridge"):
        dl.jit(lambda x: x * 2)(x)


def test_negative_and_conjugate_views_are_read_with_their_sign():
    """z.conj().imag is a lazy negative view: DLPack exports its storage without the flag, so
    its values were read with the opposite sign (and a conjugate view raised BufferError)."""
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex128)
    v = z.conj().imag                                         # [-2, 4]
    np.testing.assert_array_equal(dl.jit(lambda x: x * 2.0)(v).numpy(), [-4.0, 8.0])
    np.testing.assert_array_equal(
        dl.jit(lambda x: dl.fori_loop(0, 3, lambda i, w: w + 1.0, x))(v).numpy(), [1.0, 7.0])
    np.testing.assert_array_equal(dl.jit(lambda x: x * 1.0)(z.conj()).numpy(),
                                  np.conj(z.numpy()))


def test_changing_the_output_in_place_leaves_the_gradient_alone():
    """y.add_() after the bridge: the output was the buffer the backward pass read."""
    def fn(x):
        return np.exp(dl.fori_loop(0, 3, lambda i, v: v * 0.5, x))
    x0 = np.array([0.1, 0.5, 1.0])
    x = torch.tensor(x0, requires_grad=True)
    y = dloop.torch.function(fn)(x)
    y.add_(1.0)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x0 / 8) / 8, rtol=1e-14)
    out, f_vjp = dl.vjp(fn, x0)
    out += 1.0
    np.testing.assert_allclose(f_vjp(np.ones(3))[0], np.exp(x0 / 8) / 8, rtol=1e-14)


def test_second_derivatives_are_refused_not_zero():
    """create_graph=True then a second backward: dloop's part was silently constant."""
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    f = dloop.torch.function(lambda v: dl.fori_loop(0, 2, lambda i, w: w * v, v * 1.0) ** 2)
    (g,) = torch.autograd.grad(f(x).sum() + (x ** 3).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 6 * x.detach().numpy() ** 5 +
                               3 * x.detach().numpy() ** 2, rtol=1e-13)
    with pytest.raises(dl.DloopNotImplementedError, match="second derivatives"):
        g.sum().backward()


def test_integer_tensors_and_numbers_are_constants():
    """Trip counts as an integer tensor, a Python number: not differentiated (they crashed
    the bridge); a call without any tensor is a DloopError naming the line."""
    f = dloop.torch.function(lambda x, n, s: dl.fori_loop(0, n, lambda i, v: v * s, x))
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    n = torch.tensor([0, 1, 3])
    f(x, n, 0.5).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 0.5 ** n.numpy(), rtol=1e-15)
    with pytest.raises(dl.DloopTypeError, match=r"(?s)at least one torch tensor.*test_torch"):
        dloop.torch.function(lambda: np.ones(2))()


def test_unreadable_dtypes_and_bridge_errors_name_the_user_line():
    with pytest.raises(dl.DloopTypeError, match="bfloat16"):
        dl.jit(lambda x: x * 2)(torch.ones(3, dtype=torch.bfloat16))
    f = dloop.torch.function(lambda x: (x, x))
    with pytest.raises(dl.DloopTypeError) as e:
        f(torch.ones(2, dtype=torch.float64, requires_grad=True))    # E-tuple
    line = next(k for k, t in enumerate(open(__file__), 1) if t.rstrip().endswith("E-tuple"))
    assert f"{__file__}:{line}" in str(e.value)


def test_float_tensors_without_requires_grad_are_constants():
    """Every float tensor was differentiated, so one PyTorch wants no gradient for (gammainc's
    a, which has no gradient rule) made backward fail."""
    special = pytest.importorskip("scipy.special")
    a = torch.tensor([1.5, 2.0, 3.0], dtype=torch.float64)
    x = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64, requires_grad=True)
    dloop.torch.function(lambda a, x: special.gammainc(a, x).sum())(a, x).backward()
    expected = torch.exp((a - 1) * torch.log(x.detach()) - x.detach() - torch.lgamma(a))
    torch.testing.assert_close(x.grad, expected, rtol=1e-12, atol=0)
    with torch.no_grad():       # no gradient wanted at all: integer outputs are fine
        assert dloop.torch.function(lambda x: x > 0.7)(x).tolist() == [False, True, True]


def test_inside_torch_compile():
    """Dynamo traced into the bridge and failed on DLPack of a FakeTensor; now a graph break
    (the eager backend: the failure was in tracing, and compiling C++ is not needed)."""
    layer = torch.nn.Linear(4, 4, dtype=torch.float64)
    f = dloop.torch.function(lambda x: simulate(x, 1.0))
    x = torch.tensor([0.3, -0.7, 1.1, 0.5], dtype=torch.float64)

    def model(x):
        return f(layer(x)).pow(2).sum()
    model(x).backward()
    expected = layer.weight.grad.clone()
    layer.zero_grad()
    torch.compile(model, backend="eager")(x).backward()
    torch.testing.assert_close(layer.weight.grad, expected, rtol=1e-12, atol=1e-14)


def test_torch_func_transforms_and_forward_mode_are_refused_clearly():
    """torch.func's transforms ended in PyTorch's 'must override the setup_context
    staticmethod', forward mode in 'You must implement the jvp function'."""
    import torch.autograd.forward_ad as fwAD
    f = dloop.torch.function(lambda x: (x ** 3).sum())
    x = torch.ones(3, dtype=torch.float64)

    def forward_mode():
        with fwAD.dual_level():
            f(fwAD.make_dual(x, torch.ones_like(x)))
    for run in (lambda: torch.func.grad(f)(x), lambda: torch.func.vmap(f)(x.repeat(2, 1)),
                forward_mode):
        with pytest.raises(dl.DloopNotImplementedError, match="reverse mode only") as e:
            run()
        assert __file__ in str(e.value)
    x.requires_grad_(True)
    f(x).backward()
    torch.testing.assert_close(x.grad, 3 * torch.ones_like(x))


def test_keywords_and_python_values_reach_fn_as_without_the_bridge():
    """A Python number stays a number (as a 0-d float64 array it made float32 results
    float64), a string stays a string; keyword arguments are refused as by dl.jit."""
    x = torch.ones(2, requires_grad=True)
    assert dloop.torch.function(lambda x, s: x * s)(x, 2.5).dtype == torch.float32
    f = dloop.torch.function(lambda x, mode: x * 2 if mode == "double" else x * 3)
    assert f(x, "double").tolist() == [2.0, 2.0]
    with pytest.raises(dl.DloopTypeError, match="keyword arguments") as e:
        dloop.torch.function(lambda x: x * 2)(x=x)
    assert __file__ in str(e.value)


def test_torch_functions_on_traced_values_name_the_numpy_spelling():
    f = dloop.torch.function(lambda x: dl.fori_loop(0, 2, lambda i, v: torch.sin(v), x))
    with pytest.raises(dl.DloopTypeError, match=r"np\.sin\(v\)") as e:
        f(torch.ones(2, dtype=torch.float64, requires_grad=True))
    assert __file__ in str(e.value)


def test_strided_views_of_tensors_stay_views():
    """A slice with a step or a transpose came back as a copy (a dense array for DLPack);
    NumPy's and PyTorch's are views (design.md 32). Negative strides, which PyTorch cannot
    hold, are copies."""
    t = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    for view in (lambda a: a[:, ::2], lambda a: a.T, lambda a: a[1:]):
        out = dl.jit(view)(t)
        torch.testing.assert_close(out, view(t))
        out.fill_(-1.0)
        assert (t == -1).sum() == out.numel()
        t = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    out = dl.jit(lambda a: a[::-1])(t)
    torch.testing.assert_close(out, torch.flip(t, (0,)))
    out.fill_(-1.0)
    assert not (t == -1).any()
