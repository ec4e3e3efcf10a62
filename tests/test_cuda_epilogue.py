"""Fused epilogues on CUDA device arrays through the stream-ordered launch (issue 16): a fused plan's
prepared launch (GpuGemmLaunch) takes its epilogue's operand addresses at each launch, so matmul /
gemm of torch CUDA tensors with device bias / scale / row_scale / residual are queued on torch's
stream without waiting, and a repeated call takes coopjit._cuda_fast's cache with its own operands.
Results against NumPy in float64. The launches of named targets are checked everywhere (their
parameters, the addresses a launch takes); the execution tests need an NVIDIA GPU (cuda:0) and skip
without one."""
import math
import re

import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import _core, _cuda_fast
from coopjit._epilogue import Epilogue
from coopjit._kernel_args import _gpu_overrides
from conftest import spill_stores

HAVE_CUDA = "cuda:0" in coopjit.devices()
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="no NVIDIA GPU (cuda:0) on this machine")

_erf = np.vectorize(math.erf)
ACTIVATIONS = {
    None: lambda y: y,
    "relu": lambda y: np.maximum(y, 0.0),
    "gelu": lambda y: 0.5 * y * (1.0 + _erf(y / math.sqrt(2.0))),
    "gelu_tanh": lambda y: 0.5 * y * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y ** 3))),
    "silu": lambda y: y / (1.0 + np.exp(-y)),
    "sigmoid": lambda y: 1.0 / (1.0 + np.exp(-y)),
    "tanh": np.tanh,
}


def _steps(a_dtype, m, n, **kw):
    """The steps dict the core takes (Epilogue.steps) for operands given at each launch."""
    return Epilogue("test", np.dtype(a_dtype), np.dtype(a_dtype), m, n, bind_arrays=False, **kw).steps()


@pytest.mark.parametrize("target", ["sm_90", "sm_80"])
def test_fused_plans_prepare_one_launch(target):
    """Each fused plan (bias on either axis, an activation, a residual, int8 scales, a Stream-K plan
    of the warp-specialized kernel with its flags: the most parameters) prepares a launch whose
    parameters are its kernel's (prepare_gpu_gemm_launch raises otherwise); the launch takes the four
    addresses of the steps it has, a launch without an epilogue none (ValueErrors naming them)."""
    bf, i8 = "bf16", "i8"
    cases = [
        ((bf, bf, "bf16"), (512, 384, 256), dict(bias=True, activation="gelu"), {}),
        ((bf, bf, "f32"), (512, 384, 256), dict(bias=True, bias_axis=0, residual=True), {}),
        (("f16", "f16", "f16"), (200, 136, 72), dict(bias=True, activation="relu"), {}),
        ((i8, i8, "bf16"), (512, 512, 256), dict(scale=True, row_scale=True, bias=True), {}),
        ((bf, bf, "bf16"), (1024, 1024, 4096), dict(scale=True, row_scale=True, bias=True, residual=True,
                                                    activation="silu"),
         _gpu_overrides({"split": "sk", "sk_flags": "yes"} if target == "sm_90" else {"split": "sk"})),
    ]
    for types, (m, n, k), kw, overrides in cases:
        a_dtype = np.int8 if types[0] == i8 else (np.float16 if types[0] == "f16" else ml_dtypes.bfloat16)
        steps = _steps(a_dtype, m, n, **kw)
        strides = [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0]
        core = _core.gpu_gemm_kernel(f"target:{target}", list(types), [m, n, k, 1, 1], strides, False, overrides, steps)
        try:
            launch = core.launcher(list(types), [m, n, k, 1, 1], strides, True)
        except ValueError as e:  # no tensor maps without a CUDA driver: the plan without TMA, whose Stream-K has no flags
            assert "sk_flags" in str(e) and "sk_flags" in overrides, e
            overrides = {"split": overrides["split"]}
            core = _core.gpu_gemm_kernel(f"target:{target}", list(types), [m, n, k, 1, 1], strides, False, overrides,
                                         steps)
            launch = core.launcher(list(types), [m, n, k, 1, 1], strides, True)
        if launch is None:  # Stream-K outside the warp-specialized kernel (sm_80, or no TMA here): the synchronous path
            assert core.config["split"] != "dp", core.plan_key
            continue
        assert launch.fused, core.plan_key
        if kw.get("activation"):
            assert kw["activation"] in launch.plan_key
        with pytest.raises(ValueError, match="four operand addresses"):
            launch.launch(1 << 20, 1 << 21, 1 << 22, 1.0, 0.0, 0)
        absent = [i for i, s in enumerate(("scale", "row_scale", "bias", "residual")) if not kw.get(s)]
        given = [0 if i in absent else 1 << 23 for i in range(4)]
        missing = list(given)
        missing[2] = 0  # every case has a bias
        with pytest.raises(ValueError, match="reads bias, but its address is 0"):
            launch.launch(1 << 20, 1 << 21, 1 << 22, 1.0, 0.0, 0, missing)
        if absent:
            extra = list(given)
            extra[absent[0]] = 1 << 24
            with pytest.raises(ValueError, match="has no"):
                launch.launch(1 << 20, 1 << 21, 1 << 22, 1.0, 0.0, 0, extra)
    plain = _core.gpu_gemm_kernel(f"target:{target}", [bf, bf, bf], [256, 256, 256, 1, 1],
                                  [256, 1, 256, 1, 256, 1, 0, 0, 0, 0, 0, 0], False, {}, None)
    launch = plain.launcher([bf, bf, bf], [256, 256, 256, 1, 1], [256, 1, 256, 1, 256, 1, 0, 0, 0, 0, 0, 0], True)
    assert not launch.fused
    with pytest.raises(ValueError, match="no fused epilogue"):
        launch.launch(1 << 20, 1 << 21, 1 << 22, 1.0, 0.0, 0, [0, 0, 1 << 23, 0])


