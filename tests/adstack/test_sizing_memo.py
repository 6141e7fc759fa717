"""A launch's sizing kept from the last call (runtime/sizing_memo.py): reused only while the
arrays it read hold the same values; trip counts changed in place, or a changed setting,
size anew. Gradients against the closed form a**n of sum(fori_loop(0, n, v * a, x))."""

import numpy as np
import pytest

import dloop as dl
from dloop.runtime import sizing_memo


@pytest.fixture
def lookups(monkeypatch):
    """Whether each sizing lookup found the last call's sizing."""
    found = []
    real = sizing_memo.lookup
    monkeypatch.setattr(sizing_memo, "lookup",
                        lambda *a: found.append(bool(hit := real(*a))) or hit)
    return found


def _grad(n, a=0.9):
    return dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * a, x).sum())


def test_same_trip_counts_reuse_changed_ones_size_anew(backend, lookups):
    n = np.arange(3000) % 37
    x = np.linspace(0.5, 1.5, 3000)
    g = _grad(n)
    for _ in range(2):
        np.testing.assert_allclose(g(x), 0.9 ** n, rtol=1e-13)
    n[::3] = 40 - n[::3]                     # in place: the same array, other values
    np.testing.assert_allclose(g(x), 0.9 ** n, rtol=1e-13)
    n[:] = n[::-1].copy()
    np.testing.assert_allclose(g(x), 0.9 ** n, rtol=1e-13)
    assert lookups == [False, True, False, False]


def test_a_new_array_of_the_same_values_reuses(backend, lookups):
    x = np.linspace(0.5, 1.5, 500)
    for k in range(3):
        n = np.arange(500) % 11                  # a new array each call
        np.testing.assert_allclose(_grad(n, 0.8)(x), 0.8 ** n, rtol=1e-13)
    assert lookups == [False, True, True]


def test_a_new_array_is_compared_once_then_found_by_identity(backend, monkeypatch):
    """After a hit by value the memo keeps the new array's kept copy in place of the old,
    so later calls with that array compare nothing (an 8 MB comparison at every call
    before, on a GPU a launch and a read back)."""
    from dloop.runtime.execute import Execution
    from dloop.trace import captured_copies
    monkeypatch.setattr(captured_copies, "MIN_BYTES", 0)      # the trips' copy kept
    compared = []
    real = Execution._all_equal
    monkeypatch.setattr(Execution, "_all_equal",
                        lambda self, pairs: compared.append(len(pairs)) or real(self, pairs))
    x = np.linspace(0.5, 1.5, 600)
    old = np.arange(600) % 13
    new = old.copy()
    counts = []
    for n in [old, old, new, new, new]:
        compared.clear()
        np.testing.assert_allclose(_grad(n, 0.85)(x), 0.85 ** n, rtol=1e-13)
        counts.append(len(compared))
    assert counts == [0, 0, 1, 0, 0], counts


class _Plan:
    """What sizing_memo reads and sets of a kernel plan."""
    sizing_memo = None


def _keep(plan, values, immutable):
    sizing_memo.store(plan, "key", values, {0: values[0]}, None, {}, np, immutable)


@pytest.mark.parametrize("meanwhile", ["given up", "sized anew"])
def test_a_hit_by_value_leaves_what_another_thread_did_meanwhile(monkeypatch, meanwhile):
    """Between a lookup's comparison and its adoption of the new inputs another thread may
    give the plan's sizing up for the budget (a store for another plan), or keep a sizing of
    other values for the plan: the adoption then changes nothing. Set back, the sizing
    given up was held with no bytes counted, past MAX_BYTES; the other values' sizing was
    pushed out by an older one. (all_equal stands for the other thread: it runs there.)"""
    from collections import OrderedDict
    monkeypatch.setattr(sizing_memo, "_held", OrderedDict())
    monkeypatch.setattr(sizing_memo, "MAX_BYTES", 12_000)           # one sizing of 8,000
    old, other = np.arange(1000), np.arange(1000) + 1
    new = old.copy()
    immutable = lambda a: a is new                                   # noqa: E731
    mine, theirs = _Plan(), _Plan()
    _keep(mine, [old], immutable)

    def all_equal(pairs):
        if meanwhile == "given up":
            _keep(theirs, [other], immutable)
            assert mine.sizing_memo is None
        else:
            _keep(mine, [other], immutable)
        return all(np.array_equal(a, b) for a, b in pairs)

    caps, _, _ = sizing_memo.lookup(mine, "key", [new], all_equal, immutable)
    np.testing.assert_array_equal(caps[0], old)          # this call's hit stands
    if meanwhile == "given up":
        assert mine.sizing_memo is None
        assert sizing_memo.held_bytes() <= sizing_memo.MAX_BYTES
    else:
        np.testing.assert_array_equal(mine.sizing_memo.inputs[0], other)


def test_a_changed_limit_sizes_anew(backend, lookups):
    n = np.arange(400) % 9
    x = np.ones(400)
    g = _grad(n, 0.7)
    g(x)
    with dl.config.override(max_adstack_bytes=100):
        with pytest.raises(dl.DloopMemoryError):
            g(x)
    np.testing.assert_allclose(g(x), 0.7 ** n, rtol=1e-13)
    assert lookups == [False, False, True]      # the limit is part of the key


