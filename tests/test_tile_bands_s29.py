"""The tiles of persistent 16-bit DP plans walked in bands of M tiles (issue 16, session 29; planner
rule kTileBands, cpp/plan/gpu_plan_internal.h): where a persistent warp-specialized DP grid of
128 x 256 tiles walks more tiles than it has workers, the kernel's M has more than 16 tiles and
its A (M x K; the caller's B^T in layout col) is over 50 MB (the L2), the planner names group_m 16 (sqrt(132 * 256 / 128) to an even number on the H200's 132 SMs), so that
a wave is 16 M tiles by about 8 N tiles instead of every M tile of two N tiles (8192^3: 2.39 GB read
from DRAM against cuBLAS's 1.25). Elsewhere group_m stays 0. Without a GPU: the planner's choices
for target sm_90. On an sm_90 GPU (cuda:0; skipped, saying which, elsewhere): the banded plans
against NumPy in float64, a last band shorter than the rest. Seed 1234 (conftest's rng)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import check_device_product as _check, needs_hopper

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16


def _cfg(shape, dtype=BF16, plan=None):
    return ptx.compile_gemm(*shape, dtype, target="sm_90", plan=plan).config


@pytest.mark.parametrize("dtype", [BF16, np.float16])
@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (8192, 4096, 8192), (6144, 6144, 6144), (1000, 8448, 4104)])
def test_planner_bands_persistent_dp(shape, dtype):
    """col 128 x 256 DP, persistent, 2048 / 1024 / 1152 / 264 tiles on 132 workers, 32-66 M tiles
    (the kernel's M is the product's N), A of 69-134 MB: bands of 16."""
    cfg = _cfg(shape, dtype)
    assert (cfg["layout"], cfg["macro_tile"], cfg["split"]) == ("col", "128x256", "dp"), cfg
    assert cfg["persistent"].startswith("yes") and cfg["group_m"] == 16, cfg


@pytest.mark.parametrize("shape,dtype,why", [
    ((2048, 2048, 2048), BF16, "128 tiles: one wave, not persistent"),
    ((4096, 4096, 4096), BF16, "A of 32 MiB: in the L2 (measured level with bands)"),
    ((4096, 4096, 4096), np.float16, "A of 32 MiB: in the L2 (measured level with bands)"),
    ((3000, 5000, 200), BF16, "A of 2 MB"),
    ((2816, 1920, 8192), BF16, "row 128 x 320, one wave"),
    ((5632, 5632, 8192), BF16, "SK + DP (kSkDpFewWaves)"),
    ((4096, 4608, 8192), BF16, "192 x 192: not measured"),
    ((4864, 3072, 8192), BF16, "row 128 x 192: not measured"),
    ((6144, 6144, 6144), np.int8, "8-bit, the kernel's A of 36 MiB: in the L2 (session 36: the same rule as 16-bit)"),
    ((8192, 2048, 1024), BF16, "kernel M 2048: 16 M tiles, one band"),
])
def test_planner_keeps_group_m_0(shape, dtype, why):
    assert _cfg(shape, dtype)["group_m"] == 0, why


def test_named_group_m_wins():
    """A plan that names group_m keeps it (0: main's walk down M)."""
    assert _cfg((8192, 8192, 8192), plan={"group_m": 0})["group_m"] == 0
    assert _cfg((8192, 8192, 8192), plan={"group_m": 8})["group_m"] == 8


# ---- on the GPU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3000, 5000, 200), (4096, 4224, 264)])
@pytest.mark.parametrize("dtype,out", [(BF16, BF16), (np.float16, np.float32)])
def test_banded_plan_on_gpu(rng, shape, dtype, out):
    """The rule's plan (group_m 16 named: these operands are too small for the rule itself; the
    same kernel as the rule's) against float64: 5000 = 19 x 256 + 136 and 4224 = 33 x 128 (bands of
    16, 16 and 8 or 1 M tiles; edge tiles both ways), K tails (200, 264 = 4 x 64 + 8). (Session 29's
    device run 2 ran these four with the rule's earlier form, which took them: 20 passed.)"""
    needs_hopper(DEV, "the ws kernel's persistent grid")
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out, plan={"group_m": 16})
    assert kern.config["group_m"] == 16 and kern.config["persistent"].startswith("yes"), kern.config
    assert kern.config["macro_tile"] == "128x256" and kern.config["split"] == "dp", kern.config
    _check(kern(a, b), a, b, out)


def test_planner_banded_plan_on_gpu(rng):
    """The planner's own banded plan (A of 8448 x 4104 bf16, 69 MB; 66 M tiles: bands of 16 x 4 +
    2; a K tail of 8) against float64. (Not yet run on the device: session 29's device budget was
    spent; 8192^3 and 4096^3 plans were checked against float64 by cuda_waves.py there.)"""
    needs_hopper(DEV, "the ws kernel's persistent grid")
    m, n, k = 1000, 8448, 4104
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV)
    assert kern.config["group_m"] == 16 and kern.config["persistent"].startswith("yes"), kern.config
    _check(kern(a, b), a, b, BF16)
