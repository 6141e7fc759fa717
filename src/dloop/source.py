"""Capture of the user's file:line, so any later error can name the line that caused it."""

import importlib.util
import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep


def _library_dirs(names):
    """The installed directories of these packages (found, not imported): frames in them are
    the libraries' own (NumPy's dispatch, the bridges' autograd and callbacks), not the
    user's, even where the user's own directories share a package's name."""
    dirs = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            dirs += [os.path.join(os.path.abspath(p), "") for p in spec.submodule_search_locations]
    return tuple(dirs)


_THIRD_PARTY_INTERNAL = _library_dirs(("numpy", "array_api_compat", "torch", "jax", "jaxlib"))


def _is_internal(path):
    if path.startswith(_PACKAGE_DIR) or path.startswith("<frozen"):
        return True
    if path.startswith(_THIRD_PARTY_INTERNAL):
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


def raised_inside(tb):
    """For a traceback: the user's 'file:line' where the innermost frame outside NumPy, the
    other libraries and the stdlib is dloop's own (an argument NumPy's helpers refused inside
    dloop's implementation of a function the user called); None where the user's code raised."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename + "\0" + str(tb.tb_lineno))
        tb = tb.tb_next
    paths = [f.split("\0") for f in reversed(frames)]     # innermost first
    k = 0
    while k < len(paths) and _is_internal(paths[k][0]) and not paths[k][0].startswith(
            _PACKAGE_DIR):
        k += 1
    if k == len(paths) or not paths[k][0].startswith(_PACKAGE_DIR):
        return None
    outside = next((p for p in paths[k:] if not _is_internal(p[0])), None)
    return None if outside is None else f"{outside[0]}:{outside[1]}"
