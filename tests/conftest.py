import pytest

import dloop
from dloop.backends.base import CAPABILITIES, available

BACKENDS = list(CAPABILITIES)


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
