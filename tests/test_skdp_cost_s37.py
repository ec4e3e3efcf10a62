"""The Hopper planner's tile rules count 2-tile SK + DP after 3-7 full waves (issue 16, session 37;
kSkDpCostFewWaves, cpp/plan/gpu_plan_internal.h): the N-tile rule compares a narrower DP tile with
the plan's own whole 128 x 256 tiles as the split phase runs them (kSkDpFewWaves' SK + DP: full +
0.85 waves, not full + 1), and the orientation rule takes the other layout's such SK + DP plan where
it carries 3% less work. 4864 x 3072 x 8192 (456 tiles of 128 x 256: 3 waves + 60) ran row 128 x
192 DP at 331.4 us, its col 128 x 256 SK + DP now at 319.2 (cuBLAS 316.8; H200, CUDA graphs,
benchmarks/recorded/issue16-h200-edge320-session37.md). Without a GPU: the planner's choices for
target sm_90. On an sm_90 GPU (cuda:0; skipped, saying which, elsewhere): such a plan against
float64."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import check_device_product, needs_hopper

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16
SMS = 132


def _cfg(shape, dtype=BF16, **kw):
    return ptx.compile_gemm(*shape, dtype, target="sm_90", **kw).config


def _tiles(cfg, shape):
    m, n, _ = shape
    km, kn = (n, m) if cfg["layout"] == "col" else (m, n)
    mt, nt = (int(x) for x in cfg["macro_tile"].split("x"))
    assert km % mt == 0 and kn % nt == 0, "whole tiles"
    return (km // mt) * (kn // nt)


# (shape, layout): whole 128 x 256 tiles, 3-7 full waves and a last at most half full: SK + DP where a
# 128 x 192 DP plan (or the other layout's DP with edges) was taken before
TAKEN = [((4864, 3072, 8192), "col"), ((4864, 3072, 4096), "col"), ((2816, 5376, 8192), "col"),
         ((3072, 4736, 8192), "col"), ((3712, 3840, 8192), "row"), ((4736, 3072, 4096), "row"),
         ((5504, 2560, 8192), "row"), ((2944, 5120, 8192), "row")]


@pytest.mark.parametrize("dtype", [BF16, np.float16])
@pytest.mark.parametrize("shape,layout", TAKEN)
def test_planner_counts_few_waves_sk_dp(shape, layout, dtype):
    cfg = _cfg(shape, dtype)
    assert (cfg["layout"], cfg["macro_tile"], cfg["split"]) == (layout, "128x256", "sk+dp"), cfg
    full, last = divmod(_tiles(cfg, shape), SMS)
    assert 3 <= full <= 7 and 0 < 2 * last <= SMS, (full, last)


@pytest.mark.parametrize("shape,plan,why", [
    ((6016, 5376, 8192), ("col", "128x256", "dp"), "row SK + DP 0.98 of col DP's work: inside the 3% margin (703.9 against 678.9 us)"),
    ((5632, 5632, 8192), ("col", "128x256", "sk+dp"), "the strides' layout's own SK + DP (session 28)"),
    ((8192, 8192, 8192), ("col", "128x256", "dp"), "15 waves"),
    ((4096, 4096, 4096), ("col", "128x256", "dp"), "a last wave over half full"),
    ((4224, 4224, 8192), ("col", "128x176", "dp"), "edge tiles: 128 x 176 fills 6 waves"),
])
def test_planner_keeps_these(shape, plan, why):
    cfg = _cfg(shape)
    assert (cfg["layout"], cfg["macro_tile"], cfg["split"]) == plan, (why, cfg)


def test_named_tile_or_layout_keeps_the_callers_choice():
    assert _cfg((4864, 3072, 8192), plan={"layout": "row"})["layout"] == "row"
    named = _cfg((4864, 3072, 8192), plan={"layout": "row", "sg_m": 8, "nr": 192})
    assert (named["macro_tile"], named["split"]) == ("128x192", "dp")


# ---- on the GPU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("out", [BF16, np.float32])
def test_few_waves_sk_dp_plan_on_gpu(rng, out):
    """The planner's plan of 4864 x 3072 x 1032 (col 128 x 256 SK + DP: 456 tiles, 3 waves + 60, K
    tiles of 512 and a tail of 8) against float64; alpha / beta through gemm."""
    needs_hopper(DEV, "the ws kernel's Stream-K")
    m, n, k = 4864, 3072, 1032
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, out_dtype=out)
    assert (kern.config["layout"], kern.config["macro_tile"], kern.config["split"]) == ("col", "128x256", "sk+dp"), kern.config
    check_device_product(kern(a, b), a, b, out)
    c0 = rng.standard_normal((m, n)).astype(out)
    got = c0.copy()
    coopjit.gemm(a, b, got, alpha=0.75, beta=-2.0, device=DEV)
    check_device_product(got, a, b, out, c0, 0.75, -2.0)
