"""Every setting in one place. Each is read once from the environment variable DLOOP_<NAME>,
and can be changed at run time with `dloop.config.update(name, value)`."""

import os

from .errors import DloopValueError
from .trace.source import user_location

_BACKENDS = ("cpu", "interpret", "vulkan")


def _parse_capacity(text):
    if text in (None, "", "none", "None"):
        return None
    return int(text)


def _check_capacity(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DloopValueError(
            f"adstack_capacity must be None (exact sizing) or a non-negative int, got {value!r}")
    return value


def _check_backend(value):
    if value is not None and value not in _BACKENDS:
        raise DloopValueError(
            f"backend must be one of {', '.join(_BACKENDS)} or None (chosen from the "
            f"inputs), got {value!r}")
    return value


def _check_threads(value):
    if value is not None and (not isinstance(value, int) or value < 1):
        raise DloopValueError(f"num_threads must be None (all cores) or a positive int, "
                              f"got {value!r}")
    return value


def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _check_bytes(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DloopValueError(f"max_adstack_bytes must be a non-negative int, got {value!r}")
    return value


def _default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dloop")


def _check_cache_dir(value):
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise DloopValueError(f"cache_dir must be a path, or '' to turn the disk cache off, "
                              f"got {value!r}")
    return os.fspath(value) if value else ""


def _check_debug(value):
    return bool(value) if not isinstance(value, str) else value not in ("", "0", "false", "False")


# name: (parser from the environment's text, validator of a Python value, default, description)
_SETTINGS = {
    "backend": (lambda s: s or None, _check_backend, None,
                "'cpu', 'interpret', 'vulkan', or None: chosen from the inputs' array library "
                "(CPU for NumPy)."),
    "adstack_capacity": (_parse_capacity, _check_capacity, None,
                         "None sizes every adstack exactly from live data; an int fixes the "
                         "per-element capacity of every stack (pushes past it raise "
                         "AdstackOverflowError)."),
    "max_adstack_bytes": (int, _check_bytes, _physical_memory() // 2,
                          "Upper bound on the adstack heap, in bytes (default: half of the "
                          "machine's physical memory)."),
    "cache_dir": (lambda s: s, _check_cache_dir, _default_cache_dir(),
                  "Directory of the on-disk kernel cache; '' turns it off."),
    "num_threads": (lambda s: int(s) if s else None, _check_threads, None,
                    "CPU worker threads; None uses every core."),
    "debug": (lambda s: s, _check_debug, False,
              "Print the graph IR, kernel IR and generated code of every compiled kernel."),
}


class _Config:
    def __init__(self):
        for name, (parse, check, default, _) in _SETTINGS.items():
            text = os.environ.get(f"DLOOP_{name.upper()}")
            object.__setattr__(self, name, default if text is None else check(parse(text)))

    def update(self, name, value):
        if name not in _SETTINGS:
            raise DloopValueError(f"unknown setting {name!r}; known settings: "
                                  f"{', '.join(_SETTINGS)}", user_location())
        try:
            checked = _SETTINGS[name][1](value)
        except DloopValueError as e:
            raise DloopValueError(str(e), user_location()) from None
        object.__setattr__(self, name, checked)

    def __setattr__(self, name, value):
        self.update(name, value)


config = _Config()
