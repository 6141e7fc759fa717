"""STAGE 1 — `x[key]` on traced arrays. Static keys are one static_slice; a key with integer
arrays or traced integers (mixed with slices, None and ... as NumPy allows) is one gather whose
index arrays are laid out as NumPy lays out the result. Traced indices past the end of an axis
raise DloopIndexError when the gather runs, naming the line; concrete ones at once."""

import builtins

import numpy as np

from ..errors import DloopIndexError, DloopTypeError
from . import ops
from ..source import user_location
from .ops import P, bind1, is_traced
from .tracer import Tracer, View, current_builder, from_library, layout_of


class _Axis:
    """A basic (sliced) axis of the key: the static positions it reads, in order."""
    __slots__ = ("positions",)

    def __init__(self, positions):
        self.positions = positions


def _is_index(k):
    return isinstance(k, (Tracer, np.ndarray, list, np.integer, int)) and \
        not isinstance(k, (bool, np.bool_))


def getitem(x, key):
    key = captured_indices(key if isinstance(key, tuple) else (key,))
    if isinstance(x, PartialIndex):
        return x.index(key)
    if not builtins.any(isinstance(k, (Tracer, np.ndarray, list)) for k in key):
        return _basic(x, key)
    entries = _entries(x, key)
    if not is_traced(*(e for e in entries if _is_index(e))) and ops._value(x) is not None:
        # Constants fold, so that a library's checks on them still run.
        out = np.asarray(ops._value(x))[key]
        return ops._constant(out) if isinstance(x, Tracer) else out
    builder = current_builder()
    if builder is not None and builder.per_element and \
            builtins.all(e is not None for e in entries) and \
            builtins.any(isinstance(e, _Axis) for e in entries):
        return PartialIndex(x, entries)
    return gather(x, entries)


def _basic(x, key):
    if ops._value(x) is not None:
        return ops._constant(ops._value(x)[key]) if isinstance(x, Tracer) else x[key]
    try:
        out_shape = np.empty(x.shape, dtype=bool)[key].shape
    except (IndexError, ValueError) as e:         # ValueError: a slice step of 0
        raise DloopIndexError(str(e), user_location()) from None
    except TypeError as e:
        raise DloopTypeError(f"unsupported index {key!r}: {e}", user_location()) from None
    return bind1(P["static_slice"], [x], {"key": key, "shape": out_shape})


def _entries(x, key):
    """One entry per axis of x (an index, or an _Axis), with None kept for new axes. Concrete
    indices are checked and made non-negative here."""
    x = ops._check_operand(x)
    shape = np.shape(x)
    used = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if builtins.sum(1 for k in key if k is Ellipsis) > 1 or used > len(shape):
        raise DloopIndexError(f"too many indices ({used}) for an array of {len(shape)} "
                              "dimensions", user_location())
    at = next((p for p, k in enumerate(key) if k is Ellipsis), None)
    if at is None:
        key, at = key + (Ellipsis,), len(key)
    key = key[:at] + (slice(None),) * (len(shape) - used) + key[at + 1:]
    entries, axis = [], 0
    for k in key:
        if k is None:
            entries.append(None)
            continue
        dim = shape[axis]
        axis += 1
        if isinstance(k, slice):
            entries.append(_Axis(np.arange(dim)[k]))
        elif _is_index(k):
            entries.append(_index(k, dim))
        else:
            raise DloopTypeError(f"unsupported index {k!r} in a key with array indices "
                                 "(integers, integer arrays, slices, None and ... are "
                                 "supported)", user_location())
    return entries


def _index(k, dim):
    k = ops._check_operand(k)
    dtype = ops.result_dtype(k)
    if not np.issubdtype(dtype, np.integer):
        raise DloopTypeError(f"array indices must be integers, got {dtype.name} (a boolean mask "
                             "selects a number of elements that is data: use xp.where)",
                             user_location())
    value = ops._value(k)
    if value is None:
        return ops.convert(k, np.int64)
    value = np.asarray(value, dtype=np.int64)
    if np.any((value < -dim) | (value >= dim)):
        raise DloopIndexError(f"an index is out of bounds for an axis of length {dim}",
                              user_location())
    return np.where(value < 0, value + dim, value)


def layout(entries):
    """The result's shape and, for each entry, the first result dimension it fills (the
    broadcast indices fill len(batch) dimensions where NumPy puts them: at the first index
    when the indices are adjacent in the key, else in front)."""
    adv = [p for p, e in enumerate(entries) if e is not None and not isinstance(e, _Axis)]
    batch = tuple(np.broadcast_shapes(*(np.shape(entries[p]) for p in adv)))
    adjacent = adv == list(range(adv[0], adv[-1] + 1)) if adv else True
    shape, where, placed = [], {}, False
    if not adjacent:
        shape, placed = list(batch), True
    for p, e in enumerate(entries):
        if p in adv:
            if not placed:
                where["batch"], placed = len(shape), True
                shape.extend(batch)
            where[p] = where.get("batch", 0)
        else:
            where[p] = len(shape)
            shape.append(1 if e is None else len(e.positions))
    return tuple(shape), where, batch


