"""Host sizing's per-element loops in machine code: the prefix sum of slice starts, the
interleaved layout's group maxima and placement, the 8-bit counting sort that orders
elements by work, and the least, largest and total of the trip counts in one pass. In NumPy
each is several passes with temporaries, and NumPy's cumsum is a generic accumulate loop
(about 3.5 ns per int64 element on the 2-core Xeon of docs/benchmarks.md: 0.7 ms for W2's
200,000 slice starts, as long as its taped forward kernel's pushes). These loops, compiled
once per process by the cpu backend's LLVM, make one pass each at about memory speed, and
ctypes releases the GIL for the whole call, so parallel.py's chunks run side by side on
every core instead of taking turns between NumPy calls. Arrays are 1-D, contiguous int64;
`order` may be None (element order)."""

import ctypes
import os
import threading

import numpy as np

_IR = """
; out[i] = (offset + scale * (v[0] + ... + v[i-1])) ^ flip for i < n; returns
; offset + scale * (v[0] + ... + v[n-1]). flip = -1 stores each start as ~start (the compact
; slices of kernel/kir.py). Sums wrap like NumPy's int64: sizes were checked before.
define i64 @dloop_scan(ptr noalias %v, ptr noalias %out, i64 %n, i64 %offset, i64 %scale,
                       i64 %flip) {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %s = phi i64 [%offset, %entry], [%s.next, %loop]
  %stored = xor i64 %s, %flip
  %dst = getelementptr i64, ptr %out, i64 %i
  store i64 %stored, ptr %dst
  %src = getelementptr i64, ptr %v, i64 %i
  %x = load i64, ptr %src
  %scaled = mul i64 %x, %scale
  %s.next = add i64 %s, %scaled
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  %total = phi i64 [%offset, %entry], [%s.next, %loop]
  ret i64 %total
}

; The element thread t runs: order[t], or t itself where order is null.
define internal i64 @element(ptr %order, i64 %t) alwaysinline {
entry:
  %none = icmp eq ptr %order, null
  br i1 %none, label %same, label %look
same:
  ret i64 %t
look:
  %at = getelementptr i64, ptr %order, i64 %t
  %e = load i64, ptr %at
  ret i64 %e
}

; Threads [lo, hi) in groups of `lanes` (lo a multiple of lanes): top[g] = the largest
; capacity of group g's elements (g counted from lo / lanes), *exact += their capacities;
; returns lanes * (top[0] + top[1] + ...). Capacities are not negative.
define i64 @dloop_group_maxima(ptr noalias %cap, ptr noalias %order, i64 %lo, i64 %hi,
                               i64 %lanes, ptr noalias %top, ptr noalias %exact) {
entry:
  %any = icmp slt i64 %lo, %hi
  br i1 %any, label %group, label %done
group:
  %t0 = phi i64 [%lo, %entry], [%t0.next, %group.end]
  %g = phi i64 [0, %entry], [%g.next, %group.end]
  %padded = phi i64 [0, %entry], [%padded.next, %group.end]
  %sum = phi i64 [0, %entry], [%sum.next, %group.end]
  %t0.end = add i64 %t0, %lanes
  %short = icmp slt i64 %hi, %t0.end
  %end = select i1 %short, i64 %hi, i64 %t0.end
  br label %lane
lane:
  %t = phi i64 [%t0, %group], [%t.next, %lane]
  %m = phi i64 [0, %group], [%m.next, %lane]
  %s = phi i64 [%sum, %group], [%s.next, %lane]
  %e = call i64 @element(ptr %order, i64 %t)
  %at = getelementptr i64, ptr %cap, i64 %e
  %c = load i64, ptr %at
  %bigger = icmp sgt i64 %c, %m
  %m.next = select i1 %bigger, i64 %c, i64 %m
  %s.next = add i64 %s, %c
  %t.next = add i64 %t, 1
  %more = icmp slt i64 %t.next, %end
  br i1 %more, label %lane, label %group.end
group.end:
  %slot = getelementptr i64, ptr %top, i64 %g
  store i64 %m.next, ptr %slot
  %wide = mul i64 %m.next, %lanes
  %padded.next = add i64 %padded, %wide
  %sum.next = add i64 %s.next, 0
  %g.next = add i64 %g, 1
  %t0.next = add i64 %t0, %lanes
  %again = icmp slt i64 %t0.next, %hi
  br i1 %again, label %group, label %done
done:
  %padded.all = phi i64 [0, %entry], [%padded.next, %group.end]
  %sum.all = phi i64 [0, %entry], [%sum.next, %group.end]
  %before = load i64, ptr %exact
  %after = add i64 %before, %sum.all
  store i64 %after, ptr %exact
  ret i64 %padded.all
}

; The same groups: each element's start is its group's first slot plus its lane, groups
; following each other from `offset`, lanes * top[g] slots each; raised (unless null) gets
; the group's capacity.
define void @dloop_group_place(ptr noalias %top, ptr noalias %order, i64 %lo, i64 %hi,
                               i64 %lanes, i64 %offset, ptr noalias %start,
                               ptr noalias %raised) {
entry:
  %any = icmp slt i64 %lo, %hi
  %keep = icmp eq ptr %raised, null
  br i1 %any, label %group, label %done
group:
  %t0 = phi i64 [%lo, %entry], [%t0.next, %group.end]
  %g = phi i64 [0, %entry], [%g.next, %group.end]
  %first = phi i64 [%offset, %entry], [%first.next, %group.end]
  %slot = getelementptr i64, ptr %top, i64 %g
  %c = load i64, ptr %slot
  %t0.end = add i64 %t0, %lanes
  %short = icmp slt i64 %hi, %t0.end
  %end = select i1 %short, i64 %hi, i64 %t0.end
  br label %lane
lane:
  %t = phi i64 [%t0, %group], [%t.next, %lane.end]
  %e = call i64 @element(ptr %order, i64 %t)
  %l = sub i64 %t, %t0
  %s = add i64 %first, %l
  %at = getelementptr i64, ptr %start, i64 %e
  store i64 %s, ptr %at
  br i1 %keep, label %lane.end, label %raise
raise:
  %r = getelementptr i64, ptr %raised, i64 %e
  store i64 %c, ptr %r
  br label %lane.end
lane.end:
  %t.next = add i64 %t, 1
  %more = icmp slt i64 %t.next, %end
  br i1 %more, label %lane, label %group.end
group.end:
  %wide = mul i64 %c, %lanes
  %first.next = add i64 %first, %wide
  %g.next = add i64 %g, 1
  %t0.next = add i64 %t0, %lanes
  %again = icmp slt i64 %t0.next, %hi
  br i1 %again, label %group, label %done
done:
  ret void
}

; order[lo:hi] = the elements lo..hi-1 stably sorted by the key (255 - (work >> shift)) mod
; 256, so by decreasing work: a counting sort (histogram, its exclusive scan from lo,
; placement), like NumPy's stable argsort of 8-bit keys.
define void @dloop_order_part(ptr noalias %work, i64 %lo, i64 %hi, i64 %shift,
                              ptr noalias %order) {
entry:
  %hist = alloca [256 x i64]
  call void @llvm.memset.p0.i64(ptr %hist, i8 0, i64 2048, i1 false)
  %any = icmp slt i64 %lo, %hi
  br i1 %any, label %count, label %done
count:
  %t = phi i64 [%lo, %entry], [%t.next, %count]
  %k = call i64 @key(ptr %work, i64 %t, i64 %shift)
  %bin = getelementptr i64, ptr %hist, i64 %k
  %h = load i64, ptr %bin
  %h.next = add i64 %h, 1
  store i64 %h.next, ptr %bin
  %t.next = add i64 %t, 1
  %more = icmp slt i64 %t.next, %hi
  br i1 %more, label %count, label %scan
scan:
  %b = phi i64 [0, %count], [%b.next, %scan]
  %run = phi i64 [%lo, %count], [%run.next, %scan]
  %cell = getelementptr i64, ptr %hist, i64 %b
  %size = load i64, ptr %cell
  store i64 %run, ptr %cell
  %run.next = add i64 %run, %size
  %b.next = add i64 %b, 1
  %bins = icmp slt i64 %b.next, 256
  br i1 %bins, label %scan, label %place
place:
  %u = phi i64 [%lo, %scan], [%u.next, %place]
  %ku = call i64 @key(ptr %work, i64 %u, i64 %shift)
  %cellu = getelementptr i64, ptr %hist, i64 %ku
  %pos = load i64, ptr %cellu
  %pos.next = add i64 %pos, 1
  store i64 %pos.next, ptr %cellu
  %dst = getelementptr i64, ptr %order, i64 %pos
  store i64 %u, ptr %dst
  %u.next = add i64 %u, 1
  %left = icmp slt i64 %u.next, %hi
  br i1 %left, label %place, label %done
done:
  ret void
}

define internal i64 @key(ptr %work, i64 %t, i64 %shift) alwaysinline {
entry:
  %at = getelementptr i64, ptr %work, i64 %t
  %w = load i64, ptr %at
  %down = ashr i64 %w, %shift
  %flip = sub i64 255, %down
  %k = and i64 %flip, 255
  ret i64 %k
}

; out = [min, max, sum] of v[0:n) (the sum wrapping like NumPy's int64), in one pass; for
; n = 0 the identities.
define void @dloop_extremes(ptr noalias %v, i64 %n, ptr noalias %out) {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %lo = phi i64 [9223372036854775807, %entry], [%lo.next, %loop]
  %hi = phi i64 [-9223372036854775808, %entry], [%hi.next, %loop]
  %s = phi i64 [0, %entry], [%s.next, %loop]
  %at = getelementptr i64, ptr %v, i64 %i
  %x = load i64, ptr %at
  %below = icmp slt i64 %x, %lo
  %lo.next = select i1 %below, i64 %x, i64 %lo
  %above = icmp sgt i64 %x, %hi
  %hi.next = select i1 %above, i64 %x, i64 %hi
  %s.next = add i64 %s, %x
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  %lo.out = phi i64 [9223372036854775807, %entry], [%lo.next, %loop]
  %hi.out = phi i64 [-9223372036854775808, %entry], [%hi.next, %loop]
  %s.out = phi i64 [0, %entry], [%s.next, %loop]
  store i64 %lo.out, ptr %out
  %out1 = getelementptr i64, ptr %out, i64 1
  store i64 %hi.out, ptr %out1
  %out2 = getelementptr i64, ptr %out, i64 2
  store i64 %s.out, ptr %out2
  ret void
}

declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
"""

