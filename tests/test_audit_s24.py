"""Session 24's audit of what sessions 20, 22 and 23 did not reach: fused epilogues' operands and
scalars, out= aliasing and odd outputs, NumPy subclasses and foreign inputs (torch CPU tensors
with neg / conj bits, DLPack), device names, compiled kernels with epilogues. Each test is a bug
the audit found (it failed before its fix); scripts/fuzz_epilogues.py is the sweep of fused
products against NumPy in float64."""
import numpy as np
import pytest

import coopjit
from conftest import load_script, product_into


def _w8a8(rng, m, n, k, a_dtype=np.int8):
    lo = 0 if a_dtype == np.uint8 else -128
    a = rng.integers(lo, 128, (m, k)).astype(a_dtype)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("alpha", [4096, 2**31, 2**40, -(2**33) + 7, 2**53 + 1, 2.5, -0.125])
@pytest.mark.parametrize("with_scale", [True, False])
def test_w8a8_gemm_applies_alpha_in_float(rng, alpha, with_scale):
    # The fused int8 product multiplied its int32 sums by alpha in int32, before the epilogue
    # converted them: 64 x 127 * 127 with alpha=4096 gave -6.7e7 where the product is 4.2e9, and
    # alpha=2**31 gave 0. A float alpha (a dequantization factor) was refused.
    a = np.full((8, 64), 127, np.int8)
    b = np.full((64, 12), 127, np.int8)
    a[1::2] = rng.integers(-128, 128, (4, 64))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    sc = rng.random(12).astype(np.float32) + 0.5
    sc0 = sc.copy()
    kw = {"scale": sc} if with_scale else {"bias": np.zeros(12, np.float32)}
    got = coopjit.gemm(a, b, alpha=alpha, **kw)
    want = float(alpha) * ref * (sc0.astype(np.float64) if with_scale else 1.0)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30)
    np.testing.assert_array_equal(sc, sc0)  # the caller's scale is not modified


@pytest.mark.parametrize("steps", [{"scale": True}, {"row_scale": True}, {"scale": "bound"}])
def test_w8a8_kernel_applies_alpha_in_float(rng, steps):
    m, n, k = 6, 10, 64
    a, b, ref = _w8a8(rng, m, n, k)
    sc = rng.random(n).astype(np.float32) + 0.5
    rs = rng.random(m).astype(np.float32) + 0.5
    if steps == {"scale": "bound"}:
        kern, call, want = coopjit.compile_gemm(m, n, k, np.int8, scale=sc), {}, ref * sc
    elif "scale" in steps:
        kern, call, want = coopjit.compile_gemm(m, n, k, np.int8, scale=True), {"scale": sc}, ref * sc
    else:
        kern, call, want = coopjit.compile_gemm(m, n, k, np.int8, row_scale=True), {"row_scale": rs}, ref * rs[:, None]
    sc0, rs0 = sc.copy(), rs.copy()
    for alpha in (4096, -(2**31), 2**53 + 1, 3):
        np.testing.assert_allclose(kern(a, b, alpha=alpha, **call), float(alpha) * want, rtol=2e-6)
    np.testing.assert_array_equal(sc, sc0)
    np.testing.assert_array_equal(rs, rs0)


def test_w8a8_kernel_without_a_scale_refuses_an_alpha_that_could_wrap(rng):
    m, n, k = 4, 6, 64
    a, b, ref = _w8a8(rng, m, n, k)
    kern = coopjit.compile_gemm(m, n, k, np.int8, bias=np.zeros(n, np.float32))
    np.testing.assert_allclose(kern(a, b, alpha=-3), -3 * ref, rtol=1e-6)  # 3 * 64 * 128^2 < 2^31: exact
    with pytest.raises(ValueError, match=r"alpha=4096.0 .*could wrap.*scale=True"):
        kern(a, b, alpha=4096)


