"""CUDA device arrays in and out without copies (PyTorch CUDA tensors, CuPy arrays, any object with
__cuda_array_interface__; coopjit.DeviceArray out, taken by PyTorch through the interface and
DLPack), against NumPy in float64. The execution tests need an NVIDIA GPU (cuda:0) and skip
without one, saying so; the interface parsing is checked everywhere."""
import ml_dtypes
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

    with pytest.raises(NotImplementedError, match="2 or more dims; a has shape"):
        coopjit.matmul(torch.ones(4, device="cuda"), torch.ones(4, 5, device="cuda"))
    with pytest.raises(ValueError, match=r"batch dims of a \(2, 3, 4\) and b \(3, 4, 5\) do not broadcast"):
        coopjit.matmul(torch.ones(2, 3, 4, device="cuda"), torch.ones(3, 4, 5, device="cuda"))
    with pytest.raises(ValueError, match="gemm: a must be 2-D"):
        coopjit.gemm(torch.ones(2, 3, 4, device="cuda"), torch.ones(4, 5, device="cuda"))
    with pytest.raises(NotImplementedError, match="epilogue on stacked device arrays"):
        coopjit.matmul(torch.ones(2, 3, 4, device="cuda"), torch.ones(4, 5, device="cuda"), activation="relu")
    sq = torch.ones(8, 8, device="cuda")
    with pytest.raises(ValueError, match="overlaps a's memory"):
        coopjit.matmul(sq, torch.ones(8, 8, device="cuda"), out=sq)
    with pytest.raises(ValueError, match="overlaps b's memory"):
        coopjit.gemm(torch.ones(8, 8, device="cuda"), sq, sq, beta=1.0)
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


def _ref(x):
    return x.cpu().double().numpy()


def _lowp_close(c, want, k):
    """A result (torch tensor) against float64: f32 accumulation, then for a bfloat16 result one
    rounding to 8 significant bits."""
    import torch

    tol = (2.0 ** -7 if c.dtype == torch.bfloat16 else 2.0 ** -20) * (1 + np.abs(want)) * max(1, k) ** 0.5
    got = c.double().cpu().numpy()
    assert np.all(np.abs(got - want) <= tol), np.max(np.abs(got - want) - tol)


