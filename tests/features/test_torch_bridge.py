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
