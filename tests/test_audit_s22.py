"""Session 22's audit of compiled kernels' calls (the C++ fast path and Python's full path), the
fused epilogues' operands and the scalars: each test a bug the audit found (it failed before the
fix), against NumPy in float64. scripts/fuzz_kernel_calls.py is the sweep that found them."""
import numpy as np
import pytest

import coopjit


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(4, 4, 4), (3, 17, 5), (33, 1, 7), (64, 64, 64), (5, 6, 0)])
@pytest.mark.parametrize("layout", ["c", "fortran"])
def test_accumulate_kernel_with_beta_zero_does_not_read_c(rng, dtype, m, n, k, layout):
    # beta = 0 means C is not read (BLAS, coopjit.gemm, the bf16 split): a kernel compiled with
    # accumulate=True gave NaN where C held NaN (fast path), and on the full path (a Fortran-ordered
    # C, computed in a np.empty buffer) a result that depended on uninitialised memory.
    kern = coopjit.compile_gemm(m, n, k, dtype, accumulate=True)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = np.full((m, n), np.nan, dtype, order="F" if layout == "fortran" else "C")
    a0, b0 = a.copy(), b.copy()
    out = kern(a, b, c, alpha=2.0, beta=0.0)
    assert out is c
    ref = 2.0 * (a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5 * (k + 1))
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)
    # beta != 0 still reads C
    c[...] = 1.0
    kern(a, b, c, alpha=1.0, beta=0.5)
    np.testing.assert_allclose(c, ref / 2 + 0.5, rtol=1e-5, atol=1e-5 * (k + 1))


def test_accumulate_kernel_with_beta_zero_and_residual_in_c(rng):
    # C zeroed for beta = 0 must not lose a residual that lies in C's own memory (residual=c).
    m, n, k = 8, 6, 5
    kern = coopjit.compile_gemm(m, n, k, np.float64, accumulate=True, residual=True)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    res = rng.standard_normal((m, n))
    c = res.copy()
    kern(a, b, c, beta=0.0, residual=c)
    np.testing.assert_allclose(c, a @ b + res, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("where,name", [("kernel", "alpha"), ("kernel", "beta"), ("gemm", "alpha"), ("gemm", "beta")])
def test_scalar_past_a_double_names_itself(where, name):
    # alpha=10**400 raised OverflowError "int too large to convert to float", naming nothing.
    a, b = np.ones((3, 4)), np.ones((4, 2))
    kw = {name: 10**400}
    with pytest.raises(ValueError, match=f"{name}=1000.*too large"):
        if where == "kernel":
            coopjit.compile_gemm(3, 2, 4, np.float64, accumulate=True)(a, b, np.zeros((3, 2)), **kw)
        else:
            coopjit.gemm(a, b, np.zeros((3, 2)), **kw)


def test_kernel_writes_into_a_torch_tensor_as_matmul_does(rng):
    # A compiled kernel refused c= of a PyTorch CPU tensor (which matmul's out= takes) with "c must
    # be a float32 array of shape (6, 4), got torch.float32 torch.Size([6, 4])".
    torch = pytest.importorskip("torch")
    m, n, k = 6, 4, 5
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    kern = coopjit.compile_gemm(m, n, k, np.float32)
    for c in (torch.zeros(m, n), torch.zeros(n, m).T, torch.zeros(m, 2 * n)[:, ::2]):
        out = kern(torch.from_numpy(a), torch.from_numpy(b), c)
        assert out is c
        np.testing.assert_allclose(c.numpy(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="requires grad"):
        kern(a, b, torch.zeros(m, n, requires_grad=True))
    with pytest.raises(TypeError, match="c must be a writable array"):
        kern(a, b, [[0.0] * n] * m)


@pytest.mark.parametrize("m,n,k", [(4, 4, 4), (64, 64, 64)])
def test_accumulate_kernel_without_c_does_not_read_its_new_array(rng, m, n, k):
    # kern(a, b) of an accumulate=True kernel made C with np.empty and computed alpha * a @ b +
    # 0 * C: NaN left in the reused memory came through. (Freed NaN buffers of C's size make the
    # allocator hand back NaN memory, as it did in the audit.)
    kern = coopjit.compile_gemm(m, n, k, np.float64, accumulate=True)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    ref = a @ b
    for _ in range(20):
        junk = np.full((m, n), np.nan)
        del junk
        np.testing.assert_allclose(kern(a, b), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("m,n,k", [(8, 8, 8), (37, 29, 19)])
def test_device_accumulate_kernel_with_beta_zero_does_not_read_c(rng, m, n, k):
    # The same on a device (opencl:0 here, COOPJIT_TEST_DEVICE=cuda:0 on an NVIDIA GPU): a kernel
    # compiled with accumulate=True called with beta = 0 runs its sibling without accumulation, so
    # NaN in C, a strided C (a device copy made for the call, never written) and no C at all give
    # alpha * a @ b; beta != 0 still adds beta * C; what lies around a strided C is not touched.
    from device_support import needs_device

    dev = needs_device()
    kern = coopjit.compile_gemm(m, n, k, np.float32, device=dev, accumulate=True)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    ref = 1.5 * (a.astype(np.float64) @ b.astype(np.float64))
    tol = dict(rtol=1e-4, atol=1e-4 * (k + 1))
    for _ in range(2):
        c = np.full((m, n), np.nan, np.float32)
        assert kern(a, b, c, alpha=1.5, beta=0.0) is c
        np.testing.assert_allclose(c, ref, **tol)
        big = np.full((m, 2 * n), np.nan, np.float32)
        view = big[:, ::2]
        kern(a, b, view, alpha=1.5, beta=0.0)
        np.testing.assert_allclose(view, ref, **tol)
        assert np.isnan(big[:, 1::2]).all()
        np.testing.assert_allclose(kern(a, b, alpha=1.5), ref, **tol)
        c = np.ones((m, n), np.float32)
        kern(a, b, c, alpha=1.5, beta=-2.0)
        np.testing.assert_allclose(c, ref - 2.0, **tol)
    if dev.startswith("cuda"):
        torch = pytest.importorskip("torch")
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        for _ in range(3):  # the second call on: the cached launch (coopjit._cuda_fast)
            tc = torch.full((m, n), float("nan"), device="cuda")
            assert kern(ta, tb, tc, alpha=1.5, beta=0.0) is tc
            np.testing.assert_allclose(tc.cpu().numpy(), ref, **tol)
            tc = torch.ones((m, n), device="cuda")
            kern(ta, tb, tc, alpha=1.5, beta=-2.0)
            np.testing.assert_allclose(tc.cpu().numpy(), ref - 2.0, **tol)
