"""STAGE 1 — the operations users reach on traced arrays, with the array API's type promotion.
Operands that are all concrete are computed at once with NumPy (constant folding)."""

import builtins

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..errors import DloopNotImplementedError, DloopTypeError, DloopValueError
from ..libraries import DTYPES, is_foreign_array
from ..ir import prims
from ..ir.graph import dtype_name
from ..ir.semantics import evaluate
from ..source import user_location
from .tracer import (Tracer, View, WeakTracer, bind1, captured, current_builder, layout_of,
                     refuse_subclass)

P = prims.REGISTRY
FLOAT64 = np.dtype(np.float64)


def is_traced(*xs):
    return builtins.any(isinstance(x, Tracer) for x in xs)


def _check_operand(x):
    if isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float, complex)):
        if type(x) is not np.ndarray and isinstance(x, np.ndarray):
            refuse_subclass(x, "a captured array")
        return x
    if is_foreign_array(x):                     # an array of another library, captured
        return captured(x, user_location())
    if hasattr(x, "__array__") or isinstance(x, (list, tuple)):
        return np.asarray(x)
    raise DloopTypeError(f"unsupported operand of type {type(x).__name__}", user_location())


def dtype_of(x):
    return x.dtype if isinstance(x, (Tracer, np.ndarray, np.generic)) else None


def shape_of(x):
    """np.shape(x), without NumPy's dispatch to a tracer's __array_function__ (a dozen
    times per loop traced)."""
    return x.shape if isinstance(x, Tracer) else np.shape(x)


# A Python number of each kind, standing for a WeakTracer in promotion.
_WEAK_AS = {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}


def result_dtype(*xs):
    """Array-API promotion; Python scalars are weak (they take the array's dtype), and so are
    WeakTracers, but integer ones only toward floating arrays: with integers (arrays or
    Python ints) they compute in their own dtype, the bounds', as the index always did."""
    if any(type(x) is WeakTracer for x in xs):
        return _weak_promotion(xs)
    strong, weak = [], []
    for x in xs:
        dtype = dtype_of(x)
        (weak if dtype is None else strong).append(x if dtype is None else dtype)
    if not strong:
        return np.result_type(*weak)
    first = strong[0]
    # The usual case, without NumPy's promotion machinery: one real floating dtype, and
    # Python bools, ints and floats, which take it.
    if first.kind == "f" and all(d == first for d in strong) and \
            all(type(w) in (bool, int, float) for w in weak):
        return first
    return np.result_type(*strong, *weak)


def _weak_promotion(xs):
    arrays = [x.dtype for x in xs if type(x) is not WeakTracer and dtype_of(x) is not None]
    floating_arrays = any(d.kind in "fc" for d in arrays)
    operands = []
    for x in xs:
        if type(x) is WeakTracer:
            kind = x.dtype.kind
            weak = kind in "fc" or floating_arrays
            operands.append(_WEAK_AS[kind] if weak else x.dtype)
        else:
            operands.append(x if dtype_of(x) is None else dtype_of(x))
    return np.result_type(*operands)


def convert(x, dtype):
    dtype = np.dtype(dtype).newbyteorder("=")     # kernels compute in native byte order
    if isinstance(x, Tracer) and dtype_name(dtype) not in DTYPES:
        raise DloopTypeError(
            f"dloop does not compute in {dtype.name} (supported: {', '.join(DTYPES)}); "
            "convert to one of these", user_location())
    if isinstance(x, Tracer):
        return x if x.dtype == dtype else _apply("convert", [x], dtype=dtype)
    if isinstance(x, (bool, int, float, complex)):
        if type(x) is int and dtype.kind in "iu" and \
                not np.iinfo(dtype).min <= x <= np.iinfo(dtype).max:
            raise DloopValueError(f"the Python integer {x} is out of range for {dtype.name}; "
                                  "make the array wider first (x.astype(np.int64))",
                                  user_location())
        return dtype.type(x)
    # No copy where the dtype is already right: an array captured by a loop body is read at
    # every op that uses it while tracing (W4: 19 copies of 65,536 elements per trace).
    return np.asarray(x).astype(dtype, copy=False)


def _constant(array):
    """A computed constant, traced like the constant operands it came from. Folding keeps
    checks on constants (if xp.any(table < 0)) answerable while tracing."""
    builder = current_builder()
    return Tracer(builder, builder.lift(np.asarray(array)))


