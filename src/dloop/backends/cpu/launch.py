"""STAGE 5 — cpu: the backend. A thread pool calls the JIT-compiled kernel on chunks of
threads; ctypes releases the GIL during each call, so every core works. Chunks are small
enough that elements with long loops do not leave cores idle."""

import itertools
import os
from concurrent.futures import ThreadPoolExecutor

from ... import __version__
from ...config import config
from ...kernel import kir
from ...runtime import cache
from ..base import Backend
from .compile import cache_identity, compile_llvm, load_object
from .render import render

_MIN_CHUNK = 256
# Below this many elements a kernel without loops runs on the calling thread: waking a
# worker costs more than the work.
_MIN_PARALLEL_FLAT = 1 << 16
_CORES = os.cpu_count() or 1


class CpuBackend(Backend):
    name = "cpu"

    def __init__(self):
        super().__init__()
        self._pool = None
        self._workers = 0

    def compile(self, kernel, sizing=""):
        """Memory cache, then disk cache, then LLVM. `sizing` (the printed capacity
        expressions of the launch) is stored with the code and must match on a hit."""
        text = str(kernel)
        artifact = self._cache.get(text)
        if artifact is None:
            k = cache.key("cpu", __version__, text, sizing, *cache_identity())
            meta = {"kernel": text, "sizing": sizing}
            hit = cache.load(k, meta)
            if hit is not None:
                artifact = load_object(hit[0], len(kernel.buffers))
            else:
                artifact, code = self._compile(kernel)
                cache.store(k, code, meta)
            artifact.min_parallel = 2 * _MIN_CHUNK if self._has_loops(kernel) else \
                _MIN_PARALLEL_FLAT
            self._cache[text] = artifact
        return artifact

    def _compile(self, kernel):
        text = render(kernel)
        if config.debug:
            print(f"dloop: kernel IR\n{kernel}\ndloop: LLVM IR\n{text}")
        self.compile_count += 1
        return compile_llvm(text, len(kernel.buffers))

    @staticmethod
    def _has_loops(kernel):
        return any(isinstance(s, (kir.For, kir.While)) for s in kernel.body)

    def _executor(self):
        workers = config.num_threads or _CORES
        if self._pool is None or workers != self._workers:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dloop")
            self._workers = workers
        return self._pool, workers

    def launch(self, compiled, n_threads, buffers):
        addresses = [b.__array_interface__["data"][0] for b in buffers]
        pool, workers = self._executor()
        if workers == 1 or n_threads < compiled.min_parallel:
            compiled.call(0, n_threads, n_threads, *addresses)
            return
        # One task per worker; each takes chunks from a shared counter until none are left
        # (next() on itertools.count is atomic under the GIL), so a chunk costs one ctypes
        # call, and elements with long loops do not leave a core idle.
        chunk = max(_MIN_CHUNK, -(-n_threads // (workers * 16)))
        starts = itertools.count(0, chunk)

        def work():
            for start in starts:
                if start >= n_threads:
                    return
                compiled.call(start, min(start + chunk, n_threads), n_threads, *addresses)

        futures = [pool.submit(work) for _ in range(workers - 1)]
        work()
        for f in futures:
            f.result()