def test_w8a8_kernel_on_a_device_applies_alpha_in_float(rng):
    if "opencl:0" not in coopjit.devices():
        pytest.skip("no opencl:0 (the Intel CPU OpenCL runtime)")
    m, n, k = 8, 12, 64
    a = np.full((m, k), 127, np.int8)
    b = np.full((k, n), 127, np.int8)
    sc = rng.random(n).astype(np.float32) + 0.5
    kern = coopjit.compile_gemm(m, n, k, np.int8, scale=True, device="opencl:0")
    want = 4096 * (a.astype(np.float64) @ b.astype(np.float64)) * sc
    np.testing.assert_allclose(kern(a, b, alpha=4096, scale=sc), want, rtol=2e-6)
    np.testing.assert_allclose(coopjit.gemm(a, b, alpha=4096, scale=sc, device="opencl:0"), want, rtol=2e-6)


class _FakeCudaArray:
    """An object with __cuda_array_interface__ (a pointer no host code may read)."""

    def __init__(self, shape):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (12345678, False), "version": 3}


@pytest.mark.parametrize("step", ["bias", "scale", "row_scale", "residual"])
def test_compiled_cpu_kernel_names_a_device_array_among_its_epilogue_operands(rng, step):
    # A compiled CPU kernel passed a CUDA device array as an epilogue operand sent it to the core
    # as an object array: "bias must be a contiguous vector of 12 f32 ..., got 0-D with 1 elements
    # of 8 bytes", and for a residual an internal error (RuntimeError). matmul names it.
    m, n, k = 8, 12, 16
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    shape = {"bias": (n,), "scale": (n,), "row_scale": (m,), "residual": (m, n)}[step]
    kern = coopjit.compile_gemm(m, n, k, **{step: True})
    with pytest.raises(TypeError, match=f"{step} is a CUDA device array .* runs on the CPU"):
        kern(a, b, **{step: _FakeCudaArray(shape)})


