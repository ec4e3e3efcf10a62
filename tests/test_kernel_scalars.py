"""alpha / beta of compiled kernels and of gemm (session 23's review):

- beta without c: `kern(a, b, beta=1)` on a kernel compiled with accumulate=True gave a @ b, beta
  silently dropped (CPU and device kernels alike); it is a ValueError naming beta.
- integers past a double's 53 bits: an integer product (int8 / uint8 in, int32 accumulators)
  rounded alpha = 2^53 + 1 to 2^53 on its way to the kernel (which then multiplied by 2^53's low
  32 bits, 0). They are taken exactly: the result is NumPy's in int64, cast to int32 (the kernels
  compute in int32, which wraps; so does NumPy's cast). Float products round them to a double as
  NumPy's float64 does.
"""
import numpy as np
import pytest

import coopjit

BIG = [2**53 + 1, -(2**53 + 7), 2**62 + 2**40 + 3, np.int64(2**60 + 5), 2**40 + 5, 3]


def int_reference(alpha, a, b, beta=0, c=None):
    """alpha * a @ b + beta * c in NumPy's int64 (wrapping), cast to int32."""
    p = np.int64(alpha) * (a.astype(np.int64) @ b.astype(np.int64))
    if c is not None:
        p = p + np.int64(beta) * c.astype(np.int64)
    return p.astype(np.int32)


@pytest.mark.parametrize("m,n,k", [(4, 3, 5), (33, 17, 70)])
def test_cpu_kernel_refuses_beta_without_c(rng, m, n, k):
    kern = coopjit.compile_gemm(m, n, k, np.float32, accumulate=True)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    for beta in (1, 0.5, -2.0, float("nan")):
        with pytest.raises(ValueError, match=r"beta=.* without c"):
            kern(a, b, beta=beta)
        with pytest.raises(ValueError, match=r"beta=.* without c"):
            kern(np.asfortranarray(a), b, beta=beta)  # (the Python path, not the C++ fast path)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(kern(a, b), ref, rtol=1e-5, atol=1e-5 * k)
    np.testing.assert_allclose(kern(a, b, beta=0), ref, rtol=1e-5, atol=1e-5 * k)
    c = np.ones((m, n), np.float32)
    kern(a, b, c, beta=-2.0)
    np.testing.assert_allclose(c, ref - 2.0, rtol=1e-5, atol=1e-5 * k)
    plain = coopjit.compile_gemm(m, n, k, np.float32)
    with pytest.raises(ValueError, match="accumulate=True"):
        plain(a, b, beta=1.0)


def test_device_kernel_refuses_beta_without_c(rng):
    # The same on a device (opencl:0 here, COOPJIT_TEST_DEVICE=cuda:0 on an NVIDIA GPU), with host
    # arrays and (CUDA) torch tensors, whose cached launch path (coopjit._cuda_fast) dropped beta too.
    from device_support import needs_device

    dev = needs_device()
    m, n, k = 16, 8, 24
    kern = coopjit.compile_gemm(m, n, k, np.float32, device=dev, accumulate=True)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    with pytest.raises(ValueError, match=r"beta=1.0 was given without c"):
        kern(a, b, beta=1)
    np.testing.assert_allclose(kern(a, b), ref, rtol=1e-4, atol=1e-4 * k)
    if dev.startswith("cuda"):
        torch = pytest.importorskip("torch")
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        for _ in range(3):  # the second call on: the cached launch
            np.testing.assert_allclose(kern(ta, tb).cpu().numpy(), ref, rtol=1e-4, atol=1e-4 * k)
            with pytest.raises(ValueError, match=r"beta=2.0 was given without c"):
                kern(ta, tb, beta=2.0)


BETAS_WITHOUT_C = (1, 0.5, -2.0, float("nan"), np.float32(3.0), np.int8(1))


