"""STAGE 1 — tracing: builders record ops into graphs; tracers stand for the arrays they hold.

A builder per graph being traced: the function's top level, and one per loop body, nested.
An op is recorded in the innermost builder that owns one of its operands, so work that does
not depend on a loop's carry or index is hoisted out of the loop by construction."""

import threading

import numpy as np

from ..errors import DloopAttributeError, DloopTypeError, DloopValueError
from ..ir.graph import Graph, Lit, Op, Var, new_var
from ..ir.prims import out_avals, same_eval
from ..libraries import is_foreign_array, is_vulkan_array
from ..source import user_location
from . import captured_copies
from .scalarize import complex_error


class _State(threading.local):
    def __init__(self):
        self.stack = []


_state = _State()


class Builder:
    def __init__(self, parent=None, per_element=False):
        self.parent = parent
        self.per_element = per_element    # a per-element loop's body: values are per element
        self.ops = []
        self.inputs = []
        self.captures = {}        # parent-level Var -> input Var of this builder
        self._captured_from = {}  # the reverse: input Var of this builder -> parent-level Var
        self.consts = {}          # top level only: const Var -> np.ndarray (or device array)
        # Top level only: the backend the trace runs on, whose device arrays the function
        # captures stay on the device as constants (`captured`) instead of crossing to the
        # host and back at every call: CUDA arrays on cuda, dloop.vulkan arrays on vulkan.
        self.device_backend = None
        self._const_ids = {}
        self._const_keep = []
        self.active = True

    def __enter__(self):
        if not _state.stack:
            from .interop import install
            install()
        _state.stack.append(self)
        return self

    def __exit__(self, *exc):
        _state.stack.pop()
        self.active = False

    def new_input(self, aval):
        self._real_only(aval, None)
        var = Var(aval)
        self.inputs.append(var)
        return var

    def _real_only(self, aval, src):
        """Per-element programs compute in real dtypes only (complex values run as host steps,
        on whole arrays)."""
        if self.per_element and aval.dtype.kind == "c":
            raise complex_error(aval.dtype.name, src or user_location())

    def is_ancestor_of(self, other):
        while other is not None:
            if other is self:
                return True
            other = other.parent
        return False

    def lift(self, x):
        """The Var or Lit that stands for x (a tracer, array or scalar) inside this builder."""
        if isinstance(x, Tracer):
            if x.view_of is not None:
                x.refresh()
            return self._lift_var(x.node, x.builder)
        if isinstance(x, np.generic):        # before Python's types: np.float64 is a float
            return Lit(x, x.dtype)
        if isinstance(x, (bool, int, float, complex)):
            return Lit(x, np.result_type(x))
        refuse_subclass(x, "a captured array")
        return self._lift_var(self._root().const_var(np.asarray(x)), self._root())

    def _root(self):
        b = self
        while b.parent is not None:
            b = b.parent
        return b

    def const_var(self, array):
        """The Var of a captured array: a copy of its values at its first use, since the
        program runs after the function returns. NumPy computes as each line runs, so a
        function that updates the array in place after using it (w *= 2 between x * w and
        x * w) gets a new constant for the later uses; held by reference, every use saw the
        last values (and vjp's copies of the constants came too late). Being copies, the
        constants are the trace's own: vjp's pullback may read them later as they are."""
        found = self._const_ids.get(id(array))
        if found is not None and (found[1] is array or _unchanged(array, found[1])):
            return found[0]
        original = array
        if isinstance(array, np.ndarray) and not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))
        else:
            kept = captured_copies.copy_of(array) if isinstance(array, np.ndarray) else None
            array = _copy(array) if kept is None else kept
        var = new_var(array.shape, array.dtype)
        self.consts[var] = array
        self._const_ids[id(original)] = (var, array)
        self._const_keep.append(original)     # its id stays unique while tracing
        return var

    def _lift_var(self, var, owner):
        if owner is self:
            return var
        if self.parent is None or not owner.is_ancestor_of(self.parent):
            raise DloopValueError(
                "a traced value was used outside the function or loop body that made it; "
                "return it from the loop body (as part of the carry) instead", user_location())
        outer = self.parent._lift_var(var, owner)
        inner = self.captures.get(outer)
        if inner is None:
            inner = Var(outer.aval)
            self.captures[outer] = inner
            self._captured_from[inner] = outer
        return inner

    def owner_of(self, var):
        """(builder, var there) where `var`, a value of this builder, is first defined: a
        captured value is followed out to the builder it was captured from."""
        b = self
        while True:
            outer = b._captured_from.get(var)
            if outer is None:
                return b, var
            b, var = b.parent, outer

    def drop_unused_captures(self, used_below=()):
        """Forget captures that no op of this builder (nor a capture of the builder below,
        `used_below`) reads: left behind when a loop was hoisted out of this builder."""
        read = {x for op in self.ops for x in op.inputs} | set(used_below)
        for outer in [o for o, i in self.captures.items() if i not in read]:
            del self._captured_from[self.captures.pop(outer)]
        return set(self.captures)

    def emit(self, prim, inputs, params, src):
        aval = _elementwise_aval(prim, inputs)
        outs = [Var(aval)] if aval is not None else \
            [Var(a) for a in out_avals(prim, [i.aval for i in inputs], params)]
        if self.per_element:
            for v in (*inputs, *outs):
                if v.aval.dtype.kind == "c":
                    self._real_only(v.aval, src)
        self.ops.append(Op(prim, list(inputs), outs, dict(params), src))
        return outs

    def finish(self, outputs):
        """The traced graph: declared inputs first, then captured values, in capture order."""
        outs = [self.lift(o) for o in outputs]
        return Graph(self.inputs + list(self.captures.values()), outs, self.ops)


