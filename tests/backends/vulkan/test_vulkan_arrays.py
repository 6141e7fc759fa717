"""dloop.vulkan arrays: values that stay on the Vulkan device between calls. Made by asarray,
taken and returned by grad, value_and_grad, jit and vjp with no copy through the host,
captured as constants without a copy, read once for sizing, immutable, pickled by value,
freed with their last reference, and refused with a DloopError in a forked child."""

import gc
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest

import dloop as dl
from dloop.backends.base import available, get_backend
from helpers import assert_close, damped_sine, finite_difference

ok, why = available("vulkan")
if not ok:
    pytest.skip(why, allow_module_level=True)

import dloop.vulkan as dv                                       # noqa: E402
from dloop.backends.vulkan import device as vkdevice            # noqa: E402


def _loss(n):
    return lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x).sum()


def _reference(x, n):
    return finite_difference(lambda x: damped_sine(x, n).sum(), x)


X = np.linspace(0.1, 1.4, 9)
N = np.array([3, 0, 5, 1, 2, 9, 4, 7, 6])


@pytest.mark.parametrize("values", [
    np.array([True, False, True]), np.arange(5, dtype=np.int32), np.arange(-3, 4),
    np.linspace(0, 1, 6, dtype=np.float32), np.linspace(-1, 1, 12).reshape(3, 4),
    np.float64(2.5), np.zeros((0, 3))])
def test_asarray_round_trips_every_dtype_and_shape(values):
    a = dv.asarray(values)
    assert isinstance(a, dv.Array)
    assert a.shape == np.shape(values) and a.dtype == np.asarray(values).dtype
    back = np.asarray(a)
    assert back.dtype == a.dtype and np.array_equal(back, values)
    back[...] = 0 if back.size else back                        # a fresh, writable copy
    assert np.array_equal(np.asarray(a), values)


def test_asarray_widens_small_integers_converts_lists_and_refuses_float16():
    assert dv.asarray(np.arange(4, dtype=np.int8)).dtype == np.int64
    assert np.array_equal(np.asarray(dv.asarray([1.5, 2.5])), [1.5, 2.5])
    assert dv.asarray(X, dtype=np.float32).dtype == np.float32
    a = dv.asarray(X)
    assert dv.asarray(a) is a                                   # already there: no copy
    with pytest.raises(dl.DloopTypeError, match="float16.*astype") as e:
        dv.asarray(np.ones(3, np.float16))
    assert os.path.basename(__file__) in str(e.value)


def test_grad_of_vulkan_arrays_returns_vulkan_arrays_and_matches_finite_differences():
    x, n = dv.asarray(X), dv.asarray(N)
    g = dl.grad(_loss(n))(x)                                    # n captured, on the device
    assert isinstance(g, dv.Array) and g.shape == X.shape
    assert_close(np.asarray(g), _reference(X, N), rtol=1e-7)
    value, g2 = dl.value_and_grad(_loss(n))(x)
    assert isinstance(value, dv.Array) and value.shape == ()
    assert abs(float(value) - damped_sine(X, N).sum()) < 1e-12
    assert np.array_equal(np.asarray(g2), np.asarray(g))
    # trip counts as an argument, not differentiated
    g3 = dl.grad(lambda x, n: _loss(n)(x))(x, n)
    assert np.array_equal(np.asarray(g3), np.asarray(g))


def test_jit_and_vjp_keep_vulkan_arrays_on_the_device():
    x = dv.asarray(X)
    y = dl.jit(lambda x: x * 2.0 + 1.0)(x)
    assert isinstance(y, dv.Array)
    assert np.array_equal(np.asarray(y), X * 2.0 + 1.0)
    assert dl.jit(lambda x: x)(x) is not None
    out, f_vjp = dl.vjp(lambda x: x * x, x)
    assert isinstance(out, dv.Array)
    (ct,) = f_vjp(dv.asarray(np.ones_like(X)))
    assert isinstance(ct, dv.Array)
    assert np.array_equal(np.asarray(ct), 2 * X)
    (ct,) = f_vjp(np.ones_like(X))                              # a NumPy cotangent too
    assert np.array_equal(np.asarray(ct), 2 * X)


def test_mixing_vulkan_and_numpy_arguments_is_refused_with_the_line():
    with pytest.raises(dl.DloopTypeError, match="mix arrays of dloop.vulkan and numpy") as e:
        dl.jit(lambda a, b: a + b)(dv.asarray(X), X)
    assert os.path.basename(__file__) in str(e.value)


