"""The Vulkan device: its choice, features masked the way a weaker device lacks them (no
float64, no int64, no float atomics, separate device-local memory), the errors those give,
the 32-bit offset guard, maxStorageBufferRange, and buffer lifetimes under queued work."""

import dataclasses
import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import dloop as dl
from dloop.backends.base import available, get_backend
from dloop.errors import DloopMemoryError, DloopNotImplementedError, DloopTypeError, \
    DloopValueError
from helpers import assert_close, finite_difference

ok, why = available("vulkan")
if not ok:
    pytest.skip(why, allow_module_level=True)

import vulkan as vk                                            # noqa: E402

from dloop.backends.vulkan import device as vkdevice           # noqa: E402
from dloop.backends.vulkan.arrays import DeviceArray           # noqa: E402
from dloop.backends.vulkan.launch import Artifact, VulkanBackend  # noqa: E402
from dloop.kernel import kir                                   # noqa: E402

HERE = os.path.basename(__file__)


def _power_grad(x, n):
    """v <- v * x, n times from v = x: d/dx sum(x^(n+1)) = (n + 1) x^n."""
    return dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * x, x).sum())(x)


class _Lib:
    """The C library device.py calls, with some of its functions replaced."""

    def __init__(self, real, functions):
        self._real = real
        vars(self).update(functions)

    def __getattr__(self, name):
        return getattr(self._real, name)


def _replace_lib(monkeypatch, **functions):
    """Make device.py call `functions` (by name, with the C function's arguments) in place
    of the C library's own, and that for the rest; returns the C library."""
    real = vkdevice._lib
    monkeypatch.setattr(vkdevice, "_lib", _Lib(real, functions))
    return real


def test_default_choice_prefers_discrete_then_integrated_then_cpu():
    cpu, igpu, dgpu = (vk.VK_PHYSICAL_DEVICE_TYPE_CPU, vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU,
                       vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU)
    assert vkdevice.choose([("llvmpipe", cpu), ("Intel", igpu), ("AMD", dgpu)], None) == 2
    assert vkdevice.choose([("llvmpipe", cpu), ("Intel", igpu)], None) == 1
    assert vkdevice.choose([("llvmpipe", cpu), ("AMD", dgpu)], "llvm") == 0
    assert vkdevice.choose([("llvmpipe", cpu), ("AMD", dgpu)], "0") == 0


def test_a_device_setting_that_matches_nothing_says_which_exist(monkeypatch):
    name = get_backend("vulkan").features.name
    monkeypatch.setitem(vars(dl.config), "vulkan_device", "no-such-gpu")
    with pytest.raises(vkdevice.VulkanUnavailable) as e:
        vkdevice.Device()
    assert "no-such-gpu" in str(e.value) and name in str(e.value)


