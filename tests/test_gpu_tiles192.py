"""Hopper 192 x 192 tiles (issue 16): 16-bit products whose 128 x 256 tiles spill into a second wave
that 192 x 192 tiles keep to one take three consumer warpgroups of 64 x 192 in the warp-specialized
kernel (gpu_plan_tile.cpp). Without a GPU: the planner's choice and the module on this machine's ptxas
(PyPI's nvidia-cuda-nvcc; skipped, saying so, without it). On an sm_90 GPU (cuda:0; skipped, saying
which, elsewhere): against NumPy in float64."""
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


def _waves(m, n, tm, tn, sms=132):
    return -(-(-(-m // tm) * -(-n // tn)) // sms)


@pytest.mark.parametrize("m, n, k, dtype, want", [
    (896, 4864, 8192, BF16, (192, 192)),   # 152 tiles of 128 x 256 on 132 SMs, 130 of 192 x 192
    (4864, 896, 8192, np.float16, (192, 192)),
    (1920, 2304, 512, BF16, (192, 192)),   # 135 / 120
    # 561 (5 waves) / 484 (4): 10% less work a block; since session 19 the N-tile rule goes on to
    # 792 tiles of 128 x 176 (6 whole waves; test_gpu_ntile.py)
    (4224, 4224, 4224, BF16, (192, 192)),
    (3072, 3072, 8192, BF16, (192, 192)),  # 288 (3 waves) / 256 (2)
    (4864, 1792, 8192, BF16, (192, 192)),  # 266 (3) / 260 (2): no Stream-K either
    (4096, 4096, 4096, BF16, (128, 256)),  # 4 waves either way
    (6144, 6144, 6144, BF16, (128, 256)),  # 9 waves / 8: the same work a block
    (8192, 8192, 8192, BF16, (128, 256)),  # 16 / 15: 192 x 192 more
    (2048, 2048, 2048, BF16, (128, 256)),  # 128 tiles: one wave already
    (2304, 2304, 1024, BF16, (128, 256)),  # 162 / 144: two waves either way
])
def test_planner_takes_192_tiles_where_they_save_work(m, n, k, dtype, want):
    """192 x 192 where its waves carry less work a block than 128 x 256 tiles' (the 192 x 192
    kernel's rate a tile element taken as 2% lower), checked here from the tile counts."""
    w256, w192 = _waves(m, n, 128, 256), _waves(m, n, 192, 192)
    assert (1.02 * 192 * 192 * w192 < 128 * 256 * w256) == (want == (192, 192))
    cfg = ptx.compile_gemm(m, n, k, dtype, target="sm_90").config
    final = (128, 176) if (m, n, k) == (4224, 4224, 4224) else want
    assert _tile(cfg) == final, cfg
    if final == (192, 192):
        assert str(cfg["ws"]).startswith("2") and cfg["split"] == "dp", cfg
        assert cfg["persistent"].startswith("yes") == (w192 > 1), cfg
    # a plan that names its tile keeps it; int8 keeps its own shapes
    assert _tile(ptx.compile_gemm(m, n, k, dtype, target="sm_90", plan={"nr": 256}).config) != (192, 192)
    assert _tile(ptx.compile_gemm(m, n, k, np.int8, target="sm_90", trans_b=True).config) != (192, 192)
    # so do plans that ask for the kernel without producers, or for clusters
    assert _tile(ptx.compile_gemm(m, n, k, dtype, target="sm_90", plan={"ws": "no"}).config) != (192, 192)


def test_192_tile_module_assembles_without_spills():
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    for m, n, dtype, out in ((896, 4864, BF16, BF16), (4864, 896, np.float16, np.float32)):
        kern = ptx.compile_gemm(m, n, 8192, dtype, target="sm_90", out_dtype=out)
        assert _tile(kern.config) == (192, 192)
        report = ptx.ptxas(kern.source("ptx"), "sm_90")
        assert "Potential Performance Loss" not in report, report
        assert "0 bytes spill stores" in report, report


def _gpu():
    needs_hopper(DEV, "192 x 192 tiles are its ws kernel's")


@pytest.mark.parametrize("m, n, k, dtype, out", [
    (896, 4864, 256, BF16, BF16), (4864, 896, 320, np.float16, np.float32), (1920, 2304, 200, BF16, np.float32),
    (1880, 2296, 136, BF16, BF16),  # edges in M and N, K a multiple of 8 only
])
def test_192_tiles_against_float64(rng, m, n, k, dtype, out):
    _gpu()
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out)
    assert _tile(kern.config) == (192, 192), kern.config
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (k, n)).astype(dtype)
    c = np.asarray(coopjit.matmul(a, b, device=DEV, out_dtype=out), dtype=np.float64)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    eps = 2.0**-8 if out == BF16 else (2.0**-11 if out == np.float16 else 2.0**-23)
    assert np.all(np.abs(c - ref) <= (k + 2) * 2.0**-23 * mag + eps * np.abs(ref) + 1e-6), np.abs(c - ref).max()