@needs_cuda
def test_stacked_products_of_device_arrays():
    """3-D / 4-D device operands broadcast over their batch dims (numpy.matmul's rules), strided batch
    views, out= stacks, the results device arrays; the inputs are left as they were."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(5)
    # 512 stacked 16^3 bf16 products (the batched tensor-core case), twice: the second call takes the cache
    for _ in range(2):
        a = torch.randn(512, 16, 16, device="cuda", generator=g).bfloat16()
        b = torch.randn(512, 16, 16, device="cuda", generator=g).bfloat16()
        a0, b0 = a.clone(), b.clone()
        c = coopjit.matmul(a, b)
        assert isinstance(c, torch.Tensor) and c.is_cuda and c.dtype == torch.bfloat16 and c.shape == (512, 16, 16)
        _lowp_close(c, _ref(a) @ _ref(b), 16)
        assert torch.equal(a, a0) and torch.equal(b, b0)
    # broadcasting: (3, 1, 24, 40) @ (2, 40, 16) -> (3, 2, 24, 16); a 3-D a with a 2-D b
    a = torch.randn(3, 1, 24, 40, device="cuda", generator=g)
    b = torch.randn(2, 40, 16, device="cuda", generator=g)
    c = coopjit.matmul(a, b)
    assert c.shape == (3, 2, 24, 16)
    np.testing.assert_allclose(c.cpu().numpy(), _ref(a) @ _ref(b), rtol=1e-4, atol=1e-4)
    b2 = torch.randn(40, 16, device="cuda", generator=g)
    np.testing.assert_allclose(coopjit.matmul(a[:, 0], b2).cpu().numpy(), _ref(a[:, 0]) @ _ref(b2), rtol=1e-4, atol=1e-4)
    # strided batch views (a permuted: row stride 1, batch stride 24) into a permuted out
    ap = torch.randn(40, 5, 24, device="cuda", generator=g).permute(1, 2, 0)
    bp = torch.randn(5, 40, 16, device="cuda", generator=g)
    out = torch.full((16, 5, 24), float("nan"), device="cuda").permute(1, 2, 0)
    assert coopjit.matmul(ap, bp, out=out) is out
    np.testing.assert_allclose(out.cpu().numpy(), _ref(ap) @ _ref(bp), rtol=1e-4, atol=1e-4)
    # batch dims whose strides no two levels describe: an error naming them, nothing written
    x = torch.randn(2, 3, 4, 8, 8, device="cuda", generator=g).permute(0, 2, 1, 3, 4)
    with pytest.raises(ValueError, match=r"byte strides a \(3072, 256, 1024, 32, 4\).*do not merge into two levels"):
        coopjit.matmul(x, torch.randn(8, 8, device="cuda"))
    np.testing.assert_allclose(coopjit.matmul(x.contiguous(), b2[:8, :8]).cpu().numpy(), _ref(x) @ _ref(b2[:8, :8]),
                               rtol=1e-4, atol=1e-4)
    # a host operand with a device stack (copied in), and coopjit's own DeviceArray stacks
    h = np.random.default_rng(4).standard_normal((40, 16)).astype(np.float32)
    np.testing.assert_allclose(coopjit.matmul(a, h).cpu().numpy(), _ref(a) @ h, rtol=1e-4, atol=1e-4)
    xa = np.random.default_rng(5).standard_normal((6, 9, 7)).astype(np.float32)
    xb = np.random.default_rng(6).standard_normal((6, 7, 5)).astype(np.float32)
    z = coopjit.matmul(coopjit.DeviceArray.from_host(xa), coopjit.DeviceArray.from_host(xb))
    assert isinstance(z, coopjit.DeviceArray) and z.shape == (6, 9, 5)
    np.testing.assert_allclose(z.numpy(), xa.astype(np.float64) @ xb, rtol=1e-4, atol=1e-4)


@needs_cuda
def test_the_fast_path_repeats_calls_exactly():
    """The cached launches (coopjit._cuda_fast): calls with the same shapes and new data, gemm's alpha /
    beta changing between calls, transposes, an unaligned view (the plan without cp.async), a
    compiled kernel, each against float64; a call on a side stream is queued there, after the work
    that made its operands."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(6)
    for dt in (torch.float32, torch.bfloat16):
        for _ in range(3):
            a = torch.randn(16, 16, device="cuda", generator=g).to(dt)
            b = torch.randn(16, 16, device="cuda", generator=g).to(dt)
            c = coopjit.matmul(a, b)
            assert c.dtype == dt
            _lowp_close(c, _ref(a) @ _ref(b), 16)
    for alpha, beta in ((1.0, 0.0), (2.0, -0.5), (-1.0, 3)):
        a = torch.randn(40, 24, device="cuda", generator=g)
        b = torch.randn(32, 40, device="cuda", generator=g)
        c = torch.randn(24, 32, device="cuda", generator=g)
        want = alpha * _ref(a).T @ _ref(b).T + beta * _ref(c)
        assert coopjit.gemm(a, b, c, alpha=alpha, beta=beta, trans_a=True, trans_b=True) is c
        np.testing.assert_allclose(c.cpu().numpy(), want, rtol=1e-4, atol=1e-3)
    big = torch.randn(64, 80, device="cuda", generator=g).bfloat16()
    for off in (0, 1, 3):  # a view starting 2 and 6 bytes past 16-byte alignment
        a = big[:, off:off + 64]
        b = torch.randn(64, 72, device="cuda", generator=g).bfloat16()
        c = coopjit.matmul(a, b, out=torch.empty(64, 72, device="cuda", dtype=torch.bfloat16))
        _lowp_close(c, _ref(a) @ _ref(b), 64)
    k = coopjit.compile_gemm(48, 40, 56, np.float32, device="cuda:0", accumulate=True)
    for beta in (0.0, 0.5, 0.5):
        a = torch.randn(48, 56, device="cuda", generator=g)
        b = torch.randn(56, 40, device="cuda", generator=g)
        c = torch.randn(48, 40, device="cuda", generator=g)
        want = 1.5 * _ref(a) @ _ref(b) + beta * _ref(c)
        assert k(a, b, c, alpha=1.5, beta=beta) is c
        np.testing.assert_allclose(c.cpu().numpy(), want, rtol=1e-4, atol=1e-3)
    side = torch.cuda.Stream()
    x = torch.randn(2048, 2048, device="cuda", generator=g)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        y = x @ x  # long enough to be running when the product below is queued
        a, b = y[:16, :16] * 1e-3, y[16:32, :16] * 1e-3
        c = coopjit.matmul(a, b)
    side.synchronize()
    np.testing.assert_allclose(c.cpu().numpy(), _ref(a) @ _ref(b), rtol=1e-4, atol=1e-2)