def test_without_a_driver_the_backend_is_unavailable_with_the_reason():
    env = dict(os.environ, VK_DRIVER_FILES="/nonexistent/icd.json",
               VK_ICD_FILENAMES="/nonexistent/icd.json")
    code = "from dloop.backends.base import available; print(available('vulkan'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.startswith("(False, ") and "Vulkan" in out.stdout, out.stdout + out.stderr


def test_float64_on_a_device_without_it_names_dtype_device_and_fix(masked):
    masked("float64")
    x = np.linspace(0.5, 1.5, 4)
    with pytest.raises(DloopTypeError) as e:
        dl.grad(lambda x: dl.fori_loop(0, 3, lambda i, v: v * x, x).sum())(x)
    text = str(e.value)
    name = get_backend("vulkan").features.name
    assert "float64" in text and "shaderFloat64" in text and name in text
    assert "float32" in text and HERE in e.value.where


def test_float32_works_without_float64_its_math_from_mathlib(masked):
    """sin, log1p, tanh and log2 from kernel/mathlib32.py and mathlib.py in float32, none
    from GLSL (which Vulkan lets be loose: log2 near 1 2^-21 off)."""
    be = masked("float64")
    assert not be.caps.native_math
    x = np.linspace(0.1, 1.2, 16).astype(np.float32)
    n = np.arange(16) % 5

    def body(v, x, xp):
        return xp.sin(v) * x + xp.log1p(v * v) + 0.1 * xp.tanh(v) + 0.01 * xp.log2(v + 1.0)

    def loss(x):
        return dl.fori_loop(0, n, lambda i, v: body(v, x, np), x).sum()

    def ref(x):
        v = x.astype(np.float64)
        for _ in range(int(n.max())):
            v = np.where(n > _, body(v, x, np), v)
        return v.sum()

    g = dl.grad(loss)(x)
    assert g.dtype == np.float32
    assert_close(g, finite_difference(ref, x.astype(np.float64)), rtol=3e-3)


def test_glsl_float32_math_gives_numpy_special_values(masked):
    masked("float64")
    x = np.array([0.0, -0.0, -1.0, np.inf, np.nan, 2.0, -2.0], np.float32)
    def f(x):
        return (np.log(x), np.log1p(x), np.expm1(x), np.arcsin(x), np.power(x, 3.0),
                np.power(x, 2.5), np.arctan2(x, -x))

    got = dl.jit(f)(x)
    with np.errstate(all="ignore"):
        want = f(x)
    for g, w in zip(got, want):
        special = ~np.isfinite(w) | (w == 0)
        np.testing.assert_array_equal(g[special], w[special])
        signed = special & ~np.isnan(w)          # NaN's sign bit is not specified
        assert np.array_equal(np.signbit(g[signed]), np.signbit(w[signed]))
        np.testing.assert_allclose(g[~special], w[~special], rtol=1e-3)


def test_int64_masked_runs_with_32_bit_offsets(masked):
    be = masked("int64")
    assert not be.caps.index64
    x = np.linspace(0.5, 1.1, 7)
    n = np.array([0, 1, 2, 5, 9, 3, 4], dtype=np.int64)
    assert_close(_power_grad(x, n), (n + 1) * x ** n, rtol=1e-12)


def test_int64_values_beyond_int32_are_refused_without_int64(masked):
    masked("int64")
    big = np.array([1, 2 ** 40], dtype=np.int64)
    with pytest.raises(DloopValueError, match="int32 range.*shaderInt64") as e:
        dl.jit(lambda n: n + 1)(big)
    assert HERE in e.value.where


def test_float64_math_without_int64_is_refused_clearly(masked):
    masked("int64")
    with pytest.raises(DloopNotImplementedError, match="shaderInt64") as e:
        dl.jit(lambda x: np.exp(x))(np.ones(3))
    assert HERE in e.value.where


def test_float64_table_gradients_without_int64_or_float64_atomics_are_refused(masked):
    """The compare-exchange on a float64's bits needs 64-bit integers: the shader bitcast a
    32-bit integer to a double (VkErrorUnknown from the driver, not a DloopError)."""
    masked("int64,float_atomics")
    coef = np.linspace(0.1, 1.0, 8)
    n = np.array([0, 1, 2, 3])
    loss = lambda c: dl.fori_loop(0, n, lambda i, v: v + c[i], np.zeros(4)).sum()  # noqa
    with pytest.raises(DloopNotImplementedError, match="shaderInt64") as e:
        dl.grad(loss)(coef)
    assert HERE in e.value.where and "float32" in str(e.value)
    g = dl.grad(lambda c: loss(c).astype(np.float32))(coef.astype(np.float32))
    np.testing.assert_array_equal(g, [3, 2, 1, 0, 0, 0, 0, 0])


def test_pow_of_minus_one_to_infinity_without_float64(masked):
    """C99 and NumPy give 1; GLSL's pow(1, inf) is NaN on lavapipe."""
    masked("float64")
    x = np.array([-1.0, -1.0, 1.0, 1.0, 2.0, 0.5], np.float32)
    y = np.array([np.inf, -np.inf, np.inf, np.nan, np.inf, np.inf], np.float32)
    n = np.ones(x.size, np.int64)
    got = dl.fori_loop(0, n, lambda i, c: (c[0], c[1], c[0] ** c[1]),
                       (x, y, np.zeros_like(x)))[2]
    np.testing.assert_array_equal(got, x ** y)


@pytest.mark.parametrize("fn", [np.sinh, np.cosh, np.tanh, np.arcsinh, np.arccosh, np.arctanh])
def test_hyperbolic_functions_without_float64_at_the_ends_of_their_range(masked, fn):
    """mathlib's code in float32, not GLSL's: tanh(1e-30) was 3e-8, arcsinh(1e20) inf and
    sinh(89.4) inf (a finite 3.35e38)."""
    masked("float64")
    x = np.array([1e-30, -1e-10, 1e-5, 0.3, 0.99999, 2.5, -3.0, 20.0, 88.7, 89.4, -89.4,
                  89.5, 1e20, -1e20], np.float32)
    got = dl.fori_loop(0, np.ones(x.size, np.int64), lambda i, v: fn(v), x)
    with np.errstate(all="ignore"):
        want = fn(x.astype(np.float64)).astype(np.float32)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    near = np.abs(got.astype(np.float64) - want) <= np.spacing(np.abs(want))
    assert np.all(same | near), (x[~(same | near)], got[~(same | near)], want[~(same | near)])


def test_changing_the_device_settings_after_the_device_opened_is_refused(monkeypatch):
    get_backend("vulkan")
    opened = dl.config.vulkan_mask
    monkeypatch.setitem(vars(dl.config), "vulkan_mask", "float64" if not opened else None)
    with pytest.raises(DloopValueError, match="read once") as e:
        with dl.config.override(backend="vulkan"):
            dl.jit(lambda x: x * 2.0)(np.ones(3))
    assert HERE in e.value.where and "new process" in str(e.value)
    monkeypatch.setitem(vars(dl.config), "vulkan_mask", opened)
    with dl.config.override(backend="vulkan"):
        np.testing.assert_array_equal(dl.jit(lambda x: x * 2.0)(np.ones(3)), 2.0)


def test_offsets_past_32_bits_are_refused(masked):
    be = masked("int64")
    small = be.zeros((4,), np.float32)
    huge = DeviceArray(be, small.buffer, 0, (2 ** 31,), np.float32)   # never dispatched
    with pytest.raises(DloopValueError, match="32-bit") as e:
        be.launch(Artifact(None, 2, 0, 32), 4, [small, huge])
    assert "shaderInt64" in str(e.value)


def test_without_float_atomics_table_gradients_use_compare_exchange(masked):
    be = masked("float_atomics")
    assert not be.features.float32_atomic_add
    coef = np.array([0.5, -0.3, 0.8], np.float32)
    x = np.array([0.2, 0.7, 1.1, 0.4], np.float32)
    n = np.array([3, 2, 0, 3])

    def loss(coef):
        return dl.fori_loop(0, n, lambda i, v: v * 0.9 + v * coef[i], x).sum()

    def ref(coef):
        total = 0.0
        for j in range(x.size):
            v = float(x[j])
            for i in range(n[j]):
                v = v * 0.9 + v * coef[i]
            total += v
        return total

    assert_close(dl.grad(loss)(coef), finite_difference(ref, coef.astype(np.float64)),
                 rtol=1e-4)


@pytest.mark.parametrize("mask", ["unified", "unified,mapped"])
def test_separate_device_memory_goes_through_staging(masked, mask):
    """A discrete GPU's memory: mapped to the host where the device maps all of it
    (written directly, read through staging), else reached through staging both ways."""
    be = masked(mask)
    assert not be.device.unified
    assert (be.device.mapped_type is None) == ("mapped" in mask)
    x = np.linspace(0.5, 1.1, 50)
    for top in (3, 40, 400):               # the heap grows, copying through the device
        n = np.arange(50) % top
        assert_close(_power_grad(x, n), (n + 1) * x ** n, rtol=1e-12)
    small = be.upload(x, np.float64)
    assert (small.buffer.view is not None) == ("mapped" not in mask)
    assert not small.buffer.readable
    np.testing.assert_array_equal(be.to_numpy(small), x)


def test_a_few_bytes_of_mapped_memory_are_read_in_place(masked, monkeypatch):
    """Up to _UNCACHED_READ bytes of mapped device memory (a call's fault flags) are read
    without a staging copy, more through one, and unmapped memory always through one; the
    values are the device's either way, written by a launch."""
    copies = []
    copy = vkdevice.Device.copy
    monkeypatch.setattr(vkdevice.Device, "copy", lambda self, *a, **k: (
        copies.append(a), copy(self, *a, **k))[1])
    for mask, size, staged in (("unified", 32, False), ("unified", 4000, True),
                               ("unified,mapped", 32, True)):
        be = masked(mask)
        x = np.linspace(0.5, 1.5, size)
        doubled = dl.grad(lambda x: (x * x).sum())(be.upload(x, np.float64))
        copies.clear()
        np.testing.assert_array_equal(be.to_numpy(doubled), 2 * x)
        assert bool(copies) == staged, (mask, size)


def test_large_writes_into_mapped_memory_land_before_their_use(masked):
    """A discrete GPU's mapped memory (the unified memory masked): writes of 1 MiB or more
    are deferred, and made before a read, before a host fill of the same buffer, and before
    the first submission that uses the buffer; smaller ones at once."""
    be = masked("unified")
    dev = be.device
    big = np.random.default_rng(7).random(200_000)
    a = be.upload(big, np.float64)
    assert [d[0] for d in dev.deferred] == [a.buffer]
    np.testing.assert_array_equal(be.to_numpy(a), big)
    assert not dev.deferred
    b = be.upload(big, np.float64)
    dev.fill_zero(b.buffer, 0, 1024)           # a host fill of part of it, after the write
    np.testing.assert_array_equal(be.to_numpy(b), np.where(np.arange(big.size) < 128, 0, big))
    c, small = be.upload(big, np.float64), be.upload(big[:1000], np.float64)
    assert [d[0] for d in dev.deferred] == [c.buffer]      # the small one was written
    d = be.empty((big.size,), np.float64)
    dev.copy(d.buffer, c.buffer, big.nbytes)                # the device reads c
    np.testing.assert_array_equal(be.to_numpy(d), big)
    np.testing.assert_array_equal(be.to_numpy(small), big[:1000])
    e = be.upload(big, np.float64)
    dev.write(e.buffer, 0, np.full(4, 7.0))                 # a small write after a large one
    np.testing.assert_array_equal(be.to_numpy(e), np.concatenate([np.full(4, 7.0), big[4:]]))


def test_ctrl_c_during_a_deferred_write_keeps_the_recorded_work(masked, monkeypatch):
    """A KeyboardInterrupt while flush() makes a deferred write (milliseconds for large
    inputs) leaves the recorded batch in place: the next wait submits it."""
    from dloop.adstack import parallel
    be = masked("unified")
    dev = be.device
    small = np.arange(1000, dtype=np.float64)
    s, d = be.upload(small, np.float64), be.empty((1000,), np.float64)
    dev.copy(d.buffer, s.buffer, small.nbytes)              # recorded, not submitted
    big = np.random.default_rng(10).random(200_000)
    b, e = be.upload(big, np.float64), be.empty((10,), np.float64)
    dev.copy(e.buffer, b.buffer, 80)                        # recorded; reads the deferred b
    assert dev.batch is not None and dev.deferred
    copy, calls = parallel.copy, []

    def interrupted(dst, src):
        if not calls:
            calls.append(1)
            raise KeyboardInterrupt
        return copy(dst, src)
    monkeypatch.setattr(parallel, "copy", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dev.wait_all()
    assert dev.batch is not None
    np.testing.assert_array_equal(be.to_numpy(d), small)
    np.testing.assert_array_equal(be.to_numpy(e), big[:10])


@pytest.mark.parametrize("call", ["vkEndCommandBuffer", "vkQueueSubmit"])
def test_ctrl_c_while_a_batch_is_submitted_loses_nothing(masked, monkeypatch, call):
    """A real SIGINT during the driver calls that close and submit a batch (here, the one
    that also fills the cached element order through staging) is raised once the batch is
    pending: the call stops with KeyboardInterrupt, nothing recorded is lost, and later
    calls are right."""
    import signal

    be = masked("unified,mapped")
    real, armed = vkdevice._lib, [True]

    def interrupted(*args):
        result = getattr(real, call)(*args)
        if armed[0]:
            armed[0] = False
            os.kill(os.getpid(), signal.SIGINT)
        return result
    _replace_lib(monkeypatch, **{call: interrupted})
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        x, n = np.linspace(0.5, 1.1, 5000), np.full(5000, 60)
        with pytest.raises(KeyboardInterrupt):
            _power_grad(x, n)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not armed[0] and be.device.batch is None
    for _ in range(2):
        assert_close(_power_grad(x, n), 61 * x ** 60, rtol=1e-12)
    np.testing.assert_array_equal(be.to_numpy(be._element_orders[5000]), np.arange(5000))


def _negation(be):
    """The compiled kernel out[tid] = -x[tid] (float64)."""
    from dloop.kernel import kir
    f64, tid = np.dtype(np.float64), kir.KVar(np.dtype(np.int64))
    x_, y_ = kir.KVar(f64), kir.KVar(f64)
    kernel = kir.Kernel("neg", tid, [kir.Load(x_, 0, tid), kir.Assign(y_, "neg", (x_,)),
                                     kir.Store(1, tid, y_)])
    kernel.buffers = [kir.BufferSpec("in", f64, 0), kir.BufferSpec("out", f64, 1)]
    return be.compile(kernel)


def test_a_launch_dispatches_the_workgroup_its_shader_was_rendered_with(masked):
    """The renderer takes the workgroup size from the backend's features: a device whose own
    record says otherwise does not change how many threads a launch covers."""
    import dataclasses
    be = masked("", workgroup=32)
    be.device.features = dataclasses.replace(be.device.features, workgroup=64)
    artifact = _negation(be)
    x = np.arange(1000, dtype=np.float64) + 1
    out = be.upload(np.zeros(1000), np.float64)
    be.launch(artifact, x.size, [be.upload(x, np.float64), out])
    np.testing.assert_array_equal(be.to_numpy(out), -x)


def test_empty_arrays_are_read_without_a_copy_of_zero_bytes(masked, monkeypatch):
    """Vulkan forbids a VkBufferCopy of size 0: reading an empty array through staging
    records no copy."""
    be = masked("unified,mapped")
    sizes = []

    def copy(cmd, src, dst, count, region):
        sizes.append(region.size)
        return real.vkCmdCopyBuffer(cmd, src, dst, count, region)
    real = _replace_lib(monkeypatch, vkCmdCopyBuffer=copy)
    empty = be.upload(np.zeros(0), np.float64)
    assert be.to_numpy(empty).shape == (0,)
    np.testing.assert_array_equal(be.to_numpy(be.upload(np.ones(3), np.float64)), np.ones(3))
    assert sizes and 0 not in sizes


def test_descriptor_sets_are_freed_whether_or_not_the_driver_refuses_more(masked, monkeypatch):
    """Every launch takes a descriptor set; the pool is reset once it has made maxSets of
    them, after a wait (lavapipe lets allocations pass maxSets, so they would never be
    freed otherwise), and launches before and after the reset compute what they should."""
    be = masked("")
    artifact = _negation(be)
    resets = []

    def reset(*args):
        resets.append(1)
        return real.vkResetDescriptorPool(*args)
    real = _replace_lib(monkeypatch, vkResetDescriptorPool=reset)
    x = np.arange(100, dtype=np.float64)
    ins = be.upload(x, np.float64)
    outs = [be.empty((100,), np.float64) for _ in range(2 * vkdevice._POOL_SETS + 10)]
    for out in outs:
        be.launch(artifact, x.size, [ins, out])
        assert be.device.sets_made <= vkdevice._POOL_SETS
    assert len(resets) == 2
    for out in outs[::97] + outs[-3:]:
        np.testing.assert_array_equal(be.to_numpy(out), -x)


def test_a_call_writes_its_inputs_while_the_device_sizes(masked, monkeypatch):
    """200,000 elements, sized on the device: the trip counts are written before the first
    submission, which reads them, and x while the host waits for the sizing's sums; the
    gradient is the closed form's."""
    be = masked("unified")
    made = []
    write = type(be.device)._write_deferred

    def recorded(self, used=None):
        made.append((used is None, [buf.size for buf, _, _ in self.deferred]))
        return write(self, used)
    monkeypatch.setattr(type(be.device), "_write_deferred", recorded)
    n = np.random.default_rng(8).integers(0, 12, 200_000)
    x = np.random.default_rng(9).uniform(0.5, 1.2, 200_000)
    assert_close(_power_grad(x, n), (n + 1) * x ** n, rtol=1e-12)
    assert any(waiting and pending for waiting, pending in made)


def test_each_host_array_crosses_to_the_device_once_per_call(masked, monkeypatch):
    """x read by the forward and the reverse kernel, the trip counts read as the loop's
    bound and as its capacities, the element order read by both kernels: one upload each."""
    be = masked("unified")
    n = 3000
    trips = np.random.default_rng(5).integers(0, 30, n)
    x = np.linspace(0.5, 1.1, n)
    uploads = []
    upload = type(be).upload

    def counted(self, value, dtype):
        if isinstance(value, np.ndarray) and value.size == n:
            uploads.append(value)
        return upload(self, value, dtype)
    monkeypatch.setattr(type(be), "upload", counted)
    g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.9 + 0.1 * x * np.sin(v),
                                       x).sum())(x)
    ids = [id(a) for a in uploads]
    assert len(set(ids)) == len(ids)
    assert sum(a.dtype.kind == "i" and np.array_equal(a, trips) for a in uploads) == 1
    want = finite_difference(lambda xs: _w1_numpy(xs, trips[:4]), x[:4])
    assert_close(g[:4], want, rtol=1e-7)


