"""Hopper wgmma blocks wider than 256 (issue 16, session 27): 128 x 320 (and up to 128 x 384), two
consumer warpgroups of 64 x nr, each issuing two wgmmas a K slice (simt_wgmma.cpp: columns
[0, n1) and [n1, nr), n1 nr / 2 rounded up to 8 where B is K-major, to 64 where its atoms are 64
columns wide), 160 f32 accumulators a work-item, which the warp-specialized kernel's setmaxnreg
(ws 2: consumers 224 registers) makes room for. cuBLAS's nvjet 320 x 128 tile (its C^T: 320 along
torch's N) is coopjit's layout row, sg_m 8, nr 320. Without a GPU: the modules on this machine's ptxas (skipped, saying so,
without one) and the plan's rules. On an sm_90 GPU (cuda:0; skipped, saying which, elsewhere):
against NumPy in float64 (exact int64 for int8), edge tiles, K tails, Stream-K, alpha / beta.
The planner takes 128 x 320 DP where those tiles cut N whole and fill the waves better than 128 x 256
(kWideTileByWaves; 2816 x 1920: one wave of 132), never with a fused epilogue (refused: its steps
are unrolled over a warp's 16 x nr, the kernel IR's limit 4096 elements).
Seed 1234 (conftest's rng)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import _core, ptx
from coopjit._epilogue import Epilogue
from conftest import check_device_product as _check, check_int8_trans_b_product, needs_hopper, spill_stores

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16
WIDE = {"sg_m": 8, "nr": 320}


# (shape, dtype, out dtype, plan, trans_b, the wgmma pieces a K slice: (n, count in the PTX text))
CASES = [
    ((2816, 1920, 8192), BF16, BF16, {"layout": "row", "split": "dp"}, False, (192, 128)),  # B N-major: 192 + 128
    ((2816, 1920, 8192), BF16, np.float32, {"layout": "row", "split": "dp"}, True, (160,)),  # B K-major: 160 + 160
    ((2816, 1920, 8192), np.float16, np.float16, {"layout": "col", "split": "dp"}, False, (160,)),
    ((2816, 1920, 8192), BF16, BF16, {"layout": "row", "split": "sk+dp"}, False, (192, 128)),
    ((1000, 704, 2056), BF16, BF16, {"layout": "row", "split": "sk"}, False, (192, 128)),
    ((2816, 1920, 8192), BF16, BF16, {"layout": "row", "split": "dp", "nr": 384}, False, (192,)),
    ((2048, 1920, 2048), np.int8, None, {"layout": "col", "split": "dp", "ws": 2}, True, (160,)),
]


def _wide(plan):
    return dict(WIDE, **plan)


@pytest.mark.parametrize("case", CASES)
def test_wide_modules_assemble(ptxas, case):
    """The plan is 128 x nr, a producer warpgroup; 3 stages, or 4 with the epilogue's staging in
    them (epi_alias) where a DP block has one tile (kWideFourStages, session 38), its consumer
    warps meeting at named barrier 8 before the staging; the PTX issues the two pieces' wgmmas
    (4 K slices of each a step), raises the consumers' registers (setmaxnreg.inc 224); ptxas: no
    wgmma serialization, at most 64 bytes of spills (SK + DP's fix-up: 32)."""
    shape, dtype, out, plan, trans_b, pieces = case
    kw = {"out_dtype": out} if out is not None else {}
    kern = ptx.compile_gemm(*shape, dtype, target="sm_90", trans_b=trans_b, plan=_wide(plan), **kw)
    cfg = kern.config
    nr = plan.get("nr", 320)
    # (128 x 384: 4 stages of 64 KiB exceed the 227 KiB: 3, the staging after them)
    one_tile = plan["split"] == "dp" and cfg["persistent"] == "no" and nr == 320
    assert cfg["macro_tile"] == f"128x{nr}" and cfg["ws"] == 2 and cfg["work_group_size"] == 384
    assert (cfg["stages"], cfg["epi_alias"]) == ((4, "yes") if one_tile else (3, "no")), cfg
    text = kern.source("ptx")
    assert ("bar.sync 8, 256;" in text) == one_tile
    k = "k32" if dtype == np.int8 else "k16"
    for n in pieces:
        assert f"wgmma.mma_async.sync.aligned.m64n{n}{k}" in text, n
    assert "wgmma.mma_async.sync.aligned.m64n256" not in text and f"m64n{nr}" not in text
    assert "setmaxnreg.inc.sync.aligned.u32 224" in text and "setmaxnreg.dec.sync.aligned.u32 56" in text
    report = ptxas(text, "sm_90")
    assert "Potential Performance Loss" not in report, report
    assert sum(spill_stores(report)) <= 64, report


def test_wide_plan_refusals():
    """Wider than 256 only with TMA, two consumer warpgroups (sg_m 8, sg_n 1) and a producer
    warpgroup (ws 2); up to 384; refused naming the values elsewhere."""
    base = {"layout": "row", "split": "dp"}
    for plan, match in (({"ws": 1}, "not ws=1"), ({"ws": 0}, "not ws=0"), ({"sg_m": 4}, "sg_m=4"),
                        ({"sg_m": 12}, "sg_m=12"), ({"nr": 448}, "nr=448"), ({"nr": 520}, r"nr=520 is out of range \[1, 512\]"),
                        ({"tma": 0}, "tma=0"), ({"nr": 328}, "nr=328")):
        with pytest.raises(ValueError, match=match):
            ptx.compile_gemm(2816, 1920, 8192, BF16, target="sm_90", plan=dict(_wide(base), **plan))
    # (other tiles keep their limit: nr past 256 on a plan without wgmma)
    with pytest.raises(ValueError, match=r"nr=320 is out of range \[1, 256\]"):
        ptx.compile_gemm(2816, 1920, 8192, BF16, target="sm_90", plan=dict(_wide(base), wgmma=0))
    with pytest.raises(ValueError, match=r"nr=320 is out of range \[1, 256\]"):  # B's rows of 1300: no pipeline, no wgmma
        ptx.compile_gemm(1500, 1300, 2000, BF16, target="sm_90", plan=_wide(base))


@pytest.mark.parametrize("shape", [(5632, 5632, 8192), (4864, 3072, 8192), (8192, 8192, 8192),
                                   (4352, 1024, 8192), (4096, 4096, 4096)])
def test_planner_keeps_its_tiles(shape):
    """Where 128 x 320 tiles would not cut N whole (or leave no partial wave to save), the planner's
    plans stay at most 256 wide. (1024 x 4864, whose 128 x 320 tiles with an edge make one wave,
    takes them since session 37: test_wide_edge_s37.py.)"""
    kern = ptx.compile_gemm(*shape, BF16, target="sm_90")
    assert int(kern.config["macro_tile"].split("x")[1]) <= 256


@pytest.mark.parametrize("dtype", [BF16, np.float16])
@pytest.mark.parametrize("shape,layout", [((2816, 1920, 8192), "row"), ((2816, 1920, 4096), "row"), ((1920, 2816, 8192), "col")])
def test_planner_takes_320_where_it_fills_the_waves(shape, layout, dtype):
    """kWideTileByWaves: 2816 x 1920 in 128 x 320 tiles is 22 x 6 = 132, one wave of the H200's
    (and H100's) 132 SMs, where 128 x 256 leaves 165 tiles for SK + DP: the planner takes 128 x 320
    DP (ws 2; 4 stages with the epilogue's staging in them since session 38), in the orientation
    whose N is 1920. With a fused epilogue it keeps 128 x 256."""
    kern = ptx.compile_gemm(*shape, dtype, target="sm_90")
    cfg = kern.config
    assert (cfg["layout"], cfg["macro_tile"], cfg["split"], cfg["stages"], cfg["ws"], cfg["epi_alias"]) == \
        (layout, "128x320", "dp", 4, 2, "yes"), cfg
    m, n, k = shape
    steps = Epilogue("t", np.dtype(dtype), np.dtype(dtype), m, n, bind_arrays=False, bias=True, activation="gelu").steps()
    t = "bf16" if dtype == BF16 else "f16"
    fused = _core.gpu_gemm_kernel("target:sm_90", [t, t, t], [m, n, k, 1, 1], [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0], False, {}, steps)
    assert "128x320" not in fused.plan_key and ".wgmma." in fused.plan_key
    with pytest.raises(ValueError, match="fused epilogue"):
        _core.gpu_gemm_kernel("target:sm_90", [t, t, t], [m, n, k, 1, 1], [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0], False,
                              {"layout": 0, "sg_m": 8, "nr": 320, "split": 0}, steps)


# ---- on the GPU ---------------------------------------------------------------------------------

def _hopper():
    needs_hopper(DEV, "wgmma blocks of 128 x 320")


# 1000 x 704 x 264: edge tiles along both (row: 704 = 2 x 320 + 64 columns, 1000 = 7 x 128 + 104
# rows; col: the kernel's M is 704), a K tail (264 = 4 x 64 + 8); 704 x 1000 x 1000: 3 x 320 + 40.
@pytest.mark.parametrize("plan", [{"layout": "row"}, {"layout": "col"}, {"layout": "row", "split": "sk+dp"},
                                  {"layout": "row", "split": "sk"}, {"layout": "row", "nr": 384},
                                  {"layout": "row", "persistent": "no"}, {"layout": "row", "tma_store": "no"},
                                  {"layout": "row", "epi_smem": "no"}])
@pytest.mark.parametrize("out", [np.float32, BF16, np.float16])
@pytest.mark.parametrize("shape", [(1000, 704, 264), (704, 1000, 1000)])
def test_wide_gemm(rng, plan, out, shape):
    """Against float64; alpha / beta through gemm."""
    _hopper()
    m, n, k = shape
    dtype = np.float16 if out == np.float16 else BF16
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    plan = dict(WIDE, **plan)
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out, plan=plan)
    assert kern.config["macro_tile"] == f"128x{plan['nr']}"
    _check(kern(a, b), a, b, out)
    c0 = rng.standard_normal((m, n)).astype(out)
    got = c0.copy()
    coopjit.gemm(a, b, got, alpha=-1.5, beta=0.5, device=DEV, plan=plan)
    _check(got, a, b, out, c0, -1.5, 0.5)


