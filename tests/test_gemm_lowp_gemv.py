"""Few-row products of 16-bit inputs with 16-bit C (issue 14, session 20): the unpacked blocked
nest ("k_outer") keeps the K tiles' partial sums in a scratch matrix in the accumulator type and
writes C once, so bf16 / f16 vector-matrix products take it (they kept the tile walk, which read
B's column strips down all of K). The plans through cross_compile, and the products against NumPy
in float64 at M / N / K edges, strided and transposed operands, alpha / beta, bf16 and f32 C, 1
and 2 workers."""
import numpy as np
import pytest

import coopjit
from gemm_reference import BF16, check_product, plan_config


def _cfg(m, n, k, cpu, dtype=BF16, threads=2, **kw):
    return plan_config(m, n, k, cpu, dtype, threads, **kw)


@pytest.mark.parametrize("cpu,threads", [("znver4", 2), ("znver4", 1), ("znver5", 2), ("sapphirerapids", 16),
                                         ("sapphirerapids", 2)])
@pytest.mark.parametrize("dtype", [BF16, np.float16])
@pytest.mark.parametrize("m", [1, 2, 3])
def test_one_to_three_rows_of_16_bit_inputs_take_the_blocked_nest(cpu, threads, dtype, m):
    cfg = _cfg(m, 4096, 4096, cpu, dtype, threads)
    assert cfg["order"] == "k_outer" and cfg["pack"] is False, cfg
    assert cfg["c_type"] in ("bf16", "f16") and cfg["dtype"] == "f32", cfg
    assert int(cfg["kt"]) < 4096, cfg  # several K tiles: the partial sums go through the scratch


def test_k_outer_with_16_bit_c_asked_for():
    # the caller's order=k_outer with bf16 C (refused before session 20) and its remaining refusals
    cfg = _cfg(16, 300, 1200, "znver4", plan={"order": "k_outer", "pack": False})
    assert cfg["order"] == "k_outer" and cfg["c_type"] == "bf16", cfg
    with pytest.raises(ValueError, match="k_outer.*needs pack=0"):
        _cfg(16, 300, 1200, "znver4", plan={"order": "k_outer", "pack": True})
    with pytest.raises(ValueError, match="ksplit=2 splits K among the workers.*or bf16 C of f32 sums"):
        _cfg(1, 4096, 4096, "znver4", dtype=np.float16, plan={"ksplit": 2})  # f16 C: no K split
    # two rows of C: the K split of the whole block (session 26)
    assert int(_cfg(2, 4096, 4096, "znver4", plan={"ksplit": 2})["ksplit"]) == 2


@pytest.mark.parametrize("cpu,threads,want", [("znver4", 2, 2), ("znver5", 2, 2), ("znver4", 1, 0),
                                              ("sapphirerapids", 16, 0)])
def test_one_row_of_bf16_or_int32_c_splits_k_on_few_cores(cpu, threads, want):
    # as f32 C does (under 8 cores, 2 workers or more): each worker over all of N
    assert int(_cfg(1, 4096, 4096, cpu, threads=threads)["ksplit"]) == want
    assert int(_cfg(1, 4096, 4096, cpu, dtype=np.int8, threads=threads)["ksplit"]) == want
    assert int(_cfg(1, 4096, 4096, cpu, dtype=np.float16, threads=threads)["ksplit"]) == 0


@pytest.mark.parametrize("ksplit,kt", [(2, 8), (2, 64), (3, 16), (5, 200), (64, 8)])
@pytest.mark.parametrize("n,k", [(4096, 4096), (1000, 3001), (257, 515)])
def test_k_split_with_bf16_c_matches_numpy(rng, ksplit, kt, n, k):
    a = rng.uniform(-1, 1, (1, k)).astype(BF16)
    b = rng.uniform(-1, 1, (k, n)).astype(BF16)
    plan = {"order": "k_outer", "pack": False, "ksplit": ksplit, "kt": kt, "threads": 2}
    assert int(coopjit.compile_gemm(1, n, k, BF16, plan=plan).config["ksplit"]) == ksplit
    check_product(coopjit.matmul(a, b, plan=plan), a, b)
    check_product(coopjit.matmul(a[0], b, plan=plan)[None], a, b)  # a 1-D vector
    # alpha / beta into C, a row of a strided bf16 array (C's column stride 3)
    big = rng.uniform(-1, 1, (2, 3 * n)).astype(BF16)
    keep = big.copy()
    c0 = big[1:, ::3].copy()
    coopjit.gemm(a, b, big[1:, ::3], alpha=0.5, beta=-2.0, plan=plan)
    check_product(big[1:, ::3], a, b, alpha=0.5, beta=-2.0, c0=c0)
    big[1:, ::3] = keep[1:, ::3]
    np.testing.assert_array_equal(big.view(np.uint16), keep.view(np.uint16))  # nothing else written
    # A read with a stride along K, B with a stride along N
    a2 = rng.uniform(-1, 1, (1, 2 * k)).astype(BF16)[:, ::2]
    b2 = rng.uniform(-1, 1, (k, 2 * n)).astype(BF16)[:, ::2]
    check_product(coopjit.matmul(a2, b2, plan=plan), a2, b2)
    # NaN and infinities reach C as the kernel would round them
    bn = b.copy()
    bn[3, 0] = np.nan
    bn[5, 1] = np.inf
    got = coopjit.matmul(a, bn, plan=plan).astype(np.float64)
    ref = a.astype(np.float64) @ bn.astype(np.float64)
    assert np.isnan(got[0, 0]) and (np.isnan(ref[0, 1]) == np.isnan(got[0, 1]))
    assert got[0, 1] == ref[0, 1] or np.isnan(ref[0, 1])