def test_forward_and_reverse_kernels_queue_without_a_wait_between(masked, monkeypatch):
    """grad's scalar cotangent is reshaped on the host between the two kernels: a NumPy
    value, which no launch writes, so the reverse launch does not wait for the forward
    kernel. One wait per call, which reads the faults and the results together."""
    be = masked("unified")
    n = 3000
    trips = np.random.default_rng(6).integers(0, 30, n)
    x = np.linspace(0.5, 1.1, n)
    g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.9 + 0.1 * x * np.sin(v),
                                       x).sum())
    g(x)
    waits = []
    wait_all = type(be.device).wait_all
    monkeypatch.setattr(type(be.device), "wait_all", lambda self: (waits.append(1),
                                                                   wait_all(self))[1])
    got = g(x)
    assert len(waits) == 1
    assert isinstance(got, np.ndarray)
    want = finite_difference(lambda xs: _w1_numpy(xs, trips[:4]), x[:4])
    assert_close(got[:4], want, rtol=1e-7)


def _w1_numpy(x, trips):
    v = x.copy()
    for i in range(int(trips.max())):
        v = np.where(i < trips, v * 0.9 + 0.1 * x * np.sin(v), v)
    return v.sum()


@pytest.mark.parametrize("mask", ["", "unified", "unified,mapped"])
def test_compact_starts_on_the_device_are_the_host_scan(masked, mask):
    """backends/vulkan/sizing.py: chunk sums, offsets, then each element's ~start, against
    NumPy's prefix sum, over sizes that leave a partial chunk; small launches and devices
    without int64 decline (the host scans)."""
    from dloop.backends.vulkan import sizing
    be = masked(mask)
    for n in (sizing.MIN_ELEMENTS, 70_001, 200_003):
        cap = np.random.default_rng(n).integers(0, 50, n)
        start, total = be.compact_starts(cap, be.upload)
        want = np.cumsum(cap) - cap
        np.testing.assert_array_equal(be.to_numpy(start), ~want)
        assert total == int(cap.sum())
    assert be.compact_starts(np.ones(sizing.MIN_ELEMENTS - 1, np.int64), be.upload) is None
    assert masked("int64").compact_starts(np.ones(1 << 17, np.int64), be.upload) is None


