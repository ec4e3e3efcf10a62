"""Wrong answers found by the audits of issue 12 (items 4 to 6): byte order of inputs and outputs
(NumPy converts, so does coopjit; never native bytes in a big-endian array), bool arrays holding
bytes other than 0 and 1, and 1-D @ 1-D giving a NumPy scalar, each against NumPy in float64."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def _big(x):
    """x as a big-endian array holding the same values."""
    return x.astype(x.dtype.newbyteorder(">"))


# ---- item 4: byte order -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 7, 3), (40, 33, 70)])  # the C++ fast path and the packed path
def test_matmul_into_a_big_endian_out(rng, dtype, shape):
    m, k, n = shape
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    out = np.full((m, n), 7.0, np.dtype(dtype).newbyteorder(">"))
    got = coopjit.matmul(a, b, out=out)
    assert got is out and out.dtype.byteorder == ">"
    assert_gemm_close(out.astype(dtype), a, b)


def test_batched_and_vector_matmul_into_big_endian_out(rng):
    a = rng.standard_normal((3, 4, 6)).astype(np.float32)
    b = rng.standard_normal((6, 5)).astype(np.float32)
    out = np.zeros((3, 4, 5), ">f4")
    coopjit.matmul(a, b, out=out)
    np.testing.assert_allclose(out.astype(np.float64), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    v = rng.standard_normal(6).astype(np.float32)
    o1 = np.zeros(4, ">f4")
    coopjit.matmul(a[0], v, out=o1)
    np.testing.assert_allclose(o1.astype(np.float64), a[0].astype(np.float64) @ v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("beta", [0.0, 1.0, -0.5])
def test_gemm_with_a_big_endian_c(rng, beta):
    a = rng.standard_normal((9, 5)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    c0 = rng.standard_normal((9, 6)).astype(np.float32)
    c = _big(c0)
    got = coopjit.gemm(a, b, c, alpha=1.5, beta=beta)
    assert got is c and c.dtype == np.dtype(">f4")
    assert_gemm_close(c.astype(np.float32), a, b, c0, alpha=1.5, beta=beta)


@pytest.mark.parametrize("which", ["a", "b", "both"])
def test_big_endian_inputs_are_converted_like_numpy(rng, which):
    a = rng.standard_normal((6, 8)).astype(np.float64)
    b = rng.standard_normal((8, 4)).astype(np.float64)
    a_in = _big(a) if which in ("a", "both") else a
    b_in = _big(b) if which in ("b", "both") else b
    a_before, b_before = a_in.copy(), b_in.copy()
    got = coopjit.matmul(a_in, b_in)
    assert got.dtype == F64 and got.dtype.isnative
    assert_gemm_close(got, a, b)
    assert_gemm_close(coopjit.gemm(a_in.T, b_in, trans_a=True), a, b)
    assert np.array_equal(a_in, a_before) and np.array_equal(b_in, b_before)  # inputs untouched
    assert a_in.dtype == a_before.dtype


def test_compiled_kernel_takes_big_endian_arrays(rng):
    k = coopjit.compile_gemm(7, 5, 9, np.float32)
    a = rng.standard_normal((7, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5)).astype(np.float32)
    assert_gemm_close(k(_big(a), _big(b)), a, b)
    c = np.zeros((7, 5), ">f4")
    assert k(a, b, c) is c
    assert_gemm_close(c.astype(np.float32), a, b)


def test_reduce_big_endian_input_and_out(rng):
    x = rng.standard_normal((6, 50))
    xb = _big(x)
    np.testing.assert_allclose(coopjit.reduce(xb, axis=1), x.sum(axis=1), rtol=1e-12)
    assert coopjit.reduce(_big(x.astype(np.int32)), op="max") == x.astype(np.int32).max()
    out = np.zeros(50, ">f8")
    assert coopjit.reduce(x, axis=0, op="min", out=out) is out
    assert np.array_equal(out.astype(np.float64), x.min(axis=0))
    o2 = np.zeros((3, 25), ">f8")
    coopjit.reduce2x2(xb, "sum", out=o2)
    ref = x.reshape(3, 2, 25, 2).sum(axis=(1, 3))
    np.testing.assert_allclose(o2.astype(np.float64), ref, rtol=1e-12)


# ---- item 5: bool bytes -----------------------------------------------------------------------------
def test_reduce_of_bools_with_bytes_other_than_one():
    raw = np.array([2, 1, 0, 255, 4, 0, 1, 128], np.uint8)
    x = np.frombuffer(raw.tobytes(), bool)
    for op, ref in (("sum", np.sum(x)), ("prod", np.prod(x)), ("max", np.max(x)), ("min", np.min(x))):
        got = coopjit.reduce(x, op=op)
        assert got == ref and np.asarray(got).dtype == np.asarray(ref).dtype, (op, got, ref)
    assert coopjit.reduce(np.frombuffer(b"\x02\x01", bool)) == 2
    m = np.frombuffer(bytes([2, 0, 3, 1, 0, 0, 9, 9]), bool).reshape(2, 4)
    np.testing.assert_array_equal(coopjit.reduce(m, axis=0), m.sum(axis=0))
    np.testing.assert_array_equal(coopjit.reduce(m, axis=1), m.sum(axis=1))
    mx = coopjit.reduce(m, axis=1, op="max")
    assert mx.view(np.uint8).max() <= 1 and np.array_equal(mx, m.max(axis=1))  # canonical bools out
    np.testing.assert_array_equal(coopjit.reduce2x2(m, "sum"), m.reshape(1, 2, 2, 2).sum(axis=(1, 3)))
    assert raw.tobytes() == x.tobytes()  # the input is left as it was


# ---- item 6: 1-D @ 1-D ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8])
def test_vector_dot_vector_is_a_numpy_scalar(rng, dtype):
    x = rng.integers(-3, 4, 7).astype(dtype)
    y = rng.integers(-3, 4, 7).astype(dtype)
    got = coopjit.matmul(x, y)
    ref = np.matmul(x.astype(np.float64), y.astype(np.float64))
    assert np.isscalar(got) and isinstance(got, np.generic) and not isinstance(got, np.ndarray), type(got)
    assert float(got) == float(ref)
    assert type(np.matmul(np.ones(3, np.float32), np.ones(3, np.float32))) is type(
        coopjit.matmul(np.ones(3, np.float32), np.ones(3, np.float32)))
    out = np.zeros((), got.dtype)  # with out=, numpy.matmul returns out itself (0-d)
    assert coopjit.matmul(x, y, out=out) is out and float(out) == float(ref)


# ---- out= overlapping the input -------------------------------------------------------------------
@pytest.mark.parametrize("axis, where", [(0, "col0"), (0, "row0"), (1, "col0"), (1, "row1")])
def test_reduce_into_an_out_that_overlaps_the_input(rng, axis, where):
    x = rng.integers(-8, 9, (300, 300)).astype(np.float64)
    ref = x.sum(axis=axis)
    out = {"col0": x[:, 0], "row0": x[0], "row1": x[1]}[where]
    assert coopjit.reduce(x, axis=axis, out=out) is out
    assert np.array_equal(out, ref)
    y = rng.integers(-8, 9, (64, 64)).astype(np.float32)
    ref2 = y.reshape(32, 2, 32, 2).max(axis=(1, 3))
    o2 = y[:32, 32:]
    coopjit.reduce2x2(y, "max", out=o2)
    assert np.array_equal(o2, ref2)


def test_device_paths_with_big_endian_arrays(rng):
    from device_support import DEVICE, needs_device

    needs_device()
    a = rng.standard_normal((9, 12)).astype(np.float32)
    b = rng.standard_normal((12, 7)).astype(np.float32)
    out = np.zeros((9, 7), ">f4")
    assert coopjit.matmul(_big(a), b, out=out, device=DEVICE) is out
    assert_gemm_close(out.astype(np.float32), a, b)
    c0 = rng.standard_normal((9, 7)).astype(np.float32)
    c = _big(c0)
    coopjit.gemm(a, _big(b), c, beta=0.5, device=DEVICE)
    assert_gemm_close(c.astype(np.float32), a, b, c0, beta=0.5)
    k = coopjit.compile_gemm(9, 7, 12, np.float32, device=DEVICE)
    c2 = np.zeros((9, 7), ">f4")
    assert k(_big(a), b, c2) is c2
    assert_gemm_close(c2.astype(np.float32), a, b)
    np.testing.assert_allclose(coopjit.reduce(_big(a), axis=1, device=DEVICE), a.astype(np.float64).sum(axis=1),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(6, 6, 6), (40, 70, 40)])
def test_matmul_and_gemm_into_outputs_partly_overlapping_an_input(rng, shape):
    m, k, n = shape
    a_vals = rng.integers(-8, 9, (m, k)).astype(np.float32)
    b = rng.integers(-8, 9, (k, n)).astype(np.float32)
    ref = a_vals.astype(np.float64) @ b
    buf = np.zeros(a_vals.size + m * n, np.float32)
    a = buf[: a_vals.size].reshape(m, k)
    a[...] = a_vals
    out = buf[a_vals.size // 2: a_vals.size // 2 + m * n].reshape(m, n)  # starts in the middle of a
    assert coopjit.matmul(a, b, out=out) is out
    assert np.array_equal(out, ref)
    c0 = rng.integers(-8, 9, (m, n)).astype(np.float32)
    buf2 = np.zeros(b.size + m * n, np.float32)
    b2 = buf2[: b.size].reshape(k, n)
    b2[...] = b
    c = buf2[b.size // 3: b.size // 3 + m * n].reshape(m, n)
    c[...] = c0
    b_before = b2.copy()  # c's writes land on b: the product must use b as it was
    coopjit.gemm(a_vals, b2, c, alpha=2.0, beta=-1.0)
    assert np.array_equal(c, 2.0 * (a_vals.astype(np.float64) @ b_before) - c0)