def _elementwise_aval(prim, inputs):
    """The result's Aval of an elementwise op whose operands are of one dtype and one shape
    (or 0-d): that operand's own Aval, shared (avals are immutable), without the general
    abstract evaluation, a third of the time tracing an op took. None where the general
    rule is needed (broadcasting, tapes)."""
    if prim.abstract_eval is not same_eval or not inputs:
        return None
    found = inputs[-1].aval
    for x in inputs:
        aval = x.aval
        if aval is found:
            continue
        if aval.dtype != found.dtype or aval.is_tape:
            return None
        if not aval.shape:
            continue                    # a 0-d operand broadcasts
        if not found.shape:
            found = aval
        elif aval.shape != found.shape:
            return None
    return None if found.is_tape else found


def _copy(array):
    """A copy of a captured array; a broadcast one (np.ones_like's constant) stays a
    broadcast of a copy of the values it reads, which loops/_carry_init recognizes. A
    dloop.vulkan array is never written: it is its own copy."""
    if is_vulkan_array(array):
        return array
    if not isinstance(array, np.ndarray) or not array.size or all(array.strides):
        return array.copy()
    read = array[tuple(slice(0, 1) if s == 0 else slice(None) for s in array.strides)]
    return np.broadcast_to(read.copy(), array.shape)


def _unchanged(array, copy):
    """Whether a captured array still holds the values copied at its first use: the same
    bits, compared as unsigned integers of the item's size (35x faster than NumPy's
    array_equal with equal_nan, which every use of every captured array paid: W4's trace on
    the GPU spent 8 ms of a 15 ms gradient in it). Equal values in other bits (-0.0 and
    0.0, NaN payloads) count as a change, which costs a second constant of the same values."""
    xp = np
    if not isinstance(array, np.ndarray):
        import cupy as xp
    size = array.dtype.itemsize
    if size not in (1, 2, 4, 8) or array.dtype != copy.dtype:   # complex128, byte-swapped
        return bool(xp.array_equal(array, copy, equal_nan=array.dtype.kind in "fc"))
    if xp is np:
        return captured_copies.same_bits(array, copy)
    bits = np.dtype(f"u{size}")
    return bool((array.view(bits) == copy.view(bits)).all())


