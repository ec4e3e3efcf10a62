"""Hopper orientation (issue 16, session 18): 16-bit warp-specialized TMA plans take the layout (row /
col: which of the product's M and N the kernel's 128-row tile side runs along) whose tiles carry less
work over their waves, as cuBLAS cuts 4224 x 1024 into 33 x 4 tiles of 128 x 256 (one wave of 132)
where the strides' layout (col) cut it into 8 x 17 (136: two waves). Without a GPU: the planner's
choice, checked against the tile counts of both orientations computed here, and the module on this
machine's ptxas (PyPI's nvidia-cuda-nvcc; skipped, saying so, without it). On an sm_90 GPU (cuda:0;
skipped, saying which, elsewhere): against NumPy in float64."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import needs_hopper

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16
SMS = 132


def _tile(cfg):
    return int(cfg["mr"]) * int(cfg["sg_m"]), int(cfg["nr"]) * int(cfg["sg_n"])


def _work(m, n, layout, tile, sms=SMS):
    """Tile area a block computes over the waves of a DP plan (the kernel's M runs along n in col)."""
    km, kn = (n, m) if layout == "col" else (m, n)
    tiles = -(-km // tile[0]) * -(-kn // tile[1])
    return -(-tiles // sms) * tile[0] * tile[1]


@pytest.mark.parametrize("m, n, k, trans_a, trans_b, want", [
    (4224, 1024, 4096, False, False, "row"),  # col: 136 tiles of 128 x 256 (192 x 192: 132); row: 132 of 128 x 256
    (4224, 1024, 8192, True, False, "row"),
    (4224, 1024, 4096, False, True, "row"),
    (4224, 1024, 4096, True, True, "row"),
    (4200, 1000, 320, False, False, "col"),   # row's tiles would have edges both ways: slower on the H100 (468 against 563)
    (1024, 4224, 4096, False, False, "col"),  # the strides' layout already cuts 4224 into 128s
    (4352, 1024, 4096, False, False, "col"),  # 136 tiles of 128 x 256 either way: col's 128 x 136 (256, DP) kept
    (2816, 1920, 8192, False, False, "row"),  # col 165 (Stream-K), row 176 of 128 x 256; row 132 of 128 x 320 (session 27)
    (896, 4864, 8192, False, False, "col"),   # 130 tiles of 192 x 192 either way
    (4096, 4096, 4096, False, False, "col"),
    (520, 64, 136, False, True, "col"),        # small: 64 x 256 tiles (3) against 128 x 64 (5), both one wave; full tiles only
])
def test_planner_takes_the_orientation_of_less_work(m, n, k, trans_a, trans_b, want):
    cfg = ptx.compile_gemm(m, n, k, BF16, target="sm_90", trans_a=trans_a, trans_b=trans_b).config
    assert cfg["layout"] == want, cfg
    other = {"row": "col", "col": "row"}[want]
    alt = ptx.compile_gemm(m, n, k, BF16, target="sm_90", trans_a=trans_a, trans_b=trans_b, plan={"layout": other}).config
    assert alt["layout"] == other
    if want == "row":  # taken only where it is DP and its waves carry strictly less than the strides' layout's
        assert cfg["split"] == "dp" and str(cfg["ws"]).startswith("2"), cfg
        assert _work(m, n, "row", _tile(cfg)) < _work(m, n, "col", _tile(alt)), (cfg, alt)
        assert _work(m, n, "row", _tile(cfg)) in (128 * 256, 128 * 320)  # one wave of 128 x 256 (or 320: kWideTileByWaves)
    # a plan that names its layout or its tile keeps the strides' layout (col here: C row-major)
    assert ptx.compile_gemm(m, n, k, BF16, target="sm_90", trans_a=trans_a, trans_b=trans_b,
                            plan={"nr": 256, "sg_m": 8}).config["layout"] == "col"
    assert ptx.compile_gemm(m, n, k, BF16, target="sm_90", trans_a=trans_a, trans_b=trans_b,
                            plan={"layout": "col"}).config["layout"] == "col"


def test_planner_orientation_leaves_other_plans():
    # 8-bit plans (K-major copies, their own tile rule) and plans without producers keep the strides' layout
    assert ptx.compile_gemm(4224, 1024, 4096, np.int8, target="sm_90", trans_b=True).config["layout"] == "col"
    assert ptx.compile_gemm(4224, 1024, 4096, BF16, target="sm_90", plan={"ws": "no"}).config["layout"] == "col"


def test_row_oriented_module_assembles_without_spills():
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    for m, n, dtype, out in ((4224, 1024, BF16, BF16), (4224, 1024, np.float16, np.float32)):
        kern = ptx.compile_gemm(m, n, 4096, dtype, target="sm_90", out_dtype=out)
        assert kern.config["layout"] == "row" and _tile(kern.config) == (128, 256)
        report = ptx.ptxas(kern.source("ptx"), "sm_90")
        assert "Potential Performance Loss" not in report, report
        assert "0 bytes spill stores" in report, report


def _gpu():
    needs_hopper(DEV, "the orientation rule is its ws kernel's")


@pytest.mark.parametrize("m, n, k, dtype, out, trans_a, trans_b, plan", [
    (4224, 1024, 256, BF16, BF16, False, False, None),
    (4224, 1024, 192, BF16, np.float32, True, False, None),
    (4224, 1024, 320, np.float16, np.float16, False, True, None),
    (4200, 1000, 136, BF16, BF16, True, True, {"layout": "row"}),  # edges in M and N (named: the planner keeps col), K a multiple of 8 only
])
def test_row_oriented_plans_against_float64(rng, m, n, k, dtype, out, trans_a, trans_b, plan):
    _gpu()
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out, trans_a=trans_a, trans_b=trans_b, plan=plan)
    assert kern.config["layout"] == "row" and _tile(kern.config) == (128, 256), kern.config
    a = rng.uniform(-1, 1, (k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (n, k) if trans_b else (k, n)).astype(dtype)
    c = np.asarray(kern(a, b), dtype=np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    a64, b64 = (a64.T if trans_a else a64), (b64.T if trans_b else b64)
    ref, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    eps = 2.0**-8 if out == BF16 else (2.0**-11 if out == np.float16 else 2.0**-23)
    assert np.all(np.abs(c - ref) <= (k + 2) * 2.0**-23 * mag + eps * np.abs(ref) + 1e-6), np.abs(c - ref).max()
