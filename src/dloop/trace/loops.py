"""STAGE 1 — fori_loop and while_loop: carry checks, per-element vs uniform mode, the loop op."""

import inspect
import itertools
import warnings

import numpy as np

from .. import pytree
from ..errors import DloopTypeError, DloopValueError
from ..ir import prims
from ..ir.graph import Aval, CollectiveInfo, Graph, LoopInfo, Var
from ..libraries import DTYPES
from . import indexing, ops
from .scalarize import MixingError, invariant_uses, mixing_error, scalarize
from ..source import user_location
from .tracer import (Builder, Tracer, WeakTracer, bind, current_builder, from_library,
                     is_tracing)

_loop_ids = itertools.count()


# Loops called on concrete arrays run through the whole pipeline; api.py, a later stage,
# puts its runner here when it is imported (a trace module never imports api).
EAGER = [None]

def fori_loop(lower, upper, body_fun, init_val):
    """Loop `body_fun` from `lower` to `upper`, threading a carry::

        def fori_loop(lower, upper, body_fun, init_val):
            val = init_val
            for i in range(lower, upper):
                val = body_fun(i, val)
            return val

    Bounds are Python ints, 0-d integer arrays, or integer arrays: with array bounds, element
    j of the carry runs its own trip count `upper[j] - lower[j]` (a per-element loop), and the
    body must be elementwise in the carry. The carry (a pytree of arrays) keeps its structure,
    shapes and dtypes. Reverse mode keeps each iteration's carry on adstacks sized exactly
    from the live bounds: memory is the total number of iterations run, times the carry size.
    """
    src = user_location()
    if not is_tracing():
        return EAGER[0](lambda: fori_loop(lower, upper, body_fun, init_val),
                           [lower, upper, init_val])
    lo, hi = _bound(lower, "lower", src), _bound(upper, "upper", src)
    leaves, treedef = _carry_leaves(init_val, src)
    _check_arity(body_fun, "body_fun", "fori_loop calls body_fun(i, carry)", 2, src)
    index_dtype = np.dtype(ops.result_dtype(lo, hi))
    lo, hi = ops.convert(lo, index_dtype), ops.convert(hi, index_dtype)
    bound_shape = _broadcast([ops.shape_of(lo), ops.shape_of(hi)], "the lower and upper bounds",
                             src)
    shape = _element_shape(bound_shape, leaves, treedef, src)     # None: a collective loop
    with Builder(current_builder(), per_element=bool(bound_shape)) as child:
        i = WeakTracer(child, child.new_input(Aval(bound_shape, index_dtype)))
        carries = [Tracer(child, child.new_input(_aval(x))) for x in leaves]
        out = body_fun(i, pytree.unflatten(treedef, carries))
        body = child.finish(_check_carry_out(out, leaves, treedef, "body_fun", src))
    info_args = dict(kind="fori", shape=shape, index_dtype=index_dtype, src=src)
    return _emit_loop([lo, hi], leaves, treedef, [(body, 1 + len(leaves), child)], info_args,
                      per_element=bool(bound_shape))