# The modules behind a tracer's NumPy and array-API protocols, which import this one: the
# package's __init__ sets them once all are loaded (an import statement inside the methods
# cost a microsecond at each of the calls NumPy makes for every function a tracer meets).
array_api = numpy_hooks = None


def current_builder():
    return _state.stack[-1] if _state.stack else None


def is_tracing():
    return bool(_state.stack)


def captured(x, where):
    """x, an array of another library that the traced function captured: a tracer of a
    constant that stays on the device where x is a device array of the backend the trace
    runs on (Builder.device_backend: a CUDA array on cuda, a dloop.vulkan array on vulkan)
    of a dtype dloop computes in; else its NumPy copy, a host constant."""
    from ..libraries import DTYPES, stays_on_device, to_input, to_numpy
    builder = current_builder()
    root = builder._root() if builder is not None else None
    if root is not None and stays_on_device(x, root.device_backend):
        array = to_input(x, root.device_backend, where)
        if array.dtype.name in DTYPES:
            return Tracer(builder, builder._lift_var(root.const_var(array), root))
    return to_numpy(x, where)


def from_library(x, where=None):
    """x as the trace takes it: an array of another library (torch, CuPy, array_api_strict,
    dloop.vulkan) `captured`; anything else (tracers, NumPy, numbers, keys) unchanged.
    where: the user's line (default: found when an array is captured)."""
    if isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float)) or \
            not is_foreign_array(x):
        return x
    return captured(x, where or user_location())


def _target_builder(args):
    target = None
    for a in args:
        if isinstance(a, Tracer):
            if not a.builder.active:
                raise DloopValueError(
                    "a traced value escaped the function or loop body that made it (stored in "
                    "a global or a closure?); return it instead", user_location())
            if target is None or target.is_ancestor_of(a.builder):
                target = a.builder
            elif not a.builder.is_ancestor_of(target):
                raise DloopValueError("values from two unrelated traces were combined",
                                      user_location())
    return target


def bind(prim, args, params=None, src=None, builder=None):
    """Record prim applied to args (tracers, arrays, scalars); return one Tracer per output."""
    params = params or {}
    builder = builder or _target_builder(args)
    if builder is None:
        raise AssertionError("bind needs at least one traced operand; fold constants before")
    src = src or user_location()
    outs = builder.emit(prim, [builder.lift(a) for a in args], params, src)
    return [Tracer(builder, v) for v in outs]


def bind1(prim, args, params=None):
    return bind(prim, args, params)[0]


_CONCRETE_HELP = ("a traced array has no concrete value while dloop traces your function. "
                  "Use dloop.while_loop / fori_loop for loops whose trip count is data, and "
                  "np.where instead of Python if/else on array values")


def refuse_subclass(x, what):
    """NumPy subclasses whose meaning np.asarray drops: a masked array's mask (its masked
    values would be computed with), np.matrix's * as a matrix product."""
    if type(x) is np.ndarray:
        return      # the usual case, before NumPy's lazy (and per-access) import of np.ma
    if isinstance(x, (np.ma.MaskedArray, np.matrix)):
        kind = "masked array" if isinstance(x, np.ma.MaskedArray) else "np.matrix"
        fix = "pass x.filled(value) or x.data" if kind == "masked array" else \
            "pass np.asarray(x) and write @ for matrix products"
        raise DloopTypeError(f"{what} is a {kind}, which dloop would read as a plain array "
                             f"(dropping what makes it one); {fix}", user_location())


