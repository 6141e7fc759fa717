"""The cuda backend on a GPU: CuPy and PyTorch CUDA arrays in and out, NumPy through
backend="cuda", overflow, deterministic shared gradients, the heap's deferred release.
(The cross-backend feature tests also run on cuda; these cover what only cuda has.)"""

import numpy as np
import pytest

import dloop as dl
from dloop.backends.base import available, get_backend

_OK, _WHY = available("cuda")
pytestmark = pytest.mark.skipif(not _OK, reason=_WHY)

if _OK:
    import cupy as cp


@pytest.fixture(autouse=True)
def _backend_from_inputs():
    previous = dl.config.backend
    dl.config.update("backend", None)
    yield
    dl.config.update("backend", previous)


def _decay(x, n, a=0.9):
    """sum over j of x[j] * a**n[j], by a per-element loop: the gradient is a**n."""
    return dl.fori_loop(0, n, lambda i, v: v * a, x).sum()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cupy_in_cupy_out(dtype):
    n = cp.asarray([0, 1, 5, 40, 3])
    x = cp.linspace(0.5, 1.5, 5, dtype=dtype)
    g = dl.grad(lambda x: _decay(x, n))(x)
    assert isinstance(g, cp.ndarray) and g.dtype == dtype and g.device == x.device
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(cp.asnumpy(g), 0.9 ** cp.asnumpy(n), rtol=rtol)
    assert dl.api._last_backend[0].name == "cuda"        # chosen from the inputs' device


def test_numpy_in_with_backend_cuda_gives_numpy():
    dl.config.update("backend", "cuda")
    n = np.array([2, 0, 7])
    g = dl.grad(lambda x: _decay(x, n, 0.5))(np.ones(3))
    assert isinstance(g, np.ndarray)
    np.testing.assert_allclose(g, 0.5 ** n, rtol=1e-12)


def test_torch_cuda_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch build has no CUDA")
    x = torch.linspace(0.5, 1.5, 4, dtype=torch.float64, device="cuda")
    n = torch.tensor([3, 0, 1, 9], device="cuda")
    g = dl.grad(lambda x: _decay(x, n))(x)
    assert isinstance(g, torch.Tensor) and g.device.type == "cuda" and g.dtype == x.dtype
    np.testing.assert_allclose(g.cpu().numpy(), 0.9 ** n.cpu().numpy(), rtol=1e-12)


def test_overflow_raises_naming_the_loop_then_the_next_call_is_right():
    n = cp.asarray([1, 6, 2])
    x = cp.ones(3)
    dl.config.update("adstack_capacity", 2)
    with pytest.raises(dl.AdstackOverflowError, match="test_cuda_runtime.py") as info:
        dl.grad(lambda x: _decay(x, n))(x)
    assert "attempted 6 pushes" in str(info.value)
    dl.config.update("adstack_capacity", None)
    g = dl.grad(lambda x: _decay(x, n))(x)
    np.testing.assert_allclose(cp.asnumpy(g), 0.9 ** cp.asnumpy(n), rtol=1e-12)


def test_gradient_of_a_shared_scalar_is_bit_identical_run_after_run():
    rng = np.random.default_rng(0)
    n = cp.asarray(rng.integers(0, 50, 100_000))
    x = cp.asarray(rng.uniform(-1, 1, 100_000))

    def loss(s):
        return dl.fori_loop(0, n, lambda i, v: v * 0.99 + np.sin(v) * s, x).sum()

    s = cp.asarray(0.01)
    first = dl.grad(loss)(s)
    for _ in range(3):
        assert dl.grad(loss)(s).item() == first.item()
    h = 1e-6                                              # central differences, float64
    fd = (dl.jit(loss)(s + h) - dl.jit(loss)(s - h)) / (2 * h)
    np.testing.assert_allclose(first.item(), fd.item(), rtol=1e-6)


def test_heap_grows_and_replaced_buffers_are_released_after_sync():
    be = get_backend("cuda")
    x = cp.ones(1000)
    for trips in (10, 100, 1000):
        n = cp.full(1000, trips)
        g = dl.grad(lambda x: _decay(x, n, 0.999))(x)
        np.testing.assert_allclose(cp.asnumpy(g), 0.999 ** trips, rtol=1e-10)
    assert be.reserved_bytes() >= 1000 * 1000 * 8         # the last call's tapes
    be.synchronize()
    assert be._retired == []


def test_empty_launch_allocates_nothing():
    be = get_backend("cuda")
    before = be.reserved_bytes()
    g = dl.grad(lambda x: _decay(x, cp.zeros(0, cp.int64)))(cp.ones(0))
    assert g.shape == (0,) and be.reserved_bytes() == before