def test_a_captured_vulkan_array_in_a_numpy_call_and_on_the_cpu_backend():
    n = dv.asarray(N)
    want = _reference(X, N)
    with dl.config.override(backend="vulkan"):
        g = dl.grad(_loss(n))(X)                       # NumPy in, NumPy out; n stays there
    assert isinstance(g, np.ndarray)
    assert_close(g, want, rtol=1e-7)
    with dl.config.override(backend="cpu"):
        g = dl.grad(_loss(n))(dv.asarray(X))           # read to the host, results back
    assert isinstance(g, dv.Array)
    assert_close(np.asarray(g), want, rtol=1e-7)


def test_new_trip_counts_size_anew_while_the_same_array_is_read_once(monkeypatch):
    """The sizing keeps a held array's host values for its lifetime: another array, of other
    values, sizes anew, and going back to the first reuses its values, right each time."""
    x = dv.asarray(X)
    other = (N * 3) % 11
    n1, n2 = dv.asarray(N), dv.asarray(other)
    for n, host in [(n1, N), (n2, other), (n1, N)]:
        assert_close(np.asarray(dl.grad(_loss(n))(x)), _reference(X, host), rtol=1e-7)
    reads = []
    read_many = vkdevice.Device.read_many

    def counting(self, parts):
        reads.append(sum(nbytes for _, _, nbytes in parts))
        return read_many(self, parts)
    monkeypatch.setattr(vkdevice.Device, "read_many", counting)
    writes = []
    write = vkdevice.Device.write
    monkeypatch.setattr(vkdevice.Device, "write", lambda self, buf, offset, data, now=False: (
        writes.append(memoryview(data).nbytes), write(self, buf, offset, data, now))[1])
    big = np.tile(N, 1000)
    xb, nb = dv.asarray(np.resize(X, big.size)), dv.asarray(big)
    dl.grad(_loss(nb))(xb)
    reads.clear()
    writes.clear()
    dl.grad(_loss(nb))(xb)
    # One read, of the fault flags (a few int64s); nothing of x, n or the gradient.
    assert len(reads) == 1 and reads[0] < 8 * 16, reads
    assert sum(writes) < 8 * 16, writes


def test_a_vulkan_array_has_no_way_to_be_written_and_converts_by_copy_only():
    a = dv.asarray(X)
    with pytest.raises(TypeError):
        a[0] = 1.0
    with pytest.raises(ValueError, match="copies it"):
        np.asarray(a, copy=False) if np.__version__ >= "2" else a.__array__(copy=False)
    assert len(a) == X.size and float(dv.asarray(2.5)) == 2.5 and int(dv.asarray(7)) == 7
    assert "dloop.vulkan array" in repr(a)
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b, dv.Array) and b is not a and np.array_equal(np.asarray(b), X)


def test_an_adstack_overflow_with_vulkan_arrays_is_raised_and_the_next_call_is_right():
    x, n = dv.asarray(X), dv.asarray(N)
    with dl.config.override(adstack_capacity=2):
        with pytest.raises(dl.AdstackOverflowError):
            dl.grad(_loss(n))(x)
    assert_close(np.asarray(dl.grad(_loss(n))(x)), _reference(X, N), rtol=1e-7)


def test_a_freed_vulkan_array_frees_its_device_buffer():
    """A held array's host values, kept for sizing, and its place among kept uploads do not
    keep its buffer once the array and the sizing that read it are gone."""
    x = dv.asarray(X)
    n = dv.asarray(N)
    dl.grad(_loss(n))(x)
    buffer = weakref.ref(n.buffer)
    del n
    dl.grad(_loss(dv.asarray(N + 1)))(x)         # the sizing memo now keeps other values
    gc.collect()
    assert buffer() is None


def test_threads_share_vulkan_arrays():
    x, n = dv.asarray(X), dv.asarray(N)
    want = np.asarray(dl.grad(_loss(n))(x))
    results = []

    def work():
        for _ in range(5):
            results.append(np.array_equal(np.asarray(dl.grad(_loss(n))(x)), want))
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 20


def test_retrace_false_with_vulkan_arrays():
    x, n = dv.asarray(X), dv.asarray(N)
    grad = dl.grad(_loss(n), retrace=False)
    first = grad(x)
    assert np.array_equal(np.asarray(grad(x)), np.asarray(first))
    assert_close(np.asarray(first), _reference(X, N), rtol=1e-7)


