"""STAGE 2 — the elementwise primitives, one row each. prims.py makes the primitives from these
rows, semantics.py their NumPy meaning, trace/array_api.py the array-API functions and
trace/numpy_hooks.py the ufunc table; the derivative stays in ad/rules.py. Adding a
primitive is one row here and one VJP rule."""

from dataclasses import dataclass

import numpy as np

from . import special


def _floating(fn):
    """fn on floats (complex too); integers and booleans pass through (floor of an integer is
    itself)."""
    return lambda a: fn(a) if np.issubdtype(np.asarray(a).dtype, np.inexact) else a


def _int_div(fn):
    def safe(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            out = fn(a, b)
        # Integer division by zero gives 0 (NumPy's answer), never a trap.
        return np.where(np.asarray(b) == 0, 0, out).astype(np.result_type(a, b)) \
            if np.issubdtype(np.result_type(a, b), np.integer) else out
    return safe


def _shift(fn):
    """NumPy's shifts by a count outside [0, bit width): 0 for <<, the sign (0 or -1) for
    >>, the same on every backend (C leaves them undefined)."""
    def shift(a, b):
        a, b = np.asarray(a), np.asarray(b)
        bits = a.dtype.itemsize * 8
        outside = (b < 0) | (b >= bits)
        out = fn(a, np.where(outside, bits - 1, b))
        if fn is np.left_shift:
            return np.where(outside, 0, out).astype(a.dtype)
        return out.astype(a.dtype)
    return shift


def _logic(bool_fn, int_fn):
    return lambda a, b: bool_fn(a, b) if np.asarray(a).dtype == bool else int_fn(a, b)


@dataclass(frozen=True)
class Row:
    """name: the primitive. arity: operand count. spelling: how the array-API function
    promotes its operands ('float': to a floating dtype; 'same': to their common dtype;
    'compare': common dtype, boolean result; 'bitwise': integers or booleans only).
    numpy: the reference on NumPy arrays. api: the array-API function's name (None where the
    namespace spells it differently, see trace/array_api.py). ufunc: the NumPy ufunc that
    __array_ufunc__ maps onto it. c_math: the C math library's name for float operands
    (None where a backend emits instructions instead)."""
    name: str
    arity: int
    spelling: str
    numpy: object
    api: object = None
    ufunc: object = None
    c_math: object = None
    expansion: object = None

    @property
    def float_only(self):
        return self.spelling == "float"

    @property
    def result_is_bool(self):
        return self.spelling == "compare"


def _float(name, np_fn, api=None, c_math=None, arity=1):
    api = api or name
    return Row(name, arity, "float", np_fn, api, np_fn, c_math or name)


ROWS = (
    _float("sin", np.sin), _float("cos", np.cos), _float("tan", np.tan),
    _float("asin", np.arcsin), _float("acos", np.arccos), _float("atan", np.arctan),
    _float("sinh", np.sinh), _float("cosh", np.cosh), _float("tanh", np.tanh),
    _float("asinh", np.arcsinh), _float("acosh", np.arccosh), _float("atanh", np.arctanh),
    _float("exp", np.exp), _float("expm1", np.expm1), _float("log", np.log),
    _float("log1p", np.log1p), _float("log2", np.log2), _float("log10", np.log10),
    _float("sqrt", np.sqrt),
    _float("atan2", np.arctan2, arity=2), _float("copysign", np.copysign, arity=2),
    Row("neg", 1, "same", np.negative, "negative", np.negative),
    Row("abs", 1, "same", np.abs, "abs", np.absolute, "fabs"),
    Row("sign", 1, "same", np.sign, "sign", np.sign),
    Row("floor", 1, "same", _floating(np.floor), "floor", np.floor, "floor"),
    Row("ceil", 1, "same", _floating(np.ceil), "ceil", np.ceil, "ceil"),
    Row("round", 1, "same", _floating(np.round), "round", np.rint, "roundeven"),
    Row("trunc", 1, "same", _floating(np.trunc), "trunc", np.trunc, "trunc"),
    Row("add", 2, "same", np.add, "add", np.add),
    Row("sub", 2, "same", np.subtract, "subtract", np.subtract),
    Row("mul", 2, "same", np.multiply, "multiply", np.multiply),
    Row("div", 2, "float", np.true_divide, "divide", np.true_divide),
    Row("floordiv", 2, "same", _int_div(np.floor_divide), "floor_divide", np.floor_divide),
    Row("mod", 2, "same", _int_div(np.remainder), "remainder", np.remainder, "fmod"),
    Row("pow", 2, "same", np.power, None, None, "pow"),
    Row("max", 2, "same", np.maximum, "maximum", np.maximum),
    Row("min", 2, "same", np.minimum, "minimum", np.minimum),
    Row("shl", 2, "bitwise", _shift(np.left_shift), "bitwise_left_shift", np.left_shift),
    Row("shr", 2, "bitwise", _shift(np.right_shift), "bitwise_right_shift", np.right_shift),
    Row("lt", 2, "compare", np.less, "less", np.less),
    Row("le", 2, "compare", np.less_equal, "less_equal", np.less_equal),
    Row("gt", 2, "compare", np.greater, "greater", np.greater),
    Row("ge", 2, "compare", np.greater_equal, "greater_equal", np.greater_equal),
    Row("eq", 2, "compare", np.equal, "equal", np.equal),
    Row("ne", 2, "compare", np.not_equal, "not_equal", np.not_equal),
    Row("and", 2, "bitwise", _logic(np.logical_and, np.bitwise_and), "bitwise_and",
        np.bitwise_and),
    Row("or", 2, "bitwise", _logic(np.logical_or, np.bitwise_or), "bitwise_or", np.bitwise_or),
    Row("xor", 2, "bitwise", _logic(np.logical_xor, np.bitwise_xor), "bitwise_xor",
        np.bitwise_xor),
    Row("not", 1, "bitwise",
        lambda a: np.logical_not(a) if np.asarray(a).dtype == bool else np.invert(a),
        "bitwise_invert", np.invert),
    Row("select", 3, "select", np.where),
)
# Special functions: reached through xp.special (trace/special.py), not the array API.
ROWS += tuple(Row(name, fn.__code__.co_argcount - 1, "float", None, expansion=fn)
              for name, fn in special.EXPANSIONS.items())
BY_NAME = {r.name: r for r in ROWS}