class View:
    """How a tracer views its base (basic indexing, reshape, .T): derive(base) makes it from
    the base, write_back(base, view) writes it into the base; version: the base's version it
    was last made from or written to; layout: an ndarray standing for the view's strides in
    its base's memory (layout_of), which decides whether a reshape of it is a view."""
    __slots__ = ("base", "derive", "write_back", "version", "layout")

    def __init__(self, base, derive, write_back, layout):
        self.base, self.derive, self.write_back = base, derive, write_back
        self.version = base.version
        self.layout = layout


# One byte that the layouts below stand on: as_strided gives them any shape and strides, and
# only NumPy's view arithmetic (indexing, transposes, reshape without a copy) ever touches
# them, so no element of them is read.
_LAYOUT_BYTE = np.zeros(1, np.uint8)


def layout_of(x):
    """An ndarray with x's shape and its strides in the memory of the array it views, in
    NumPy's terms (a new array is C-contiguous): indexing it, transposing it or reshaping it
    with copy=False tells whether NumPy's result is a view, and with which strides. Its
    elements must never be read."""
    view = getattr(x, "view_of", None)
    if view is not None:
        return view.layout
    shape = tuple(x.shape)
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return np.lib.stride_tricks.as_strided(_LAYOUT_BYTE, shape, tuple(reversed(strides)),
                                           writeable=False)


