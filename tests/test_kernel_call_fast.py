"""A compiled kernel's per-call fast path (GemmKernel.call_fast) and every way around it: results
against NumPy in float64, the output written and nothing else, the unusual calls on the full
path with its checks and messages."""
import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close, dtype_operands


def kernel(m, n, k, dtype=np.float32, **kw):
    return coopjit.compile_gemm(m, n, k, dtype=dtype, **kw)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bf16", "int8"])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (4, 4, 4), (5, 7, 3), (64, 64, 64), (33, 17, 129)])
def test_fast_calls_match_numpy_with_and_without_an_output(rng, dtype, m, n, k):
    a, b = dtype_operands(rng, dtype, m, n, k)
    kern = coopjit.compile_gemm(m, n, k, dtype=a.dtype)
    a0, b0 = a.copy(), b.copy()
    c = kern(a, b)
    assert c.shape == (m, n) and c.dtype == kern.out_dtype
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if dtype == "int8":
        np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))
    elif dtype == "bf16":  # bf16 C: one rounding of the f32 sums
        np.testing.assert_allclose(c.astype(np.float64), ref, rtol=1e-2, atol=1e-2 * np.sqrt(k))
    else:
        assert_gemm_close(c, a, b)
    out = np.full((m, n), 7, kern.out_dtype)
    got = kern(a, b, out)
    assert got is out
    np.testing.assert_array_equal(out, c)  # the same kernel, the same sums
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


def test_alpha_as_float_int_and_numpy_scalar(rng):
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 9))
    kern = kernel(6, 9, 5, np.float64)
    for alpha in (2.5, 3, np.float64(-1.5), np.float32(0.5), np.int64(-2)):
        c = kern(a, b, alpha=alpha)
        assert_gemm_close(c, a, b, alpha=float(alpha))
    with pytest.raises(TypeError, match="alpha must be a real number, got True"):
        kern(a, b, alpha=True)
    with pytest.raises(TypeError, match="beta must be a real number"):
        kern(a, b, beta="0")


