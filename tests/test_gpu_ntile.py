"""Hopper N tiles of any multiple of 8 (issue 16, session 18): the warp-specialized TMA kernel takes
wgmma m64nNk16 for N up to 256 in steps of 8 where B is K-major (its panel's rows whole 8-row swizzle
atoms, a TMA box of N rows), so that tiles can be cut to fill the SMs' waves: 4352 x 1024 in 8 x 32
tiles of 128 x 136 (two waves of 128 on 132 SMs) rather than 136 tiles of 128 x 256. The plan's nr
override names such a tile; the planner's rule for them (kNTileByWaves, on since session 19) takes
them where a measured rate and whole tiles along N make the waves cheaper (on the H100: 128 x 136
ran 4352x1024x4096 at 617 TFLOP/s against the plan before's 536, 128 x 144 4608x1024x8192 at 722
against 648; 128 x 192 in the row layout 2816x3456x8192 at 797 against 721).
Without a GPU: the plans and the modules on this machine's ptxas (PyPI's nvidia-cuda-nvcc; skipped,
saying so, without it). On an sm_90 GPU (cuda:0; skipped, saying which, elsewhere): against NumPy
in float64."""
import re

import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import needs_hopper

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16


def _tile(cfg):
    return int(cfg["mr"]) * int(cfg["sg_m"]), int(cfg["nr"]) * int(cfg["sg_n"])


# (layout col: C row-major, A's rows (contiguous along K) are the kernel's K-major B)
T136 = {"layout": "col", "sg_m": 8, "nr": 136}
T200 = {"layout": "col", "sg_m": 8, "nr": 200}


@pytest.mark.parametrize("plan, tile", [(T136, (128, 136)), (T200, (128, 200)),
                                        ({"layout": "col", "sg_m": 8, "nr": 168}, (128, 168))])
def test_plan_takes_n_tiles_of_multiples_of_8(plan, tile):
    cfg = ptx.compile_gemm(4352, 1024, 4096, BF16, target="sm_90", plan=plan).config
    assert _tile(cfg) == tile and cfg["layout"] == "col", cfg
    assert str(cfg["ws"]).startswith("2") and cfg["tma"].startswith("yes"), cfg


def test_n_tiles_off_64_need_tma_and_k_major_b():
    # trans_a: A (k x m) is the kernel's B (col) contiguous along N: its atoms are 64 columns wide
    with pytest.raises(Exception, match="nr"):
        ptx.compile_gemm(4352, 1024, 4096, BF16, target="sm_90", trans_a=True, plan=T136)
    with pytest.raises(Exception, match="nr|stages"):
        ptx.compile_gemm(4352, 1024, 4096, BF16, target="sm_90", plan={**T136, "tma": 0})
    with pytest.raises(Exception, match="nr"):
        ptx.compile_gemm(4352, 1024, 4096, BF16, target="sm_90", plan={**T136, "nr": 132})  # not a multiple of 8
    with pytest.raises(Exception, match="cluster"):
        ptx.compile_gemm(4352, 1024, 4096, BF16, target="sm_90", plan={**T136, "cluster": 2})
    # 192-row tiles (128 registers a work-item) keep multiples of 64: 192 x 216 did not assemble
    with pytest.raises(ValueError, match="sg_m up to 8.*sg_m=12, nr=200"):
        ptx.compile_gemm(4352, 1024, 4096, BF16, target="sm_90", plan={"layout": "col", "sg_m": 12, "nr": 200})


SMS = 132


def _kernel_mn(m, n, layout):
    return (n, m) if layout == "col" else (m, n)


