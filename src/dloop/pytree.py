"""Pytrees: arrays inside nested containers, flattened to leaves. Tuples, lists, dicts (by
sorted key, rebuilt in their own order), OrderedDicts and defaultdicts, deques, namedtuples,
None, dataclasses and registered classes are nodes; everything else is a leaf.

Written in Python rather than taken from optree (the pytree library PyTorch uses): a daemon
thread inside optree's C++ code when the interpreter exits aborts the whole process, since
Python before 3.14 ends such a thread by unwinding its stack, and C++ frames that may not
throw call std::terminate on the way (a daemon thread calling a gradient in a loop aborted
every exit). Flattening a carry costs microseconds against a call's tenths of milliseconds."""

import dataclasses
from collections import OrderedDict, defaultdict, deque

import numpy as np

from .errors import DloopTypeError
from .source import user_location

_registered = {}                  # class -> (flatten_fn, unflatten_fn)
_dataclass_fields = {}            # dataclass -> names of its __init__ fields
# Deeper trees are refused with a DloopTypeError (a container that holds itself reaches it
# at once): the functions below recurse once or twice per level.
MAX_DEPTH = 256


class TreeDef:
    """A tree's structure. kind: "leaf", "none", "tuple", "list", "dict", "ordereddict",
    "defaultdict", "deque", "namedtuple", "dataclass" or "custom"; node_type: the node's
    class; meta: what else rebuilding it takes (a registered class's aux data, a
    defaultdict's factory, a deque's maxlen); entries: a mapping's keys in flatten order, or
    a namedtuple's or dataclass's field names. Equal structures compare and hash equal; a
    dict's own key order (`order`) is kept only to rebuild and describe it."""
    __slots__ = ("kind", "node_type", "meta", "entries", "children", "num_leaves", "order",
                 "_hash")

    def __init__(self, kind, node_type=None, meta=None, entries=None, children=(),
                 order=None):
        self.kind, self.node_type, self.meta, self.entries = kind, node_type, meta, entries
        self.children = children
        self.num_leaves = 1 if kind == "leaf" else sum(c.num_leaves for c in children)
        self.order = order
        self._hash = hash((kind, node_type, entries, tuple(c._hash for c in children)))

    def same_node(self, other):
        """Whether the two nodes match, apart from their children."""
        return (self.kind == other.kind and self.node_type is other.node_type
                and self.entries == other.entries and len(self.children) == len(other.children)
                and _same(self.meta, other.meta))

    def __eq__(self, other):
        """Node by node from a list, not by recursion: comparing tuples of children
        recursed twice per level, past Python's limit for a tree flatten accepts."""
        pending = [(self, other)]
        while pending:
            a, b = pending.pop()
            if a is b:
                continue
            if not isinstance(b, TreeDef) or a._hash != b._hash or not a.same_node(b):
                return False
            pending.extend(zip(a.children, b.children))
        return True

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return describe(self)


LEAF = TreeDef("leaf")


