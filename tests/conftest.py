import os

import pytest

import dloop
from dloop.backends import TABLE
from dloop.backends.base import available

# Every SPIR-V module the tests make goes through spirv-val before pipeline creation.
os.environ.setdefault("DLOOP_VULKAN_VALIDATE", "1")

BACKENDS = list(TABLE)
# Backends that compile kernels (every one but the interpreter, the oracle they are checked
# against), available or not: the cross-backend suites parametrize over these and skip with
# the reason where one is absent.
COMPILED = [name for name in TABLE if name != "interpret"]


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
