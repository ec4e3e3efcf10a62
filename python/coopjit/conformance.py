"""Which targets build each operation of SPV_NV_cooperative_matrix2 (seeds/002) and HLSL 0035
(seeds/003), as the lowerings answer it: every operation the kernel IR expresses has a probe, the
smallest kernel that needs it (cpp/build/op_probes.cpp), and a target supports the operation when
the probe is verified, lowered and compiled for it all the way to machine code:

- "cpu": the CPU lowering and the JIT (the kernel runs on this machine);
- "spirv": the SIMT lowering and LLVM's SPIR-V backend, checked with spirv-val (the module
  opencl:N and level_zero:N load);
- "ptx": the SIMT lowering's NVIDIA target and LLVM's NVPTX backend for sm_90 (what cuda:N
  runs; generated only, where there is no NVIDIA GPU).

    from coopjit import conformance
    conformance.support("outer_product_thread", "spirv")   # '': built
    conformance.table()["accumulate_8"]                     # {'cpu': True, 'spirv': True, 'ptx': True}

The README's operation table ("Operations of the documents, by target") is checked against
table() by tests/test_conformance_table.py.
"""
from __future__ import annotations

from . import _core

__all__ = ["TARGETS", "probes", "support", "table", "probe_ir"]

TARGETS = ("cpu", "spirv", "ptx")


def probes() -> list[str]:
    """The probes' names, in the documents' order."""
    return list(_core.op_probe_names())


def support(probe: str, target: str) -> str:
    """'' when `target` ("cpu", "spirv" or "ptx") builds `probe`, else the reason (the verifier's
    or the lowering's message). ValueError for an unknown probe or target."""
    return _core.op_support(probe, target)


def table() -> dict[str, dict[str, bool]]:
    """{probe: {target: whether it builds}} for every probe and target."""
    return {p: {t: support(p, t) == "" for t in TARGETS} for p in probes()}


def probe_ir(probe: str, subgroup_size: int = 16) -> str:
    """The probe's kernel IR (the one printer)."""
    return _core.op_probe_ir(probe, subgroup_size)