# The interleaved layout's two loops over threads in element order (order null), one group
# of `lanes` per iteration as a <lanes x i64> vector: the loops above take about 2 cycles
# per element with their per-lane branches (0.14 and 0.12 ms for W2's 200,000 elements).
# [lo, hi) holds whole groups; each returns what the loop above would, and dloop_group_fill
# the slot after the groups it placed.
_VECTOR_IR = """
define i64 @dloop_group_maxima_v{L}(ptr noalias %cap, i64 %lo, i64 %hi, ptr noalias %top,
                                    ptr noalias %exact) {{
entry:
  %any = icmp slt i64 %lo, %hi
  br i1 %any, label %group, label %done
group:
  %t = phi i64 [%lo, %entry], [%t.next, %group]
  %g = phi i64 [0, %entry], [%g.next, %group]
  %padded = phi i64 [0, %entry], [%padded.next, %group]
  %sum = phi <{L} x i64> [zeroinitializer, %entry], [%sum.next, %group]
  %at = getelementptr i64, ptr %cap, i64 %t
  %c = load <{L} x i64>, ptr %at, align 8
  %m = call i64 @llvm.vector.reduce.smax.v{L}i64(<{L} x i64> %c)
  %slot = getelementptr i64, ptr %top, i64 %g
  store i64 %m, ptr %slot
  %wide = mul i64 %m, {L}
  %padded.next = add i64 %padded, %wide
  %sum.next = add <{L} x i64> %sum, %c
  %g.next = add i64 %g, 1
  %t.next = add i64 %t, {L}
  %again = icmp slt i64 %t.next, %hi
  br i1 %again, label %group, label %done
done:
  %padded.all = phi i64 [0, %entry], [%padded.next, %group]
  %sums = phi <{L} x i64> [zeroinitializer, %entry], [%sum.next, %group]
  %sum.all = call i64 @llvm.vector.reduce.add.v{L}i64(<{L} x i64> %sums)
  %before = load i64, ptr %exact
  %after = add i64 %before, %sum.all
  store i64 %after, ptr %exact
  ret i64 %padded.all
}}

define i64 @dloop_group_fill_v{L}(ptr noalias %top, i64 %lo, i64 %hi, i64 %offset,
                                  ptr noalias %start, ptr noalias %raised) {{
entry:
  %any = icmp slt i64 %lo, %hi
  %keep = icmp eq ptr %raised, null
  br i1 %any, label %group, label %done
group:
  %t = phi i64 [%lo, %entry], [%t.next, %group.end]
  %g = phi i64 [0, %entry], [%g.next, %group.end]
  %first = phi i64 [%offset, %entry], [%first.next, %group.end]
  %slot = getelementptr i64, ptr %top, i64 %g
  %c = load i64, ptr %slot
  %one = insertelement <{L} x i64> poison, i64 %first, i64 0
  %firsts = shufflevector <{L} x i64> %one, <{L} x i64> poison, <{L} x i32> zeroinitializer
  %s = add <{L} x i64> %firsts, <{STEPS}>
  %at = getelementptr i64, ptr %start, i64 %t
  store <{L} x i64> %s, ptr %at, align 8
  br i1 %keep, label %group.end, label %raise
raise:
  %cone = insertelement <{L} x i64> poison, i64 %c, i64 0
  %cs = shufflevector <{L} x i64> %cone, <{L} x i64> poison, <{L} x i32> zeroinitializer
  %r = getelementptr i64, ptr %raised, i64 %t
  store <{L} x i64> %cs, ptr %r, align 8
  br label %group.end
group.end:
  %wide = mul i64 %c, {L}
  %first.next = add i64 %first, %wide
  %g.next = add i64 %g, 1
  %t.next = add i64 %t, {L}
  %again = icmp slt i64 %t.next, %hi
  br i1 %again, label %group, label %done
done:
  %end = phi i64 [%offset, %entry], [%first.next, %group.end]
  ret i64 %end
}}

declare i64 @llvm.vector.reduce.smax.v{L}i64(<{L} x i64>)
declare i64 @llvm.vector.reduce.add.v{L}i64(<{L} x i64>)
"""
VECTOR_LANES = (4, 8, 16)
_IR += "".join(_VECTOR_IR.format(L=lanes, STEPS=", ".join(f"i64 {k}" for k in range(lanes)))
               for lanes in VECTOR_LANES)

