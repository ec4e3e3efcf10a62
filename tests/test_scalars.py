"""alpha and beta at their edges: NaN / inf in float products propagate as in NumPy; an integer
product takes only integral scalars (a fractional or non-finite one is a clear error, never a
truncated answer)."""
import numpy as np
import pytest

import coopjit


def test_float_products_take_nan_and_inf_alpha(rng):
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((30, 20)).astype(np.float32)
    for alpha in (np.nan, np.inf, -np.inf):
        c = np.zeros((40, 20), np.float32)
        coopjit.gemm(a, b, c, alpha=alpha)
        with np.errstate(invalid="ignore"):
            ref = alpha * (a.astype(np.float64) @ b.astype(np.float64))
        np.testing.assert_array_equal(np.isnan(c), np.isnan(ref))
        np.testing.assert_array_equal(c[~np.isnan(ref)], ref[~np.isnan(ref)].astype(np.float32))


@pytest.mark.parametrize("alpha,beta", [(1.5, 0.0), (1.0, 0.25), (np.nan, 0.0), (np.inf, 0.0), (2.0**70, 0.0)])
def test_integer_products_refuse_non_integral_scalars(rng, alpha, beta):
    a = rng.integers(-5, 5, (16, 24)).astype(np.int8)
    b = rng.integers(-5, 5, (24, 8)).astype(np.int8)
    c = np.zeros((16, 8), np.int32)
    with pytest.raises(ValueError, match=r"integer GEMM takes integer alpha and beta|must be an integer \(within the int64 range\) for an integer product"):
        coopjit.gemm(a, b, c, alpha=alpha, beta=beta)
    assert not c.any()  # nothing written


def test_integer_products_take_integral_scalars(rng):
    a = rng.integers(-5, 5, (16, 24)).astype(np.int8)
    b = rng.integers(-5, 5, (24, 8)).astype(np.int8)
    c0 = rng.integers(-100, 100, (16, 8)).astype(np.int32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-3.0, beta=2)
    np.testing.assert_array_equal(c, -3 * (a.astype(np.int64) @ b.astype(np.int64)) + 2 * c0)
