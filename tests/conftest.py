import os
import shutil

# JAX (its bridge's tests) would take three quarters of a GPU's memory at its first array,
# next to the cuda backend's tests in the other workers.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import nvrtc_check
import pytest

import dloop
from dloop.backends import TABLE, Row
from dloop.backends.base import available
from dloop.runtime.program import KERNEL_HOOKS

if os.environ.get("DLOOP_TEST_TOY_BACKEND"):
    # tests/test_toy_backend.py: a backend added through the table alone runs every suite.
    TABLE["toy"] = Row("toy_backend", "ToyBackend", ())

# Every SPIR-V module the tests make goes through spirv-val before pipeline creation, where
# spirv-tools is installed (CI installs it; the GPU machine has none).
dloop.config.update("vulkan_validate", shutil.which("spirv-val") is not None)

BACKENDS = list(TABLE)


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Runs the test once per backend in the capability table; absent ones skip with why."""
    ok, why = available(request.param)
    if not ok:
        pytest.skip(why)
    previous = dloop.config.backend
    dloop.config.update("backend", request.param)
    yield request.param
    dloop.config.update("backend", previous)


@pytest.fixture(autouse=True)
def _reset_capacity():
    yield
    dloop.config.update("adstack_capacity", None)


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache(tmp_path_factory):
    """Tests never write to the user's kernel cache."""
    previous = dloop.config.cache_dir
    dloop.config.update("cache_dir", str(tmp_path_factory.mktemp("kernel-cache")))
    yield
    dloop.config.update("cache_dir", previous)


def pytest_report_header(config):
    active, why = nvrtc_check.status()
    return f"offline CUDA check: {'on' if active else 'off'}, {why}"


def pytest_terminal_summary(terminalreporter):
    if nvrtc_check.COST["kernels"]:
        terminalreporter.write_line("offline CUDA check: {kernels} distinct kernels compiled "
                                    "by NVRTC in {seconds:.1f} s".format(**nvrtc_check.COST))


@pytest.fixture(autouse=True, scope="session")
def _cuda_offline_check():
    """Without a GPU, every generated kernel still goes through the CUDA renderer and NVRTC."""
    if not nvrtc_check.status()[0]:
        yield
        return
    KERNEL_HOOKS.append(nvrtc_check.check)
    yield
    KERNEL_HOOKS.remove(nvrtc_check.check)


@pytest.fixture(autouse=True)
def _cuda_offline_compile():
    """Compiles the kernels the test rendered (see _cuda_offline_check) once it is done."""
    yield
    nvrtc_check.flush()
