"""A toy backend, registered only through the backend table: the interpreter under another
name, with the caps of a small device (32-bit indices, no float64 transcendentals) that runs
elements in order of their trip counts, sizes adstacks through its own array namespace and
interleaves the tapes of groups of 4 elements (as SIMD and GPU backends do). Its
launch checks that every integer the kernel is handed fits 32 bits, as such a device needs.
tests/test_toy_backend.py runs the cross-backend suites with it."""

import numpy as np

from dloop.backends.base import Backend, Caps
from dloop.backends.interpret.launch import InterpretBackend

FLOAT32_MATH = frozenset(pair for pair in Caps().native_math if pair[1] == "float32")


class ToyBackend(InterpretBackend):
    name = "toy"
    caps = Caps(index64=False, native_math=FLOAT32_MATH, order_elements=True,
                sizes_on_device=True, tape_lanes=4)

    legalize = Backend.legalize          # a device: composites and float64 math expanded

    def launch(self, kernel, n_threads, buffers):
        assert n_threads < 2 ** 31
        order = kernel.buffer_index("order")
        if order is not None:           # each element exactly once
            assert np.array_equal(np.sort(buffers[order]), np.arange(n_threads))
        for spec, buf in zip(kernel.buffers, buffers):
            if spec.kind in ("start", "cap") and buf.size:
                assert int(buf.max()) + int(buf.sum() > 0) < 2 ** 31, "offset beyond 32 bits"
        super().launch(kernel, n_threads, buffers)
