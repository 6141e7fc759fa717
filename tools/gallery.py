"""Redraws the README gallery: runs every example with docs/images as its output folder.

    pip install -e '.[examples]'
    python tools/gallery.py                 # all examples
    python tools/gallery.py heat_inverse    # some of them

Each example checks its own result as it runs, so a picture is only replaced by one of a
run that recovered its known answer."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"


def main(names):
    examples = sorted(p for p in (ROOT / "examples").glob("*.py")
                      if not p.name.startswith("_") and p.name != "quickstart.py")
    chosen = [p for p in examples if not names or p.stem in names]
    if names and len(chosen) != len(set(names)):
        sys.exit(f"unknown example among {names}; known: {[p.stem for p in examples]}")
    failed = []
    for path in chosen:
        print(f"== {path.name}", flush=True)
        proc = subprocess.run([sys.executable, str(path), str(IMAGES)],
                              env=dict(os.environ, MPLBACKEND="Agg"))
        if proc.returncode:
            failed.append(path.name)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main(sys.argv[1:])
