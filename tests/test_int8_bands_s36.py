"""int8 / uint8 -> int32 plans on Hopper walk their tiles in bands of M tiles by the 16-bit rule
(issue 16, session 36; kTileBandsInt8, cpp/plan/gpu_plan_internal.h): a persistent
warp-specialized DP grid of 128 x 256 tiles with more tiles than workers, more than 16 M tiles
and a kernel A (M x K; in layout col the product's B^T) over 50 MB takes group_m 16 (H200, CUDA
graphs: 8192^3 715 -> 688 us, 4096x16384x4096 410 -> 367, 12288x12288x4096 860 -> 796). Without a
GPU: the planner's choices for target sm_90. On an sm_90 GPU (cuda:0; skipped, saying which,
elsewhere): banded int8 plans exact against float64 (whose products of these sizes are exact
integers)."""
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import check_int8_trans_b_product, needs_hopper

DEV = "cuda:0"


def _cfg(shape, a_dtype=np.int8, trans_b=True, plan=None):
    return ptx.compile_gemm(*shape, a_dtype, target="sm_90", trans_b=trans_b, plan=plan).config


@pytest.mark.parametrize("trans_b", [True, False])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (12288, 12288, 4096), (4096, 16384, 4096), (1000, 12800, 4096)])
def test_planner_bands_int8(shape, dtype, trans_b):
    """Kernel A (N x K bytes) 52-67 MB, 100-128 kernel M tiles, 400-4096 tiles on 132 workers."""
    cfg = _cfg(shape, dtype, trans_b)
    assert (cfg["layout"], cfg["macro_tile"], cfg["split"]) == ("col", "128x256", "dp"), cfg
    assert cfg["wgmma"].startswith("yes") and cfg["persistent"].startswith("yes"), cfg
    assert cfg["group_m"] == 16, cfg


@pytest.mark.parametrize("shape,why", [
    ((6144, 6144, 6144), "kernel A 36 MiB: in the L2"),
    ((4096, 4096, 4096), "kernel A 16 MiB"),
    ((16384, 4096, 4096), "kernel A 16 MiB (M is the kernel's N)"),
    ((2048, 2048, 2048), "128 tiles: one wave, not persistent"),
    ((8192, 2048, 1024), "kernel M 2048: 16 M tiles, one band"),
])
def test_planner_keeps_int8_group_m_0(shape, why):
    assert _cfg(shape)["group_m"] == 0, why


def test_named_group_m_wins_int8():
    assert _cfg((8192, 8192, 8192), plan={"group_m": 0})["group_m"] == 0
    assert _cfg((8192, 8192, 8192), plan={"group_m": 8})["group_m"] == 8


# ---- on the GPU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3000, 5000, 256), (1100, 4224, 528)])
def test_banded_int8_plan_on_gpu(rng, shape):
    """group_m 16 named (the rule's kernel on operands too small for the rule): 5000 = 39 x 128 + 8
    and 4224 = 33 x 128 kernel M tiles (bands of 16, 16 and 8 or 1), edge tiles both ways, a K of
    528 = 4 x 128 + 16; exact, and alpha / beta through gemm."""
    needs_hopper(DEV, "the ws kernel's persistent grid")
    m, n, k = shape
    check_int8_trans_b_product(rng, m, n, k, DEV, {"group_m": 16},
                               lambda c: c["group_m"] == 16 and c["persistent"].startswith("yes") and c["split"] == "dp")


def test_planner_banded_int8_plan_on_gpu(rng):
    """The planner's own banded plan (kernel A 12800 x 4096 bytes, 52 MB; 100 M tiles: bands of 16
    x 6 + 4) against float64, exact (|sums| < 2^27)."""
    needs_hopper(DEV, "the ws kernel's persistent grid")
    m, n, k = 1000, 12800, 4096
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    kern = coopjit.compile_gemm(m, n, k, np.int8, device=DEV, trans_b=True)
    assert kern.config["group_m"] == 16 and kern.config["persistent"].startswith("yes"), kern.config
    c = kern(a, b)
    ref = a.astype(np.float64) @ b.T.astype(np.float64)
    assert c.dtype == np.int32 and np.array_equal(c.astype(np.float64), ref)