def test_captured_device_arrays_stay_on_the_device(monkeypatch):
    """A CuPy array (or CUDA tensor) the function captures, here the trip counts, is a
    constant on the device: tracing never copies it to the host, and a later call that
    captures another array of the same shape reuses the compiled program with the new
    values."""
    from dloop import libraries
    copied = []
    real = libraries.to_numpy
    monkeypatch.setattr(libraries, "to_numpy",
                        lambda x, where=None: copied.append(x) or real(x, where))
    x = cp.linspace(0.5, 1.5, 3000)
    for k in (37, 11):
        n = cp.asarray(np.arange(3000) % k)
        g = dl.grad(lambda x: _decay(x, n) + (x * n).sum())(x)
        expected = 0.9 ** (np.arange(3000) % k) + np.arange(3000) % k
        np.testing.assert_allclose(cp.asnumpy(g), expected, rtol=1e-12)
    torch = pytest.importorskip("torch")
    n = torch.arange(3000, device="cuda") % 5
    g = dl.grad(lambda x: _decay(x, n))(x)
    np.testing.assert_allclose(cp.asnumpy(g), 0.9 ** (np.arange(3000) % 5), rtol=1e-12)
    assert copied == []


def test_captured_table_through_xp_asarray_stays_on_the_device():
    """The documented way to index a captured table by a traced index, xp.asarray(table)[i],
    with a CuPy table (np.asarray refused it: CuPy allows no implicit copy to the host)."""
    table = cp.linspace(1.0, 2.0, 7)
    k = np.array([3, 0, 6, 2])

    def f(x):
        xp = x.__array_namespace__()
        return (xp.asarray(table)[xp.asarray(k)] * x * x).sum()
    x = cp.linspace(0.5, 1.5, 4)
    g = dl.grad(f)(x)
    np.testing.assert_allclose(cp.asnumpy(g), 2 * cp.asnumpy(table)[k] * cp.asnumpy(x),
                               rtol=1e-13)


def test_arrays_off_the_backend_s_device_are_refused(monkeypatch):
    """The backend's kernels and heaps live on one device; an array on another would be read
    through a foreign address. (One GPU here: the backend is made to look bound to device 99.)"""
    from dloop import libraries
    dl.jit(lambda v: v * 2.0)(cp.ones(3))            # binds the backend to the current device
    monkeypatch.setattr(libraries, "_CUDA_DEVICE", [99])
    with pytest.raises(dl.DloopNotImplementedError, match=r"(?s)device 99.*test_cuda_runtime"):
        dl.jit(lambda v: v * 2.0)(cp.ones(3))
    monkeypatch.undo()
    np.testing.assert_array_equal(cp.asnumpy(dl.jit(lambda v: v * 2.0)(cp.ones(3))), 2.0)


def test_square_root_as_a_power_is_numpy_s_bit_for_bit():
    """x ** 0.5 is NumPy's sqrt (its fast path), not the GPU's pow, which is not correctly
    rounded (1e30 ** 0.5 came out 1 ulp above 1e15); -inf ** 0.5 is NaN, -0.0's -0.0."""
    x = np.array([1e30, 2.0, -0.0, -np.inf, 0.3, 7e-300])
    with np.errstate(invalid="ignore"):
        want = x ** 0.5
    got = cp.asnumpy(dl.jit(lambda v: v ** 0.5)(cp.asarray(x)))
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[2])


def test_ptx_for_a_gpu_newer_than_nvrtc_knows(monkeypatch, tmp_path):
    """Kernels built as PTX (what a GPU newer than the installed NVRTC gets) load and run."""
    from dloop.backends.cuda import launch
    monkeypatch.setattr(launch, "_target", lambda capability: "compute_75")
    backend = get_backend("cuda")
    monkeypatch.setattr(backend, "_artifacts", {})
    n = cp.asarray([0, 1, 5, 40, 3])
    with dl.config.override(cache_dir=str(tmp_path)):
        g = dl.grad(lambda x: _decay(x, n, 0.7531))(cp.ones(5))
    np.testing.assert_allclose(cp.asnumpy(g), 0.7531 ** cp.asnumpy(n), rtol=1e-13)
    assert backend._artifacts


