"""Pytrees: arrays inside nested containers, flattened to leaves, through optree (the pytree
library PyTorch uses). Tuples, lists, dicts (by sorted key), OrderedDicts (in order),
namedtuples, None, dataclasses and registered classes are nodes; everything else is a leaf."""

import dataclasses

import optree

NAMESPACE = "dloop"
_registered = set()


class TreeDef:
    """A tree's structure (an optree PyTreeSpec) with the few views dloop's messages use."""
    __slots__ = ("spec",)

    def __init__(self, spec):
        self.spec = spec

    # PyTreeKind is a pybind11 enum, not iterable in optree 0.13 to 0.16 (pyproject allows 0.13).
    kind = property(lambda self: self.spec.kind.name.lower())
    meta = property(lambda self: self.spec.type)
    num_leaves = property(lambda self: self.spec.num_leaves)
    children = property(lambda self: tuple(TreeDef(c) for c in self.spec.children()))

    def __eq__(self, other):
        return isinstance(other, TreeDef) and self.spec == other.spec

    def __hash__(self):
        return hash(self.spec)

    def __repr__(self):
        return describe(self)


def register_pytree_node(cls, flatten_fn, unflatten_fn):
    """Make instances of `cls` nodes: flatten_fn(obj) -> (children, aux) and
    unflatten_fn(aux, children) -> obj, as in JAX."""
    optree.register_pytree_node(cls, lambda obj: flatten_fn(obj),
                                lambda aux, children: unflatten_fn(aux, list(children)),
                                namespace=NAMESPACE)
    _registered.add(cls)


def _register_dataclass(cls):
    names = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    optree.register_pytree_node(
        cls, lambda obj: (tuple(getattr(obj, n) for n in names), None, names),
        lambda _, children: cls(**dict(zip(names, children))), namespace=NAMESPACE)
    _registered.add(cls)


def _register_dataclasses(x):
    """Dataclass instances are nodes of their fields; their classes are registered on sight."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        if type(x) not in _registered:
            _register_dataclass(type(x))
        for f in dataclasses.fields(x):
            _register_dataclasses(getattr(x, f.name))
    elif isinstance(x, (list, tuple)):
        for c in x:
            _register_dataclasses(c)
    elif isinstance(x, dict):
        for c in x.values():
            _register_dataclasses(c)


def flatten(tree):
    """Return (leaves, treedef)."""
    _register_dataclasses(tree)
    leaves, spec = optree.tree_flatten(tree, none_is_leaf=False, namespace=NAMESPACE)
    return leaves, TreeDef(spec)


def unflatten(treedef, leaves):
    return optree.tree_unflatten(treedef.spec, list(leaves))


def leaf_paths(treedef, root="carry"):
    """Readable paths of the leaves, in flatten order: carry[1]['vel'], params.weights."""
    return [accessor.codify(root) for accessor in treedef.spec.accessors()]


def describe(td):
    """A short structure description for error messages: (*, [*], {'a': *})."""
    text = str(td.spec)
    text = text[len("PyTreeSpec("):-1]
    return text.replace(f", namespace='{NAMESPACE}'", "")


def first_difference(expected, got, root="carry"):
    """(path, what it was, what it became) at the first place two structures differ."""
    a, b = expected.spec, got.spec
    if a.kind != b.kind or a.type != b.type or a.num_children != b.num_children or \
            a.entries() != b.entries():
        return root, describe(expected), describe(got)
    if a.kind == optree.PyTreeKind.LEAF:
        return None
    for name, x, y in zip(_child_names(a, root), expected.children, got.children):
        diff = first_difference(x, y, name)
        if diff is not None:
            return diff
    return None


def _child_names(spec, root):
    """The path of each child of `spec`: from the first entry of its first leaf's accessor
    (carry.vel, carry[1]), or from its entry where it has no leaves."""
    names = [f"{root}[{e!r}]" for e in spec.entries()]
    accessors, leaf = spec.accessors(), 0
    for k, child in enumerate(spec.children()):
        if child.num_leaves:
            names[k] = optree.PyTreeAccessor((accessors[leaf][0],)).codify(root)
        leaf += child.num_leaves
    return names
