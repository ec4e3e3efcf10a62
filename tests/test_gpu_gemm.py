"""GEMM on opencl:0 (the SIMT lowering's SPIR-V run by Intel's CPU OpenCL runtime) against NumPy in
float64: shapes (1, primes, non-multiples of the tiles), all transposes, alpha / beta, strided and
negative-stride views of device memory (read through their strides, in place), host arrays (copied
in and back), batches with broadcasting; the plans chosen for a GPU (subgroup 16, 2 x 2 subgroups
per work-group) are the ones that run, and every module passes spirv-val."""
import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close
from test_gemm_correctness import SHAPES as CPU_SHAPES
from test_gemm_correctness import views as host_views

import device_support
from device_support import (DEVICE, every_module_passes_spirv_val, is_spirv, needs_device,  # noqa: F401 - the fixture
                            subgroup_sizes, validated)

DTYPES = [np.float32, np.float64]


def rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def on_device(x):
    """A copy of x in the device's shared memory (coopjit.empty); on a device the host cannot
    reach (CUDA), in host memory, copied in and out at each launch (device_support.on_device)."""
    needs_device()
    return device_support.on_device(x)


# The CPU path's sweep (tests/test_gemm_correctness.py) and a few more non-multiples of the tiles.
SHAPES = CPU_SHAPES + [(1, 17, 3), (19, 1, 5), (65, 33, 17), (150, 9, 40)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matmul_matches_numpy(rng, dtype, m, n, k):
    dev = needs_device()
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    c = coopjit.matmul(a, b, device=dev)
    assert c.dtype == dtype and c.shape == (m, n) and isinstance(c, np.ndarray)
    assert_gemm_close(c, a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (13, 29, 23), (70, 45, 37)])
