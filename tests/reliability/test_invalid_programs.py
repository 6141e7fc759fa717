"""Randomized invalid programs: wrong carry structure, mixed dtypes, bounds of every integer
dtype (from tiny to huge, signed and unsigned) and float bounds. Each must either give the
right gradient (closed form) or raise a DloopError that names the program's line, never
crash or hang; the process stays healthy after each. They run in a child process, which
names the program it was running if it dies."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dloop.backends import TABLE
from dloop.backends.base import available

PROGRAMS = 40

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np, dloop as dl
    dl.config.update("backend", sys.argv[1])
    dl.config.update("max_adstack_bytes", 1 << 30)     # the same verdicts on every machine
    x = np.linspace(0.1, 1.0, 4)
    for k, (source, _) in enumerate(json.load(sys.stdin)):
        print("start", k, flush=True)
        scope = {"np": np, "dl": dl, "x": x}
        try:
            exec(compile(source, f"<program {k}>", "exec"), scope)
            result = ["value", np.asarray(scope["result"], dtype=float).tolist()]
        except dl.DloopError as e:
            result = ["error", type(e).__name__, f"<program {k}>:" in str(e)]
        except Exception as e:
            result = ["foreign", f"{type(e).__name__}: {e}"]
        check = dl.grad(lambda x: dl.fori_loop(0, 3, lambda i, v: v * 2.0, x).sum())(x)
        result.append(bool(np.allclose(check, 8.0)))
        print("result", json.dumps(result), flush=True)
""")

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def _bound_program(rng):
    """fori_loop over x with upper bounds of a random integer dtype and magnitude."""
    dtype = np.dtype(rng.choice(INT_DTYPES))
    info = np.iinfo(dtype)
    pick = rng.integers(4)
    if pick == 0:                          # small values: a gradient
        values = rng.integers(max(info.min, -3), 6, size=4)
    elif pick == 1:                        # the dtype's extremes
        values = np.array([info.min, info.max, 0, 1], dtype=object)
    else:                                  # huge, near the top of the dtype
        values = np.array([info.max - int(rng.integers(0, 3))] * 4, dtype=object)
    scalar = bool(rng.integers(2))
    text = f"np.{dtype.name}({int(values[1])})" if scalar else \
        f"np.array({[int(v) for v in values]}, dtype=np.{dtype.name})"
    source = (f"n = {text}\n"
              f"result = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 1.5, x)"
              f".sum())(x)\n")
    trips = np.maximum(np.broadcast_to(np.array(
        [int(values[1])] if scalar else [int(v) for v in values], dtype=object), (4,)), 0)
    if max(trips) >= 2 ** 63:
        return source, ["error", "DloopValueError"]
    if sum(trips) * 8 > 1 << 30:           # one float64 stack slot per iteration
        return source, ["error", "DloopMemoryError"]
    with np.errstate(over="ignore"):
        return source, ["value", np.power(1.5, np.array(trips, dtype=float)).tolist()]


def _structure_program(rng):
    body = rng.choice([
        "lambda i, c: (c[0] * 2.0,)",                       # a leaf dropped
        "lambda i, c: (c[0], c[1], c[0])",                  # a leaf added
        "lambda i, c: [c[0], c[1]]",                        # tuple became list
        "lambda i, c: (c[0], {'b': c[1]})",                 # array became dict
        "lambda i, c: {'a': c[0], 'b': c[1]}",              # tuple became dict
    ])
    bound = rng.choice(["3", "np.array([1, 2, 3, 4])"])
    return (f"result = dl.grad(lambda x: dl.fori_loop(0, {bound}, {body}, (x, x * 2.0))[0]"
            f".sum())(x)\n"), ["error", "DloopTypeError"]


def _dtype_program(rng):
    body, init = rng.choice([
        ("lambda i, c: (c[0], c[1] * 0.5)", "(x, np.arange(4))"),             # int -> float
        ("lambda i, c: (c[0], 0.5)", "(x, 1)"),                              # Python float
        ("lambda i, c: (c[0] + c[1], c[1] + c[0])", "(x, x.astype(np.float32))"),  # f32 -> f64
        ("lambda i, c: (c[0] > 0.5, c[1])", "(x, x)"),                       # float -> bool
        ("lambda i, c: (c[0], c[1].astype(np.int32))", "(x, np.arange(4))"),  # int64 -> int32
    ])
    return (f"result = dl.grad(lambda x: dl.fori_loop(0, 2, {body}, {init})[0].sum())(x)\n",
            ["error", "DloopTypeError"])


def _float_bound_program(rng):
    bound = rng.choice(["3.0", "np.array([1.0, 2.0, 3.0, 4.0])", "np.float32(2)"])
    return (f"result = dl.grad(lambda x: dl.fori_loop(0, {bound}, lambda i, v: v * 2.0, x)"
            f".sum())(x)\n"), ["error", "DloopTypeError"]


GENERATORS = [_bound_program, _bound_program, _structure_program, _dtype_program,
              _float_bound_program]


def programs(seed):
    rng = np.random.default_rng(seed)
    return [GENERATORS[rng.integers(len(GENERATORS))](rng) for _ in range(PROGRAMS)]


@pytest.mark.parametrize("backend", list(TABLE))
def test_invalid_programs_are_clear_errors(backend):
    ok, why = available(backend)
    if not ok:
        pytest.skip(why)
    cases = programs(seed=2026)
    proc = subprocess.run([sys.executable, "-c", CHILD, backend], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=600)
    lines = proc.stdout.splitlines()
    started = [line for line in lines if line.startswith("start")]
    assert proc.returncode == 0, (f"the child died ({proc.returncode}) in program "
                                  f"{started[-1] if started else '?'}:\n"
                                  f"{cases[len(started) - 1][0] if started else ''}"
                                  f"{proc.stderr}")
    results = [json.loads(line[len("result "):]) for line in lines if line.startswith("result")]
    assert len(results) == len(cases)
    for k, ((source, expected), got) in enumerate(zip(cases, results)):
        assert got[-1], f"program {k} left the process broken:\n{source}"
        assert got[0] == expected[0], f"program {k}:\n{source}\nexpected {expected}, got {got}"
        if expected[0] == "value":
            np.testing.assert_allclose(got[1], expected[1], rtol=1e-12, err_msg=source)
        else:
            assert got[1] == expected[1] and got[2], f"program {k}:\n{source}\ngot {got}"