class Tracer:
    """An array being traced, of fixed shape and dtype. Updates (x[i] = v, x += v) rebind it
    to a new traced value and count its version; view_of: a View where it is a view of
    another tracer, through which an update also writes that base, as in NumPy."""
    __slots__ = ("builder", "node", "view_of", "version")
    __array_priority__ = 1000

    def __init__(self, builder, var):
        self.builder = builder
        self.node = var
        self.view_of = None
        self.version = 0

    shape = property(lambda self: self.node.aval.shape)
    dtype = property(lambda self: self.node.aval.dtype)
    ndim = property(lambda self: len(self.node.aval.shape))
    size = property(lambda self: self.node.aval.size)

    def __repr__(self):
        return f"Tracer<{self.node.aval}>"

    def __len__(self):
        if not self.shape:
            raise DloopTypeError("len() of a 0-d array", user_location())
        return self.shape[0]

    def constant_value(self):
        """The NumPy value of a tracer that stands for a constant (xp.zeros(3), a literal),
        None for one computed from the function's arguments."""
        self.refresh()
        if isinstance(self.node, Lit):
            return np.asarray(self.node.value, self.node.aval.dtype)
        if self.builder.parent is None:          # the usual case, a value of the top level
            value = self.builder.consts.get(self.node)
            return value if isinstance(value, np.ndarray) else None
        root = self.builder._root()
        b, var = self.builder.owner_of(self.node)
        value = root.consts.get(var) if b is root else None
        # A device constant is not read on the host while tracing: it stays an array on the
        # device, traced like an argument.
        return value if isinstance(value, np.ndarray) else None

    def __bool__(self):
        value = self.constant_value()
        if value is not None:
            return bool(value)
        raise DloopTypeError(f"cannot convert a traced array to bool: {_CONCRETE_HELP}",
                             user_location())

    def __array__(self, *args, **kwargs):
        raise DloopTypeError(
            "cannot convert a traced array to a NumPy array. If you indexed a NumPy array with "
            "a traced index (table[i]), write xp.asarray(table)[i] with "
            "xp = array_api_compat.array_namespace(i); otherwise: " + _CONCRETE_HELP,
            user_location())

    def _number(convert):
        def as_number(self):
            value = self.constant_value()
            if value is not None:
                return convert(value)
            raise DloopTypeError("cannot use a traced array as a Python number: "
                                 f"{_CONCRETE_HELP}", user_location())
        return as_number

    __int__ = _number(int)
    __float__ = _number(float)
    __complex__ = _number(complex)
    __index__ = _number(lambda v: v.__index__())
    item = _number(lambda v: v.item())
    del _number

    def __iter__(self):
        # A constant's rows are known (SciPy maps int over xp.sum(xp.asarray(shapes))).
        value = self.constant_value()
        if value is not None and value.ndim:
            return iter([Tracer(self.builder, self.builder.lift(row)) for row in value])
        raise DloopTypeError("iterating over a traced array is not supported; index it or use "
                             "a loop primitive", user_location())

    def __setitem__(self, key, value):
        from .updates import updated
        self.refresh()
        self.check_updatable()
        self.rebind(updated(self, key, value))

    def __getattr__(self, name):
        """Only for names no class defines: an ndarray method dloop does not have yet. (An
        AttributeError still, so that hasattr answers False.)"""
        if name.startswith("__") or name in Tracer.__slots__:
            raise AttributeError(name)
        raise DloopAttributeError(f"traced arrays have no method or attribute '{name}' (NumPy's "
                                  f"ndarray.{name}); use the array namespace's functions "
                                  "instead (x.__array_namespace__())", user_location())

    def check_updatable(self):
        """Before an update in place: an array of an enclosing trace (the function around a
        loop body or condition being traced) cannot be, since NumPy's loop would update it
        at every iteration and the trace would update it once."""
        current = current_builder()
        if current is not None and current is not self.builder and \
                self.builder.is_ancestor_of(current):
            raise DloopValueError(
                "an array made outside this loop's body (or condition) is updated in place "
                "inside it: NumPy would update it at every iteration, a traced loop cannot. "
                "Make it part of the loop's carry and return the updated array from the body",
                user_location())

    def rebind(self, new):
        """This array, updated in place, now stands for `new`, and so does the array it is a
        view of."""
        self.builder, self.node = new.builder, new.node
        self.version += 1
        view = self.view_of
        if view is not None:
            view.write_back(view.base, self)
            view.version = view.base.version

    def refresh(self):
        """Before a read or an update: a view whose base changed since it was made is made
        again from the base, so that it reads the base's values, as NumPy's view of the same
        memory does, and an update of it writes back none of the old ones. Lazily, at the
        view's next use: an update of a base costs nothing per view."""
        # Iteratively, from the root of a chain of views down (a chain of thousands,
        # v = v[1:] in a Python loop, passed the recursion limit).
        chain, t = [], self
        while t.view_of is not None:
            chain.append(t)
            t = t.view_of.base
        for t in reversed(chain):
            view = t.view_of
            if view.version != view.base.version:
                new = view.derive(view.base)
                t.builder, t.node = new.builder, new.node
                t.version += 1
                view.version = view.base.version

    def copied(self):
        """A new array holding this one's values (NumPy's copy): updating either leaves the
        other alone."""
        self.refresh()
        return Tracer(self.builder, self.node)

    device = property(lambda self: "cpu")

    def to_device(self, device, /, *, stream=None):
        return self

    def __hash__(self):
        return id(self)

    def __array_namespace__(self, api_version=None):
        return array_api

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return numpy_hooks.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return numpy_hooks.array_function(func, args, kwargs)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch.sin(v) of a traced value (inside dloop.torch.function, where the body is
        dloop's): PyTorch would say only that v is not a Tensor."""
        name = getattr(func, "__name__", str(func))
        raise DloopTypeError(
            f"torch.{name} was called on a traced value; dloop traces NumPy and array-API "
            f"code, so write np.{name}(v), or xp = v.__array_namespace__() and "
            f"xp.{name}(v)", user_location())


class WeakTracer(Tracer):
    """A traced value standing for a Python number: a fori_loop index (the loop NumPy runs,
    `for i in range(lower, upper)`, gives Python ints), and arithmetic of such values with
    Python numbers. It promotes as a Python number does (ops.result_dtype): v + i and
    v + 0.1 * i keep a float32 v float32, where an int64 index made them float64. With
    integers it computes in its own dtype (the bounds'), as the index did before: i + 1 of an
    int32 index is int32, and an int64 index never wraps an int32 array."""
    __slots__ = ()
