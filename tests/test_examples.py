"""The examples run as users run them, pass their own checks (each asserts it recovered known
parameters) and write their pictures; the README shows the pictures they write."""

import os
import pathlib
import resource
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
WITHOUT_PICTURE = {"quickstart.py"}
CPU_SECONDS = 30          # per example, the budget the examples are written to on 2 cores

# Runs an example with some modules made unimportable, as on a machine without them.
HIDING = """
import runpy, sys
hidden = set(sys.argv[1].split(","))
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ImportError(f"{name} is hidden by the test")
sys.meta_path.insert(0, Hide())
sys.argv = sys.argv[2:]
sys.path.insert(0, str(__import__("pathlib").Path(sys.argv[0]).parent))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run(args, cwd):
    env = dict(os.environ, MPLBACKEND="Agg")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, cpu


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs_and_draws(path, tmp_path):
    out, cpu = run([str(path), str(tmp_path)], cwd=tmp_path)
    # CPU time rather than wall time: other work on a shared machine does not count.
    assert cpu < CPU_SECONDS, f"{path.name} used {cpu:.1f} s of CPU\n{out}"
    if path.name not in WITHOUT_PICTURE:
        picture = tmp_path / f"{path.stem}.png"
        assert picture.stat().st_size > 10_000, out
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_example_without_matplotlib_or_torch_prints_and_says_so(tmp_path):
    path = ROOT / "examples" / "array_libraries.py"
    out, _ = run(["-c", HIDING, "matplotlib,torch", str(path), str(tmp_path)], cwd=tmp_path)
    assert "torch: skipped, not installed" in out
    assert "identical to NumPy's gradient" in out
    assert "the plot array_libraries.png was skipped" in out
    assert not list(tmp_path.iterdir())


def test_readme_gallery_shows_each_examples_picture():
    readme = (ROOT / "README.md").read_text()
    for path in EXAMPLES:
        if path.name in WITHOUT_PICTURE:
            continue
        image = f"docs/images/{path.stem}.png"
        assert (ROOT / image).is_file(), f"run `python tools/gallery.py` to draw {image}"
        assert f"({image})" in readme, f"the README gallery does not show {image}"
