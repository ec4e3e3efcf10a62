"""coopjit on an NVIDIA GPU ("cuda:0": the SIMT lowering's NVPTX target, PTX JIT-compiled by the
CUDA driver) against NumPy in float64 / exact integers: GEMM (dtypes, transposes, alpha / beta,
strided views, batches, Stream-K splits), reductions, KernelBuilder kernels, device properties,
the driver's JIT log, and device pointers (PyTorch / CuPy tensors) passed to a compiled kernel.
Every test skips, saying why, where there is no CUDA driver or GPU."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import _core
from conftest import assert_gemm_close, needs_cuda, needs_hopper, spill_stores
from test_reduce import NP, check, data

DEV = "cuda:0"


@pytest.fixture(autouse=True)
def cuda_here():
    needs_cuda(DEV)


def test_device_info():
    info = coopjit.device_info(DEV)
    assert info["backend"] == "cuda" and info["type"] == "gpu" and info["memory"] == "device"
    assert info["compute_units"] > 0 and info["global_memory_bytes"] > 1 << 30
    major, minor = (int(x) for x in info["compute_capability"].split("."))
    assert major >= 8 and info["arch"] == f"sm_{major}{minor}"
    assert info["subgroup_sizes"] == [32] and info["local_memory_bytes"] >= 48 * 1024
    assert info["memory_bandwidth_gbs"] > 100


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 5, 3), (64, 64, 64), (129, 67, 200), (300, 257, 130)])
def test_matmul(rng, dtype, shape):
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = coopjit.matmul(a, b, device=DEV)
    assert c.dtype == dtype and c.flags.c_contiguous
    assert_gemm_close(c, a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(16, 4096, 1024), (8, 512, 64), (4096, 16, 1024), (13, 700, 300)])
def test_matmul_with_few_rows_or_columns(rng, dtype, shape):
    """N or M of 16 or less on the FMA pipeline (f32's 16-column tiles: once refused by the planner)."""
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = coopjit.matmul(a, b, device=DEV)
    assert c.dtype == dtype and c.shape == (m, n)
    assert_gemm_close(c, a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_transposes_alpha_beta(rng, dtype, trans_a, trans_b):
    m, n, k = 97, 45, 70
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    c = c0.copy()
    out = coopjit.gemm(a, b, c, alpha=-1.5, beta=0.5, trans_a=trans_a, trans_b=trans_b, device=DEV)
    assert out is c
    assert_gemm_close(c, a.T if trans_a else a, b.T if trans_b else b, c0, -1.5, 0.5)


def test_gemm_strided_views(rng):
    big_a = rng.standard_normal((200, 150))
    big_b = rng.standard_normal((90, 300))
    a, b = big_a[::2, 10:70], big_b[20:80, ::-3]  # a view with a row step; negative column strides
    big_c = np.full((120, 250), 7.0)
    c = big_c[::1, ::2][:100, :100]
    coopjit.gemm(a, b, c, device=DEV)
    assert_gemm_close(c, a, b)
    untouched = big_c.copy()
    untouched[:100, 0:200:2] = 7.0
    assert (big_c[:, 1::2] == 7.0).all() and (big_c[100:] == 7.0).all()  # only c's elements written


def test_batched_broadcast(rng):
    a = rng.standard_normal((3, 1, 33, 20)).astype(np.float32)
    b = rng.standard_normal((4, 20, 17)).astype(np.float32)
    c = coopjit.matmul(a, b, device=DEV)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert c.shape == ref.shape
    for i in np.ndindex(c.shape[:2]):
        assert_gemm_close(c[i], a[i[0], 0], b[i[1]])


@pytest.mark.parametrize("split", ["sk", "sk+dp", "dp"])
def test_compile_gemm_splits(rng, split):
    m, n, k = 300, 200, 1000
    kern = coopjit.compile_gemm(m, n, k, np.float32, device=DEV, plan={"split": split, "workers": 7})
    assert kern.config["split"] == split and kern.config["subgroup_size"] == 32
    ptx = kern.source("ptx")
    assert ".entry" in ptx and "shfl.sync" in ptx
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    assert_gemm_close(kern(a, b), a, b)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_low_precision_gemm(rng, dtype):
    a = rng.standard_normal((70, 48)).astype(dtype)
    b = rng.standard_normal((48, 33)).astype(dtype)
    c = coopjit.matmul(a, b, out=np.empty((70, 33), np.float32), device=DEV)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("mma", ["yes", "no"])
@pytest.mark.parametrize("trans_b", [False, True])
def test_tensor_core_gemm(rng, dtype, mma, trans_b):
    """mma.sync m16n8k16 (the default for bf16 / f16) and the FMA path, against float64."""
    m, n, k = 200, 130, 96
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=np.float32, trans_b=trans_b, plan={"mma": mma})
    assert kern.config["mma"] == mma
    insn = "wgmma.mma_async" if kern.config["wgmma"] != "no" else "mma.sync.aligned.m16n8k16.row.col.f32"  # sm_90: wgmma
    assert (insn in kern.source("ptx")) == (mma == "yes")
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    c = kern(a, b)
    bb = (b.T if trans_b else b).astype(np.float64)
    ref = a.astype(np.float64) @ bb
    bound = (k + 2) * 2.0**-23 * (np.abs(a.astype(np.float64)) @ np.abs(bb)) + 1e-30  # products exact in f32; sums rounded (or truncated) in f32
    assert c.dtype == np.float32 and (np.abs(c - ref) <= bound).all(), np.abs(c - ref).max()


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_int8_gemm_exact(rng, dtype):
    lo = -128 if dtype == np.int8 else 0
    a = rng.integers(lo, 128, (65, 100)).astype(dtype)
    b = rng.integers(lo, 128, (100, 40)).astype(dtype)
    c = coopjit.matmul(a, b, device=DEV)
    assert c.dtype == np.int32
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
def test_reduce_axes(rng, dtype, op):
    x = data(rng, (7, 45, 190), dtype, op)
    for axis in (None, 0, 1, 2, (0, 1), (1, 2)):
        check(coopjit.reduce(x, axis=axis, op=op, device=DEV), x, axis, op)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.float16, ml_dtypes.bfloat16])
def test_reduce_other_types(rng, dtype):
    for op in ("sum", "max"):
        x = data(rng, (9, 700), dtype, op)
        for axis in (None, 0, 1):
            check(coopjit.reduce(x, axis=axis, op=op, device=DEV), x, axis, op)


def test_reduce_long_and_2x2(rng):
    x = rng.standard_normal(1_000_003)
    got = coopjit.reduce(x, device=DEV)
    assert abs(got - np.sum(x)) <= 1e-12 * np.sum(np.abs(x))
    y = rng.standard_normal((64, 96)).astype(np.float32)
    r = coopjit.reduce2x2(y, op="max", device=DEV)
    np.testing.assert_array_equal(r, y.reshape(32, 2, 48, 2).max(axis=(1, 3)))