def test_gemm_transposes(rng, dtype, trans_a, trans_b, m, n, k):
    dev = needs_device()
    a = rand(rng, (k, m) if trans_a else (m, k), dtype)
    b = rand(rng, (n, k) if trans_b else (k, n), dtype)
    c = coopjit.gemm(a, b, trans_a=trans_a, trans_b=trans_b, device=dev)
    assert_gemm_close(c, a.T if trans_a else a, b.T if trans_b else b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha,beta", [(2.5, 0.0), (-1.0, 1.0), (0.5, -2.0), (0.0, 3.0)])
def test_gemm_alpha_beta(rng, dtype, alpha, beta):
    dev = needs_device()
    a, b, c0 = rand(rng, (37, 29), dtype), rand(rng, (29, 43), dtype), rand(rng, (37, 43), dtype)
    c = c0.copy()
    got = coopjit.gemm(a, b, c, alpha=alpha, beta=beta, device=dev)
    assert got is c  # a host array: updated in place (copied in and back)
    assert_gemm_close(c, a, b, c0, alpha, beta)


def test_empty_k_scales_c():
    dev = needs_device()
    c = np.full((5, 7), 3.0, np.float32)
    coopjit.gemm(np.ones((5, 0), np.float32), np.ones((0, 7), np.float32), c, alpha=2.0, beta=2.0, device=dev)
    np.testing.assert_array_equal(c, np.full((5, 7), 6.0, np.float32))


def test_beta_zero_ignores_nan_in_c(rng):
    dev = needs_device()
    a, b = rand(rng, (20, 10), np.float32), rand(rng, (10, 30), np.float32)
    c = np.full((20, 30), np.nan, np.float32)
    coopjit.gemm(a, b, c, alpha=1.0, beta=0.0, device=dev)
    assert_gemm_close(c, a, b)


def device_views(rng, dtype):
    """(name, a, b): views of device arrays, read through their strides."""
    big_a = on_device(rand(rng, (90, 80), dtype))
    big_b = on_device(rand(rng, (80, 100), dtype))
    yield "slices", big_a[:40, :30], big_b[:30, :50]
    yield "step2", big_a[::2, ::2][:40, :30], big_b[::2, ::2][:30, :50]
    yield "negative", big_a[::-1, ::-1][:40, :30], big_b[::-1, ::-3][:30, :30]
    yield "transposed views", big_b.T[:41, :33], big_a.T[:33, ::3]
    yield "broadcast rows (stride 0)", np.broadcast_to(big_a[0, :30], (20, 30)), big_b[:30, :20]


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_device_views(rng, dtype):
    for name, a, b in device_views(rng, dtype):
        a_before, b_before = np.array(a), np.array(b)
        c = coopjit.matmul(a, b, device=needs_device())
        assert_gemm_close(c, a_before, b_before)
        np.testing.assert_array_equal(a, a_before, err_msg=f"{name}: a was modified")
        np.testing.assert_array_equal(b, b_before, err_msg=f"{name}: b was modified")


@pytest.mark.parametrize("dtype", DTYPES)
def test_cpu_sweeps_strided_host_views(rng, dtype):
    # The CPU path's views (tests/test_gemm_correctness.py), host memory: copied in for the call.
    for name, a, b in host_views(rng, dtype):
        a_before, b_before = a.copy(), b.copy()
        c = coopjit.matmul(a, b, device=needs_device())
        assert_gemm_close(c, a, b)
        np.testing.assert_array_equal(a, a_before, err_msg=f"{name}: a was modified")
        np.testing.assert_array_equal(b, b_before, err_msg=f"{name}: b was modified")


@pytest.mark.parametrize("dtype", DTYPES)
def test_column_major_and_strided_output_in_device_memory(rng, dtype):
    dev = needs_device()
    a = on_device(np.asfortranarray(rand(rng, (45, 23), dtype)))
    b = on_device(np.asfortranarray(rand(rng, (23, 38), dtype)))
    a, b = np.asfortranarray(a), np.asfortranarray(b)
    frame = device_support.device_empty((90, 80), dtype)
    frame[...] = 7
    out = frame[::2, 1::2][:45, :38]
    got = coopjit.matmul(a, b, out=out, device=dev)
    assert got is out
    assert_gemm_close(out, a, b)
    untouched = np.ones(frame.shape, bool)
    untouched[::2, 1::2][:45, :38] = False
    assert (frame[untouched] == 7).all()  # nothing written outside the view


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_broadcast(rng, dtype):
    dev = needs_device()
    a = rand(rng, (3, 1, 9, 14), dtype)
    b = rand(rng, (4, 14, 11), dtype)
    c = coopjit.matmul(a, b, device=dev)
    np.testing.assert_allclose(c, np.matmul(a.astype(np.float64), b), rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)
    v = coopjit.matmul(rand(rng, (5,), dtype), rand(rng, (2, 5, 3), dtype), device=dev)
    assert v.shape == (2, 3)


def test_the_gpu_plan_runs_and_validates(rng):
    dev = needs_device()
    k = coopjit.compile_gemm(200, 150, 64, np.float32, device=dev, accumulate=True)
    cfg = k.config
    if is_spirv():
        # Xe-HPC figures (gpu_plan.h): subgroup 16, a 32 x 32 f32 tile, K step 8, 2 x 2 subgroups.
        assert (cfg["subgroup_size"], cfg["mr"], cfg["nr"], cfg["kb"], cfg["sg_m"], cfg["sg_n"]) == (16, 32, 32, 8, 2, 2)
        assert cfg["work_group_size"] == 64 and cfg["layout"] == "col" and cfg["split"] == "dp"
        text = k.source("spirv")
        assert "OpExecutionMode" in text and "SubgroupSize 16" in text and "LocalSize 64 1 1" in text
        assert "OpSubgroupBlockReadINTEL" in text and "OpSubgroupBlockWriteINTEL" in text  # A and C in blocks
        assert "OpGroupBroadcast" in text  # B's elements broadcast for the FMAs
        assert "coopmatrix.mul_add" in k.source("ir") and "spir_kernel" in k.source("llvm")
    else:
        # NVIDIA (gpu_plan_tile.cpp): warps of 32, the SIMT tile 2S x 32 (64 x 32 f32), K step 8, 2 x 2
        # warps; FMAs (no tensor cores for f32).
        assert (cfg["subgroup_size"], cfg["mr"], cfg["nr"], cfg["kb"], cfg["sg_m"], cfg["sg_n"]) == (32, 64, 32, 8, 2, 2)
        assert cfg["work_group_size"] == 128 and cfg["layout"] == "col" and cfg["split"] == "dp"
        assert cfg["mma"] == "no"
        text = k.source("ptx")
        assert ".entry" in text and "fma.rn.f32" in text
        assert "coopmatrix.mul_add" in k.source("ir") and "ptx_kernel" in k.source("llvm")
    validated(k.spirv)
    a, b, c0 = rand(rng, (200, 64), np.float32), rand(rng, (64, 150), np.float32), rand(rng, (200, 150), np.float32)
    c = c0.copy()
    k(a, b, c, alpha=0.5, beta=2.0)
    assert_gemm_close(c, a, b, c0, 0.5, 2.0)
    f64 = coopjit.compile_gemm(200, 150, 64, np.float64, device=dev)
    if is_spirv():
        assert (f64.config["mr"], f64.config["nr"], f64.config["kb"]) == (32, 16, 4)
    else:  # warps of 32: a 32 x 32 f64 tile, K step 16
        assert (f64.config["mr"], f64.config["nr"], f64.config["kb"]) == (32, 32, 16)
    validated(f64.spirv)


def test_plan_overrides_and_small_tiles(rng):
    dev = needs_device()
    a, b = rand(rng, (50, 19), np.float32), rand(rng, (19, 70), np.float32)
    plans = [{"mr": 16, "nr": 8, "kb": 4, "sg_m": 1, "sg_n": 4}, {"layout": "row", "mr": 64, "nr": 16},
             {"subgroup_size": 8, "mr": 8, "nr": 8}, {"subgroup_size": 32, "mr": 32, "nr": 8, "sg_m": 1, "sg_n": 1}]
    # (the plans of subgroup sizes the device runs: NVIDIA only 32, which it refuses others with)
    for plan in [p for p in plans if p.get("subgroup_size", 0) in (0, *subgroup_sizes())]:
        c = coopjit.gemm(a, b, device=dev, plan=plan)
        assert_gemm_close(c, a, b)
    with pytest.raises(ValueError, match="power of two"):
        coopjit.gemm(a, b, device=dev, plan={"mr": 12})
    with pytest.raises(ValueError, match="unknown plan field"):
        coopjit.gemm(a, b, device=dev, plan={"threads": 2})


def test_device_arrays_are_used_in_place(rng):
    dev = needs_device()
    a, b = on_device(rand(rng, (33, 20), np.float64)), on_device(rand(rng, (20, 17), np.float64))
    c = device_support.device_empty((33, 17), np.float64)
    got = coopjit.matmul(a, b, out=c, device=dev)
    assert got is c
    assert_gemm_close(c, a, b)


def test_unknown_device_lists_the_devices():
    needs_device()  # with devices of its runtime present, a name past them is unknown (without any, a DeviceError)
    a = np.ones((2, 2), np.float32)
    past = DEVICE.partition(":")[0] + ":9"  # opencl:9, cuda:9
    with pytest.raises(ValueError, match=rf"unknown device '{past}'; available devices: \['cpu'"):
        coopjit.matmul(a, a, device=past)


# ---- low precision: f16, bf16 (SPV_INTEL_bfloat16_conversion), fp8 in f32; i8 / u8 in i32 ----
LOW = [np.float16, "bfloat16", "float8_e4m3fn", "float8_e5m2"]


@pytest.mark.parametrize("dtype", LOW)
def test_low_precision_floats_accumulate_in_float32(rng, dtype):
    import ml_dtypes  # noqa: F401 - registers the dtype names

    dev = needs_device()
    dtype = np.dtype(dtype)
    m, n, k = 37, 45, 29
    a = rng.uniform(-2, 2, (m, k)).astype(dtype)
    b = rng.uniform(-2, 2, (k, n)).astype(dtype)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    c32 = np.zeros((m, n), np.float32)
    coopjit.matmul(a, b, out=c32, device=dev)
    assert np.all(np.abs(c32 - ref) <= (k + 2) * np.finfo(np.float32).eps * mag + 1e-30)
    if dtype.itemsize == 2:  # the input type: rounded once from the float32 accumulator, like the CPU
        c = coopjit.matmul(a, b, device=dev)
        assert c.dtype == dtype
        np.testing.assert_array_equal(c, coopjit.matmul(a, b))


@pytest.mark.parametrize("ta,tb", [(np.int8, np.int8), (np.uint8, np.int8), (np.uint8, np.uint8)])
def test_int8_accumulates_exactly_in_int32(rng, ta, tb):
    dev = needs_device()
    ia, ib = np.iinfo(ta), np.iinfo(tb)
    a = rng.integers(ia.min, ia.max + 1, (40, 70)).astype(ta)
    b = rng.integers(ib.min, ib.max + 1, (70, 33)).astype(tb)
    c = coopjit.matmul(a, b, device=dev)
    assert c.dtype == np.int32
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))
    c0 = rng.integers(-1000, 1000, (40, 33)).astype(np.int32)
    c1 = c0.copy()
    coopjit.gemm(a, b, c1, alpha=3, beta=-2, device=dev)
    np.testing.assert_array_equal(c1, 3 * (a.astype(np.int64) @ b.astype(np.int64)) - 2 * c0)
