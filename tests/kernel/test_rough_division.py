"""Floor division and modulo stay NumPy's, bit for bit, where the backend's float division
is a few ulps off (Vulkan on NVIDIA): the legalized code runs on the interpreter with every
division moved 1 to 3 ulps (and float64 ones also by up to 2^30 ulps, float32's precision,
which is all Vulkan promises), on quotients near integers and half-integers, huge and tiny
ones, signed zeros, infinities and NaN."""

from dataclasses import dataclass

import numpy as np
import pytest
from opkernels import assert_same_bits, op_kernel, run, same_bits
from rough import nudge, rough_division

from dloop.backends.base import available
from dloop.kernel.legalize import legalize

F64, F32 = np.dtype(np.float64), np.dtype(np.float32)
BACKENDS = ["interpret"] + [b for b in ("cpu",) if available(b)[0]]


@dataclass(frozen=True)
class Caps:
    native_math: frozenset = frozenset()
    rounded_division: bool = True


ROUGH = Caps(rounded_division=False)


def hard_pairs(dtype, n=20000, seed=5):
    rng = np.random.default_rng(seed)
    f = np.finfo(dtype)
    bits = f.nmant + 1
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, -3.0, 0.1, 1e-30,
                        float(f.max), -float(f.max), float(f.tiny), float(f.smallest_subnormal),
                        3.0e23, -3.0e23, 2.0 ** bits, 2.0 ** bits - 1, 1e20, 7.0],
                       dtype=dtype)
    sx, sy = (v.ravel() for v in np.meshgrid(special, special))
    # Quotients near integers from 1 to 2^(bits + 10), then nudged a few ulps either way,
    # and near half-integers.
    with np.errstate(over="ignore", under="ignore"):
        y = (2.0 ** rng.uniform(-60, 60, n) * rng.choice([-1.0, 1.0], n)).astype(dtype)
        q = np.floor(2.0 ** rng.uniform(0, bits + 10, n)) * rng.choice([-1.0, 1.0], n)
        q = np.where(rng.random(n) < 0.2, q + 0.5, q)
        x = (q * y).astype(dtype)
        x = nudge(x, 3) if dtype == F64 else x
        x = np.where(rng.random(n) < 0.5, x, np.nextafter(x, -x)).astype(dtype)
        # Whole range: huge and tiny quotients, subnormals.
        wide = lambda: (2.0 ** rng.uniform(np.log2(float(f.smallest_subnormal)),  # noqa: E731
                                           np.log2(float(f.max)), n)
                        * rng.choice([-1.0, 1.0], n)).astype(dtype)
        x = np.concatenate([sx, x, wide()]).astype(dtype)
        y = np.concatenate([sy, y, wide()]).astype(dtype)
    return x, y


def numpy_answer(op, x, y):
    with np.errstate(all="ignore"):
        return (np.floor_divide if op == "floordiv" else np.remainder)(x, y)


CASES = [(op, d, ulps) for op in ("floordiv", "mod") for d in (F32, F64) for ulps in (3,)] + \
    [(op, F64, 2 ** 30) for op in ("floordiv", "mod")]


@pytest.mark.parametrize("op,dtype,ulps", CASES, ids=[f"{o}-{d}-{u}" for o, d, u in CASES])
def test_floordiv_and_mod_exact_under_rough_division(op, dtype, ulps):
    x, y = hard_pairs(dtype)
    kernel = legalize(op_kernel(op, [dtype, dtype], dtype), ROUGH)
    with rough_division(ulps):
        got = run("interpret", kernel, [x, y])
    assert_same_bits(got, numpy_answer(op, x, y), [x, y])
    # And the same code with exact division, on the interpreter and the CPU backend.
    for backend in BACKENDS:
        assert_same_bits(run(backend, kernel, [x, y]), numpy_answer(op, x, y), [x, y])


@pytest.mark.parametrize("dtype", [F32, F64])
def test_plain_legalization_fails_under_rough_division(dtype):
    """The harness can tell: the code for correctly rounded divisions goes wrong here."""
    x, y = hard_pairs(dtype)
    kernel = legalize(op_kernel("floordiv", [dtype, dtype], dtype), Caps())
    with rough_division(3):
        got = run("interpret", kernel, [x, y])
    assert not same_bits(got, numpy_answer("floordiv", x, y)).all()


def test_issue_case_float32():
    x, y = np.array([3.0e23], F32), np.array([3.0], F32)
    kernel = legalize(op_kernel("floordiv", [F32, F32], F32), ROUGH)
    with rough_division(3):
        assert_same_bits(run("interpret", kernel, [x, y]), np.array([1e23], F32))