def test_kernelbuilder_softmax(rng):
    from coopjit.ir import KernelBuilder

    b = KernelBuilder("softmax", subgroup_size=32)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    t = "coopmatrix<f32, 32, 24, acc, subgroup>"
    x = b.load(t, X, strides=(24, 1))
    e = b.per_element(x, lambda b, r, c, v, m: b.exp(b.sub(v, m)), extras=[b.reduce(x, "row", t, "max")])
    b.store(b.per_element(e, lambda b, r, c, v, s: b.div(v, s), extras=[b.reduce(e, "row", t, "add")]), Y,
            strides=(24, 1))
    k = b.compile(device=DEV)
    assert "ex2.approx" in k.source("ptx")
    xs = (3 * rng.standard_normal((32, 24))).astype(np.float32)
    y = np.zeros_like(xs)
    k(xs, y)
    x64 = xs.astype(np.float64)
    ref = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y, ref, rtol=2e-6, atol=1e-7)


def test_kernelbuilder_log_tanh_sqrt(rng):
    from coopjit.ir import KernelBuilder

    b = KernelBuilder("fns", subgroup_size=32)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    t = "coopmatrix<f32, 32, 8, acc, subgroup>"
    x = b.load(t, X, strides=(8, 1))
    y = b.per_element(x, lambda b, r, c, v: b.add(b.add(b.log(v), b.tanh(b.sub(v, 2.0))),
                                                  b.sqrt(v)))
    b.store(y, Y, strides=(8, 1))
    k = b.compile(device=DEV)
    xs = rng.uniform(0.01, 4.0, (32, 8)).astype(np.float32)
    out = np.zeros_like(xs)
    k(xs, out)
    x64 = xs.astype(np.float64)
    np.testing.assert_allclose(out, np.log(x64) + np.tanh(x64 - 2) + np.sqrt(x64), rtol=3e-6, atol=3e-6)


def test_ptx_jit_error_log():
    bad = ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k() { not_an_instruction; ret; }\n"
    with pytest.raises(_core.DeviceError, match="(?s)the driver's PTX JIT.*not_an_instruction"):
        _core.load_ptx(DEV, bad)


def test_ptx_disk_cache_across_processes(tmp_path):
    """A second process takes the PTX from coopjit's disk cache (no LLVM compile) and has the
    driver compile it (the driver's own JIT cache may serve that), with the same product."""
    import json
    import os
    import subprocess
    import sys

    code = ("import numpy as np, coopjit, json; from coopjit import _core; "
            "rng = np.random.default_rng(5); a = rng.standard_normal((70, 50)); b = rng.standard_normal((50, 30)); "
            "c = coopjit.matmul(a, b, device='cuda:0'); "
            "err = float(np.abs(c - a @ b).max()); "
            "print(json.dumps([_core.cuda_image_cache_stats(), _core.ptx_cache_stats(), err]))")
    env = dict(os.environ, COOPJIT_CACHE_DIR=str(tmp_path))
    env.pop("COOPJIT_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    (img1, ptx1, err1), (img2, ptx2, err2) = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert ptx1["compiles"] >= 1 and ptx2["compiles"] == 0, (ptx1, ptx2)
    assert img1["compiles"] >= 1 and img2["compiles"] == img1["compiles"], (img1, img2)
    assert err1 < 1e-9 and err2 < 1e-9, (err1, err2)


def test_the_driver_compiles_whole_programs():
    """The driver's JIT compiles each module as a whole program: the warp-specialized wgmma
    kernel keeps its setmaxnreg and its wgmmas in flight and spills (almost) nothing. Compiled as
    a relocatable object (cuLink*), the same PTX spilled 328 bytes a work-item and ran its wgmmas
    one at a time (H100, driver 580)."""
    import ml_dtypes

    from coopjit import ptx as ptx_mod
    if coopjit.device_info(DEV).get("compute_capability", "") != "9.0":
        pytest.skip(f"{DEV} is not an sm_90 GPU (Hopper): no wgmma")
    text = ptx_mod.compile_gemm(4096, 4096, 4096, ml_dtypes.bfloat16, target="sm_90").source("ptx")
    assert "setmaxnreg" in text and "wgmma.mma_async" in text
    log = _core.load_ptx(DEV, text).build_log
    assert "Potential Performance Loss" not in log, log
    spills = spill_stores(log)
    assert spills and max(spills) <= 64, log


def test_device_pointers_without_copies(rng):
    """A compiled kernel run on PyTorch CUDA tensors' memory (the primary context is shared)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    m, n, k = 256, 192, 128
    kern = coopjit.compile_gemm(m, n, k, np.float32, device=DEV)
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(k, n, device="cuda")
    c = torch.zeros(m, n, device="cuda")
    torch.cuda.synchronize()
    kern._core.run(["f32", "f32", "f32"], [m, n, k, 1, 1], [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0],
                   a.data_ptr(), b.data_ptr(), c.data_ptr(), 1.0, 0.0)
    assert_gemm_close(c.cpu().numpy(), a.cpu().numpy(), b.cpu().numpy())


# ---- the tensor-core pipeline (cp.async -> swizzled shared memory -> ldmatrix -> mma.sync) ----------

def _tc_check(c, a, b, c0=None, alpha=1.0, beta=0.0):
    """c (f32) against float64: products of 16-bit floats are exact in f32, the sums rounded in f32."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = alpha * (a64 @ b64) + (beta * c0.astype(np.float64) if c0 is not None else 0.0)
    mag = abs(alpha) * (np.abs(a64) @ np.abs(b64)) + (abs(beta) * np.abs(c0.astype(np.float64)) if c0 is not None else 0.0)
    bound = (a.shape[-1] + 4) * 2.0**-23 * mag + 1e-30
    err = np.abs(c.astype(np.float64) - ref)
    assert c.dtype == np.float32 and np.isfinite(c).all() and (err <= bound).all(), (err - bound).max()


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shape", [(128, 128, 32), (256, 384, 512), (200, 136, 72), (72, 520, 40), (8, 16, 24),
                                   (1000, 264, 1000), (64, 8, 8)])
@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
def test_pipeline_gemm(rng, dtype, shape, trans):
    """Every operand orientation (ldmatrix with and without .trans), edge tiles (zero-filled
    chunks past M, N, K), one to many K steps."""
    m, n, k = shape
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=np.float32, trans_a=trans[0], trans_b=trans[1])
    assert int(kern.config["stages"]) >= 3 and kern.config["mma"] == "yes"
    text = kern.source("ptx")
    if kern.config["wgmma"] == "no":
        assert "ldmatrix.sync.aligned.m8n8.x4" in text and "cp.async.cg.shared.global" in text
    else:  # Hopper: the warpgroup pipeline (test_wgmma_gemm), its panels by TMA by default
        copy = "cp.async.bulk.tensor.2d" if kern.config["tma"].startswith("yes") else "cp.async.cg.shared.global"
        assert "wgmma.mma_async" in text and copy in text
    a = rng.standard_normal((k, m) if trans[0] else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans[1] else (k, n)).astype(dtype)
    _tc_check(kern(a, b), a.T if trans[0] else a, b.T if trans[1] else b)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_pipeline_alpha_beta_batched(rng, dtype):
    m, n, k = 136, 200, 264
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-1.5, beta=0.5, device=DEV)
    _tc_check(c, a, b, c0, -1.5, 0.5)
    a3 = rng.standard_normal((3, 1, 72, 48)).astype(dtype)
    b3 = rng.standard_normal((2, 48, 40)).astype(dtype)
    out = np.full((3, 2, 72, 40), np.nan, np.float32)
    coopjit.matmul(a3, b3, out=out, device=DEV)
    for i in np.ndindex(3, 2):
        _tc_check(out[i], a3[i[0], 0], b3[i[1]])


