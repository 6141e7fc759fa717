"""The array libraries users arrive with: which one a call's arrays come from, and the
conversions in (to NumPy, the host format every backend here consumes) and back out, through
DLPack without copies where the library allows it."""

import array_api_compat
import numpy as np

from .errors import DloopNotImplementedError, DloopTypeError

NUMPY = "numpy"


def library_of(x):
    """The library name of an array, None for Python and NumPy scalars."""
    if isinstance(x, (bool, int, float, np.generic)):
        return None
    if isinstance(x, np.ndarray):
        return NUMPY
    if array_api_compat.is_cupy_array(x):
        return "cupy"
    if array_api_compat.is_torch_array(x):
        return "torch"
    if array_api_compat.is_array_api_obj(x):
        return array_api_compat.array_namespace(x).__name__
    return None


def common_library(leaves, where):
    """The one library of a call's arrays (NumPy when there are none); a DloopError when the
    arrays come from several."""
    found = {}
    for x in leaves:
        lib = library_of(x)
        if lib is not None:
            found.setdefault(lib, x)
    if len(found) > 1:
        raise DloopTypeError(f"the arguments mix arrays of {' and '.join(sorted(found))}; "
                             "pass arrays of one library per call", where)
    lib = next(iter(found), NUMPY)
    if lib == "cupy":
        raise DloopNotImplementedError("CuPy arrays need the CUDA backend, which this version "
                                       "does not have yet; pass NumPy arrays", where)
    return lib, found.get(lib)


def to_numpy(x, where=None):
    if isinstance(x, (np.ndarray, bool, int, float, np.generic)):
        return np.asarray(x)
    if array_api_compat.is_torch_array(x):
        if x.device.type != "cpu":
            raise DloopNotImplementedError(f"a torch tensor on {x.device} needs a GPU backend, "
                                           "which this version does not have yet; pass a CPU "
                                           "tensor", where)
        if x.requires_grad:
            raise DloopTypeError(
                "a torch tensor that requires grad was passed to dloop directly, which would cut "
                "it from PyTorch's autograd; wrap the function with dloop.torch.function(fn) so "
                "that loss.backward() reaches it (or pass tensor.detach())", where)
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    return np.asarray(x)


def from_numpy(array, library, example):
    """`array` as an array of `library` (example: an input array of that library), through
    DLPack: the namespace's own from_dlpack."""
    if library == NUMPY or example is None:
        return array
    # NumPy exports only writeable, contiguous arrays through DLPack.
    array = np.require(array, requirements=["C", "W"])
    return array_api_compat.array_namespace(example).from_dlpack(array)
