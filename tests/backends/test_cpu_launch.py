"""How the cpu backend spreads a launch over its thread pool: a launch its kernel's last
pace says is short runs on the calling thread, and calls in the pool once it runs longer
than that promised; the results are the same either way."""

import numpy as np
import pytest

import dloop as dl
from dloop.backends.base import available, get_backend
from dloop.backends.cpu import launch

pytestmark = pytest.mark.skipif(not available("cpu")[0], reason="needs the cpu backend")


@pytest.fixture
def recruits(monkeypatch):
    """The element counts of the launches that called in pool workers."""
    seen = []
    real = launch.CpuBackend._recruit

    def counting(self, job, futures):
        seen.append(job.n)
        return real(self, job, futures)
    monkeypatch.setattr(launch.CpuBackend, "_recruit", counting)
    with dl.config.override(backend="cpu", num_threads=2, cache_dir=""):
        yield seen


def _loss(n):
    return lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.5 + np.sin(v) * x, x).sum()


def _reference_grad(x, n):
    """The gradient of _loss by the chain rule, every element stepped while it runs."""
    v, dv_dx = x.copy(), np.ones_like(x)
    for t in range(int(n.max())):
        run = t < n
        v, dv_dx = (np.where(run, v * 0.5 + np.sin(v) * x, v),
                    np.where(run, dv_dx * (0.5 + np.cos(v) * x) + np.sin(v), dv_dx))
    return dv_dx


def test_a_short_loop_kernel_runs_on_the_calling_thread(recruits, monkeypatch):
    # A generous limit: a busy test machine may deschedule the first launch for a while.
    monkeypatch.setattr(launch, "_PARALLEL_NS", 50_000_000)
    x = np.linspace(0.1, 1.0, 600)
    n = np.full(600, 3)
    grad = dl.grad(_loss(n))
    first = grad(x)           # no pace known yet: in parallel
    assert recruits == [600]
    second = grad(x)          # microseconds of work at the first launch's pace
    assert recruits == [600]
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(second, _reference_grad(x, n), rtol=1e-12)


def test_a_launch_longer_than_its_pace_promised_calls_in_the_pool(recruits, monkeypatch):
    monkeypatch.setattr(launch, "_PARALLEL_NS", 2_000_000)
    x = np.linspace(0.1, 1.0, 1024)
    short, long = np.full(1024, 1), np.full(1024, 4000)
    dl.grad(_loss(short))(x)
    recruits.clear()
    dl.grad(_loss(short))(x)
    assert recruits == []
    # The same kernel (trip counts are data), 4000 times the work (about 10 ms): it starts
    # on the calling thread, and the pool takes over what is left.
    got = dl.grad(_loss(long))(x)
    assert recruits == [1024]
    # (where v's fixed point is 0 the gradient decays below the smallest float, by the
    # chain rule's order of products to 0 or to a subnormal)
    np.testing.assert_allclose(got, _reference_grad(x, long), rtol=1e-10, atol=1e-300)


def _counting_kernel():
    """A compiled kernel whose dloop_kernel adds 1 to buf0[start:end], with the chunk loop
    every cpu kernel module gets."""
    from llvmlite import ir

    from dloop.backends.cpu.chunks import add_chunk_loop
    from dloop.backends.cpu.compile import compile_llvm, load_object
    from dloop.backends.cpu.types import I64, PTR, VOID
    module = ir.Module("counting")
    fn = ir.Function(module, ir.FunctionType(VOID, [I64, I64, I64, PTR]), "dloop_kernel")
    start, end, _, buf = fn.args
    entry, loop, body, done = (fn.append_basic_block(n) for n in ("e", "l", "b", "d"))
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I64)
    i.add_incoming(start, entry)
    b.cbranch(b.icmp_signed("<", i, end), body, done)
    b.position_at_end(body)
    slot = b.gep(buf, [i], source_etype=I64)
    b.store(b.add(b.load(slot, typ=I64), I64(1)), slot)
    i.add_incoming(b.add(i, I64(1)), body)
    b.branch(loop)
    b.position_at_end(done)
    b.ret_void()
    add_chunk_loop(module, fn)
    return load_object(compile_llvm(str(module), runtime=False), 1)


