"""The on-disk kernel cache, backend-neutral: compiled code keyed by a hash of everything
that determines it. Entries are written to a temporary file and renamed into place, so two
processes writing the same entry at once leave one whole entry, never a torn one."""

import hashlib
import json
import os
import tempfile

from ..config import config


def key(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def _paths(k):
    directory = config.cache_dir
    if not directory:
        return None
    return os.path.join(directory, k[:2], k + ".bin"), os.path.join(directory, k[:2],
                                                                     k + ".json")


def load(k, check):
    """(code bytes, metadata) if an entry for key k exists and its metadata has the `check`
    fields with the same values; else None."""
    paths = _paths(k)
    if paths is None:
        return None
    try:
        with open(paths[1]) as f:
            meta = json.load(f)
        if any(meta.get(name) != value for name, value in check.items()):
            return None
        with open(paths[0], "rb") as f:
            code = f.read()
    except (OSError, ValueError):
        return None
    return code, meta


def store(k, code, meta):
    paths = _paths(k)
    if paths is None:
        return
    try:
        os.makedirs(os.path.dirname(paths[0]), exist_ok=True)
        for path, data, mode in ((paths[0], code, "wb"), (paths[1], json.dumps(meta), "w")):
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            with os.fdopen(fd, mode) as f:
                f.write(data)
            os.replace(tmp, path)
    except OSError:
        pass    # a read-only or full disk only costs a recompile next time