def test_gemm_refuses_beta_without_c(rng):
    # coopjit.gemm(a, b, beta=1) without c dropped beta: it returned a @ b as though beta were 0
    # (session 23 refused it in compiled kernels only). Every path of gemm refuses it now: plain
    # CPU, fused epilogue, prepacked b, integer products, a torch CPU tensor, transposes; beta = 0
    # (any zero) without c stays a new array; a beta that is no number stays a TypeError.
    m, n, k = 13, 9, 21
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    a8 = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b8 = rng.integers(-128, 128, (k, n)).astype(np.int8)
    calls = [lambda beta: coopjit.gemm(a, b, beta=beta),
             lambda beta: coopjit.gemm(a.T.copy(), b, beta=beta, trans_a=True),
             lambda beta: coopjit.gemm(a, b, beta=beta, bias=np.ones(n, np.float32)),
             lambda beta: coopjit.gemm(a, b, beta=beta, activation="relu"),
             lambda beta: coopjit.gemm(a, coopjit.prepack(b), beta=beta),
             lambda beta: coopjit.gemm(a8, b8, beta=beta, alpha=2)]
    try:
        import torch

        calls.append(lambda beta: coopjit.gemm(torch.from_numpy(a), torch.from_numpy(b), beta=beta))
    except ImportError:
        pass
    for call in calls:
        for beta in BETAS_WITHOUT_C:
            with pytest.raises(ValueError, match=r"gemm: beta=.* was given without c: beta \* c is added"):
                call(beta)
        for beta in (0, 0.0, -0.0, np.float64(0)):
            call(beta)
        with pytest.raises(TypeError, match="beta must be a real number"):
            call("1")
    np.testing.assert_allclose(coopjit.gemm(a, b, beta=0), ref, rtol=1e-5, atol=1e-5 * k)
    c = np.ones((m, n), np.float32)
    assert coopjit.gemm(a, b, c, beta=-2.0) is c
    np.testing.assert_allclose(c, ref - 2.0, rtol=1e-5, atol=1e-5 * k)


def test_device_gemm_refuses_beta_without_c(rng):
    # The same on a device: gemm(device=...) with host arrays (opencl:0 here; cuda:0 with
    # COOPJIT_TEST_DEVICE), and on CUDA with torch CUDA tensors, the first call (the full path)
    # and the next (the cached launch, coopjit._cuda_fast), with and without a fused epilogue.
    from device_support import needs_device

    dev = needs_device()
    m, n, k = 16, 8, 24
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for beta in BETAS_WITHOUT_C:
        with pytest.raises(ValueError, match=r"gemm: beta=.* was given without c"):
            coopjit.gemm(a, b, beta=beta, device=dev)
        with pytest.raises(ValueError, match=r"gemm: beta=.* was given without c"):
            coopjit.gemm(a, b, beta=beta, device=dev, bias=np.ones(n, np.float32))
    np.testing.assert_allclose(coopjit.gemm(a, b, beta=0.0, device=dev), ref, rtol=1e-4, atol=1e-4 * k)
    if dev.startswith("cuda"):
        torch = pytest.importorskip("torch")
        ta, tb, bias = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), torch.ones(n, device="cuda")
        for _ in range(3):  # the second call on: the cached launches
            np.testing.assert_allclose(coopjit.gemm(ta, tb).cpu().numpy(), ref, rtol=1e-4, atol=1e-4 * k)
            np.testing.assert_allclose(coopjit.gemm(ta, tb, bias=bias).cpu().numpy(), ref + 1, rtol=1e-4,
                                       atol=1e-4 * k)
            with pytest.raises(ValueError, match=r"gemm: beta=2.0 was given without c"):
                coopjit.gemm(ta, tb, beta=2.0)
            with pytest.raises(ValueError, match=r"gemm: beta=2.0 was given without c"):
                coopjit.gemm(ta, tb, beta=2.0, bias=bias)


