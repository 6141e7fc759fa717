"""STAGE 5 — cpu: LLVM types of kernel-IR dtypes (bool is i1 in registers, i8 in memory)."""

import numpy as np
from llvmlite import ir

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

_TYPES = {"float64": F64, "float32": F32, "int64": I64, "int32": I32, "bool": I1}
_STORAGE = {"bool": I8}
SUFFIX = {"float64": "f64", "float32": "f32", "int64": "i64", "int32": "i32", "bool": "i8"}


def llvm_type(dtype):
    return _TYPES[np.dtype(dtype).name]


def storage_type(dtype):
    name = np.dtype(dtype).name
    return _STORAGE.get(name, _TYPES[name])


def is_float(dtype):
    return np.issubdtype(dtype, np.floating)