@pytest.mark.parametrize("split", ["sk", "sk+dp", "dp"])
@pytest.mark.parametrize("trans_b", [False, True])
def test_pipeline_stream_k(rng, split, trans_b):
    """Stream-K over the pipeline: K ranges of a tile split between workers, partials through the
    workspace, the fix-up in worker order."""
    m, n, k = 520, 264, 2056
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, trans_b=trans_b,
                                plan={"split": split, "workers": 7})
    assert kern.config["split"] == split and int(kern.config["stages"]) >= 3
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(ml_dtypes.bfloat16)
    _tc_check(kern(a, b), a, b.T if trans_b else b)


def test_pipeline_plan_choices(rng):
    """Strides the 16-byte chunks cannot take plan without the pipeline (and still compute right);
    stages=0 turns it off; an override it cannot honour says why."""
    a = rng.standard_normal((64, 61)).astype(ml_dtypes.bfloat16)  # K = 61: rows not whole chunks
    b = rng.standard_normal((61, 48)).astype(ml_dtypes.bfloat16)
    kern = coopjit.compile_gemm(64, 48, 61, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32)
    assert kern.config["stages"] == 0 and kern.config["mma"] == "yes"
    _tc_check(kern(a, b), a, b)
    off = coopjit.compile_gemm(128, 128, 64, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, plan={"stages": 0})
    assert off.config["stages"] == 0
    a = rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    _tc_check(off(a, b), a, b)
    with pytest.raises(ValueError, match="stages"):
        coopjit.compile_gemm(64, 48, 61, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, plan={"stages": 3})


