"""The on-disk kernel cache, backend-neutral: compiled code keyed by a hash of everything
that determines it.

An entry is one file: a magic line, the lengths of its metadata and code, a SHA-256 of both,
then both. Damaged machine code handed to the JIT linker crashes the process, so nothing is
used before its length and checksum are verified; a bad entry is deleted with a warning and
rebuilt. Entries are written to a temporary file and renamed into place, so a reader (or a
second writer) sees a whole entry or none. Every disk error only costs a recompile: a
read-only or full cache directory never stops a computation. A hit refreshes the entry's
modification time; past config.cache_max_bytes the least recently used entries go (_account
says when the cache is scanned for that)."""

import functools
import hashlib
import json
import os
import re
import stat
import struct
import tempfile
import time
import warnings

from ..config import config
from ..errors import DloopWarning

_MAGIC = b"dloop kernel cache 1\n"
_HEADER = struct.Struct("<QQ32s")          # metadata length, code length, sha256
_SUFFIX = ".entry"
_TMP_PREFIX = "dloop-"
# The cache's own files, and nothing else that may share its directory: the size cap and
# `cache clear` delete only these (entries, leftovers of older formats, interrupted writes).
_OURS = re.compile(r"[0-9a-f]{64}\.(entry|bin|json)|(dloop-|tmp)[\w-]*\.tmp")
_SUBDIR = re.compile(r"[0-9a-f]{2}")
# A write this old is a killed process's, not one in progress: the size cap deletes it.
_STALE_TMP_SECONDS = 3600


@functools.cache
def code_identity():
    """A hash of dloop's own source (Python and LLVM files): a renderer changed without a
    new version number must not load machine code the old one made for the same kernel
    IR (a layout the old code did not know would then be read wrongly)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            if name.endswith((".py", ".ll")):
                path = os.path.join(folder, name)
                h.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def key(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def _path(k, directory=None):
    directory = config.cache_dir if directory is None else directory
    if not directory:
        return None
    return os.path.join(directory, k[:2], k + _SUFFIX)


def _decode(blob):
    """(code, metadata) of a whole entry, or the reason it is not one."""
    start = len(_MAGIC) + _HEADER.size
    if len(blob) < start or not blob.startswith(_MAGIC):
        return "its header is missing or damaged"
    n_meta, n_code, digest = _HEADER.unpack_from(blob, len(_MAGIC))
    body = blob[start:]
    if len(body) != n_meta + n_code:
        return f"it holds {len(body)} bytes where its header says {n_meta + n_code}"
    if hashlib.sha256(body).digest() != digest:
        return "its checksum does not match"
    try:
        meta = json.loads(body[:n_meta].decode())
    except ValueError:
        return "its metadata is not readable"
    return bytes(body[n_meta:]), meta


def _read_entry(path):
    """An entry's bytes: only a regular file (a FIFO would block open() and read() forever),
    and no more than its header announces (a file grown by damage is not read whole)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        # Checked before fdopen, which refuses a directory without closing the descriptor.
        os.close(fd)
        return b""                     # reported as a damaged header, and removed
    with os.fdopen(fd, "rb") as f:
        head = f.read(len(_MAGIC) + _HEADER.size)
        if len(head) < len(_MAGIC) + _HEADER.size or not head.startswith(_MAGIC):
            return head
        n_meta, n_code, _ = _HEADER.unpack_from(head, len(_MAGIC))
        if len(head) + n_meta + n_code != st.st_size:
            return head                # its length is checked (and refused) in _decode
        return head + f.read(n_meta + n_code)


def load(k, check):
    """(code bytes, metadata) if a verified entry for key k exists and its metadata has the
    `check` fields with the same values; else None."""
    path = _path(k)
    if path is None:
        return None
    try:
        blob = _read_entry(path)
    except (OSError, ValueError, MemoryError):
        return None
    decoded = _decode(blob)
    if isinstance(decoded, str):
        discard(k, decoded)
        return None
    code, meta = decoded
    if any(meta.get(name) != value for name, value in check.items()):
        return None
    try:
        os.utime(path)
    except OSError:
        pass
    return code, meta


def discard(k, reason):
    """Delete a bad entry (where the directory allows it) and say so; the caller rebuilds."""
    path = _path(k)
    warnings.warn(f"dloop: discarding the kernel cache entry {path}: {reason}; the kernel is "
                  "compiled again", DloopWarning, stacklevel=3)
    try:
        os.remove(path)
    except OSError:
        pass


def store(k, code, meta):
    path = _path(k)
    if path is None:
        return
    body = json.dumps(meta).encode()
    blob = b"".join([_MAGIC, _HEADER.pack(len(body), len(code), hashlib.sha256(
        body + code).digest()), body, code])
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=_TMP_PREFIX,
                                   suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
        tmp = None
        _account(config.cache_dir, config.cache_max_bytes, path, len(blob))
    except (OSError, ValueError):
        pass    # a read-only or full disk only costs a recompile next time
    finally:
        if tmp is not None:
            _remove(tmp)


def entries(directory=None):
    """[(path, size, mtime)] of the cache's files (entries, and leftovers of older formats
    or interrupted writes)."""
    directory = config.cache_dir if directory is None else directory
    out = []
    try:
        subdirs = [d for d in os.listdir(directory) if _SUBDIR.fullmatch(d)]
    except (OSError, ValueError):
        return out
    for sub in subdirs:
        try:
            names = os.listdir(os.path.join(directory, sub))
        except OSError:
            continue
        for name in names:
            if _OURS.fullmatch(name):
                path = os.path.join(directory, sub, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                out.append((path, st.st_size, st.st_mtime))
    return out


def size(directory=None):
    return sum(s for _, s, _ in entries(directory))


def clear(directory=None):
    """Delete every cache file; returns (files deleted, bytes freed)."""
    found = entries(directory)
    removed = [(p, s) for p, s, _ in found if _remove(p)]
    directory = config.cache_dir if directory is None else directory
    for known in [k for k in _believed if k[0] == directory]:
        _believed.pop(known, None)
    return len(removed), sum(s for _, s in removed)


# Bytes this process believes a cache directory holds under a cap: its last scan's total
# plus what it stored since. A scan stats every file (0.2 s at 40,000 entries), and every
# store scanned; now a process scans at its first store, and again when its own stores
# would pass the cap. Other processes' stores since are seen at that next scan, so the cap
# may be passed by what processes store together between their scans.
_believed = {}


def _account(directory, cap, keep, nbytes):
    total = _believed.get((directory, cap))
    if total is not None and total + nbytes <= cap:
        _believed[directory, cap] = total + nbytes
    else:
        _believed[directory, cap] = _evict(directory, cap, keep)


def _evict(directory, cap, keep):
    """Deletes the least recently used files past the cap; returns the bytes left."""
    found = sorted(entries(directory), key=lambda e: e[2])
    total = sum(s for _, s, _ in found)
    stale = time.time() - _STALE_TMP_SECONDS
    for path, nbytes, mtime in found:
        if total <= cap:
            break
        # A recent .tmp may be another process's write in progress; an old one was left by
        # a process killed mid-write, and kept, it would make every store evict the rest.
        if path != keep and (not path.endswith(".tmp") or mtime < stale) and _remove(path):
            total -= nbytes
    return total


def _remove(path):
    try:
        os.remove(path)
        return True
    except OSError:
        return False