def _value(x):
    """x's concrete value: x itself, or what a constant tracer holds; None if computed."""
    return x.constant_value() if isinstance(x, Tracer) else x


def _apply(name, args, **params):
    traced, constant = False, True
    for a in args:
        if isinstance(a, Tracer):
            traced = True
            # One operand computed from the arguments decides it: no folding.
            constant = constant and a.constant_value() is not None
    if not traced:
        return evaluate(name, [np.asarray(a) for a in args], params)
    if constant:
        return _constant(evaluate(name, [np.asarray(_value(a)) for a in args], params))
    return bind1(P[name], list(args), params)


def _floating(dtype):
    """A floating dtype (complex ones included) for dtype's values: integers become float64."""
    return dtype if np.issubdtype(dtype, np.inexact) else FLOAT64


# The array API defines these for real values only (an order, or a rounding toward one).
REAL_ONLY = {"floor", "ceil", "trunc", "atan2", "copysign", "max", "min", "floordiv", "mod",
             "lt", "le", "gt", "ge"}


def _real_only(name, dt):
    if dt.kind == "c" and name in REAL_ONLY:
        raise DloopTypeError(
            f"'{name}' is not defined for complex values ({dt.name}); apply it to a real "
            "part, an imaginary part or an absolute value (xp.real(z), xp.imag(z), "
            "xp.abs(z))", user_location())


_NOT_FOR_BOOL = {"neg": "-", "positive": "+", "sign": "sign", "sub": "-", "floordiv": "//",
                 "mod": "%", "pow": "**", "square": "square", "shl": "<<", "shr": ">>"}


def _no_bool(name, dt):
    """NumPy refuses -, + and sign of booleans, and computes //, %, **, square and shifts of
    them in int8, which dloop does not have."""
    if dt == bool and name in _NOT_FOR_BOOL:
        raise DloopTypeError(f"'{_NOT_FOR_BOOL[name]}' of boolean arrays is not supported (NumPy "
                             "refuses it or computes in int8); convert first "
                             "(x.astype(np.int32))", user_location())


def unary(name, x, float_only=False):
    x = _check_operand(x)
    dt = result_dtype(x)
    if float_only:
        dt = _floating(dt)
    _real_only(name, dt)
    _no_bool(name, dt)
    if dt.kind == "c" and name in ("abs", "sign"):
        r = complex_part("complex_abs", x)
        if name == "abs":
            return r
        # z / |z|, and 0 at 0 (NumPy's sign of a complex number).
        zero = compare("eq", r, 0)
        return where(zero, 0, divide(x, convert(where(zero, 1, r), dt)))
    return _apply(name, [convert(x, dt)])


def complex_part(name, x):
    """real, imag, conj or complex_abs of a complex x."""
    x = _check_operand(x)
    value = _value(x)
    if value is not None:
        fn = {"real": np.real, "imag": np.imag, "conj": np.conj, "complex_abs": np.abs}[name]
        out = np.asarray(fn(np.asarray(value)))
        return _constant(out) if isinstance(x, Tracer) else out
    return bind1(P[name], [x])


def _same_real_float(a, b):
    """The common operand pair, without the general promotion: two traced arrays of one real
    floating dtype, or one and a Python int or float (weak: it takes the array's dtype).
    Returns the operands as the general path would convert them, or None."""
    if type(a) is Tracer:
        dt = a.node.aval.dtype
        if dt.kind != "f":
            return None
        if type(b) is Tracer:
            return (a, b) if b.node.aval.dtype == dt else None
        return (a, dt.type(b)) if type(b) in (int, float) else None
    if type(b) is Tracer and type(a) in (int, float):
        dt = b.node.aval.dtype
        return (dt.type(a), b) if dt.kind == "f" else None
    return None


def binary(name, a, b, float_only=False):
    same = _same_real_float(a, b)
    if same is not None:          # what the general path below gives them, 7 us sooner
        return _apply(name, list(same))
    a, b = _check_operand(a), _check_operand(b)
    dt = result_dtype(a, b)
    if float_only:
        dt = _floating(dt)
    _real_only(name, dt)
    _no_bool(name, dt)
    return _apply(name, [convert(a, dt), convert(b, dt)])