def test_pipeline_misaligned_pointers(rng):
    """Device pointers that are not 16-byte aligned run the plan without the pipeline."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    m, n, k = 128, 136, 96
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32)
    assert int(kern.config["stages"]) >= 3
    a = torch.randn(m * k + 1, device="cuda").to(torch.bfloat16)[1:].view(m, k)  # 2 bytes past an aligned start
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda")
    torch.cuda.synchronize()
    kern._core.run(["bf16", "bf16", "f32"], [m, n, k, 1, 1], [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0],
                   a.data_ptr(), b.data_ptr(), c.data_ptr(), 1.0, 0.0)
    torch.cuda.synchronize()
    _tc_check(c.cpu().numpy(), a.float().cpu().numpy().astype(ml_dtypes.bfloat16), b.float().cpu().numpy().astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("shape", [(256, 384, 512), (200, 136, 80), (16, 48, 16)])
def test_pipeline_int8_exact(rng, dtype, shape):
    """mma.sync m16n8k32 (s8 / u8 -> s32) on the pipeline: both operands contiguous along K (B
    given as N x K); exact against int64."""
    m, n, k = shape
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, trans_b=True, plan={"wgmma": "no"})  # sm_90: wgmma by default
    assert int(kern.config["stages"]) >= 3 and "m16n8k32" in kern.config.notes["mma"]
    assert "mma.sync.aligned.m16n8k32.row.col" in kern.source("ptx")
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, (m, k), dtype=dtype)
    b = rng.integers(info.min, info.max + 1, (n, k), dtype=dtype)
    c = kern(a, b)
    assert c.dtype == np.int32 and (c.astype(np.int64) == a.astype(np.int64) @ b.T.astype(np.int64)).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(256, 384, 512), (200, 136, 72), (64, 8, 8), (1000, 264, 1000)])
@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
def test_pipeline_fma_gemm(rng, dtype, shape, trans):
    """f32 / f64 on CUDA cores through the same staging (cp.async: 16-byte chunks, or 4-byte copies
    transposing a K-contiguous f32 operand into [k][m] / [k][n] rows), FMAs from 16-byte
    shared-memory vectors; alpha / beta applied once."""
    m, n, k = shape
    a = rng.standard_normal((k, m) if trans[0] else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans[1] else (k, n)).astype(dtype)
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, trans_a=trans[0], trans_b=trans[1])
    assert int(kern.config["stages"]) >= 2 and kern.config["mma"] == "no"
    ptx = kern.source("ptx")
    assert "cp.async.cg.shared.global" in ptx or "ld.global.v4" in ptx  # (a K-contiguous f32 operand: through registers)
    assert_gemm_close(kern(a, b), a.T if trans[0] else a, b.T if trans[1] else b)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-1.5, beta=0.5, trans_a=trans[0], trans_b=trans[1], device=DEV)
    assert_gemm_close(c, a.T if trans[0] else a, b.T if trans[1] else b, c0, -1.5, 0.5)


def _hopper():
    needs_hopper(DEV, "no wgmma")


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shape", [(200, 136, 72), (64, 64, 64), (136, 104, 1000), (1000, 264, 136)])
@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
def test_wgmma_gemm(rng, dtype, shape, trans):
    """Hopper's warpgroup pipeline (simt_wgmma.cpp): every operand orientation (K-major and
    M- / N-major shared-memory layouts), blocks of 1 and 2 warpgroups and N tiles of 64 / 128 / 256,
    edge tiles (zero-filled chunks past M, N, K), one to many K steps; against NumPy in float64."""
    _hopper()
    m, n, k = shape
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=np.float32, trans_a=trans[0], trans_b=trans[1],
                                plan={"wgmma": "yes"})
    assert kern.config["wgmma"].startswith("yes") and kern.config["kb"] == 64
    assert "wgmma.mma_async.sync.aligned.m64n" in kern.source("ptx")
    a = rng.standard_normal((k, m) if trans[0] else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans[1] else (k, n)).astype(dtype)
    _tc_check(kern(a, b), a.T if trans[0] else a, b.T if trans[1] else b)


@pytest.mark.parametrize("shape", [(200, 136, 72), (1000, 264, 136)])
@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
def test_wgmma_gemm_cp_async(rng, shape, trans):
    """The warpgroup pipeline fed by cp.async (tma=no: the host's choice where a tensor map cannot
    describe the operands); the TMA path (the default) against the same operands."""
    _hopper()
    m, n, k = shape
    a = rng.standard_normal((k, m) if trans[0] else (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, k) if trans[1] else (k, n)).astype(ml_dtypes.bfloat16)
    for tma in ("no", "yes"):
        kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, trans_a=trans[0],
                                    trans_b=trans[1], plan={"wgmma": "yes", "tma": tma})
        assert kern.config["tma"].startswith(tma)
        assert ("cp.async.bulk.tensor.2d" in kern.source("ptx")) == (tma == "yes")
        _tc_check(kern(a, b), a.T if trans[0] else a, b.T if trans[1] else b)


def _int8(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("shape", [(208, 144, 80), (64, 64, 128), (528, 64, 1008)])
@pytest.mark.parametrize("trans", [(False, True), (False, False), (True, True), (True, False)])
def test_wgmma_int8_exact(rng, dtype, shape, trans):
    """8-bit wgmma (s8 / u8 -> s32, simt_wgmma.cpp) fed by TMA: K-major operands as they are, the
    others copied K-major first (plan field kmajor); blocks of 1, 2 and 4 warpgroups, edge tiles,
    K tails (80, 1008: not multiples of 128); exact against int64."""
    _hopper()
    m, n, k = shape
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, trans_a=trans[0], trans_b=trans[1])
    assert "k32" in kern.config["wgmma"] and kern.config["tma"].startswith("yes")
    assert kern.config["kmajor"].startswith("yes") == (trans[0] or not trans[1])
    a = _int8(rng, dtype, (k, m) if trans[0] else (m, k))
    b = _int8(rng, dtype, (n, k) if trans[1] else (k, n))
    c = kern(a, b)
    ref = (a.T if trans[0] else a).astype(np.int64) @ (b.T if trans[1] else b).astype(np.int64)
    assert c.dtype == np.int32 and (c.astype(np.int64) == ref).all()


@pytest.mark.parametrize("trans", [(False, True), (False, False)])
@pytest.mark.parametrize("plan", [{"tma": "no"}, {"nr": 128, "sg_n": 1}, {"split": "sk+dp", "workers": 5}])
def test_wgmma_int8_plans_alpha_beta(rng, trans, plan):
    """cp.async instead of TMA, 128 x 128 blocks, Stream-K's partial tiles in int32; C = alpha A B +
    beta C with integer alpha / beta, exact."""
    _hopper()
    m, n, k = 272, 400, 528
    a = _int8(rng, np.int8, (m, k))
    b = _int8(rng, np.int8, (n, k) if trans[1] else (k, n))
    c0 = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-2, beta=3, trans_b=trans[1], device=DEV, plan=dict(plan, wgmma="yes"))
    ref = -2 * (a.astype(np.int64) @ (b.T if trans[1] else b).astype(np.int64)) + 3 * c0.astype(np.int64)
    assert (c.astype(np.int64) == ref).all()


def test_wgmma_int8_views_and_epilogue(rng):
    """Strided views (row strides past the rows, a base 16 bytes on) with the K-major copy, and the
    int8 dequantization epilogue (int32 sums scaled per column and row, float32 out)."""
    _hopper()
    big_a = rng.integers(-128, 128, (300, 544)).astype(np.int8)
    big_b = rng.integers(-128, 128, (416, 352)).astype(np.int8)
    a, b = big_a[8:264, 16:224], big_b[:208, 32:336]  # 256 x 208, 208 x 304 (B contiguous along N: copied)
    kern = coopjit.compile_gemm(256, 304, 208, np.int8, device=DEV)
    assert kern.config["kmajor"].startswith("yes: op(B)")
    ref = a.astype(np.int64) @ b.astype(np.int64)
    c = coopjit.matmul(a, b, device=DEV)
    assert c.dtype == np.int32 and (c.astype(np.int64) == ref).all()
    sc = rng.uniform(0.5, 1.5, 304).astype(np.float32)
    rs = rng.uniform(0.5, 1.5, 256).astype(np.float32)
    got = coopjit.matmul(a, b, scale=sc, row_scale=rs, device=DEV)
    want = ref.astype(np.float64) * sc.astype(np.float64)[None, :] * rs.astype(np.float64)[:, None]
    assert got.dtype == np.float32 and np.allclose(got, want, rtol=1e-6, atol=1e-3)


def test_wgmma_int8_torch_tensors():
    """torch int8 CUDA tensors through the prepared launch (the copy queued on torch's stream
    before the product), both B layouts, against torch on the CPU in int64."""
    _hopper()
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randint(-128, 128, (320, 384), device="cuda", dtype=torch.int8, generator=g)
    for b in (torch.randint(-128, 128, (384, 256), device="cuda", dtype=torch.int8, generator=g),
              torch.randint(-128, 128, (256, 384), device="cuda", dtype=torch.int8, generator=g).t()):
        for _ in range(2):  # the second call: the cached launch
            c = coopjit.matmul(a, b, device=DEV)
            torch.cuda.synchronize()
            assert c.dtype == torch.int32 and torch.equal(c.cpu().long(), a.cpu().long() @ b.cpu().long())


def test_wgmma_tma_strided_views(rng):
    """TMA on views: row strides larger than the rows (tensor-map strides), an offset base (16-byte
    aligned), a column slice of B; K not a multiple of 64 (the copy engine's zero fill)."""
    _hopper()
    big_a = rng.standard_normal((300, 520)).astype(ml_dtypes.bfloat16)
    big_b = rng.standard_normal((400, 336)).astype(ml_dtypes.bfloat16)
    a, b = big_a[8:264, 16:216], big_b[:200, 64:328]  # 256 x 200, 200 x 264
    kern = coopjit.compile_gemm(256, 264, 200, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32)
    assert kern.config["tma"].startswith("yes")
    _tc_check(coopjit.matmul(a, b, device=DEV, out_dtype=np.float32), a, b)


@pytest.mark.parametrize("plan", [{"group_m": 3}, {"group_m": 3, "split": "sk+dp", "workers": 5}, {"group_m": 1, "tma": "no"}])
def test_wgmma_grouped_tile_walk(rng, plan):
    """Tiles walked in bands of group_m M tiles (8 M tiles in bands of 3, 3, 2; 3 N tiles), data
    parallel and Stream-K: every output tile once, against NumPy in float64."""
    _hopper()
    m, n, k = 1000, 600, 264
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, plan=dict(plan, wgmma="yes"))
    assert kern.config["group_m"] == plan["group_m"] and kern.config["macro_tile"] == "128x256"
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    _tc_check(kern(a, b), a, b)


@pytest.mark.parametrize("split", ["sk", "sk+dp"])
def test_wgmma_stream_k_alpha_beta(rng, split):
    """Stream-K over the warpgroup pipeline (K ranges of a tile in several workers), and alpha / beta."""
    _hopper()
    m, n, k = 520, 264, 2056
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32,
                                plan={"split": split, "workers": 7, "wgmma": "yes"})
    assert kern.config["split"] == split and kern.config["wgmma"].startswith("yes")
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    _tc_check(kern(a, b), a, b)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = c0.copy()
    coopjit.gemm(a[:, :136], b[:136], c, alpha=-1.5, beta=0.5, device=DEV, plan={"wgmma": "yes"})
    _tc_check(c, a[:, :136], b[:136], c0, -1.5, 0.5)


@pytest.mark.parametrize("shape,trans", [((1000, 600, 264), (False, False)), ((520, 264, 2056), (True, False)),
                                         ((200, 136, 72), (False, True)), ((136, 1000, 1000), (True, True))])
