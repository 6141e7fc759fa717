"""The command line: `python -m dloop info` and `python -m dloop cache clear`."""

import argparse
import platform
import sys

from . import __version__
from .backends import TABLE
from .backends.base import available
from .config import config
from .runtime import cache


def _size(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024


def info(out=sys.stdout):
    import numpy
    print(f"dloop {__version__} (Python {platform.python_version()}, NumPy {numpy.__version__})",
          file=out)
    print("backends:", file=out)
    for name in TABLE:
        ok, why = available(name)
        print(f"  {name:<10} {'available' if ok else 'unavailable: ' + why}", file=out)
    directory = config.cache_dir
    if directory:
        found = cache.entries(directory)
        print(f"kernel cache: {directory}\n  {len(found)} files, "
              f"{_size(sum(s for _, s, _ in found))} (cap {_size(config.cache_max_bytes)})",
              file=out)
    else:
        print("kernel cache: off (cache_dir is '')", file=out)
    print("config:", file=out)
    for name, value in config.as_dict().items():
        print(f"  {name:<18} {value!r:<24} {config.describe(name)}", file=out)


def clear_cache(out=sys.stdout):
    directory = config.cache_dir
    if not directory:
        print("the kernel cache is off (cache_dir is ''): nothing to clear", file=out)
        return
    files, freed = cache.clear(directory)
    print(f"removed {files} files ({_size(freed)}) from {directory}", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m dloop", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="version, backends, kernel cache and settings")
    cache_parser = commands.add_parser("cache", help="manage the on-disk kernel cache")
    cache_parser.add_argument("action", choices=["clear"])
    args = parser.parse_args(argv)
    if args.command == "info":
        info()
    else:
        clear_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