def test_adstack_sizing_stays_on_the_device(monkeypatch):
    """Capacities, element order and layout are computed by CuPy: no per-element array is
    downloaded during a gradient (only scalars: the largest capacity, the total slots), and
    the gradient is still exact, for a fori loop (capacity expression) and a while loop
    (counted trips)."""
    backend = get_backend("cuda")
    sizes = []
    real = type(backend).to_numpy
    monkeypatch.setattr(type(backend), "to_numpy",
                        lambda self, x: sizes.append(int(np.size(x))) or real(self, x))
    n_elems = 4096
    n = cp.asarray(np.arange(n_elems) % 37)
    x = cp.linspace(0.5, 1.5, n_elems)
    g = dl.grad(lambda x: _decay(x, n))(x)
    np.testing.assert_allclose(cp.asnumpy(g), 0.9 ** (np.arange(n_elems) % 37), rtol=1e-12)

    def halvings(x):
        return dl.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, x).sum()
    y = cp.linspace(1.5, 300.0, n_elems)
    g = dl.grad(halvings)(y)
    steps = np.ceil(np.log2(cp.asnumpy(y)))         # halvings until v <= 1
    np.testing.assert_allclose(cp.asnumpy(g), 0.5 ** steps, rtol=1e-12)
    assert max(sizes, default=0) < n_elems, sizes


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sincos_is_sin_and_cos_bit_for_bit(dtype):
    """The renderer fuses sin(a) and cos(a) of one value into CUDA's sincos (render.py); that
    is only sound if sincos returns exactly what sin and cos return, over the whole range."""
    from dloop.backends.cuda.compile import OPTIONS
    t, suffix = ("double", "") if dtype == "float64" else ("float", "f")
    kernel = cp.RawKernel(f"""
    extern "C" __global__ void k(const {t}* x, {t}* out, long long n) {{
      long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
      if (j >= n) return;
      {t} s, c;
      sincos{suffix}(x[j], &s, &c);
      out[4 * j] = s; out[4 * j + 1] = c;
      out[4 * j + 2] = sin{suffix}(x[j]); out[4 * j + 3] = cos{suffix}(x[j]);
    }}""", "k", options=tuple(o for o in OPTIONS if not o.startswith("--std")))
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-10, 10, 200_000), rng.uniform(-1e6, 1e6, 100_000),
                        np.exp(rng.uniform(-40, 40, 100_000)) * rng.choice([-1, 1], 100_000),
                        [0.0, -0.0, np.pi, 1e300 if dtype == "float64" else 3e38]])
    x = cp.asarray(x.astype(dtype))
    out = cp.empty(4 * x.size, dtype)
    kernel(((x.size + 255) // 256,), (256,), (x, out, np.int64(x.size)))
    out = cp.asnumpy(out).reshape(-1, 4)
    np.testing.assert_array_equal(out[:, 0].view(f"u{out.itemsize}"),
                                  out[:, 2].view(f"u{out.itemsize}"))
    np.testing.assert_array_equal(out[:, 1].view(f"u{out.itemsize}"),
                                  out[:, 3].view(f"u{out.itemsize}"))


def test_kernels_with_sin_and_cos_of_one_value_use_sincos():
    """W1's reverse kernel needs sin(v) and cos(v): its source calls sincos once."""
    from dloop.backends.cuda.render import render
    from dloop.runtime import program
    sources = []
    program.KERNEL_HOOKS.append(lambda k: sources.append(render(k)))
    try:
        x = cp.linspace(0.1, 1.0, 64)
        n = cp.arange(64) % 7
        # Constants of its own: a program compiled by another test would not be compiled again.
        g = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.9375 + 0.1015 * x * np.sin(v),
                                           x).sum())(x)
    finally:
        program.KERNEL_HOOKS.pop()
    assert any("sincos(" in s for s in sources)
    # d/dx of the loop, by the chain rule on the host: the reference is independent code.
    xs, ns = cp.asnumpy(x), cp.asnumpy(n)
    v, dv = xs.copy(), np.ones_like(xs)
    for k in range(ns.max()):
        live = k < ns
        v, dv = (np.where(live, v * 0.9375 + 0.1015 * xs * np.sin(v), v),
                 np.where(live, dv * (0.9375 + 0.1015 * xs * np.cos(v)) + 0.1015 * np.sin(v),
                          dv))
    np.testing.assert_allclose(cp.asnumpy(g), dv, rtol=1e-12)


@pytest.mark.parametrize("n, tile, longest", [(0, None, 9), (1, None, 9), (70_001, None, 0),
                                              (300_000, None, 5000), (70_001, 64, 2 ** 40),
                                              (5_000, 16, 255), (5_000, 16, 256)])