@pytest.mark.parametrize("plan", [{"ws": 2}, {"ws": 2, "group_m": 3}, {"ws": 1}])
def test_wgmma_ws_gemm(rng, shape, trans, plan):
    plan = dict(plan, split="dp")
    """The warp-specialized kernel (plan ws 2, the default on data-parallel TMA plans, and 1): edge
    tiles, K tails, many K steps (the producer several steps ahead of the consumers), the band
    walk's tile order, every orientation; against float64."""
    _hopper()
    m, n, k = shape
    dtype = ml_dtypes.bfloat16 if trans[0] == trans[1] else np.float16
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=np.float32, trans_a=trans[0], trans_b=trans[1],
                                plan=plan)
    assert kern.config["ws"] == ("yes" if plan["ws"] == 1 else 2) and kern.config["split"] == "dp"
    a = rng.standard_normal((k, m) if trans[0] else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans[1] else (k, n)).astype(dtype)
    _tc_check(kern(a, b), a.T if trans[0] else a, b.T if trans[1] else b)


def test_wgmma_ws_alpha_beta_epilogue_and_torch(rng):
    """ws with alpha / beta, a fused bias + relu epilogue with bf16 output, and torch tensors through
    the prepared launch."""
    _hopper()
    m, n, k = 520, 264, 1000
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-1.5, beta=0.5, device=DEV, plan={"ws": 2, "split": "dp"})
    _tc_check(c, a, b, c0, -1.5, 0.5)
    bias = rng.standard_normal(n).astype(np.float32)
    got = coopjit.matmul(a, b, bias=bias, activation="relu", device=DEV, plan={"ws": 2, "split": "dp"})
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(bias)
    assert got.dtype == ml_dtypes.bfloat16
    assert np.all(np.abs(got.astype(np.float64) - ref) <= 2e-2 * mag + 1e-3)
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_numpy(a.astype(np.float32)).cuda().bfloat16(), torch.from_numpy(b.astype(np.float32)).cuda().bfloat16()
    for _ in range(2):  # the second call through the per-call cache's prepared launch
        tc = coopjit.matmul(ta, tb, plan={"ws": 2, "split": "dp"})
    torch.cuda.synchronize()
    ref = a.astype(np.float64) @ b.astype(np.float64)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    err = np.abs(tc.double().cpu().numpy() - ref)  # bf16 output: one rounding of 2^-8 relative
    assert tc.dtype == torch.bfloat16 and (err <= 2.0**-8 * np.abs(ref) + (k + 4) * 2.0**-23 * mag).all()


def test_wgmma_bias_gelu_bf16_out(rng):
    """The fused epilogue on the warpgroup pipeline's accumulators (their D-fragment layout), bf16 out."""
    _hopper()
    m, n, k = 192, 320, 256
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal(n).astype(np.float32)
    got = coopjit.matmul(a, b, bias=bias, activation="relu", device=DEV, plan={"wgmma": "yes"})
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(bias)
    assert got.dtype == ml_dtypes.bfloat16
    assert (np.abs(got.astype(np.float64) - ref) <= 2.0**-8 * np.abs(ref) + (k + 4) * 2.0**-23 * mag + 1e-6).all()


@pytest.mark.parametrize("plan", [{}, {"ws": "no"}, {"tma": "no"}, {"layout": "row"}, {"nr": 128, "sg_n": 1}])
@pytest.mark.parametrize("out", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_wgmma_epilogue_staging(rng, plan, out):
    """The epilogue through shared memory (plan field epi_smem, simt_wgmma.cpp): whole tiles staged
    and written in 16-byte chunks (C contiguous along the kernel's rows, layout col, or along its
    columns, layout row), edge tiles and C views the chunks cannot take (a base 2 elements on,
    an odd row stride) stored lane by lane; alpha / beta; f32 / bf16 / f16 out. Against float64, and
    equal, bit for bit, to the plan without staging (the same sums, stored another way)."""
    _hopper()
    m, n, k = 1000, 600, 264
    dtype = np.float16 if out == np.float16 else ml_dtypes.bfloat16
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    plan = dict(plan, tma_store="no")  # C by the lanes from the staging (by TMA stores: test_tma_store.py)
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out, plan=dict(plan, split="dp"))
    off = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out, plan=dict(plan, split="dp", epi_smem="no"))
    assert kern.config["epi_smem"] == 3072 and off.config["epi_smem"] == "no"
    assert "bar.warp.sync" in kern.source("ptx") and "bar.warp.sync" not in off.source("ptx")
    assert "shfl" not in kern.source("ptx")  # no gather into the coopmatrix layout
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    unit = {np.float32: 0.0, ml_dtypes.bfloat16: 2.0**-8, np.float16: 2.0**-11}[out]  # the output's rounding
    c = kern(a, b)
    assert c.dtype == out and (np.abs(c.astype(np.float64) - ref) <= unit * np.abs(ref) + (k + 4) * 2.0**-23 * mag + 1e-30).all()
    assert np.array_equal(c.view(np.uint8), off(a, b).view(np.uint8))
    # C views: 16-byte aligned (row stride 640), 2 elements on, and an odd row stride (601).
    for cols, first in ((640, 16), (640, 2), (601, 0)):
        c0 = rng.standard_normal((m + 8, cols)).astype(out)
        view = lambda x: x[8:, first:first + n]  # noqa: E731
        got = c0.copy()
        coopjit.gemm(a, b, view(got), alpha=-1.5, beta=0.5, device=DEV, plan=dict(plan, split="dp"))
        want = c0.copy()
        coopjit.gemm(a, b, view(want), alpha=-1.5, beta=0.5, device=DEV, plan=dict(plan, split="dp", epi_smem="no"))
        r = -1.5 * ref + 0.5 * view(c0).astype(np.float64)
        bound = unit * np.abs(r) + (k + 4) * 2.0**-23 * (1.5 * mag + 0.5 * np.abs(view(c0).astype(np.float64))) + 1e-30
        assert (np.abs(view(got).astype(np.float64) - r) <= bound).all(), (cols, first)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (cols, first)  # outside the view: untouched
    # (NumPy views reach the device as copies of the bytes they span: a base 4 bytes past a 16-byte
    # boundary needs a device pointer.)
    torch = pytest.importorskip("torch")
    tt = {np.float32: torch.float32, ml_dtypes.bfloat16: torch.bfloat16, np.float16: torch.float16}
    ta, tb = (torch.from_numpy(x.astype(np.float32)).cuda().to(tt[dtype]) for x in (a, b))
    c0 = rng.standard_normal((m + 8, 640)).astype(np.float32)
    tc = torch.from_numpy(c0).cuda().to(tt[out])
    coopjit.gemm(ta, tb, tc[8:, 2:2 + n], alpha=-1.5, beta=0.5, plan=dict(plan, split="dp"))
    torch.cuda.synchronize()
    old = torch.from_numpy(c0).to(tt[out]).double().numpy()
    r = -1.5 * ref + 0.5 * old[8:, 2:2 + n]
    bound = unit * np.abs(r) + (k + 4) * 2.0**-23 * (1.5 * mag + 0.5 * np.abs(old[8:, 2:2 + n])) + 1e-30
    got = tc.double().cpu().numpy()
    assert (np.abs(got[8:, 2:2 + n] - r) <= bound).all()
    got[8:, 2:2 + n] = old[8:, 2:2 + n]
    assert np.array_equal(got, old)  # nothing written outside the view


