"""Hopper plans take 128 x 320 tiles with an edge tile along the kernel's N where those tiles make
one wave (issue 16, session 37; kWideEdgeOneWave, cpp/plan/gpu_plan_internal.h): 2176^2 in 128 x
256 tiles is 17 x 9 = 153 tiles (2-tile SK + DP over 132 SMs), in 128 x 320 tiles 17 x 7 = 119 (the
last column of tiles 256 wide), one wave (H200, CUDA graphs, x 8192: 119.6 -> ~108 us, cuBLAS 105).
The orientation rule takes such a plan too, by the same 3% margin (1024 x 4864: row, 8 x 16 = 128
tiles) and, between two
plans of one wave of 128 x 320 each way, the one without edges. Without a GPU: the planner's
choices for target sm_90 (the kernel's M and N: the product's N and M in layout col). On an sm_90
GPU (cuda:0; skipped, saying which, elsewhere): the planner's own plans against float64."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import _core, ptx
from coopjit._epilogue import Epilogue
from conftest import check_device_product, needs_hopper

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16
SMS = 132  # sm_90's target description (H100 / H200)


def _cfg(shape, dtype=BF16, **kw):
    return ptx.compile_gemm(*shape, dtype, target="sm_90", **kw).config


def _kernel_tiles(cfg, shape):
    """The plan's tiles and whether the last along each of the kernel's M, N is an edge."""
    m, n, _ = shape
    km, kn = (n, m) if cfg["layout"] == "col" else (m, n)
    mt, nt = (int(x) for x in cfg["macro_tile"].split("x"))
    return -(-km // mt) * -(-kn // nt), km % mt != 0, kn % nt != 0


# (shape, layout): one wave of 128 x 320 with an edge along the kernel's N, where 128 x 256 took
# 2-tile SK + DP (1.1-1.5 waves)
TAKEN = [((2176, 2176, 8192), "col"), ((2176, 2176, 4096), "col"), ((4416, 1024, 8192), "col"),
         ((2432, 2048, 4096), "col"), ((896, 5504, 8192), "col"),
         ((1024, 4864, 8192), "row"), ((1152, 4416, 8192), "row")]


@pytest.mark.parametrize("dtype", [BF16, np.float16])
@pytest.mark.parametrize("shape,layout", TAKEN)
def test_planner_takes_320_with_an_edge(shape, layout, dtype):
    cfg = _cfg(shape, dtype)
    # (one wave, one tile a block: 4 stages with the epilogue's staging in them since session 38)
    assert (cfg["layout"], cfg["macro_tile"], cfg["split"], cfg["stages"], cfg["ws"], cfg["epi_alias"]) == \
        (layout, "128x320", "dp", 4, 2, "yes"), cfg
    tiles, m_edge, n_edge = _kernel_tiles(cfg, shape)
    assert tiles <= SMS and not m_edge and n_edge, (tiles, m_edge, n_edge)
    # the rule's plan is the same kernel as the one a caller names
    named = _cfg(shape, dtype, plan={"layout": layout, "sg_m": 8, "nr": 320, "split": "dp"})
    assert named == cfg


@pytest.mark.parametrize("shape,why", [
    ((2304, 2304, 8192), "18 x 8 = 144 tiles of 128 x 320: two waves"),
    ((896, 4864, 8192), "one wave of 192 x 192 carries less"),
    ((4352, 1024, 8192), "two waves of 128 x 136 carry less"),
    ((4224, 4224, 8192), "33 x 14 tiles of 128 x 320: four waves"),
    # (5120 x 832 x 4096 and 1280 x 3584 x 8192, kept at SK + DP here in session 37, take col 128 x 320
    # since session 38's 4 stages: test_epi_alias_s38.py)
    ((8192, 8192, 8192), "many waves"),
])
def test_planner_keeps_its_tile(shape, why):
    cfg = _cfg(shape)
    assert cfg["macro_tile"] != "128x320", (why, cfg)


@pytest.mark.parametrize("shape", [(1536, 3200, 8192), (3200, 1600, 8192), (5120, 960, 4096)])
def test_whole_320_tiles_win_a_tie(shape):
    """One wave of 128 x 320 each way: the orientation without edge tiles (1536 x 3200: row 12 x 10
    whole, col 25 x 5 with an edge)."""
    cfg = _cfg(shape)
    assert cfg["macro_tile"] == "128x320", cfg
    tiles, m_edge, n_edge = _kernel_tiles(cfg, shape)
    assert tiles <= SMS and not m_edge and not n_edge, (cfg["layout"], tiles)


def test_fused_epilogue_and_named_tiles_keep_their_plans():
    """The 320 tile takes no fused epilogue (its plans refuse one): bias + GELU on 2176^2 keeps a
    tile of at most 256; a named tile or layout is the caller's."""
    m, n, k = 2176, 2176, 8192
    steps = Epilogue("t", np.dtype(BF16), np.dtype(BF16), m, n, bind_arrays=False, bias=True, activation="gelu").steps()
    fused = _core.gpu_gemm_kernel("target:sm_90", ["bf16"] * 3, [m, n, k, 1, 1], [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0], False, {}, steps)
    assert "128x320" not in fused.plan_key and ".wgmma." in fused.plan_key
    assert _cfg((m, n, k), plan={"sg_m": 8, "nr": 256})["macro_tile"] == "128x256"
    row = _cfg((m, n, k), plan={"layout": "row"})
    assert row["layout"] == "row" and row["macro_tile"] == "128x320"  # the same rule in the named layout


# ---- on the GPU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,layout", [((2176, 2176, 1032), "col"), ((1024, 4864, 1032), "row")])
@pytest.mark.parametrize("out", [BF16, np.float32])
def test_edge_320_plan_on_gpu(rng, shape, layout, out):
    """The planner's own plans (one wave of 128 x 320, the last column of tiles 256 / 64 wide; K
    1032 = 16 x 64 + 8: a K tail) against float64; alpha / beta through gemm."""
    needs_hopper(DEV, "wgmma blocks of 128 x 320")
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, out_dtype=out)
    assert (kern.config["layout"], kern.config["macro_tile"], kern.config["split"]) == (layout, "128x320", "dp"), kern.config
    check_device_product(kern(a, b), a, b, out)
    c0 = rng.standard_normal((m, n)).astype(out)
    got = c0.copy()
    coopjit.gemm(a, b, got, alpha=-1.5, beta=0.5, device=DEV)
    check_device_product(got, a, b, out, c0, -1.5, 0.5)


@pytest.mark.parametrize("trans_a,trans_b", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("shape", [(2176, 2176, 1032), (4608, 1024, 1032)])
def test_edge_320_plan_transposed_on_gpu(rng, shape, trans_a, trans_b):
    """The planner's 128 x 320 plan with an edge on transposed operands (a.T @ b, a @ b.T, a.T @ b.T:
    the panels' TMA boxes along the other dimension; 4608 x 1024 takes it only with A transposed,
    128 x 144 otherwise) against float64."""
    needs_hopper(DEV, "wgmma blocks of 128 x 320")
    m, n, k = shape
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(BF16)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(BF16)
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, trans_a=trans_a, trans_b=trans_b)
    wide = shape == (2176, 2176, 1032) or trans_a
    assert (kern.config["macro_tile"] == "128x320") == wide, kern.config
    check_device_product(kern(a, b), a.T if trans_a else a, b.T if trans_b else b, BF16)
