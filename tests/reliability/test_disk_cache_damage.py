"""A damaged on-disk kernel cache (truncated, emptied, random or flipped bytes) never
crashes a later process: the bad entry is discarded with a warning and rebuilt, and the
gradient is the same. A read-only cache directory stops nothing. The size cap evicts the
least recently used entries."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dloop.backends.base import available
from dloop.runtime import cache

pytestmark = pytest.mark.skipif(not available("cpu")[0], reason="needs the cpu backend")

SCRIPT = textwrap.dedent("""
    import warnings
    import numpy as np, dloop as dl
    from dloop.backends.base import get_backend
    warnings.simplefilter("always")
    dl.config.update("backend", "cpu")
    rng = np.random.default_rng(0)
    x, n = rng.random(700), rng.integers(0, 30, size=700)
    loss = lambda x: (dl.fori_loop(0, n, lambda i, v: v * 0.9 + np.sin(v) * x, x) ** 2).sum()
    g = dl.grad(loss)(x)
    print(get_backend("cpu").compile_count, g.tobytes().hex())
""")


def run(directory, extra_env=None):
    env = {**os.environ, "DLOOP_CACHE_DIR": str(directory), **(extra_env or {})}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr}"
    count, grad = proc.stdout.split()
    return int(count), grad, proc.stderr


def _entry_files(directory):
    return sorted(p for p, _, _ in cache.entries(str(directory)) if p.endswith(".entry"))


def _damage(path, how, rng):
    data = open(path, "rb").read()
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "emptied":
        data = b""
    elif how == "random":
        data = rng.bytes(len(data))
    elif how == "flipped":
        k = len(data) - 100             # inside the machine code, past the header
        data = data[:k] + bytes([data[k] ^ 0x10]) + data[k + 1:]
    elif how == "header":
        data = data[:30] + bytes([data[30] ^ 0xFF]) + data[31:]
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("how", ["truncated", "emptied", "random", "flipped", "header"])
def test_damaged_entries_are_rebuilt(tmp_path, how):
    first_count, first_grad, _ = run(tmp_path)
    files = _entry_files(tmp_path)
    assert first_count > 0 and len(files) == first_count
    rng = np.random.default_rng(1)
    for path in files:
        _damage(path, how, rng)
    count, grad, stderr = run(tmp_path)
    assert grad == first_grad
    assert count == first_count, "every damaged entry is compiled again"
    assert stderr.count("discarding the kernel cache entry") == first_count, stderr
    # rebuilt: a third process compiles nothing and warns about nothing
    count, grad, stderr = run(tmp_path)
    assert (count, grad) == (0, first_grad) and "discarding" not in stderr, stderr


def test_read_only_cache_directory(tmp_path):
    _, expected, _ = run(tmp_path / "warm")
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        count, grad, _ = run(ro)
        assert count > 0 and grad == expected
    finally:
        os.chmod(ro, 0o755)


def test_unwritable_cache_path(tmp_path):
    """A cache directory under a regular file cannot be created: still no failure (this is
    the read-only case as root sees it)."""
    _, expected, _ = run(tmp_path / "warm")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    count, grad, _ = run(blocker / "cache")
    assert count > 0 and grad == expected


def test_size_cap_evicts_least_recently_used(tmp_path):
    import dloop as dl
    keys = [cache.key("test", k) for k in range(4)]
    code = bytes(1000)
    with dl.config.override(cache_dir=str(tmp_path), cache_max_bytes=1 << 30):
        for k in keys[:3]:
            cache.store(k, code, {"k": k})
        one = os.path.getsize(_entry_files(tmp_path)[0])
        for age, k in enumerate(keys[:3]):                 # oldest first
            os.utime(cache._path(k), (1000 + age, 1000 + age))
        assert cache.load(keys[0], {"k": keys[0]}) is not None     # a hit refreshes it
    with dl.config.override(cache_dir=str(tmp_path), cache_max_bytes=3 * one):
        cache.store(keys[3], code, {"k": keys[3]})
        assert cache.load(keys[1], {}) is None, "the least recently used entry survived"
        for k in (keys[0], keys[2], keys[3]):
            assert cache.load(k, {"k": k}) == (code, {"k": k})
        assert cache.size() <= 3 * one


def test_clear(tmp_path):
    run(tmp_path)
    assert cache.size(str(tmp_path)) > 0
    files, freed = cache.clear(str(tmp_path))
    assert files > 0 and freed > 0 and cache.size(str(tmp_path)) == 0
