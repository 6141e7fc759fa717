"""STAGE 5 — cpu: the backend. A thread pool calls the JIT-compiled kernel on chunks of
threads; ctypes releases the GIL during each call, so every core works. Chunks are small
enough that elements with long loops do not leave cores idle."""

import itertools
import os
from concurrent.futures import ThreadPoolExecutor

from ...config import config
from ...kernel import kir
from ..base import Backend, HostMemory
from . import simd
from .compile import cache_identity, compile_llvm, load_object, vector_math, vector_width
from .render import render

_MIN_CHUNK = 256
# Below this many elements a kernel without loops runs on the calling thread: waking a
# worker costs more than the work.
_MIN_PARALLEL_FLAT = 1 << 16
_CORES = os.cpu_count() or 1


class CpuBackend(HostMemory, Backend):
    """Kernels with loops run W elements per instruction (simd.py: lanes = elements); kernels
    without loops use the scalar renderer, whose thread loop LLVM vectorizes by itself."""
    name = "cpu"
    simd = True

    def __init__(self):
        super().__init__()
        self._pool = None
        self._workers = 0

    def render(self, kernel):
        if self.simd and self._has_loops(kernel):
            width = vector_width()
            return simd.render(kernel, width, vector_math(width))
        return render(kernel)

    def build(self, source, kernel):
        return compile_llvm(source)

    def load(self, binary, source, kernel):
        artifact = load_object(binary, len(kernel.buffers))
        artifact.min_parallel = 2 * _MIN_CHUNK if self._has_loops(kernel) else \
            _MIN_PARALLEL_FLAT
        return artifact

    def cache_identity(self):
        return cache_identity() + (self.simd,)

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


class CpuScalarBackend(CpuBackend):
    """The CPU backend with one element per thread in every kernel."""
    name = "cpu-scalar"
    simd = False
