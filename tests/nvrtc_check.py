"""The offline CUDA check: where NVRTC works but no GPU does, every kernel the tests generate
is rendered as CUDA C and compiled to PTX, so a CUDA C error fails the test that made the
kernel even on machines that cannot run it. The kernels of one test are compiled together,
as one translation unit, after the test: NVRTC's fixed cost per program is most of its time."""

import time

import pytest

from dloop.backends.base import available

ARCH = "compute_90"          # H100 / H200, the GPUs the cuda backend is run on
# The whole pipeline to PTX, without optimization: it finds every CUDA C error 6x faster
# than an optimized build (0.14 s against 0.79 s for a batch of 9 kernels here).
FAST = ("-G",)
_compiled = set()            # sources NVRTC accepted: the suite renders many kernels twice
_pending = {}                # source -> kernel name, rendered during the current test
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
    """The kernel hook: render for CUDA now (a renderer error fails at once), compile later."""
    from dloop.backends.cuda.render import render
    start = time.perf_counter()
    source = render(kernel)
    if source not in _compiled:
        _pending.setdefault(source, kernel.name)
    COST["seconds"] += time.perf_counter() - start


def flush():
    """Compile the kernels rendered since the last flush; fail the test with NVRTC's log."""
    if not _pending:
        return
    from dloop.backends.cuda.compile import CudaCompileError, compile_cuda
    from dloop.backends.cuda.render import KERNEL_NAME
    batch = dict(_pending)
    _pending.clear()
    start = time.perf_counter()
    # One translation unit: each kernel under its own name (the header is #pragma once).
    unit = "\n".join(source.replace(f" {KERNEL_NAME}(", f" {KERNEL_NAME}_{k}(")
                     for k, source in enumerate(batch))
    try:
        compile_cuda(unit, ARCH, extra=FAST)
    except CudaCompileError as e:
        pytest.fail(f"the CUDA C of kernels {', '.join(batch.values())} does not compile:\n{e}",
                    pytrace=False)
    finally:
        COST["seconds"] += time.perf_counter() - start
    _compiled.update(batch)
    COST["kernels"] += len(batch)