def compare(name, a, b):
    same = _same_real_float(a, b)
    if same is not None:
        return _apply(name, list(same))
    a, b = _check_operand(a), _check_operand(b)
    dt = result_dtype(a, b)
    if dt.kind in "iu" and any(type(v) is int and not np.iinfo(dt).min <= v <= np.iinfo(dt).max
                               for v in (a, b)):
        # NumPy compares a Python integer out of the array's range by its value; beyond
        # int64's, every element is on one side of it.
        big = next((v for v in (a, b) if type(v) is int and not -2 ** 63 <= v < 2 ** 63), None)
        if big is not None:
            array = b if big is a else a
            above = (big > 0) == (big is b)       # array < big, read left to right
            answer = {"lt": above, "le": above, "gt": not above, "ge": not above,
                      "eq": False, "ne": True}[name]
            return broadcast_to(convert(answer, bool), shape_of(array))
        dt = np.dtype(np.int64)
    _real_only(name, dt)
    return _apply(name, [convert(a, dt), convert(b, dt)])


def logical(name, a, b=None):
    args = [_check_operand(a)] + ([] if b is None else [_check_operand(b)])
    dt = result_dtype(*args)
    if dt != bool and not np.issubdtype(dt, np.integer):
        raise DloopTypeError(f"logical/bitwise '{name}' needs boolean or integer operands, "
                             f"got {dt.name}", user_location())
    _no_bool(name, dt)
    return _apply(name, [convert(x, dt) for x in args])


def logical_op(name, a, b=None):
    """logical_and/or/xor/not: operands are read as booleans."""
    args = [convert(_check_operand(x), bool) for x in ([a] if b is None else [a, b])]
    return _apply(name, args)


def where(cond, a, b):
    cond, a, b = _check_operand(cond), _check_operand(a), _check_operand(b)
    dt = result_dtype(a, b)
    return _apply("select", [convert(cond, bool), convert(a, dt), convert(b, dt)])


def power(a, b):
    a, b = _check_operand(a), _check_operand(b)
    if dtype_of(a) == bool:
        _no_bool("pow", result_dtype(a) if isinstance(b, int) else result_dtype(a, b))
    if isinstance(b, int) and not isinstance(b, bool) and -4 <= b <= 4:
        return _small_integer_power(a, b)
    dt = result_dtype(a, b)
    if isinstance(b, (float, np.floating)) and b in (-1.0, 0.0, 0.5, 1.0, 2.0):
        # NumPy's fast paths for these scalar exponents: sqrt (-0.0 ** 0.5 is -0.0, -inf's is
        # NaN), and products; a GPU's pow is not correctly rounded where those are.
        a = convert(a, dt)
        return unary("sqrt", a) if b == 0.5 else _small_integer_power(a, int(b))
    if np.issubdtype(dt, np.integer) and is_traced(a, b):
        raise DloopNotImplementedError(
            "integer ** integer with a traced operand is supported only for a literal exponent "
            "in -4..4; convert to float first (x.astype(np.float64))", user_location())
    return _apply("pow", [convert(a, dt), convert(b, dt)])


def _small_integer_power(a, k):
    dt = result_dtype(a, k)
    if k < 0 and np.issubdtype(dt, np.integer):
        raise DloopValueError("integers to negative integer powers are not allowed",
                              user_location())
    a = convert(a, dt)
    if k == 0:          # 1 everywhere, inf and NaN included (a * 0 + 1 made those NaN)
        return broadcast_to(convert(1, dt), shape_of(a))
    out = a
    for _ in range(abs(k) - 1):
        out = multiply(out, a)
    return divide(1, out) if k < 0 else out


def add(a, b):
    return binary("add", a, b)


def subtract(a, b):
    return binary("sub", a, b)


def multiply(a, b):
    return binary("mul", a, b)


def divide(a, b):
    return binary("div", a, b, float_only=True)


def square(x):
    _no_bool("square", dtype_of(x))
    return multiply(x, x)


def clip(x, min=None, max=None, keep_dtype=False):
    """NumPy's clip (bounds promote), or with keep_dtype the array API's (x's dtype)."""
    x = _check_operand(x)
    dt = result_dtype(x)
    if min is not None:
        x = binary("max", x, min)
    if max is not None:
        x = binary("min", x, max)
    return convert(x, dt) if keep_dtype else x


