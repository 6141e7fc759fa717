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


def test_stores_under_the_cap_do_not_scan_the_cache(tmp_path, monkeypatch):
    """Every store listed and stat'ed every cache file to enforce the cap: 0.2 s a compile
    with 40,000 entries. A process now scans at its first store, and again only when its
    stores would pass the cap, which still evicts the least recently used."""
    import dloop as dl
    scans = []
    real_entries = cache.entries
    monkeypatch.setattr(cache, "entries", lambda d=None: scans.append(d) or real_entries(d))
    keys = [cache.key("test", k) for k in range(12)]
    with dl.config.override(cache_dir=str(tmp_path), cache_max_bytes=1 << 30):
        for k in keys[:10]:
            cache.store(k, bytes(1000), {})
    assert len(scans) == 1
    one = os.path.getsize(cache._path(keys[0], str(tmp_path)))
    with dl.config.override(cache_dir=str(tmp_path), cache_max_bytes=11 * one):
        cache.store(keys[10], bytes(1000), {})          # a new cap: scanned once
        assert len(scans) == 2
        os.utime(cache._path(keys[0], str(tmp_path)), (1000, 1000))
        cache.store(keys[11], bytes(1000), {})          # past the cap: scanned, evicted
        assert len(scans) == 3
        assert cache.load(keys[0], {}) is None
        assert all(cache.load(k, {}) is not None for k in keys[1:])


def test_clear(tmp_path):
    run(tmp_path)
    assert cache.size(str(tmp_path)) > 0
    files, freed = cache.clear(str(tmp_path))
    assert files > 0 and freed > 0 and cache.size(str(tmp_path)) == 0


def test_an_entry_that_is_a_fifo_or_grown_huge_is_discarded(tmp_path):
    """An entry's path holding a named pipe hung the reader forever in open(); one grown to
    64 GiB (sparse) was read whole. Both are discarded and the kernel compiled again."""
    _, expected, _ = run(tmp_path)
    files = _entry_files(tmp_path)
    os.remove(files[0])
    os.mkfifo(files[0])
    with open(files[1], "r+b") as f:
        f.truncate(64 << 30)
    # A cap above the sparse file's size: otherwise the first store evicts it unread.
    count, grad, stderr = run(tmp_path, {"DLOOP_CACHE_MAX_BYTES": str(1 << 40)})
    assert grad == expected and count == 2, (count, stderr)
    assert stderr.count("discarding the kernel cache entry") == 2, stderr


def test_the_size_cap_deletes_only_the_cache_s_own_files(tmp_path):
    """The cap and `cache clear` deleted any two-letter folder's .json, .bin or .tmp files:
    a cache_dir shared with other files lost them."""
    import dloop as dl
    foreign = [tmp_path / "de" / "messages.json", tmp_path / "ab" / "notes.tmp",
               tmp_path / "ab" / "data.bin"]
    for path in foreign:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(bytes(5000))
        os.utime(path, (1000, 1000))
    with dl.config.override(cache_dir=str(tmp_path), cache_max_bytes=100):
        cache.store(cache.key("test", 0), bytes(1000), {})
    cache.clear(str(tmp_path))
    assert all(path.exists() for path in foreign)


def test_writes_a_killed_process_left_are_deleted_by_the_size_cap(tmp_path):
    """A day-old .tmp counted against the cap but was never deleted: past the cap, every
    store evicted every other entry. A recent one may be a write in progress and stays."""
    import dloop as dl
    keys = [cache.key("test", k) for k in range(3)]
    with dl.config.override(cache_dir=str(tmp_path), cache_max_bytes=1 << 30):
        for k in keys[:2]:
            cache.store(k, bytes(1000), {})
    one = os.path.getsize(cache._path(keys[0], str(tmp_path)))
    stale, recent = tmp_path / keys[0][:2] / "dloop-x.tmp", tmp_path / keys[1][:2] / "tmpy.tmp"
    stale.write_bytes(bytes(100 * one))
    os.utime(stale, (1000, 1000))
    with dl.config.override(cache_dir=str(tmp_path), cache_max_bytes=4 * one):
        cache.store(keys[2], bytes(1000), {})
        assert all(cache.load(k, {}) is not None for k in keys)
    assert not stale.exists()
    recent.write_bytes(bytes(100 * one))
    with dl.config.override(cache_dir=str(tmp_path), cache_max_bytes=50 * one):
        cache.store(keys[0], bytes(1000), {})
    assert recent.exists()


def test_a_directory_at_an_entry_s_path_leaks_no_file_descriptor(tmp_path):
    """open() succeeds on a directory and fdopen() then refused it without closing the
    descriptor: one leaked per load."""
    import dloop as dl
    k = cache.key("test", "directory")
    with dl.config.override(cache_dir=str(tmp_path)):
        os.makedirs(cache._path(k))
        before = len(os.listdir("/proc/self/fd"))
        with pytest.warns(dl.DloopWarning):
            for _ in range(50):
                assert cache.load(k, {}) is None
        assert len(os.listdir("/proc/self/fd")) <= before + 1
