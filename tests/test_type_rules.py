"""NumPy's type rules in matmul: mixed dtypes promote as numpy.matmul does, out= of a wider type,
big-endian operands, and clear errors for what coopjit has no kernel for. The reference for each
case is numpy.matmul itself (its result dtype) and float64 (its values)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16
PAIRS = [(np.float32, np.float64), (np.float64, np.float32), (np.int8, np.float32), (np.float32, np.int32),
         (np.float16, np.float32), (BF16, np.float32), (np.uint8, np.float64), (np.float32, np.int16)]


def _values(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.uniform(-1, 1, shape).astype(dtype)


@pytest.mark.parametrize("da,db", PAIRS)
def test_mixed_dtypes_promote_as_numpy_matmul(rng, da, db):
    a, b = _values(rng, (17, 11), da), _values(rng, (11, 6), db)
    want = np.matmul(a, b)
    got = coopjit.matmul(a, b)
    assert got.dtype == want.dtype
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-12 if got.dtype == np.float64 else 1e-5
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * 100 * 11)


@pytest.mark.parametrize("da,db", [(np.int8, np.int16), (np.int64, np.int64), (np.int16, np.int16), (np.int32, np.int32)])
def test_integer_types_without_a_kernel_raise_naming_them(rng, da, db):
    a, b = _values(rng, (4, 4), da), _values(rng, (4, 4), db)
    with pytest.raises(TypeError, match=np.dtype(da).name):
        coopjit.matmul(a, b)


@pytest.mark.parametrize("inputs,out_dtype", [(np.float32, np.float64), (np.int8, np.int64), (np.float16, np.float64)])
def test_out_of_a_wider_type_as_in_numpy(rng, inputs, out_dtype):
    a, b = _values(rng, (9, 13), inputs), _values(rng, (13, 5), inputs)
    out = np.full((9, 5), np.nan if np.dtype(out_dtype).kind == "f" else -1, out_dtype)
    want = np.matmul(a, b, out=np.empty((9, 5), out_dtype))
    if np.dtype(inputs).kind == "i":  # numpy.matmul wraps int8 x int8 in int8; coopjit's int8 products are exact
        want = a.astype(np.int64) @ b.astype(np.int64)
    assert coopjit.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-3 if inputs == np.float16 else 1e-6)


def test_out_that_numpy_would_refuse_is_refused(rng):
    a, b = _values(rng, (3, 3), np.float64), _values(rng, (3, 3), np.float64)
    with pytest.raises(TypeError, match="same_kind"):
        coopjit.matmul(a, b, out=np.empty((3, 3), np.int32))
    with pytest.raises(Exception):
        np.matmul(a, b, out=np.empty((3, 3), np.int32))


@pytest.mark.parametrize("order", [">f4", ">f8"])
def test_big_endian_operands_and_out(rng, order):
    a = rng.standard_normal((8, 7)).astype(order)
    b = rng.standard_normal((7, 3)).astype(order)
    out = np.empty((8, 3), order)
    coopjit.matmul(a, b, out=out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5)
    assert coopjit.matmul(a, b).dtype == np.matmul(a, b).dtype.newbyteorder("=")
