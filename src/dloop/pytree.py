"""Pytrees: arrays inside nested tuples, lists, dicts and namedtuples, flattened to leaves."""

from dataclasses import dataclass


@dataclass(frozen=True)
class TreeDef:
    kind: str            # 'leaf', 'none', 'tuple', 'list', 'dict', 'namedtuple'
    meta: object         # dict keys, or the namedtuple class
    children: tuple

    @property
    def num_leaves(self):
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)


_LEAF = TreeDef("leaf", None, ())
_NONE = TreeDef("none", None, ())


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(tree):
    """Return (leaves, treedef); dict entries are ordered by sorted key."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(x, leaves):
    if x is None:
        return _NONE
    if _is_namedtuple(x):
        return TreeDef("namedtuple", type(x), tuple(_flatten(c, leaves) for c in x))
    if isinstance(x, (tuple, list)):
        return TreeDef(type(x).__name__, None, tuple(_flatten(c, leaves) for c in x))
    if isinstance(x, dict):
        keys = tuple(sorted(x))
        return TreeDef("dict", keys, tuple(_flatten(x[k], leaves) for k in keys))
    leaves.append(x)
    return _LEAF


def unflatten(treedef, leaves):
    it = iter(leaves)
    out = _unflatten(treedef, it)
    return out


def _unflatten(td, it):
    if td.kind == "leaf":
        return next(it)
    if td.kind == "none":
        return None
    kids = [_unflatten(c, it) for c in td.children]
    if td.kind == "tuple":
        return tuple(kids)
    if td.kind == "list":
        return kids
    if td.kind == "namedtuple":
        return td.meta(*kids)
    return dict(zip(td.meta, kids))


def leaf_paths(treedef, root="carry"):
    """Readable paths of the leaves, in flatten order: carry[1]['vel']."""
    out = []
    _paths(treedef, root, out)
    return out


def _paths(td, prefix, out):
    if td.kind == "leaf":
        out.append(prefix)
        return
    for name, c in zip(_child_paths(td, prefix), td.children):
        _paths(c, name, out)


def describe(td):
    """A short structure description for error messages."""
    if td.kind == "leaf":
        return "*"
    if td.kind == "none":
        return "None"
    inner = ", ".join(describe(c) for c in td.children)
    if td.kind == "dict":
        inner = ", ".join(f"{k!r}: {describe(c)}" for k, c in zip(td.meta, td.children))
        return "{" + inner + "}"
    if td.kind == "list":
        return f"[{inner}]"
    if td.kind == "namedtuple":
        return f"{td.meta.__name__}({inner})"
    return f"({inner},)" if len(td.children) == 1 else f"({inner})"


def first_difference(expected, got, root="carry"):
    """(path, what it was, what it became) at the first place two structures differ."""
    if expected.kind != got.kind or expected.meta != got.meta or \
            len(expected.children) != len(got.children):
        return root, describe(expected), describe(got)
    names = _child_paths(expected, root)
    for name, a, b in zip(names, expected.children, got.children):
        diff = first_difference(a, b, name)
        if diff is not None:
            return diff
    return None


def _child_paths(td, prefix):
    if td.kind == "dict":
        return [f"{prefix}[{k!r}]" for k in td.meta]
    if td.kind == "namedtuple":
        return [f"{prefix}.{name}" for name in td.meta._fields]
    return [f"{prefix}[{i}]" for i in range(len(td.children))]
