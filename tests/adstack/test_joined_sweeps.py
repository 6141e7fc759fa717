"""A grad's forward and reverse sweeps of a per-element loop in one kernel (ad/seeds.py: its
cotangent seeds are literals, so no host step stands between them), guessed like any
counted loop (runtime/guess.py). Closed forms: v <- v * t[k - 20] with t = 0.5 halves v,
k counting from 20, until v <= 1, so the gradient of the sum is 0.5**trips per element."""

import array_api_compat
import numpy as np
import pytest

import dloop as dl
from dloop import api
from dloop.backends.base import get_backend
from dloop.runtime import program

TABLE = np.full(16, 0.5)


@pytest.fixture(autouse=True)
def _fresh_plans():
    with api._PROGRAMS_LOCK:
        api._PROGRAMS.clear()


def _halvings(x):
    return np.ceil(np.log2(x)).astype(int)


def _loss(x):
    """Halving through a table read at k - 20: a stack read past its end gives k = 0, whose
    index -20 is out of the table's bounds."""
    def body(carry):
        v, k = carry
        xp = array_api_compat.array_namespace(k)
        return v * xp.asarray(TABLE)[k - 20], k + 1
    v, _ = dl.while_loop(lambda c: c[0] > 1.0, body, (x, np.full(x.shape, 20)))
    return v.sum()


def test_the_sweeps_share_one_kernel(backend, monkeypatch):
    kernels = []
    monkeypatch.setattr(program, "KERNEL_HOOKS", [kernels.append])
    n = np.arange(4000) % 23
    x = np.linspace(0.5, 1.5, 4000)
    g = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.9 + 0.01 * x, x).sum())(x)
    # v_n = 0.9^n x + 0.01 x (1 - 0.9^n) / 0.1
    np.testing.assert_allclose(g, 0.9 ** n + 0.1 * (1 - 0.9 ** n), rtol=1e-13)
    taping = [k for k in kernels if k.stacks and not k.name.endswith("_count")]
    split = get_backend(backend).caps.max_loop_trips is not None    # lavapipe's budget
    assert len(taping) == (2 if split else 1)


def test_a_short_guess_is_found_before_the_faults_its_reverse_sweep_raised(backend):
    """The second call guesses 3 halvings, but one element needs 10: in a joined kernel its
    reverse sweep pops zeros past its stack and indexes the table at -20 too. The call runs
    again, counted, instead of raising that index error: the overflow's fault slot comes
    first (runtime/guess.py)."""
    f = dl.grad(_loss)
    x = np.random.default_rng(0).uniform(5.0, 7.9, 3000)       # 3 halvings each
    np.testing.assert_allclose(f(x), 0.5 ** _halvings(x), rtol=1e-15)
    longer = x.copy()
    longer[1234] = 1000.0
    be = get_backend(backend)
    before = be.count_launches
    np.testing.assert_allclose(f(longer), 0.5 ** _halvings(longer), rtol=1e-15)
    assert be.count_launches - before == 1     # the short guess, then the run again counted
    before = be.count_launches
    f(x)                            # after a miss, the plan counts guess.PAUSE launches
    assert be.count_launches - before == 1


def test_value_and_grad_with_aux_seeds_its_outputs(backend):
    """The loss is seeded with 1 and the aux with 0: the aux, a loop result too, adds
    nothing to the gradient."""
    n = np.arange(500) % 7

    def f(x):
        v = dl.fori_loop(0, n, lambda i, v: v * 1.5, x)
        return (v * 2.0).sum(), (v, v.sum())
    x = np.linspace(-1.0, 1.0, 500)
    ((value, (v, total)), g) = dl.value_and_grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g, 2.0 * 1.5 ** n, rtol=1e-14)
    np.testing.assert_allclose(v, x * 1.5 ** n, rtol=1e-14)
    np.testing.assert_allclose(value, 2.0 * total, rtol=1e-14)


def test_the_trips_written_for_the_next_guess_are_freed_after_the_run_s_use(backend):
    """A joined kernel writes its while loop's trips out for the next guess though no later
    step reads them: they are dropped after that kernel, not kept to the end of the run."""
    x = np.random.default_rng(1).uniform(5.0, 7.9, 1000)
    dl.grad(_loss)(x)
    (executable, _), = api._PROGRAMS.values()
    program = executable.program
    tokens = [o for step in program.steps for o in getattr(step, "outputs", [])
              if o.aval.is_tape]
    assert tokens
    dying = {v for dead in program.dead_after for v in dead}
    assert all(t in dying for t in tokens)
