"""A second process finds every kernel, and every step driver of a collective loop, in the
disk cache: nothing compiles, sizing and the gradient are identical."""

import subprocess
import sys
import textwrap

import pytest

from dloop.backends.base import available

SCRIPT = textwrap.dedent("""
    import numpy as np, dloop as dl
    from dloop.backends.base import get_backend
    dl.config.update("backend", "cpu")
    rng = np.random.default_rng(0)
    x, n = rng.random(1000), rng.integers(0, 50, size=1000)

    def loss(x):
        v = dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x)
        w = dl.while_loop(lambda w: w > 0.1, lambda w: w * 0.7, v + 1.0)
        # A collective loop of kernels only: run by a native step driver.
        u = dl.fori_loop(0, 300, lambda i, u: u + 0.1 * (np.roll(u, 1) - u), x[:64])
        return (v * w).sum() + (u ** 2).sum()

    g = dl.grad(loss)(x)
    print(get_backend("cpu").compile_count, dl.memory_stats()["adstack_bytes_used"],
          g.tobytes().hex())
""")


@pytest.mark.skipif(not available("cpu")[0], reason="needs the cpu backend")
def test_second_process_compiles_nothing(tmp_path):
    env = {"DLOOP_CACHE_DIR": str(tmp_path)}

    def run():
        import os
        proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                              env={**os.environ, **env}, timeout=300)
        assert proc.returncode == 0, proc.stderr
        count, used, grad = proc.stdout.split()
        return int(count), int(used), grad

    first, second = run(), run()
    assert first[0] > 0
    assert second[0] == 0, "the second process compiled kernels"
    assert second[1:] == first[1:]


def test_entries_are_keyed_by_dloop_source(tmp_path, monkeypatch):
    """Machine code made by other dloop code (a renderer changed without a new version) is
    not loaded for the same kernel IR: the key holds a hash of dloop's source files."""
    import dloop as dl
    from dloop.backends.base import get_backend
    from dloop.runtime import cache
    if not available("cpu")[0]:
        pytest.skip("needs the cpu backend")
    be = get_backend("cpu")
    assert len(cache.code_identity()) == 64
    text, loads = "the same kernel IR text", []
    with dl.config.override(cache_dir=str(tmp_path)):
        key, hit = be.from_disk_cache("test", text, loads.append)
        assert hit is None
        be.to_disk_cache(key, text, b"machine code")
        assert be.from_disk_cache("test", text, lambda code: code)[1] == b"machine code"
        monkeypatch.setattr(cache, "code_identity", lambda: "other source")
        assert be.from_disk_cache("test", text, loads.append)[1] is None
    assert not loads
