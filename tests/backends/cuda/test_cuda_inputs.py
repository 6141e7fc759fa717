"""Arrays of GPU libraries at the API boundary, where no GPU is needed to check them."""

import sys

import numpy as np
import pytest

import dloop as dl


def test_torch_tensor_on_a_device_without_backend_names_the_line():
    torch = pytest.importorskip("torch")
    x = torch.empty(3, dtype=torch.float64, device="meta")
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.grad(lambda v: (v * 2.0).sum())(x)                # E-meta
    message = str(e.value)
    assert "meta" in message and "pass a CPU or CUDA tensor" in message
    line = next(k for k, text in enumerate(open(__file__), 1) if text.rstrip().endswith("E-meta"))
    assert f"{__file__}:{line}" in message


def test_cpu_inputs_choose_the_cpu_backend():
    torch = pytest.importorskip("torch")
    previous = dl.config.backend
    dl.config.update("backend", None)
    try:
        g = dl.grad(lambda v: dl.fori_loop(0, 3, lambda i, w: w * 2.0, v).sum())(
            torch.ones(2, dtype=torch.float64))
    finally:
        dl.config.update("backend", previous)
    assert isinstance(g, torch.Tensor) and g.device.type == "cpu"
    np.testing.assert_array_equal(g.numpy(), [8.0, 8.0])    # d(8 v)/dv
    assert dl.api._last_backend[0].name == "cpu"


def test_device_arrays_without_cupy_say_how_to_install_it(monkeypatch):
    monkeypatch.setattr(dl.libraries, "on_cuda", lambda x: isinstance(x, np.ndarray))
    monkeypatch.setitem(sys.modules, "cupy", None)          # as if CuPy were not installed
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.jit(lambda v: v * 2.0)(np.ones(3))               # E-nocupy
    message = str(e.value)
    assert "pip install 'dloop[cuda]'" in message
    line = next(k for k, text in enumerate(open(__file__), 1) if text.rstrip().endswith("E-nocupy"))
    assert f"{__file__}:{line}" in message


def test_one_cuda_device_per_process(monkeypatch):
    """The device check's decisions, without a GPU: the backend binds to the first device it
    runs on; an array elsewhere, or another current device, is refused naming the line."""
    from dloop import libraries
    monkeypatch.setattr(libraries, "_CUDA_DEVICE", [])
    libraries._check_device(1, 1, None)                      # binds to device 1
    libraries._check_device(1, 1, None)
    for device, current in [(0, 1), (1, 0), (0, 0)]:
        with pytest.raises(dl.DloopNotImplementedError, match="device 1 \\(the first"):
            libraries._check_device(device, current, None)


def test_nvrtc_target_for_gpus_newer_and_older_than_it_knows(monkeypatch):
    """A cubin for an architecture this NVRTC knows; PTX of its newest for a newer GPU (the
    driver compiles it), and of the newest below it for one between two it knows (8.6 was
    refused as 'older than every architecture'); a GPU older than all it knows makes the
    backend unavailable."""
    launch = pytest.importorskip("dloop.backends.cuda.launch")
    from cupy.cuda import nvrtc
    monkeypatch.setattr(nvrtc, "getSupportedArchs", lambda: (75, 80, 90))
    launch._target.cache_clear()
    try:
        assert launch._target("90") == "sm_90"
        assert launch._target("86") == "compute_80"
        assert launch._target("120") == "compute_90"
        with pytest.raises(ValueError, match="older than every architecture"):
            launch._target("61")
    finally:
        launch._target.cache_clear()
