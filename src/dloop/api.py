"""The transformations users call: flatten -> trace -> (autodiff) -> schedule -> run."""

import collections
import functools
import os
import threading
import weakref

import array_api_compat
import numpy as np

from . import libraries, pytree
from .ad.seeds import seeded
from .ad.vjp import vjp_graph
from .adstack import native
from .backends.base import get_backend
from .config import config
from .errors import (DloopError, DloopIndexError, DloopNotImplementedError, DloopTypeError,
                     DloopValueError)
from .ir.graph import Aval, Graph, Var, dtype_name, pruned
from .ir.printer import canonical_text
from .ir.verify import check_graph
from .kernel.schedule import schedule
from .runtime.execute import Execution
from .runtime.program import compile_program
from .source import raised_inside, user_location
from .trace import loops
from .trace.tracer import Builder, Tracer, from_library, is_tracing, refuse_subclass

_last_backend = [None]


def _as_input(x, path, where, backend=None):
    """backend: the call's backend name, where device arrays on it stay there (None: every
    array to NumPy)."""
    if isinstance(x, (bool, int, float, complex, np.generic, np.ndarray)) or \
            array_api_compat.is_array_api_obj(x) or libraries.is_vulkan_array(x):
        refuse_subclass(x, path)
        return _supported(libraries.to_input(x, backend, where), path, where)
    raise DloopTypeError(f"{path} is a {type(x).__name__}, not an array or number", where)


def _supported(array, path, where):
    """Smaller integer dtypes widen to int64 (every value fits, but uint64's top half)."""
    dtype = array.dtype
    if not getattr(dtype, "isnative", True):    # '>f8': kernels read native byte order
        array = array.astype(dtype.newbyteorder("="))
        dtype = array.dtype
    if dtype_name(dtype) in libraries.DTYPES:
        return array
    if dtype.kind in "iu" and (dtype != np.uint64 or not array.size or
                               int(array.max()) < 2 ** 63):
        return array.astype(np.int64)
    fix = "convert it with .astype(np.float32) or .astype(np.float64)" if dtype.kind == "f" \
        else "convert it with .astype(np.complex64) or .astype(np.complex128)" \
        if dtype.kind == "c" else "convert it to one of these"
    raise DloopTypeError(f"{path} has dtype {dtype.name}, which dloop does not compute in "
                         f"(supported: {', '.join(libraries.DTYPES)}, and smaller integers); "
                         f"{fix}", where)


def _check_fun(fun, name, where):
    if not callable(fun):
        raise DloopTypeError(f"{name} needs a function as its first argument, got "
                             f"{type(fun).__name__} {fun!r}", where)


def _no_nesting(name, where):
    if is_tracing():
        raise DloopNotImplementedError(
            f"{name} inside a function that dloop is already tracing (grad of grad, or grad / "
            "vjp inside jit or inside a loop body) is not supported yet: apply it outside, to "
            "the whole function", where)


class _Library:
    """Converts a call's results back to the library its arguments came from."""

    def __init__(self, leaves, where):
        self.name, self.example = libraries.common_library(leaves, where)
        self.backend = config.backend or libraries.default_backend(self.example)

    def out(self, tree):
        leaves, td = pytree.flatten(tree)
        return pytree.unflatten(td, [libraries.from_numpy(x, self.name, self.example)
                                     for x in leaves])


def _backend(library=None):
    backend = get_backend(library.backend if library else config.backend or "cpu")
    _last_backend[0] = backend
    return backend


def _trace(fn, args, where):
    treedef, library, arrays = _inputs(args, where)
    return _trace_inputs(fn, treedef, library, arrays, where)


def _inputs(args, where):
    leaves, treedef = pytree.flatten(list(args))
    library = _Library(leaves, where)
    paths = pytree.leaf_paths(treedef, "args")
    return treedef, library, [_as_input(x, p, where, library.backend)
                              for x, p in zip(leaves, paths)]