_lock = threading.Lock()
_functions = {}
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_SIGNATURES = {"dloop_scan": (_I64, [_PTR, _PTR, _I64, _I64, _I64, _I64]),
               "dloop_group_maxima": (_I64, [_PTR, _PTR, _I64, _I64, _I64, _PTR, _PTR]),
               "dloop_group_place": (None, [_PTR, _PTR, _I64, _I64, _I64, _I64, _PTR, _PTR]),
               "dloop_order_part": (None, [_PTR, _I64, _I64, _I64, _PTR]),
               "dloop_extremes": (None, [_PTR, _I64, _PTR]),
               **{f"dloop_group_maxima_v{lanes}": (_I64, [_PTR, _I64, _I64, _PTR, _PTR])
                  for lanes in VECTOR_LANES},
               **{f"dloop_group_fill_v{lanes}": (_I64, [_PTR, _I64, _I64, _I64, _PTR, _PTR])
                  for lanes in VECTOR_LANES}}


def _reset_after_fork():
    global _lock
    _lock = threading.Lock()     # another thread may have held it at the fork


os.register_at_fork(after_in_child=_reset_after_fork)


# How the helpers become machine code: (ir_text, signatures) -> {name: ctypes function}.
# The cpu backend's compiler and kernel cache do it (backends/cpu/launch.host_helpers); api.py
# installs it, as this stage comes before the backends.
COMPILER = [None]


