"""The user guide's Python blocks run, in order, as a reader would run them, so the guide
stays true: a block whose code or assertion no longer holds fails here, at its line."""

import contextlib
import io
import pathlib
import re

import pytest

import dloop as dl

DOCS = pathlib.Path(__file__).parent.parent / "docs"
PAGES = ["guide.md", "coming_from_jax.md", "coming_from_quadrants.md", "coming_from_drjit.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def program(text):
    """The page's Python blocks as one program, each block at its own line numbers, so a
    failure and dloop's error messages point at the line of the page."""
    lines = [""] * text.count("\n")
    for match in BLOCK.finditer(text):
        first = text.count("\n", 0, match.start(1))
        for k, line in enumerate(match.group(1).splitlines()):
            lines[first + k] = line
    return "\n".join(lines), len(BLOCK.findall(text))


@pytest.fixture
def settings_restored():
    saved = {name: getattr(dl.config, name) for name in ("backend", "adstack_capacity",
                                                          "max_adstack_bytes", "debug")}
    yield
    for name, value in saved.items():
        dl.config.update(name, value)


@pytest.mark.parametrize("page", PAGES)
def test_page_code_runs(page, settings_restored, tmp_path, monkeypatch):
    path = DOCS / page
    source, blocks = program(path.read_text())
    assert blocks >= 1, f"{page} should show dloop code"
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, str(path), "exec"), {"__name__": f"docs.{path.stem}"})
    assert out.getvalue(), f"{page} prints nothing a reader could compare with"


def test_program_keeps_line_numbers():
    text = "intro\n```python\na = 1\n```\nmore\n```python\nb = a + 1\n```\n"
    source, blocks = program(text)
    assert blocks == 2
    assert source.splitlines()[2] == "a = 1" and source.splitlines()[6] == "b = a + 1"
    namespace = {}
    exec(compile(source, "page.md", "exec"), namespace)
    assert namespace["b"] == 2