def _trace_inputs(fn, treedef, library, arrays, where):
    with Builder() as b:
        b.device_backend = library.backend
        tracers = [Tracer(b, b.new_input(Aval(a.shape, a.dtype))) for a in arrays]
        try:
            out = fn(*pytree.unflatten(treedef, tracers))
        except (TypeError, ValueError, IndexError) as e:
            if isinstance(e, DloopError) or (line := raised_inside(e.__traceback__)) is None:
                raise
            cls = DloopIndexError if isinstance(e, IndexError) else DloopTypeError \
                if isinstance(e, TypeError) else DloopValueError
            raise cls(f"{type(e).__name__}: {e} (raised inside dloop's implementation for the "
                      "arguments given here; where NumPy accepts them, please report it)",
                      line) from e
        out_leaves, out_td = pytree.flatten(out)
        # An array of another library returned as it is (a captured dloop.vulkan array as
        # aux) is a constant of the trace, as a NumPy array returned is.
        out_leaves = [from_library(x, where) for x in out_leaves]
        for p, x in zip(pytree.leaf_paths(out_td, "output"), out_leaves):
            if not isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float)):
                raise DloopTypeError(f"{p} of the function's result is a {type(x).__name__}, "
                                     "not an array", where)
        graph = b.finish(out_leaves)
    if config.debug:
        print(f"dloop: traced graph\n{graph}")
    return graph, b.consts, arrays, out_td, library


class _Traces:
    """retrace=False: one function's traces, each kept under its arguments' signature (their
    structure, shapes and dtypes, library and backend) with the program it ran, so that a
    call with the same signature runs that program without calling the function (as
    jax.jit does). Bounded: the least recently used signature is traced again."""
    SIZE = 32

    def __init__(self):
        self.entries = collections.OrderedDict()
        self.lock = threading.Lock()
        _ALL_TRACES.add(self)

    def prepared(self, fn, args, where):
        """(graph, consts, arrays, out_td, library, kept): `kept` is the signature's record,
        where _run keeps the program."""
        treedef, library, arrays = _inputs(args, where)
        # The device too: constants a trace captured on one GPU stay there.
        device = getattr(library.example, "device", None)
        key = (treedef, library.name, library.backend, str(device),
               tuple((a.shape, a.dtype) for a in arrays))
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None:
                self.entries.move_to_end(key)
        if entry is None:
            graph, consts, _, out_td, _ = _trace_inputs(fn, treedef, library, arrays, where)
            entry = (graph, consts, out_td, {})
            with self.lock:
                self.entries[key] = entry
                if len(self.entries) > self.SIZE:
                    self.entries.popitem(last=False)
        graph, consts, out_td, kept = entry
        return graph, consts, arrays, out_td, library, kept


def _prepared(fn, args, where, traces):
    if traces is None:
        return (*_trace(fn, args, where), None)
    return traces.prepared(fn, args, where)


_PROGRAMS = collections.OrderedDict()     # canonical trace text -> (executable, constant vars)
_PROGRAM_CACHE_SIZE = 256
_PROGRAMS_LOCK = threading.Lock()
_ALL_TRACES = weakref.WeakSet()           # every _Traces, for _locks_after_fork


def _locks_after_fork():
    """A lock that another thread of the parent held at the fork (storing a program it had
    just compiled, say) stays held in the child, whose next call would wait for it forever:
    the child starts with fresh ones. Each guards single dict operations, so what it guards
    is whole."""
    global _PROGRAMS_LOCK
    _PROGRAMS_LOCK = threading.Lock()
    for traces in list(_ALL_TRACES):
        traces.lock = threading.Lock()


os.register_at_fork(after_in_child=_locks_after_fork)


def _run(graph, consts, args, transform=None, kind="jit", library=None, kept=None):
    """Run `graph` (after `transform`, e.g. its VJP) on the backend. The scheduled and compiled
    program is kept under the trace's canonical text: a later call with the same text, the
    usual case in a loop over calls, only retraces, then runs. `kept`: a kept trace's record
    (retrace=False), which holds its program and constants after the first run."""
    backend = _backend(library)
    # A call on dloop.vulkan arrays leaves its results on the device; others get NumPy's.
    to_host = library is None or library.name != libraries.VULKAN
    if kept is not None and kind in kept:
        program, values = kept[kind]
        return _unkept(Execution(backend).run(program, args, consts=values, to_host=to_host),
                       values)
    text, order = canonical_text(graph, consts)
    key = (kind, backend.name, text)
    with _PROGRAMS_LOCK:
        entry = _PROGRAMS.get(key)
        if entry is not None:
            _PROGRAMS.move_to_end(key)
    if entry is None:
        final = transform(graph) if transform else graph
        check_graph(final, consts)
        if config.debug and transform:
            print(f"dloop: transformed graph\n{final}")
        split = backend.caps.max_loop_trips is not None
        entry = (compile_program(schedule(final, {}, split_sweeps=split), backend), order)
        with _PROGRAMS_LOCK:
            _PROGRAMS[key] = entry
            if len(_PROGRAMS) > _PROGRAM_CACHE_SIZE:
                _PROGRAMS.popitem(last=False)
    program, cached_order = entry
    values = {cached: consts[new] for cached, new in zip(cached_order, order)}
    results = Execution(backend).run(program, args, consts=values, to_host=to_host)
    if kept is None:
        return results
    kept[kind] = (program, values)
    return _unkept(results, values)


