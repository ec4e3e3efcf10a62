"""Argument checking shared by the public functions: dtypes, shapes, strides, devices."""
from __future__ import annotations

import numbers

import numpy as np

#: dtypes the GEMM kernels accept (low-precision types come with the CPU speed issue)
GEMM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_SHORT = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def short_name(dtype: np.dtype) -> str:
    """The kernel IR's name of a NumPy dtype (float32 -> f32)."""
    return _SHORT[np.dtype(dtype)]


def as_array(x, name: str) -> np.ndarray:
    """`x` as an ndarray (array-likes are converted, ndarrays are taken as they are)."""
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x)
    except Exception as e:  # noqa: BLE001 - report what could not be converted
        raise TypeError(f"{name} cannot be converted to a NumPy array: {e}") from None


def check_gemm_dtype(x: np.ndarray, name: str) -> None:
    if x.dtype not in GEMM_DTYPES:
        supported = ", ".join(str(d) for d in GEMM_DTYPES)
        raise TypeError(f"{name} has dtype {x.dtype}; coopjit GEMM supports {supported}")


def check_same_dtype(**arrays: np.ndarray) -> np.dtype:
    dtypes = {n: a.dtype for n, a in arrays.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{n} is {d}" for n, d in dtypes.items())
        raise TypeError(f"mixed dtypes: {listed}; cast the operands to one dtype")
    return next(iter(dtypes.values()))


def check_device(device) -> str:
    if device is None or device == "cpu":
        return "cpu"
    raise ValueError(f"unknown device {device!r}; available devices: ['cpu']")


def check_scalar(x, name: str) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {x!r} ({type(x).__name__})")
    return float(x)


def kernel_readable(x: np.ndarray) -> np.ndarray:
    """`x` itself when a kernel can read it through its strides; otherwise a copy.

    Kernels read any element strides (negative, zero, non-contiguous). They cannot read byte
    strides that are not whole elements, misaligned data or non-native byte order.
    """
    item = x.itemsize
    ok = (
        x.dtype.isnative
        and x.ctypes.data % item == 0
        and all(s % item == 0 for s in x.strides)
    )
    return x if ok else np.array(x, dtype=x.dtype.newbyteorder("=") if not x.dtype.isnative else x.dtype)


def overlaps(out: np.ndarray, *inputs: np.ndarray) -> bool:
    return any(np.may_share_memory(out, x) for x in inputs)