def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("where", ["a", "b", "bias", "residual"])
def test_torch_views_with_the_negative_bit_are_read_as_their_values(rng, where):
    # torch._neg_view (and the conj of a complex tensor) sets a bit that torch's .numpy() refuses:
    # every call raised torch's RuntimeError "Can't call numpy() on Tensor that has negative bit
    # set", which names no argument; torch's own matmul reads such a view as its values.
    torch = _torch()
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    bias = rng.standard_normal(7).astype(np.float32)
    res = rng.standard_normal((6, 7)).astype(np.float32)
    args = {"a": torch.from_numpy(a), "b": torch.from_numpy(b), "bias": torch.from_numpy(bias),
            "residual": torch.from_numpy(res)}
    args[where] = torch._neg_view(args[where])
    vals = {"a": a, "b": b, "bias": bias, "residual": res}
    vals[where] = -vals[where]
    want = vals["a"].astype(np.float64) @ vals["b"] + vals["bias"] + vals["residual"]
    got = coopjit.matmul(args["a"], args["b"], bias=args["bias"], residual=args["residual"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if where in ("a", "b"):
        plain = coopjit.matmul(args["a"], args["b"])
        np.testing.assert_allclose(plain, vals["a"].astype(np.float64) @ vals["b"], rtol=1e-5, atol=1e-5)
    assert args[where].is_neg()  # the caller's view is as it was


def test_torch_output_with_the_negative_bit_is_refused_by_name(rng):
    torch = _torch()
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    base = torch.zeros(6, 7)
    out = torch._neg_view(base)
    with pytest.raises(ValueError, match="out is a PyTorch tensor with the negative bit"):
        coopjit.matmul(a, b, out=out)
    with pytest.raises(ValueError, match="c is a PyTorch tensor with the negative bit"):
        coopjit.gemm(a, b, out)
    assert not base.any()


def _shared_rows(shape, dtype=np.float32):
    """A writable (rows, cols) view whose rows are one row in memory, and that row."""
    base = np.zeros(shape[1], dtype)
    return np.lib.stride_tricks.as_strided(base, shape, (0, base.itemsize)), base


@pytest.mark.parametrize("call", ["matmul", "matmul_fused", "gemm_beta", "kernel", "torch_expand"])
def test_outputs_whose_elements_share_memory_are_refused(rng, call):
    # A writable output with a zero stride (as_strided, torch's expand) was written: the rows'
    # results landed on one another, and which stayed depended on the workers (a torch expand out
    # of 512 rows held row 257, NumPy's loop leaves the last); gemm with beta read c's one row
    # while other rows were being written into it (neither any row's result nor NumPy's).
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)
    out, base = _shared_rows((64, 16))
    with pytest.raises(ValueError, match=r"\(64, 16\)\) has byte strides \(0, 4\): its 64 elements along dim 0 are one"):
        if not product_into(call, a, b, out, base):
            torch = _torch()
            t = torch.zeros(16)
            coopjit.matmul(a, b, out=t.expand(64, 16))
    assert not base.any() or call == "gemm_beta" and (base == 1).all()


def test_reduce_outputs_whose_elements_share_memory_are_refused(rng):
    x = rng.standard_normal((8, 30)).astype(np.float32)
    base = np.zeros(1, np.float32)
    out = np.lib.stride_tricks.as_strided(base, (30,), (0,))
    with pytest.raises(ValueError, match=r"reduce: out .* its 30 elements along dim 0 are one element"):
        coopjit.reduce(x, axis=0, out=out)
    assert base[0] == 0
    # a dim of one element may have any stride: that is not sharing
    out1 = np.lib.stride_tricks.as_strided(np.zeros(30, np.float32), (1, 30), (0, 4))
    coopjit.matmul(x[:1], np.eye(30, dtype=np.float32), out=out1)
    np.testing.assert_allclose(out1, x[:1], rtol=1e-6)
    # nor is an empty output (NumPy gives its dims stride 0): a product with M, N or K of 0
    for shape in ((2, 0), (0, 13)):
        empty = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape, (0, 0))
        assert coopjit.matmul(np.ones((shape[0], 3), np.float32), np.ones((3, shape[1]), np.float32), out=empty) is empty
        assert coopjit.gemm(np.ones((shape[0], 3), np.float32), np.ones((3, shape[1]), np.float32), empty) is empty


@pytest.mark.parametrize("step", ["bias", "residual", "scale", "row_scale"])
def test_true_as_an_epilogue_operand_is_named(rng, step):
    # matmul(..., bias=True) said "this kernel was compiled with bias=True: pass bias= at each
    # call" (matmul compiles nothing the user asked for); a compiled kernel's call with
    # residual=True (or bias=True, ...) read True as the number 1 and added it to every element.
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    with pytest.raises(TypeError, match=f"matmul: {step}=True is compile_gemm's"):
        coopjit.matmul(a, b, **{step: True})
    with pytest.raises(TypeError, match=f"gemm: {step}=True is compile_gemm's"):
        coopjit.gemm(a, b, **{step: True})
    kern = coopjit.compile_gemm(6, 7, 5, **{step: True})
    for value in (True, np.True_):
        with pytest.raises(TypeError, match=f"{step}=(True|np.True_) at a call; pass the {step} itself"):
            kern(a, b, **{step: value})


@pytest.mark.parametrize("device", [3, b"cpu", 0.0, ["cpu"]])
def test_device_names_of_the_wrong_type_are_named(device):
    # device_info(3) and empty(..., device=None) raised pybind11's "incompatible function
    # arguments"; b"cpu" reached the SPIR-V runtime ("device 'cpu' runs kernels through the ORC
    # JIT, not SPIR-V: it has no SPIR-V device object").
    with pytest.raises(TypeError, match=r"device_info: device must be a device name \(a str"):
        coopjit.device_info(device)
    with pytest.raises(TypeError, match=r"empty: device must be a device name \(a str"):
        coopjit.empty((2, 2), np.float32, device=device)


