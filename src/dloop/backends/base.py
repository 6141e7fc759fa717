"""STAGE 5 — the backend protocol and the table of backends.

A backend compiles kernel IR (compile: kernel -> artifact, cached by the kernel's text) and
launches it over n threads with a list of buffers (launch). Its heap holds adstack storage."""

import importlib

import numpy as np

from ..errors import DloopValueError
from ..runtime.heap import Heap

# name -> (module, class, what must be importable)
CAPABILITIES = {
    "interpret": ("dloop.backends.interpret.run", "InterpretBackend", ()),
    "cpu": ("dloop.backends.cpu.launch", "CpuBackend", ("llvmlite",)),
}

_instances = {}


def available(name):
    """(True, '') or (False, reason)."""
    if name not in CAPABILITIES:
        return False, f"unknown backend {name!r}"
    for module in CAPABILITIES[name][2]:
        try:
            importlib.import_module(module)
        except ImportError as e:
            return False, f"backend {name!r} needs {module}: {e}"
    return True, ""


def get_backend(name):
    if name not in _instances:
        ok, why = available(name)
        if not ok:
            raise DloopValueError(why)
        module, cls, _ = CAPABILITIES[name]
        _instances[name] = getattr(importlib.import_module(module), cls)()
    return _instances[name]


def host_heap():
    """A heap in host memory, for the backends that run on the CPU."""
    def copy(dst, src, nbytes):
        dst[:nbytes] = src[:nbytes]
    return Heap(lambda nbytes: np.empty(nbytes, dtype=np.uint8), copy)


class Backend:
    name = None

    def __init__(self):
        self.heap = host_heap()
        self._cache = {}
        self.compile_count = 0
        self.count_launches = 0       # counting pre-passes run (where no expression exists)

    def compile(self, kernel, sizing=""):
        key = str(kernel)
        artifact = self._cache.get(key)
        if artifact is None:
            artifact = self._compile(kernel)
            self.compile_count += 1
            self._cache[key] = artifact
        return artifact

    def _compile(self, kernel):
        raise NotImplementedError

    def launch(self, artifact, n_threads, buffers):
        raise NotImplementedError
