"""Errors a user can cause. Every message names the user's source line and says what to do."""


class DloopError(Exception):
    """Base class of every error dloop raises for a user's mistake or a failed launch."""

    def __init__(self, message, where=None):
        self.where = where
        super().__init__(f"{message}\n  at {where}" if where else message)


class DloopTypeError(DloopError, TypeError):
    """A value of the wrong kind: a dtype or structure, or a traced value used where Python
    needs a concrete one."""


class DloopValueError(DloopError, ValueError):
    """A value of the right kind with an unusable shape or content."""


class DloopIndexError(DloopError, IndexError):
    """An index out of range, found while a compiled kernel ran."""


class DloopNotImplementedError(DloopError, NotImplementedError):
    """A feature this version does not support yet; never answered with a wrong result instead."""


class AdstackOverflowError(DloopError, RuntimeError):
    """A loop pushed more entries onto its adstack than the stack could hold."""


class DloopMemoryError(DloopError, MemoryError):
    """The adstack heap could not grow to what a launch needs."""


class DloopWarning(UserWarning):
    """Something dloop repaired or ignored on its own: a damaged kernel-cache entry, an
    unknown DLOOP_* environment variable."""


class DloopAttributeError(DloopNotImplementedError, AttributeError):
    """A name the array namespace of traced arrays does not have, so `hasattr` answers False."""
