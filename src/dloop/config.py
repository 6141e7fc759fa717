"""Every setting in one place. Each is read once from the environment variable DLOOP_<NAME>,
and can be changed at run time with `dloop.config.update(name, value)` or, for a block of
code, `with dloop.config.override(name=value): ...`. Settings are process-wide."""

import contextlib
import difflib
import numbers
import os
import threading
import warnings

import numpy as np

from .backends import TABLE as _BACKENDS
from .errors import DloopValueError, DloopWarning
from .source import user_location

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off", "none")
# DLOOP_* variables that are not settings but are read elsewhere (the randomized test, the
# toy backend of the tests).
_OTHER_VARIABLES = ("DLOOP_RANDOM_EXAMPLES", "DLOOP_RANDOM_SEED", "DLOOP_TEST_TOY_BACKEND")

def _parse_int(text):
    """An integer from text, also written as '1e9' or '1_000_000'."""
    try:
        return int(text)
    except ValueError:
        value = float(text)       # ValueError here is reported with the variable's name
        if not value.is_integer():
            raise
        return int(value)


def _parse_optional_int(text):
    return None if text.strip().lower() in ("", "none") else _parse_int(text)


def _integer(value):
    """value as a Python int where it is an integer (np.int64 included) and not a bool."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def _check_capacity(value):
    if value is None:
        return None
    number = _integer(value)
    if number is None or not 0 <= number < 2 ** 63:
        raise DloopValueError(
            f"adstack_capacity must be None (exact sizing) or a non-negative int below 2**63, "
            f"got {value!r}")
    return number


def _check_backend(value):
    if value is not None and (not isinstance(value, str) or value not in _BACKENDS):
        raise DloopValueError(
            f"backend must be one of {', '.join(_BACKENDS)} or None (chosen from the "
            f"inputs), got {value!r}")
    return value


# More threads than any machine has cores only costs memory and start-up (20,000 took 1.3 s
# to start for a small gradient; 10^99 failed at the first launch with a raw RuntimeError).
MAX_THREADS = 1024


def _check_threads(value):
    if value is None:
        return None
    number = _integer(value)
    if number is None or not 1 <= number <= MAX_THREADS:
        raise DloopValueError(f"num_threads must be None (all cores) or an int from 1 to "
                              f"{MAX_THREADS}, got {value!r}")
    return number


def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


# The adstack heap's sizes are int64 sums, interleaved tapes up to 32x the exact one:
# limits past 2^56 bytes (64 PiB) could wrap them and pass every check.
MAX_BYTES = 1 << 56


def _check_bytes(name):
    def check(value):
        number = _integer(value)
        if number is None or number < 0:
            raise DloopValueError(f"{name} must be a non-negative int (bytes), got {value!r}")
        value = number
        if value > MAX_BYTES:
            raise DloopValueError(f"{name} must be at most 2**56 bytes (64 PiB), got "
                                  f"{value:,}; no machine has that much memory")
        return value
    return check


def _default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dloop")


def _check_cache_dir(value):
    if value is not None and not isinstance(value, (str, os.PathLike)) or \
            value and "\0" in str(os.fspath(value)):
        raise DloopValueError(f"cache_dir must be a path, or '' to turn the disk cache off, "
                              f"got {value!r}")
    return os.fspath(value) if value else ""


def _check_flag(name):
    def check(value):
        if isinstance(value, str):
            text = value.strip().lower()
            if text in _TRUE or text in _FALSE:
                return text in _TRUE
            raise DloopValueError(f"{name} must be a bool, or one of {', '.join(_TRUE)} / "
                                  f"{', '.join(repr(f) for f in _FALSE)}, got {value!r}")
        if isinstance(value, (bool, np.bool_)) or _integer(value) in (0, 1):
            return bool(value)
        raise DloopValueError(f"{name} must be a bool (or 0 or 1), got {value!r}")
    return check


def _check_text(name):
    def check(value):
        if value is not None and not isinstance(value, str):
            raise DloopValueError(f"{name} must be a string or None, got {value!r}")
        return value or None
    return check


# name: (parser from the environment's text, validator of a Python value, default, description)
_SETTINGS = {
    "backend": (lambda s: None if s.strip().lower() in ("", "none") else s, _check_backend, None,
                "a backend of dloop.backends.TABLE ('cpu', 'interpret', 'vulkan', 'cuda', ...), "
                "or None: chosen from the inputs' array library "
                "(CPU for NumPy)."),
    "adstack_capacity": (_parse_optional_int, _check_capacity, None,
                         "None sizes every adstack exactly from live data; an int fixes the "
                         "per-element capacity of every stack, and the number of steps a "
                         "collective loop's tape holds (pushes past it raise "
                         "AdstackOverflowError)."),
    "max_adstack_bytes": (_parse_int, _check_bytes("max_adstack_bytes"),
                          _physical_memory() // 2,
                          "Upper bound on the adstack heap, in bytes (default: half of the "
                          "machine's physical memory)."),
    "cache_dir": (lambda s: s, _check_cache_dir, _default_cache_dir(),
                  "Directory of the on-disk kernel cache; '' turns it off."),
    "cache_max_bytes": (_parse_int, _check_bytes("cache_max_bytes"), 1 << 30,
                        "Size cap of the on-disk kernel cache; past it the least recently "
                        "used entries are deleted."),
    "num_threads": (_parse_optional_int, _check_threads, None,
                    "CPU worker threads; None uses every core."),
    "debug": (lambda s: s, _check_flag("debug"), False,
              "Print the graph IR, kernel IR and generated code of every compiled kernel."),
    "vulkan_device": (lambda s: s, _check_text("vulkan_device"), None,
                      "The Vulkan device: an index or a part of its name; None prefers a "
                      "discrete GPU, then an integrated one, then a CPU implementation."),
    "vulkan_mask": (lambda s: s, _check_text("vulkan_mask"), None,
                    "Vulkan features to treat as absent, comma-separated (float64, int64, "
                    "float_atomics, unified, mapped): to test a smaller device on a larger "
                    "one."),
    "vulkan_validate": (lambda s: s, _check_flag("vulkan_validate"), False,
                        "Check every SPIR-V module with spirv-val before it is used."),
}


def _from_environment(name, parse, check):
    variable = f"DLOOP_{name.upper()}"
    text = os.environ[variable]
    try:
        return check(parse(text))
    except (ValueError, TypeError) as e:
        detail = str(e) if isinstance(e, DloopValueError) else f"cannot read {text!r}"
        raise DloopValueError(
            f"environment variable {variable}={text!r} is not a valid {name}: {detail}. "
            f"Fix or unset {variable}") from None


def _warn_unknown_variables():
    known = {f"DLOOP_{name.upper()}" for name in _SETTINGS} | set(_OTHER_VARIABLES)
    for variable in sorted(os.environ):
        if variable.startswith("DLOOP_") and variable not in known:
            close = difflib.get_close_matches(variable, sorted(known), n=1, cutoff=0.8)
            hint = f"; did you mean {close[0]}?" if close else \
                f"; dloop reads {', '.join(sorted(known - set(_OTHER_VARIABLES)))}"
            warnings.warn(f"environment variable {variable} is not a dloop setting and is "
                          f"ignored{hint}", DloopWarning)


class _Config:
    def __init__(self):
        object.__setattr__(self, "_lock", threading.Lock())
        for name, (parse, check, default, _) in _SETTINGS.items():
            value = default
            if f"DLOOP_{name.upper()}" in os.environ:
                value = _from_environment(name, parse, check)
            object.__setattr__(self, name, value)
        _warn_unknown_variables()

    def _checked(self, name, value, where):
        if name not in _SETTINGS:
            raise DloopValueError(f"unknown setting {name!r}; known settings: "
                                  f"{', '.join(_SETTINGS)}", where)
        try:
            return _SETTINGS[name][1](value)
        except DloopValueError as e:
            raise DloopValueError(str(e), where) from None

    def update(self, name, value):
        checked = self._checked(name, value, user_location())
        with self._lock:
            object.__setattr__(self, name, checked)

    @contextlib.contextmanager
    def override(self, **settings):
        """Set `settings` for the duration of a `with` block, then restore the previous
        values (also when the block raises). The change is seen by every thread."""
        where = user_location()
        checked = {name: self._checked(name, value, where) for name, value in settings.items()}
        with self._lock:
            previous = {name: getattr(self, name) for name in checked}
            for name, value in checked.items():
                object.__setattr__(self, name, value)
        try:
            yield self
        finally:
            with self._lock:
                for name, value in previous.items():
                    object.__setattr__(self, name, value)

    def as_dict(self):
        return {name: getattr(self, name) for name in _SETTINGS}

    def describe(self, name):
        return _SETTINGS[name][3]

    def __setattr__(self, name, value):
        self.update(name, value)


config = _Config()
# A lock held by another thread at a fork stays held in the child forever.
os.register_at_fork(after_in_child=lambda: object.__setattr__(config, "_lock", threading.Lock()))