@pytest.mark.parametrize("trans_b", [True, False])
@pytest.mark.parametrize("plan", [{}, {"tma": "no"}, {"nr": 128, "sg_n": 1}])
def test_wgmma_int8_epilogue_staging(rng, trans_b, plan):
    """8-bit wgmma's int32 out through the staged epilogue (4 warpgroups, a smaller region a warp),
    alpha / beta, edge tiles; exact against int64 and equal to the plan without staging."""
    _hopper()
    m, n, k = 520, 400, 528
    a = _int8(rng, np.int8, (m, k))
    b = _int8(rng, np.int8, (n, k) if trans_b else (k, n))
    plan = dict(plan, tma_store="no")  # C by the lanes from the staging (by TMA stores: test_tma_store.py)
    kern = coopjit.compile_gemm(m, n, k, np.int8, device=DEV, trans_b=trans_b, plan=dict(plan, wgmma="yes"))
    assert kern.config["epi_smem"] in (3072, 1536) and "bar.warp.sync" in kern.source("ptx")
    ref = a.astype(np.int64) @ (b.T if trans_b else b).astype(np.int64)
    c = kern(a, b)
    assert c.dtype == np.int32 and (c.astype(np.int64) == ref).all()
    c0 = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    for epi in ("yes", "no"):
        c = c0.copy()
        coopjit.gemm(a, b, c, alpha=-2, beta=3, trans_b=trans_b, device=DEV, plan=dict(plan, wgmma="yes", epi_smem=epi))
        assert (c.astype(np.int64) == -2 * ref + 3 * c0.astype(np.int64)).all()


# 8-bit inputs in the warp-specialized kernel (s8 / u8 -> s32; simt_tma_ws.cpp): the default on
# sm_90 TMA plans (gpu_plan_split.cpp), persistent where the tiles take more than a wave.
@pytest.mark.parametrize("shape,plan", [((1024, 1024, 1024), {}), ((1008, 1008, 1040), {}), ((608, 2064, 1040), {}),
                                        ((1040, 4112, 528), {}),
                                        ((520, 272, 1040), {"ws": "yes", "split": "dp", "nr": 128, "sg_n": 2}),
                                        ((272, 4240, 1040), {"ws": 2, "split": "dp"}),
                                        ((528, 1008, 1040), {"ws": "yes", "split": "dp", "persistent": "yes", "workers": 7}),
                                        ((528, 272, 2064), {"ws": "yes", "split": "sk+dp", "workers": 7})])
@pytest.mark.parametrize("dtype,trans_b", [(np.int8, True), (np.uint8, False)])
def test_wgmma_int8_ws_exact(rng, shape, plan, dtype, trans_b):
    """The ws kernel on 8-bit operands: the default blocks (128 x 256 of two consumer warpgroups
    under a producer warpgroup, persistent over 165 tiles; 64 x 256 and 64 x 128 of one consumer
    warpgroup), 128 x 256 blocks of four consumer warpgroups (the layout before) under a producer
    warp, the persistent walk of 7 blocks, Stream-K's int32 partial tiles; edge tiles and K tails
    (528, 1040, 2064: not multiples of 128), B K-contiguous (as given) and N-contiguous (copied
    K-major first); C = alpha A B + beta C with integer alpha / beta; exact (integer sums below 2^53
    in float64)."""
    _hopper()
    m, n, k = shape
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, trans_b=trans_b, plan=plan or None)
    cfg = kern.config
    assert cfg["ws"] in ("yes", 2) and "k32" in cfg["wgmma"] and cfg["kmajor"].startswith("yes") != trans_b, cfg
    if not plan:
        want = ("128x256", 2, "yes") if n > 4000 else ("64x256", "yes", "no") if n > 2000 else ("64x128", "yes", "no")
        assert (cfg["macro_tile"], cfg["ws"], cfg["persistent"]) == want, cfg
    a = _int8(rng, dtype, (m, k))
    b = _int8(rng, dtype, (n, k) if trans_b else (k, n))
    ref = (a.astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)).astype(np.int64)  # exact: |sums| < 2^53
    c = kern(a, b)
    assert c.dtype == np.int32 and (c.astype(np.int64) == ref).all()
    c0 = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-2, beta=3, trans_b=trans_b, device=DEV, plan=plan or None)
    assert (c.astype(np.int64) == -2 * ref + 3 * c0.astype(np.int64)).all()


def test_wgmma_int8_ws_torch_and_epilogue(rng):
    """torch int8 tensors through the prepared launch on the default ws plan (1024^3: 64 x 128
    blocks), _int_mm's layout (B an N x K tensor's .t()) and the other, the launch's tensor maps
    made again for other operands; the int8 dequantization epilogue (float32 out) on the ws kernel."""
    _hopper()
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randint(-128, 128, (1024, 1024), device="cuda", dtype=torch.int8, generator=g)
    for b in (torch.randint(-128, 128, (1024, 1024), device="cuda", dtype=torch.int8, generator=g).t(),
              torch.randint(-128, 128, (1024, 1024), device="cuda", dtype=torch.int8, generator=g)):
        ref = a.cpu().long() @ b.cpu().long()
        c = torch.empty((1024, 1024), device="cuda", dtype=torch.int32)
        for _ in range(2):  # the second call: the cached launch
            c.zero_()
            coopjit.matmul(a, b, out=c)
            torch.cuda.synchronize()
            assert torch.equal(c.cpu().long(), ref)
    # The cached launch's tensor maps (launch_gpu_gemm) follow the operands: other tensors of the
    # same shapes and strides, then the first ones again.
    b = torch.randint(-128, 128, (1024, 1024), device="cuda", dtype=torch.int8, generator=g).t()
    a2 = torch.randint(-128, 128, (1024, 1024), device="cuda", dtype=torch.int8, generator=g)
    b2 = torch.randint(-128, 128, (1024, 1024), device="cuda", dtype=torch.int8, generator=g).t()
    for x, y in ((a, b), (a2, b), (a2, b2), (a, b)):
        c = coopjit.matmul(x, y)
        torch.cuda.synchronize()
        assert torch.equal(c.cpu().long(), x.cpu().long() @ y.cpu().long())
    an, bn = _int8(rng, np.int8, (1008, 608)), _int8(rng, np.int8, (608, 1104))
    sc = rng.uniform(0.5, 1.5, 1104).astype(np.float32)
    rs = rng.uniform(0.5, 1.5, 1008).astype(np.float32)
    assert coopjit.compile_gemm(1008, 1104, 608, np.int8, device=DEV).config["ws"] == "yes"
    got = coopjit.matmul(an, bn, scale=sc, row_scale=rs, device=DEV)
    want = (an.astype(np.int64) @ bn.astype(np.int64)).astype(np.float64) * sc.astype(np.float64)[None, :] * rs.astype(np.float64)[:, None]
    assert got.dtype == np.float32 and np.allclose(got, want, rtol=1e-6, atol=1e-3)


