"""The copy path of devices whose memory the host cannot touch (CUDA: _gpu._Staging copies the
bytes each host view spans into device memory and the outputs back, strides unchanged), run here
on opencl:0 with the device taken as not host-visible, so that it is checked on every machine:
views, negative strides, the bytes between an output's elements, batches, reductions, compiled
kernels and KernelBuilder kernels, against NumPy in float64; device memory is freed after."""
import numpy as np
import pytest

import coopjit
from coopjit import _core
from conftest import assert_gemm_close
from device_support import needs_device


@pytest.fixture
def dev(monkeypatch):
    d = needs_device()
    device = coopjit.devices.get(d)  # the device object every call on d goes through
    if not device.host_visible:
        return d  # a CUDA device: the copy path already
    monkeypatch.setattr(device, "host_visible", False)
    return d


def test_staging_copies_spans(dev, rng):
    big_a, big_b = rng.standard_normal((200, 150)), rng.standard_normal((90, 300))
    a, b = big_a[::2, 10:70], big_b[20:80, ::-3]
    # A first product of these shapes and strides: what a device keeps between calls (the Stream-K
    # workspace of this thread, for the plan these strides get) is allocated now, so that the
    # count below sees only what staging leaves behind. (With a first call on contiguous copies,
    # the H200 kept one allocation more after the strided call: most likely another plan's workspace.)
    coopjit.gemm(a, b, np.zeros((120, 250))[:, ::2][:100, :100], device=dev)
    before = _core.live_shared_allocations()
    big_c = np.full((120, 250), 7.0)
    c = big_c[:, ::2][:100, :100]
    assert coopjit.gemm(a, b, c, alpha=2.0, beta=0.5, device=dev) is c
    ref_c = np.full((100, 100), 7.0)
    assert_gemm_close(c, a, b, ref_c, 2.0, 0.5)
    assert (big_c[:, 1::2] == 7.0).all() and (big_c[100:] == 7.0).all()  # the gaps came back unchanged
    assert _core.live_shared_allocations() == before


def test_staging_batches_reductions_kernels(dev, rng):
    x = rng.standard_normal((3, 1, 33, 20)).astype(np.float32)
    y = rng.standard_normal((4, 20, 17)).astype(np.float32)
    got = coopjit.matmul(x, y, device=dev)
    for i in np.ndindex(got.shape[:2]):
        assert_gemm_close(got[i], x[i[0], 0], y[i[1]])
    z = rng.standard_normal((7, 45, 19))
    for axis in (None, 0, (1, 2)):
        np.testing.assert_allclose(coopjit.reduce(z, axis=axis, device=dev), z.sum(axis=axis), rtol=1e-12, atol=1e-12)
    k = coopjit.compile_gemm(50, 40, 30, np.float64, device=dev, trans_a=True)
    A, B = rng.standard_normal((30, 50)), rng.standard_normal((30, 40))
    assert_gemm_close(k(A, B), A.T, B)


def test_staging_kernelbuilder(dev, rng):
    from coopjit.ir import KernelBuilder

    S = coopjit.device_info(dev)["subgroup_sizes"][0] if dev.startswith("cuda") else 16
    b = KernelBuilder("twice", subgroup_size=S)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    t = f"coopmatrix<f32, {S}, 8, acc, subgroup>"
    b.store(b.per_element(b.load(t, X, strides=(8, 1)), lambda b, r, c, v: b.mul(v, 2.0)), Y, strides=(8, 1))
    k = b.compile(device=dev)
    xs = rng.standard_normal((S, 8)).astype(np.float32)
    ys = np.zeros_like(xs)
    k(xs, ys)
    np.testing.assert_array_equal(ys, 2 * xs)


def test_staging_compiled_kernel_with_empty_k(dev):
    # K = 0: NumPy gives the empty operands strides of 0; staged, they take the C-order strides
    # the kernel was planned for (not another plan: a ValueError before), and C = beta C.
    k = coopjit.compile_gemm(33, 17, 0, np.float32, device=dev, accumulate=True)
    c0 = np.arange(33 * 17, dtype=np.float32).reshape(33, 17)
    c = c0.copy()
    k(np.zeros((33, 0), np.float32), np.zeros((0, 17), np.float32), c, alpha=1.5, beta=-0.5)
    np.testing.assert_array_equal(c, -0.5 * c0.astype(np.float64))


@pytest.mark.parametrize("accumulate", [False, True])
def test_compiled_kernel_writes_a_strided_host_c(dev, rng, accumulate):
    # A compiled kernel is planned for a C-ordered C: a strided host c on a device the host cannot
    # touch goes through a C-ordered copy (before, the staged view kept its strides and the call
    # raised "these operands need plan ... .gc but the kernel was compiled for ... .uc": the H100
    # run of session 23). beta = 0 never reads c; beta != 0 adds beta * c; the gaps stay as they were.
    m, n, k = 37, 29, 19
    kern = coopjit.compile_gemm(m, n, k, np.float32, device=dev, accumulate=accumulate)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    ref = 1.5 * (a.astype(np.float64) @ b.astype(np.float64))
    tol = dict(rtol=1e-4, atol=1e-4 * (k + 1))
    for beta in ([0.0, -2.0] if accumulate else [0.0]):
        big = np.full((m, 2 * n), np.nan if beta == 0.0 else 3.0, np.float32)
        view = big[:, ::2]
        assert kern(a, b, view, alpha=1.5, beta=beta) is view
        np.testing.assert_allclose(view, ref + (beta * 3.0 if beta else 0.0), **tol)
        gaps = big[:, 1::2]
        assert (np.isnan(gaps) if beta == 0.0 else gaps == 3.0).all()