def test_the_order_sorts_each_tile_by_decreasing_work(n, tile, longest, monkeypatch):
    """backends/cuda/sizing.tile_order, and the array-namespace version on CuPy, against
    their definition in NumPy: a stable sort by a key of 16 bits, from the most significant:
    the top ORDER_CLASS_BITS bits of 255 - the work shifted down to 8 bits (longest first),
    the tile of consecutive elements (parallel.order_tile: at least ORDER_TILE of them, at
    most 256 tiles), the rest of that 8-bit key. Negative work counts as none."""
    from dloop.adstack import parallel
    from dloop.backends.cuda import sizing
    if tile is not None:
        monkeypatch.setattr(parallel, "ORDER_TILE", tile)
    rng = np.random.default_rng(n)
    work = rng.integers(-3, longest + 1, n)
    if n:
        work[rng.integers(0, n)] = longest
    order = cp.asnumpy(sizing.tile_order(cp.asarray(work)))
    size = parallel.order_tile(n)
    shift = max(0, longest.bit_length() - 8)
    k = 255 - (np.maximum(work, 0) >> shift)
    fine = 8 - parallel.ORDER_CLASS_BITS
    key = (k >> fine) * 2 ** (8 + fine) + (np.arange(n) // size) * 2 ** fine + k % 2 ** fine
    assert key.min(initial=0) >= 0 and key.max(initial=0) < 2 ** 16
    want = np.argsort(key, kind="stable")
    np.testing.assert_array_equal(order, want)
    np.testing.assert_array_equal(cp.asnumpy(parallel.order_by_tiles(cp.asarray(work), cp)),
                                  want)


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 1000, 70_001])
@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("by_slot", [False, True])
def test_the_fused_interleaved_layout_is_kir_s_layout(n, ordered, by_slot):
    """backends/cuda/sizing.py against the layout written out in NumPy: threads in `order`,
    groups of 32 consecutive threads raised to their largest capacity, each group's slots
    after the previous group's, each thread at its lane; per element, or per slot."""
    from dloop.backends.cuda import sizing
    rng = np.random.default_rng(n)
    cap = rng.integers(0, 300, n)
    order = rng.permutation(n) if ordered else np.arange(n)
    start, raised, total = sizing.interleaved(cp.asarray(cap),
                                              cp.asarray(order) if ordered else None, by_slot)
    want_start, want_raised, first = np.empty(n, np.int64), np.empty(n, np.int64), 0
    for g in range(0, n, 32):
        members = np.arange(g, min(g + 32, n)) if by_slot else order[g:g + 32]
        top = int(cap[order[g:g + 32]].max())
        want_start[members] = first + np.arange(members.size)
        want_raised[members] = top
        first += 32 * top
    assert total == first
    np.testing.assert_array_equal(cp.asnumpy(start), want_start)
    np.testing.assert_array_equal(cp.asnumpy(raised), want_raised)


def test_the_kept_sizing_s_comparison_finds_any_difference():
    """sizing.all_equal, which the sizing kept between calls is checked with: one kernel per
    pair of device arrays, host pairs on the host."""
    from dloop.backends.cuda.sizing import all_equal
    for dtype, size in [(np.int64, 1000), (np.int32, 1001), (np.uint8, 12), (np.int64, 0)]:
        a = cp.arange(size, dtype=dtype)
        assert all_equal([(a, a.copy()), (np.arange(3), np.arange(3))])
        for at in {0, size // 2, size - 1} if size else ():
            b = a.copy()
            b[at] += 1
            assert not all_equal([(a, a.copy()), (a, b)])
    odd = cp.arange(3, dtype=np.int16)          # 6 bytes: not whole 32-bit words
    assert all_equal([(odd, odd.copy())]) and not all_equal([(odd, odd[::-1].copy())])
    assert not all_equal([(cp.arange(4), cp.arange(4)), (np.arange(3), np.arange(3) + 1)])


@pytest.mark.parametrize("n", [1, 31, 32, 33, 1000, 4 * 256 * 1024 + 7])
def test_device_extremes_are_numpy_s(n):
    """sizing.start_extremes (parallel.extremes of a CuPy array, which a guessed launch's trip
    counts are read with): NumPy's min, max and int64 sum, which wraps, at sizes across the
    warp, block and part boundaries, for the largest part count too."""
    from dloop.adstack import parallel
    from dloop.backends.cuda import sizing
    rng = np.random.default_rng(n)
    for values in (rng.integers(-5, 300, n), rng.integers(2 ** 62, 2 ** 63 - 1, n),
                   np.full(n, -2 ** 63)):
        want = (int(values.min()), int(values.max()), int(values.sum(dtype=np.int64)))
        assert sizing.start_extremes(cp.asarray(values))() == want
        assert parallel.extremes(cp.asarray(values)) == want
        assert parallel.extremes_soon(cp.asarray(values))() == want
