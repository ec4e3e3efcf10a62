"""f32 squares on Intel's AMX-era Xeons (issue 14, session 22): the column-panel order (nc_tiles 1)
at 1-7 workers of a Sapphire / Emerald / Granite Rapids, and 8 shares a thread for f32 products of
4 GFLOP a worker or more on many cores. The plans are read through cross_compile (no Xeon here);
the products of those plan fields run on this machine against NumPy in float64."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import planned

XEONS = ["sapphirerapids", "emeraldrapids", "graniterapids"]


@pytest.mark.parametrize("cpu", XEONS)
@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("n", [1024, 2048, 4096])
def test_xeons_take_column_blocks_at_few_workers(cpu, threads, n):
    cfg = planned(n, n, n, threads=threads, cpu=cpu)
    assert (cfg["pack"], cfg["amx"], cfg["nc_tiles"]) == (True, "no", 1), cfg
    assert cfg["shares"] == 1, cfg  # (shares stay a many-core rule)


@pytest.mark.parametrize("cpu", ["znver4", "znver5", "skylake-avx512", "icelake-server"])
@pytest.mark.parametrize("threads", [1, 2])
def test_other_cpus_keep_row_blocks_at_few_workers(cpu, threads):
    for n in (1024, 2048):
        assert planned(n, n, n, threads=threads, cpu=cpu)["nc_tiles"] == 0


def test_xeon_rows_that_fit_half_of_l2_keep_row_blocks():
    # One worker's rows of one K tile within the 2 MiB L2: 512^3 (1 MiB of A) and 256 rows of a
    # 256-deep K tile keep the row blocks.
    assert planned(512, 512, 512, threads=1, cpu="emeraldrapids")["nc_tiles"] == 0
    assert planned(256, 4096, 256, threads=1, cpu="emeraldrapids")["nc_tiles"] == 0
    # The low-precision products keep their rules: AMX tiles (row blocks), bf16 dot products.
    bf = planned(2048, 2048, 2048, ml_dtypes.bfloat16, threads=1, cpu="emeraldrapids")
    assert bf["nc_tiles"] == 0, bf
    assert planned(2048, 2048, 2048, np.float64, threads=1, cpu="emeraldrapids")["nc_tiles"] == 0  # f64: not measured


@pytest.mark.parametrize("cpu", XEONS + ["znver5"])
def test_many_cores_cut_big_f32_products_into_eight_shares(cpu):
    for n in (4096, 8192):
        cfg = planned(n, n, n, threads=16, cpu=cpu)
        assert (cfg["pack"], cfg["inline_b"], cfg["shares"]) == (True, False, 8), cfg
    # Under 4 GFLOP a worker (2048^3 on 16: 1.07), and on 8 workers 3072^3 (7.2) against 2048^3
    # on 8 (2.1): 4 shares as before.
    assert planned(2048, 2048, 2048, threads=16, cpu=cpu)["shares"] == 4
    assert planned(1024, 1024, 1024, threads=16, cpu=cpu)["shares"] == 4
    assert planned(3072, 3072, 3072, threads=8, cpu=cpu)["shares"] == 8
    assert planned(2048, 2048, 2048, threads=8, cpu=cpu)["shares"] == 4


def test_eight_shares_are_f32_only_and_yield_to_plan_fields():
    bf = planned(4096, 4096, 4096, ml_dtypes.bfloat16, threads=16, cpu="emeraldrapids")
    assert bf["shares"] == 4, bf  # AMX tiles: not measured with 8
    f64 = planned(4096, 4096, 4096, np.float64, threads=16, cpu="emeraldrapids")
    assert f64["shares"] == 4, f64
    for dt in (np.float16, ml_dtypes.bfloat16):  # (f32 accumulators, other operands) without dot instructions
        assert planned(4096, 4096, 4096, dt, threads=16, cpu="x86-64-v3")["shares"] == 4
    assert planned(4096, 4096, 4096, threads=16, cpu="emeraldrapids", plan={"shares": 2})["shares"] == 2
    assert planned(4096, 4096, 4096, threads=16, cpu="emeraldrapids", plan={"threads": 2})["shares"] == 1
    # Few row panels: 64 rows (11 panels of 6) stay under 2 x 8 a worker row.
    skinny = planned(64, 8192, 8192, threads=16, cpu="emeraldrapids")
    assert skinny["shares"] != 8, skinny


@pytest.mark.parametrize("m, n, k, plan", [
    (1001, 517, 1300, {"threads": 1, "nc_tiles": 1, "kt": 512, "pack": 1}),  # several K tiles, odd edges
    (700, 900, 333, {"threads": 2, "nc_tiles": 1, "pack": 1}),
    (613, 389, 1100, {"threads": 2, "shares": 8, "kt": 256, "pack": 1}),  # partial sums of 5 K tiles per share
    (1000, 1000, 700, {"threads": 2, "shares": 8, "nc_tiles": 1, "pack": 1}),  # the 16-core plan's fields on 2
])
def test_the_new_default_fields_give_the_reference_product(rng, m, n, k, plan):
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    cfg = coopjit.compile_gemm(m, n, k, np.float32, plan=plan).config
    for f in ("nc_tiles", "shares"):
        if f in plan:
            assert cfg[f] == plan[f], cfg
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = coopjit.matmul(a, b, plan=plan)
    assert got.shape == (m, n) and got.dtype == np.float32
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err < 8 * np.sqrt(k) * np.finfo(np.float32).eps, err
    # alpha / beta into a strided view of C: only the view changes
    c0 = rng.standard_normal((m, 2 * n), dtype=np.float32)
    c = c0.copy()
    coopjit.gemm(a, b, c[:, ::2], alpha=0.5, beta=-1.5, plan=plan)
    want = 0.5 * ref - 1.5 * c0[:, ::2].astype(np.float64)
    assert np.abs(c[:, ::2] - want).max() / np.abs(want).max() < 8 * np.sqrt(k) * np.finfo(np.float32).eps
    assert np.array_equal(c[:, 1::2], c0[:, 1::2])