@needs_cuda
def test_the_fast_path_feeds_hopper_tensor_maps_each_call():
    """Products big enough for the Hopper plan (wgmma fed by TMA on sm_90) through the cached
    launch: the tensor maps describe each call's own operands (new tensors every call, a padded
    row stride whose rows are 16-byte multiples apart, one whose rows are not: the plan without
    TMA), transposed views, against float64."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(16)
    for _ in range(3):
        a = torch.randn(256, 128, device="cuda", generator=g).bfloat16()
        b = torch.randn(128, 192, device="cuda", generator=g).bfloat16()
        _lowp_close(coopjit.matmul(a, b), _ref(a) @ _ref(b), 128)
    for pad in (8, 3):  # rows 272 bytes apart (a multiple of 16), then 262 bytes
        wide = torch.randn(256, 128 + pad, device="cuda", generator=g).bfloat16()
        b = torch.randn(128, 192, device="cuda", generator=g).bfloat16()
        for _ in range(2):
            a = wide[:, :128]
            c = coopjit.matmul(a, b, out=torch.empty(256, 192, device="cuda", dtype=torch.float32))
            _lowp_close(c, _ref(a) @ _ref(b), 128)
            wide = torch.randn(256, 128 + pad, device="cuda", generator=g).bfloat16()
    at = torch.randn(128, 256, device="cuda", generator=g).half()
    bt = torch.randn(192, 128, device="cuda", generator=g).half()
    c = coopjit.matmul(at.T, bt.T)
    want = _ref(at).T @ _ref(bt).T
    np.testing.assert_allclose(c.double().cpu().numpy(), want, rtol=2e-3, atol=2e-3 * np.sqrt(128))


@needs_cuda
def test_the_fast_path_keys_on_plan():
    """plan= through the cached launches (autotuning loops): each plan its own entry, the plan's
    kernel used (a plan that forces the mma.sync pipeline and one that forces the CUDA-core tiles
    both against float64, and two entries for the two), a dict changed between calls taken anew, a
    kernel's .config as plan=, gemm and a fused epilogue with plan=; refused plans refused every
    call, naming the field, and never cached."""
    import torch

    from coopjit import _cuda_fast

    g = torch.Generator(device="cuda").manual_seed(22)
    plans = ({"mma": "yes", "wgmma": "no", "stages": 3}, {"mma": "no", "wgmma": "no"})
    for plan in plans:
        for _ in range(2):
            a = torch.randn(96, 64, device="cuda", generator=g).bfloat16()
            b = torch.randn(64, 80, device="cuda", generator=g).bfloat16()
            _lowp_close(coopjit.matmul(a, b, plan=plan), _ref(a) @ _ref(b), 64)
    keys = [k for k in _cuda_fast._CACHE if k[0] == "mm" and k[3] == (96, 64) and k[-1] != ()]
    assert len(keys) == 2, keys
    plan = dict(plans[0])
    plan["stages"] = 2  # changed in place: a new entry, the new value
    a = torch.randn(96, 64, device="cuda", generator=g).bfloat16()
    b = torch.randn(64, 80, device="cuda", generator=g).bfloat16()
    _lowp_close(coopjit.matmul(a, b, plan=plan), _ref(a) @ _ref(b), 64)
    assert len([k for k in _cuda_fast._CACHE if k[0] == "mm" and k[3] == (96, 64) and k[-1] != ()]) == 3
    cfg = coopjit.compile_gemm(96, 80, 64, ml_dtypes.bfloat16, device="cuda:0").config
    for _ in range(2):
        _lowp_close(coopjit.matmul(a, b, plan=cfg), _ref(a) @ _ref(b), 64)
    c = torch.randn(96, 80, device="cuda", generator=g)
    want = 2.0 * _ref(a) @ _ref(b) - 0.5 * _ref(c)
    for _ in range(2):
        cc = c.clone()
        assert coopjit.gemm(a.float(), b.float(), cc, alpha=2.0, beta=-0.5, plan=plans[1]) is cc
        np.testing.assert_allclose(cc.cpu().numpy(), want, rtol=1e-4, atol=1e-3)
    bias = torch.randn(80, device="cuda", generator=g)
    for _ in range(2):
        got = coopjit.matmul(a, b, bias=bias, activation="relu", plan=plans[0])
        _lowp_close(got, np.maximum(_ref(a) @ _ref(b) + bias.double().cpu().numpy(), 0), 64)
    before = len(_cuda_fast._CACHE)
    for _ in range(2):
        with pytest.raises(ValueError, match="unknown plan field 'no_such_field'"):
            coopjit.matmul(a, b, plan={"no_such_field": 1})
        with pytest.raises(TypeError, match="stages must be an int, got True"):
            coopjit.matmul(a, b, plan={"stages": True})
        with pytest.raises(TypeError, match=r"stages must be an int, got \[3\]"):
            coopjit.matmul(a, b, plan={"stages": [3]})
    assert len(_cuda_fast._CACHE) == before


@needs_cuda
def test_cupy_stacks_on_their_stream():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed here")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 12, 20)).astype(np.float32)
    y = rng.standard_normal((20, 10)).astype(np.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        cx, cy = cupy.asarray(x) * 2, cupy.asarray(y)
        cz = coopjit.matmul(cx, cy)
    s.synchronize()
    assert isinstance(cz, cupy.ndarray) and cz.shape == (8, 12, 10)
    np.testing.assert_allclose(cupy.asnumpy(cz), 2 * x.astype(np.float64) @ y, rtol=1e-4, atol=1e-4)
    # repeated calls of one shape (the cached launch), into a new array and into out=
    out = cupy.full((12, 10), np.nan, np.float32)
    for i in range(3):
        p = rng.standard_normal((12, 20)).astype(np.float32)
        want = p.astype(np.float64) @ y
        np.testing.assert_allclose(cupy.asnumpy(coopjit.matmul(cupy.asarray(p), cy)), want, rtol=1e-4, atol=1e-4)
        assert coopjit.matmul(cupy.asarray(p), cy, out=out) is out
        np.testing.assert_allclose(cupy.asnumpy(out), want, rtol=1e-4, atol=1e-4)
    sq = cupy.ones((8, 8), np.float32)
    coopjit.matmul(sq, cupy.ones((8, 8), np.float32), out=cupy.empty((8, 8), np.float32))
    with pytest.raises(ValueError, match="overlaps a's memory"):
        coopjit.matmul(sq, cupy.ones((8, 8), np.float32), out=sq)


@needs_cuda
def test_dependent_products_back_to_back():
    """Launches on one stream stay ordered: a chain of products queued without synchronizing, each
    reading the one before, the last one overwriting an operand the first reads (write after read),
    a Stream-K plan in the chain, against float64 of the values each product read."""
    import ml_dtypes
    import torch

    n = 1024
    g = torch.Generator(device="cuda").manual_seed(17)
    x = torch.randn(n, n, device="cuda", generator=g).bfloat16()
    w = [(torch.randn(n, n, device="cuda", generator=g) * n ** -0.5).bfloat16() for _ in range(3)]
    sk = coopjit.compile_gemm(n, n, n, ml_dtypes.bfloat16, device="cuda:0", plan={"split": "sk"})
    x0 = _ref(x)
    torch.cuda.synchronize()
    for _ in range(2):
        y1 = coopjit.matmul(x, w[0])  # reads x
        y2 = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        sk(y1, w[1], y2)  # reads y1 as soon as it is written
        coopjit.matmul(y2, w[2], out=x)  # overwrites x, which the first product read
        torch.cuda.synchronize()
        _lowp_close(y1, x0 @ _ref(w[0]), n)
        _lowp_close(y2, _ref(y1) @ _ref(w[1]), n)
        _lowp_close(x, _ref(y2) @ _ref(w[2]), n)
        x0 = _ref(x)


def _strided_device_views(torch, g, shape, dtype):
    """(name, view) of one matrix of `shape` on cuda:0 in layouts other than C order: a transposed
    (column-major) view, strided rows and columns, a column slice (its rows 16-byte aligned or
    not), and for a dim of 1 a C-contiguous row of a bigger matrix (its row stride not N)."""
    m, n = shape
    big = torch.randn(2 * m + 1, 2 * n + 3, device="cuda", generator=g).to(dtype)
    out = [("transposed", torch.randn(n, m, device="cuda", generator=g).to(dtype).t()),
           ("strided", big[1::2, ::2][:m, :n]), ("column slice", big[:m, 1:n + 1])]
    if m == 1:
        out.append(("row of a bigger matrix", big[1:2, :n]))
    return out


@needs_cuda
@pytest.mark.parametrize("m,n,k,trans_b", [(48, 40, 56, False), (1, 72, 64, True)])
def test_compiled_kernels_take_strided_device_arrays(m, n, k, trans_b):
    """A compiled kernel is planned for C-ordered operands: torch views in other layouts (x.t(),
    x[:, ::2], a column slice) as a, b or c raised "these operands need plan ... but the kernel was
    compiled for ..."; they go through C-ordered copies made by torch on its current stream (c's
    written back after the launch, the elements between its elements unchanged), as host operands
    do. Queued without waiting; the second call and later (the cached launch's path) alike; on a
    side stream too. The inputs are left as they were."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(11)
    kern = coopjit.compile_gemm(m, n, k, np.float32, device="cuda:0", trans_b=trans_b, accumulate=True)
    bshape = (n, k) if trans_b else (k, n)
    plain_a = torch.randn(m, k, device="cuda", generator=g)
    plain_b = torch.randn(*bshape, device="cuda", generator=g)
    cases = [(name, a, plain_b) for name, a in _strided_device_views(torch, g, (m, k), torch.float32)]
    cases += [(name, plain_a, b) for name, b in _strided_device_views(torch, g, bshape, torch.float32)]
    side = torch.cuda.Stream()
    for name, a, b in cases:
        a_in, b_in = a.clone(), b.clone()
        ref = _ref(a) @ (_ref(b).T if trans_b else _ref(b))
        for _ in range(2):  # (a second call: what _cuda_fast's cache does with it)
            got = kern(a, b)
            assert isinstance(got, torch.Tensor) and got.is_cuda
            np.testing.assert_allclose(got.cpu().numpy(), ref, rtol=1e-4, atol=1e-4 * k, err_msg=name)
        for cname, c in _strided_device_views(torch, g, (m, n), torch.float32):
            base = c._base if c._base is not None else c
            around = base.clone()
            for beta in (0.0, -0.5):
                for stream in (torch.cuda.current_stream(), side):
                    torch.cuda.synchronize()
                    with torch.cuda.stream(stream):
                        c.fill_(float("nan") if beta == 0.0 else 3.0)  # (beta = 0: c is not read)
                        assert kern(a, b, c, alpha=1.5, beta=beta) is c
                    stream.synchronize()
                    want = 1.5 * ref + (3.0 * beta if beta else 0.0)
                    np.testing.assert_allclose(c.cpu().numpy(), want, rtol=1e-4, atol=1e-4 * k,
                                               err_msg=f"{name}, c {cname}, beta {beta}")
            if c._base is not None:  # the elements of the base outside c: as they were
                outside = torch.ones_like(base, dtype=torch.bool)
                outside.as_strided(c.shape, c.stride(), c.storage_offset() - base.storage_offset()).fill_(False)
                assert torch.equal(base[outside], around[outside]), cname
        assert torch.equal(a, a_in) and torch.equal(b, b_in)


@needs_cuda
def test_compiled_kernels_name_a_strided_device_array_they_cannot_copy():
    """A device array that only has __cuda_array_interface__ (no framework coopjit can copy it
    with): a ValueError naming the argument, its shape and strides and what to pass; C-ordered
    ones run as before."""
    import torch

    class Iface:
        def __init__(self, t):
            self.t = t
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    kern = coopjit.compile_gemm(16, 24, 32, np.float32, device="cuda:0")
    a, b = torch.randn(16, 32, device="cuda"), torch.randn(32, 48, device="cuda")
    with pytest.raises(ValueError, match=r"b \(cai float32 \(32, 24\) with byte strides \(192, 8\)\) is not "
                                         r"C-contiguous.*byte strides \(96, 4\).*pass a C-contiguous array"):
        kern(Iface(a), Iface(b[:, ::2]))
    got = kern(Iface(a), Iface(b[:, ::2].contiguous()))
    np.testing.assert_allclose(np.asarray(got), _ref(a) @ _ref(b[:, ::2]), rtol=1e-4, atol=1e-3)


@needs_cuda
def test_compiled_kernels_take_strided_cupy_arrays():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    rs = cupy.random.RandomState(5)
    kern = coopjit.compile_gemm(40, 24, 36, np.float32, device="cuda:0", accumulate=True)
    a = rs.standard_normal((36, 40), dtype=cupy.float32).T
    b = rs.standard_normal((36, 48), dtype=cupy.float32)[:, ::2]
    big = cupy.full((40, 48), 2.0, cupy.float32)
    c = big[:, 1::2]
    ref = cupy.asnumpy(a).astype(np.float64) @ cupy.asnumpy(b)
    assert kern(a, b, c, alpha=0.5, beta=2.0) is c
    np.testing.assert_allclose(cupy.asnumpy(c), 0.5 * ref + 4.0, rtol=1e-4, atol=1e-3)
    assert (cupy.asnumpy(big[:, ::2]) == 2.0).all()


class _NamedStream:
    """A CuPy array seen only through __cuda_array_interface__ (another library's array), naming
    `stream` as the stream its work is on."""

    def __init__(self, x, stream):
        self.x = x
        self.__cuda_array_interface__ = {**x.__cuda_array_interface__, "stream": int(stream)}


@needs_cuda
def test_cupy_arrays_written_on_their_stream_just_before_a_synchronous_call():
    """The synchronous path (host operands mixed in, host epilogue operands, reductions, compiled
    kernels with a host operand) waited only for torch's current stream: a CuPy array written on a
    non-default CuPy stream just before the call was read before the write (zeros here), as was
    any __cuda_array_interface__ array whose interface names a stream (session 24's leftover)."""
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed here")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    y = rng.standard_normal((48, 40)).astype(np.float32)
    bias = rng.standard_normal(40).astype(np.float32)
    ref = x.astype(np.float64) @ y
    x_dev, y_dev = cupy.asarray(x), cupy.asarray(y)
    big = cupy.ones((8192, 8192), np.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    kern = coopjit.compile_gemm(64, 40, 48, np.float32, device="cuda:0")

    def written():
        """A zeroed array that stream s writes x into after ~0.1 s of other work (queued, not run)."""
        a = cupy.zeros((64, 48), np.float32)
        cupy.cuda.Device().synchronize()
        with s:
            for _ in range(6):
                big @ big  # (its result is dropped: only the time it takes on s counts)
            a[...] = x_dev
        return a

    checks = {
        "matmul with a host operand": (lambda a: coopjit.matmul(a, y), ref),
        "matmul with a host bias": (lambda a: coopjit.matmul(a, y_dev, bias=bias), ref + bias),
        "a compiled kernel with a host operand": (lambda a: kern(a, y), ref),
        "reduce": (lambda a: coopjit.reduce(a, 1), x.astype(np.float64).sum(axis=1)),
        "an interface naming the stream": (lambda a: coopjit.matmul(_NamedStream(a, s.ptr), y), ref),
    }
    for what, (call, want) in checks.items():
        call(x_dev)  # compiled and cached first: the call below reaches its launch at once
        cupy.cuda.Device().synchronize()
        a = written()
        with s:
            got = call(a)
        s.synchronize()
        got = cupy.asnumpy(cupy.asarray(got))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=what)


@needs_cuda
def test_compiled_kernel_keeps_copies_of_device_arrays():
    """compile_gemm(bias=device array) kept the caller's array: writes to it after compiling
    changed the kernel's results. It now keeps a copy made by the array's framework."""
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed here")
    rng = np.random.default_rng(12)
    x = rng.standard_normal((32, 16)).astype(np.float32)
    y = rng.standard_normal((16, 24)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    want = x.astype(np.float64) @ y + bias
    frameworks = [("cupy", cupy.asarray, cupy.asnumpy)]
    try:
        import torch

        frameworks.append(("torch", lambda v: torch.from_numpy(v).cuda(), lambda v: v.cpu().numpy()))
    except ImportError:
        pass
    for name, to_dev, to_host in frameworks:
        b_dev = to_dev(bias.copy())
        kern = coopjit.compile_gemm(32, 24, 16, np.float32, device="cuda:0", bias=b_dev)
        if name == "cupy":
            b_dev[...] = 100  # the caller changes its array after compiling
        else:
            b_dev.fill_(100)
        got = to_host(kern(to_dev(x), to_dev(y)))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)
    with pytest.raises(ValueError, match=r"bias is a _NamedStream .* coopjit cannot copy"):
        coopjit.compile_gemm(32, 24, 16, np.float32, device="cuda:0", bias=_NamedStream(cupy.asarray(bias), 1))