def test_counted_loops_are_kept_only_under_a_guess(backend, lookups):
    """A while loop's trips are counted on the first call. The next call sizes by a guess
    from that count (guess.py), and the sizing is kept under the guess; trips that outgrow it
    miss the guess, are counted and run again, correctly.
    v_n = x a^n after n(a) steps: d/da = n x a^(n - 1)."""
    x = np.linspace(1.0, 1.2, 300)
    g = dl.grad(lambda a: dl.while_loop(lambda v: v < 10.0, lambda v: v * a, x * 1.0).sum())

    def closed(a):
        n = np.zeros_like(x)
        v = x.copy()
        while (v < 10.0).any():
            n += v < 10.0
            v = np.where(v < 10.0, v * a, v)
        return n * x * a ** (n - 1)
    for a in [1.5, 1.5, 1.5, 1.3, 1.3]:
        np.testing.assert_allclose(g(np.full_like(x, a)), closed(a), rtol=1e-13)
    # 1.5: counted, guessed (kept), kept; 1.3: the kept guess misses, then counted (a miss
    # pauses guessing, guess.PAUSE).
    assert lookups == [False, True, True]


def test_kept_sizings_share_one_memory_budget(backend, lookups, monkeypatch):
    """Each program keeps its plans' sizings, and a cache of many programs could hold
    MAX_BYTES each: the budget is for all of them, the least recently used given up first."""
    n = np.arange(1000) % 13
    x = np.linspace(0.5, 1.5, 1000)
    once = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.9, x).sum())
    twice = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.9 * 0.9, x).sum())
    sizing_memo._held.clear()
    once(x)
    one = sizing_memo.held_bytes()
    assert one > 0
    monkeypatch.setattr(sizing_memo, "MAX_BYTES", one)
    for g, a in [(once, 0.9), (twice, 0.81), (once, 0.9), (once, 0.9)]:
        np.testing.assert_allclose(g(x), a ** n, rtol=1e-13)
        assert sizing_memo.held_bytes() <= one
    # once: sized, kept, reused; twice: sized, once's given up; once: sized again, reused.
    assert lookups == [False, True, False, False, True]


def test_a_kept_sizing_does_not_share_the_caller_s_trip_counts(backend, lookups):
    """The kept capacities were the caller's own trip-count array (a bound used as it is):
    refilled in place, then a copy of its old values passed, the lookup matched and handed
    back the refilled values as capacities, a spurious overflow."""
    x = np.linspace(0.5, 1.5, 3000)
    g = dl.grad(lambda x, n: dl.fori_loop(0, n, lambda i, v: v * 0.9, x).sum())
    buffer = (np.arange(3000) % 37).astype(np.int64)
    np.testing.assert_allclose(g(x, buffer), 0.9 ** buffer, rtol=1e-13)
    batch = buffer.copy()
    buffer[:] = 1
    np.testing.assert_allclose(g(x, batch), 0.9 ** batch, rtol=1e-13)
    assert lookups == [False, True]


def test_a_freed_program_s_kept_sizing_leaves_the_budget(backend):
    """A program that leaves the program cache frees its plans: their bytes leave the
    budget (noted by a weakref callback, counted at the next use of the budget)."""
    import gc

    from dloop import api
    n = np.arange(2000) % 17
    sizing_memo._held.clear()
    np.testing.assert_allclose(_grad(n, 0.6)(np.ones(2000)), 0.6 ** n, rtol=1e-13)
    assert sizing_memo.held_bytes() > 0
    with api._PROGRAMS_LOCK:
        api._PROGRAMS.clear()
    gc.collect()
    assert sizing_memo.held_bytes() == 0


def test_a_vjp_keeps_no_sizing_to_push_others_out(backend, monkeypatch):
    """A vjp's programs run once: a sizing kept for them would only push other programs'
    out of the shared budget."""
    n = np.arange(2000) % 17
    x = np.ones(2000)
    g = _grad(n, 0.6)
    sizing_memo._held.clear()
    g(x)
    held = sizing_memo.held_bytes()
    monkeypatch.setattr(sizing_memo, "MAX_BYTES", held)
    out, f_vjp = dl.vjp(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.7, x), x)
    np.testing.assert_allclose(f_vjp(np.ones(2000))[0], 0.7 ** n, rtol=1e-13)
    assert sizing_memo.held_bytes() == held > 0


def test_a_plan_freed_by_garbage_collection_inside_the_budget_s_lock():
    """A plan kept alive only by a reference cycle (a user's object holding a pullback) is
    freed by the cycle collector, which may run at any allocation, inside the budget's
    locked code too: its weakref callback took that lock again, a deadlock. The collection
    is moved over the allocations of one store; a hung child fails the test."""
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent("""
        import gc, numpy as np
        from dloop.runtime import sizing_memo as sm
        from dloop.adstack.layout import LoopLayout
        class Plan:
            sizing_memo = None
        def keep(plan):
            cap = np.ones(8, np.int64)
            sm.store(plan, sm.key(8), [cap], {0: cap}, None,
                     {0: LoopLayout(cap, cap, {})}, np)
        for k in range(1, 40):
            gc.collect()
            gc.disable()
            a = Plan()
            a.cycle = a
            keep(a)
            del a
            b = Plan()
            gc.set_threshold(gc.get_count()[0] + k)
            gc.enable()
            keep(b)
        print("finished")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert "finished" in proc.stdout, proc.stderr