def gather(x, entries):
    """x at entries, as one gather: every axis gets an index array laid out in the result."""
    shape, where, batch = layout(entries)
    idx = []
    for p, e in enumerate(entries):
        if e is None:
            continue
        if isinstance(e, _Axis):
            grid = [1] * len(shape)
            grid[where[p]] = len(e.positions)
            idx.append(e.positions.reshape(grid))
        else:
            # Broadcasting aligns the right ends: only the result's later axes need 1s.
            after = len(shape) - where[p] - len(batch)
            idx.append(ops.reshape(e, np.shape(e) + (1,) * after) if after else e)
    if not is_traced(x, *idx):
        return np.asarray(x)[tuple(idx)]
    x = ops._check_operand(x)
    if ops.result_dtype(x).kind == "c":
        # Gathers run in kernels, which check the indices and compute in real dtypes: the
        # two parts are gathered apart.
        re, im = (bind1(P["gather"], [ops.complex_part(k, x), *idx]) for k in ("real", "imag"))
        return ops.add(ops.convert(re, x.dtype), ops.multiply(ops.convert(im, x.dtype), 1j))
    return bind1(P["gather"], [x, *idx])


def take_nd(x, key):
    """x[i0, i1, ...] with one integer index (array or scalar) per leading axis of x."""
    return getitem(x, tuple(key))


class PartialIndex(Tracer):
    """table[i, 1:3] (or table[i]) in a per-element loop body, where i holds one index per
    element: each element's row is not a per-element value, so it stays a key until it is
    indexed again (row[j] is the single gather table[i, 1 + j]) or used as an array."""
    __slots__ = ("table", "entries", "_node", "_aval")

    def __init__(self, table, entries):
        self.table, self.entries, self._node, self.view_of = table, entries, None, None
        self.version = 0
        self._aval = (layout(entries)[0], table.dtype)
        self.builder = next(a.builder for a in (table, *entries) if isinstance(a, Tracer))

    shape = property(lambda self: self._aval[0])
    dtype = property(lambda self: self._aval[1])
    ndim = property(lambda self: len(self._aval[0]))
    size = property(lambda self: int(np.prod(self._aval[0], dtype=np.int64)))

    def constant_value(self):
        return None

    def index(self, key):
        """The row's own axes are the sliced axes of the table, in order."""
        free = [p for p, e in enumerate(self.entries) if isinstance(e, _Axis)]
        if builtins.any(k is None or k is Ellipsis for k in key) or len(key) > len(free):
            return getitem(self._whole(), key)
        entries = list(self.entries)
        for p, k in zip(free, key):
            positions = entries[p].positions
            if isinstance(k, slice):
                entries[p] = _Axis(positions[k])
            elif not _is_index(k):
                return getitem(self._whole(), key)
            elif np.array_equal(positions, np.arange(len(positions))) and \
                    len(positions) == np.shape(self.table)[p]:
                entries[p] = _index(k, len(positions))
            elif not isinstance(k, Tracer):
                entries[p] = positions[_index(k, len(positions))]
            else:
                entries[p] = getitem(ops._constant(positions), (_index(k, len(positions)),))
        if builtins.any(isinstance(e, _Axis) for e in entries):
            return PartialIndex(self.table, entries)
        return gather(self.table, entries)

    def _whole(self):
        return Tracer(self.builder, self.node)

    @property
    def node(self):
        if self._node is None:
            whole = gather(self.table, self.entries)
            self.builder, self._node = whole.builder, whole.node
        return self._node

    @node.setter
    def node(self, value):
        self._node = value


def _view(x, key):
    """x[key], a view of x where NumPy's would be (basic indexing: integers, slices, None,
    ..., traced integers): an update of it writes x too (y = x[1]; y[2] = v sets x[1, 2])."""
    out = getitem(x, key)
    parts = key if isinstance(key, tuple) else (key,)
    basic = builtins.all(is_static(k) or isinstance(k, Tracer) and k.ndim == 0 and
                         k.dtype.kind in "iu" for k in parts)
    # NumPy: an element of every axis (x[i, j]) is a scalar, a copy.
    element = len(parts) == x.ndim and not builtins.any(
        isinstance(k, (slice, type(None), type(Ellipsis))) for k in parts)
    if type(out) is Tracer and out is not x and basic and not element:
        # A traced integer picks one position: any in range gives the same strides. (On an
        # axis of length 0 none is; the launch then says the index is out of bounds.)
        fixed = tuple(0 if isinstance(k, Tracer) else k for k in parts)
        try:
            layout = layout_of(x)[fixed]
        except IndexError:
            layout = layout_of(out)
        out.view_of = View(x, lambda base: getitem(base, key),
                           lambda base, view: base.__setitem__(key, view), layout)
    return out


def captured_indices(key):
    """The key with its index arrays of other libraries (dloop.vulkan arrays, torch tensors)
    captured as operands are: taken for a static key, NumPy's indexing read them, and the
    gradient of a repeated index kept one of its reads."""
    return tuple(from_library(k) for k in key)


def is_static(k):
    """An index of basic indexing known while tracing: an integer, a slice, None or ..."""
    return isinstance(k, (int, np.integer, slice, type(None), type(Ellipsis))) and \
        not isinstance(k, bool)


Tracer.__getitem__ = _view