@pytest.mark.parametrize("shape", [(2000, 1400, 264), (520, 264, 1000), (4224, 600, 136)])
@pytest.mark.parametrize("plan", [{"ws": 2}, {"ws": 2, "group_m": 3}, {"ws": 1}])
def test_wgmma_ws_persistent(rng, shape, plan):
    """The persistent grid (plan field persistent): min(tiles, SMs) blocks, each walking tiles g,
    g + grid, ... with the producer running into the next tile while the consumers store this one
    (up to ~4 tiles a block on 132 SMs, edge tiles, K tails, the band walk); alpha / beta; against float64."""
    _hopper()
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    plan = dict(plan, split="dp", persistent="yes")
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, plan=plan)
    assert kern.config["persistent"] == "yes" and kern.config["ws"] in (2, "yes")
    _tc_check(kern(a, b), a, b)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-1.5, beta=0.5, device=DEV, plan=plan)
    _tc_check(c, a, b, c0, -1.5, 0.5)


@pytest.mark.parametrize("shape,trans", [((1000, 600, 2056), (False, False)), ((520, 264, 2056), (True, False)),
                                         ((136, 1000, 1032), (False, True)), ((4200, 520, 712), (False, False))])
@pytest.mark.parametrize("plan", [{"split": "sk", "workers": 7, "sk_flags": 1}, {"split": "sk+dp", "workers": 5, "sk_flags": 1, "sk_down": 0},
                                  {"split": "sk+dp", "workers": 7, "kt": 192, "ws": 1, "sk_flags": 0},
                                  {"split": "sk+dp", "workers": 7, "kt": 192, "ws": 1, "sk_flags": 1},
                                  {"split": "sk+dp", "workers": 6, "group_m": 3, "sk_flags": 1}, {"split": "sk+dp", "sk_flags": 0},
                                  {"split": "dp+sk", "workers": 6, "sk_flags": 1}, {"split": "dp+sk", "workers": 7, "kt": 128, "sk_flags": 0},
                                  {"split": "sk", "workers": 7, "sk_flags": 0, "sk_down": 0}, {"split": "sk+dp", "workers": 5, "sk_flags": 0},
                                  {"split": "sk+dp", "workers": 7, "sk_flags": 1, "sk_down": 1},
                                  {"split": "sk", "workers": 7, "kt": 192, "ws": 1, "sk_flags": 0, "sk_down": 1}])
def test_wgmma_ws_stream_k(rng, shape, trans, plan):
    """Stream-K, 2-tile SK + DP and DP + SK (the last wave's tiles streamed) in the warp-specialized
    kernel (gemm_recipe_gpu.cpp, simt_tma_ws.cpp): a persistent grid, each block's Stream-K
    iterations (K ranges that start and end inside tiles; kt 192 does not divide K) then its DP
    tiles, the producer walking the same ranges; partials through the workspace, added by the
    fix-up launch or in the kernel after flags (sk_flags 1; chains of parts where they are shorter
    than a tile); each part's K steps downward (sk_down, the default for 16-bit inputs) or upward.
    Edge tiles, K tails, the band walk, workers 5-7 and the SMs (tiles that leave the last wave
    partly empty); alpha / beta; against float64."""
    _hopper()
    m, n, k = shape
    dtype = ml_dtypes.bfloat16 if trans[0] == trans[1] else np.float16
    plan = dict(plan, ws=plan.get("ws", 2))
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=np.float32, trans_a=trans[0], trans_b=trans[1], plan=plan)
    cfg = kern.config
    assert cfg["split"] == plan["split"] and cfg["ws"] == ("yes" if plan["ws"] == 1 else 2) and cfg["persistent"].startswith("yes")
    assert cfg["sk_flags"] == ("yes" if plan["sk_flags"] else "no") and cfg["sk_down"].startswith("yes" if plan.get("sk_down", 1) else "no")
    a = rng.standard_normal((k, m) if trans[0] else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans[1] else (k, n)).astype(dtype)
    a_, b_ = (a.T if trans[0] else a), (b.T if trans[1] else b)
    _tc_check(kern(a, b), a_, b_)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-1.5, beta=0.5, trans_a=trans[0], trans_b=trans[1], device=DEV, plan=plan)
    _tc_check(c, a_, b_, c0, -1.5, 0.5)


@pytest.mark.parametrize("sk_flags", [0, 1])
def test_wgmma_ws_stream_k_bf16_out_and_torch(rng, sk_flags):
    """SK + DP ws with bf16 output (the f32 partials summed, then one rounding) and torch tensors,
    the parts added by the fix-up launch or in the kernel (sk_flags); the same result as forced DP
    within the outputs' rounding."""
    _hopper()
    m, n, k = 896, 4864, 1000  # 152 tiles of 128 x 256 on the SMs
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    plan = {"split": "sk+dp", "ws": 2, "sk_flags": sk_flags, "nr": 256}  # (the planner's own: 130 of 192 x 192)
    got = coopjit.matmul(a, b, device=DEV, plan=plan)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert got.dtype == ml_dtypes.bfloat16
    assert (np.abs(got.astype(np.float64) - ref) <= 2.0**-8 * np.abs(ref) + (k + 4) * 2.0**-23 * mag).all()
    torch = pytest.importorskip("torch")
    # torch tensors: the prepared launch queues the product (and its fix-up) on torch's stream without
    # waiting; three products back to back (the second and third through the per-call cache) share
    # the stream's workspace.
    a2 = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    ta, ta2, tb = (torch.from_numpy(x.astype(np.float32)).cuda().bfloat16() for x in (a, a2, b))
    core = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, plan=plan)._core
    launch = core.launcher(["bf16", "bf16", "bf16"], [m, n, k, 1, 1], [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0], True)
    sms = coopjit.device_info(DEV)["compute_units"]
    assert launch is not None and launch.config["split"] == "sk+dp" and launch.groups == sms  # one block an SM
    assert launch.config["sk_flags"].startswith("yes" if sk_flags else "no")
    outs = [coopjit.matmul(x, tb, plan=plan) for x in (ta, ta2, ta)]
    torch.cuda.synchronize()
    ref2 = a2.astype(np.float64) @ b.astype(np.float64)
    mag2 = np.abs(a2.astype(np.float64)) @ np.abs(b.astype(np.float64))
    for tc, r, mg in zip(outs, (ref, ref2, ref), (mag, mag2, mag)):
        err = np.abs(tc.double().cpu().numpy() - r)
        assert tc.dtype == torch.bfloat16 and (err <= 2.0**-8 * np.abs(r) + (k + 4) * 2.0**-23 * mg).all()