# Every row count 1-9 (the k_outer walk's row remainders) with both output types, the two
# output types of a row count on different worker counts (1 and 2): 18 cases, every row count
# on both worker counts, rather than all 36 of the product.
@pytest.mark.parametrize("m,threads,out", [(m, 1 + (m + i) % 2, out) for m in range(1, 10)
                                           for i, out in enumerate((BF16, np.float32))])
def test_k_outer_with_16_bit_inputs_matches_numpy(rng, m, threads, out):
    n, k = 257 + 64 * (m % 3), 515 + 700 * (m % 2)
    a = rng.uniform(-1, 1, (m, k)).astype(BF16)
    b = rng.uniform(-1, 1, (k, n)).astype(BF16)
    for kt in (64, 200):  # several K tiles (the scratch), one a multiple of kb, one not a divisor of K
        plan = {"order": "k_outer", "pack": False, "kt": kt, "threads": threads}
        check_product(coopjit.matmul(a, b, plan=plan, out_dtype=out), a, b)
    # strided and transposed operands: A's rows every other column, B read along its columns
    a2 = rng.uniform(-1, 1, (m, 2 * k)).astype(BF16)[:, ::2]
    bt = np.ascontiguousarray(rng.uniform(-1, 1, (n, k)).astype(BF16)).T
    at = np.ascontiguousarray(rng.uniform(-1, 1, (k, m)).astype(BF16)).T
    plan = {"order": "k_outer", "pack": False, "kt": 128, "threads": threads}
    for x, y in ((a2, b), (a, bt), (at, b), (at, bt)):
        check_product(coopjit.matmul(x, y, plan=plan, out_dtype=out), x, y)
    # alpha / beta into an existing C of the output type
    c0 = rng.uniform(-1, 1, (m, n)).astype(out)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-1.5, beta=0.75, plan=plan)
    check_product(c, a, b, alpha=-1.5, beta=0.75, c0=c0)


@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (1, 1000, 3001), (2, 777, 2048), (3, 600, 1200), (1, 2048, 1025)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [BF16, np.float16])
def test_vector_matrix_products_of_16_bit_inputs_by_default(rng, m, n, k, threads, dtype):
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (k, n)).astype(dtype)
    old = coopjit.get_num_threads()
    try:
        coopjit.set_num_threads(threads)
        cfg = coopjit.compile_gemm(m, n, k, dtype).config
        assert cfg["order"] == "k_outer" and cfg["c_type"] in ("bf16", "f16"), cfg
        check_product(coopjit.matmul(a, b), a, b)
        check_product(coopjit.matmul(a[0], b), a[:1], b)  # a 1-D vector times a matrix
        bias = rng.uniform(-1, 1, n).astype(np.float32)
        got = coopjit.matmul(a, b, bias=bias)
        ref = a.astype(np.float64) @ b.astype(np.float64) + bias
        mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(bias)
        out_eps = 2.0**-8 if dtype == BF16 else np.finfo(dtype).eps
        assert np.all(np.abs(got.astype(np.float64) - ref) <= (k + 2) * np.finfo(np.float32).eps * mag
                      + out_eps * np.abs(ref))
    finally:
        coopjit.set_num_threads(old)


@pytest.mark.parametrize("beta", [0.0, 1.0, -3.0])
def test_k_split_with_bf16_c_beta(rng, beta):
    a = rng.uniform(-1, 1, (1, 2051)).astype(BF16)
    b = rng.uniform(-1, 1, (2051, 700)).astype(BF16)
    c = rng.uniform(-1, 1, (1, 700)).astype(BF16)
    c0 = c.copy()
    if beta == 0.0:
        c[0, ::3] = np.nan  # beta 0: C is not read, NaN there does not propagate
    coopjit.gemm(a, b, c, alpha=2.0, beta=beta, plan={"order": "k_outer", "ksplit": 3, "kt": 32})
    check_product(c, a, b, alpha=2.0, beta=beta, c0=c0)


@pytest.mark.parametrize("ta,tb", [(np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("ksplit,kt,k", [(2, 8, 4096), (3, 16, 3001), (5, 8, 515), (2, 8, 7)])
def test_k_split_of_integer_products_is_exact(rng, ta, tb, ksplit, kt, k):
    def ints(t, shape):
        info = np.iinfo(t)
        return rng.integers(info.min, info.max + 1, shape).astype(t)
    a, b = ints(ta, (1, k)), ints(tb, (k, 1031))
    plan = {"order": "k_outer", "ksplit": ksplit, "kt": kt, "threads": 2}
    np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), a.astype(np.int64) @ b.astype(np.int64))
    # alpha / beta (integers) into a strided int32 C; the other elements untouched
    big = rng.integers(-1000, 1000, (3, 2 * 1031)).astype(np.int32)
    keep = big.copy()
    coopjit.gemm(a, b, big[1:2, ::2], alpha=3, beta=-2, plan=plan)
    ref = 3 * (a.astype(np.int64) @ b.astype(np.int64)) - 2 * keep[1:2, ::2].astype(np.int64)
    np.testing.assert_array_equal(big[1:2, ::2], ref)
    big[1:2, ::2] = keep[1:2, ::2]
    np.testing.assert_array_equal(big, keep)
