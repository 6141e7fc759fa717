"""One test per user error: its class, that the message names the line of this file that
caused it, and that the next call in the same process still works."""

import numpy as np
import pytest

import dloop as dl
from helpers import error_checker

X = np.linspace(0.1, 1.0, 4)
N = np.array([1, 2, 3, 4])


check = error_checker(__file__)


def test_grad_with_respect_to_integer_argument(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda k: (k * 2.0).sum())(np.arange(3))  # E-int-arg
    check(e, dl.DloopTypeError, "E-int-arg", "args[0]", "int64", "float")


def test_grad_with_respect_to_boolean_argument(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda x, b: (x * b).sum(), argnums=1)(X, np.ones(4, bool))  # E-bool-arg
    check(e, dl.DloopTypeError, "E-bool-arg", "args[1]", "bool")


def test_body_changes_carry_structure(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, N, lambda i, c: (c[0], c[1], c[0]), (X, X))  # E-structure
    check(e, dl.DloopTypeError, "E-structure", "structure", "at carry:")


def test_body_changes_nested_carry_structure_names_the_path(backend):
    init = (X, {"pos": X, "vel": (X, X)})
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, N, lambda i, c: (c[0], {"pos": c[1]["pos"], "vel": c[1]["vel"][0]}),  # E-path
                     init)
    check(e, dl.DloopTypeError, "E-path", "carry[1]['vel']", "(*, *)", "became *")


def test_argument_that_holds_itself():
    args = [X]
    args.append(args)
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda t: t[0].sum())(args)  # E-cyclic-arg
    check(e, dl.DloopTypeError, "E-cyclic-arg", "pytree", "holds itself")


def test_carry_that_holds_itself():
    carry = {"x": X}
    carry["self"] = carry
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, 2, lambda i, c: c, carry)  # E-cyclic-carry
    check(e, dl.DloopTypeError, "E-cyclic-carry", "pytree", "deeper than 256 levels")


def test_carry_nested_too_deep():
    """A carry 300 lists deep passed flatten but its structure check ran out of Python's
    recursion limit: a RecursionError instead of this error."""
    carry = X
    for _ in range(300):
        carry = [carry]
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, 2, lambda i, c: c, carry)  # E-deep-carry
    check(e, dl.DloopTypeError, "E-deep-carry", "pytree", "deeper than 256 levels")


def test_body_changes_carry_shape(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, 3, lambda i, v: v[:2], X)  # E-shape
    check(e, dl.DloopTypeError, "E-shape", "carry", "[4]", "[2]")


def test_body_changes_carry_dtype(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, N, lambda i, c: {"a": c["a"] * 1.5}, {"a": np.arange(4)})  # E-dtype
    check(e, dl.DloopTypeError, "E-dtype", "carry['a']", "int64", "float64", ".astype")


