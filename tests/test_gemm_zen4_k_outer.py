"""The k_outer walk's register tile on Zen 4 (issue 14, session 19): f32 / f64 products of 16
to 64 rows (long K) take tiles of 6-8 rows x 3 vectors and K tiles of 256 rows there (the
rule through cross_compile, on znver4 and not on other CPUs, bf16 or with the caller's tile), and
such products give NumPy's result (float64 reference) at M / N / K edges on 1 and 2 workers."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import fit_tile
from gemm_reference import check_product, plan_config

BF16 = ml_dtypes.bfloat16

def _check(c, a, b):
    # accumulated in the inputs' own type (f32 / f64 FMAs)
    check_product(c, a, b, acc_eps=np.finfo(a.dtype).eps)


@pytest.mark.parametrize("m,want_mr", [(16, 8), (17, 6), (21, 7), (24, 8), (30, 6), (35, 7), (63, 7), (64, 8)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype,lanes", [(np.float32, 16), (np.float64, 8)])
def test_zen4_k_outer_tile(m, want_mr, threads, dtype, lanes):
    # the height in [6, 8] that pads M least (the taller on ties), 3 vectors, K tiles of 256
    cfg = plan_config(m, 1024, 2048, "znver4", dtype=dtype, threads=threads)
    assert cfg["order"] == "k_outer", cfg
    assert (int(cfg["mr"]), int(cfg["nr"]), int(cfg["kt"])) == (want_mr, 3 * lanes, 256), cfg
    pad = -m % int(cfg["mr"])
    assert all(pad <= -m % r for r in (6, 7, 8)), cfg


@pytest.mark.parametrize("m,prefetch", [(1, 0), (4, 0), (6, 0), (8, 1024), (10, 1024), (15, 1024)])
def test_zen4_k_outer_below_16_rows_keep_their_tile(m, prefetch):
    # below 16 rows: the plans of session 17 (4 vectors; one row panel without prefetches)
    cfg = plan_config(m, 1024, 2048, "znver4")
    assert cfg["order"] == "k_outer" and int(cfg["nr"]) == 64 and int(cfg["b_prefetch"]) == prefetch, cfg


def test_zen4_k_outer_tile_only_where_measured():
    cfg = plan_config(64, 1024, 2048, "znver5")
    assert cfg["order"] == "k_outer" and int(cfg["nr"]) == 64, cfg
    # (the Xeon below 8 cores packs this one, B by its reader: its own few-row rule, session 34)
    cfg = plan_config(64, 1024, 2048, "sapphirerapids")
    assert cfg["pack"] and cfg["inline_b"] and int(cfg["nr"]) == 64, cfg
    cfg = coopjit.cross_compile(np.ones((64, 2048), BF16), np.ones((2048, 1024), BF16), cpu="znver4",
                                threads=2, code=False)["config"]  # bf16 (dot products): unmeasured
    assert not (int(cfg["mr"]) == 8 and int(cfg["nr"]) == 48 and int(cfg["kt"]) == 256), cfg
    cfg = plan_config(64, 1024, 2048, "znver4", threads=8)
    assert cfg["order"] == "k_outer" and int(cfg["nr"]) == 64, cfg
    # the caller's tile or K tile wins
    cfg = plan_config(64, 1024, 2048, "znver4", plan={"mr": 5, "nr": 64})
    assert (int(cfg["mr"]), int(cfg["nr"])) == (5, 64), cfg
    cfg = plan_config(64, 1024, 2048, "znver4", plan={"kt": 64})
    assert (int(cfg["mr"]), int(cfg["nr"]), int(cfg["kt"])) == (8, 48, 64), cfg


@pytest.mark.parametrize("m,n,k", [(9, 300, 600), (13, 257, 1001), (64, 4096, 777), (63, 97, 2049), (40, 1000, 520)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype,lanes", [(np.float32, 16), (np.float64, 8)])
def test_zen4_k_outer_tile_products(rng, m, n, k, threads, dtype, lanes):
    # the Zen 4 tile asked for by plan= (any AVX-512 CPU runs it; an AVX2 one its narrower fit:
    # fit_tile), and the host's default, against NumPy
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (k, n)).astype(dtype)
    mr, nr = fit_tile(8 if m % 7 else 7, 3 * lanes, dtype)
    plan = {"order": "k_outer", "mr": mr, "nr": nr, "kt": 256, "threads": threads}
    _check(coopjit.matmul(a, b, plan=plan), a, b)
    bs = np.asfortranarray(b)[:, :]  # B read with a non-unit stride along N
    _check(coopjit.matmul(a, bs, plan={k2: v for k2, v in plan.items() if k2 != "order"}), a, bs)
    old = coopjit.get_num_threads()
    try:
        coopjit.set_num_threads(threads)
        _check(coopjit.matmul(a, b), a, b)
        c = np.full((m, n), 0.5, dtype)
        coopjit.gemm(a, b, c, alpha=-1.5, beta=2.0, plan=plan)
        ref = -1.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 1.0
        assert np.allclose(c, ref, rtol=1e-4, atol=1e-3 * np.sqrt(k))
    finally:
        coopjit.set_num_threads(old)