def _unkept(results, values):
    """The results, each copied where it is (or is a view of) a kept trace's constant
    (np.zeros(3) returned, or a captured array): later calls return that constant again,
    so the caller's in-place update of this call's result must not reach it."""
    constants = list(values.values())
    return [_private(r, constants) for r in results]


def run_eagerly(thunk, operands):
    """fori_loop / while_loop called on concrete arrays: trace the call alone and run it;
    the results are arrays of the operands' library."""
    where = user_location()
    library = _Library(pytree.flatten(operands)[0], where)
    # Traced for the operands' backend: device operands (CuPy, dloop.vulkan) stay there.
    treedef, _, arrays = _inputs([], where)
    graph, consts, _, out_td, _ = _trace_inputs(thunk, treedef, library, arrays, where)
    return library.out(pytree.unflatten(out_td, _run(graph, consts, [], library=library)))



loops.EAGER[0] = run_eagerly


def _host_helpers(ir_text, signatures):
    """Host sizing's compiled loops (adstack/native.py), built by the cpu backend's LLVM: its
    module (and llvmlite) is imported at the first sizing, not with dloop."""
    from .backends.cpu.launch import host_helpers
    return host_helpers(ir_text, signatures)


native.COMPILER[0] = _host_helpers


def _no_keywords(kwargs):
    """Keyword arguments would need their own place in the trace's inputs and the program
    cache's key; binding them first is explicit about which are constants."""
    if kwargs:
        raise DloopTypeError(
            f"keyword arguments ({', '.join(kwargs)}) are not supported by dloop-transformed "
            "functions; pass them positionally, or bind them with functools.partial",
            user_location())


def _traces(retrace, name, where):
    if retrace is True:
        return None
    if retrace is False:
        return _Traces()
    raise DloopTypeError(f"{name}'s retrace must be True or False, got {retrace!r}", where)


def jit(fun, *, retrace=True):
    """The compiled forward path of `fun`, without differentiation. Inside a function that
    dloop is tracing, a jitted function is simply called: its operations join that trace.
    retrace=False: trace `fun` once per argument signature, as jax.jit does (docs/guide.md,
    "Tracing once")."""
    where = user_location()
    _check_fun(fun, "jit", where)
    traces = _traces(retrace, "jit", where)

    @functools.wraps(fun)
    def jitted(*args, **kwargs):
        if is_tracing():
            return fun(*args, **kwargs)
        _no_keywords(kwargs)
        where = user_location()
        graph, consts, arrays, out_td, library, kept = _prepared(fun, args, where, traces)
        return library.out(pytree.unflatten(out_td, _run(graph, consts, arrays,
                                                         library=library, kept=kept)))
    return jitted


def _plain_argnums(argnums):
    """NumPy integers as Python ints (argnums=np.int64(1), as from np.arange)."""
    if isinstance(argnums, np.integer):
        return int(argnums)
    if isinstance(argnums, (tuple, list)):
        return tuple(int(k) if isinstance(k, np.integer) else k for k in argnums)
    return argnums


def _check_argnums(argnums, where):
    nums = (argnums,) if isinstance(argnums, int) else argnums
    if not isinstance(nums, (tuple, list)) or not nums or \
            any(isinstance(k, bool) or not isinstance(k, int) for k in nums):
        raise DloopTypeError(f"argnums must be an int or a non-empty tuple of ints (positions "
                             f"of the arguments to differentiate), got {argnums!r}", where)


