"""2-tile SK + DP after 3-7 full waves (issue 16, session 28; planner rule kSkDpFewWaves,
cpp/plan/gpu_plan_internal.h): 16-bit warp-specialized plans of whole 128 x 256 tiles whose last
wave is at most half full take SK + DP (5632^2 x 8192: 968 tiles, 7 waves of the H200's 132 SMs +
44; 3584 x 4096 x 8192: 448, 3 + 52); elsewhere the plans stay as they were (a last wave over half
full, more than 7 waves, edge tiles, shapes the 192 x 192, 128 x 320 or N-tile rules take). Since
session 37 the N-tile and orientation rules count the rule's SK + DP (kSkDpCostFewWaves): 4864 x
3072, row 128 x 192 DP before, takes its faster col 128 x 256 SK + DP (test_skdp_cost_s37.py). Without a GPU:
the planner's choices. On an sm_90 GPU (cuda:0; skipped, saying which, elsewhere): the planner's
plan against NumPy in float64, K tails. Seed 1234 (conftest's rng)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import check_device_product as _check, needs_hopper

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16


def _plan(cfg):
    return cfg["layout"], cfg["macro_tile"], cfg["split"]


@pytest.mark.parametrize("dtype", [BF16, np.float16])
@pytest.mark.parametrize("shape", [(5632, 5632, 8192), (3584, 4096, 8192), (3584, 4096, 1040), (1792, 7552, 520),
                                   (4864, 3072, 8192)])
def test_planner_streams_the_last_wave(shape, dtype):
    """col 128 x 256 (the kernel's M is the product's N): 968, 448, 413 and 456 whole tiles, the last
    wave 44 / 52 / 17 / 60 of 132: SK + DP with the in-kernel fix-up, like the 1-2-wave rule's plans."""
    cfg = ptx.compile_gemm(*shape, dtype, target="sm_90").config
    assert _plan(cfg) == ("col", "128x256", "sk+dp"), cfg
    assert cfg["sk_flags"].startswith("yes") and cfg["ws"] == 2


@pytest.mark.parametrize("shape,plan", [
    ((8192, 8192, 8192), ("col", "128x256", "dp")),   # 15 waves + 68 (H100: SK + DP 1527 against 1495 us)
    ((4096, 4096, 4096), ("col", "128x256", "dp")),   # 3 + 116: over half full
    ((4096, 4608, 8192), ("col", "192x192", "dp")),   # the 192 x 192 rule's
    ((5120, 5120, 8192), ("col", "128x320", "dp")),   # the 128 x 320 rule's
    ((3584, 4096, 256), ("col", "128x256", "dp")),    # one K tile: nothing to split
    ((4800, 3072, 8192), ("col", "128x192", "dp")),   # 4800 / 256: edge tiles (the N-tile rule's 192, as before)
])
def test_planner_keeps_dp(shape, plan):
    """The plans main chose before the rule (checked against its build): unchanged. (4864 x 3072 x
    8192, row 128 x 192 DP here until session 37, streams since: above.)"""
    cfg = ptx.compile_gemm(*shape, BF16, target="sm_90").config
    assert _plan(cfg) == plan, cfg


def test_rule_leaves_named_plans():
    """A plan that names its split or tile keeps it."""
    cfg = ptx.compile_gemm(3584, 4096, 8192, BF16, target="sm_90", plan={"split": "dp"}).config
    assert _plan(cfg) == ("col", "128x256", "dp")
    cfg = ptx.compile_gemm(3584, 4096, 8192, BF16, target="sm_90", plan={"layout": "row", "sg_m": 8, "nr": 192}).config
    assert _plan(cfg) == ("row", "128x192", "dp")


# ---- on the GPU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3584, 4096, 520), (1792, 7552, 520)])
@pytest.mark.parametrize("out", [BF16, np.float32])
def test_streamed_plan_on_gpu(rng, shape, out):
    """The planner's SK + DP plan (a K tail: 520 = 512 + 8) against float64, and alpha / beta
    through gemm. (Device run 2 ran 3584 x 4096 x 520, and 4864 x 3072 x 1040 with an earlier form
    of the rule, on the same kernel, PTX byte for byte; 1792 x 7552 x 520 is new since.)"""
    needs_hopper(DEV, "the ws kernel's SK + DP")
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, out_dtype=out)
    assert _plan(kern.config) == ("col", "128x256", "sk+dp"), kern.config
    _check(kern(a, b), a, b, out)
    c0 = rng.standard_normal((m, n)).astype(out)
    got = c0.copy()
    coopjit.gemm(a, b, got, alpha=-1.5, beta=0.5, device=DEV)
    _check(got, a, b, out, c0, -1.5, 0.5)