def astype(x, dtype, copy=True):
    x = _check_operand(x)
    out = convert(x, dtype)
    if copy and out is x:
        # A copy is a new object, so that an in-place update of it leaves x alone.
        return out.copied() if isinstance(out, Tracer) else np.array(out)
    return out


def broadcast_to(x, shape):
    x = _check_operand(x)
    shape = tuple(int(d) for d in shape)
    have = tuple(shape_of(x))
    # NumPy's rule, without np.broadcast_shapes (a few microseconds, at every ones_like).
    lead = len(shape) - len(have)
    if lead < 0 or builtins.any(s < 0 for s in shape) or builtins.any(
            d not in (1, s) for d, s in zip(have, shape[lead:])):
        raise DloopValueError(f"cannot broadcast shape {have} to {shape}", user_location())
    if not isinstance(x, Tracer):
        return np.broadcast_to(x, shape)
    return x if x.shape == shape else bind1(P["broadcast_to"], [x], {"shape": shape})


# ---- reductions (outside loops: how a loss is formed) ----

def _axes(x, axis):
    nd = len(shape_of(x))
    if axis is None:
        return tuple(range(nd))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    try:
        return tuple(sorted(normalize_axis_tuple(axes, nd)))
    except Exception:
        raise DloopValueError(f"axis {axis} is out of range for an array of {nd} dimensions",
                              user_location()) from None


def _reduce(op, x, axis, keepdims, dtype=None):
    x = _check_operand(x)
    if dtype is not None:
        x = convert(x, dtype)
    elif op in ("sum", "prod") and (x.dtype == bool or np.issubdtype(x.dtype, np.integer)):
        x = convert(x, np.int64)
    axes = _axes(x, axis)
    _real_only(op, result_dtype(x))
    if _value(x) is not None:
        fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[op]
        out = fn(_value(x), axis=axes, keepdims=keepdims)
        return _constant(out) if isinstance(x, Tracer) else out
    if op in ("max", "min") and builtins.any(x.shape[a] == 0 for a in axes):
        raise DloopValueError(f"{op} of an empty array has no identity", user_location())
    out = bind1(P["reduce"], [x], {"op": op, "axes": axes})
    if keepdims:
        shape = tuple(1 if k in axes else d for k, d in enumerate(x.shape))
        out = reshape(out, shape)
    return out


def sum(x, axis=None, dtype=None, keepdims=False):
    return _reduce("sum", x, axis, keepdims, dtype)


def prod(x, axis=None, dtype=None, keepdims=False):
    return _reduce("prod", x, axis, keepdims, dtype)


def max(x, axis=None, keepdims=False):
    return _reduce("max", x, axis, keepdims)


def min(x, axis=None, keepdims=False):
    return _reduce("min", x, axis, keepdims)


def mean(x, axis=None, keepdims=False, dtype=None):
    x = _check_operand(x)
    x = convert(x, dtype or _floating(result_dtype(x)))
    count = int(np.prod([np.shape(x)[a] for a in _axes(x, axis)], dtype=np.int64))
    # An integer dtype: NumPy sums in it, divides, and truncates back to it.
    return convert(divide(sum(x, axis=axis, keepdims=keepdims), count), result_dtype(x))


def reshape(x, shape, copy=None):
    """A view of x (an update of it writes x, as NumPy's reshape of a contiguous array does);
    with copy=True, a new array."""
    x = _check_operand(x)
    try:
        shape = np.empty(np.shape(x), dtype=bool).reshape(shape).shape
    except (ValueError, TypeError) as e:
        raise DloopValueError(f"cannot reshape {np.shape(x)} to {shape}: {e}",
                              user_location()) from None
    if not isinstance(x, Tracer):
        return np.reshape(x, shape, copy=copy)
    if copy:
        return x.copied() if x.shape == shape else \
            bind1(P["reshape"], [x], {"shape": shape})
    if x.shape == shape:
        return x
    try:
        layout = layout_of(x).reshape(shape, copy=False)
    except ValueError:
        # A transposed or strided view whose elements no strides can step through in the new
        # shape: NumPy copies (and copy=False is its error).
        if copy is False:
            raise DloopValueError(f"reshape(copy=False) of this {np.shape(x)} array to {shape} "
                                  "needs a copy (NumPy's error too): it is a transposed or "
                                  "strided view; leave copy at None", user_location()) from None
        return bind1(P["reshape"], [x], {"shape": shape})
    return _viewed(x, lambda base: bind1(P["reshape"], [base], {"shape": shape}),
                   lambda base, v: base.__setitem__(Ellipsis, reshape(v, base.shape)), layout)


