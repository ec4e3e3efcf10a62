"""coopjit.reduce and reduce2x2 against NumPy: every op, axis and dtype, views, NaN, empties."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

FLOATS = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
INTS = [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32, np.uint64]
OPS = ["sum", "prod", "min", "max"]
NP = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}


def data(rng, shape, dtype, op):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = (max(info.min, -3), min(info.max, 3)) if op == "prod" else (max(info.min, -100), min(info.max, 100))
        return rng.integers(lo, hi + 1, shape).astype(dtype)
    x = rng.uniform(0.99, 1.01, shape) if op == "prod" else rng.standard_normal(shape)  # products stay in range
    return x.astype(dtype)


def check(got, x, axis, op):
    want_dtype = NP[op](np.zeros((1,), x.dtype)).dtype if x.dtype != ml_dtypes.bfloat16 else x.dtype
    if x.dtype == np.float16:
        want_dtype = np.float16
    assert np.asarray(got).dtype == want_dtype, (np.asarray(got).dtype, want_dtype)
    ref = NP[op](x.astype(np.float64) if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16 else x, axis=axis)
    if x.dtype.kind in "iub":
        np.testing.assert_array_equal(got, ref)
        return
    n = x.size // max(1, np.asarray(ref).size)
    eps = float(np.finfo(np.float32).eps) if x.dtype != np.float64 else float(np.finfo(np.float64).eps)
    out_eps = float(np.finfo(x.dtype).eps) if x.dtype != ml_dtypes.bfloat16 else 2.0**-8
    if op == "sum":
        scale = np.sum(np.abs(x.astype(np.float64)), axis=axis)
        tol = n * eps * scale + out_eps * np.abs(ref)
    elif op == "prod":
        tol = (n * eps + out_eps) * np.abs(ref) * 2
    else:
        tol = 0 * np.abs(ref)
    assert np.all(np.abs(np.asarray(got, np.float64) - ref) <= tol + 1e-300)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("op", OPS)
def test_all_axes_match_numpy(rng, dtype, op):
    x = data(rng, (7, 45, 19), dtype, op)
    for axis in (None, 0, 1, 2, -1, (0, 1), (0, 2), (1, 2), (0, 1, 2)):
        check(coopjit.reduce(x, axis=axis, op=op), x, axis, op)


@pytest.mark.parametrize("op", OPS)
def test_large_one_value_and_long_rows(rng, op):
    x = data(rng, (300_001,), np.float32, op)
    if op == "prod":
        x = (1 + (x - 1) * 1e-4).astype(np.float32)
    check(coopjit.reduce(x, op=op), x, None, op)
    y = data(rng, (3, 100_003), np.float64, op)
    check(coopjit.reduce(y, axis=1, op=op), y, 1, op)
    check(coopjit.reduce(y, axis=0, op=op), y, 0, op)


def test_views_and_out(rng):
    base = rng.standard_normal((40, 60))
    for x in (base[::-2, 3:50:3], base.T[5:, ::-1], base[:, 7], np.broadcast_to(base[0], (9, 60))):
        for axis in (None, 0, -1):
            if axis not in (None, 0) and x.ndim == 1:
                continue
            check(coopjit.reduce(x, axis=axis), x, axis, "sum")
    out = np.zeros(60)[::-1]
    assert coopjit.reduce(base, axis=0, out=out) is out
    np.testing.assert_allclose(out, base.sum(0))
    before = base.copy()
    coopjit.reduce(base, axis=1, op="max")
    np.testing.assert_array_equal(base, before)


def test_nan_propagates_like_numpy():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    x[1, 2] = np.nan
    for op in OPS:
        for axis in (None, 0, 1):
            got, want = coopjit.reduce(x, axis=axis, op=op), NP[op](x, axis=axis)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_min_max_nan_inf_and_signed_zeros(rng, dtype):
    # Large enough for the full-vector paths (AVX-512: vrangeps / vrangepd plus a NaN fix-up),
    # with tails; NaN anywhere in a slice makes it NaN, as in NumPy.
    x = rng.uniform(-1, 1, (333, 1030)).astype(dtype)
    x[rng.integers(0, 333, 40), rng.integers(0, 1030, 40)] = np.nan
    x[5, :] = np.inf
    x[:, 7] = -np.inf
    for op in ("min", "max"):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(coopjit.reduce(x, axis=axis, op=op), NP[op](x, axis=axis))
    # IEEE: -0 < +0, so max of zeros is +0 when any is +0 and min is -0 when any is -0.
    z = np.where(rng.random((70, 90)) < 0.5, -0.0, 0.0).astype(dtype)
    z[3, :] = -0.0
    z[:, 4] = 0.0
    for axis in (None, 0, 1):
        pos = (~np.signbit(z)).any(axis=axis)
        neg = np.signbit(z).any(axis=axis)
        np.testing.assert_array_equal(np.signbit(coopjit.reduce(z, axis=axis, op="max")), ~pos)
        np.testing.assert_array_equal(np.signbit(coopjit.reduce(z, axis=axis, op="min")), neg)


def test_empty_reductions():
    e = np.zeros((0, 3), np.float32)
    np.testing.assert_array_equal(coopjit.reduce(e, axis=0), np.zeros(3, np.float32))
    np.testing.assert_array_equal(coopjit.reduce(e, axis=0, op="prod"), np.ones(3, np.float32))
    assert coopjit.reduce(e) == 0 and coopjit.reduce(e, op="prod") == 1
    assert coopjit.reduce(e, axis=1).shape == (0,)
    for op in ("min", "max"):
        with pytest.raises(ValueError, match="zero-size array"):
            coopjit.reduce(e, op=op)


def test_bool_and_scalar_results():
    b = np.array([[True, False, True], [True, True, False]])
    assert coopjit.reduce(b) == 4 and coopjit.reduce(b).dtype == np.int64
    np.testing.assert_array_equal(coopjit.reduce(b, axis=0, op="min"), b.min(0))
    assert np.isscalar(coopjit.reduce(np.ones(5)))


def test_bad_input():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="unknown op 'mean'"):
        coopjit.reduce(x, op="mean")
    with pytest.raises(TypeError, match="complex64 is not supported; supported: int8"):
        coopjit.reduce(x.astype(np.complex64))
    with pytest.raises(np.exceptions.AxisError):
        coopjit.reduce(x, axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        coopjit.reduce(x, axis=(1, 1))
    with pytest.raises(ValueError, match=r"out must be float32 of shape \(4,\)"):
        coopjit.reduce(x, axis=0, out=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"even dimensions, got shape \(3, 4\)"):
        coopjit.reduce2x2(x)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
def test_reduce2x2(rng, op, dtype):
    x = data(rng, (34, 70), dtype, op)
    got = coopjit.reduce2x2(x, op)
    blocks = x.reshape(17, 2, 35, 2)
    want = NP[op](blocks.astype(np.float64) if x.dtype.kind == "f" else blocks, axis=(1, 3))
    if x.dtype.kind == "f":  # 4 terms: error within 4 eps of the sum of magnitudes
        mag = np.abs(blocks.astype(np.float64)).sum(axis=(1, 3)) if op == "sum" else np.abs(want)
        assert np.all(np.abs(got.astype(np.float64) - want) <= 4 * np.finfo(x.dtype).eps * mag)
    else:
        np.testing.assert_array_equal(got, want)


def test_reductions_are_coopmatrix_kernels():
    x = np.ones((8, 8), np.float32)
    y = np.empty(8, np.float32)
    ir = coopjit._core.reduce_ir("max", "row", x, y, "f32", "f32", "f32")
    assert "coopmatrix.reduce row max" in ir and "coopmatrix.max" in ir and "coopmatrix.per_element" in ir