def test_cond_returns_non_boolean(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.while_loop(lambda v: v - 1.0, lambda v: v * 0.5, X)  # E-cond
    check(e, dl.DloopTypeError, "E-cond", "boolean", "float64")


def test_float_bounds(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, N * 1.0, lambda i, v: v * 2.0, X)  # E-float-bound
    check(e, dl.DloopTypeError, "E-float-bound", "upper", "integer")


def test_bounds_do_not_broadcast_against_carry(backend):
    with pytest.raises(dl.DloopValueError) as e:
        dl.fori_loop(0, np.array([1, 2, 3]), lambda i, v: v * 2.0, X)  # E-broadcast
    check(e, dl.DloopValueError, "E-broadcast", "(3,)", "(4,)")


def test_carry_smaller_than_per_element_bounds(backend):
    with pytest.raises(dl.DloopValueError) as e:
        dl.fori_loop(0, N, lambda i, v: v * 2.0, np.float64(1.0))  # E-small-carry
    check(e, dl.DloopValueError, "E-small-carry", "broadcast_to")


def test_grad_of_non_scalar_output(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda x: x * 2.0)(X)  # E-nonscalar
    check(e, dl.DloopTypeError, "E-nonscalar", "0-d", ".sum()")


def test_grad_of_integer_output(backend):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(lambda x: (x > 0.5).sum())(X)  # E-int-output
    check(e, dl.DloopTypeError, "E-int-output", "0-d float")


def test_body_mixes_elements_under_per_element_bounds(backend):
    def body(i, v):
        return v + v.sum()  # E-mixing
    with pytest.raises(dl.DloopValueError) as e:
        dl.fori_loop(0, N, body, X)
    check(e, dl.DloopValueError, "E-mixing", "mixes elements", "scalar bounds")


def test_body_with_an_op_that_has_no_per_element_form(backend):
    table = np.array([-1.0, 0.0, 1.0, 2.0])

    def body(i, v):
        return v * 0.5 + np.searchsorted(table, v) * 0.1  # E-no-element-form
    with pytest.raises(dl.DloopValueError) as e:
        dl.fori_loop(0, N, body, X)
    check(e, dl.DloopValueError, "E-no-element-form", "'searchsorted'",
          "no per-element form yet", "before or after the loop")


def test_body_gathers_from_the_carry(backend):
    def body(i, v):
        return v + v[np.array([3, 2, 1, 0])]  # E-mix-gather
    with pytest.raises(dl.DloopValueError) as e:
        dl.fori_loop(0, N, body, X)
    check(e, dl.DloopValueError, "E-mix-gather", "mixes elements")


def test_collective_loop_over_the_carry_inside_a_per_element_loop(backend):
    def body(i, v):
        return dl.fori_loop(0, 2, lambda k, w: w - w.mean(), v)  # E-collective
    with pytest.raises(dl.DloopValueError) as e:
        dl.fori_loop(0, N, body, X)
    check(e, dl.DloopValueError, "E-collective", "mixes elements", "collective loop")


def test_python_if_on_traced_value(backend):
    def f(x):
        if x.sum() > 0:  # E-bool
            return x.sum()
        return -x.sum()
    with pytest.raises(dl.DloopTypeError) as e:
        dl.grad(f)(X)
    check(e, dl.DloopTypeError, "E-bool", "np.where")


def test_numpy_array_indexed_by_traced_index(backend):
    table = np.arange(10.0)

    def body(i, v):
        return v + table[i]  # E-np-index
    with pytest.raises(dl.DloopTypeError) as e:
        dl.fori_loop(0, N, body, X)
    check(e, dl.DloopTypeError, "E-np-index", "xp.asarray(table)[i]")


def test_unsupported_numpy_function(backend):
    with pytest.raises(dl.DloopNotImplementedError) as e:
        dl.jit(lambda x: np.unique(x))(X)  # E-unsupported
    check(e, dl.DloopNotImplementedError, "E-unsupported", "np.unique")


def test_index_out_of_bounds_inside_a_kernel(backend):
    def body(i, v):
        return v + v.__array_namespace__().asarray(np.arange(3.0))[i]  # E-index
    with pytest.raises(dl.DloopIndexError) as e:
        dl.fori_loop(0, N, body, X)
    check(e, dl.DloopIndexError, "E-index", "out of bounds", "(3,)")


def test_leaked_tracer(backend):
    leaked = []

    def f(x):
        leaked.append(x * 2.0)
        return x.sum()
    dl.grad(f)(X)
    with pytest.raises(dl.DloopValueError) as e:
        dl.grad(lambda x: (x * leaked[0]).sum())(X)  # E-leak
    check(e, dl.DloopValueError, "E-leak", "escaped")


def test_bad_argnums(backend):
    with pytest.raises(dl.DloopValueError) as e:
        dl.grad(lambda x: x.sum(), argnums=2)(X)  # E-argnums
    check(e, dl.DloopValueError, "E-argnums", "argnums")


def test_unknown_setting(backend):
    with pytest.raises(dl.DloopValueError) as e:
        dl.config.update("adstack_size", 10)  # E-setting
    check(e, dl.DloopValueError, "E-setting", "unknown setting", "adstack_capacity")


def test_invalid_setting_values(backend):
    with pytest.raises(dl.DloopValueError) as e:
        dl.config.update("adstack_capacity", -1)  # E-capacity
    check(e, dl.DloopValueError, "E-capacity", "non-negative int")
    with pytest.raises(dl.DloopValueError) as e:
        dl.config.update("backend", "tpu")  # E-backend
    check(e, dl.DloopValueError, "E-backend", "interpret", "cpu", "cuda")
    with pytest.raises(dl.DloopValueError) as e:
        dl.config.update("backend", ["cpu"])  # E-backend-type
    check(e, dl.DloopValueError, "E-backend-type", "interpret", "cpu", "['cpu']")
    with pytest.raises(dl.DloopValueError) as e:
        dl.config.update("adstack_capacity", 2 ** 63)  # E-capacity-range
    check(e, dl.DloopValueError, "E-capacity-range", "below 2**63")
    with pytest.raises(dl.DloopValueError) as e:
        dl.config.update("debug", 2)  # E-debug-type
    check(e, dl.DloopValueError, "E-debug-type", "debug must be a bool")


def test_integer_settings_take_numpy_integers():
    with dl.config.override(adstack_capacity=np.int64(5), num_threads=np.int32(2),
                            max_adstack_bytes=np.uint64(1 << 30)):
        assert (dl.config.adstack_capacity, dl.config.num_threads,
                dl.config.max_adstack_bytes) == (5, 2, 1 << 30)
        assert all(type(getattr(dl.config, name)) is int
                   for name in ("adstack_capacity", "num_threads", "max_adstack_bytes"))


def test_array_from_outside_a_loop_updated_inside_it(backend):
    def body_updates(x):
        y = x * 2

        def body(i, u):
            y[0] *= 2.0  # E-outer-update
            return u * 0.5
        dl.fori_loop(0, N, body, x)
        return y
    with pytest.raises(dl.DloopValueError) as e:
        dl.jit(body_updates)(X)
    check(e, dl.DloopValueError, "E-outer-update", "outside this loop's body", "carry")

    def view_updated(x):
        v = x[1:]

        def body(i, u):
            v[0] = u[0]  # E-outer-view
            return u + 1
        dl.fori_loop(0, 2, body, x)
        return x
    with pytest.raises(dl.DloopValueError) as e:
        dl.jit(view_updated)(X)
    check(e, dl.DloopValueError, "E-outer-view", "outside this loop's body", "carry")

    def cond_updates(x):
        y = x * 1.0

        def cond(u):
            y[1:] += 1.0  # E-outer-cond
            return u.sum() < 20
        return dl.while_loop(cond, lambda u: u * 1.5, x), y
    with pytest.raises(dl.DloopValueError) as e:
        dl.jit(cond_updates)(X)
    check(e, dl.DloopValueError, "E-outer-cond", "outside this loop's body", "carry")


def test_cond_fun_updating_the_carry(backend):
    def cond(u):
        u += 1.0
        return u.sum() < 20
    with pytest.raises(dl.DloopValueError) as e:
        dl.jit(lambda x: dl.while_loop(cond, lambda u: u * 1.5, x))(X)  # E-cond-update
    check(e, dl.DloopValueError, "E-cond-update", "cond_fun updated the carry", "body_fun")


def test_shapes_that_do_not_broadcast(backend):
    with pytest.raises(dl.DloopValueError) as e:
        dl.jit(lambda v: v + np.ones(5))(np.ones(3))  # E-no-broadcast
    check(e, dl.DloopValueError, "E-no-broadcast", "(3,), (5,)", "do not broadcast")


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.uint32])
def test_converting_to_a_dtype_dloop_does_not_compute_in(backend, dtype):
    with pytest.raises(dl.DloopTypeError) as e:
        dl.jit(lambda v: v.astype(dtype) * 2)(X)  # E-astype
    check(e, dl.DloopTypeError, "E-astype", np.dtype(dtype).name, "float64")


def test_argmax_of_an_empty_array(backend):
    with pytest.raises(dl.DloopValueError) as e:
        dl.jit(lambda v: np.argmax(v))(np.ones(0))  # E-argmax-empty
    check(e, dl.DloopValueError, "E-argmax-empty", "argmax", "length 0")
    np.testing.assert_array_equal(dl.jit(lambda v: np.argmax(v, axis=1))(np.ones((0, 3))),
                                  np.zeros(0, np.int64))
