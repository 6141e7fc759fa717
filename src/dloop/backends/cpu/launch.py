"""STAGE 5 — cpu: the backend. Pool workers and the calling thread run the JIT-compiled
kernel on chunks of threads, claimed by the kernel module's own chunk loop (chunks.py);
ctypes releases the GIL during each call, so every core works. Chunks are small enough
that elements with long loops do not leave cores idle.

Safety (docs/threads.md): launches from several Python threads share one pool, which is
replaced under a lock when num_threads changes (the old one finishes what it was given); a
forked child builds its own pool; Ctrl-C (or any exception) while a launch runs cancels the
chunks not yet started and waits for the running ones, so no worker touches the launch's
buffers after launch() has returned or raised."""

import os
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...config import config
from ...kernel import kir
from ...kernel.legalize import legalize, unwrap_loads
from ..base import Backend, Caps, HostMemory
from . import simd, steps
from .compile import (cache_identity, compile_llvm, load_functions, load_object,
                      vector_math, vector_width)
from .render import render, wrap_pieces

_MIN_CHUNK = 256
# Below this many elements a kernel without loops runs on the calling thread: waking a
# worker costs more than the work.
_MIN_PARALLEL_FLAT = 1 << 16
_CORES = os.cpu_count() or 1
# A launch expected to take less than this on the calling thread alone (at the pace of its
# kernel's last launch) starts there, and calls in the pool only once it has run this long:
# waking the workers and waiting for them took 50 to 100 us on this project's 2-core machine,
# so a loop kernel of 520 elements (a microsecond of work) took 56 us in parallel.
_PARALLEL_NS = 150_000
# How long the calling thread polls a launch's last chunks before it blocks on the workers'
# futures (_Job.settled), in rounds of _SPINS polls: x86's pause takes 40 to 140 cycles, so
# a round takes 10 to 60 us there, a few us elsewhere.
_SETTLE_NS = 1_000_000
_SPINS = 1024


class _Job:
    """One parallel launch: chunks claimed from a shared counter by the kernel's own chunk
    loop (chunks.py: an atomic add on `state`, so elements with long loops do not leave a
    core idle). A pool worker runs its whole share in one call, without the GIL; the
    calling thread runs one chunk per call, so that Ctrl-C arrives between chunks, and
    `cancelled` (state[2], read by the chunk loop before each chunk) stops the workers.

    Pool workers are counted while they run, so cancel() waits for exactly those, whatever
    futures the caller did or did not get to keep when Ctrl-C arrived. Only the main thread
    receives KeyboardInterrupt, so the count kept on worker threads is exact."""

    def __init__(self, compiled, n_threads, chunk, addresses):
        self.compiled, self.n, self.chunk, self.addresses = compiled, n_threads, chunk, addresses
        # next start, chunk, cancelled, calls of the chunk loop inside (chunks.py)
        self.state = np.array([0, chunk, 0, 0], dtype=np.int64)
        self.state_address = self.state.ctypes.data
        self.running = 0
        self.idle = threading.Condition()
        self.own_ns = self.own_elements = 0

    @property
    def cancelled(self):
        return bool(self.state[2])

    def chunks(self, until=None):
        """Run chunks, one per call, until none is left, or (until: a time.perf_counter_ns()
        deadline) until the deadline passed with chunks left: then True. The calling
        thread's own pace is kept in `own_ns` and `own_elements`."""
        began = time.perf_counter_ns()
        run = self.compiled.chunks
        try:
            while True:
                ran = run(self.state_address, 1, self.n, *self.addresses)
                if not ran:
                    return False
                self.own_elements += ran
                if until is not None and time.perf_counter_ns() > until:
                    return self.state[0] < self.n
        finally:
            self.own_ns += time.perf_counter_ns() - began

    def settled(self):
        """Whether no chunk runs any more, polled without the GIL for up to _SETTLE_NS:
        then no worker touches the launch's buffers again (one that starts later claims
        none), and the caller need not wait for the workers' futures."""
        wait = self.compiled.await_idle
        if wait is None:
            return False
        deadline = time.perf_counter_ns() + _SETTLE_NS
        while not wait(self.state_address, _SPINS):
            if time.perf_counter_ns() > deadline:
                return False
        return True

    def work(self):
        """A pool worker's share: every chunk it can claim, in one call."""
        with self.idle:
            if self.cancelled:
                return
            self.running += 1
        try:
            self.compiled.chunks(self.state_address, self.n, self.n, *self.addresses)
        finally:
            with self.idle:
                self.running -= 1
                self.idle.notify_all()

    def cancel(self):
        """Start no more chunks; return once no worker runs one. A second Ctrl-C meanwhile
        is absorbed: the caller must not free buffers that a worker still writes."""
        self.state[2] = 1
        while True:
            try:
                with self.idle:
                    while self.running:
                        self.idle.wait()
                return
            except KeyboardInterrupt:
                continue


