"""CUDA device arrays in and out without copies (PyTorch CUDA tensors, CuPy arrays, any object with
__cuda_array_interface__; coopjit.DeviceArray out, taken by PyTorch through the interface and
DLPack), against NumPy in float64. The execution tests need an NVIDIA GPU (cuda:0) and skip
without one, saying so; the interface parsing is checked everywhere."""
import numpy as np
import pytest

import coopjit
from coopjit._cuda_arrays import CudaView, device_view

HAVE_CUDA = "cuda:0" in coopjit.devices()
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="no NVIDIA GPU (cuda:0) on this machine")


class FakeCAI:
    """An object that only has __cuda_array_interface__ (its memory is a host array here: the
    parsing is what is checked; nothing is launched on it)."""

    def __init__(self, a, strides=True):
        self.a = a
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str,
                                         "data": (a.__array_interface__["data"][0], False), "version": 3,
                                         "strides": a.strides if strides else None}


def test_the_interface_is_read_as_the_memory_it_describes():
    a = np.zeros((6, 10), np.float32)
    v = device_view(FakeCAI(a[:, ::2]))
    assert isinstance(v, CudaView) and v.shape == (6, 5) and v.strides == (40, 8) and v.dtype == np.float32
    assert v.ptr == a.__array_interface__["data"][0]
    assert v.T.shape == (5, 6) and v.T.strides == (8, 40)
    c = device_view(FakeCAI(np.zeros((3, 4), np.int8), strides=False))
    assert c.strides == (4, 1) and c.c_contiguous
    assert device_view(np.zeros(3)) is None and device_view([1, 2]) is None
    # a product on the CPU refuses a device array among its epilogue's operands, by name
    x = np.ones((4, 5), np.float32)
    with pytest.raises(TypeError, match="bias is a CUDA device array"):
        coopjit.matmul(x, x.T.copy(), bias=FakeCAI(np.ones(4, np.float32)))


@needs_cuda
def test_torch_cuda_tensors_in_and_out_without_copies():
    import torch

    g = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(130, 70, device="cuda", generator=g)
    b = torch.randn(70, 90, device="cuda", generator=g)
    ref = a.cpu().double().numpy() @ b.cpu().double().numpy()
    c = coopjit.matmul(a, b)
    assert isinstance(c, torch.Tensor) and c.is_cuda and c.dtype == torch.float32 and c.shape == (130, 90)
    np.testing.assert_allclose(c.cpu().numpy(), ref, rtol=1e-4, atol=1e-4)
    out = torch.empty(130, 90, device="cuda")
    got = coopjit.matmul(a, b, out=out)
    assert got is out
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-4, atol=1e-4)
    # transposed views and gemm's alpha / beta, in place in a device C
    at, bt = a.t().contiguous().t(), b.t().contiguous().t()  # column-major views
    cc = torch.randn(130, 90, device="cuda", generator=g)
    want = 2.0 * ref - 0.5 * cc.cpu().double().numpy()
    r = coopjit.gemm(at, bt, cc, alpha=2.0, beta=-0.5)
    assert r is cc
    np.testing.assert_allclose(cc.cpu().numpy(), want, rtol=1e-4, atol=1e-3)
    # bfloat16 in, bfloat16 out; a host operand with a device one (the host one is copied in)
    ab, bb = a.to(torch.bfloat16), b.to(torch.bfloat16)
    c16 = coopjit.matmul(ab, bb)
    assert c16.dtype == torch.bfloat16 and c16.is_cuda
    ref16 = ab.cpu().double().numpy() @ bb.cpu().double().numpy()
    np.testing.assert_allclose(c16.cpu().double().numpy(), ref16, rtol=2 ** -7, atol=0.1)
    host_a = a.cpu().numpy()
    mixed = coopjit.matmul(host_a, b)
    assert isinstance(mixed, torch.Tensor) and mixed.is_cuda
    np.testing.assert_allclose(mixed.cpu().numpy(), ref, rtol=1e-4, atol=1e-4)


@needs_cuda
def test_fused_epilogue_on_device_arrays():
    import torch

    a = torch.randn(64, 48, device="cuda")
    b = torch.randn(48, 40, device="cuda")
    bias = np.random.default_rng(0).standard_normal(40).astype(np.float32)  # a host vector: copied in
    res = torch.randn(64, 40, device="cuda")  # a device residual: read in place
    c = coopjit.matmul(a, b, bias=bias, activation="relu", residual=res)
    assert isinstance(c, torch.Tensor) and c.is_cuda
    ref = np.maximum(a.cpu().double().numpy() @ b.cpu().double().numpy() + bias, 0) + res.cpu().double().numpy()
    np.testing.assert_allclose(c.cpu().numpy(), ref, rtol=1e-4, atol=1e-4)


