"""Low-precision GEMM: bfloat16, float16 and float8 inputs accumulating in float32, int8/uint8
accumulating in int32, against NumPy in float64."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16, E4M3, E5M2 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2


def exact_product(a, b):
    """The product of the inputs as stored, in float64 (every input value is exact in float64)."""
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("dtype", [np.float16, BF16, E4M3, E5M2])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (17, 33, 65), (64, 48, 100), (130, 70, 257)])
def test_low_precision_floats_accumulate_in_float32(rng, dtype, m, n, k):
    a = rng.uniform(-2, 2, (m, k)).astype(dtype)
    b = rng.uniform(-2, 2, (k, n)).astype(dtype)
    ref = exact_product(a, b)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    c32 = np.zeros((m, n), np.float32)
    coopjit.matmul(a, b, out=c32)
    # float32 accumulation: (k + 2) eps32 of the magnitudes, far below the inputs' precision
    assert np.all(np.abs(c32 - ref) <= (k + 2) * np.finfo(np.float32).eps * mag + 1e-30)
    c = coopjit.matmul(a, b)
    if np.dtype(dtype).itemsize == 1:
        assert c.dtype == np.float32  # float8 products come back in float32
    else:
        assert c.dtype == np.dtype(dtype)  # rounded once, from the float32 accumulator
        np.testing.assert_array_equal(c, c32.astype(dtype))


@pytest.mark.parametrize("ta,tb", [(np.uint8, np.int8), (np.int8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("m,n,k", [(3, 5, 7), (40, 70, 300), (129, 33, 1000)])
def test_int8_accumulates_exactly_in_int32(rng, ta, tb, m, n, k):
    ia, ib = np.iinfo(ta), np.iinfo(tb)
    a = rng.integers(ia.min, ia.max + 1, (m, k)).astype(ta)
    b = rng.integers(ib.min, ib.max + 1, (k, n)).astype(tb)
    c = coopjit.matmul(a, b)
    assert c.dtype == np.int32
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


def test_int8_gemm_alpha_beta_and_transposes(rng):
    a = rng.integers(-128, 128, (20, 30)).astype(np.int8)
    b = rng.integers(-128, 128, (40, 30)).astype(np.int8)
    c0 = rng.integers(-1000, 1000, (20, 40)).astype(np.int32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=3, beta=-2, trans_b=True)
    np.testing.assert_array_equal(c, 3 * (a.astype(np.int64) @ b.T.astype(np.int64)) - 2 * c0)
    with pytest.raises(ValueError, match="integer alpha and beta, got alpha=0.5"):
        coopjit.gemm(a, b, c, alpha=0.5, trans_b=True)


def test_bf16_batched_and_compiled_kernel(rng):
    a = rng.uniform(-1, 1, (6, 16, 32)).astype(BF16)
    b = rng.uniform(-1, 1, (32, 24)).astype(BF16)
    out = np.zeros((6, 16, 24), np.float32)
    coopjit.matmul(a, b, out=out)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out - ref).max() < 1e-4
    k = coopjit.compile_gemm(16, 24, 32, BF16, out_dtype=np.float32)
    assert k.config["a_type"] == "bf16" and k.config["dtype"] == "f32"
    np.testing.assert_allclose(k(a[0], b), ref[0], atol=1e-4)


def test_unsupported_low_precision_combinations():
    with pytest.raises(TypeError, match="mixed dtypes: a is float16, b is bfloat16"):
        coopjit.matmul(np.ones((2, 2), np.float16), np.ones((2, 2), BF16))
    with pytest.raises(TypeError, match=r"output has dtype float64; for float16 x float16 it must be one of float16, float32"):
        coopjit.gemm(np.ones((2, 2), np.float16), np.ones((2, 2), np.float16), np.zeros((2, 2)))
    with pytest.raises(TypeError, match=r"out has dtype int8, but a float16 x float16 product is float16"):
        coopjit.matmul(np.ones((2, 2), np.float16), np.ones((2, 2), np.float16), out=np.zeros((2, 2), np.int8))
    with pytest.raises(TypeError, match="int32 x int32|a has dtype int32"):
        coopjit.matmul(np.ones((2, 2), np.int32), np.ones((2, 2), np.int32))
