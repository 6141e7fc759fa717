"""The array libraries users arrive with: which one a call's arrays come from, and the
conversions in (to NumPy, the host format every backend here consumes) and back out, through
DLPack without copies where the library allows it. Device arrays stay on their device where
the call runs there: CuPy arrays (and CUDA torch tensors) on cuda, dloop.vulkan arrays on
vulkan."""

import array_api_compat
import numpy as np

from .errors import DloopNotImplementedError, DloopTypeError

NUMPY = "numpy"
VULKAN = "dloop.vulkan"
DTYPES = ("bool", "int32", "int64", "float32", "float64", "complex64",
          "complex128")   # the dtypes dloop computes in (complex: in host steps only)


def library_of(x):
    """The library name of an array, None for Python and NumPy scalars."""
    if isinstance(x, (bool, int, float, np.generic)):
        return None
    if isinstance(x, np.ndarray):
        return NUMPY
    if is_vulkan_array(x):
        return VULKAN
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
    return lib, found.get(lib)


def on_cuda(x):
    """Whether x lives in CUDA device memory (a CuPy array or a CUDA torch tensor)."""
    return array_api_compat.is_cupy_array(x) or (
        array_api_compat.is_torch_array(x) and x.device.type == "cuda")


def is_vulkan_array(x):
    """Whether x is a dloop.vulkan array: its type says it is the vulkan backend's own (a
    class attribute, so that this module needs no import of the backend)."""
    return getattr(type(x), "dloop_backend", None) == "vulkan"


def is_foreign_array(x):
    """Whether x is an array of a library other than NumPy (one a traced function captured)."""
    return hasattr(x, "__dlpack__") or is_vulkan_array(x)


def default_backend(example):
    """The backend for a call whose arrays are like `example`: cuda for arrays on a CUDA GPU,
    vulkan for dloop.vulkan arrays."""
    if is_vulkan_array(example):
        return "vulkan"
    return "cuda" if example is not None and on_cuda(example) else "cpu"


def stays_on_device(x, backend):
    """Whether x, an array of a call that runs on `backend` (a name, or None), stays where it
    is: a CUDA array on cuda, a dloop.vulkan array on vulkan."""
    return (backend == "vulkan" and is_vulkan_array(x)) or \
        (backend == "cuda" and on_cuda(x))


def to_input(x, backend, where=None):
    """x as the runtime takes it on `backend` (a backend name, or None): a device array that
    stays on the device there (stays_on_device) as CuPy (a torch tensor is shared through
    DLPack, not copied) or as the dloop.vulkan array itself; all else as NumPy."""
    if not stays_on_device(x, backend):
        return to_numpy(x, where)
    if is_vulkan_array(x):
        x.held = True
        return x
    try:
        import cupy
    except ImportError:
        raise DloopNotImplementedError(
            f"this {type(x).__name__} lives on a CUDA device, and dloop's cuda backend "
            "needs CuPy: pip install 'dloop[cuda]' (or pass arrays in host memory)",
            where) from None
    if array_api_compat.is_torch_array(x):
        _refuse_grad(x, where)
    array = x if array_api_compat.is_cupy_array(x) else \
        cupy.from_dlpack(x.detach().resolve_conj().resolve_neg())
    _check_device(array.device.id, cupy.cuda.Device().id, where)
    return array


_CUDA_DEVICE = []     # the one device the cuda backend runs on in this process: the first used


def _check_device(device, current, where):
    """The cuda backend's kernels, heaps and orders live on one device (the first one it ran
    on); an array elsewhere would be read through a foreign address, which poisons the CUDA
    context, so it is refused."""
    bound = _CUDA_DEVICE[0] if _CUDA_DEVICE else _CUDA_DEVICE.append(current) or current
    if device != current or current != bound:
        raise DloopNotImplementedError(
            f"this array is on CUDA device {device} and the current device is {current}, but "
            f"dloop's cuda backend runs on one device per process, here device {bound} (the "
            f"first it ran on): make that device current and copy the array to it (with "
            f"cupy.cuda.Device({bound}): y = cupy.asarray(x)), or run one process per GPU "
            "(CUDA_VISIBLE_DEVICES)", where)


def _refuse_grad(tensor, where):
    if tensor.requires_grad:
        raise DloopTypeError(
            "a torch tensor that requires grad was passed to dloop directly, which would cut "
            "it from PyTorch's autograd; wrap the function with dloop.torch.function(fn) so "
            "that loss.backward() reaches it (or pass tensor.detach())", where)


def to_numpy(x, where=None):
    if isinstance(x, (np.ndarray, bool, int, float, np.generic)):
        return np.asarray(x)
    if array_api_compat.is_cupy_array(x):
        return x.get()                   # a host backend was chosen for device arrays
    if array_api_compat.is_torch_array(x):
        _refuse_grad(x, where)
        # Lazy conjugate / negative views (z.conj(), z.conj().imag) export their storage
        # through DLPack without the flag: resolve them first, or the values flip sign.
        x = x.detach().resolve_conj().resolve_neg()
        if x.device.type == "cuda":
            return x.cpu().numpy()
        if x.device.type != "cpu":
            raise DloopNotImplementedError(f"a torch tensor on {x.device} has no backend "
                                           "here; pass a CPU or CUDA tensor", where)
    if hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except (BufferError, RuntimeError, TypeError, ValueError) as e:
            raise DloopTypeError(
                f"a {type(x).__name__} of dtype {getattr(x, 'dtype', '?')} cannot be read by "
                f"dloop ({e}); pass a dense array of one of {', '.join(DTYPES)} (convert "
                "bfloat16 and float16 to float32; call dloop.jax.function / "
                "dloop.torch.function for arrays being traced by JAX or PyTorch)",
                where) from None
    return np.asarray(x)


def _torch_from_numpy(array, example):
    import torch
    out = torch.from_dlpack(array)
    return out.to(example.device) if example.device.type != "cpu" else out


def from_numpy(array, library, example):
    """`array` (NumPy, CuPy from the cuda backend, a device array from the vulkan one) as an
    array of `library` on the example's device (example: an input array of that library),
    through DLPack."""
    if library == VULKAN:
        if is_vulkan_array(array) and array.backend is example.backend:
            array.held = True
            return array
        return example.backend.device_array(to_numpy(array))
    if array_api_compat.is_cupy_array(array):
        if library == "cupy":
            return array
        if library == "torch" and example.device.type == "cuda":
            import torch
            return torch.from_dlpack(array)
        array = array.get()
    array = np.asarray(array)
    if library == NUMPY or example is None:
        # A result the program did not compute (np.ones_like(x): a broadcast constant) is
        # read-only; NumPy's own function returns an array the caller may write to.
        return array if array.flags.writeable else array.copy()
    if library == "torch" and array.flags.writeable and all(
            s >= 0 and s % array.itemsize == 0 for s in array.strides):
        # A strided view (a[:, ::2], a.T) stays a view of its input, as NumPy's would
        # (design.md 32); negative strides abort PyTorch's DLPack import.
        return _torch_from_numpy(array, example)
    # NumPy exports only writeable arrays through DLPack, and other libraries dense ones.
    array = np.require(array, requirements=["C", "W"])
    out = array_api_compat.array_namespace(example).from_dlpack(array)
    if library == "torch" and example.device.type != "cpu":
        out = out.to(example.device)
    return out