def test_a_loop_in_element_order_gets_its_starts_from_the_device(masked, monkeypatch):
    """10^5 elements of trips uniform in [0, 4), which no sort pays for (1.5 idle
    lane-iterations per element) but whose warps' largest would pad an interleaved tape by
    as much again: compact, with starts from the device scan; the gradient is the closed
    form's."""
    from dloop.backends.vulkan import sizing
    masked("unified")
    made = []
    scan = sizing.compact_starts

    def counted(*args):
        made.append(scan(*args))
        return made[-1]
    monkeypatch.setattr(sizing, "compact_starts", counted)
    n = 100_000
    trips = np.random.default_rng(2).integers(0, 4, n)
    x = np.random.default_rng(3).uniform(0.5, 1.5, n)
    g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.97 + 0.01 * v * v,
                                       x).sum())(x)
    assert made and made[0] is not None
    v, d = x.copy(), np.ones_like(x)
    for i in range(int(trips.max())):
        live = i < trips
        d = np.where(live, d * (0.97 + 0.02 * v), d)
        v = np.where(live, v * 0.97 + 0.01 * v * v, v)
    assert_close(g, d, rtol=1e-13)


def test_an_interrupted_call_leaves_recorded_work_and_the_device_usable(masked, monkeypatch):
    """Ctrl-C between a call's launches (here raised by the second launch) leaves work
    recorded but not submitted; the next call submits it with its own and gets the same
    gradient, bit for bit."""
    be = masked("unified")
    # The sweeps in two launches, as lavapipe's loop budget keeps them (a GPU's driver has
    # none, and runs them in one: kernel/schedule.py)
    monkeypatch.setattr(be, "caps", dataclasses.replace(
        be.caps, max_loop_trips=be.caps.max_loop_trips or 2 ** 40))
    n = np.arange(3000) % 37
    x = np.linspace(0.5, 1.1, 3000)

    def loss(x):
        return dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x).sum()
    want = dl.grad(loss)(x)
    launches = []
    launch = type(be).launch

    def interrupted(self, *args):
        launches.append(args)
        if len(launches) == 2:
            raise KeyboardInterrupt
        return launch(self, *args)
    monkeypatch.setattr(type(be), "launch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dl.grad(loss)(x)
    assert be.device.batch is not None         # the first launch, recorded, not submitted
    monkeypatch.setattr(type(be), "launch", launch)
    np.testing.assert_array_equal(dl.grad(loss)(x), want)
    assert_close(want[:3], finite_difference(
        lambda xs: _w1_like(xs, n[:3]), x[:3]), rtol=1e-7)


def _w1_like(x, n):
    v = x.copy()
    for i in range(int(n.max())):
        v = np.where(i < n, v * 0.95 + np.sin(v) * x * 0.1, v)
    return v.sum()


def test_a_heap_region_past_max_storage_buffer_range_is_refused(masked):
    masked("", max_range=1 << 16)
    x = np.ones(2)
    n = np.array([10, 9000])                # 9,010 float64 slots: 72 KB in one region
    with pytest.raises(DloopMemoryError, match="maxStorageBufferRange") as e:
        _power_grad(x, n)
    assert HERE in e.value.where and "72,080 bytes" in str(e.value)


def test_a_kernel_with_more_arrays_than_the_device_binds_is_refused(masked):
    """lavapipe allows 32 storage buffers per shader and crashed on more: a kernel that
    needs more is refused with the count, the limit and the fix, and the call after it,
    with fewer arrays, runs."""
    masked("", max_buffers=10)
    x = np.linspace(0.5, 1.0, 4)
    a, b, c, d, e, f, g, h = (np.full(4, k) for k in np.linspace(0.1, 0.8, 8))

    def many(x):
        return dl.fori_loop(0, np.array([1, 2, 3, 4]),
                            lambda i, v: v * 0.9 + a * b + c * d + e * f + g * h, x).sum()
    with pytest.raises(DloopNotImplementedError, match="storage buffers per shader") as err:
        dl.grad(many)(x)
    assert HERE in err.value.where and "stacked arrays" in str(err.value)
    assert_close(_power_grad(x, np.array([1, 2, 3, 4])), np.array([2, 3, 4, 5]) *
                 x ** np.array([1, 2, 3, 4]), rtol=1e-12)


def _doubling_kernel():
    """out[tid] = in[tid] + in[tid], float64."""
    tid, v, w = kir.KVar(np.int64), kir.KVar(np.float64), kir.KVar(np.float64)
    kernel = kir.Kernel("double", tid, [kir.Load(v, 0, tid), kir.Assign(w, "add", (v, v)),
                                        kir.Store(1, tid, w)])
    f64 = np.dtype(np.float64)
    kernel.buffers = [kir.BufferSpec("in", f64, 0), kir.BufferSpec("out", f64, 1)]
    return kernel


def test_buffers_live_until_the_submissions_using_them_finish():
    be = VulkanBackend(vkdevice.Device())
    x = be.upload(np.arange(1 << 16, dtype=np.float64), np.float64)
    out = be.empty((1 << 16,), np.float64)
    artifact = be.compile(_doubling_kernel())
    be.launch(artifact, 1 << 16, [x, out])
    probe = weakref.ref(x.buffer)
    del x
    gc.collect()
    if be.device.pending or be.device.batch:    # queued or recorded work holds the buffer
        assert probe() is not None
    be.synchronize()
    gc.collect()
    assert probe() is None
    np.testing.assert_array_equal(be.to_numpy(out), 2 * np.arange(1 << 16))


@pytest.mark.parametrize("mask", ["", "unified", "unified,mapped"])
def test_heavy_launches_and_copies_are_submitted_at_once(masked, mask, monkeypatch):
    """device.py: a launch of _HEAVY_THREADS threads or a copy of _HEAVY_BYTES bytes is
    submitted as it is recorded, so the device starts it while the host goes on; smaller work
    waits in the open batch. Results are the same either way."""
    monkeypatch.setattr(vkdevice, "_HEAVY_THREADS", 1 << 12)
    monkeypatch.setattr(vkdevice, "_HEAVY_BYTES", 1 << 14)
    be = masked(mask)
    artifact = be.compile(_doubling_kernel())
    f64 = np.dtype(np.float64)
    for n, heavy in ((1 << 10, False), (1 << 12, True)):
        be.synchronize()
        x = np.arange(n, dtype=np.float64)
        on_device, out = be.upload(x, f64), be.empty((n,), f64)
        # the copy, which mapped memory does not need
        assert (be.device.batch is None) == (heavy or on_device.buffer.view is not None)
        be.launch(artifact, n, [on_device, out])
        assert (be.device.batch is None) == heavy
        np.testing.assert_array_equal(be.to_numpy(out), 2 * x)


@pytest.mark.parametrize("code", [vkdevice._OUT_OF_POOL_MEMORY, vk.VK_ERROR_FRAGMENTED_POOL,
                                  vk.VK_ERROR_OUT_OF_HOST_MEMORY])
def test_a_full_descriptor_pool_starts_over(masked, monkeypatch, code):
    """vkAllocateDescriptorSets, called without the binding: its two pool errors (NVIDIA's
    driver returns out-of-pool-memory, which the binding has no exception for) make the
    device wait, reset the pool and allocate again, and the launch gives the right result;
    any other error is raised as the binding's exception."""
    be = masked("")
    real = vkdevice._lib
    calls = {"failed": 0, "resets": 0}

    def allocate(*args):
        if not calls["failed"]:
            calls["failed"] = 1
            return code
        return real.vkAllocateDescriptorSets(*args)

    def reset(*args):
        calls["resets"] += 1
        return real.vkResetDescriptorPool(*args)
    artifact = be.compile(_doubling_kernel())
    x = np.arange(100, dtype=np.float64)
    on_device, out = be.upload(x, x.dtype), be.empty((100,), x.dtype)
    _replace_lib(monkeypatch, vkAllocateDescriptorSets=allocate, vkResetDescriptorPool=reset)
    if code == vk.VK_ERROR_OUT_OF_HOST_MEMORY:
        with pytest.raises(vk.VkErrorOutOfHostMemory):
            be.launch(artifact, 100, [on_device, out])
        return
    be.launch(artifact, 100, [on_device, out])
    assert calls == {"failed": 1, "resets": 1}
    np.testing.assert_array_equal(be.to_numpy(out), 2 * x)


def test_empty_launches_submit_nothing():
    be = VulkanBackend(vkdevice.Device())
    be.synchronize()
    before = len(be.device.pending)
    be.launch(None, 0, [])
    assert len(be.device.pending) == before and be.device.batch is None


def test_pipeline_cache_is_written_to_and_read_from_disk(tmp_path):
    previous = dl.config.cache_dir
    dl.config.update("cache_dir", str(tmp_path))
    try:
        dev = vkdevice.Device()
        be = VulkanBackend(dev)
        tid, v = kir.KVar(np.int64), kir.KVar(np.float32)
        kernel = kir.Kernel("copy", tid, [kir.Load(v, 0, tid), kir.Store(1, tid, v)])
        f32 = np.dtype(np.float32)
        kernel.buffers = [kir.BufferSpec("in", f32, 0), kir.BufferSpec("out", f32, 1)]
        be.compile(kernel)
        dev.close()
        saved = list(tmp_path.glob("vulkan-*.pipelines"))
        assert len(saved) == 1 and saved[0].stat().st_size > 0
        again = VulkanBackend(vkdevice.Device())       # starts from the saved cache
        out = again.zeros((3,), np.float32)
        again.launch(again.compile(kernel), 3, [again.upload(np.arange(3.0), np.float32), out])
        np.testing.assert_array_equal(again.to_numpy(out), [0.0, 1.0, 2.0])
    finally:
        dl.config.update("cache_dir", previous)


def test_bool_carries_on_the_adstack_take_32_bits(masked):
    masked("")
    x = np.linspace(0.5, 1.5, 6)
    n = np.array([0, 1, 2, 3, 7, 12])

    def loss(x):
        def body(i, c):
            v, flag = c
            return np.where(flag, v * x, v + 0.5 * x), ~flag
        return dl.fori_loop(0, n, body, (x, x > 1.0))[0].sum()

    def ref(x):
        total = 0.0
        for j in range(x.size):
            v, flag = x[j], x[j] > 1.0
            for _ in range(n[j]):
                v, flag = (v * x[j] if flag else v + 0.5 * x[j]), not flag
            total += v
        return total

    assert_close(dl.grad(loss)(x), finite_difference(ref, x), rtol=1e-8)
    assert dl.memory_stats()["adstack_bytes_used"] == n.sum() * (8 + 4)


def test_a_device_the_driver_cannot_open_makes_the_backend_unavailable(monkeypatch):
    """NVIDIA's driver refused a new VkDevice after a few dozen in one process: that is the
    backend's reason for being unavailable, not a raw driver exception."""
    def refuse(*args):
        raise vk.VkErrorInitializationFailed()
    monkeypatch.setattr(vk, "vkCreateDevice", refuse)
    with pytest.raises(vkdevice.VulkanUnavailable,
                       match="could not be opened: vkCreateDevice failed "
                             r"\(VkErrorInitializationFailed\)"):
        vkdevice.Device()


def test_an_unknown_feature_mask_makes_the_backend_unavailable_with_the_reason(monkeypatch):
    monkeypatch.setitem(vars(dl.config), "vulkan_mask", "float64,quantum")
    with pytest.raises(vkdevice.VulkanUnavailable, match="quantum.*known: float64"):
        vkdevice.Device()


def test_launches_past_2_to_the_31_elements_are_refused():
    be = VulkanBackend(vkdevice.Device())
    with pytest.raises(DloopValueError, match="split the call") as e:
        be.launch(Artifact(None, 0, 0, 32), 2 ** 31, [])
    assert HERE in e.value.where


def test_a_loop_the_driver_would_cut_short_is_refused():
    """lavapipe ends an invocation's loops after 65,535 iterations without a word: a gradient
    whose loops are sized at launch past that is refused; a GPU driver runs it through."""
    dl.config.update("backend", "vulkan")
    try:
        n = np.array([70_000, 3])
        g = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.99999, x).sum())
        if "llvmpipe" in get_backend("vulkan").features.name:
            with pytest.raises(dl.DloopNotImplementedError, match="65,535") as e:
                g(np.ones(2))
            assert HERE in str(e.value)
            short = dl.grad(lambda x: dl.fori_loop(0, np.array([5, 3]), lambda i, v: v * 0.5,
                                                   x).sum())
            np.testing.assert_allclose(short(np.ones(2)), [0.5 ** 5, 0.5 ** 3])
        else:
            np.testing.assert_allclose(g(np.ones(2)), [0.99999 ** 70_000, 0.99999 ** 3])
    finally:
        dl.config.update("backend", None)