def test_an_array_of_another_vulkan_device_goes_through_the_host(masked):
    x, n = dv.asarray(X), dv.asarray(N)                 # on the default device
    other = masked("float_atomics")
    assert other is not x.backend and get_backend("vulkan") is other
    g = dl.grad(_loss(n))(x)
    assert_close(np.asarray(g), _reference(X, N), rtol=1e-7)


def test_a_forked_child_is_told_it_cannot_use_a_vulkan_array():
    script = textwrap.dedent("""
        import os, numpy as np, dloop as dl, dloop.vulkan as dv
        a = dv.asarray(np.arange(3.0))
        pid = os.fork()
        if pid == 0:
            try:
                np.asarray(a)
                print("child: no error")
            except dl.DloopError as e:
                print("child refused:", "forked" in str(e))
            print("child repr:", "shape=(3,)" in repr(a))
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent:", np.asarray(a).tolist())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    out = proc.stdout + proc.stderr
    assert "child refused: True" in out and "child repr: True" in out, out
    assert "parent: [0.0, 1.0, 2.0]" in out, out


def test_asarray_without_a_usable_vulkan_backend_says_why_and_what_to_do(monkeypatch):
    from dloop.backends import base
    monkeypatch.delitem(base._instances, "vulkan", raising=False)
    monkeypatch.setattr(base, "available", lambda name: (False, f"backend {name!r}: no driver"))
    with pytest.raises(dl.DloopValueError, match="no driver.*dloop\\[vulkan\\]") as e:
        dv.asarray(X)
    assert os.path.basename(__file__) in str(e.value)


@pytest.mark.skipif(not available("cuda")[0], reason=available("cuda")[1])
def test_vulkan_arrays_on_the_cuda_backend_come_back_as_vulkan_arrays():
    with dl.config.override(backend="cuda"):
        g = dl.grad(_loss(dv.asarray(N)))(dv.asarray(X))
    assert isinstance(g, dv.Array)
    assert_close(np.asarray(g), _reference(X, N), rtol=1e-7)


def test_a_vulkan_index_array_gathers_adds_its_gradient_and_updates_as_numpy_does():
    """Repeated indices held on the device index a traced table as NumPy's fancy indexing
    does: the gradient adds every read (a static key kept one write per position), and an
    update at them is NumPy's (it was refused)."""
    t, i = np.linspace(-1.0, 1.0, 7), np.array([1, 2, 4, 1, 0, 4, 4, 6])
    w = np.linspace(0.5, 2.0, i.size)
    want = np.zeros_like(t)
    np.add.at(want, i, w)
    iv = dv.asarray(i)

    def loss(t):
        return (t.__array_namespace__().asarray(t)[iv] * w).sum()
    value, g = dl.value_and_grad(loss)(dv.asarray(t))
    assert abs(float(value) - (t[i] * w).sum()) < 1e-12
    assert_close(np.asarray(g), want, rtol=1e-12)

    def update(t):
        u = t.__array_namespace__().asarray(t)
        u[iv] = -3.0
        return u
    numpy_updated = t.copy()
    numpy_updated[i] = -3.0
    assert np.array_equal(np.asarray(dl.jit(update)(dv.asarray(t))), numpy_updated)


def test_reshape_astype_and_conversions_refuse_mistakes_with_dloop_errors():
    a = dv.asarray(np.arange(6.0))
    with pytest.raises(dl.DloopValueError, match="size 6 into shape"):
        a.reshape(4, 4)                          # would read past its six values
    assert np.array_equal(np.asarray(a.reshape(2, -1)), np.arange(6.0).reshape(2, 3))
    # astype makes what asarray would: an array every call takes, or a DloopError
    b = a.astype(np.uint64)
    assert b.dtype == np.int64
    assert np.array_equal(np.asarray(dl.jit(lambda v: v + 1)(b)), np.arange(1, 7))
    with pytest.raises(dl.DloopTypeError, match="float16"):
        a.astype(np.float16)
    with pytest.raises(dl.DloopTypeError, match="0-d"):
        len(dv.asarray(2.0))
    with pytest.raises(dl.DloopValueError, match="copies it"):
        a.__array__(copy=False)
    with pytest.raises(dl.DloopTypeError, match="one element"):
        float(a)
    with pytest.raises(dl.DloopValueError, match="one element"):
        bool(a)
    assert bool(dv.asarray([True])) and int(dv.asarray([[3]])) == 3
    with pytest.raises(dl.DloopValueError, match="cannot be made an array") as e:
        dv.asarray([[1.0, 2.0], [3.0]])
    assert os.path.basename(__file__) in str(e.value)
    with pytest.raises(dl.DloopTypeError, match="cannot be made an array"):
        dv.asarray([1.0], dtype="no such dtype")


def test_trip_counts_another_vulkan_device_computed_are_read_by_that_device(masked):
    """Sizing on a masked device reads trip counts that a call on the default device computed
    through the default device, whose read waits for that call's work (a kernel without
    fault flags, so the call returned without waiting). Read by the masked device, they were
    read before the work ran: capacities of 0, an adstack overflow."""
    x = dv.asarray(X)
    zeros = [dv.asarray(np.zeros_like(N)) for _ in range(2)]
    del zeros                  # freed buffers are reused last in, first out: n's holds zeros
    n = dl.jit(lambda m: m + 1)(dv.asarray(N - 1))
    masked("float_atomics")
    assert_close(np.asarray(dl.grad(_loss(n))(x)), _reference(X, N), rtol=1e-7)


def test_a_captured_vulkan_array_returned_as_it_is_is_a_result():
    """As a captured NumPy array returned is; it was refused as 'not an array'."""
    x, n = dv.asarray(X), dv.asarray(N)
    y, m = dl.jit(lambda x: (x * 2.0, n))(x)
    assert isinstance(m, dv.Array) and np.array_equal(np.asarray(m), N)
    assert np.array_equal(np.asarray(y), X * 2.0)
    g, aux = dl.grad(lambda x: (_loss(n)(x), n), has_aux=True)(x)
    assert np.array_equal(np.asarray(aux), N)
    assert_close(np.asarray(g), _reference(X, N), rtol=1e-7)
    with dl.config.override(backend="vulkan"):
        _, m = dl.jit(lambda x: (x, n))(X)            # a NumPy call: NumPy's copy
    assert isinstance(m, np.ndarray) and np.array_equal(m, N)


def test_indexing_a_vulkan_array_on_the_host_says_where_to_index_it():
    a = dv.asarray(X)
    with pytest.raises(dl.DloopTypeError, match="np.asarray") as e:
        a[0]
    assert os.path.basename(__file__) in str(e.value)
    assert float(dl.jit(lambda a: a[2])(a)) == X[2]


def test_a_loop_on_vulkan_arrays_outside_a_trace_keeps_them_on_the_device(monkeypatch):
    """fori_loop called on concrete dloop.vulkan arrays runs at once, on their device, and
    moves no operand through the host (they were read to NumPy and sized anew each call)."""
    n, x = dv.asarray(N), dv.asarray(X)
    body = lambda i, v: v * 0.95 + np.sin(v) * 0.1            # noqa: E731
    out = dl.fori_loop(0, n, body, x)
    assert isinstance(out, dv.Array)
    assert_close(np.asarray(out), dl.fori_loop(0, N, body, X), rtol=1e-14)
    reads = []
    read_many = vkdevice.Device.read_many
    monkeypatch.setattr(vkdevice.Device, "read_many", lambda self, parts: (
        reads.append(sum(nbytes for _, _, nbytes in parts)), read_many(self, parts))[1])
    dl.fori_loop(0, n, body, x)
    assert sum(reads) < N.nbytes, reads


def test_a_held_array_too_large_to_keep_pushes_out_no_kept_upload(monkeypatch):
    """host_values keeps no device copy larger than kept_upload would keep: as the newest
    entry it counted first and pushed every other kept upload out."""
    from dloop.backends import base
    from dloop.backends.vulkan import launch
    from dloop.trace import captured_copies
    be = get_backend("vulkan")
    small = np.arange(10.0)
    captured_copies.freeze(small)
    monkeypatch.setattr(base, "KEPT_UPLOAD_BYTES", 500)
    monkeypatch.setattr(launch, "KEPT_UPLOAD_BYTES", 500)
    be.kept_upload(small, small.dtype)
    big = dv.asarray(np.arange(100))                   # 800 bytes
    assert np.array_equal(be.host_values(big), np.arange(100))
    assert id(small) in be._kept_uploads