def test_the_chunk_loop_runs_each_chunk_once_and_stops_when_cancelled():
    kernel = _counting_kernel()
    counts = np.zeros(100, np.int64)
    state = np.array([0, 7, 0, 0], np.int64)       # next start, chunk, cancelled, inside
    assert kernel.chunks(state.ctypes.data, 3, 100, counts.ctypes.data) == 21
    assert counts[:21].tolist() == [1] * 21 and not counts[21:].any()
    assert kernel.chunks(state.ctypes.data, 100, 100, counts.ctypes.data) == 79
    assert kernel.chunks(state.ctypes.data, 100, 100, counts.ctypes.data) == 0
    assert (counts == 1).all()
    state[:] = [0, 7, 1, 0]
    assert kernel.chunks(state.ctypes.data, 100, 100, counts.ctypes.data) == 0
    assert (counts == 1).all()
    assert state[3] == 0                           # every call left


def test_threads_sharing_a_chunk_loop_claim_each_chunk_once():
    import threading
    kernel = _counting_kernel()
    n = 2_000_003
    counts = np.zeros(n, np.int64)
    state = np.array([0, 1000, 0, 0], np.int64)
    ran = []
    threads = [threading.Thread(target=lambda: ran.append(kernel.chunks(
        state.ctypes.data, n, n, counts.ctypes.data))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(ran) == n
    assert (counts == 1).all()


def test_waiting_for_the_last_chunks_returns_once_no_call_is_inside():
    """await_idle, which a launch's calling thread polls instead of waiting for the
    workers' futures: it returns 1 only once the chunk loops that entered have left, with
    their chunks' writes visible; 0 when its polls run out first."""
    import threading
    import time
    kernel = _counting_kernel()
    state = np.array([0, 7, 0, 1], np.int64)       # a call inside
    assert kernel.await_idle(state.ctypes.data, 1000) == 0
    state[3] = 0
    assert kernel.await_idle(state.ctypes.data, 1) == 1
    n = 4_000_003
    counts = np.zeros(n, np.int64)
    state = np.array([0, 1000, 0, 0], np.int64)
    worker = threading.Thread(target=kernel.chunks,
                              args=(state.ctypes.data, n, n, counts.ctypes.data))
    worker.start()
    deadline = time.monotonic() + 60
    while not state[0] and worker.is_alive():       # the worker has claimed its first chunk
        assert time.monotonic() < deadline
    while not kernel.await_idle(state.ctypes.data, 1 << 16):
        assert time.monotonic() < deadline
    assert (counts == 1).all()
    worker.join()


def _launching(kernel):
    kernel.min_parallel, kernel.ns_per_element = 512, None    # what CpuBackend.load sets
    return kernel


def test_a_launch_returns_after_its_chunks_and_a_worker_starting_later_claims_none():
    """The calling thread returns from a parallel launch once no chunk runs, without
    waiting for a worker still queued in the pool; that worker, when it runs, claims no
    chunk and writes nothing more."""
    import threading
    kernel = _launching(_counting_kernel())
    counts = np.zeros(3_000_001, np.int64)
    with dl.config.override(backend="cpu", num_threads=2):
        be = get_backend("cpu")
        with be._lock:
            pool = be._executor()[0]
        gate = threading.Event()
        busy = [pool.submit(gate.wait) for _ in range(2)]        # every pool thread
        opens = threading.Timer(30, gate.set)     # a launch that waits for its worker ends
        opens.start()
        be.launch(kernel, counts.size, [counts])
        assert not gate.is_set()                  # returned while the pool was busy
        assert (counts == 1).all()
        counts[:] = 0
        gate.set()
        opens.cancel()
        for f in busy:
            f.result()
        pool.submit(lambda: None).result()       # the launch's own work item has run
        assert not counts.any()


def test_a_launch_whose_poll_runs_out_waits_for_the_workers(monkeypatch):
    """Where the calling thread's polls of the last chunks run out, it blocks on the
    workers' futures: every chunk has run when the launch returns."""
    monkeypatch.setattr(launch, "_SETTLE_NS", 0)
    kernel = _launching(_counting_kernel())
    kernel.await_idle = lambda job, spins: 0
    counts = np.zeros(3_000_001, np.int64)
    with dl.config.override(backend="cpu", num_threads=2):
        for _ in range(20):
            get_backend("cpu").launch(kernel, counts.size, [counts])
    assert (counts == 20).all()