@pytest.mark.parametrize("shape,split", [((2816, 1920, 8192), "dp"), ((1024, 4864, 2056), "dp"), ((1024, 4864, 2056), "sk+dp"),
                                         ((5632, 5632, 1024), "dp")])
def test_wide_gemm_large(rng, shape, split):
    """The trailing shapes' tiles (2816 x 1920: 22 x 6 = 132, one wave) and many waves, bf16 out, B
    row-major (N-major: pieces of 192 + 128) and transposed (K-major: 160 + 160)."""
    _hopper()
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    plan = dict(WIDE, layout="row", split=split)
    _check(coopjit.matmul(a, b, device=DEV, plan=plan), a, b, BF16)
    bt = np.ascontiguousarray(b.T)
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, trans_b=True, plan=plan)
    _check(kern(a, bt), a, b, BF16)


def test_wide_int8_exact(rng):
    """int8 -> int32 (B K-contiguous) in 128 x 320 blocks: exact against int64, alpha / beta."""
    _hopper()
    m, n, k = 1000, 704, 1040
    plan = dict(WIDE, split="dp", ws=2)
    check_int8_trans_b_product(rng, m, n, k, DEV, plan, lambda cfg: cfg["macro_tile"] == "128x320")


def test_wide_fused_epilogue_refused(rng):
    """bias + GELU fused on 128 x 320 blocks: a plan refusal naming the tile (never a wrong answer);
    the planner's own plan for the same call runs and is right."""
    _hopper()
    m, n, k = 1000, 704, 264
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    bias = rng.standard_normal(n).astype(BF16)
    with pytest.raises(ValueError, match="nr=320: a fused epilogue"):
        coopjit.compile_gemm(m, n, k, BF16, device=DEV, plan=dict(WIDE, layout="row", split="dp"), bias=True, activation="gelu")
    from math import erf
    got = coopjit.compile_gemm(m, n, k, BF16, device=DEV, bias=True, activation="gelu")(a, b, bias=bias).astype(np.float64)
    x = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    ref = 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(bias.astype(np.float64))
    assert (np.abs(got - ref) <= 2.0**-7 * np.abs(ref) + (k + 8) * 2.0**-22 * mag + 1e-3).all()
