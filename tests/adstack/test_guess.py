"""Counted loops sized from their plan's last count (runtime/guess.py): a later call skips
the counting pass, a guess that falls short runs the call again counted, and every gradient
is the counted one. Closed forms: halving v until v <= 1 gives v * 0.5**k, so the gradient
of the sum is 0.5**k per element, k its trip count."""

import threading

import numpy as np
import pytest

import dloop as dl
from dloop import api
from dloop.backends.base import get_backend
from dloop.runtime import guess


@pytest.fixture(autouse=True)
def _fresh_plans():
    """Each test starts from plans that have seen no count: the program cache keeps a plan
    (and what it saw) per traced function, which the tests here share."""
    with api._PROGRAMS_LOCK:
        api._PROGRAMS.clear()


def _halvings(x):
    return np.ceil(np.log2(x)).astype(int)          # trips of the loop below, for x > 1


def _loss(x):
    return dl.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, x).sum()


def _grad_counted(f, x, backend):
    be = get_backend(backend)
    before = be.count_launches
    g = f(x)
    return g, be.count_launches - before


def _uniform(size, seed=0):
    return np.random.default_rng(seed).uniform(5.0, 7.9, size)     # 3 halvings each


def test_a_second_call_guesses_and_matches_the_counted_gradient(backend):
    f = dl.grad(_loss)
    x = _uniform(3000)
    first, counted = _grad_counted(f, x, backend)
    second, counted_again = _grad_counted(f, x, backend)
    assert (counted, counted_again) == (1, 0)
    np.testing.assert_array_equal(np.asarray(second), np.asarray(first))
    np.testing.assert_allclose(np.asarray(second), 0.5 ** _halvings(x), rtol=1e-15)


def test_a_short_guess_runs_the_call_again_counted(backend):
    f = dl.grad(_loss)
    f(_uniform(3000))                           # 3 halvings each: the guess for the next call
    longer = _uniform(3000, seed=1) * 2.0       # 4 each
    g, counted = _grad_counted(f, longer, backend)
    assert counted == 1                         # the run again
    np.testing.assert_allclose(np.asarray(g), 0.5 ** _halvings(longer), rtol=1e-15)
    # After a miss the plan counts PAUSE launches (the run again first) before guessing.
    counts = [_grad_counted(f, longer, backend)[1] for _ in range(guess.PAUSE)]
    assert counts == [1] * (guess.PAUSE - 1) + [0]
    one_long = longer.copy()
    one_long[1234] = 1000.0                     # 10 halvings where 4 are guessed
    g, counted = _grad_counted(f, one_long, backend)
    assert counted == 1
    np.testing.assert_allclose(np.asarray(g), 0.5 ** _halvings(one_long), rtol=1e-15)


def test_a_guess_that_would_pad_the_tape_is_not_made(backend):
    f = dl.grad(_loss)
    x = _uniform(3000)
    x[::100] = 1000.0                           # 1 in 100 elements runs 10 trips, not 3
    counts = [_grad_counted(f, x, backend)[1] for _ in range(3)]
    assert counts == [1, 1, 1]


