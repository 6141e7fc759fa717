"""STAGE 4 — software float math as core kernel IR (placeholder)."""


def expansion(op, dtype, caps):
    raise NotImplementedError(op)
