"""The offline CUDA check: where NVRTC works but no GPU does, every kernel the tests generate
is rendered as CUDA C and compiled to PTX, so a CUDA C error fails the test that made the
kernel even on machines that cannot run it."""

import time

import pytest

from dloop.backends.base import available

ARCH = "compute_90"          # H100 / H200, the GPUs the cuda backend is run on
_compiled = set()            # sources NVRTC accepted: the suite renders many kernels twice
COST = {"kernels": 0, "seconds": 0.0}     # reported at the end of the session


def status():
    """(active, why): whether the check runs on this machine."""
    if available("cuda")[0]:
        return False, "a GPU is present: the cuda backend compiles and runs every kernel"
    try:
        from cupy.cuda import nvrtc
        version = nvrtc.getVersion()
    except Exception as e:          # no CuPy, or no NVRTC library for it to load
        return False, f"NVRTC is not usable here ({type(e).__name__}: {e})"
    return True, f"NVRTC {version[0]}.{version[1]}, -arch={ARCH}"


def check(kernel):
    """The kernel hook: render for CUDA, compile with NVRTC, fail the test with its log."""
    from dloop.backends.cuda.compile import CudaCompileError, compile_cuda
    from dloop.backends.cuda.render import render
    start = time.perf_counter()
    source = render(kernel)
    if source not in _compiled:
        try:
            compile_cuda(source, ARCH)
        except CudaCompileError as e:
            pytest.fail(f"the CUDA C of kernel {kernel.name} does not compile:\n{e}",
                        pytrace=False)
        _compiled.add(source)
        COST["kernels"] += 1
    COST["seconds"] += time.perf_counter() - start
