// Adstack runtime for the cuda backend: bounds-checked push, clamped pop, and the fault
// flags (semantics in kernel/kir.py). #included by every generated kernel; all inlined.
// sp is the thread's stack depth; region[base + k * lanes] is the k-th slot of the stack
// (lanes > 1: the slots of a warp's stacks are interleaved, so a warp's push is one store).
#pragma once

// faults[0] = 1 and faults[1 + slot] = max(faults[1 + slot], value), atomically: many
// threads may overflow at once, and the host reads one flag and the largest depth.
__device__ __forceinline__ void dloop_fault(long long* faults, int slot, long long value) {
  atomicMax(faults, 1LL);
  atomicMax(faults + 1 + slot, value);
}

// An overflowing push writes nothing (no out-of-bounds store) but still counts, so the
// fault records the depth the element really needed.
template <typename T>
__device__ __forceinline__ void dloop_push(T* region, long long base, long long cap,
                                           long long lanes, long long& sp, T value,
                                           long long* faults, int slot) {
  if (sp < cap) {
    region[base + sp * lanes] = value;
  } else {
    dloop_fault(faults, slot, sp + 1);
  }
  sp += 1;
}

// Pops clamp at zero and read 0 past the capacity, so a stack that overflowed in the
// forward sweep never reads outside its slice in the reverse sweep.
template <typename T>
__device__ __forceinline__ T dloop_pop(const T* region, long long base, long long cap,
                                       long long lanes, long long& sp) {
  sp = sp > 0 ? sp - 1 : 0;
  return sp < cap ? region[base + sp * lanes] : T(0);
}
