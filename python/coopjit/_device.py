"""The device interface: what the public functions (matmul, gemm, reduce, compile_gemm, the fused
epilogue paths, KernelBuilder.compile, coopjit.empty) ask of a device, instead of branching on its
name. One implementation per kind of device:

    CpuDevice      "cpu"                          _cpu.py   the ORC JIT and the CPU worker pool
    SpirvDevice    "opencl:N", "level_zero:N"     _gpu.py   SPIR-V runtimes, host-visible shared memory
    CudaDevice     "cuda:N"                       _gpu.py   PTX on the CUDA driver, device memory and copies
    TargetDevice   "target:xe-hpc", "target:sm_90"  _gpu.py  a GPU named, not present: code generated only

coopjit.devices holds the table of kinds (name prefix -> class) and hands out one object per
device name (devices.get); adding a kind of device is a class here plus a line in that table (and
in C++, a DeviceRuntime in cpp/runtime/devices.cpp).

Every method works on operands the public functions have already checked (dtypes, shapes,
writeability); a device adds only what is its own: where memory lives and how it is copied, which
plan fields it takes, what it compiles and how it launches. Nothing in this module imports an
implementation.
"""
from __future__ import annotations

import numpy as np


class Device:
    """One device. `name` is the name the user gave ("cpu", "opencl:0", "cuda:0"), `kind` the
    implementation's ("cpu", "spirv", "cuda", "target")."""

    #: the implementation's kind
    kind = ""
    #: which kernels' configs plan= takes on this device: "cpu" or "gpu" (coopjit.Plan.target)
    plan_target = "gpu"
    #: what compiled kernels' .source() gives here, the default first
    sources: tuple = ("ir",)
    #: what check_device says of an absent device of this kind when its runtime gives no device
    #: at all ("the OpenCL runtime"); None: the device is reported as unknown
    runtime: str | None = None

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    # ---- what is there ------------------------------------------------------------------------
    @classmethod
    def names(cls, prefix: str) -> list[str]:
        """The usable devices of this kind whose names start with `prefix` ("cpu", "opencl", ...),
        in the order coopjit.devices() lists them."""
        raise NotImplementedError(f"{cls.__name__}.names")

    def info(self) -> dict:
        """The device's properties (coopjit.device_info)."""
        raise NotImplementedError(f"{type(self).__name__}.info")

    # ---- memory -------------------------------------------------------------------------------
    #: whether the host reads and writes the memory the kernels use (False: copies, CUDA)
    host_visible = True

    def empty(self, shape, dtype: np.dtype, order: str) -> np.ndarray:
        """An uninitialized array the device's kernels read in place (coopjit.empty)."""
        raise NotImplementedError(f"{type(self).__name__}.empty")

    def resident(self, x):
        """`x` where the device's kernels read it (itself, or a copy in the device's memory); used
        before batched operands are broadcast, so that a copy is made of the data, not of the
        broadcast."""
        return x

    # ---- plans --------------------------------------------------------------------------------
    def plan_overrides(self, plan) -> dict:
        """plan= (a dict of plan fields, or a kernel's .config) as the core's planner takes it for
        this device; TypeError / ValueError naming a bad field."""
        raise NotImplementedError(f"{type(self).__name__}.plan_overrides")

    def check_prepacked(self, where: str) -> None:
        """ValueError when this device cannot read a PackedMatrix (coopjit.prepack packs for the
        CPU)."""
        raise ValueError(f"{where}: a prepacked b (coopjit.prepack) is packed for the CPU; pass the array itself "
                         f"on {self.name}")

    # ---- compiling ----------------------------------------------------------------------------
    def compile_gemm(self, m: int, n: int, k: int, dtype: np.dtype, trans_a: bool, trans_b: bool, accumulate: bool,
                     plan, out_dtype, fused=None):
        """The compiled GEMM kernel of one problem (coopjit.compile_gemm), planned for this device."""
        raise NotImplementedError(f"{type(self).__name__}.compile_gemm")

    def compile_kernel(self, fn):
        """A KernelBuilder kernel (its core function `fn`) compiled for this device."""
        raise NotImplementedError(f"{type(self).__name__}.compile_kernel")

    def compile_reduce(self, op: str, form: str, types, shape, strides):
        """The reduction program of one problem, compiled (or generated) and not run."""
        raise NotImplementedError(f"{type(self).__name__}.compile_reduce")

    # ---- launches -----------------------------------------------------------------------------
    def gemm(self, a, b, c, alpha: float, beta: float, types, plan, fused=None):
        """c = alpha * a @ b + beta * c (then the epilogue `fused`, a coopjit._epilogue.Epilogue)
        for checked operands of any strides, c possibly overlapping a or b; returns c."""
        raise NotImplementedError(f"{type(self).__name__}.gemm")

    def gemm_views(self, a, b, c, types, plan, fused=None, operands=None) -> None:
        """c = a @ b (then `fused`) for the strided batch views the batched paths build: kernel-
        readable, c apart from a and b and C-contiguous when fused; `operands`: the epilogue's
        operands laid out for c (its residual with c's strides)."""
        raise NotImplementedError(f"{type(self).__name__}.gemm_views")

    def epilogue_operands(self, fused, operands: dict) -> dict:
        """`operands` (an epilogue's, as fused.core gives them) when this device can read them;
        TypeError naming one it cannot."""
        return operands

    def reduce2d(self, op: str, form: str, x2d, y, types) -> None:
        """y = op over the rows ("row"), columns ("column") or 2x2 blocks ("2x2") of x2d."""
        raise NotImplementedError(f"{type(self).__name__}.reduce2d")

    def pool_workers(self) -> int:
        """Workers of a host thread pool the reductions split long rows over (the CPU's); 0 where
        the device schedules its own work."""
        return 0
