"""Read a launch's fault flags (after the backend synchronised) and raise the user's error.
Each launch gets a fresh, zeroed flag buffer, and many faulting threads give one error."""

from ..config import config
from ..errors import (AdstackOverflowError, DloopIndexError, DloopNotImplementedError,
                      DloopValueError)
from .guess import GuessMissed


def check(kernel, faults, layouts):
    if not faults[0]:
        return
    for slot, spec in enumerate(kernel.faults):
        value = int(faults[1 + slot])
        if value:
            raise _error(spec, value, layouts)


def _error(spec, value, layouts):
    if spec.kind == "loop_budget":
        return DloopNotImplementedError(
            f"an element's loops here need {value:,} loop headers in all (each pass, and each "
            f"loop's end), and this Vulkan driver ends a thread's loops after "
            f"{spec.detail['budget']:,} passes without an error (Mesa's lavapipe does), so the "
            "results would be wrong; run this call on the cpu backend, or on a GPU", spec.src)
    if spec.kind == "int32_range":
        return DloopValueError(
            "an int64 value computed here passes the int32 range (2^31), and this device "
            "holds int64 in 32 bits (a Vulkan device without shaderInt64), where it would "
            "wrap; keep int64 values within +-2^31 here, or run this call on a device with "
            "shaderInt64 or on the cpu backend", spec.src)
    if spec.kind == "index":
        return DloopIndexError(f"an index is out of bounds for an array of shape "
                               f"{spec.detail['shape']} (negative indices count from the end)",
                               spec.src)
    layout = layouts.get(spec.detail["loop_id"])
    if layout is not None and layout.guessed_by is not None:
        return GuessMissed(layout.guessed_by)
    capacity = int(layout.host_cap.max()) if layout is not None and layout.host_cap.size else 0
    if config.adstack_capacity is not None:
        fix = (f"raise dloop.config.adstack_capacity to at least {value}, or set it to None "
               "so that dloop sizes every stack exactly from the data")
    else:
        fix = ("exact sizing should never overflow: please report this with the code that "
               f"triggers it; dloop.config.update('adstack_capacity', {value}) works around it")
    return AdstackOverflowError(
        f"adstack overflow in this loop: the stack of carry {spec.detail['carry']} "
        f"({spec.detail['dtype']}) holds at most {capacity} entries per element, but an "
        f"element attempted {value} pushes; the gradient was not computed. To fix: {fix}",
        spec.src)