def test_dask_gemm_refuses_beta_without_c(rng):
    da = pytest.importorskip("dask.array")
    import coopjit.dask as cjd

    a = rng.standard_normal((12, 10)).astype(np.float32)
    b = rng.standard_normal((10, 6)).astype(np.float32)
    A, B = da.from_array(a, chunks=5), da.from_array(b, chunks=5)
    for beta in (1, -0.5, float("nan")):
        with pytest.raises(ValueError, match=r"gemm: beta=.* was given without c"):
            cjd.gemm(A, B, beta=beta)
    np.testing.assert_allclose(cjd.gemm(A, B, beta=0).compute(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("alpha", BIG)
def test_int8_gemm_takes_large_integer_alpha_beta_exactly(rng, alpha):
    m, n, k = 19, 23, 40
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    c0 = rng.integers(-10**6, 10**6, (m, n)).astype(np.int32)
    beta = -(2**61 + 2**33 + 9) if alpha != 3 else 2
    np.testing.assert_array_equal(coopjit.gemm(a, b, alpha=alpha), int_reference(alpha, a, b))
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=alpha, beta=beta)
    np.testing.assert_array_equal(c, int_reference(alpha, a, b, beta, c0))
    # a prepacked B, and C big-endian (a native copy, swapped back)
    np.testing.assert_array_equal(coopjit.gemm(a, coopjit.prepack(b), alpha=alpha), int_reference(alpha, a, b))
    cbe = c0.astype(">i4")
    coopjit.gemm(a, b, cbe, alpha=alpha, beta=beta)
    np.testing.assert_array_equal(cbe, int_reference(alpha, a, b, beta, c0))
    # compiled kernels: the C++ fast path (beta 0, C-contiguous) and the Python path
    kern = coopjit.compile_gemm(m, n, k, np.int8, accumulate=True)
    for _ in range(2):
        np.testing.assert_array_equal(kern(a, b, alpha=alpha), int_reference(alpha, a, b))
        c = c0.copy()
        kern(a, b, c, alpha=alpha, beta=beta)
        np.testing.assert_array_equal(c, int_reference(alpha, a, b, beta, c0))


def test_uint8_int8_gemm_takes_large_integer_alpha_exactly(rng):
    a = rng.integers(0, 256, (9, 31)).astype(np.uint8)
    b = rng.integers(-128, 128, (31, 12)).astype(np.int8)
    alpha = 2**55 + 2**31 + 1
    np.testing.assert_array_equal(coopjit.gemm(a, b, alpha=alpha), int_reference(alpha, a, b))


def test_device_int8_gemm_takes_large_integer_alpha_exactly(rng):
    from device_support import needs_device

    dev = needs_device()
    m, n, k = 16, 16, 64
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    c0 = rng.integers(-10**6, 10**6, (m, n)).astype(np.int32)
    alpha, beta = 2**53 + 1, -(2**58 + 11)
    try:
        got = coopjit.gemm(a, b, alpha=alpha, device=dev)
    except (TypeError, NotImplementedError, coopjit.DeviceError) as e:  # a device without int8 GEMMs
        pytest.skip(f"int8 GEMM on {dev}: {e}")
    np.testing.assert_array_equal(got, int_reference(alpha, a, b))
    kern = coopjit.compile_gemm(m, n, k, np.int8, device=dev, accumulate=True)
    c = c0.copy()
    kern(a, b, c, alpha=alpha, beta=beta)
    np.testing.assert_array_equal(c, int_reference(alpha, a, b, beta, c0))


@pytest.mark.parametrize("name", ["alpha", "beta"])
def test_integer_scalars_outside_int64_are_refused_by_name(name):
    a, b = np.ones((3, 4), np.int8), np.ones((4, 2), np.int8)
    kern = coopjit.compile_gemm(3, 2, 4, np.int8, accumulate=True)
    for v in (2**63, -(2**63) - 1, np.uint64(2**64 - 1)):
        with pytest.raises(ValueError, match=f"{name}={v}.*int64"):
            coopjit.gemm(a, b, np.zeros((3, 2), np.int32), **{name: v})
        with pytest.raises(ValueError, match=f"{name}={v}.*int64"):
            kern(a, b, np.zeros((3, 2), np.int32), **{name: v})


def test_float_products_round_large_integers_as_numpy_does(rng):
    m, n, k = 7, 5, 9
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    c0 = rng.standard_normal((m, n))
    alpha, beta = 2**53 + 1, -(2**60 + 3)
    ref = np.float64(alpha) * (a @ b) + np.float64(beta) * c0  # NumPy: the ints rounded to float64
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=alpha, beta=beta)
    np.testing.assert_allclose(c, ref, rtol=1e-13, atol=1e-13 * np.abs(ref).max())
    kern = coopjit.compile_gemm(m, n, k, np.float64, accumulate=True)
    np.testing.assert_allclose(kern(a, b, alpha=alpha), np.float64(alpha) * (a @ b), rtol=1e-13,
                               atol=1e-13 * 2.0**53 * np.abs(a @ b).max())


def test_dask_int8_gemm_takes_large_integer_alpha_beta_exactly(rng):
    da = pytest.importorskip("dask.array")
    import coopjit.dask as cjd

    a = rng.integers(-128, 128, (40, 64)).astype(np.int8)
    b = rng.integers(-128, 128, (64, 30)).astype(np.int8)
    c0 = rng.integers(-1000, 1000, (40, 30)).astype(np.int32)
    alpha, beta = 2**53 + 1, -(2**61 + 2**33 + 9)
    got = cjd.gemm(da.from_array(a, chunks=(20, 32)), da.from_array(b, chunks=(32, 15)),
                   da.from_array(c0, chunks=(20, 15)), alpha=alpha, beta=beta).compute()
    np.testing.assert_array_equal(got, int_reference(alpha, a, b, beta, c0))