def test_epilogue_math_has_no_ieee_division_on_nvptx(ptxas):
    """GELU (erf), GELU-tanh and tanh epilogues of the Hopper kernel take the approximate reciprocal
    (rcp.approx.ftz.f32, one MUFU.RCP) where an f32 division was: IEEE's div.rn / rcp.rn are a call to
    a slow path under a branch per element, which serialized the epilogue (bf16 4096^3 + bias + GELU:
    0.455 ms against 0.177 for the plain product on an H100, session 20). The PTX assembles."""
    n = 1024
    strides = [n, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0]
    for act in ("gelu", "gelu_tanh", "tanh"):
        steps = _steps(ml_dtypes.bfloat16, n, n, bias=True, activation=act)
        k = _core.gpu_gemm_kernel("target:sm_90", ["bf16", "bf16", "bf16"], [n, n, n, 1, 1], strides, False, {}, steps)
        text = k.ptx
        assert "rcp.approx.ftz.f32" in text and "ex2.approx" in text, act
        assert "div.rn.f32" not in text and "rcp.rn.f32" not in text, act
        assert "registers" in ptxas(text, "sm_90")


def test_hopper_fused_epilogues_stay_on_the_wgmma_fragments(ptxas):
    """The Hopper kernel's fused epilogues (bias + each activation, bf16 and f16, a residual after the
    activation, bias only) compute on the wgmma fragments where they are and store C as plain
    products do (TMA stores from the staging): no shfl.sync (session 20's kernels gathered the
    fragments into the coopmatrix layout for the activation: 1024 shuffles a tile's epilogue in the
    PTX, 2048 SHFL in the SASS, 1.3-3 KB of spill stores a thread), sigmoid / silu without IEEE
    division (rcp.approx), and the PTX assembles. ptxas' registers and spill bytes are printed as
    facts (pytest -s), not asserted."""
    n = 4096
    strides = [n, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0]
    cases = [("bf16", dict(bias=True, activation=act)) for act in ("relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh")]
    cases += [("f16", dict(bias=True, activation="relu")), ("bf16", dict(bias=True)),
              ("bf16", dict(bias=True, activation="gelu", residual=True))]
    for dt, kw in cases:
        steps = _steps(ml_dtypes.bfloat16 if dt == "bf16" else np.float16, n, n, **kw)
        k = _core.gpu_gemm_kernel("target:sm_90", [dt, dt, dt], [n, n, n, 1, 1], strides, False, {}, steps)
        text = k.ptx
        what = f"{dt} {kw}: {k.plan_key}"
        assert "wgmma" in k.plan_key and "tmast" in k.plan_key, what
        assert "shfl.sync" not in text, what
        assert "cp.async.bulk.tensor.2d.global.shared::cta" in text and "stmatrix" in text, what
        assert "div.rn.f32" not in text and "rcp.rn.f32" not in text, what
        if kw.get("activation") in ("silu", "sigmoid"):
            assert "rcp.approx.ftz.f32" in text, what
        report = ptxas(text, "sm_90")
        regs = re.findall(r"Used (\d+) registers", report)
        print(f"{what}: ptxas registers {regs}, spill stores {spill_stores(report)} bytes")
        assert regs, report