# (H100, session 19, TFLOP/s, cuBLAS / the plan before / the planner's N tile:
# benchmarks/recorded/issue16-h100-waves-session19.md)
@pytest.mark.parametrize("m, n, k, trans_b, layout, tile", [
    (4352, 1024, 4096, False, "col", (128, 136)),  # 682 / 536 (136 tiles of 128 x 256, SK + DP) / 617
    (4352, 1024, 8192, True, "col", (128, 136)),   # 700 / 627 / 654
    (4608, 1024, 8192, False, "col", (128, 144)),  # 745 / 648 / 722
    (5632, 1152, 8192, False, "row", (128, 192)),  # 790 / 740 / 772: row's B is N-major, multiples of 64
    (2816, 3456, 8192, False, "row", (128, 192)),  # 792 / 721 / 797
    (4224, 4224, 4224, False, "col", (128, 176)),  # 751 / 741 (484 tiles of 192 x 192) / 747
    (5632, 1024, 8192, False, "col", (128, 176)),  # 742 / 695 (SK + DP) / 762: ahead of cuBLAS (lead's run)
])
def test_planner_takes_n_tiles_that_fill_their_waves(m, n, k, trans_b, layout, tile):
    cfg = ptx.compile_gemm(m, n, k, BF16, target="sm_90", trans_b=trans_b).config
    assert cfg["layout"] == layout and _tile(cfg) == tile and cfg["split"] == "dp", cfg
    km, kn = _kernel_mn(m, n, layout)
    assert kn % tile[1] == 0, (kn, tile)  # whole along the kernel's N
    tiles = -(-km // tile[0]) * (kn // tile[1])
    # more than a wave, the last at least 90% full where the 128 x 256 tiles' was under half
    assert tiles > SMS and (tiles % SMS == 0 or tiles % SMS >= 0.9 * SMS), tiles
    t256 = -(-n // 128) * -(-m // 256)  # the strides' layout (col), 128 x 256
    t192 = -(-n // 192) * -(-m // 192)
    assert (t256 % SMS and t256 % SMS <= SMS // 2) or t192 % SMS <= 0.75 * SMS, (t256, t192)
    assert str(cfg["ws"]).startswith("2") and cfg["tma"].startswith("yes"), cfg
    # f16 takes the same; a plan that names a tile, the layout where the rule's tile is the other's,
    # or no producers keeps its own
    assert _tile(ptx.compile_gemm(m, n, k, np.float16, target="sm_90", trans_b=trans_b).config) == tile
    assert _tile(ptx.compile_gemm(m, n, k, BF16, target="sm_90", trans_b=trans_b, plan={"sg_m": 8, "nr": 256}).config) == (128, 256)
    assert _tile(ptx.compile_gemm(m, n, k, BF16, target="sm_90", trans_b=trans_b, plan={"ws": 0}).config)[1] % 64 == 0


@pytest.mark.parametrize("m, n, k, trans_a, tile, split", [
    # (1024 x 4864: col 128 x 176 (edges) ran 653 against SK + DP's 671; since session 37 row 128 x 320
    # with an edge, one wave of 128 tiles: test_wide_edge_s37.py)
    # (2816 x 1920: 128 x 168 (edges) 701 against 715; 128 x 176 under the 3% margin; since session 27
    # 128 x 320 in the row layout, one wave: test_hopper_wide_tile_s27.py)
    (4864, 1792, 8192, False, (192, 192), "dp"),     # 128 x 176 would cut 4864 with an edge (759 against 749)
    (896, 4864, 8192, False, (192, 192), "dp"),      # 130 tiles: one wave
    (4096, 4096, 4096, False, (128, 256), "dp"),
    (8192, 8192, 8192, False, (128, 256), "dp"),
    # 7.3 waves: 757 against 128 x 176's 742 (cuBLAS 802); since session 28 SK + DP (kSkDpFewWaves:
    # whole tiles, 3-7 full waves, the last at most half full; H200 670.0 against DP's 683.8 us)
    (5632, 5632, 8192, False, (128, 256), "sk+dp"),
    (2048, 2048, 2048, False, (128, 256), "dp"),     # under a wave: unchanged
    # trans_a: the kernel's B (op(A)) N-major, 136 not allowed; SK + DP of 128 x 256 until session 38, then
    # one wave of 128 x 320 with an edge (kRate320OneTile; H200 57.1 -> 52.7 us, cuBLAS 53.3)
    (4352, 1024, 4096, True, (128, 320), "dp"),
])
def test_planner_keeps_its_tiles_where_they_measured_as_fast(m, n, k, trans_a, tile, split):
    cfg = ptx.compile_gemm(m, n, k, BF16, target="sm_90", trans_a=trans_a).config
    assert _tile(cfg) == tile and cfg["split"] == split and cfg["layout"] == "col", cfg


@pytest.mark.parametrize("plan, out, most", [(T136, BF16, 0), (T136, np.float32, 0), ({**T136, "nr": 200}, BF16, 8),
                                             ({**T136, "nr": 232}, BF16, 88), ({**T136, "split": "sk+dp"}, BF16, 0)])
def test_n_tile_modules_assemble_without_spills(plan, out, most):
    """128-row tiles up to 232 wide: no spills beyond the 128 x 256 kernel's (88 bytes here; 240 and
    248 spilled 104-116, and 192-row tiles other than 192 wide, 128 registers a work-item, 16-364:
    the planner's rule keeps to the others). (Since C is staged in pieces down to 8 columns, session
    19: 128 x 200 8 bytes, 192 8, 232 16, the others from 128 to 224 none.)"""
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    kern = ptx.compile_gemm(4352, 1024, 4096, BF16, target="sm_90", out_dtype=out, plan=plan)
    text = kern.source("ptx")
    n = int(plan["nr"])
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k16\.f32\.bf16\.bf16", text), "no m64n%dk16" % n
    report = ptx.ptxas(text, "sm_90")
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", report)]
    assert spills and max(spills) <= most, report
    ref = ptx.ptxas(ptx.compile_gemm(4352, 1024, 4096, BF16, target="sm_90", out_dtype=out,
                                     plan={"layout": "col", "sg_m": 8, "nr": 256}).source("ptx"), "sm_90")
    assert max(spills) <= max(int(x) for x in re.findall(r"(\d+) bytes spill stores", ref)), (report, ref)


@pytest.mark.parametrize("layout, n, out", [("col", 136, BF16), ("col", 152, np.float32), ("row", 168, BF16), ("row", 136, np.float32)])
def test_n_tiles_off_16_stage_their_epilogue(layout, n, out):
    """N tiles that are not a multiple of 16 store C through the warp's staging too (pieces of 64, 32
    or 16 columns, then 8), in 16-byte chunks, as the multiples of 16 do; before session 19 each lane
    stored its own elements (the checked path of edge tiles still does)."""
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    m, k = (4352, 1024) if layout == "col" else (1024, 4352)
    kern = ptx.compile_gemm(m, k, 4096, BF16, target="sm_90", out_dtype=out, trans_b=layout == "row",
                            plan={"layout": layout, "sg_m": 8, "nr": n, "split": "dp"})
    assert int(kern.config["nr"]) == n and kern.config["layout"] == layout, kern.config
    text = kern.source("ptx")
    assert re.search(r"st\.global\.v4\.(b32|u32|f32)", text), "C's 16-byte stores missing"
    report = ptx.ptxas(text, "sm_90")
    assert "0 bytes spill stores" in report, report


@pytest.mark.parametrize("n, out", [(136, BF16), (200, BF16), (152, np.float32), (200, np.float32), (256, BF16)])
def test_staged_epilogue_has_no_warpgroup_barrier_without_tma_boxes(n, out):
    """Whether a warp's 16 rows are a full tile (the staged store) or an edge (the lanes' checked
    stores) is decided a warp at a time, so a warpgroup barrier in the staged store alone is met by
    its full warps only: 128 x 136 and 128 x 200 tiles with 76 or 104 rows of C left hung on the
    H100 (session 23, test_n_tiles_against_float64's 4300 x 1000 cases). The barrier (and the wait
    for TMA stores before it) belongs to kernels whose C goes out in TMA boxes, N tiles of whole
    boxes (64 columns of 16-bit C, 32 of f32): there both stores take the boxes and meet it."""
    kern = ptx.compile_gemm(4300, 1000, 200, BF16, target="sm_90", out_dtype=out,
                            plan={"layout": "col", "sg_m": 8, "nr": n})
    assert int(kern.config["nr"]) == n and int(kern.config["tma_store"]) == 2, kern.config
    text = kern.source("ptx")
    barriers = re.findall(r"bar\.sync\s+%r\d+, 128;", text)
    boxes = n % (64 if out == BF16 else 32) == 0
    assert bool(barriers) == boxes, (n, out, len(barriers))
    assert ("cp.async.bulk.tensor.2d.global.shared::cta" in text) == boxes


def _gpu():
    needs_hopper(DEV, "the N tiles are its ws kernel's")


@pytest.mark.parametrize("m, n, k, dtype, out, trans_b, plan", [
    (4352, 1024, 4096, BF16, BF16, False, T136),
    (4352, 1024, 512, BF16, np.float32, True, T136),
    (4300, 1000, 200, BF16, BF16, False, T136),           # edges in M, N and K
    (4300, 1000, 136, np.float16, np.float32, True, T200),
    (4352, 1024, 1024, BF16, BF16, False, T200),
    (4352, 1024, 2048, BF16, BF16, False, {**T136, "split": "sk+dp"}),
    (4352, 1024, 2048, BF16, np.float32, False, {**T136, "split": "sk+dp", "sk_flags": 0}),
    (4352, 1024, 1024, BF16, BF16, False, {**T136, "persistent": 0}),
    (1024, 4352, 1024, BF16, BF16, True, {"layout": "row", "sg_m": 8, "nr": 136}),  # row: B (n x k) K-major
    # C staged in pieces of 64, 32, 16 and 8 columns (152 = 64 + 64 + 16 + 8; f32 C: 168 = 5 x 32 + 8)
    (4352, 1024, 1024, BF16, BF16, False, {**T136, "nr": 152}),
    (4352, 1024, 512, np.float16, np.float32, False, {**T136, "nr": 168}),
    (4480, 1024, 256, BF16, np.float32, False, {**T136, "nr": 152}),
    (1024, 4352, 1024, BF16, BF16, True, {"layout": "row", "sg_m": 8, "nr": 152}),
    (1024, 4256, 512, np.float16, np.float32, True, {"layout": "row", "sg_m": 8, "nr": 168}),
])
def test_n_tiles_against_float64(rng, m, n, k, dtype, out, trans_b, plan):
    _gpu()
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out, trans_b=trans_b, plan=plan)
    assert int(kern.config["nr"]) == plan["nr"], kern.config
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (n, k) if trans_b else (k, n)).astype(dtype)
    c = np.asarray(kern(a, b), dtype=np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    b64 = b64.T if trans_b else b64
    ref, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    eps = 2.0**-8 if out == BF16 else (2.0**-11 if out == np.float16 else 2.0**-23)
    assert np.all(np.abs(c - ref) <= (k + 2) * 2.0**-23 * mag + eps * np.abs(ref) + 1e-6), np.abs(c - ref).max()


@pytest.mark.parametrize("m, n, k, dtype, out, tile", [
    (4352, 1024, 320, BF16, BF16, (128, 136)),
    (5632, 1152, 256, np.float16, np.float32, (128, 192)),  # row
    (4224, 4224, 200, BF16, BF16, (128, 176)),
])
def test_planner_n_tiles_against_float64(rng, m, n, k, dtype, out, tile):
    _gpu()
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out)
    assert _tile(kern.config) == tile, kern.config
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (k, n)).astype(dtype)
    c = np.asarray(kern(a, b), dtype=np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    eps = 2.0**-8 if out == BF16 else (2.0**-11 if out == np.float16 else 2.0**-23)
    assert np.all(np.abs(c - ref) <= (k + 2) * 2.0**-23 * mag + eps * np.abs(ref) + 1e-6), np.abs(c - ref).max()