def _same(a, b):
    """Aux data compared as JAX does (==); NumPy arrays by dtype and values, where == gives
    no single truth value (a node rebuilt with a copy of its array aux was another
    structure)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):     # == of arrays: not one truth value
        return False


def register_pytree_node(cls, flatten_fn, unflatten_fn):
    """Make instances of `cls` nodes: flatten_fn(obj) -> (children, aux) and
    unflatten_fn(aux, children) -> obj, as in JAX."""
    _registered[cls] = (flatten_fn, unflatten_fn)


def flatten(tree):
    """Return (leaves, treedef)."""
    leaves = []
    try:
        return leaves, _flatten(tree, leaves)
    except RecursionError:
        raise DloopTypeError(
            f"a pytree (the arguments, a loop's carry or a function's result) is nested "
            f"deeper than {MAX_DEPTH} levels, or holds itself (a list appended to itself): "
            "pass a shallower tree", user_location()) from None


def _flatten(x, leaves, depth=0):
    if depth > MAX_DEPTH:
        raise RecursionError
    depth += 1
    t = type(x)
    if t is tuple or t is list:
        return TreeDef(t.__name__, t, children=tuple(_flatten(c, leaves, depth) for c in x))
    if t is dict or t is defaultdict:
        keys = _sorted_keys(x)
        return TreeDef(t.__name__, t, x.default_factory if t is defaultdict else None,
                       keys, tuple(_flatten(x[k], leaves, depth) for k in keys), order=tuple(x))
    if x is None:
        return TreeDef("none", t)
    node = _registered.get(t)
    if node is not None:
        children, aux = node[0](x)
        return TreeDef("custom", t, aux,
                       children=tuple(_flatten(c, leaves, depth) for c in children))
    if issubclass(t, tuple) and hasattr(t, "_fields"):
        return TreeDef("namedtuple", t, entries=t._fields,
                       children=tuple(_flatten(c, leaves, depth) for c in x))
    if t is OrderedDict:
        keys = tuple(x)
        return TreeDef("ordereddict", t, entries=keys,
                       children=tuple(_flatten(x[k], leaves, depth) for k in keys))
    if t is deque:
        return TreeDef("deque", t, x.maxlen,
                       children=tuple(_flatten(c, leaves, depth) for c in x))
    if dataclasses.is_dataclass(t):
        names = _dataclass_fields.get(t)
        if names is None:
            names = _dataclass_fields[t] = tuple(
                f.name for f in dataclasses.fields(t) if f.init)
        return TreeDef("dataclass", t, entries=names,
                       children=tuple(_flatten(getattr(x, n), leaves, depth) for n in names))
    leaves.append(x)
    return LEAF


def _sorted_keys(mapping):
    """Keys in sorted order; where they do not sort (1 and 'a'), by type and then key, or
    by type and then repr: an order that never depends on how the dict was built."""
    for order in (None, lambda k: (_type_name(k), k), lambda k: (_type_name(k), repr(k))):
        try:
            return tuple(sorted(mapping, key=order))
        except TypeError:
            continue


def _type_name(k):
    return type(k).__module__ + "." + type(k).__qualname__


def unflatten(treedef, leaves):
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"{len(leaves)} leaves for a tree of {treedef.num_leaves}")
    return _unflatten(treedef, iter(leaves))


def _unflatten(td, leaves):
    kind = td.kind
    if kind == "leaf":
        return next(leaves)
    children = [_unflatten(c, leaves) for c in td.children]
    if kind in ("tuple", "list"):
        return td.node_type(children)
    if kind in ("dict", "defaultdict"):
        by_key = dict(zip(td.entries, children))
        rebuilt = {k: by_key[k] for k in td.order}
        return rebuilt if kind == "dict" else defaultdict(td.meta, rebuilt)
    if kind == "none":
        return None
    if kind == "custom":
        return _registered[td.node_type][1](td.meta, children)
    if kind == "namedtuple":
        return td.node_type(*children)
    if kind == "ordereddict":
        return OrderedDict(zip(td.entries, children))
    if kind == "deque":
        return deque(children, maxlen=td.meta)
    return td.node_type(**dict(zip(td.entries, children)))         # a dataclass


def leaf_paths(treedef, root="carry"):
    """Readable paths of the leaves, in flatten order: carry[1]['vel'], params.weights."""
    if treedef.kind == "leaf":
        return [root]
    return [path for k, child in enumerate(treedef.children)
            for path in leaf_paths(child, _child_path(treedef, k, root))]


def _child_path(td, k, root):
    if td.kind in ("namedtuple", "dataclass"):
        return f"{root}.{td.entries[k]}"
    if td.entries is not None:
        return f"{root}[{td.entries[k]!r}]"
    return f"{root}[{k}]"


def describe(td):
    """A short structure description for error messages: (*, [*], {'a': *})."""
    kind = td.kind
    if kind == "leaf":
        return "*"
    if kind == "none":
        return "None"
    parts = [describe(c) for c in td.children]
    if kind == "tuple":
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"
    if kind == "list":
        return f"[{', '.join(parts)}]"
    name = td.node_type.__name__
    if kind == "deque":
        maxlen = "" if td.meta is None else f", maxlen={td.meta}"
        return f"deque([{', '.join(parts)}]{maxlen})"
    if td.entries is None:
        meta = "" if td.meta is None else f"[{td.meta!r}]"
        return f"{name}{meta}([{', '.join(parts)}])"
    if kind in ("namedtuple", "dataclass"):
        return f"{name}({', '.join(f'{e}={p}' for e, p in zip(td.entries, parts))})"
    items = "{" + ", ".join(f"{e!r}: {p}" for e, p in zip(td.entries, parts)) + "}"
    if kind == "dict":
        return items
    return f"{name}({td.meta!r}, {items})" if kind == "defaultdict" else f"{name}({items})"


def first_difference(expected, got, root="carry"):
    """(path, what it was, what it became) at the first place two structures differ."""
    if not expected.same_node(got):
        return root, describe(expected), describe(got)
    for k, (x, y) in enumerate(zip(expected.children, got.children)):
        diff = first_difference(x, y, _child_path(expected, k, root))
        if diff is not None:
            return diff
    return None