def test_gelu_erf_is_one_minus_erfc_on_nvptx(ptxas):
    """GELU adds erf to 1, so its erf is marked erf_absolute and NVPTX computes 1 - erfc |x| with x's
    sign alone (absolute error ~1.2e-7), without the series below |x| = 0.5 that keeps a bare erf's
    relative error near 0 (x^2, 7 FMAs, 2 multiplies, a compare and a select an element): PTX of the
    bf16 4096^3 bias + GELU kernel 13443 -> 9859 instructions, 22 -> 15 fma.f32 an element (session 29:
    on the H200 239.7 -> 209.0 us). Counted per ex2.approx (one an element)."""
    n = 1024
    strides = [n, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0]
    steps = _steps(ml_dtypes.bfloat16, n, n, bias=True, activation="gelu")
    text = _core.gpu_gemm_kernel("target:sm_90", ["bf16", "bf16", "bf16"], [n, n, n, 1, 1], strides, False, {}, steps).ptx
    ex2 = len(re.findall(r"\bex2\.approx", text))
    fma = len(re.findall(r"\bfma\.rn(?:\.ftz)?\.f32", text))
    assert ex2 > 0 and fma <= 16 * ex2, (fma, ex2)
    assert "registers" in ptxas(text, "sm_90")


@needs_cuda
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_fused_device_gelu_each_element_near_zero_and_in_the_tails(dtype):
    """bias + GELU (the erf_absolute form) against float64 element by element, C spread over about
    [-8, 8] (near 0, where erf's series was, and the negative tail, where 1 + erf is erfc): within the
    output type's rounding of each element plus 1e-3. Seed 16."""
    import torch

    dt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(16)
    m, n, k = 520, 264, 2056
    a = (torch.randn(m, k, device="cuda", generator=g) * 3 * k ** -0.25).to(dt)
    b = (torch.randn(k, n, device="cuda", generator=g) * k ** -0.25).to(dt)
    bias = torch.randn(n, device="cuda", generator=g)
    c = coopjit.matmul(a, b, bias=bias, activation="gelu")
    y = _f64(a) @ _f64(b) + _f64(bias)
    want = ACTIVATIONS["gelu"](y)
    assert np.abs(y).max() > 4 and (np.abs(y) < 0.5).any()
    ulp = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    err = np.abs(_f64(c) - want)
    bad = err > ulp * np.abs(want) + 1e-3
    assert not bad.any(), f"{int(bad.sum())} elements off, worst {float(err.max())}"


# ---- on the GPU ------------------------------------------------------------------------------------------
def _f64(t) -> np.ndarray:
    return t.detach().float().cpu().double().numpy() if t.dtype.is_floating_point else t.cpu().double().numpy()


def _close(got, want, what=""):
    """Within the output type's rounding of the result's scale (bf16 / f16 / f32)."""
    import torch

    tol = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3, torch.float32: 2e-5}[got.dtype]
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(_f64(got) - want).max())
    assert err <= tol * scale, f"{what}: max error {err} > {tol} x {scale}"


