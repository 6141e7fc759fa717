"""STAGE 5 — cuda: CUDA C -> PTX or a cubin with NVRTC (through CuPy's binding). Needs no GPU,
so the same function compiles at run time and checks every generated kernel in CI."""

from importlib import resources

from .render import HEADER

# IEEE results that match the other backends: no fused multiply-add contraction, no
# flush-to-zero, correctly rounded division and square root.
OPTIONS = ("--std=c++17", "--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true")


class CudaCompileError(RuntimeError):
    """NVRTC rejected generated code: a bug in dloop, not in the user's program."""


def header_text():
    return resources.files("dloop").joinpath("_native/cuda/adstack.cuh").read_text()


def nvrtc_version():
    from cupy.cuda import nvrtc
    return nvrtc.getVersion()


def compile_cuda(source, arch, cubin=False, extra=()):
    """PTX (arch 'compute_XY') or a cubin (arch 'sm_XY') of `source`, as bytes; `extra`:
    more NVRTC options."""
    from cupy.cuda import nvrtc
    prog = nvrtc.createProgram(source, "dloop_kernel.cu", [header_text().encode()],
                                [HEADER.encode()])
    try:
        try:
            nvrtc.compileProgram(prog, [f"--gpu-architecture={arch}", *OPTIONS, *extra])
        except nvrtc.NVRTCError as e:
            raise CudaCompileError(f"NVRTC could not compile a generated kernel ({e}):\n"
                                   f"{nvrtc.getProgramLog(prog)}\n{_numbered(source)}") from None
        return nvrtc.getCUBIN(prog) if cubin else nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)


def _numbered(source):
    return "\n".join(f"{k:4d}  {line}" for k, line in enumerate(source.splitlines(), 1))