def test_a_guess_follows_trips_that_shrink_one_launch_later(backend):
    f = dl.grad(_loss)
    n = 3000
    used = []
    for x in (_uniform(n) * 2.0, _uniform(n), _uniform(n)):     # 4 halvings, then 3
        g = f(x)
        np.testing.assert_allclose(np.asarray(g), 0.5 ** _halvings(x), rtol=1e-15)
        used.append(dl.memory_stats()["adstack_bytes_used"] // (8 * n))
    assert used == [4, 4, 3]


def test_a_guess_past_max_adstack_bytes_is_counted_instead(backend):
    n = 8000
    x = np.where(np.arange(n) < n // 2, 0.9 * 2 ** 4, 0.9 * 2 ** 5)     # 4 and 5 halvings
    f = dl.grad(_loss)
    exact = (4 + 5) * n // 2 * 8
    with dl.config.override(max_adstack_bytes=exact + 4096):   # the guess needs 5 * n * 8
        for _ in range(3):
            g, counted = _grad_counted(f, x, backend)
            assert counted == 1
            np.testing.assert_allclose(np.asarray(g), 0.5 ** _halvings(x), rtol=1e-15)


def test_a_guess_whose_tape_makes_a_later_kernel_pass_the_limit_is_counted(backend):
    """Two taped while loops in two kernels (a host sum between them), both tapes held until
    the reverse sweep: the first kernel's guess fits alone, but with it the second kernel's
    tape passes max_adstack_bytes. The run is counted again, not refused."""
    def halve(v):
        return dl.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, v)

    def loss(x):
        y = halve(x)
        s = y.sum()
        return (halve(x * (1.0 + 0.0 * s)) * s).sum()
    n = 8000
    x = np.where(np.arange(n) < n // 2, 0.9 * 2 ** 4, 0.9 * 2 ** 5)     # 4 and 5 halvings
    f = dl.grad(loss)
    want = f(x)
    exact = 2 * (4 + 5) * n // 2 * 8
    assert dl.memory_stats()["adstack_bytes_used"] == exact
    with dl.config.override(max_adstack_bytes=exact + 1024):   # a guess of 5 needs more
        for _ in range(4):
            np.testing.assert_array_equal(f(x), want)
            assert dl.memory_stats()["adstack_bytes_used"] == exact
    y = 0.5 ** _halvings(x) * x
    np.testing.assert_allclose(want, 2 * y.sum() * 0.5 ** _halvings(x), rtol=1e-12)


def test_memory_stats_after_a_missed_guess_are_the_counted_run_s(backend):
    n = 4000
    f = dl.grad(_loss)
    f(np.full(n, 0.9 * 2 ** 5))                     # 5 halvings each: the next guess
    x = np.full(n, 1.5)
    x[0] = 0.9 * 2 ** 6                             # 1 halving each, one element 6: a miss
    f(x)
    after_miss = dl.memory_stats()["adstack_bytes_used"]
    dl.grad(lambda x: _loss(x) * 1.0)(x)            # the same loop in a plan of its own
    assert after_miss == dl.memory_stats()["adstack_bytes_used"]


def test_a_counted_loop_inside_a_taped_loop_s_body_is_never_guessed(backend):
    """The middle loop's stacks are pushed only in the reverse kernel, which re-runs the
    outer body: a short guess there would pop values no forward run made, and rerun the
    innermost loop from them (here from 0, where it never ends). Such loops always count."""
    def mid_body(w):
        u = dl.while_loop(lambda u: u < 0.5, lambda u: u * 2.0, w / (1.0 + w))
        return w * 0.3 * u

    def outer(i, v):
        return dl.while_loop(lambda w: w > 1.0, mid_body, v * 3.0)

    def per_element(x):
        out = x.copy()
        for j in range(x.size):
            v = x[j]
            for _ in range(2):
                w = v * 3.0
                while w > 1.0:
                    u = w / (1.0 + w)
                    while u < 0.5:
                        u *= 2.0
                    w = w * 0.3 * u
                v = w
            out[j] = v
        return out

    f = dl.grad(lambda x: dl.fori_loop(0, 2, outer, x).sum())
    x = np.full(64, 0.9)
    longer = x.copy()
    longer[7] = 1000.0
    for data in (x, x, longer):
        g, counted = _grad_counted(f, data, backend)
        assert counted == 1
    eps = 1e-6          # elements are independent: one central difference for all
    fd = (per_element(longer + eps) - per_element(longer - eps)) / (2 * eps)
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-6)


@pytest.mark.parametrize("threads", [4])
def test_threads_sharing_a_plan_get_their_own_counted_gradients(backend, threads):
    f = dl.grad(_loss)
    inputs = [_uniform(2000, seed) for seed in range(threads)]
    for x in inputs[1::2]:
        x[seed_position(x)] = 500.0          # half the threads need 9 halvings somewhere
    results, errors = {}, []

    def work(k):
        try:
            results[k] = [np.asarray(f(inputs[k])) for _ in range(10)]
        except Exception as e:          # reported below, with the thread's data
            errors.append((k, e))
    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors
    for k, gs in results.items():
        for g in gs:
            np.testing.assert_allclose(g, 0.5 ** _halvings(inputs[k]), rtol=1e-15)


def seed_position(x):
    return x.size // 3


def test_a_collective_body_that_tapes_and_reverses_in_one_kernel_always_counts(backend):
    """The reverse sweep runs the body's VJP, which tapes and reverses its per-element loop in
    one kernel, once per step: its stacks are read in the launch that fills them, so they are
    never guessed, even where the last step's count would fit the next."""
    size = 24
    x = np.linspace(1.1, 1.9, size)

    def grown(i, u):
        return u * (1.5 + 2.0 * (2 - i))           # the last step halves least

    def loss(x):
        def body(i, u):
            halved = dl.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, grown(i, u))
            return halved + 0.1 * np.roll(u, 1)
        return dl.fori_loop(0, 3, body, x).sum()

    def reference(x):
        u = x.copy()
        for i in range(3):
            v = grown(i, u)
            for j in range(size):
                while v[j] > 1.0:
                    v[j] *= 0.5
            u = v + 0.1 * np.roll(u, 1)
        return u.sum()

    f = dl.grad(loss)
    for _ in range(2):
        g, counted = _grad_counted(f, x, backend)
        assert counted == 3
    eps = 1e-7
    fd = np.array([(reference(x + eps * e) - reference(x - eps * e)) / (2 * eps)
                   for e in np.eye(size)])
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-6)


def test_a_short_guess_comes_before_an_error_in_summing_up_its_trips(backend, monkeypatch):
    """The trips of a guessed launch are summed up before the wait that finds a short guess
    (runtime/execute.py, on backends that queue launches): where that summing raises, the
    short guess still reruns the call counted; a guess that fit lets the error through."""
    from dloop.adstack import parallel
    f = dl.grad(_loss)
    f(_uniform(3000))                           # 3 halvings each: the guess for the next call

    def broken(values):
        raise RuntimeError("no memory for the trips' sum")
    monkeypatch.setattr(parallel, "extremes_soon", broken)
    longer = _uniform(3000, seed=1) * 2.0       # 4 each: short
    np.testing.assert_allclose(np.asarray(f(longer)), 0.5 ** _halvings(longer), rtol=1e-15)
    for _ in range(guess.PAUSE - 1):            # counted, until the plan guesses again
        f(longer)
    with pytest.raises(RuntimeError, match="trips' sum"):
        f(longer)
