"""The epilogue's staging in the stage slots (plan field epi_alias; issue 16, session 38;
kWideFourStages, cpp/plan/gpu_plan_internal.h): warp-specialized DP plans of one tile a block may
stage their epilogue in the pipeline's stage slots instead of after them, once the consumer warps
have met at a named barrier (8) after their last wgmmas. 128 x 320 blocks (3 stages of 56 KiB so
that the staging fit after them) then take 4 stages: on the H200 (CUDA graphs, bf16, one wave)
38 products 0.6-7.8% faster than with 3 (median 4.2%). Without a GPU: the planner's choices for
target sm_90, the refusals, the PTX (ptxas where installed). On an sm_90 GPU (cuda:0; skipped,
saying which, elsewhere): the plans against float64, and repeated calls bit for bit."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import check_device_product, check_int8_trans_b_product, needs_hopper, spill_stores

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16
BARRIER = "bar.sync 8, 256;"  # the consumer warps (two warpgroups) before the staging


def _kern(shape, dtype=BF16, **kw):
    return ptx.compile_gemm(*shape, dtype, target="sm_90", **kw)


# one wave of 128 x 320 tiles, one a block: row 22 x 6, col 17 x 7 (an edge), col 7 x 16
@pytest.mark.parametrize("shape", [(2816, 1920, 8192), (2176, 2176, 8192), (832, 5120, 4096)])
def test_one_tile_blocks_of_320_take_four_stages(ptxas, shape):
    kern = _kern(shape)
    cfg = kern.config
    assert (cfg["macro_tile"], cfg["split"], cfg["persistent"]) == ("128x320", "dp", "no"), cfg
    assert (cfg["stages"], cfg["epi_alias"], cfg["epi_smem"], cfg["tma_store"]) == (4, "yes", 4096, 2), cfg
    assert ".pipe4" in kern._core.plan_key and ".epia" in kern._core.plan_key
    text = kern.source("ptx")
    # one barrier of the consumers, after the K loop's last wgmma wait and before the staging
    assert text.count(BARRIER) == 1
    at = text.index(BARRIER)
    assert text.rfind("wgmma.wait_group.sync.aligned \t0;", 0, at) >= 0
    assert text.find("stmatrix", at) > at and text.rfind("stmatrix", 0, at) < 0
    report = ptxas(text, "sm_90")
    assert "Potential Performance Loss" not in report, report
    assert sum(spill_stores(report)) == 0, report


@pytest.mark.parametrize("shape,plan,why", [
    ((4096, 2560, 8192), None, "1.94 waves of 320: a persistent walk (the producer copies the next tile under this one's epilogue)"),
    ((2816, 1920, 8192), {"split": "sk+dp", "sg_m": 8, "nr": 320}, "Stream-K parts (persistent)"),
    ((4096, 4096, 4096), None, "128 x 256: 4 stages and the staging after them already"),
    ((2048, 2048, 2048), None, "128 x 256, one wave: 4 stages and the staging after them already"),
    ((2816, 1920, 8192), {"sg_m": 8, "nr": 320, "stages": 3}, "stages named"),
])
def test_other_plans_keep_the_staging_after_the_stages(shape, plan, why):
    cfg = _kern(shape, plan=plan).config
    assert cfg["epi_alias"] == "no", (why, cfg)
    if cfg["macro_tile"] == "128x320":
        assert cfg["stages"] == 3, (why, cfg)
    assert BARRIER not in _kern(shape, plan=plan).source("ptx")


def test_overrides():
    """epi_alias 0 gives back the 3-stage plan with its staging after the stages; 1 puts any one-tile
    ws DP plan's staging into its slots (128 x 256 too: 4 stages either way); elsewhere refused,
    naming the values."""
    wide = {"layout": "row", "sg_m": 8, "nr": 320, "split": "dp"}
    off = _kern((2816, 1920, 8192), plan={"epi_alias": 0})
    assert (off.config["macro_tile"], off.config["stages"], off.config["epi_alias"], off.config["epi_smem"]) == ("128x320", 3, "no", 4096)
    assert BARRIER not in off.source("ptx")
    on = _kern((2048, 2048, 2048), plan={"epi_alias": 1})
    assert (on.config["macro_tile"], on.config["stages"], on.config["epi_alias"], on.config["epi_smem"]) == ("128x256", 4, "yes", 4096)
    assert BARRIER in on.source("ptx")
    # 3 stages named with the staging in them: allowed (the slots hold it)
    three = _kern((2816, 1920, 8192), plan=dict(wide, epi_alias=1, stages=3)).config
    assert (three["stages"], three["epi_alias"]) == (3, "yes")
    # 4 stages named without it: no room for the staging (the lanes store C themselves)
    bare = _kern((2816, 1920, 8192), plan=dict(wide, epi_alias=0, stages=4)).config
    assert (bare["stages"], bare["epi_alias"], bare["epi_smem"], bare["tma_store"]) == (4, "no", "no", "no")
    for shape, plan, match in (
            ((4096, 2560, 8192), {"epi_alias": 1}, "persistent=1"),
            ((2816, 1920, 8192), {"epi_alias": 1, "split": "sk+dp"}, "split sk\\+dp"),
            ((2816, 1920, 8192), {"epi_alias": 1, "epi_smem": 0}, "epi_smem off"),
            ((2816, 1920, 8192), {"epi_alias": 1, "ws": 0}, "ws=0"),
            ((2816, 1920, 8192), {"epi_alias": 2}, "epi_alias=2 must be 0 \\(no\\) or 1 \\(yes\\)")):
        with pytest.raises(ValueError, match=match):
            _kern(shape, plan=plan)


# one wave of 128 x 320 DP against 2-tile SK + DP of 128 x 256 (1.03-1.2 waves): the one-tile
# blocks' rate (kRate320OneTile 0.98, was 0.96) takes 320 where its 4 stages make it the cheaper
# (H200, session 38: 3136x1408x8192 113.6 -> 101.1 us, cuBLAS 105.9; 5120x832x4096 58.3 -> 53.9,
# cuBLAS 80.9; 1024x4352x4096 57.9 -> 53.9, cuBLAS 54.1)
@pytest.mark.parametrize("shape,layout", [((3136, 1408, 8192), "col"), ((5120, 832, 4096), "col"), ((1024, 4352, 4096), "row"),
                                          ((2816, 1664, 8192), "col"), ((1280, 3584, 8192), "col")])
def test_one_wave_320_against_sk_dp(shape, layout):
    cfg = _kern(shape).config
    assert (cfg["layout"], cfg["macro_tile"], cfg["split"], cfg["stages"], cfg["epi_alias"]) == (layout, "128x320", "dp", 4, "yes"), cfg
    m, n, _ = shape
    km, kn = (n, m) if layout == "col" else (m, n)
    assert -(-km // 128) * -(-kn // 320) <= 132  # one wave of the H200's / H100's SMs
    sk = _kern(shape, plan={"layout": "col", "sg_m": 8, "nr": 256}).config
    assert sk["split"] == "sk+dp", sk  # (the plan of 128 x 256 tiles it replaces)


# ---- on the GPU ---------------------------------------------------------------------------------

# 1000 x 704 x 1032: edge tiles both ways (704 = 2 x 320 + 64 columns; 1000 = 7 x 128 + 104 rows), a K
# tail (1032 = 16 x 64 + 8); the kernel's M and N swapped in layout col
@pytest.mark.parametrize("plan", [{"layout": "row", "sg_m": 8, "nr": 320}, {"layout": "col", "sg_m": 8, "nr": 320},
                                  {"layout": "row", "sg_m": 8, "nr": 256, "epi_alias": 1},
                                  {"layout": "col", "sg_m": 8, "nr": 320, "tma_store": 0}])
@pytest.mark.parametrize("out", [np.float32, BF16, np.float16])
def test_aliased_plans_on_gpu(rng, plan, out):
    needs_hopper(DEV, "the epilogue's staging in the wgmma stage slots")
    m, n, k = 1000, 704, 1032
    dtype = np.float16 if out == np.float16 else BF16
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out, plan=plan)
    assert kern.config["epi_alias"] == "yes" and kern.config["split"] == "dp", kern.config
    check_device_product(kern(a, b), a, b, out)
    c0 = rng.standard_normal((m, n)).astype(out)
    got = c0.copy()
    coopjit.gemm(a, b, got, alpha=-1.5, beta=0.5, device=DEV, plan=plan)
    check_device_product(got, a, b, out, c0, -1.5, 0.5)


@pytest.mark.parametrize("shape,trans_a,trans_b", [((2176, 2176, 1032), False, False), ((2816, 1920, 2056), False, True),
                                                   ((2176, 2176, 1032), True, True)])
def test_planner_plans_repeat_bit_for_bit(rng, shape, trans_a, trans_b):
    """The planner's own aliased plans (one wave of 128 x 320): right against float64, and 12 calls
    into fresh outputs equal bit for bit (a warp staging into slots another warpgroup's wgmmas
    still read would show as a changing answer)."""
    needs_hopper(DEV, "the epilogue's staging in the wgmma stage slots")
    m, n, k = shape
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(BF16)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(BF16)
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, trans_a=trans_a, trans_b=trans_b)
    assert (kern.config["macro_tile"], kern.config["stages"], kern.config["epi_alias"]) == ("128x320", 4, "yes"), kern.config
    first = kern(a, b)
    check_device_product(first, a.T if trans_a else a, b.T if trans_b else b, BF16)
    for _ in range(12):
        assert np.array_equal(kern(a, b).view(np.uint16), first.view(np.uint16))


def test_aliased_int8_exact(rng):
    """int8 -> int32 in 128 x 320 blocks of one tile (4 stages, the staging in them): exact against
    int64, alpha / beta."""
    needs_hopper(DEV, "the epilogue's staging in the wgmma stage slots")
    plan = {"layout": "col", "sg_m": 8, "nr": 320, "split": "dp", "ws": 2}
    check_int8_trans_b_product(rng, 1000, 704, 1040, DEV, plan,
                               lambda cfg: (cfg["macro_tile"], cfg["stages"], cfg["epi_alias"]) == ("128x320", 4, "yes"))
