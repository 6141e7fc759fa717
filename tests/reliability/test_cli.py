"""python -m dloop info / cache clear."""

import os
import subprocess
import sys

import numpy as np

import dloop as dl


def cli(*args, cache_dir):
    env = {**os.environ, "DLOOP_CACHE_DIR": str(cache_dir), "DLOOP_NUM_THREADS": "3"}
    proc = subprocess.run([sys.executable, "-m", "dloop", *args], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_info(tmp_path):
    out = cli("info", cache_dir=tmp_path)
    assert out.startswith(f"dloop {dl.__version__}")
    for name in ("interpret", "cpu"):
        ok, why = dl.backends.base.available(name)
        assert f"  {name}" in out and (("available" in out) if ok else why in out)
    assert str(tmp_path) in out and "0 files" in out
    assert "num_threads        3" in out          # settings as this process sees them
    for name in dl.config.as_dict():
        assert f"  {name} " in out


def test_cache_clear(tmp_path):
    with dl.config.override(cache_dir=str(tmp_path), backend="cpu"):
        dl.jit(lambda x: dl.fori_loop(0, 3, lambda i, v: v * 2.0 + 0.123, x))(np.ones(3))
    assert dl.runtime.cache.size(str(tmp_path)) > 0
    assert "files" in cli("info", cache_dir=tmp_path)
    out = cli("cache", "clear", cache_dir=tmp_path)
    assert out.startswith("removed ") and str(tmp_path) in out
    assert dl.runtime.cache.size(str(tmp_path)) == 0


def test_a_binding_without_its_native_library_is_unavailable(monkeypatch):
    """The vulkan package raises OSError at import where no Vulkan loader is installed: the
    backend is reported unavailable with the reason, not a crash of `info` or of a run."""
    import importlib
    real = importlib.import_module

    def no_loader(name, *args):
        if name == "vulkan":
            raise OSError("Cannot find Vulkan SDK version")
        return real(name, *args)
    monkeypatch.setattr(importlib, "import_module", no_loader)
    ok, why = dl.backends.base.available("vulkan")
    assert not ok and "cannot load its native library" in why and "Vulkan SDK" in why