def test_a_fixed_capacity_is_not_read_as_a_trip_count():
    """With adstack_capacity set, the launch check read the capacity as the loops' trips: a
    loop of 10 trips was refused as running 100,000 on lavapipe. The kernel's own pass
    counter still refuses one the driver would cut."""
    dl.config.update("backend", "vulkan")
    try:
        with dl.config.override(adstack_capacity=100_000):
            short = dl.grad(lambda x: dl.fori_loop(0, np.array([3, 10]), lambda i, v: v * 0.5,
                                                   x).sum())
            np.testing.assert_allclose(short(np.ones(2)), [0.5 ** 3, 0.5 ** 10])
            n = np.array([70_000, 3])
            long = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.99999, x).sum())
            if "llvmpipe" in get_backend("vulkan").features.name:
                with pytest.raises(dl.DloopError, match="65,53[56]"):
                    long(np.ones(2))
            else:
                np.testing.assert_allclose(long(np.ones(2)), [0.99999 ** 70_000, 0.99999 ** 3])
    finally:
        dl.config.update("backend", None)


def test_loops_that_together_pass_the_driver_budget_are_refused():
    """lavapipe's 65,535 counts every loop an invocation runs, together: 300 steps of a loop
    of 300 steps each, a forward-only loop (nothing is sized at launch) and 70,000 steps of a
    jitted loop would come back wrong without a word. Each raises instead, naming the line; a
    nest within the budget, and a GPU driver for all of them, give the exact answer."""
    dl.config.update("backend", "vulkan")
    try:
        x = np.linspace(0.1, 1.0, 8)
        steps = np.full(8, 300)

        def nested(x):
            return dl.fori_loop(0, 300, lambda i, v: dl.fori_loop(
                0, steps, lambda j, w: w + 0.001, v), x)

        def long(x):
            return dl.fori_loop(0, np.full(8, 70_000), lambda i, v: v + 0.001, x)

        small = dl.jit(lambda x: dl.fori_loop(0, 100, lambda i, v: dl.fori_loop(
            0, steps // 3, lambda j, w: w + 0.001, v), x))(x)
        np.testing.assert_allclose(small, x + 100 * 100 * 0.001, rtol=1e-12)
        if "llvmpipe" in get_backend("vulkan").features.name:
            for fn in (nested, long):
                with pytest.raises(dl.DloopNotImplementedError, match="after 65,535 passes") as e:
                    dl.jit(fn)(x)
                assert HERE in str(e.value)
        else:
            np.testing.assert_allclose(dl.jit(nested)(x), x + 90_000 * 0.001, rtol=1e-9)
            np.testing.assert_allclose(dl.jit(long)(x), x + 70_000 * 0.001, rtol=1e-9)
    finally:
        dl.config.update("backend", None)


def test_a_gpu_polls_its_fences_and_a_cpu_device_blocks(masked, monkeypatch):
    """Device._wait polls a fence (a GPU: a blocked waiter wakes 0.1 ms late) before it
    blocks on it, and not at all on a CPU device, whose cores run the work. Forced to poll
    here where the device is lavapipe, a wait polls and a call gets the closed-form
    gradient; with no time to poll, the wait blocks."""
    be = masked("unified")
    dev = be.device
    cpu = vk.vkGetPhysicalDeviceProperties(dev.pd).deviceType == \
        vk.VK_PHYSICAL_DEVICE_TYPE_CPU                    # lavapipe, SwiftShader
    assert (dev.spin == 0.0) == cpu
    calls = []

    def poll(*args):
        calls.append("poll")
        return real.vkGetFenceStatus(*args)

    def block(*args):
        calls.append("block")
        return real.vkWaitForFences(*args)
    real = _replace_lib(monkeypatch, vkGetFenceStatus=poll, vkWaitForFences=block)
    x, n = np.linspace(0.5, 1.5, 500), np.arange(500) % 7
    for spin, want in ((60.0, {"poll"}), (0.0, {"block"})):
        monkeypatch.setattr(dev, "spin", spin)
        dev.wait_all()
        dev.submit(lambda cmd: None, [])
        fence = dev.batch[1]
        dev.flush()
        calls.clear()
        dev._wait(fence)
        assert set(calls) == want, (spin, calls)
        dev.wait_all()
        np.testing.assert_allclose(_power_grad(x, n), (n + 1) * x ** n, rtol=1e-13)


def test_ctrl_c_while_a_wait_polls_leaves_the_work_queued(masked, monkeypatch):
    """A KeyboardInterrupt raised in Device._wait's poll (here by the first poll) leaves the
    submitted work pending with what it uses; the next call waits for it and gets the
    closed-form gradient, and the device's queue drains."""
    be = masked("unified")
    dev = be.device
    monkeypatch.setattr(dev, "spin", 60.0)
    interrupt = [True]

    def poll(*args):
        if not interrupt[0]:
            return real.vkGetFenceStatus(*args)
        if sys._getframe(1).f_code.co_name == "_wait":
            interrupt[0] = False
            raise KeyboardInterrupt
        # Until then the work is still running: lavapipe may finish it before the call
        # waits, and Device._retire would release it unwaited for.
        return vk.VK_NOT_READY
    real = _replace_lib(monkeypatch, vkGetFenceStatus=poll)
    x, n = np.linspace(0.5, 1.5, 400), np.arange(400) % 9
    with pytest.raises(KeyboardInterrupt):
        _power_grad(x, n)
    assert not interrupt[0] and dev.pending          # raised in the poll, work still queued
    np.testing.assert_allclose(_power_grad(x, n), (n + 1) * x ** n, rtol=1e-13)
    dev.wait_all()
    assert not dev.pending
