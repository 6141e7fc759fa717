"""Coverage of the array API standard (2023.12, and the functions 2024.12 adds) by dloop's
namespace for traced arrays.

    python tools/array_api_coverage.py            # rewrites docs/array_api_coverage.md
    python tools/array_api_coverage.py --check    # exits 1 if the file is out of date

The function lists are the standard's sections, all of them; "supported" is read from the
namespace itself (a name missing there raises DloopAttributeError, an AttributeError)."""

import pathlib
import sys

from dloop.trace import array_api

SECTIONS = {
    "Constants": "e inf nan newaxis pi",
    "Creation functions": """arange asarray empty empty_like eye from_dlpack full full_like
        linspace meshgrid ones ones_like tril triu zeros zeros_like""",
    "Data type functions": "astype can_cast finfo iinfo isdtype result_type",
    "Element-wise functions": """abs acos acosh add asin asinh atan atan2 atanh bitwise_and
        bitwise_left_shift bitwise_invert bitwise_or bitwise_right_shift bitwise_xor ceil clip
        conj copysign cos cosh divide equal exp expm1 floor floor_divide greater greater_equal
        hypot imag isfinite isinf isnan less less_equal log log1p log2 log10 logaddexp
        logical_and logical_not logical_or logical_xor maximum minimum multiply negative
        not_equal positive pow real remainder round sign signbit sin sinh square sqrt subtract
        tan tanh trunc""",
    "Indexing functions": "take",
    "Inspection": "__array_namespace_info__",
    "Linear algebra functions": "matmul matrix_transpose tensordot vecdot",
    "Manipulation functions": """broadcast_arrays broadcast_to concat expand_dims flip moveaxis
        permute_dims repeat reshape roll squeeze stack tile unstack""",
    "Searching functions": "argmax argmin count_nonzero nonzero searchsorted where",
    "Set functions": "unique_all unique_counts unique_inverse unique_values",
    "Sorting functions": "argsort sort",
    "Statistical functions": "cumulative_sum max mean min prod std sum var",
    "Utility functions": "all any",
    "Added in 2024.12": "cumulative_prod diff nextafter reciprocal take_along_axis",
}
# The standard's extensions, read from the namespace's attribute of that name
# (tests/features/test_linalg.py and test_decompositions.py check xp.linalg,
# test_complex.py xp.fft).
EXTENSIONS = {
    "Linear algebra extension (`xp.linalg`)": ("linalg", """cholesky cross det diagonal eigh
        eigvalsh inv matmul matrix_norm matrix_power matrix_rank matrix_transpose outer pinv
        qr slogdet solve svd svdvals tensordot trace vecdot vector_norm"""),
    "Fourier transform extension (`xp.fft`)": ("fft", """fft ifft fftn ifftn rfft irfft rfftn
        irfftn hfft ihfft fftfreq rfftfreq fftshift ifftshift"""),
}
# The standard's data types: where dloop computes in each (tests/features/test_complex.py
# for the complex ones).
DTYPES = {
    "bool": "yes; no gradient",
    **{name: "arguments widen to int64" for name in
       ("int8", "int16", "uint8", "uint16", "uint32", "uint64")},
    "int32": "yes; no gradient", "int64": "yes; no gradient",
    "float32": "yes, with gradients", "float64": "yes, with gradients",
    **{name: "yes, with gradients (dL/dRe + i dL/dIm), at the whole-array level: in host "
       "steps, not inside per-element loop bodies" for name in ("complex64", "complex128")},
}
# Names that are not functions of arrays (tested in tests/features/test_namespace.py).
NOT_ARRAY_FUNCTIONS = set("""e inf nan newaxis pi can_cast finfo iinfo isdtype result_type
    __array_namespace_info__""".split())

# Functions whose result is integer or boolean, or piecewise constant: the gradient through
# them is zero by definition, not an approximation.
NO_GRADIENT = set("""all any argsort argmax argmin count_nonzero searchsorted bitwise_and
    bitwise_left_shift bitwise_invert bitwise_or bitwise_right_shift bitwise_xor ceil equal floor floor_divide
    greater greater_equal isfinite isinf isnan less less_equal logical_and logical_not
    logical_or logical_xor not_equal round sign signbit trunc linalg.matrix_rank""".split())
NOT_DIFFERENTIATED_INPUTS = set("""arange empty eye full linspace ones zeros""".split())
WHY_NOT = {
    **{name: "its result's shape depends on the data" for name in
       ("unique_all", "unique_counts", "unique_inverse", "unique_values")},
    "from_dlpack": "arrays enter through the transformation's arguments (NumPy, PyTorch, "
                   "array_api_strict via DLPack), not inside a traced function",
    "nonzero": "its result's shape depends on the data",
}


def supported(name):
    module, _, function = name.rpartition(".")
    return function in vars(getattr(array_api, module) if module else array_api)


def _sections():
    yield from ((section, names.split()) for section, names in SECTIONS.items())
    for section, (module, names) in EXTENSIONS.items():
        yield section, [f"{module}.{name}" for name in names.split()]


def table():
    lines = ["# Array API coverage (2023.12 and 2024.12's additions)", "",
             "Generated by `python tools/array_api_coverage.py` from the namespace that traced "
             "arrays return from `__array_namespace__()`; `tests/features/test_array_api.py` "
             "checks every supported function against NumPy, and its gradient against finite "
             "differences (the linalg extension: `test_linalg.py` and "
             "`test_decompositions.py`; the fft extension and complex values: "
             "`test_complex.py`). A function marked *no* raises `DloopAttributeError` (an "
             "`AttributeError`, so `hasattr` answers False) naming it.",
             ""]
    total = count = 0
    for section, names in _sections():
        lines += [f"## {section}", "", "| function | supported | gradient |", "| --- | --- | --- |"]
        for name in names:
            ok = supported(name)
            total += 1
            count += ok
            if not ok:
                grad = WHY_NOT.get(name, "")
            elif name in NOT_ARRAY_FUNCTIONS:
                grad = "not a function of arrays"
            elif name in NO_GRADIENT:
                grad = "zero (integer, boolean or piecewise-constant result)"
            elif name in NOT_DIFFERENTIATED_INPUTS:
                grad = "constant (no array inputs)"
            else:
                grad = "yes"
            lines.append(f"| `{name}` | {'yes' if ok else 'no'} | {grad} |")
        lines.append("")
    lines.insert(2, f"{count} of {total} functions of these sections are supported.\n")
    lines += ["## Data types", "", "| dtype | computed in |", "| --- | --- |"]
    lines += [f"| `{name}` | {text} |" for name, text in DTYPES.items()]
    return "\n".join(lines) + "\n"


def main():
    path = pathlib.Path(__file__).resolve().parent.parent / "docs" / "array_api_coverage.md"
    text = table()
    if "--check" in sys.argv:
        sys.exit(0 if path.exists() and path.read_text() == text else 1)
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