def permute_dims(x, axes):
    x = _check_operand(x)
    axes = tuple(int(a) for a in axes)
    if not isinstance(x, Tracer):
        return np.transpose(x, axes)
    if sorted(axes) != list(range(x.ndim)):
        raise DloopValueError(f"axes {axes} are not a permutation of {x.ndim} axes",
                              user_location())
    if axes == tuple(range(x.ndim)):
        return x
    inverse = tuple(int(k) for k in np.argsort(axes))
    return _viewed(x, lambda base: bind1(P["transpose"], [base], {"axes": axes}),  # as NumPy
                   lambda base, v: base.__setitem__(Ellipsis, permute_dims(v, inverse)),
                   layout_of(x).transpose(axes))


def transpose(x):
    return permute_dims(x, tuple(reversed(range(np.ndim(x)))))


def _install_operators():
    def rop(fn):
        return lambda self, other: fn(other, self)

    table = {
        "__add__": add, "__radd__": rop(add), "__sub__": subtract, "__rsub__": rop(subtract),
        "__mul__": multiply, "__rmul__": rop(multiply), "__truediv__": divide,
        "__rtruediv__": rop(divide),
        "__floordiv__": lambda a, b: binary("floordiv", a, b),
        "__rfloordiv__": lambda a, b: binary("floordiv", b, a),
        "__mod__": lambda a, b: binary("mod", a, b), "__rmod__": lambda a, b: binary("mod", b, a),
        "__pow__": power, "__rpow__": rop(power),
        "__neg__": lambda a: unary("neg", a), "__pos__": positive,
        "__abs__": lambda a: unary("abs", a),
        "__lt__": lambda a, b: compare("lt", a, b), "__le__": lambda a, b: compare("le", a, b),
        "__gt__": lambda a, b: compare("gt", a, b), "__ge__": lambda a, b: compare("ge", a, b),
        "__eq__": lambda a, b: compare("eq", a, b), "__ne__": lambda a, b: compare("ne", a, b),
        "__and__": lambda a, b: logical("and", a, b), "__rand__": lambda a, b: logical("and", b, a),
        "__or__": lambda a, b: logical("or", a, b), "__ror__": lambda a, b: logical("or", b, a),
        "__xor__": lambda a, b: logical("xor", a, b), "__rxor__": lambda a, b: logical("xor", b, a),
        "__lshift__": lambda a, b: logical("shl", a, b),
        "__rlshift__": lambda a, b: logical("shl", b, a),
        "__rshift__": lambda a, b: logical("shr", a, b),
        "__rrshift__": lambda a, b: logical("shr", b, a),
        "__divmod__": lambda a, b: (binary("floordiv", a, b), binary("mod", a, b)),
        "__rdivmod__": lambda a, b: (binary("floordiv", b, a), binary("mod", b, a)),
        "__invert__": lambda a: logical("not", a),
        "sum": sum, "mean": mean, "max": max, "min": min, "prod": prod, "astype": astype,
        "reshape": _reshape_method, "transpose": _transpose_method,
    }
    for name, symbol in (("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"),
                         ("floordiv", "//"), ("mod", "%"), ("pow", "**"), ("and", "&"),
                         ("or", "|"), ("xor", "^"), ("lshift", "<<"), ("rshift", ">>")):
        table[f"__i{name}__"] = _in_place(symbol, table[f"__{name}__"])
    for name, fn in table.items():
        if name in ("__pow__", "__rpow__"):      # the only operators with shortcuts (x ** 1)
            fn = _new_array(fn)
        setattr(Tracer, name, fn)
    # __matmul__ is installed with the array methods (arrays.py), after this.
    Tracer.__imatmul__ = _in_place("@", lambda a, b: a.__matmul__(b))
    Tracer.T = property(transpose)
    for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
                 "lshift", "rshift", "divmod"):
        for side in ("", "r"):
            setattr(WeakTracer, f"__{side}{name}__", _weak(getattr(Tracer, f"__{side}{name}__")))
        if name != "divmod":
            # i += 1 rebinds the name, as for a Python int: another name bound to the index
            # (j = i; j += 1) keeps its value.
            setattr(WeakTracer, f"__i{name}__", getattr(WeakTracer, f"__{name}__"))
    for name in ("neg", "pos", "abs", "invert", "lt", "le", "gt", "ge", "eq", "ne"):
        setattr(WeakTracer, f"__{name}__", _weak(getattr(Tracer, f"__{name}__")))