@needs_cuda
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_fused_device_products_each_activation(dtype):
    """bf16 / f16 / f32 products of torch CUDA tensors with a device bias (per column and per row) and
    each activation (bf16: all on a Hopper-sized product, the warp-specialized wgmma kernel; the
    others a few), the output in the input type and in float32, an odd shape; each against float64.
    (Each case is a kernel to compile: the set is kept small.)"""
    import torch

    dt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(11)
    acts = list(ACTIVATIONS) if dtype == "bfloat16" else (["gelu", "silu"] if dtype == "float16" else ["tanh", "sigmoid"])
    cases = [((256, 384, 192), act, i % 2, False) for i, act in enumerate(acts)]
    cases += [((256, 384, 192), "gelu_tanh" if dtype == "bfloat16" else acts[0], 1, True), ((70, 90, 50), "relu", 0, False)]
    if dtype == "bfloat16":  # silu's approximate reciprocal (rcp.approx) within float32 C's tolerance
        cases.append(((256, 384, 192), "silu", 0, True))
    for (m, n, k), act, bias_axis, f32_out in cases:
        a = (torch.randn(m, k, device="cuda", generator=g) * k ** -0.5).to(dt)
        b = torch.randn(k, n, device="cuda", generator=g).to(dt)
        bias = torch.randn(n if bias_axis == 1 else m, device="cuda", generator=g)
        bb = _f64(bias)[None, :] if bias_axis == 1 else _f64(bias)[:, None]
        want = ACTIVATIONS[act](_f64(a) @ _f64(b) + bb)
        what = f"{dtype} {m}x{n}x{k} bias_axis={bias_axis} {act}{' -> f32' if f32_out else ''}"
        if f32_out:  # float32 C of a 16-bit product: the epilogue converts
            c = torch.empty(m, n, device="cuda")
            assert coopjit.matmul(a, b, out=c, bias=bias, bias_axis=bias_axis, activation=act) is c
        else:
            c = coopjit.matmul(a, b, bias=bias, bias_axis=bias_axis, activation=act)
            assert isinstance(c, torch.Tensor) and c.dtype == dt and c.shape == (m, n), what
        _close(c, want, what)


@needs_cuda
def test_fused_device_residual_scales_and_gemm():
    """A device residual (after the activation), int8 W8A8 products with per-column scale and per-row
    row_scale to bf16 and float32 (the int32 sums exact), gemm with alpha / beta and a bias, each
    against float64; the repeated calls take the cache (_cuda_fast) and give the same values."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(12)
    m, n, k = 384, 256, 320
    a = (torch.randn(m, k, device="cuda", generator=g) * k ** -0.5).bfloat16()
    b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
    bias = torch.randn(n, device="cuda", generator=g)
    res = torch.randn(m, n, device="cuda", generator=g)
    want = ACTIVATIONS["gelu"](_f64(a) @ _f64(b) + _f64(bias)) + _f64(res)
    for _ in range(2):
        c = coopjit.matmul(a, b, bias=bias, activation="gelu", residual=res)
        _close(c, want, "bf16 bias gelu residual")
    ai = torch.randint(-128, 128, (m, k), device="cuda", generator=g, dtype=torch.int8)
    bi = torch.randint(-128, 128, (n, k), device="cuda", generator=g, dtype=torch.int8).t()  # torch._int_mm's layout
    scale = torch.rand(n, device="cuda", generator=g) * 1e-3
    row_scale = torch.rand(m, device="cuda", generator=g) + 0.5
    exact = _f64(ai) @ _f64(bi)
    want = exact * _f64(scale)[None, :] * _f64(row_scale)[:, None] + _f64(bias)[None, :]
    for out_dtype in (torch.bfloat16, torch.float32):
        for _ in range(2):
            out = torch.empty(m, n, device="cuda", dtype=out_dtype)
            coopjit.matmul(ai, bi, out=out, scale=scale, row_scale=row_scale, bias=bias)
            _close(out, want, f"int8 -> {out_dtype}")
    f = torch.randn(m, k, device="cuda", generator=g)
    w = torch.randn(n, k, device="cuda", generator=g)
    c0 = torch.randn(m, n, device="cuda", generator=g)
    for alpha, beta in ((1.0, 0.0), (0.5, -2.0), (0.5, -2.0)):
        c = c0.clone()
        want = ACTIVATIONS["relu"](alpha * _f64(f) @ _f64(w).T + beta * _f64(c0) + _f64(bias))
        assert coopjit.gemm(f, w, c, alpha=alpha, beta=beta, trans_b=True, bias=bias, activation="relu") is c
        _close(c, want, f"gemm alpha={alpha} beta={beta}")
    assert any(key[0] in ("mmf", "gemmf") for key in _cuda_fast._CACHE)


@needs_cuda
def test_fused_products_are_queued_on_the_current_stream():
    """On a side stream: the operands and the bias come from a long product still running when the
    fused product is queued; the result, read right after on that stream, holds the values of the
    finished operands (a launch on another stream, or one that did not wait, would read them before)."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(13)
    x = torch.randn(4096, 4096, device="cuda", generator=g)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for _ in range(3):
            y = x @ x  # long enough to be running when the products below are queued
            a, b = (y[:256, :128] * 1e-3).bfloat16(), (y[256:384, :192] * 1e-3).bfloat16()
            bias = y[400, :192] * 1e-3
            res = y[:256, 1000:1192] * 1e-3
            c = coopjit.matmul(a, b, bias=bias, activation="tanh", residual=res.contiguous())
            got = c.cpu()  # ordered on the side stream
            want = np.tanh(_f64(a) @ _f64(b) + _f64(bias)) + _f64(res)
            assert np.abs(got.double().numpy() - want).max() <= 1.6e-2 * max(1.0, np.abs(want).max())
    side.synchronize()


