"""STAGE 3 — autodiff. Importing the package registers every VJP rule."""

from . import collective, loops, rules, rules_arrays  # noqa: F401
