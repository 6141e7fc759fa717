"""Capture of the user's file:line, so any later error can name the line that caused it."""

import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep
_THIRD_PARTY_INTERNAL = (os.sep + "numpy" + os.sep, os.sep + "array_api_compat" + os.sep)


def _is_internal(path):
    if path.startswith(_PACKAGE_DIR) or path.startswith("<frozen"):
        return True
    if any(part in path for part in _THIRD_PARTY_INTERNAL):
        return True
    return path.startswith(_STDLIB_DIR) and "site-packages" not in path


_KNOWN = {}      # path -> _is_internal(path), for the paths seen (a dict: cheaper to ask)


def user_location():
    """'file:line' of the innermost frame outside dloop, NumPy, array-api-compat and the stdlib."""
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        internal = _KNOWN.get(path)
        if internal is None:
            if len(_KNOWN) > 4096:
                _KNOWN.clear()
            internal = _KNOWN[path] = _is_internal(path)
        if not internal:
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return None
