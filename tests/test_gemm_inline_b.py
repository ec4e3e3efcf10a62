"""Packed products that pack B inside the blocked nest (plan inline_b): each worker packs the
K-tile slices of its own column panels into its slot just before its tiles read them (s8 x s8
with the slice's column sums). Against NumPy in float64 / exact int64: types, K tiles, ragged
edges, strides, transposes, alpha / beta, fused epilogues, worker counts, and bad plans."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16
FEATURES = coopjit.cpu_info()["features"]
NO_AMX = {"amx": "no"}  # the AVX-512 / AVX2 path (AMX CPUs take tiles by default, which never inline B)
INT8_PAIRS = [(np.uint8, np.int8), (np.int8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)]


def ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def exact(a, b):
    return a.astype(np.int64) @ b.astype(np.int64)


def bound(a, b, eps=np.finfo(np.float32).eps):
    """float32 accumulation of exact products: (K + 2) eps32 of the magnitudes."""
    return (a.shape[-1] + 2) * eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))


def test_planner_packs_b_inline_for_few_rows_only():
    # Few rows (their packed A of one K tile fits L2) and a wide B: B is packed by its reader
    # (the planner packs these where the CPU has the dot instructions; told to pack, always).
    for dtype, out in ((np.int8, np.int32), (BF16, np.float32)):
        cfg = coopjit.compile_gemm(64, 2048, 2048, dtype, out_dtype=out, plan=NO_AMX).config
        assert cfg["inline_b"] is cfg["pack"], cfg
        cfg = coopjit.compile_gemm(64, 2048, 2048, dtype, out_dtype=out, plan={**NO_AMX, "pack": 1}).config
        assert cfg["inline_b"] is True and cfg["grid_m"] == 1, cfg
        # the K tile's slice of a column panel fits 32 KiB (L1)
        assert cfg["kt"] * cfg["nr"] * (1 if dtype == np.int8 else 2) <= 32 << 10
    # Many rows: A's K-tile slice outgrows L2 and B's panels are shared by a packing phase.
    assert coopjit.compile_gemm(1024, 1024, 1024, np.int8, plan=NO_AMX).config["inline_b"] is False


@pytest.mark.parametrize("ta,tb", INT8_PAIRS)
@pytest.mark.parametrize("m,n,k,plan", [
    (64, 1000, 2051, {"pack": 1}),              # the planner's K tiles (several), ragged N and K
    (37, 300, 1001, {"inline_b": 1, "pack": 1}),  # narrower than the planner's choice
    (70, 130, 515, {"inline_b": 1, "pack": 1, "kt": 64}),  # many K tiles, N a panel and a bit
])
def test_int8_inline_b_is_exact(rng, ta, tb, m, n, k, plan):
    a, b = ints(rng, ta, (m, k)), ints(rng, tb, (k, n))
    c = coopjit.matmul(a, b, plan={**NO_AMX, **plan})
    np.testing.assert_array_equal(c, exact(a, b))


def test_int8_inline_b_plan_is_taken(rng):
    a, b = ints(rng, np.int8, (64, 2051)), ints(rng, np.int8, (2051, 1000))
    kern = coopjit.compile_gemm(64, 1000, 2051, np.int8, plan=NO_AMX)
    assert kern.config["inline_b"] is kern.config["pack"] and kern.config["kt"] < 2051  # several K tiles
    c = np.empty((64, 1000), np.int32)
    kern(a, b, c)
    np.testing.assert_array_equal(c, exact(a, b))


def test_int8_extremes_inline(rng):
    # (A + 128) B - 128 colsum(B) per K tile at its edges: A + 128 = 0 and 255.
    k = 3000
    for av in (-128, 127):
        for bv in (-128, 127):
            a = np.full((40, k), av, np.int8)
            b = np.full((k, 270), bv, np.int8)
            b[::7, ::3] = -bv - 1
            np.testing.assert_array_equal(coopjit.matmul(a, b, plan={**NO_AMX, "inline_b": 1, "pack": 1}), exact(a, b))


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_inline_b_worker_counts(rng, threads):
    # More workers than column panels leaves some idle (one row of workers: grid_m 1).
    a, b = ints(rng, np.int8, (50, 700)), ints(rng, np.int8, (700, 200))
    plan = {**NO_AMX, "inline_b": 1, "pack": 1, "threads": threads, "kt": 256}
    np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), exact(a, b))


def test_int8_inline_b_strides_transposes_alpha_beta(rng):
    # A view with a longer row stride, a transposed B (column stride != 1), alpha and beta.
    big = ints(rng, np.int8, (60, 1400))
    a = big[:, ::2]  # 60 x 700, column stride 2
    bt = ints(rng, np.int8, (330, 700))  # B = bt.T
    c0 = rng.integers(-10**6, 10**6, (60, 330)).astype(np.int32)
    c = c0.copy()
    coopjit.gemm(a, bt, c, alpha=3, beta=-2, trans_b=True, plan={**NO_AMX, "inline_b": 1, "pack": 1, "kt": 128})
    np.testing.assert_array_equal(c, 3 * exact(a, bt.T) - 2 * c0)


@pytest.mark.parametrize("out", [np.float32, BF16])
def test_bf16_inline_b(rng, out):
    # bf16 out: partial sums over the K tiles in the scratch matrix, rounded once.
    m, n, k = 64, 520, 1500
    a = rng.uniform(-2, 2, (m, k)).astype(BF16)
    b = rng.uniform(-2, 2, (k, n)).astype(BF16)
    # (2 workers: on 16 the planner keeps the packing phase, 9 column panels being fewer than them)
    kern = coopjit.compile_gemm(m, n, k, BF16, out_dtype=out, plan={**NO_AMX, "pack": 1, "threads": 2})
    assert kern.config["inline_b"] is True
    c = np.empty((m, n), out)
    kern(a, b, c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = bound(a, b) + (np.abs(ref) * 2.0**-8 if out == BF16 else 0)
    assert np.all(np.abs(c.astype(np.float64) - ref) <= tol)


def test_f32_inline_b_accumulate(rng):
    # float32 panels (vnni 1), C += alpha A B + beta C through gemm, odd sizes.
    m, n, k = 45, 333, 777
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=0.5, beta=2.0, plan={"inline_b": 1, "pack": 1, "kt": 200})
    ref = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 2.0 * c0
    assert np.all(np.abs(c - ref) <= 0.5 * bound(a, b) + 4 * np.finfo(np.float32).eps * np.abs(ref))


def test_int8_inline_b_fused_epilogue(rng):
    # A fused epilogue (scale, bias, relu) applies once to the whole sum over the K tiles.
    m, n, k = 48, 300, 1300
    a, b = ints(rng, np.int8, (m, k)), ints(rng, np.int8, (k, n))
    scale = rng.uniform(0.5, 1.5, n).astype(np.float32) * 1e-4
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    got = coopjit.matmul(a, b, scale=scale, bias=bias, activation="relu", out_dtype=np.float32,
                         plan={**NO_AMX, "inline_b": 1, "pack": 1, "kt": 256})
    ref = np.maximum(exact(a, b).astype(np.float64) * scale + bias, 0)
    assert np.all(np.abs(got - ref) <= 1e-5 * (np.abs(ref) + 1))


def test_bad_inline_b_plans(rng):
    a, b = ints(rng, np.int8, (64, 512)), ints(rng, np.int8, (512, 512))
    with pytest.raises(ValueError, match="inline_b=1 packs B inside the blocked nest"):
        coopjit.matmul(a, b, plan={**NO_AMX, "inline_b": 1, "pack": 1, "split": "sk"})
    with pytest.raises(ValueError, match="inline_b=1 needs one row of workers"):
        coopjit.matmul(a, b, plan={**NO_AMX, "inline_b": 1, "pack": 1, "grid_m": 2})
    with pytest.raises(ValueError, match="inline_b=1 packs B inside the blocked nest"):
        coopjit.matmul(a.astype(np.float32)[:8], b.astype(np.float32), plan={"inline_b": 1})  # unpacked
    with pytest.raises(ValueError, match="inline_b must be True or False"):
        coopjit.matmul(a, b, plan={**NO_AMX, "inline_b": 2})
    w = coopjit.prepack(b, plan=NO_AMX)
    with pytest.raises(ValueError, match="inline_b=1 packs B inside the blocked nest"):
        coopjit.matmul(a, w, plan={**NO_AMX, "inline_b": 1})