def _weak(operator):
    """A Python operator of a WeakTracer: where the other operand is a Python number too,
    the result stands for one (i * 0.1 is a Python float in the loop NumPy runs), where NumPy's
    functions (np.sin(i)) give NumPy scalars, which are not weak."""
    def apply(*operands):
        out = operator(*operands)
        # Python's own numbers only: np.float64 subclasses float, but i * np.float64(0.5) is
        # a NumPy float64 in NumPy's loop, as np.float64(0.5) * i is here.
        if all(type(x) is WeakTracer or type(x) in (bool, int, float, complex)
               for x in operands):
            if isinstance(out, tuple):                       # divmod
                return tuple(WeakTracer(o.builder, o.node) if isinstance(o, Tracer) else o
                             for o in out)
            if isinstance(out, Tracer):
                return WeakTracer(out.builder, out.node)
        return out
    return apply


def positive(a):
    """+a: a copy, as in NumPy (an update of it leaves a alone)."""
    _no_bool("positive", a.dtype)
    return a.copied()


def _in_place(symbol, fn):
    """x op= y: NumPy's in-place update, seen by every name bound to x and by the array x is
    a view of; the result is cast to x's dtype where NumPy's same-kind rule allows."""
    def update(self, other):
        self.refresh()
        self.check_updatable()
        new = fn(self, other)
        dt = result_dtype(new)
        if dt != self.dtype and not np.can_cast(dt, self.dtype, "same_kind"):
            raise DloopTypeError(f"x {symbol}= y: the result's dtype {dt} cannot be cast to x's "
                                 f"{self.dtype} (NumPy's same-kind rule); write x = x op y "
                                 "for a new array", user_location())
        if shape_of(new) != self.shape:
            raise DloopValueError(f"x {symbol}= y: the result's shape {shape_of(new)} is not x's "
                                  f"{self.shape}", user_location())
        self.rebind(convert(new, self.dtype))
        return self
    return update


def strong(out):
    """A NumPy function's result: a NumPy value, not weak, even where the function returned
    a WeakTracer itself (np.reshape(i, ()), xp.asarray(i): NumPy's are 0-d int64 arrays)."""
    return Tracer(out.builder, out.node) if type(out) is WeakTracer else out


def distinct(out, inputs):
    """NumPy's operators and functions return new arrays: where a shortcut returned an input
    itself (x ** 1, clip without bounds) or the implementation's last step was a view
    (np.tile's reshape), the result is a new tracer, so that an update of it (out += 1)
    leaves the input alone."""
    out = strong(out)
    if type(out) is not Tracer:
        return out
    if out.view_of is not None:                  # nor a view its implementation made
        return out.copied()
    for a in inputs:
        if a is out:
            return out.copied()
    return out


def _new_array(fn):
    return lambda *args: distinct(fn(*args), args)


def _viewed(base, derive, write_back, layout):
    """derive(base), a view of base with strides `layout` (layout_of): an update of it
    writes base back."""
    view = derive(base)
    view.view_of = View(base, derive, write_back, layout)
    return view


def _reshape_method(self, *shape, order="C", copy=None):
    from .numpy_functions import reshape as ordered_reshape   # numpy_functions imports ops
    return ordered_reshape(self, shape[0] if len(shape) == 1 else shape, order, copy=copy)


def _transpose_method(self, *axes):
    """x.transpose(), x.transpose(1, 0, 2), x.transpose((1, 0, 2)), x.T."""
    axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)) else axes
    if axes in ((), None):
        return transpose(self)
    return permute_dims(self, [a % builtins.max(self.ndim, 1) for a in axes])


def install_methods(methods):
    """NumPy's array methods beyond the operators, from the modules that implement them."""
    for name, fn in methods.items():
        setattr(Tracer, name, fn)


_install_operators()