@pytest.mark.parametrize("shape,workers", [((128, 256, 8192), 7), ((256, 512, 4096), 11), ((384, 768, 3000), 132)])
def test_wgmma_ws_stream_k_flags_chains_and_reuse(rng, shape, workers):
    """The in-kernel fix-up (sk_flags) where a tile's K is split among many workers (plain Stream-K
    over 1-6 tiles: up to 7 parts a tile, each worker adding its successor's sum after its flag),
    called again and again with new operands (the flags left reset by each launch, through run()
    and through torch's stream): every result against float64, bf16 and f32 outputs."""
    _hopper()
    m, n, k = shape
    plan = {"split": "sk", "ws": 2, "workers": workers, "sk_flags": 1}
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, plan=plan)
    assert kern.config["sk_flags"] == "yes"
    for _ in range(3):
        a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
        _tc_check(kern(a, b), a, b)
    torch = pytest.importorskip("torch")
    outs, refs = [], []
    for _ in range(3):
        a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
        ta, tb = (torch.from_numpy(x.astype(np.float32)).cuda().bfloat16() for x in (a, b))
        outs.append(coopjit.matmul(ta, tb, plan=plan))
        refs.append((a.astype(np.float64) @ b.astype(np.float64), np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))))
    torch.cuda.synchronize()
    for tc, (r, mg) in zip(outs, refs):
        err = np.abs(tc.double().cpu().numpy() - r)
        assert tc.dtype == torch.bfloat16 and (err <= 2.0**-8 * np.abs(r) + (k + 4) * 2.0**-23 * mg).all()


@pytest.mark.parametrize("shape,extra", [((1024, 4864, 1024), {}), ((4224, 1024, 1536), {}), ((512, 1024, 4096), {"split": "sk"}),
                                         ((520, 264, 2056), {"workers": 7})])
def test_wgmma_ws_stream_k_stage_read_one_release_exact(rng, shape, extra):
    """Session 20's in-kernel fix-up (the successor's partial read through the stage slots, sk_stage;
    one release a warp, sk_one_release; the L2 prefetch, sk_prefetch): C bit-identical to the same
    plan without them (the same sums in the same order) and within f32 rounding of float64; 152
    tiles streamed (1024x4864), Stream-K parts then DP tiles (4224x1024: 136 tiles), chains of short
    parts (plain Stream-K), edge tiles (520x264). Called three times (the pseudo steps' parities,
    the flags reset)."""
    _hopper()
    m, n, k = shape
    base = dict({"layout": "col", "sg_m": 8, "nr": 256, "split": "sk+dp", "sk_flags": 1}, **extra)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    old = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, plan=dict(base, sk_stage=0, sk_one_release=0))
    want = old(a, b)
    _tc_check(want, a, b)
    # (sk_stage_store, session 21: the part's sum through the stage slots, stored by the producer)
    for more in ({}, {"sk_prefetch": 1}, {"sk_stage_store": 1}):
        kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, plan=dict(base, **more))
        assert kern.config["sk_stage"].startswith("yes") and kern.config["sk_one_release"].startswith("yes")
        for _ in range(3):
            got = kern(a, b)
            assert np.array_equal(got, want)


def test_wgmma_ws_stream_k_trace_reads_back(rng):
    """sk_trace (debug): after one launch the flags' allocation holds, after the flags, each block's
    units (tile, kind, K tiles) and its consumer warps' clocks in order (K loop end after the start,
    a part's stores before its release); the result unchanged."""
    _hopper()
    m, n, k = 1024, 4864, 1024
    plan = {"layout": "col", "sg_m": 8, "nr": 256, "split": "sk+dp", "sk_flags": 1, "sk_trace": 1}
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, plan=plan)
    kern(a, b)
    _core.gpu_stream_k_flags(DEV, 0, True)
    _tc_check(kern(a, b), a, b)
    fl = np.array(_core.gpu_stream_k_flags(DEV, 0, False), dtype=np.int64) & 0xFFFFFFFF
    sms = coopjit.device_info(DEV)["compute_units"]
    tiles_k, tiles = -(-k // int(kern.config["kt"])), 8 * 19  # 152 tiles of 128 x 256
    sk_iters = _core.stream_k_tiles("sk+dp", tiles, tiles_k, sms)
    workers = min(sms, sk_iters)
    assert sk_iters == tiles * tiles_k and fl.size and not fl[:(workers + 1) * 8].any()  # the flags: reset by the launch
    tr = fl[(workers + 1) * 8:(workers + 1) * 8 + sms * 8 * 16 * 8].reshape(sms, 8, 16, 8)
    seen = set()
    for g in range(sms):
        for u in range(8):
            e = tr[g, u]
            if not e[1].all():
                continue
            d = lambda x, y: (e[x] - e[y]) % 2**32  # noqa: E731  (cycles, every warp)
            assert (d(2, 0) > 0).all() and (d(2, 0) < 2**31).all()
            kind, kt = e[12, 0], e[13, 0]
            assert (e[12] == kind).all() and 1 <= kt <= tiles_k
            seen.add(int(kind) // 4)
            if not (kind >> 1) & 1:  # not a tile's head: its sum stored, then released
                assert (d(10, 8) < 2**31).all() and (d(8, 2) < 2**31).all()
    assert seen == set(range(tiles))  # every tile's units


@pytest.mark.parametrize("extra", [{}, {"sk_stage": 1, "sk_one_release": 1, "sk_down": 1, "sk_trace": 1}])
def test_stream_k_flags_dropped_by_the_fallback_without_the_pipeline(rng, extra):
    """A user's sk_flags (with the in-kernel fix-up's options) on operands the pipeline cannot take
    (A 2 bytes past an aligned start): the plan without the warp-specialized kernel that runs them
    drops those fields (the fix-up launch adds the parts) where it kept sk_flags and refused it
    (session 20); through the synchronous call and the prepared launch on torch's stream."""
    _hopper()
    torch = pytest.importorskip("torch")
    m, n, k = 512, 1024, 1000
    plan = dict({"layout": "col", "sg_m": 8, "nr": 256, "split": "sk+dp", "sk_flags": 1}, **extra)
    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, out_dtype=np.float32, plan=plan)
    assert kern.config["sk_flags"].startswith("yes")
    a = torch.randn(m * k + 1, device="cuda").to(torch.bfloat16)[1:].view(m, k)  # 2 bytes past an aligned start
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    an = a.float().cpu().numpy().astype(ml_dtypes.bfloat16)
    bn = b.float().cpu().numpy().astype(ml_dtypes.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda")
    torch.cuda.synchronize()
    kern._core.run(["bf16", "bf16", "f32"], [m, n, k, 1, 1], [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0],
                   a.data_ptr(), b.data_ptr(), c.data_ptr(), 1.0, 0.0)
    torch.cuda.synchronize()
    _tc_check(c.cpu().numpy(), an, bn)
    launch = kern._core.launcher(["bf16", "bf16", "f32"], [m, n, k, 1, 1], [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0], False)
    assert launch is None or launch.config["sk_flags"].startswith("no")
    got = coopjit.matmul(a, b, out_dtype=np.float32, plan=plan)
    torch.cuda.synchronize()
    _tc_check(got.cpu().numpy(), an, bn)