def _compiled(name):
    if not _functions:
        with _lock:
            if not _functions:
                _functions.update(COMPILER[0](_IR, _SIGNATURES))
    return _functions[name]


def _address(a):
    if a is None:
        return None
    assert a.dtype == np.int64 and a.flags.c_contiguous, (a.dtype, a.flags)
    return a.ctypes.data


def scan_into(values, out, offset=0, scale=1, invert=False):
    """out[i] = offset + scale * sum(values[:i]) (each as ~that with `invert`), for arrays
    of one size; returns offset + scale * sum(values)."""
    assert values.size == out.size
    return _compiled("dloop_scan")(_address(values), _address(out), values.size, int(offset),
                                   int(scale), -1 if invert else 0)


def group_maxima(cap, order, lo, hi, lanes, top):
    """For threads [lo, hi) (lo a multiple of lanes) running elements order[t]: top[g] = the
    largest capacity of the g-th group of `lanes` threads; returns (lanes * sum(top), the
    capacities' exact sum)."""
    exact = np.zeros(1, np.int64)
    whole = _whole_groups(order, lo, hi, lanes)
    padded = 0
    if whole > lo:
        padded = _compiled(f"dloop_group_maxima_v{lanes}")(_address(cap), lo, whole,
                                                           _address(top), _address(exact))
    padded += _compiled("dloop_group_maxima")(_address(cap), _address(order), whole, hi,
                                              lanes, _address(top[(whole - lo) // lanes:]),
                                              _address(exact))
    return padded, int(exact[0])


def group_place(top, order, lo, hi, lanes, offset, start, raised=None):
    """start[order[t]] = the first slot of t's group (groups of lanes * top[g] slots from
    `offset`) + t's lane, for threads [lo, hi); raised[order[t]] = top[g] unless None."""
    whole = _whole_groups(order, lo, hi, lanes)
    offset = int(offset)
    if whole > lo:
        offset = _compiled(f"dloop_group_fill_v{lanes}")(_address(top), lo, whole, offset,
                                                         _address(start), _address(raised))
    _compiled("dloop_group_place")(_address(top[(whole - lo) // lanes:]), _address(order),
                                   whole, hi, lanes, offset, _address(start),
                                   _address(raised))


def _whole_groups(order, lo, hi, lanes):
    """The end of [lo, hi)'s whole groups that the vector loops take (element order and a
    vector width they were built for), else lo."""
    if order is not None or lanes not in VECTOR_LANES:
        return lo
    return lo + (hi - lo) // lanes * lanes


def order_part(work, lo, hi, shift, order):
    """order[lo:hi] = lo..hi-1 stably sorted by (255 - (work >> shift)) % 256."""
    _compiled("dloop_order_part")(_address(work), lo, hi, shift, _address(order))


def extremes(values):
    """(min, max, sum) of `values` in one pass (the sum wrapping like NumPy's int64)."""
    out = np.empty(3, np.int64)
    _compiled("dloop_extremes")(_address(values), values.size, _address(out))
    return int(out[0]), int(out[1]), int(out[2])
