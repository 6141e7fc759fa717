"""STAGE 5 — interpret: the backend. Nothing is compiled: the 'artifact' is the kernel IR
itself, which run.py executes with NumPy. Memory is host memory."""

from ..base import Backend, HostMemory
from .run import run_kernel


class InterpretBackend(HostMemory, Backend):
    name = "interpret"

    def legalize(self, kernel):
        """The oracle runs kernel IR as lowered, composites included (ir/semantics.py gives
        their meaning), so the other backends' legalized code is checked against it."""
        return kernel

    def render(self, kernel):
        return kernel

    def load(self, binary, source, kernel):
        return kernel

    def launch(self, kernel, n_threads, buffers):
        run_kernel(kernel, n_threads, buffers)
