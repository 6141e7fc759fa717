"""Capacities of counted loops guessed from the plan's last count (design.md 26).

A loop whose trips no expression gives (a while loop, a bound computed in the loop nest) is
counted by a kernel that runs the whole loop once more before the taped run: for W2's Newton
solves a third of its kernel time, and on a GPU a wait for the counts. A program is usually
called again on data much like the last call's, so a kernel plan remembers its last counts,
and the next launch sizes every element's stacks for the longest trip count it saw, without
counting. Every push checks its element's capacity, so a guess that is too small raises
GuessMissed from the fault check instead of an overflow error, and the execution runs again
with counted, exact capacities: a gradient is never computed from a short stack.

Guesses are made only where a short stack is found before anything reads it. The kernel
tapes the loop itself: not a loop inside a taped loop's body, whose stacks only the reverse
kernel fills, as it re-runs that body; a reverse sweep over pushes that never happened could
recompute a loop that does not end. A guessed launch's faults are read before the next
launch: at once on backends whose launches end before they return (cpu, interpret), and on
Vulkan and cuda, which queue launches, by waiting for it (Execution._kernel). A kernel that
reverses its own tapes too (a grad whose two sweeps the schedule joined: W1, W2) runs its
reverse sweep before that read, on zeros past a short stack: the loops it re-runs have trip
counts from their expressions or its tapes, so it ends, and its overflow comes before any
fault that sweep raised from those zeros (an index out of bounds): kernel/lower.py makes a
stack's fault slot with the stack, before the slots of the ops that read it, and
faults.check raises the first. Collective bodies' such kernels count (program.py sets
KernelPlan.guessable).

A guess is made only where it costs at most 1/layout.MAX_PADDING more tape than the count
did (elements of about equal trip counts: W2's 3 to 5 steps; not one long element among
short ones), and, after a miss, only once the plan has counted PAUSE launches (the run
again first; twice as many after each further miss), so trips that keep growing cost a
count per call, not a wasted taped run. A guessed launch that fit records its own trips
(its tokens' longest and total: on the host at once, on cuda by a pass queued behind the
launch) as the next guess, so the guess follows trips that shrink one launch later. A
guess that would pass max_adstack_bytes, where the count might not, also runs the call
again, counted."""

from ..adstack.layout import MAX_PADDING
from ..adstack.parallel import extremes

PAUSE = 4


class GuessMissed(Exception):
    """A guessed capacity was too small: the execution must run again, counted. Internal:
    it never reaches the user. args: (the plan that guessed,)."""


class Seen:
    """A plan's last count: elements, and per loop its longest and total trips."""
    __slots__ = ("n", "longest", "total", "pause", "misses")

    def __init__(self, n, longest, total, pause, misses):
        self.n, self.longest, self.total = n, longest, total
        self.pause, self.misses = pause, misses


def guess(plan, n, loops):
    """{loop_id: longest trips} to size `loops` by, or None where the plan must count. Plans
    are shared by threads: a race here only changes which launches count."""
    seen = plan.seen
    if seen is None or seen.n != n or seen.pause:
        return None
    if any(loop not in seen.longest or
           n * seen.longest[loop] * MAX_PADDING > seen.total[loop] * (MAX_PADDING + 1)
           for loop in loops):
        return None
    return {loop: seen.longest[loop] for loop in loops}


def remember(plan, n, counts, after_guess=False):
    """After a count, or a guessed launch that fit (after_guess: its tokens are the counts):
    counts {loop_id: per-element trips, or the function parallel.extremes_soon made of
    them}."""
    before = plan.seen
    longest, total = {}, {}
    for loop, c in counts.items():
        _, longest[loop], total[loop] = c() if callable(c) else \
            extremes(c) if c.size else (0, 0, 0)
    if before is None:
        plan.seen = Seen(n, longest, total, 0, 0)
        return
    plan.seen = Seen(n, longest, total,
                     before.pause if after_guess else max(before.pause - 1, 0), before.misses)


def missed(plan):
    """A guess fell short: count PAUSE * 2^misses launches, the run again first, before
    guessing again."""
    seen = plan.seen
    if seen is not None:
        seen.pause = PAUSE << min(seen.misses, 8)
        seen.misses += 1