@needs_cuda
def test_the_cache_never_mixes_epilogue_operands():
    """Two biases (and two residuals) alternately on one product: each call adds its own (a cache hit
    must take this call's addresses); steps changing between calls of the same shapes take their
    own launches; a host bias among device operands keeps the staged path and is right too."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(14)
    m, n, k = 256, 256, 128
    a = (torch.randn(m, k, device="cuda", generator=g) * k ** -0.5).bfloat16()
    b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    biases = [torch.randn(n, device="cuda", generator=g) * 4 for _ in range(2)]
    residuals = [torch.randn(m, n, device="cuda", generator=g) for _ in range(2)]
    prod = _f64(a) @ _f64(b)
    for i in range(6):
        bias, res = biases[i % 2], residuals[(i // 2) % 2]
        coopjit.matmul(a, b, out=out, bias=bias)
        _close(out, prod + _f64(bias), f"call {i}: bias {i % 2}")
        coopjit.matmul(a, b, out=out, bias=bias, activation="relu", residual=res)
        _close(out, np.maximum(prod + _f64(bias), 0) + _f64(res), f"call {i}: relu, residual {(i // 2) % 2}")
        coopjit.matmul(a, b, out=out, bias=bias, bias_axis=0)
        _close(out, prod + _f64(bias)[:, None], f"call {i}: bias per row")
    host = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    coopjit.matmul(a, b, out=out, bias=host, activation="sigmoid")
    _close(out, ACTIVATIONS["sigmoid"](prod + host), "a host bias")


@needs_cuda
def test_bad_device_epilogue_operands_are_named():
    """Wrong length, dtype, strides or device of a device bias / scale / residual, and a device bias of
    a product on the CPU: ValueErrors (TypeError for the CPU) naming what was given, before anything
    is launched; the same calls with good operands work afterwards (nothing cached the bad ones)."""
    import torch

    from coopjit._cuda_arrays import CudaView

    a = torch.randn(64, 32, device="cuda").bfloat16()
    b = torch.randn(32, 48, device="cuda").bfloat16()
    for _ in range(2):  # the second time the good call's launch is cached
        with pytest.raises(ValueError, match=r"bias on the device must be a contiguous float32 vector of 48 values, got "
                                             r"float32 \(64,\)"):
            coopjit.matmul(a, b, bias=torch.zeros(64, device="cuda"))
        with pytest.raises(ValueError, match=r"bias_axis=0|vector of 64 values, got float32 \(48,\)"):
            coopjit.matmul(a, b, bias=torch.zeros(48, device="cuda"), bias_axis=0)
        with pytest.raises(ValueError, match=r"got bfloat16 \(48,\)"):
            coopjit.matmul(a, b, bias=torch.zeros(48, device="cuda").bfloat16())
        with pytest.raises(ValueError, match=r"byte strides \(8,\)"):
            coopjit.matmul(a, b, bias=torch.zeros(96, device="cuda")[::2])
        with pytest.raises(ValueError, match=r"scale on the device must be a contiguous float32 vector of 48"):
            coopjit.matmul(a, b, scale=torch.ones(47, device="cuda"))
        with pytest.raises(ValueError, match=r"residual on the device must be a C-contiguous float32 array of shape "
                                             r"\(64, 48\), got float32 \(48, 64\)"):
            coopjit.matmul(a, b, residual=torch.zeros(48, 64, device="cuda"))
        with pytest.raises(ValueError, match=r"residual on the device .* got float32 \(64, 48\)"):
            coopjit.matmul(a, b, residual=torch.zeros(48, 64, device="cuda").t())
        t = torch.zeros(48, device="cuda")
        elsewhere = CudaView(t.data_ptr(), (48,), (4,), np.float32, "cuda:1", t, "torch")
        with pytest.raises(ValueError, match=r"bias \(torch float32 \(48,\)\) is on cuda:1, the product's operands on "
                                             r"cuda:0"):
            coopjit.matmul(a, b, bias=elsewhere)
        with pytest.raises(TypeError, match="bias is a CUDA device array"):
            coopjit.matmul(a.cpu().float().numpy(), b.cpu().float().numpy(), bias=t)
        c = coopjit.matmul(a, b, bias=t + 1.0)
        _close(c, _f64(a) @ _f64(b) + 1.0, "after the errors")


@needs_cuda
def test_epilogue_operands_at_any_element_offset():
    """Device vectors and a residual that start one element past an allocation's alignment (views of
    a larger tensor): read where they are, right (in a child process, so that a misaligned access
    would fail this test alone)."""
    import subprocess
    import sys

    code = """if True:
        import numpy as np, torch, coopjit
        g = torch.Generator(device="cuda").manual_seed(15)
        m, n, k = 256, 384, 128
        a = (torch.randn(m, k, device="cuda", generator=g) * k ** -0.5).bfloat16()
        b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
        whole = torch.randn(m * n + 8, device="cuda", generator=g)
        for off in (1, 2, 3):
            bias, scale, rs = whole[off:off + n], whole[off + 7:off + 7 + n] + 2, whole[off + 5:off + 5 + m] + 2
            res = whole[off:off + m * n].view(m, n)
            c = coopjit.matmul(a, b, bias=bias, scale=scale, row_scale=rs, residual=res, activation="relu")
            d = lambda t: t.double().cpu().numpy()
            want = np.maximum(d(a) @ d(b) * d(scale) * d(rs)[:, None] + d(bias), 0) + d(res)
            err = np.abs(d(c) - want).max() / max(1.0, np.abs(want).max())
            assert err < 1.6e-2, (off, err)
        print("ok")
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


