"""Backend.kept_upload: a device copy of an immutable host array (a trace's kept copy of a
captured array) is made once and found again at later calls, per dtype, while the host array
lives; host backends hand the host array itself back."""

import gc
import weakref

import numpy as np
import pytest

import dloop as dl
from dloop.backends import base
from dloop.backends.base import get_backend
from dloop.trace import captured_copies


@pytest.fixture
def device(backend):
    """The backend, where it has memory of its own (the host ones keep nothing: the last
    test); conftest's `backend` fixture, narrowed to those by `on_devices`."""
    return get_backend(backend)


# The backends with memory of their own, through conftest's `backend` fixture.
on_devices = pytest.mark.parametrize("backend", ["vulkan", "cuda"], indirect=True)


def _immutable(values):
    values = np.ascontiguousarray(values)
    values.flags.writeable = False
    return values


@on_devices
def test_a_device_copy_is_made_once_per_host_array_and_dtype(device):
    be = device
    host = _immutable(np.arange(12, dtype=np.int64).reshape(3, 4))
    first = be.kept_upload(host, np.int64)
    assert be.kept_upload(host, np.int64) is first and first.shape == (3, 4)
    np.testing.assert_array_equal(be.to_numpy(first), host)
    other = be.kept_upload(host, np.float32)
    assert other is not first and other.dtype == np.float32
    np.testing.assert_array_equal(be.to_numpy(other), host.astype(np.float32))
    twin = _immutable(host.copy())                      # equal values, another array
    assert be.kept_upload(twin, np.int64) is not first


@on_devices
def test_device_copies_are_forgotten_with_their_host_array_and_bounded(device, monkeypatch):
    be = device
    host = _immutable(np.ones(64))
    be.kept_upload(host, np.float64)
    key = id(host)
    del host
    gc.collect()
    assert key not in be._kept_uploads
    monkeypatch.setattr(base, "KEPT_UPLOAD_BYTES", 2 * 64 * 8)
    hosts = [_immutable(np.full(64, float(k))) for k in range(3)]
    copies = [be.kept_upload(h, np.float64) for h in hosts]
    assert be.kept_upload(hosts[2], np.float64) is copies[2]
    assert be.kept_upload(hosts[1], np.float64) is copies[1]
    assert be.kept_upload(hosts[0], np.float64) is not copies[0]   # the oldest, given up


@on_devices
def test_copies_of_freed_host_arrays_take_no_room_from_live_ones(device, monkeypatch):
    """Room for two copies: a dead host array's copy, forgotten on the way, must not count
    against the live ones (the older live copy was given up too)."""
    be = device
    monkeypatch.setattr(base, "KEPT_UPLOAD_BYTES", 2 * 64 * 8)
    live, new = _immutable(np.ones(64)), _immutable(np.zeros(64))
    first = be.kept_upload(live, np.float64)
    gone = _immutable(np.full(64, 2.0))
    dead = weakref.ref(gone)
    del gone
    # A freed array's entry that its weakref callback could not forget (the lock was held)
    be._kept_uploads[-1] = (dead, {np.dtype(np.float64): be.upload(np.ones(64), np.float64)})
    be.kept_upload(new, np.float64)
    assert be.kept_upload(live, np.float64) is first and -1 not in be._kept_uploads


@on_devices
def test_a_host_array_that_takes_over_a_freed_ones_id_is_the_most_recently_used(device,
                                                                               monkeypatch):
    """A new host array may get the id of a freed one whose entry is still there (not yet
    forgotten): its copy is the newest, not one in the freed entry's old place."""
    be = device
    monkeypatch.setattr(base, "KEPT_UPLOAD_BYTES", 2 * 64 * 8)
    taker, older = _immutable(np.full(64, 2.0)), _immutable(np.full(64, 1.0))
    gone = _immutable(np.zeros(64))
    dead = weakref.ref(gone)
    del gone
    be.kept_upload(older, np.float64)
    be._kept_uploads[id(taker)] = (dead, {})          # the freed array's entry, the oldest
    be._kept_uploads.move_to_end(id(taker), last=False)
    copy = be.kept_upload(taker, np.float64)
    be.kept_upload(_immutable(np.full(64, 3.0)), np.float64)    # one of two must go: older
    assert be.kept_upload(taker, np.float64) is copy


@on_devices
def test_a_captured_array_changed_in_place_reaches_the_device(device):
    """The kept device copy belongs to the kept host copy: a change in place makes new ones
    (d/dx sum(x * w) = w)."""
    w = np.full(captured_copies.MIN_BYTES // 8 + 1, 2.0)
    x = np.ones_like(w)
    grad = dl.grad(lambda x: dl.fori_loop(0, 2, lambda i, v: v * w, x).sum())
    np.testing.assert_array_equal(grad(x), w * w)
    np.testing.assert_array_equal(grad(x), w * w)
    w[::3] = 0.5
    np.testing.assert_array_equal(grad(x), w * w)


def test_host_backends_hand_the_host_array_back():
    be = get_backend("cpu")
    host = _immutable(np.arange(5.0))
    assert be.kept_upload(host, np.float64) is host


@on_devices
def test_a_layout_made_on_the_host_crosses_to_the_device_once(device, monkeypatch):
    """Equal trip counts: no element order, so the layout's starts are made on the host
    (on Vulkan; on cuda, on the device); the sizing memo keeps them, and their device copy
    is kept too. A change of the trip counts lays out anew (d/dx sum(x 0.5^n) = 0.5^n)."""
    n = (1 << 16) + 100                      # trips under 1 MiB: copied by each trace
    trips = np.full(n, 3)
    x = np.ones(n)
    grad = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.5, x).sum())
    for _ in range(2):            # laid out, then the memo's arrays copied to the device
        np.testing.assert_array_equal(grad(x), 0.5 ** trips)
    uploads = []
    upload = device.upload
    monkeypatch.setattr(device, "upload", lambda a, dtype: isinstance(a, np.ndarray) and
                        uploads.append((np.dtype(dtype), a.size)) or upload(a, dtype))
    for _ in range(2):
        np.testing.assert_array_equal(grad(x), 0.5 ** trips)
    # At each call only the trace's copy of the trip counts, for the kernel: the sizing
    # memo's copy of them (the capacities) and the layout's starts are on the device.
    assert uploads.count((np.dtype(np.int64), n)) == 2, uploads
    trips[::5] = 5
    np.testing.assert_array_equal(grad(x), 0.5 ** trips)
    np.testing.assert_array_equal(grad(x), 0.5 ** trips)
