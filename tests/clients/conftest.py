import os
import sys

import pytest

# SciPy reads SCIPY_ARRAY_API once, when it is first imported.
os.environ["SCIPY_ARRAY_API"] = "1"
if "scipy" in sys.modules and not sys.modules["scipy._lib._array_api"].SCIPY_ARRAY_API:
    raise RuntimeError("scipy was imported before tests/clients set SCIPY_ARRAY_API=1; run "
                       "tests/clients in its own pytest process")

# The cases and SciPy's own failures are recorded against this SciPy release (its
# xp_capabilities tables and its code paths change between releases).
RECORDED = "1.17."


def pytest_collection_modifyitems(config, items):
    import pytest
    import scipy
    if scipy.__version__.startswith(RECORDED):
        return
    skip = pytest.mark.skip(reason=f"the SciPy cases are recorded for SciPy {RECORDED}x; this "
                            f"is SciPy {scipy.__version__} (pip install 'scipy=={RECORDED}*')")
    for item in items:
        if "clients" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _backend():
    """The interpreter (the NumPy reference the compiled backends are checked against in
    tests/features): these suites test tracing and gradients of SciPy's code, and compiling
    the few hundred kernels of its graphs for the CPU would take ten minutes here rather than
    one. DLOOP_CLIENTS_BACKEND=cpu runs them compiled."""
    import dloop
    previous = dloop.config.backend
    dloop.config.update("backend", os.environ.get("DLOOP_CLIENTS_BACKEND", "interpret"))
    yield
    dloop.config.update("backend", previous)