@needs_cuda
def test_compiled_fused_kernels_take_device_operands_per_call():
    """compile_gemm with bias=True / residual=True: each call's device bias and residual (two of each,
    alternately) are read in place by the queued launch; a kernel with its bias bound at compile time
    reads that one; a host bias at a call keeps the staged path; wrong operands are named."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(16)
    m, n, k = 128, 192, 256
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", bias=True, residual=True,
                                activation="silu", out_dtype=np.float32)
    a = (torch.randn(m, k, device="cuda", generator=g) * k ** -0.5).bfloat16()
    b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
    prod = _f64(a) @ _f64(b)
    biases = [torch.randn(n, device="cuda", generator=g) for _ in range(2)]
    residuals = [torch.randn(m, n, device="cuda", generator=g) for _ in range(2)]
    c = torch.empty(m, n, device="cuda")
    for i in range(4):
        assert kern(a, b, c, bias=biases[i % 2], residual=residuals[(i // 2) % 2]) is c
        _close(c, ACTIVATIONS["silu"](prod + _f64(biases[i % 2])) + _f64(residuals[(i // 2) % 2]), f"call {i}")
    host = np.linspace(-1, 1, n).astype(np.float32)
    kern(a, b, c, bias=host, residual=residuals[0])
    _close(c, ACTIVATIONS["silu"](prod + host) + _f64(residuals[0]), "a host bias")
    with pytest.raises(ValueError, match=r"bias on the device must be a contiguous float32 vector of 192 values"):
        kern(a, b, c, bias=torch.zeros(191, device="cuda"), residual=residuals[0])
    with pytest.raises(ValueError, match="compiled with residual=True: pass residual="):
        kern(a, b, c, bias=biases[0])
    bound = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", bias=biases[1], activation="relu")
    got = bound(a, b)
    assert isinstance(got, torch.Tensor)
    _close(got, np.maximum(prod + _f64(biases[1]), 0), "a bound bias")