class CpuBackend(HostMemory, Backend):
    """Kernels with loops run W elements per instruction (simd.py: lanes = elements); kernels
    without loops use the scalar renderer, whose thread loop LLVM vectorizes by itself."""
    name = "cpu"
    simd = True
    # Launches this small run on one thread anyway (_MIN_PARALLEL_FLAT); a body with larger
    # ones runs host-driven, which spreads each launch over the thread pool.
    max_step_threads = 1 << 16

    def __init__(self):
        super().__init__()
        width = vector_width()
        # Interleaved tapes (kir.py) where W lanes push together: slot k of a group's W
        # stacks is one vector store (simd.py).
        self.caps = Caps(order_elements=True, lockstep=width,
                         tape_lanes=width if self.simd else 1, compact_tapes=self.simd)
        self._pool = None
        self._workers = 0
        self._lock = threading.Lock()
        this = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: this() and this()._after_fork())

    def _after_fork(self):
        """The child has none of the parent's worker threads, and a lock some other parent
        thread held at the fork stays held forever: start over with fresh ones."""
        self._pool = None
        self._workers = 0
        self._lock = threading.Lock()

    def legalize(self, kernel):
        """Wrapped loads stay for the scalar renderer to split the threads at (render.py)."""
        if self._simd(kernel):
            return legalize(kernel, self.caps)
        kernel = legalize(kernel, self.caps, wrapped_loads=True)
        return kernel if wrap_pieces(kernel) is not None else unwrap_loads(kernel)

    def _simd(self, kernel):
        return self.simd and (self._has_loops(kernel) or bool(kernel.stacks))

    def render(self, kernel):
        if self._simd(kernel):
            width = vector_width()
            return simd.render(kernel, width, vector_math(width))
        return render(kernel)

    def build(self, source, kernel):
        return compile_llvm(source)

    def load(self, binary, source, kernel):
        artifact = load_object(binary, len(kernel.buffers))
        artifact.min_parallel = 2 * _MIN_CHUNK if self._has_loops(kernel) else \
            _MIN_PARALLEL_FLAT
        artifact.ns_per_element = None     # the calling thread's pace at the last launch
        return artifact

    def cache_identity(self):
        return cache_identity() + (self.simd,)

    @staticmethod
    def _has_loops(kernel):
        return any(isinstance(s, (kir.For, kir.While)) for s in kernel.body)

    def step_driver(self, plan, mode, n_index, n_carry, n_inv):
        text = steps.build(plan, mode, n_index, n_carry, n_inv)
        key, driver = self.from_disk_cache("cpu-steps", text, lambda code: load_object(code, 1))
        if driver is None:
            driver = load_object(self.to_disk_cache(key, text, compile_llvm(text)), 1)
        return steps.Driver(driver, plan)

    def _executor(self):
        """(pool, workers), under self._lock. A replaced pool is shut down without waiting:
        launches that hold it finish the tasks they already submitted."""
        workers = config.num_threads or _CORES
        if self._pool is None or workers != self._workers:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dloop")
            self._workers = workers
        return self._pool, workers

    def launch(self, compiled, n_threads, buffers):
        addresses = [self.address(b) for b in buffers]
        if n_threads < compiled.min_parallel:
            compiled.call(0, n_threads, n_threads, *addresses)
            return
        job, futures = None, []
        try:
            with self._lock:
                workers = self._executor()[1]
                # Whole lane groups per chunk, so that the SIMD renderer's groups are the
                # interleaved tapes' groups.
                lanes = self.caps.tape_lanes
                chunk = max(_MIN_CHUNK, -(-n_threads // (workers * 16)))
                job = _Job(compiled, n_threads, -(-chunk // lanes) * lanes, addresses)
            pace = compiled.ns_per_element
            start = time.perf_counter_ns()
            if pace is None or n_threads * pace >= _PARALLEL_NS:
                self._recruit(job, futures)
                job.chunks()
            elif job.chunks(until=start + _PARALLEL_NS):
                # Slower than the last launch promised: the rest in parallel.
                self._recruit(job, futures)
                job.chunks()
            if futures and not job.settled():
                for f in futures:
                    f.result()  # interruptible: Ctrl-C arrives here or between chunks
            # Where the workers took every chunk before this thread's first, the launch's
            # own length per element stands for the pace (at most the workers' count too
            # fast, and a launch that turns out slower calls the pool in anyway).
            compiled.ns_per_element = job.own_ns / job.own_elements if job.own_elements \
                else (time.perf_counter_ns() - start) / job.n
        except BaseException:
            if job is not None:
                job.cancel()
            raise

    def _recruit(self, job, futures):
        """Pool workers for `job`'s chunks, besides the calling thread."""
        # Submitting under the lock: no other thread can shut this pool down meanwhile.
        with self._lock:
            pool, workers = self._executor()
            for _ in range(min(workers, -(-job.n // job.chunk)) - 1):
                try:
                    futures.append(pool.submit(job.work))
                except RuntimeError:
                    # The interpreter is exiting (concurrent.futures' exit hook runs
                    # before non-daemon threads are joined, and shuts pools down): the
                    # calling thread runs the chunks that no worker took.
                    self._pool = None
                    break


def host_helpers(ir_text, signatures):
    """Host code in LLVM IR (adstack/native.py's sizing loops) as ctypes functions, through
    the cpu backend's kernel cache on disk: a compile costs about 0.2 s, which every process
    would otherwise pay at its first sizing."""
    from ..base import get_backend
    cpu = get_backend("cpu")
    key, found = cpu.from_disk_cache("cpu-host-code", ir_text,
                                     lambda code: load_functions(code, signatures))
    if found is not None:
        return found
    return load_functions(cpu.to_disk_cache(key, ir_text, compile_llvm(ir_text, runtime=False)),
                          signatures)


class CpuScalarBackend(CpuBackend):
    """The CPU backend with one element per thread in every kernel."""
    name = "cpu-scalar"
    simd = False