@needs_cuda
def test_other_device_arrays_and_coopjit_device_arrays():
    import torch

    x = np.random.default_rng(1).standard_normal((50, 30)).astype(np.float32)
    y = np.random.default_rng(2).standard_normal((30, 20)).astype(np.float32)
    dx, dy = coopjit.DeviceArray.from_host(x), coopjit.DeviceArray.from_host(y)
    assert isinstance(dx, coopjit.DeviceArray) and dx.shape == (50, 30)
    z = coopjit.matmul(dx, dy)
    assert isinstance(z, coopjit.DeviceArray)
    ref = x.astype(np.float64) @ y
    np.testing.assert_allclose(z.numpy(), ref, rtol=1e-4, atol=1e-4)
    # PyTorch takes it without a copy: through the interface and through DLPack
    t1 = torch.as_tensor(z, device="cuda")
    t2 = torch.from_dlpack(z)
    assert t1.data_ptr() == t2.data_ptr() == z.__cuda_array_interface__["data"][0]
    np.testing.assert_allclose(t2.cpu().numpy(), ref, rtol=1e-4, atol=1e-4)
    # an object with only the interface (a torch tensor's memory behind it)
    tx = torch.from_numpy(x).cuda()
    wrapped = type("Wrapped", (), {"__cuda_array_interface__": tx.__cuda_array_interface__})()
    w = coopjit.matmul(wrapped, dy)
    np.testing.assert_allclose(np.asarray(w), ref, rtol=1e-4, atol=1e-4)
    try:
        import cupy
    except ImportError:
        return
    cx, cy = cupy.asarray(x), cupy.asarray(y)
    cz = coopjit.matmul(cx, cy)
    assert isinstance(cz, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(cz), ref, rtol=1e-4, atol=1e-4)


@needs_cuda
def test_device_array_errors_are_clear():
    import torch

    with pytest.raises(NotImplementedError, match="2-D operands"):
        coopjit.matmul(torch.ones(2, 3, 4, device="cuda"), torch.ones(4, 5, device="cuda"))
    with pytest.raises(TypeError, match="int64"):
        coopjit.matmul(torch.ones(3, 4, device="cuda", dtype=torch.int64), torch.ones(4, 5, device="cuda",
                                                                                       dtype=torch.int64))
    with pytest.raises(ValueError, match="inner dimensions"):
        coopjit.matmul(torch.ones(3, 4, device="cuda"), torch.ones(5, 5, device="cuda"))
    with pytest.raises(TypeError, match="dtype"):
        coopjit.matmul(torch.ones(3, 4, device="cuda"), torch.ones(4, 5, device="cuda"),
                       out=torch.empty(3, 5, device="cuda", dtype=torch.int32))


@needs_cuda
def test_compiled_kernels_take_device_arrays():
    import torch

    k = coopjit.compile_gemm(96, 64, 80, np.float32, device="cuda:0", trans_b=True)
    a = torch.randn(96, 80, device="cuda")
    b = torch.randn(64, 80, device="cuda")
    c = k(a, b)
    assert isinstance(c, torch.Tensor) and c.is_cuda
    np.testing.assert_allclose(c.cpu().numpy(), a.cpu().double().numpy() @ b.cpu().double().numpy().T, rtol=1e-4,
                               atol=1e-4)
    out = torch.empty(96, 64, device="cuda")
    assert k(a, b, out) is out
    np.testing.assert_allclose(out.cpu().numpy(), c.cpu().numpy())


@needs_cuda
def test_reductions_of_device_arrays():
    import torch

    x = torch.randn(300, 257, device="cuda")
    ref = x.cpu().double().numpy()
    for axis in (0, 1):
        for op, f in (("sum", np.sum), ("max", np.max)):
            got = coopjit.reduce(x, axis=axis, op=op)
            assert isinstance(got, torch.Tensor) and got.is_cuda and got.shape == (ref.shape[1 - axis],)
            np.testing.assert_allclose(got.cpu().numpy(), f(ref, axis=axis), rtol=1e-5, atol=1e-4)
    with pytest.raises(NotImplementedError, match="axis 0 or 1"):
        coopjit.reduce(x)
