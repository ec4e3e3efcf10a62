"""Plan nc_tiles: the packed blocked nest in blocks of column panels, each row panel across a
block (B's K-tile slices stay in L2, A streams past them). Results against float64 NumPy with
several K tiles, blocks that do not divide the worker's column panels, ragged edges, shares,
worker grids, alpha / beta and a bf16 result; the planner's default (8+ cores, f32 / f64, a worker's rows past half its L2);
the config's round trip; bad values."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import check_dtype_product as _check, dtype_operands as _operands


@pytest.mark.parametrize("dtype, m, n, k, plan", [
    (np.float32, 301, 257, 333, {"threads": 3, "kt": 64, "nc_tiles": 2}),  # 6 K tiles, ragged, a short last block
    (np.float64, 97, 130, 515, {"threads": 2, "kt": 128, "nc_tiles": 3}),
    (np.float32, 300, 200, 700, {"threads": 4, "shares": 3, "kt": 128, "nc_tiles": 1}),  # shares cut the nest
    (np.float32, 200, 520, 300, {"threads": 4, "grid_m": 2, "kt": 96, "nc_tiles": 5}),  # a 2 x 2 grid of workers
    (np.float64, 130, 70, 40, {"threads": 1, "nc_tiles": 4096}),  # one K tile, one block of everything
    ("bf16", 129, 100, 260, {"threads": 2, "amx": "no", "vnni": 1, "kt": 64, "nc_tiles": 2}),  # widened to f32 panels
])
def test_nc_tiles_gives_the_reference_product(rng, dtype, m, n, k, plan):
    a, b = _operands(rng, dtype, m, n, k)
    full = {"pack": 1, **plan}
    cfg = coopjit.compile_gemm(m, n, k, a.dtype, plan=full).config
    assert cfg["nc_tiles"] == plan["nc_tiles"] and cfg["inline_b"] is False, cfg
    _check(coopjit.matmul(a, b, plan=full), a, b, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nc_tiles_alpha_beta_and_bf16_out(rng, dtype):
    # Each K tile after the first adds into C; alpha / beta apply once, and a bf16 C keeps its
    # partial sums in the scratch until the last K tile.
    m, n, k = 150, 300, 400
    a, b = _operands(rng, dtype, m, n, k)
    plan = {"pack": 1, "threads": 2, "kt": 96, "nc_tiles": 2}
    c = rng.standard_normal((m, n)).astype(dtype)
    c0 = c.copy()
    coopjit.gemm(a, b, c, alpha=1.5, beta=-0.5, plan=plan)
    _check(c, a, b, dtype, 1.5, -0.5, c0)
    if dtype == np.float32:
        out = coopjit.matmul(a, b, plan=plan, out_dtype=ml_dtypes.bfloat16)
        assert out.dtype == ml_dtypes.bfloat16
        _check(out, a, b, "bf16")


def test_the_planner_orders_many_cores_by_column_panels():
    a = np.zeros((2048, 2048), np.float32)
    many = coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=16, code=False)["config"]
    assert (many["pack"], many["inline_b"], many["nc_tiles"]) == (True, False, 1), many
    assert coopjit.cross_compile(a.astype(np.float64), a.astype(np.float64), cpu="sapphirerapids",
                                 threads=16, code=False)["config"]["nc_tiles"] == 1
    # A worker's row panels that fit half its L2 (a named CPU: 1 MiB) keep the row blocks.
    # (512 x 512: 384 x 512 x 384 is left unpacked on 16 cores since session 18, test_many_core_mid.py)
    small = np.zeros((512, 512), np.float32), np.zeros((512, 512), np.float32)
    fits = coopjit.cross_compile(*small, cpu="sapphirerapids", threads=16, code=False)["config"]
    assert (fits["pack"], fits["inline_b"], fits["nc_tiles"]) == (True, False, 0), fits
    # 2 cores: the row-block order, as before, except f32 on the AMX-era Xeons (session 22,
    # test_gemm_xeon_f32_plans.py).
    assert coopjit.cross_compile(a, a, cpu="znver4", threads=2, code=False)["config"]["nc_tiles"] == 0
    assert coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=2, code=False)["config"]["nc_tiles"] == 1
    f64 = a.astype(np.float64)
    assert coopjit.cross_compile(f64, f64, cpu="sapphirerapids", threads=2, code=False)["config"]["nc_tiles"] == 0
    # Dot-instruction and AMX plans keep their order; so does a plan that names mc_tiles.
    bf = a.astype(ml_dtypes.bfloat16)
    assert coopjit.cross_compile(bf, bf, cpu="sapphirerapids", threads=16, code=False)["config"]["nc_tiles"] == 0
    assert coopjit.cross_compile(bf, bf, cpu="znver4", threads=16, code=False)["config"]["nc_tiles"] == 0  # vdpbf16ps
    named = coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=16, plan={"mc_tiles": 8}, code=False)["config"]
    assert named["nc_tiles"] == 0 and named["mc_tiles"] == 8, named
    # B packed inside the nest by its reader (inline_b) keeps its own order.
    few_rows = coopjit.cross_compile(np.zeros((128, 512), np.float32), np.zeros((512, 4096), np.float32),
                                     cpu="sapphirerapids", threads=16, code=False)["config"]
    assert (few_rows["inline_b"], few_rows["nc_tiles"]) == (True, 0), few_rows


def test_nc_tiles_round_trips_and_changes_the_key():
    plan = {"pack": 1, "kt": 128, "nc_tiles": 3}
    kern = coopjit.compile_gemm(256, 256, 600, np.float32, plan=plan)
    again = coopjit.compile_gemm(256, 256, 600, np.float32, plan=kern.config)
    assert again.config["nc_tiles"] == 3 and again.config == kern.config
    a, b = np.zeros((256, 600), np.float32), np.zeros((600, 256), np.float32)
    keys = {nc: coopjit.cross_compile(a, b, cpu="sapphirerapids", plan=dict(plan, nc_tiles=nc), code=False)["key"] for nc in (0, 1, 3)}
    assert len(set(keys.values())) == 3 and ".nc3" in keys[3] and ".nc" not in keys[0], keys


@pytest.mark.parametrize("plan, words", [
    ({"pack": 1, "nc_tiles": -1}, "nc_tiles=-1"),
    ({"pack": 1, "nc_tiles": 4097}, "nc_tiles=4097"),
    ({"pack": 0, "nc_tiles": 2}, "pack=1"),
    # (k_inner with nc_tiles is a nest since session 28: blocks of C through every K tile,
    # tests/test_amx_nest_s28.py)
    ({"pack": 1, "inline_b": 1, "nc_tiles": 2, "split": "dp"}, "inline_b=0"),
    ({"pack": 1, "nc_tiles": 1.5}, "nc_tiles"),
])
def test_nc_tiles_bad_values(plan, words):
    with pytest.raises((ValueError, TypeError), match=words):
        coopjit.compile_gemm(64, 64, 256, np.float32, plan=plan)
