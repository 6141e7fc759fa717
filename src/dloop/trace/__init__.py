"""STAGE 1 — tracing. Importing the package installs the whole-array methods on tracers."""

from . import arrays, numpy_functions  # noqa: F401
from . import array_api, numpy_hooks, tracer

tracer.array_api, tracer.numpy_hooks = array_api, numpy_hooks
