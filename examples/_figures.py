"""Where the examples write their pictures, and matplotlib if it is installed.

Every example takes one optional argument, the folder for its PNG (default: the current
folder); `python tools/gallery.py` runs them all with docs/images."""

import pathlib
import sys


def pyplot():
    """matplotlib.pyplot drawing into files, or None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")        # the examples write files and never open a window
    import matplotlib.pyplot as plt
    return plt


def save(fig, name):
    folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def skipped(name):
    print(f"matplotlib is not installed (pip install 'dloop[examples]'): the plot {name} "
          "was skipped; the numbers above are what it would show")
