"""STAGE 1 — tracing. Importing the package installs the whole-array methods on tracers."""

from . import arrays, numpy_functions  # noqa: F401
