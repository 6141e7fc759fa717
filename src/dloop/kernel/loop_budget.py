"""STAGE 4 — loops on a driver with a silent budget of loop passes per thread.

Mesa's lavapipe ends every loop of a shader invocation, without an error, at the 65,536th loop
header the invocation executes: headers count each pass of each loop, plus the check that ends
each loop entered (two loops of 40,000 trips in a row run 40,000 and 25,534 passes; one loop of
65,535 trips runs whole, its 65,536th header being its own end). The launch
check of runtime/execute.py sees one loop's trip counts; nested or consecutive loops, and loops
no adstack is sized for (`jit`), are cut short unseen. Here a counter carried through every
loop of the kernel mirrors the driver's count, and a thread whose count passed the budget
raises a fault, so a result that a cut loop left wrong is never returned. (A thread's last
header is always the end of a loop, so a count of exactly budget + 1 lost nothing.)

Loops that only the renderer makes (the Vulkan backend's exact float remainder, for quotients
of 2^18 or more) are not counted: the counter can only miss those."""

import dataclasses

import numpy as np

from . import kir

I64, BOOL = np.dtype(np.int64), np.dtype(bool)


def guard_loop_passes(kernel, budget):
    """Make `kernel` (in place) fault where the driver cut one of its loops short. `budget`:
    the most passes one loop may run alone (caps.max_loop_trips). A cut fori loop ran fewer
    passes than its trip count; a while loop can only be suspected, where the thread's
    headers reached budget + 1 (one that ends exactly there is refused too)."""
    first = next((s for s in kernel.body if isinstance(s, (kir.For, kir.While))), None)
    if first is None:
        return
    body, count, short = _counted(kernel.body, kir.Const(0, I64), kir.Const(False, BOOL),
                                  budget)
    if kernel.buffer_index("faults") is None:
        kernel.buffers.append(kir.BufferSpec("faults", I64))
    kernel.faults.append(kir.FaultSpec("loop_budget", first.src, {"budget": budget}))
    body.append(kir.If(short, [kir.Fault(len(kernel.faults) - 1, count)]))
    kernel.body = body


def _counted(stmts, count, short, budget):
    """stmts with every loop counting the thread's loop headers from `count` and or-ing into
    `short` whether one was cut; (stmts, count after, short after)."""
    out = []
    for s in stmts:
        if not isinstance(s, (kir.For, kir.While)):
            out.append(s)
            continue
        entered = _op(out, "add", count, kir.Const(1, I64))    # the check that ends the loop
        inner, inner_short, passes = kir.KVar(I64), kir.KVar(BOOL), kir.KVar(I64)
        changes = {}
        at_body, short_at_body = inner, inner_short
        if isinstance(s, kir.While):
            changes["cond_body"], at_body, short_at_body = _counted(
                s.cond_body, inner, inner_short, budget)
        body, after, short_after = _counted(s.body, at_body, short_at_body, budget)
        yields = [_op(body, "add", after, kir.Const(1, I64)), short_after,
                  _op(body, "add", passes, kir.Const(1, I64))]
        count, was_short, ran = kir.KVar(I64), kir.KVar(BOOL), kir.KVar(I64)
        out.append(dataclasses.replace(
            s, carries=s.carries + [inner, inner_short, passes],
            inits=s.inits + [entered, short, kir.Const(0, I64)], body=body,
            yields=s.yields + yields, outs=s.outs + [count, was_short, ran], **changes))
        if isinstance(s, kir.For):
            lo, hi = (_wide(out, x) for x in (s.lo, s.hi))
            trips = _op(out, "max", _op(out, "sub", hi, lo), kir.Const(0, I64))
            cut = _op(out, "ne", ran, trips, BOOL)
        else:
            cut = _op(out, "gt", count, kir.Const(budget, I64), BOOL)
        short = _op(out, "or", was_short, cut, BOOL)
    return out, count, short


def _op(stmts, op, a, b, dtype=I64):
    out = kir.KVar(dtype)
    stmts.append(kir.Assign(out, op, (a, b)))
    return out


def _wide(stmts, x):
    """x (a loop bound of any integer type) as int64."""
    if np.dtype(x.dtype) == I64:
        return x
    out = kir.KVar(I64)
    stmts.append(kir.Assign(out, "convert", (x,)))
    return out
