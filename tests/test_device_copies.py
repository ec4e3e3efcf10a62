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


def _views(rng, shape, dtype=np.float32):
    """(name, view) of one logical matrix of `shape` in layouts other than C order: strided rows and
    columns, Fortran order, reversed, a column slice (row stride past the row), and where a dim is
    1 a C-contiguous view whose length-1 dim has another stride (NumPy's flags call it
    C-contiguous; the kernel's plan does not)."""
    m, n = shape
    big = rng.standard_normal((2 * m + 1, 2 * n + 3)).astype(dtype)
    out = [("strided", big[1::2, ::2][:m, :n]), ("fortran", np.asfortranarray(big[:m, :n])),
           ("reversed", big[:m, :n][::-1, ::-1].copy()[::-1, ::-1]), ("column slice", big[:m, 1:n + 1])]
    if m == 1:
        out.append(("row of a bigger matrix", big[1:2, :n]))
    return out


@pytest.mark.parametrize("m,n,k", [(37, 29, 19), (1, 33, 20)])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
def test_compiled_kernel_takes_operands_in_any_layout(dev, rng, m, n, k, trans_a, trans_b):
    # A compiled kernel is planned for C-ordered a and b (as given) and c: operands in another
    # layout go through C-ordered copies, as on the CPU. On a device the host cannot touch (CUDA;
    # here opencl:0 taken as one) a strided, Fortran-ordered or reversed host a / b was staged with
    # its strides and raised "these operands need plan ... but the kernel was compiled for ...".
    kern = coopjit.compile_gemm(m, n, k, np.float32, device=dev, trans_a=trans_a, trans_b=trans_b, accumulate=True)
    ashape, bshape = ((k, m) if trans_a else (m, k)), ((n, k) if trans_b else (k, n))
    plain_b = rng.standard_normal(bshape).astype(np.float32)
    plain_a = rng.standard_normal(ashape).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    tol = dict(rtol=1e-4, atol=1e-4 * (k + 1))
    cases = [(name, a, plain_b) for name, a in _views(rng, ashape)]
    cases += [(name, plain_a, b) for name, b in _views(rng, bshape)]
    cases += [("both strided", _views(rng, ashape)[0][1], _views(rng, bshape)[0][1])]
    for name, a, b in cases:
        a_in, b_in = a.copy(), b.copy()
        ref = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)
        np.testing.assert_allclose(kern(a, b), ref, **tol, err_msg=name)
        for cname, c in _views(rng, (m, n)):
            c[...] = c0
            assert kern(a, b, c, alpha=-1.5, beta=0.5) is c
            np.testing.assert_allclose(c, -1.5 * ref + 0.5 * c0.astype(np.float64), **tol, err_msg=f"{name}, c {cname}")
        np.testing.assert_array_equal(a, a_in)
        np.testing.assert_array_equal(b, b_in)


def test_compiled_kernel_takes_views_of_device_memory(rng):
    # On a host-visible device, views of coopjit.empty memory (the device's own) that are not C
    # order were passed as they were and raised the plan mismatch: they go through C-ordered
    # copies too (c: written back; the bytes between its elements unchanged).
    d = needs_device()
    if not coopjit.devices.get(d).host_visible:
        pytest.skip(f"{d}'s memory is not host-visible: coopjit.empty(..., device={d!r}) is not host memory")
    m, n, k = 33, 21, 26
    kern = coopjit.compile_gemm(m, n, k, np.float32, device=d, accumulate=True)

    def shared(x):
        s = coopjit.empty(x.shape, x.dtype, device=d)
        s[...] = x
        return s

    A = shared(rng.standard_normal((2 * m, 2 * k)).astype(np.float32))
    B = shared(np.asfortranarray(rng.standard_normal((k, n)).astype(np.float32)))
    C = shared(np.full((m, 2 * n), 7.0, np.float32))
    a, b, c = A[::2, ::2], B, C[:, ::2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert kern(a, b, c, alpha=2.0, beta=-1.0) is c
    np.testing.assert_allclose(c, 2.0 * ref - 7.0, rtol=1e-4, atol=1e-4 * k)
    assert (C[:, 1::2] == 7.0).all()
    np.testing.assert_allclose(kern(a, b), ref, rtol=1e-4, atol=1e-4 * k)