def test_an_int_alpha_too_large_for_a_double_is_refused(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    with pytest.raises((ValueError, TypeError, OverflowError)):
        kernel(3, 2, 4, np.float64)(a, b, alpha=10**400)


def test_beta_on_a_kernel_without_accumulation_is_refused_by_value(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    kern = kernel(3, 2, 4, np.float64)
    c = np.ones((3, 2))
    with pytest.raises(ValueError, match="beta=0.5"):
        kern(a, b, c, beta=0.5)
    np.testing.assert_array_equal(c, 1.0)
    acc = kernel(3, 2, 4, np.float64, accumulate=True)
    for beta in (0.5, 1, 0):
        c = rng.standard_normal((3, 2))
        c0 = c.copy()
        acc(a, b, c, beta=beta)
        assert_gemm_close(c, a, b, c0, beta=float(beta))


def test_an_output_that_overlaps_an_input_gives_the_product_of_the_inputs_as_passed(rng):
    m = n = k = 24
    buf = rng.standard_normal((m, k))
    b = rng.standard_normal((k, n))
    kern = kernel(m, n, k, np.float64)
    a0 = buf.copy()
    kern(buf, b, buf)  # c is a
    assert_gemm_close(buf, a0, b)
    whole = rng.standard_normal((2 * m, k))
    a = whole[:m]
    c = whole[m // 2: m // 2 + m]  # half of c over half of a
    a0 = a.copy()
    kern(a, b, c)
    assert_gemm_close(c, a0, b)


def test_misaligned_operands_take_the_full_path(rng):
    m, n, k = 8, 12, 16
    kern = kernel(m, n, k, np.float32)
    raw = np.zeros(m * k * 4 + 1, np.uint8)
    am = raw[1:].view(np.float32).reshape(m, k)
    am[...] = rng.standard_normal((m, k))
    assert not am.flags.aligned
    bb = rng.standard_normal((k, n)).astype(np.float32)
    assert_gemm_close(kern(am, bb), am.copy(), bb)
    rawc = np.zeros(m * n * 4 + 1, np.uint8)
    cm = rawc[1:].view(np.float32).reshape(m, n)
    assert kern(am, bb, cm) is cm
    assert_gemm_close(cm.copy(), am.copy(), bb)


def test_operands_laid_out_for_another_kernel(rng):
    m, n, k = 8, 12, 16
    kern = kernel(m, n, k, np.float32)
    # A with a column stride: the same plan with those strides built in, compiled on the call
    a = rng.standard_normal((2 * m, 2 * k)).astype(np.float32)[::2, ::2]
    b = rng.standard_normal((k, n)).astype(np.float32)
    assert_gemm_close(kern(a, b), a, b)
    # B with a column stride needs other code: refused, naming both layouts, C untouched
    bs = rng.standard_normal((k, 2 * n)).astype(np.float32)[:, ::2]
    c = np.full((m, n), 3.0, np.float32)
    with pytest.raises(ValueError, match=r"B strides \(24, 2\).*compiled for .*B strides \(12, 1\)"):
        kern(np.ascontiguousarray(a), bs, c)
    np.testing.assert_array_equal(c, 3.0)
    assert_gemm_close(kern(np.ascontiguousarray(a), np.ascontiguousarray(bs)), a, bs)


def test_big_endian_and_subclassed_operands(rng):
    m, n, k = 5, 6, 7
    kern = kernel(m, n, k, np.float64)
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((k, n))
    assert_gemm_close(kern(a.astype(">f8"), b.astype(">f8")), a, b)
    out = np.zeros((m, n), ">f8")
    assert kern(a, b, out) is out
    assert out.dtype.byteorder == ">"
    assert_gemm_close(out.astype(np.float64), a, b)

    class Sub(np.ndarray):
        pass

    c = kern(a.view(Sub), b)
    assert_gemm_close(np.asarray(c), a, b)


@pytest.mark.parametrize("bad,match", [
    (lambda a, b, c: (a.astype(np.float32), b, c), "dtype"),
    (lambda a, b, c: (a[:, :-1], b, c), "shape"),
    (lambda a, b, c: (a, b[:-1], c), "shape"),
    (lambda a, b, c: (a, b, c[:-1]), r"\(4, 3\)|shape"),
    (lambda a, b, c: (a, b, c.astype(np.float32)), "dtype|float32"),
])
def test_bad_calls_name_the_values_and_write_nothing(rng, bad, match):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    c = np.full((4, 3), 9.0)
    kern = kernel(4, 3, 5, np.float64)
    x, y, z = bad(a, b, c)
    z0 = z.copy()
    with pytest.raises((TypeError, ValueError), match=match):
        kern(x, y, z)
    np.testing.assert_array_equal(z, z0)


def test_a_read_only_output_is_refused(rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    c = np.zeros((4, 3))
    c.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        kernel(4, 3, 5, np.float64)(a, b, c)
    np.testing.assert_array_equal(c, 0.0)


def test_epilogue_operands_on_a_kernel_without_one_are_refused(rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    with pytest.raises(ValueError, match="bias="):
        kernel(4, 3, 5, np.float64)(a, b, bias=np.ones(3))


def test_transposed_kernels_and_kernels_with_an_epilogue_keep_their_path(rng):
    m, n, k = 6, 5, 7
    at = rng.standard_normal((k, m))
    bt = rng.standard_normal((n, k))
    kern = kernel(m, n, k, np.float64, trans_a=True, trans_b=True)
    assert_gemm_close(kern(at, bt), at.T, bt.T)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    bias = rng.standard_normal(n)
    fused = coopjit.compile_gemm(m, n, k, dtype=np.float64, bias=True)
    np.testing.assert_allclose(fused(a, b, bias=bias), a @ b + bias, rtol=1e-12, atol=1e-12)


def test_empty_problems(rng):
    kern = kernel(0, 3, 4, np.float64)
    c = kern(np.zeros((0, 4)), np.ones((4, 3)))
    assert c.shape == (0, 3)
    kern = kernel(3, 2, 0, np.float64)
    c = np.full((3, 2), 5.0)
    kern(np.zeros((3, 0)), np.zeros((0, 2)), c)
    np.testing.assert_array_equal(c, 0.0)