def _argnums(argnums, nargs, where):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for k in nums:
        if not -nargs <= k < nargs:
            raise DloopValueError(f"argnums {argnums!r} does not fit a call with {nargs} "
                                  "positional arguments", where)
    return tuple(k % nargs for k in nums)


def _diff_inputs(args, nums, where, leave_out="leave this argument out of argnums"):
    """Positions, among the flattened arguments, of the leaves being differentiated."""
    positions, offset = {}, 0
    for k, a in enumerate(args):
        leaves, td = pytree.flatten(a)
        if k in nums:
            for j, x in enumerate(leaves):
                # A NumPy or CuPy array of floats says it by its dtype (the call refuses
                # float16 or a subclass); anything else is converted as the call will convert
                # it, which refuses an unsupported dtype or a non-array with its own error.
                dtype = getattr(x, "dtype", None)
                if isinstance(dtype, np.dtype) and dtype.kind in "fc":
                    continue
                path = pytree.leaf_paths(td, f"args[{k}]")[j]
                dtype = _as_input(x, path, where).dtype
                if dtype.kind not in "fc":
                    raise DloopTypeError(
                        f"cannot differentiate with respect to {path}: its dtype is "
                        f"{dtype.name}, and gradients need float or complex inputs (pass "
                        f"float values, or {leave_out})", where)
            positions[k] = (offset, len(leaves), td)
        offset += len(leaves)
    return positions


def _check_loss(graph, where):
    out = graph.outputs[0]
    aval = out.aval
    if aval.dtype.kind == "c":
        raise DloopTypeError(
            f"grad needs a real scalar loss, but the function returns a complex value "
            f"({aval.dtype.name}), whose gradient is not defined; take a real part or an "
            "absolute value first (xp.real(z), xp.abs(z) ** 2)", where)
    if aval.shape != () or not np.issubdtype(aval.dtype, np.floating):
        raise DloopTypeError(
            f"grad needs a function that returns a 0-d float array (a scalar loss), got "
            f"{aval.dtype.name} of shape {aval.shape}; reduce it, e.g. with .sum()", where)


def value_and_grad(fun, argnums=0, has_aux=False, *, retrace=True):
    """A function returning (fun(*args), gradient of fun with respect to args[argnums]).
    retrace=False: as for jit."""
    return _value_and_grad(fun, argnums, has_aux, "value_and_grad", retrace)


def _value_and_grad(fun, argnums, has_aux, name, retrace):
    where = user_location()
    _check_fun(fun, name, where)
    argnums = _plain_argnums(argnums)
    _check_argnums(argnums, where)
    traces = _traces(retrace, name, where)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        _no_keywords(kwargs)
        where = user_location()
        _no_nesting(name, where)
        nums = _argnums(argnums, len(args), where)
        positions = _diff_inputs(args, nums, where)
        graph, consts, arrays, out_td, library, kept = _prepared(fun, args, where, traces)
        _check_aux(out_td, has_aux, name, where)
        _check_loss(graph, where)
        wrt = [p for k in nums for p in range(positions[k][0], sum(positions[k][:2]))]
        # grad discards the loss's value, so its program does not compute what only the
        # value needs (W1's final sum: on a GPU, a read of the whole carry to the host).
        dropped = 1 if name == "grad" else 0

        def transform(g):
            joint = seeded(vjp_graph(g, wrt), len(g.inputs))
            return pruned(joint, joint.outputs[dropped:])
        results = _run(graph, consts, arrays, transform,
                       kind=("grad", tuple(wrt), dropped), library=library, kept=kept)
        n_out = len(graph.outputs)
        results = results[:n_out - dropped] + _distinct(
            results[n_out - dropped:], results[:n_out - dropped] + arrays + list(consts.values()))
        value = pytree.unflatten(out_td, [None] * dropped + results[:n_out - dropped])
        grads, cursor = [], n_out - dropped
        for k in nums:
            _, count, td = positions[k]
            grads.append(pytree.unflatten(td, results[cursor:cursor + count]))
            cursor += count
        grads = grads[0] if isinstance(argnums, int) else tuple(grads)
        return library.out(value), library.out(grads)
    return wrapped