def test_device_none_is_the_cpu_and_cpu_numbers_are_unknown():
    assert coopjit.device_info(None)["backend"] == "cpu"
    assert coopjit.empty((2, 3), np.float32, device=None).shape == (2, 3)
    for call in (lambda: coopjit.device_info("cpu:0"), lambda: coopjit.empty((2, 2), device="cpu:1"),
                 lambda: coopjit.matmul(np.eye(2), np.eye(2), device="cpu:0")):
        with pytest.raises(ValueError, match="unknown device 'cpu:[01]'"):
            call()


class _BrokenDlpack:
    def __dlpack__(self, **kw):
        raise BufferError("the producer's device memory is gone")

    def __dlpack_device__(self):
        return (1, 0)


def test_a_dlpack_object_that_fails_is_named_with_its_error():
    # The failure was passed over and the object read as a 0-d object array: "a has dtype object;
    # coopjit GEMM supports ..." (and bias: "bias has dtype object; it must hold numbers").
    b = np.ones((3, 3), np.float32)
    with pytest.raises(TypeError, match="a \\(_BrokenDlpack\\) cannot be read through DLPack: the producer's device"):
        coopjit.matmul(_BrokenDlpack(), b)
    with pytest.raises(TypeError, match="bias \\(_BrokenDlpack\\) cannot be read through DLPack"):
        coopjit.matmul(b, b, bias=_BrokenDlpack())
    with pytest.raises(TypeError, match="a \\(_BrokenDlpack\\) cannot be read through DLPack"):
        coopjit.reduce(_BrokenDlpack())


def _misaligned(x):
    """x's values in a C-ordered array one byte off its element alignment."""
    raw = np.zeros(x.nbytes + 1, np.uint8)
    y = raw[1:].view(x.dtype).reshape(x.shape)
    y[...] = x
    return y


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("which", ["a", "b"])
@pytest.mark.parametrize("fused", [False, True])
def test_compiled_transposed_kernel_takes_a_misaligned_operand_of_one_row(rng, dtype, which, fused):
    # compile_gemm(3, 1, 2, trans_b=True) called with a C-ordered b one byte off its alignment was
    # refused: "these operands (... B strides (1, 1) ...) need another kernel: this one was compiled
    # for ... B strides (1, 2)": the misaligned b was copied after its transpose (b.T of one row),
    # which gave it other strides than the kernel's fixed ones. The same for a.T of one column.
    m, n, k = (1, 5, 3) if which == "a" else (4, 1, 3)
    a = rng.standard_normal((k, m)).astype(dtype) if which == "a" else rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype) if which == "b" else rng.standard_normal((k, n)).astype(dtype)
    kw = {"bias": np.ones(n, np.float32)} if fused else {}
    kern = coopjit.compile_gemm(m, n, k, dtype, trans_a=which == "a", trans_b=which == "b", **kw)
    args = (_misaligned(a), b) if which == "a" else (a, _misaligned(b))
    got = kern(*args)
    opa, opb = (a.T, b) if which == "a" else (a, b.T)
    want = opa.astype(np.float64) @ opb.astype(np.float64) + (1.0 if fused else 0.0)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3 if dtype == np.float16 else 1e-5, atol=1e-3)


@pytest.mark.parametrize("seed", [11, 12])
def test_fuzzed_fused_products_match_numpy(seed):
    # A bounded slice of scripts/fuzz_epilogues.py: entries, dtypes, steps, views, NaN / inf, the
    # forms of out (guarded buffers, overlapping a, a bias inside out, subclasses, torch).
    pytest.importorskip("torch")
    fuzz = load_script("fuzz_epilogues")
    with np.errstate(all="ignore"):
        failures, stats = fuzz.fuzz_common.sweep(fuzz.draw, fuzz.run_case, fuzz.describe, np.random.default_rng(seed),
                                                 40)
    assert not failures, "\n".join(failures)
    assert stats["ran"] >= 30, stats


