"""K split of a whole small M x N block among the workers (issue 14, session 26): GemmPlan::ksplit
beyond one row of C. Each part runs the k_outer walk over all of C for its K range, part 0 into C
with beta, the others into their own blocks of partial sums (bf16 C: every part into f32 scratch,
rounded once), added into C by the caller. The many-core planner takes it for fewer than two
tiles a worker and a long K (64x64x8192 f32 on the 16-core Emerald Rapids host); the 2-core plans
keep their walks. Plans are read through coopjit.cross_compile; every product is checked against
NumPy in float64 (int64 for int8: exact), with odd sizes, K remainders, 2 / 3 / 16 workers through
plan= threads, alpha / beta, out=, fused epilogues (applied once, by a launch of the last K tile
that adds the other parts' sum), transposed and strided operands. Seeds: the rng fixture."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import check_scaled_product as _check, planned

BF16 = ml_dtypes.bfloat16
HOST = "emeraldrapids"


def _plan(ksplit, threads, **kw):
    return {"order": "k_outer", "ksplit": ksplit, "threads": threads, **kw}


# --- the planner --------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,k,dtype", [(64, 64, 8192, np.float32), (32, 32, 16384, np.float32),
                                         (64, 128, 8192, np.float32), (16, 16, 65536, np.float32),
                                         (64, 64, 8192, np.float64), (128, 128, 4096, np.float32)])
def test_many_core_host_splits_k_of_a_small_block(m, n, k, dtype):
    cfg = planned(m, n, k, dtype, cpu=HOST)
    # (blocks of at most 64 x 64, four vectors wide or more: the parts run the tile walk, session 27)
    walk = "m_inner" if m <= 64 and n <= 64 and n * np.dtype(dtype).itemsize >= 256 else "k_outer"
    assert (cfg["order"], cfg["ksplit"], cfg["threads"], cfg["split"], cfg["pack"]) == (walk, 16, 16, "dp", False), cfg
    # the K tiles of several row panels stay the 16 KiB slices of B, whole tiles a part
    assert k // 16 % cfg["kt"] == 0 or m <= cfg["mr"], cfg


@pytest.mark.parametrize("m,n,k,plan", [
    (256, 128, 4096, None),     # 96 tiles: six a worker (the packed nest)
    (3000, 500, 200, None),     # many tiles, short K
    (64, 4096, 4096, None),     # many column panels
    (64, 64, 2048, None),       # K under 256 a worker
    (1, 64, 65536, None),       # one row of C: its own rules (unmeasured here)
    (64, 64, 8192, {"split": "sk+dp"}),  # a named split keeps the walk
    (64, 64, 8192, {"ksplit": 0}),       # ksplit 0 forbids it
    (64, 64, 8192, {"mr": 8}),           # a named tile keeps the walk
    (128, 128, 4096, {"pack": 1}),       # so does a named packing
])
def test_many_core_host_keeps_other_walks(m, n, k, plan):
    assert planned(m, n, k, cpu=HOST, plan=plan)["ksplit"] == 0


def test_few_cores_and_other_types_keep_their_plans():
    # the 2-core Zen 5's plan is unchanged (two workers share 12 tiles)
    assert planned(64, 64, 8192, cpu="znver5", threads=2)["ksplit"] == 0
    # bf16 / int8 inputs are not taken by the rule (measured for f32 / f64 only)
    assert planned(64, 64, 8192, BF16, cpu=HOST)["ksplit"] == 0
    assert planned(64, 64, 8192, np.int8, cpu=HOST)["ksplit"] == 0


def test_ksplit_named_without_a_walk_takes_k_outer():
    cfg = planned(64, 64, 8192, cpu="znver5", threads=2, plan={"ksplit": 2})
    assert (cfg["order"], cfg["ksplit"]) == ("k_outer", 2), cfg


def test_impossible_ksplit_plans_are_refused_naming_the_values():
    a, b = np.ones((40, 600), np.float32), np.ones((600, 30), np.float32)
    with pytest.raises(ValueError, match="ksplit=3 is a launch of the k_outer walk.*walk is dot"):
        coopjit.matmul(a, b, plan={"ksplit": 3, "order": "dot"})
    with pytest.raises(ValueError, match="ksplit=2000 is out of range"):
        coopjit.matmul(a, b, plan={"ksplit": 2000})
    h = np.ones((40, 600), np.float16)
    with pytest.raises(ValueError, match="ksplit=2 splits K among the workers.*got C f16"):
        coopjit.matmul(h, h.T.copy(), plan=_plan(2, 2))


# --- the products -------------------------------------------------------------------------------

@pytest.mark.parametrize("threads,ksplit", [(2, 2), (3, 3), (16, 16), (2, 5), (3, 16)])
@pytest.mark.parametrize("m,n", [(2, 3), (7, 33), (37, 70), (64, 64)])
@pytest.mark.parametrize("k", [1000, 2053])
def test_f32_blocks_every_worker_count(rng, threads, ksplit, m, n, k):
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    plan = _plan(ksplit, threads, kt=32)
    cfg = coopjit.compile_gemm(m, n, k, np.float32, plan=plan).config
    assert (int(cfg["ksplit"]), int(cfg["threads"]), cfg["order"]) == (ksplit, threads, "k_outer"), cfg
    _check(coopjit.matmul(a, b, plan=plan), a, b)


# the K split's two walks: k_outer (session 26) and the tile walk, order m_inner (session 27)
WALKS = pytest.mark.parametrize("walk", [{"order": "k_outer"}, {"order": "m_inner", "pack": 0}], ids=["k_outer", "m_inner"])


@WALKS
@pytest.mark.parametrize("threads,ksplit", [(2, 2), (3, 7), (16, 16)])
@pytest.mark.parametrize("m,n,k", [(64, 64, 8192), (13, 200, 4099), (13, 40, 4099)])
def test_f64_blocks(rng, threads, ksplit, m, n, k, walk):
    a = rng.uniform(-1, 1, (m, k))
    b = rng.uniform(-1, 1, (k, n))
    _check(coopjit.matmul(a, b, plan=_plan(ksplit, threads, **walk)), a, b, rtol=1e-12)


@WALKS
@pytest.mark.parametrize("threads,ksplit", [(2, 2), (3, 7), (16, 16)])
def test_int8_blocks_exact(rng, threads, ksplit, walk):
    a = rng.integers(-128, 128, (23, 3001), dtype=np.int8)
    b = rng.integers(-128, 128, (3001, 45), dtype=np.int8)
    got = coopjit.matmul(a, b, plan=_plan(ksplit, threads, **{"pack": False, **walk}))
    np.testing.assert_array_equal(np.asarray(got, np.int64), a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("threads,ksplit", [(2, 2), (3, 5), (16, 16)])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_bf16_c_rounded_once(rng, threads, ksplit, beta):
    a = rng.uniform(-1, 1, (19, 2051)).astype(BF16)
    b = rng.uniform(-1, 1, (2051, 70)).astype(BF16)
    c = rng.uniform(-1, 1, (19, 70)).astype(BF16)
    c0 = c.copy()
    if beta == 0.0:
        c[...] = np.nan  # beta 0: C is not read
    coopjit.gemm(a, b, c, alpha=0.75, beta=beta, plan=_plan(ksplit, threads, pack=False))
    assert c.dtype == BF16
    ref = 0.75 * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c0.astype(np.float64)
    # one rounding to bf16 of an f32 sum: half an ulp of bf16 plus the f32 sums' error
    err = np.abs(c.astype(np.float64) - ref) / np.maximum(np.abs(ref), 1e-3)
    assert float(np.median(err)) < 2 ** -9 and float(err.max()) < 2 ** -7, (np.median(err), err.max())
    # the same call with no K split gives the same bf16 values but for sums near a rounding tie
    c2 = c0.copy()
    coopjit.gemm(a, b, c2, alpha=0.75, beta=beta, plan={"order": "k_outer", "pack": False, "threads": threads})
    assert np.mean(c2.astype(np.float32) == c.astype(np.float32)) > 0.95


@WALKS
@pytest.mark.parametrize("beta", [0.0, -0.5, 1.0])
@pytest.mark.parametrize("threads", [2, 3, 16])
def test_alpha_beta_into_a_strided_block_of_a_larger_c(rng, beta, threads, walk):
    a = rng.uniform(-1, 1, (30, 2500)).astype(np.float32)
    b = rng.uniform(-1, 1, (2500, 40)).astype(np.float32)
    big = rng.uniform(-1, 1, (70, 100)).astype(np.float32)
    c0 = big.copy()
    view = big[5:65:2, 10:90:2]
    if beta == 0.0:
        view[...] = np.nan
    a0, b0 = a.copy(), b.copy()
    coopjit.gemm(a, b, view, alpha=1.5, beta=beta, plan=_plan(threads, threads, **walk))
    _check(big[5:65:2, 10:90:2], a, b, alpha=1.5, beta=beta, c0=c0[5:65:2, 10:90:2])
    mask = np.ones(big.shape, bool)
    mask[5:65:2, 10:90:2] = False
    np.testing.assert_array_equal(big[mask], c0[mask])  # nothing outside the view is written
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@WALKS
@pytest.mark.parametrize("threads", [2, 16])
def test_out_and_transposed_strided_operands(rng, threads, walk):
    at = rng.uniform(-1, 1, (3001, 50)).astype(np.float32)    # A = at.T: column-major A
    bb = rng.uniform(-1, 1, (6002, 60)).astype(np.float32)    # B = bb[::2, 3:51]: strided rows
    a, b = at.T, bb[::2, 3:51]
    out = np.full((50, 48), np.nan, np.float32)
    got = coopjit.matmul(a, b, out=out, plan=_plan(threads, threads, **walk))
    assert got is out or np.shares_memory(got, out)
    _check(out, a.copy(), b.copy())
    # a transposed C layout (the planner's "col": C^T = B^T A^T) also splits K
    got = coopjit.matmul(b.T.copy(), a.T.copy(), plan=_plan(threads, threads, **walk))
    _check(got, b.T.copy(), a.T.copy())


def test_planner_choice_runs_on_a_16_worker_pool(rng):
    # the host's plan (the tile walk since session 27, ksplit 16, 16 threads) run here through plan= threads
    cfg = planned(64, 64, 8192, cpu=HOST)
    plan = {x: cfg[x] for x in ("order", "ksplit", "threads", "kt", "mr", "nr")}
    a = rng.uniform(-1, 1, (64, 8192)).astype(np.float32)
    b = rng.uniform(-1, 1, (8192, 64)).astype(np.float32)
    try:
        got = coopjit.matmul(a, b, plan=plan)
    except ValueError as e:  # a register tile this machine's vectors cannot hold
        pytest.skip(f"the host's tile does not fit this CPU: {e}")
    _check(got, a, b)


@pytest.mark.parametrize("threads,ksplit", [(2, 2), (3, 5), (16, 16)])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_fused_epilogue_applies_once_after_the_sum(rng, threads, ksplit, beta):
    # bias per column, a row scale, gelu and a residual: a nonlinear step, so applying it to each
    # part (or twice) gives a different answer
    m, n, k = 21, 70, 2057
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    res = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    plan = _plan(ksplit, threads, kt=64)
    got = coopjit.matmul(a, b, bias=bias, activation="relu", residual=res, plan=plan)
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0.0) + res
    _check(got, ref, np.eye(n), rtol=2e-5)
    assert coopjit.compile_gemm(m, n, k, np.float32, plan=plan).config["ksplit"] == ksplit


@pytest.mark.parametrize("threads,ksplit", [(2, 3), (16, 16)])
def test_fused_epilogue_with_bf16_c(rng, threads, ksplit):
    a = rng.uniform(-1, 1, (9, 1500)).astype(BF16)
    b = rng.uniform(-1, 1, (1500, 40)).astype(BF16)
    bias = rng.uniform(-1, 1, 40).astype(np.float32)
    got = coopjit.matmul(a, b, bias=bias, plan=_plan(ksplit, threads, pack=False, kt=32))
    assert got.dtype == BF16
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias
    err = np.abs(got.astype(np.float64) - ref) / np.maximum(np.abs(ref), 1e-2)
    assert float(np.median(err)) < 2 ** -9, float(np.median(err))


def test_fused_epilogue_k_of_one_tile_runs_whole(rng):
    # K within one K tile: no parts to add (the plain launch)
    a = rng.uniform(-1, 1, (12, 30)).astype(np.float32)
    b = rng.uniform(-1, 1, (30, 20)).astype(np.float32)
    bias = rng.uniform(-1, 1, 20).astype(np.float32)
    got = coopjit.matmul(a, b, bias=bias, plan=_plan(4, 2, kt=64))
    _check(got, a.astype(np.float64) @ b + bias, np.eye(20))


@pytest.mark.parametrize("threads,ksplit", [(2, 4), (16, 16)])
def test_fused_scales_and_sigmoid_with_alpha_beta(rng, threads, ksplit):
    m, n, k = 33, 50, 3000
    a = rng.uniform(-1, 1, (m, k))
    b = rng.uniform(-1, 1, (k, n))
    scale = rng.uniform(0.5, 2, n)
    row_scale = rng.uniform(0.5, 2, m)
    c = rng.uniform(-1, 1, (m, n))
    c0 = c.copy()
    coopjit.gemm(a, b, c, alpha=0.5, beta=2.0, scale=scale, row_scale=row_scale, activation="sigmoid",
                 plan=_plan(ksplit, threads, kt=64))
    ref = 1.0 / (1.0 + np.exp(-(0.5 * (a @ b) * scale * row_scale[:, None] + 2.0 * c0)))
    np.testing.assert_allclose(c, ref, rtol=1e-12, atol=1e-13)
