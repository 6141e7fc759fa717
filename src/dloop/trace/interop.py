"""STAGE 1 — libraries that find an array's namespace with array-api-compat see traced arrays
next to NumPy constants (a kernel, a table of coefficients). array-api-compat answers
"multiple namespaces" for that mix; while tracing, the traced namespace wins and the NumPy
arrays are its constants. Every other call is passed through unchanged."""

import sys

import numpy as np

# array-api-compat itself, and the copy SciPy vendors.
_MODULES = ("array_api_compat", "scipy._lib.array_api_compat")


def _resolving(original):
    def array_namespace(*xs, **kwargs):
        from .tracer import Tracer
        traced = [x for x in xs if isinstance(x, Tracer)]
        if traced and all(isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float,
                                         complex, type(None))) for x in xs):
            return traced[0].__array_namespace__()
        return original(*xs, **kwargs)
    array_namespace.dloop_original = original
    return array_namespace


def install():
    """Wrap array_namespace in the compat modules imported so far (idempotent)."""
    for name in _MODULES:
        module = sys.modules.get(name)
        if module is None or hasattr(module.array_namespace, "dloop_original"):
            continue
        module.array_namespace = _resolving(module.array_namespace)