def _check_aux(out_td, has_aux, name, where):
    pair = out_td.kind in ("tuple", "list") and len(out_td.children) == 2
    if has_aux and not pair:
        raise DloopTypeError(f"with has_aux=True the function must return a pair (output, "
                             f"aux), but it returned a {out_td.kind}", where)
    if not has_aux and name != "vjp" and out_td.kind != "leaf":
        raise DloopTypeError(
            f"{name} needs a function that returns one scalar loss, but it returned a "
            f"{out_td.kind} of {out_td.num_leaves} arrays; to return (loss, aux), pass "
            f"has_aux=True (the result is then {_AUX_RESULT[name]})", where)


_AUX_RESULT = {"grad": "(grad, aux)", "value_and_grad": "((loss, aux), grad)"}


def grad(fun, argnums=0, has_aux=False, *, retrace=True):
    """The gradient of a scalar-valued `fun` with respect to args[argnums]. retrace=False:
    as for jit."""
    vg = _value_and_grad(fun, argnums, has_aux, "grad", retrace)

    @functools.wraps(fun)
    def g(*args, **kwargs):
        value, grads = vg(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads
    return g


def vjp(fun, *primals, has_aux=False):
    """(fun(*primals), f_vjp): f_vjp(cotangent) returns one cotangent per primal, as a tuple.
    The forward sweep runs now; its tapes stay alive for as long as f_vjp does."""
    where = user_location()
    _check_fun(fun, "vjp", where)
    _no_nesting("vjp", where)
    positions = _diff_inputs(primals, range(len(primals)), where,
                             "pass it to f through a closure or functools.partial instead of "
                             "as a primal: vjp differentiates every primal")
    graph, consts, arrays, out_td, library = _trace(fun, primals, where)
    n_main = len(graph.outputs)
    _check_aux(out_td, has_aux, "vjp", where)
    if has_aux:
        main_td, aux_td = out_td.children
        n_main = main_td.num_leaves
    for o in graph.outputs[:n_main]:
        if not np.issubdtype(o.aval.dtype, np.inexact):
            raise DloopTypeError(f"vjp needs float or complex outputs, got "
                                 f"{o.aval.dtype.name}", where)
    joint = vjp_graph(Graph(graph.inputs, graph.outputs[:n_main], graph.ops),
                      list(range(len(arrays))))
    check_graph(joint, consts)
    fwd, bwd, residuals = _split(joint, n_main, len(graph.inputs))
    aux_graph = Graph(graph.inputs, graph.outputs[n_main:], [])
    backend = _backend(library)
    execution = Execution(backend)
    # The pullback runs later, reading its residuals and constants then: copies, so that
    # the caller changing an input in place meanwhile (an optimizer's x -= step) does not
    # change the gradient (it did, silently). The constants are the trace's own copies of
    # the captured arrays already (Builder.const_var).
    arrays = [_snapshot(a) for a in arrays]
    fwd_out = execution.run(compile_program(schedule(
        Graph(fwd.inputs, fwd.outputs + aux_graph.outputs, fwd.ops), consts), backend,
        once=True), arrays)
    fwd_out = list(fwd_out)
    res_vals = fwd_out[n_main:n_main + len(residuals)]
    # An output (or aux) may be the very buffer a residual is: the caller changing it in
    # place (out += 1, y.add_()) before f_vjp would change the gradient. Hand out copies.
    fwd_out = fwd_out[:n_main] + res_vals + [
        _private(v, res_vals) for v in fwd_out[n_main + len(residuals):]]
    out_vals = [_private(v, res_vals) for v in fwd_out[:n_main]]
    bwd_program = compile_program(schedule(bwd, consts), backend, once=True)
    out_shapes = [o.aval for o in graph.outputs[:n_main]]
    out = library.out(pytree.unflatten(main_td if has_aux else out_td, out_vals))

    def f_vjp(cotangent):
        cts, ct_td = pytree.flatten(cotangent)
        expected = main_td if has_aux else out_td
        if ct_td != expected:
            raise DloopTypeError(f"the cotangent must have the structure of the function's "
                                 f"output, {expected}; got {ct_td}", user_location())
        cts = [_cotangent(c, a, user_location(), backend.name)
               for c, a in zip(cts, out_shapes)]
        grads = _distinct(Execution(backend, fresh=False, heap=execution.heap).run(
            bwd_program, res_vals + cts), res_vals + cts)
        return library.out(tuple(pytree.unflatten(
            positions[k][2], grads[positions[k][0]:positions[k][0] + positions[k][1]])
            for k in range(len(primals))))
    f_vjp.keepalive = execution
    if has_aux:
        return out, f_vjp, library.out(pytree.unflatten(aux_td,
                                                        fwd_out[n_main + len(residuals):]))
    return out, f_vjp


def _distinct(grads, others):
    """The gradients, each its own array: one the program returns twice (the gradients of
    a + b by a and by b) or that is also one of `others` (the value, an argument) is copied,
    since NumPy users update gradients in place (g_a += ... changed g_b too)."""
    taken = {id(x) for x in others}
    out = []
    for g in grads:
        if id(g) in taken:
            g = _copy(g)
        taken.add(id(g))
        out.append(g)
    return out


def _private(value, residuals):
    """value, copied where it may share memory with one of the residuals."""
    if any(_may_share_memory(value, r) for r in residuals):
        return _copy(value)
    return value


def _may_share_memory(a, b):
    if a is b:
        return True
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return np.may_share_memory(a, b)
    if hasattr(a, "__cuda_array_interface__") and hasattr(b, "__cuda_array_interface__"):
        import cupy
        return bool(cupy.may_share_memory(a, b))
    return False


def _copy(value):
    """A copy of a result for the caller. A Vulkan device array is its own: nothing writes
    a result again (a user holds it as a dloop.vulkan array, which has no way to), and
    library.out copies one to the host for a NumPy user."""
    return value if libraries.is_vulkan_array(value) else value.copy()


def _snapshot(array):
    """A copy of a NumPy or CuPy array the caller may still write to."""
    return array.copy() if isinstance(array, np.ndarray) or libraries.on_cuda(array) else \
        array


def _cotangent(c, aval, where, backend=None):
    if not isinstance(c, (bool, int, float, complex, np.generic, np.ndarray)) and \
            not array_api_compat.is_array_api_obj(c) and not libraries.is_vulkan_array(c):
        raise DloopTypeError(f"a cotangent must be an array or a number, got "
                             f"{type(c).__name__} {c!r}", where)
    array = libraries.to_input(c, backend, where)
    if array.dtype.kind not in ("biufc" if aval.dtype.kind == "c" else "biuf"):
        what = "complex: its imaginary part would be lost on a real output" \
            if array.dtype.kind == "c" else f"of dtype {array.dtype.name}"
        raise DloopTypeError(f"the cotangent for an output of dtype {aval.dtype.name} is "
                             f"{what}; pass a real {aval.dtype.name} array", where)
    if tuple(array.shape) != aval.shape:
        raise DloopValueError(f"cotangent of shape {array.shape} for an output of shape "
                              f"{aval.shape}; pass an array of the output's shape", where)
    return array.astype(aval.dtype)


def _split(joint, n_out, n_in):
    """Split vjp_graph's joint graph at the first backward op into forward and backward
    graphs; the residuals are the forward values the backward ops read."""
    cts = joint.inputs[n_in:]
    primal_inputs = joint.inputs[:n_in]
    forward_made = set(primal_inputs)
    n_fwd = 0
    for op in joint.ops:
        if any(isinstance(x, Var) and x in cts for x in op.inputs) or op.prim.name == "loop_bwd":
            break
        forward_made.update(op.outputs)
        n_fwd += 1
    fwd_ops, bwd_ops = joint.ops[:n_fwd], joint.ops[n_fwd:]
    grads = joint.outputs[n_out:]
    reads = [x for op in bwd_ops for x in op.inputs] + list(grads)
    residuals = list(dict.fromkeys(x for x in reads if isinstance(x, Var) and x in forward_made))
    fwd = Graph(primal_inputs, list(joint.outputs[:n_out]) + residuals, fwd_ops)
    bwd = Graph(residuals + list(cts), list(grads), bwd_ops)
    return fwd, bwd, residuals


def memory_stats():
    """Adstack memory: bytes the last launch needed, and bytes the backend's heap holds."""
    backend = _last_backend[0] or get_backend(config.backend or "cpu")
    return {"adstack_bytes_used": backend.heap.last_used,
            "adstack_bytes_reserved": backend.reserved_bytes()}