def while_loop(cond_fun, body_fun, init_val, *, max_steps=None):
    """Repeat `body_fun` while `cond_fun` holds::

        def while_loop(cond_fun, body_fun, init_val):
            val = init_val
            while cond_fun(val):
                val = body_fun(val)
            return val

    `cond_fun` returns a 0-d boolean (one trip count for all elements) or a boolean array
    (element j stops on its own when cond_fun(val)[j] is False; the body must then be
    elementwise in the carry). Reverse mode counts each element's trips in a pre-pass and
    sizes the adstacks from that count.

    `max_steps` (an int, default None: no limit) truncates the loop: an element stops after
    `max_steps` iterations even where `cond_fun` still holds, and returns its carry at that
    point; the gradient is exact for that truncated computation. A loop that may never end
    for some input thus still returns (test `cond_fun(result)` afterwards to see which
    elements were cut short).
    """
    src = user_location()
    if not is_tracing():
        return EAGER[0](lambda: while_loop(cond_fun, body_fun, init_val,
                                              max_steps=max_steps), [init_val])
    _check_arity(cond_fun, "cond_fun", "while_loop calls cond_fun(carry)", 1, src)
    _check_arity(body_fun, "body_fun", "while_loop calls body_fun(carry)", 1, src)
    if max_steps is not None:
        return _truncated_while(cond_fun, body_fun, init_val, max_steps, src)
    leaves, treedef = _carry_leaves(init_val, src)
    parent = current_builder()
    with Builder(parent) as cond_b:
        carries = [Tracer(cond_b, cond_b.new_input(_aval(x))) for x in leaves]
        pred = _check_pred(cond_fun(pytree.unflatten(treedef, carries)), src)
        if any(t.version for t in carries):
            raise DloopValueError(
                "cond_fun updated the carry in place; NumPy's loop would keep that update, a "
                "traced condition cannot: compute the condition without changing the carry, "
                "and make the update in body_fun", src)
        cond = cond_b.finish([pred])
    cond_shape = ops.shape_of(pred)
    shape = _element_shape(cond_shape, leaves, treedef, src)
    with Builder(parent, per_element=bool(cond_shape)) as body_b:
        carries = [Tracer(body_b, body_b.new_input(_aval(x))) for x in leaves]
        out = body_fun(pytree.unflatten(treedef, carries))
        body = body_b.finish(_check_carry_out(out, leaves, treedef, "body_fun", src))
    info_args = dict(kind="while", shape=shape, src=src)
    return _emit_loop([], leaves, treedef,
                      [(cond, len(leaves), cond_b), (body, len(leaves), body_b)],
                      info_args, per_element=bool(cond_shape))


