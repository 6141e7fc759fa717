"""Pytrees: dataclass and namedtuple carries and parameters, OrderedDict kept,
custom nodes registered with dloop.register_pytree_node; gradients against finite differences."""

import dataclasses
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import dloop as dl
from helpers import assert_close, finite_difference

X = np.array([0.3, 0.8, 1.1])
N = np.array([2, 0, 3])


@dataclasses.dataclass
class State:
    pos: object
    vel: object


Params = namedtuple("Params", "scale shift")


class Box:
    """A user class registered as a node: its one child is `value`, `label` is static."""

    def __init__(self, value, label):
        self.value, self.label = value, label


dl.register_pytree_node(Box, lambda b: ((b.value,), b.label), lambda label, ch: Box(ch[0], label))


def _simulate(x, traced):
    def body(i, s):
        return State(s.pos + 0.1 * s.vel, s.vel * 0.9 - 0.1 * np.sin(s.pos))
    init = State(x, x * 0.5)
    if traced:
        return dl.fori_loop(0, N, body, init)
    out = State(x.copy(), x * 0.5)
    for j in range(x.size):
        s = State(out.pos[j], out.vel[j])
        for i in range(N[j]):
            s = body(i, s)
        out.pos[j], out.vel[j] = s.pos, s.vel
    return out


def test_dataclass_carry_gradient():
    def loss(x, traced):
        s = _simulate(x, traced)
        return (s.pos * s.vel).sum()
    got = dl.grad(lambda x: loss(x, True))(X)
    assert_close(got, finite_difference(lambda x: loss(x, False), X), rtol=1e-7, atol=1e-9)


def test_dataclass_and_namedtuple_parameters_keep_their_types():
    def loss(p):
        return (p["state"].pos * p["params"].scale + p["params"].shift).sum()
    params = {"state": State(X, X * 2), "params": Params(X + 1.0, X * 0.0 + 2.0)}
    g = dl.grad(loss)(params)
    assert isinstance(g["state"], State) and isinstance(g["params"], Params)
    np.testing.assert_allclose(g["state"].pos, X + 1.0)
    np.testing.assert_allclose(g["params"].scale, X)
    np.testing.assert_allclose(g["state"].vel, 0.0)


def test_ordered_dict_comes_back_in_order():
    tree = OrderedDict([("z", X), ("a", X * 2)])
    g = dl.grad(lambda t: (t["z"] * t["a"]).sum())(tree)
    assert type(g) is OrderedDict and list(g) == ["z", "a"]
    np.testing.assert_allclose(g["z"], X * 2)


def test_registered_custom_node():
    g = dl.grad(lambda b: (b.value ** 2).sum() if b.label == "sq" else None)(Box(X, "sq"))
    assert isinstance(g, Box) and g.label == "sq"
    np.testing.assert_allclose(g.value, 2 * X)


def test_carry_structure_change_names_the_dataclass_field():
    def body(i, s):
        return State(s.pos, (s.vel, s.vel))
    with pytest.raises(dl.DloopTypeError, match=r"(?s)carry\.vel.*test_pytrees.py"):
        dl.fori_loop(0, 2, body, State(X, X))


def test_dict_keys_that_do_not_sort_are_one_structure_in_any_order():
    """Keys 1 and 'a' do not sort: their order was the dict's own, so a body building the
    same dict in another order was told it changed the carry's structure."""
    def body(i, d):
        return {"a": d["a"] * 2.0, 1: d[1] + 1.0}
    out = dl.fori_loop(0, 3, body, {1: X, "a": X})
    np.testing.assert_array_equal(out["a"], X * 8.0)
    np.testing.assert_array_equal(out[1], X + 3.0)
    _, pullback = dl.vjp(lambda x: {1: x * 2.0, "a": x * 3.0}, X)
    (g,) = pullback({"a": np.ones(3), 1: np.ones(3)})
    np.testing.assert_allclose(g, 5.0)


def test_a_carry_nested_as_deep_as_allowed():
    """dloop.pytree.MAX_DEPTH levels of lists (deeper is an error, tests/errors)."""
    def nest(v, depth=dl.pytree.MAX_DEPTH):
        for _ in range(depth):
            v = [v]
        return v

    def innermost(t):
        while isinstance(t, list):
            t = t[0]
        return t
    g = dl.grad(lambda x: innermost(dl.fori_loop(0, N, lambda i, c: nest(innermost(c) * 1.5),
                                                 nest(x))).sum())(X)
    assert_close(g, 1.5 ** N, rtol=1e-14, atol=0)


class Masked:
    """A registered node whose aux data is an array (a mask the body rebuilds)."""

    def __init__(self, value, mask):
        self.value, self.mask = value, mask


dl.register_pytree_node(Masked, lambda m: ((m.value,), m.mask),
                        lambda mask, ch: Masked(ch[0], mask))


def test_registered_node_with_an_array_as_aux_data():
    """== of two arrays has no single truth value: a carry rebuilt with a copy of its mask
    was refused as a change of structure."""
    mask = X > 0.5

    def loss(x):
        out = dl.fori_loop(0, N, lambda i, m: Masked(np.where(m.mask, m.value * 2.0, m.value),
                                                     m.mask.copy()), Masked(x, mask))
        return out.value.sum()
    g = dl.grad(loss)(X)
    assert_close(g, np.where(mask, 2.0 ** N, 1.0), rtol=0, atol=0)
