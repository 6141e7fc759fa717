"""Counted loops sized from their plan's last count (runtime/guess.py): a later call skips
the counting pass, a guess that falls short runs the call again counted, and every gradient
is the counted one. Closed forms: halving v until v <= 1 gives v * 0.5**k, so the gradient
of the sum is 0.5**k per element, k its trip count."""

import threading

import numpy as np
import pytest

import dloop as dl
from dloop.backends.base import get_backend
from dloop.runtime import guess


def _halvings(x):
    return np.ceil(np.log2(x)).astype(int)          # trips of the loop below, for x > 1


def _loss(x):
    return dl.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, x).sum()


def _guessing(backend):
    """Whether the backend guesses (runtime/guess.py): its launches end before they return."""
    return get_backend(backend).synchronous


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
    assert (counted, counted_again) == (1, 0 if _guessing(backend) else 1)
    np.testing.assert_array_equal(np.asarray(second), np.asarray(first))
    np.testing.assert_allclose(np.asarray(second), 0.5 ** _halvings(x), rtol=1e-15)


def test_a_short_guess_runs_the_call_again_counted(backend):
    f = dl.grad(_loss)
    f(_uniform(3000))                           # 3 halvings each: the guess for the next call
    longer = _uniform(3000, seed=1) * 2.0       # 4 each
    g, counted = _grad_counted(f, longer, backend)
    assert counted == 1                         # the run again (or, not guessing, the count)
    np.testing.assert_allclose(np.asarray(g), 0.5 ** _halvings(longer), rtol=1e-15)
    # After a miss the plan counts PAUSE launches (the run again first) before guessing.
    counts = [_grad_counted(f, longer, backend)[1] for _ in range(guess.PAUSE)]
    guessing = _guessing(backend)
    assert counts == [1] * (guess.PAUSE - 1) + [0 if guessing else 1]
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


def test_guesses_are_refreshed_by_a_count(backend, monkeypatch):
    monkeypatch.setattr(guess, "REFRESH", 2)
    f = dl.grad(_loss)
    x = _uniform(1000)
    counts = [_grad_counted(f, x, backend)[1] for _ in range(6)]
    assert counts == ([1, 0, 0, 1, 0, 0] if _guessing(backend) else [1] * 6)


def test_a_nested_loop_guessed_short_inside_runs_again(backend):
    trips = np.array([2, 3, 1, 2] * 50)

    def loss(x):
        def outer(i, v):
            return dl.while_loop(lambda w: w > 1.0, lambda w: w * 0.5, v * 3.0)
        return dl.fori_loop(0, trips, outer, x).sum()

    f = dl.grad(loss)
    x = np.full(trips.size, 0.9)
    f(x)
    x2 = x.copy()
    x2[7] = 0.95 * 2 ** 6          # its inner loop now halves 8 times at the first step
    g, counted = _grad_counted(f, x2, backend)
    assert counted == 1            # the run again, or (not guessing) the only run

    def per_element(x):
        out = x.copy()
        for j in range(x.size):
            v = x[j]
            for _ in range(trips[j]):
                v = v * 3.0
                while v > 1.0:
                    v *= 0.5
            out[j] = v
        return out
    eps = 1e-6          # elements are independent: one central difference for all
    fd = (per_element(x2 + eps) - per_element(x2 - eps)) / (2 * eps)
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-8)


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
