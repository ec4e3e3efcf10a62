"""coopjit.cross_compile(..., code=False): the plan (and the kernel IR) without LLVM's
optimization and code generation, the same plan as the full call gives."""
import ml_dtypes
import numpy as np
import pytest

import coopjit


@pytest.mark.parametrize("cpu,dtype,threads,plan", [
    ("sapphirerapids", ml_dtypes.bfloat16, 1, None),  # AMX tiles
    ("sapphirerapids", ml_dtypes.bfloat16, 16, {"kt": 128}),
    ("znver4", np.float32, 2, None),
    ("znver5", np.float32, 2, {"order": "k_outer"}),
    ("emeraldrapids", np.int8, 16, None),
])
def test_plan_only_matches_the_full_cross_compile(cpu, dtype, threads, plan):
    a = np.ones((100, 250), dtype)
    b = np.ones((250, 37), dtype)
    full = coopjit.cross_compile(a, b, cpu=cpu, threads=threads, plan=plan)
    quick = coopjit.cross_compile(a, b, cpu=cpu, threads=threads, plan=plan, code=False)
    assert quick["config"] == full["config"] and quick["key"] == full["key"]
    assert quick["ir"] == full["ir"]
    assert "llvm" not in quick and "asm" not in quick
    assert full["asm"] and full["llvm"]


def test_plan_only_checks_its_arguments():
    a = np.ones((8, 8), np.float32)
    with pytest.raises(TypeError, match=r"code must be True or False, got 'no'"):
        coopjit.cross_compile(a, a, cpu="znver4", code="no")
    with pytest.raises(ValueError, match="pentium-9000"):
        coopjit.cross_compile(a, a, cpu="pentium-9000", code=False)
    # a plan the CPU cannot run is refused without code generation too
    with pytest.raises(ValueError, match="amx"):
        coopjit.cross_compile(a, a, cpu="znver4", plan={"amx": "yes"}, code=False)
