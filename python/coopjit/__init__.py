"""coopjit: JIT-compiled GEMM and reduction kernels over cooperative matrices.

Each call plans a kernel for exactly its problem (shapes, dtype, strides, device), builds it in
a kernel IR of cooperative-matrix operations, compiles it with LLVM and caches it.
"""
from __future__ import annotations

import numpy as _np

from . import _core, _log, cache, layout, spirv
from . import devices, ir, ptx, tensor  # modules; devices() lists the devices (a callable module)
from ._core import DeviceError, VerifyError
from .devices import device_info, empty
from ._plan import Plan
from ._cuda_arrays import DeviceArray
from ._gemm import Kernel, PackedMatrix, compile_gemm, cross_compile, gemm, matmul, prepack
from ._reduce import reduce, reduce2x2
from ._tune import tune
from ._tune_report import TuneReport
from ._peak import peak
from .tensor import TensorLayout, TensorView, load_matrix, store_matrix

__version__ = _core.version
llvm_version = _core.llvm_version

__all__ = [
    "DeviceArray",
    "DeviceError",
    "Kernel",
    "Plan",
    "TensorLayout",
    "TensorView",
    "TuneReport",
    "VerifyError",
    "cache",
    "compile_gemm",
    "cross_compile",
    "cpu_info",
    "device_info",
    "devices",
    "empty",
    "gemm",
    "ir",
    "ptx",
    "spirv",
    "tensor",
    "layout",
    "get_num_threads",
    "set_num_threads",
    "load_matrix",
    "matmul",
    "prepack",
    "reduce",
    "reduce2x2",
    "peak",
    "store_matrix",
    "tune",
]

cache._configure()  # the disk cache's directory, and the tuned plans of its database


def get_num_threads() -> int:
    """Workers of the CPU pool: COOPJIT_NUM_THREADS, else OMP_NUM_THREADS (its first number), else the CPUs of the
    affinity mask; set_num_threads changes it."""
    return _core.get_num_threads()


def set_num_threads(n: int) -> None:
    """Sets the number of CPU workers later calls may use (1 to 1024, coopjit._core.max_threads; a
    plan's "threads" can still ask for fewer or more)."""
    if isinstance(n, (bool, _np.bool_)) or not isinstance(n, (int, _np.integer)):
        raise TypeError(f"set_num_threads: n must be an int, got {n!r}")
    if n < 1:
        raise ValueError(f"set_num_threads: n must be at least 1, got {n}")
    if n > _core.max_threads:
        raise ValueError(f"set_num_threads: n must be in [1, {_core.max_threads}], got {n}")
    _core.set_num_threads(int(n))


def cpu_info() -> dict:
    """The host CPU as LLVM sees it: name, triple, features, vector width."""
    return _core.cpu_info()