def _truncated_while(cond_fun, body_fun, init_val, max_steps, src):
    """while_loop with a step counter in the carry."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or \
            not 0 <= max_steps < 2 ** 63:
        raise DloopValueError(f"max_steps must be None or a non-negative int, got "
                              f"{max_steps!r}", src)
    limit = int(max_steps)
    # The counter has the condition's shape: one per element in a per-element loop. A
    # throwaway trace of cond_fun finds that shape.
    leaves, treedef = _carry_leaves(init_val, src)
    with Builder(current_builder()) as probe:
        carries = [Tracer(probe, probe.new_input(_aval(x))) for x in leaves]
        shape = ops.shape_of(_check_pred(cond_fun(pytree.unflatten(treedef, carries)), src))

    def cond(state):
        return _check_pred(cond_fun(state[0]), src) & (state[1] < limit)

    def body(state):
        return body_fun(state[0]), state[1] + 1

    return while_loop(cond, body, (init_val, np.zeros(shape, np.int64)))[0]


def _check_pred(pred, src):
    if not isinstance(pred, (Tracer, np.ndarray, np.generic, bool)) or \
            np.dtype(ops.result_dtype(pred)) != np.bool_:
        got = ops.result_dtype(pred).name if hasattr(pred, "dtype") or \
            isinstance(pred, (int, float)) else type(pred).__name__
        raise DloopTypeError(f"cond_fun must return a boolean (0-d, or a boolean array for "
                             f"per-element loops), got {got}; compare, e.g. "
                             "`err > tol`", src)
    if not isinstance(pred, Tracer):
        raise DloopTypeError(
            f"cond_fun returned the constant {type(pred).__name__} {pred!r}, not a value "
            "computed from the carry. dloop traces cond_fun once, so a Python value (or a "
            "side effect such as a counter in a closure) would decide every iteration the "
            "same way: compute the condition from the carry (e.g. `err > tol`), and carry "
            "any counter in the loop state", src)
    return pred


# Plain functions already seen to accept n positional arguments, by what decides that (the
# code object and the defaults): inspect.signature costs more than tracing a small body, and
# a loop body is usually a new closure over the same code at every call.
_ACCEPTS = set()


def _check_arity(fn, fname, how, n, src):
    """A function that cannot take the arguments the loop passes, said before it is called
    (a TypeError from inside the call would name a lambda deep in the trace)."""
    if not callable(fn):
        raise DloopTypeError(f"{fname} must be a function, got {type(fn).__name__}", src)
    key = (fn.__code__, len(fn.__defaults__ or ()), tuple(fn.__kwdefaults__ or ()), n) \
        if inspect.isfunction(fn) else None
    if key in _ACCEPTS:
        return
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return          # a builtin without a signature: let the call decide
    try:
        signature.bind(*range(n))
    except TypeError:
        raise DloopTypeError(f"{fname} takes parameters {signature}, but {how} ({n} "
                             f"positional argument{'s' if n > 1 else ''})", src) from None
    if key is not None:
        _ACCEPTS.add(key)


def _emit_loop(bounds, leaves, treedef, traced, info_args, per_element):
    """traced: [(graph, n_fixed_inputs, builder)] for (cond,) body. Emits the loop op."""
    src, shape = info_args["src"], info_args["shape"]
    if shape is None:
        return _emit_collective(bounds, leaves, treedef, traced, info_args)
    parents = list(dict.fromkeys(p for _, _, b in traced for p in b.captures))
    modes = {p: set() for p in parents}
    for graph, n_fixed, b in traced:
        inner_to_parent = {inner: p for p, inner in b.captures.items()}
        for inner, used in invariant_uses(graph, inner_to_parent).items():
            modes[inner_to_parent[inner]] |= used
    slots = [(p, m) for p in parents for m in sorted(modes[p] or {"table"})]
    try:
        scalar = [scalarize(g, n, b.captures, slots, shape) for g, n, b in traced]
    except MixingError as err:
        if per_element:
            raise mixing_error(err, per_element, src) from None
        return _emit_collective(bounds, leaves, treedef, traced, info_args)
    info = LoopInfo(loop_id=next(_loop_ids), carry_dtypes=tuple(_aval(x).dtype for x in leaves),
                    invariant_modes=tuple(m for _, m in slots), body=scalar[-1],
                    cond=scalar[0] if len(scalar) == 2 else None, **info_args)
    builder = current_builder()
    carries = [_carry_init(x, shape, builder) for x in leaves]
    invariants = [Tracer(builder, p) for p, _ in slots]
    outs = bind(prims.loop_p, list(bounds) + carries + invariants, {"info": info}, src=src,
                builder=builder)
    outs = [_unreplicate(o, ops.shape_of(x)) for o, x in zip(outs, leaves)]
    return pytree.unflatten(treedef, outs)


def _carry_init(x, shape, builder):
    """The loop's initial carry at its full shape. One value broadcast as a NumPy array
    (np.ones_like of a traced array) is traced as a broadcast of that value, which the loop's
    kernel computes, instead of an array of the full shape copied at every launch."""
    value = x.constant_value() if isinstance(x, Tracer) else x
    if isinstance(value, np.ndarray) and value.size > 1 and not any(value.strides):
        x = bind(prims.broadcast_p, [value.reshape(-1)[0]], {"shape": shape}, builder=builder)[0]
    return ops.broadcast_to(x, shape)


def _emit_collective(bounds, leaves, treedef, traced, info_args):
    """A loop whose body combines elements: run from the host, one body program per step."""
    parents = list(dict.fromkeys(p for _, _, b in traced for p in b.captures))
    graphs = []
    for graph, n_fixed, b in traced:
        inner = [b.captures.get(p) for p in parents]
        # Every graph takes every invariant, in one order; unused ones get fresh inputs.
        inputs = graph.inputs[:n_fixed] + [v if v is not None else Var(p.aval)
                                           for v, p in zip(inner, parents)]
        graphs.append(Graph(inputs, graph.outputs, graph.ops))
    info = CollectiveInfo(loop_id=next(_loop_ids), kind=info_args["kind"],
                          carry_avals=tuple(_aval(x) for x in leaves), body=graphs[-1],
                          cond=graphs[0] if len(graphs) == 2 else None,
                          index_dtype=info_args.get("index_dtype"), src=info_args["src"])
    builder, invariants = _loop_home(list(bounds) + list(leaves), parents)
    outs = bind(prims.cloop_p, list(bounds) + list(leaves) + invariants, {"info": info},
                src=info.src, builder=builder)
    return pytree.unflatten(treedef, outs)


def _loop_home(operands, captured):
    """The innermost builder owning an operand or a captured value of the loop: the loop op
    is recorded there, so a loop over loop-invariant values is hoisted out of an enclosing
    loop body like any other invariant work. Returns it and the captured values as tracers
    of it."""
    current = current_builder()
    owners = [current.owner_of(v) for v in captured]
    homes = [x.builder for x in operands if isinstance(x, Tracer)] + [b for b, _ in owners]
    target = current._root()
    for b in homes:
        if target.is_ancestor_of(b):
            target = b
    # Every owner is target or outside it, so each value can be lifted into target.
    invariants = [Tracer(target, target._lift_var(v, b)) for b, v in owners]
    used, b = (), current
    while b is not target:
        used = b.drop_unused_captures(used)
        b = b.parent
    return target, invariants


def _unreplicate(out, shape):
    """Undo the broadcast of a carry that was smaller than the element shape: every element
    computed the same value, so the first one along each broadcast axis is the answer."""
    if out.shape == tuple(shape):
        return out
    lead = len(out.shape) - len(shape)
    key = tuple(0 for _ in range(lead)) + tuple(
        slice(0, 1) if d == 1 else slice(None) for d in shape)
    return ops.reshape(indexing.getitem(out, key), shape)


def _aval(x):
    return Aval(tuple(ops.shape_of(x)), np.dtype(ops.result_dtype(x)))


def _bound(b, name, src):
    b = from_library(b, src)
    if isinstance(b, (bool, np.bool_)) or not (isinstance(b, (int, np.integer)) or (
            isinstance(b, (Tracer, np.ndarray)) and np.issubdtype(b.dtype, np.integer))):
        kind = getattr(b, "dtype", type(b).__name__)
        raise DloopTypeError(f"fori_loop's {name} bound must be an integer (Python int or "
                             f"integer array), got {kind}; convert with .astype(np.int64)", src)
    if isinstance(b, int):
        if not -2 ** 63 <= b < 2 ** 63:
            raise DloopValueError(f"fori_loop's {name} bound {b} does not fit a 64-bit "
                                  "integer; a loop runs at most 2**63 - 1 iterations", src)
        return b
    if np.dtype(b.dtype) in (np.int32, np.int64):
        return b
    # Other integer dtypes run as int64: every value of them fits, except uint64's top half.
    if isinstance(b, Tracer):
        return ops.convert(b, np.int64)
    b = np.asarray(b)
    if b.dtype == np.uint64 and b.size and int(b.max()) >= 2 ** 63:
        raise DloopValueError(f"fori_loop's {name} bound holds {int(b.max())}, which does not "
                              "fit a 64-bit signed integer; a loop runs at most 2**63 - 1 "
                              "iterations", src)
    return b.astype(np.int64)


def _carry_leaves(init, src):
    leaves, treedef = pytree.flatten(init)
    out = []
    for path, x in zip(pytree.leaf_paths(treedef), leaves):
        x = from_library(x, src)
        if isinstance(x, (bool, int, float, complex)):
            x = np.asarray(x)
        if not isinstance(x, (Tracer, np.ndarray, np.generic)):
            raise DloopTypeError(f"{path} of the initial carry is a {type(x).__name__}; carries "
                                 "must be arrays or numbers", src)
        dt = np.dtype(x.dtype)
        if dt.name not in DTYPES:
            raise DloopTypeError(f"{path} has dtype {dt.name}; supported: {', '.join(DTYPES)}",
                                 src)
        out.append(np.asarray(x) if isinstance(x, np.generic) else x)
    return out, treedef


def _broadcast(shapes, what, src):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise DloopValueError(f"the shapes of {what} do not broadcast: "
                              f"{', '.join(map(str, shapes))}", src) from None


def _element_shape(bound_shape, leaves, treedef, src):
    """The shape over which elements run their own loops: bounds and carries broadcast.
    None under scalar bounds when the carries do not broadcast together."""
    if bound_shape:
        for path, x in zip(pytree.leaf_paths(treedef), leaves):
            have = ops.shape_of(x)
            joint = _try_broadcast(have, bound_shape)
            if joint is None:
                raise DloopValueError(
                    f"per-element bounds of shape {bound_shape} do not broadcast against {path} "
                    f"of shape {have}; give them compatible shapes or use scalar bounds",
                    src)
            if joint != tuple(have):
                raise DloopValueError(
                    f"{path} has shape {have}, smaller than the per-element bounds' shape "
                    f"{bound_shape}: every element needs its own carry value; broadcast it first "
                    f"(np.broadcast_to(v, {bound_shape}))", src)
        return _broadcast([bound_shape] + [ops.shape_of(x) for x in leaves],
                          "the carry leaves and the bounds", src)
    # Scalar bounds: carries that do not broadcast together can only be a collective loop.
    return _try_broadcast(*[ops.shape_of(x) for x in leaves]) if leaves else ()


def _try_broadcast(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _check_carry_out(out, leaves, treedef, fname, src):
    out_leaves, out_td = pytree.flatten(out)
    if out_td != treedef:
        path, was, became = pytree.first_difference(treedef, out_td)
        raise DloopTypeError(f"{fname} changed the structure of the carry at {path}: it was "
                             f"{was} and became {became}; a loop carry keeps its structure",
                             src)
    checked = []
    for path, new, old in zip(pytree.leaf_paths(treedef), out_leaves, leaves):
        want = _aval(old)
        if isinstance(new, (bool, int, float, complex)):
            new = _python_scalar(new, want.dtype, path, fname, src)
        got = _aval(new)
        if got.shape != want.shape or got.dtype != want.dtype:
            raise DloopTypeError(
                f"{fname} changed {path} from {want.dtype.name}{list(want.shape)} to "
                f"{got.dtype.name}{list(got.shape)}; a loop carry keeps its shape and dtype "
                f"(cast with .astype(np.{want.dtype.name}) or fix the initial value)", src)
        checked.append(new)
    return checked


def _python_scalar(value, dtype, path, fname, src):
    """A Python number returned for a carry, as the carry's dtype, where that keeps its
    value: a float returned for an integer carry would be truncated (0.5 -> 0)."""
    kinds = {"b": (bool,), "i": (int,), "u": (int,), "f": (int, float),
             "c": (int, float, complex)}[dtype.kind]
    ok = isinstance(value, kinds) and (dtype.kind == "b" or not isinstance(value, bool))
    if ok and dtype.kind in "iu":
        ok = np.iinfo(dtype).min <= value <= np.iinfo(dtype).max
    if not ok:
        kind = "a float" if isinstance(value, float) else "a complex" \
            if isinstance(value, complex) else "a bool" if isinstance(value, bool) \
            else "a wider integer"
        try:
            with warnings.catch_warnings():     # ComplexWarning: this cast is the point
                warnings.simplefilter("ignore")
                became = f"; it would become {np.asarray(value).astype(dtype)!r}"
        except OverflowError:
            became = ", which it cannot hold"
        raise DloopTypeError(
            f"{fname} returned the Python {type(value).__name__} {value!r} for {path}, which "
            f"is {dtype.name}{became}. Return a value of dtype {dtype.name}, or make the "
            f"initial carry {kind} array",
            src)
    return np.asarray(value, dtype=dtype)
