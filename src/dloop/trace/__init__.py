"""STAGE 1 — tracing. Importing the package installs the whole-array methods on tracers."""

from . import arrays  # noqa: F401