@pytest.mark.parametrize("fused", [False, True])
def test_kernel_compiled_for_a_big_endian_dtype_takes_arrays_of_either_order(rng, fused):
    # compile_gemm(..., dtype=">f4") made a kernel that refused every call, native or big-endian:
    # "a has dtype float32; this kernel was compiled for >f4" (the dtype compared as given).
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    kw = {"bias": np.ones(5, np.float32)} if fused else {}
    kern = coopjit.compile_gemm(4, 5, 3, ">f4", **kw)
    want = a.astype(np.float64) @ b + (1.0 if fused else 0.0)
    for x, y in ((a, b), (a.astype(">f4"), b.astype(">f4"))):
        np.testing.assert_allclose(kern(x, y), want, rtol=1e-5, atol=1e-6)
    assert kern.dtype == np.float32 and kern.dtype.isnative


@pytest.mark.parametrize("beta", [2.0, -1, np.nan, np.float32(0.5)])
@pytest.mark.parametrize("kw", [{}, {"bias": np.ones(5, np.float32)}, {"packed": True}])
def test_gemm_beta_without_c_is_named(rng, beta, kw):
    # gemm(a, b, beta=2) without c gave a @ b: beta was dropped (a compiled kernel's call raises
    # since session 22's audit, naming it).
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    kw = dict(kw)
    if kw.pop("packed", False):
        b = coopjit.prepack(b)
    with pytest.raises(ValueError, match="beta=.* was given without c"):
        coopjit.gemm(a, b, beta=beta, **kw)
    np.testing.assert_allclose(coopjit.gemm(a, b, beta=0, **kw), coopjit.gemm(a, b, **kw))  # 0 needs no c


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_interrupts_in_an_epilogue_function_are_not_turned_into_value_errors(rng, exc):
    # Ctrl-C while the user's epilogue function ran became "ValueError: the epilogue function
    # raised KeyboardInterrupt", which `except ValueError` would swallow; sys.exit() likewise.
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)

    def fn(builder, row, col, value):
        raise exc()

    with pytest.raises(exc):
        coopjit.matmul(a, b, epilogue=fn)
    with pytest.raises(ValueError, match="the epilogue function raised ZeroDivisionError"):
        coopjit.matmul(a, b, epilogue=lambda builder, row, col, value: 1 / 0)


def test_w8a8_on_cuda_tensors_applies_alpha_in_float(rng):
    # The fused int8 product on CUDA tensors: the same int32 wrap as the CPU's (alpha folded into
    # the scale step; a device scale with alpha != 1 is refused by name).
    torch = _torch()
    if "cuda:0" not in coopjit.devices() or not torch.cuda.is_available():
        pytest.skip("no NVIDIA GPU (cuda:0) with torch CUDA on this machine")
    a = torch.full((8, 64), 127, dtype=torch.int8, device="cuda")
    b = torch.full((64, 16), 127, dtype=torch.int8, device="cuda")
    sc = rng.random(16).astype(np.float32) + 0.5
    want = 4096 * (a.cpu().numpy().astype(np.float64) @ b.cpu().numpy().astype(np.float64)) * sc
    for _ in range(2):  # (the second call: torch's cached launch)
        got = coopjit.gemm(a, b, alpha=4096, scale=sc)
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=2e-6)
    with pytest.raises(ValueError, match="scale is a device array"):
        coopjit.gemm(a, b, alpha=4096, scale=torch.from_numpy(sc).cuda())
    kern = coopjit.compile_gemm(8, 16, 64, np.int8, scale=True, device="cuda:0")
    np.testing.assert_allclose(kern(a, b, alpha=4096, scale=sc).cpu().numpy(), want, rtol=2e-6)
