; Adstack runtime for the cpu backend: bounds-checked push, clamped pop, and the fault
; flag (semantics in kernel/kir.py). Linked into every kernel module and inlined.
; sp points at the thread's stack depth; region[base + k] is the k-th slot of the stack.

define void @dloop_fault(ptr %faults, i64 %slot, i64 %value) alwaysinline {
  store atomic i64 1, ptr %faults monotonic, align 8
  %at = add i64 %slot, 1
  %p = getelementptr i64, ptr %faults, i64 %at
  %old = atomicrmw max ptr %p, i64 %value monotonic
  ret void
}

define void @dloop_push_f64(ptr %region, i64 %base, i64 %cap, ptr %sp, double %v, ptr %faults, i64 %slot) alwaysinline {
entry:
  %d = load i64, ptr %sp
  %fits = icmp slt i64 %d, %cap
  br i1 %fits, label %write, label %overflow
write:
  %at = add i64 %base, %d
  %p = getelementptr double, ptr %region, i64 %at
  store double %v, ptr %p
  br label %done
overflow:
  %attempted = add i64 %d, 1
  call void @dloop_fault(ptr %faults, i64 %slot, i64 %attempted)
  br label %done
done:
  %next = add i64 %d, 1
  store i64 %next, ptr %sp
  ret void
}

define double @dloop_pop_f64(ptr %region, i64 %base, i64 %cap, ptr %sp) alwaysinline {
entry:
  %d = load i64, ptr %sp
  %dec = sub i64 %d, 1
  %empty = icmp slt i64 %dec, 0
  %top = select i1 %empty, i64 0, i64 %dec
  store i64 %top, ptr %sp
  %fits = icmp slt i64 %top, %cap
  br i1 %fits, label %read, label %outside
read:
  %at = add i64 %base, %top
  %p = getelementptr double, ptr %region, i64 %at
  %v = load double, ptr %p
  ret double %v
outside:
  ret double 0.0
}

define void @dloop_push_f32(ptr %region, i64 %base, i64 %cap, ptr %sp, float %v, ptr %faults, i64 %slot) alwaysinline {
entry:
  %d = load i64, ptr %sp
  %fits = icmp slt i64 %d, %cap
  br i1 %fits, label %write, label %overflow
write:
  %at = add i64 %base, %d
  %p = getelementptr float, ptr %region, i64 %at
  store float %v, ptr %p
  br label %done
overflow:
  %attempted = add i64 %d, 1
  call void @dloop_fault(ptr %faults, i64 %slot, i64 %attempted)
  br label %done
done:
  %next = add i64 %d, 1
  store i64 %next, ptr %sp
  ret void
}

define float @dloop_pop_f32(ptr %region, i64 %base, i64 %cap, ptr %sp) alwaysinline {
entry:
  %d = load i64, ptr %sp
  %dec = sub i64 %d, 1
  %empty = icmp slt i64 %dec, 0
  %top = select i1 %empty, i64 0, i64 %dec
  store i64 %top, ptr %sp
  %fits = icmp slt i64 %top, %cap
  br i1 %fits, label %read, label %outside
read:
  %at = add i64 %base, %top
  %p = getelementptr float, ptr %region, i64 %at
  %v = load float, ptr %p
  ret float %v
outside:
  ret float 0.0
}

define void @dloop_push_i64(ptr %region, i64 %base, i64 %cap, ptr %sp, i64 %v, ptr %faults, i64 %slot) alwaysinline {
entry:
  %d = load i64, ptr %sp
  %fits = icmp slt i64 %d, %cap
  br i1 %fits, label %write, label %overflow
write:
  %at = add i64 %base, %d
  %p = getelementptr i64, ptr %region, i64 %at
  store i64 %v, ptr %p
  br label %done
overflow:
  %attempted = add i64 %d, 1
  call void @dloop_fault(ptr %faults, i64 %slot, i64 %attempted)
  br label %done
done:
  %next = add i64 %d, 1
  store i64 %next, ptr %sp
  ret void
}

define i64 @dloop_pop_i64(ptr %region, i64 %base, i64 %cap, ptr %sp) alwaysinline {
entry:
  %d = load i64, ptr %sp
  %dec = sub i64 %d, 1
  %empty = icmp slt i64 %dec, 0
  %top = select i1 %empty, i64 0, i64 %dec
  store i64 %top, ptr %sp
  %fits = icmp slt i64 %top, %cap
  br i1 %fits, label %read, label %outside
read:
  %at = add i64 %base, %top
  %p = getelementptr i64, ptr %region, i64 %at
  %v = load i64, ptr %p
  ret i64 %v
outside:
  ret i64 0
}

define void @dloop_push_i32(ptr %region, i64 %base, i64 %cap, ptr %sp, i32 %v, ptr %faults, i64 %slot) alwaysinline {
entry:
  %d = load i64, ptr %sp
  %fits = icmp slt i64 %d, %cap
  br i1 %fits, label %write, label %overflow
write:
  %at = add i64 %base, %d
  %p = getelementptr i32, ptr %region, i64 %at
  store i32 %v, ptr %p
  br label %done
overflow:
  %attempted = add i64 %d, 1
  call void @dloop_fault(ptr %faults, i64 %slot, i64 %attempted)
  br label %done
done:
  %next = add i64 %d, 1
  store i64 %next, ptr %sp
  ret void
}

define i32 @dloop_pop_i32(ptr %region, i64 %base, i64 %cap, ptr %sp) alwaysinline {
entry:
  %d = load i64, ptr %sp
  %dec = sub i64 %d, 1
  %empty = icmp slt i64 %dec, 0
  %top = select i1 %empty, i64 0, i64 %dec
  store i64 %top, ptr %sp
  %fits = icmp slt i64 %top, %cap
  br i1 %fits, label %read, label %outside
read:
  %at = add i64 %base, %top
  %p = getelementptr i32, ptr %region, i64 %at
  %v = load i32, ptr %p
  ret i32 %v
outside:
  ret i32 0
}

define void @dloop_push_i8(ptr %region, i64 %base, i64 %cap, ptr %sp, i8 %v, ptr %faults, i64 %slot) alwaysinline {
entry:
  %d = load i64, ptr %sp
  %fits = icmp slt i64 %d, %cap
  br i1 %fits, label %write, label %overflow
write:
  %at = add i64 %base, %d
  %p = getelementptr i8, ptr %region, i64 %at
  store i8 %v, ptr %p
  br label %done
overflow:
  %attempted = add i64 %d, 1
  call void @dloop_fault(ptr %faults, i64 %slot, i64 %attempted)
  br label %done
done:
  %next = add i64 %d, 1
  store i64 %next, ptr %sp
  ret void
}

define i8 @dloop_pop_i8(ptr %region, i64 %base, i64 %cap, ptr %sp) alwaysinline {
entry:
  %d = load i64, ptr %sp
  %dec = sub i64 %d, 1
  %empty = icmp slt i64 %dec, 0
  %top = select i1 %empty, i64 0, i64 %dec
  store i64 %top, ptr %sp
  %fits = icmp slt i64 %top, %cap
  br i1 %fits, label %read, label %outside
read:
  %at = add i64 %base, %top
  %p = getelementptr i8, ptr %region, i64 %at
  %v = load i8, ptr %p
  ret i8 %v
outside:
  ret i8 0
}
