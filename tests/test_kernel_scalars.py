"""alpha / beta of compiled kernels (session 23's review):

- beta without c: `kern(a, b, beta=1)` on a kernel compiled with accumulate=True gave a @ b, beta
  silently dropped (CPU and device kernels alike); it is a ValueError naming beta.
"""
import numpy as np
import pytest

import coopjit


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
