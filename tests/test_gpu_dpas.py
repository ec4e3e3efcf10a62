"""DPAS (SPV_INTEL_subgroup_matrix_multiply_accumulate) and 2-D block I/O (SPV_INTEL_2d_block_io)
in GPU GEMMs.

What runs where:
  - the hardware form (target "xe-hpc" / "xe2", or a device that reports them) is generated for
    every input type and checked with spirv-val and its disassembly (opcodes, capabilities,
    extensions, operand flags, no FloatControls2);
  - it runs only on a device that advertises the extensions; Intel's CPU OpenCL runtime (opencl:0
    here) advertises neither, so those tests say "validated but not run";
  - the emulated form (plan dpas / block2d = "emulated": the same operand packing, block shapes,
    coordinates and restrictions, the two instructions computed from their specifications) runs
    on opencl:0 against NumPy in float64.
"""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import spirv
from conftest import assert_gemm_close

from device_support import every_module_passes_spirv_val, needs_device, spirv_only  # noqa: F401 - the fixture

DPAS_EXT, BLOCK2D_EXT = "SPV_INTEL_subgroup_matrix_multiply_accumulate", "SPV_INTEL_2d_block_io"
CL_DPAS, CL_BLOCK2D = "cl_intel_subgroup_matrix_multiply_accumulate", "cl_intel_subgroup_2d_block_io"
LOW = [np.float16, ml_dtypes.bfloat16, np.int8, np.uint8]
FLAGS = {  # the instruction's A is the kernel's B: its flags come from B's type, and the other way round
    "float16": "MatrixAPackedFloat16INTEL|MatrixBPackedFloat16INTEL",
    "bfloat16": "MatrixAPackedBFloat16INTEL|MatrixBPackedBFloat16INTEL",
    "int8": "MatrixASignedComponentsINTEL|MatrixBSignedComponentsINTEL|MatrixAPackedInt8INTEL|MatrixBPackedInt8INTEL",
    "uint8": "MatrixAPackedInt8INTEL|MatrixBPackedInt8INTEL",
}


def dpas_device():
    """The device the DPAS / 2-D block I/O tests run on: a SPIR-V one (the instructions, emulated
    too, are Intel's: subgroups of 16); skips on a device that runs PTX."""
    dev = needs_device()
    spirv_only("DPAS and 2-D block I/O (SPV_INTEL_subgroup_matrix_multiply_accumulate, SPV_INTEL_2d_block_io)")
    return dev


def is_int(dtype):
    return np.dtype(dtype).name in ("int8", "uint8")


def operands(rng, dtype, a_shape, b_shape):
    d = np.dtype(dtype)
    if is_int(d):
        lo, hi = (-128, 128) if d.kind == "i" else (0, 256)
        return rng.integers(lo, hi, a_shape).astype(d), rng.integers(lo, hi, b_shape).astype(d)
    return rng.standard_normal(a_shape).astype(d), rng.standard_normal(b_shape).astype(d)


def check(c, a, b, alpha=1.0, beta=0.0, c0=None):
    if c.dtype.kind in "iu":  # exact: int32 sums of int8 products (no overflow at these sizes)
        ref = a.astype(np.int64) @ b.astype(np.int64)
        assert np.array_equal(c.astype(np.int64), ref)
    else:
        assert_gemm_close(c, a, b, c0, alpha, beta)


def runs_like_numpy(rng, dtype, shapes, trans_b=False, **options):
    """Compiles and runs each m x n x k GEMM on opencl:0, checks it; the kernels' configs."""
    dev = dpas_device()
    out = np.float32 if not is_int(dtype) else None
    configs = []
    for m, n, k in shapes:
        a, b = operands(rng, dtype, (m, k), (n, k) if trans_b else (k, n))
        kern = coopjit.compile_gemm(m, n, k, dtype, device=dev, trans_b=trans_b, out_dtype=out, **options)
        check(kern(a, b), a, b.T if trans_b else b)
        configs.append((kern.config, kern))
    return configs


def lines(disassembly, word):
    return [line.strip() for line in disassembly.splitlines() if word in line]


# ---- what the runtime here advertises ------------------------------------------------------------
def advertises(info, cl_ext, spv_ext):
    return cl_ext in info["extensions"] or spv_ext in info.get("spirv_extensions", [])


def test_device_info_says_what_the_runtime_advertises():
    info = coopjit.device_info(dpas_device())
    assert isinstance(info["spirv_extensions"], list) and "SPV_INTEL_subgroups" in info["spirv_extensions"]
    assert info["dpas"] == advertises(info, CL_DPAS, DPAS_EXT) or (info["dpas"] is None and info["type"] == "gpu")
    assert info["block2d"] == advertises(info, CL_BLOCK2D, BLOCK2D_EXT) or (info["block2d"] is None and info["type"] == "gpu")


def test_default_plan_follows_the_device():
    dev = dpas_device()
    info = coopjit.device_info(dev)
    k = coopjit.compile_gemm(64, 64, 64, np.float16, device=dev)
    assert k.config["dpas"] == ("yes" if info["dpas"] else "no")
    assert k.config["block2d"] == ("yes" if info["block2d"] else "no")
    assert coopjit.compile_gemm(64, 64, 64, np.float32, device=dev).config["dpas"] == "no"


# ---- the hardware form: generated and validated --------------------------------------------------
@pytest.mark.parametrize("target", ["xe-hpc", "xe2"])
@pytest.mark.parametrize("dtype", LOW)
def test_dpas_module_validates(target, dtype):
    k = spirv.compile_gemm(64, 96, 128, dtype, target=target)
    cfg = k.config
    assert cfg["dpas"] == "yes" and cfg["block2d"] == "yes" and cfg["subgroup_size"] == 16
    kdim = 32 if np.dtype(dtype).itemsize == 1 else 16
    assert cfg["kb"] == kdim and cfg["mr"] == 32 and cfg["nr"] == 32
    spirv.validate(k.spirv)
    d = k.source("spirv")
    assert "OpCapability SubgroupMatrixMultiplyAccumulateINTEL" in d
    assert f'OpExtension "{DPAS_EXT}"' in d
    calls = lines(d, "= OpSubgroupMatrixMultiplyAccumulateINTEL")
    # Three K steps in the kernel (full tiles, edge tiles, the K tail), each 2 x 4 calls of M = 8.
    assert len(calls) == 3 * (32 // 16) * (32 // 8)
    acc = "%v8float" if not is_int(dtype) else "%v8uint"
    for call in calls:
        words = call.split()
        assert words[3] == acc and words[4] == f"%uint_{kdim}" and words[-1] == FLAGS[np.dtype(dtype).name]
    for cap in ("Subgroup2DBlockIOINTEL", "Subgroup2DBlockTransformINTEL"):
        assert f"OpCapability {cap}" in d
    assert f'OpExtension "{BLOCK2D_EXT}"' in d
    # matrix_a (VNNI) through the transform; B (and int8 B's two slabs) plain; C stored; prefetches.
    assert lines(d, "OpSubgroup2DBlockLoadTransformINTEL") and lines(d, "OpSubgroup2DBlockLoadINTEL")
    assert lines(d, "OpSubgroup2DBlockStoreINTEL") and lines(d, "OpSubgroup2DBlockPrefetchINTEL")
    assert "FloatControls2" not in d and "FPFastMathDefault" not in d


def test_dpas_without_block2d_validates():
    k = spirv.compile_gemm(64, 64, 64, np.float16, target="xe-hpc", plan={"block2d": "no"})
    d = k.source("spirv")
    assert k.config["block2d"] == "no" and "2DBlock" not in d and "SPV_INTEL_2d_block_io" not in d
    assert lines(d, "= OpSubgroupMatrixMultiplyAccumulateINTEL")
    spirv.validate(k.spirv)


def test_float32_on_xe_hpc_uses_2d_blocks_but_no_dpas():
    k = spirv.compile_gemm(64, 64, 64, np.float32, target="xe-hpc")
    d = k.source("spirv")
    assert k.config["dpas"] == "no" and "MatrixMultiplyAccumulate" not in d
    assert lines(d, "OpSubgroup2DBlockLoadINTEL") and lines(d, "OpSubgroup2DBlockStoreINTEL")
    spirv.validate(k.spirv)


def test_generic_target_has_neither():
    k = spirv.compile_gemm(64, 64, 64, np.float16, target="generic")
    d = k.source("spirv")
    assert k.config["dpas"] == "no" and "MatrixMultiplyAccumulate" not in d and "2DBlock" not in d
    spirv.validate(k.spirv)


# ---- the hardware form: run where a device has it ------------------------------------------------
@pytest.mark.parametrize("dtype", LOW)
def test_dpas_hardware_execution(rng, dtype):
    runnable = [d for d in coopjit.devices()[1:] if coopjit.device_info(d)["dpas"]]
    if not runnable:
        seen = {d: coopjit.device_info(d)["device_name"] for d in coopjit.devices()[1:]}
        pytest.skip(f"validated but not run: no device here advertises {CL_DPAS} / {DPAS_EXT} "
                    f"(devices: {seen}; Intel's CPU OpenCL runtime has no matrix engines)")
    for dev in runnable:
        a, b = operands(rng, dtype, (96, 160), (160, 72))
        out = np.float32 if not is_int(dtype) else None
        k = coopjit.compile_gemm(96, 72, 160, dtype, device=dev, out_dtype=out)
        assert k.config["dpas"] == "yes"
        check(k(a, b), a, b)


def test_block2d_hardware_execution(rng):
    runnable = [d for d in coopjit.devices()[1:] if coopjit.device_info(d)["block2d"]]
    if not runnable:
        pytest.skip(f"validated but not run: no device here advertises {CL_BLOCK2D} / {BLOCK2D_EXT}")
    for dev in runnable:
        a, b = operands(rng, np.float32, (64, 64), (64, 64))
        k = coopjit.compile_gemm(64, 64, 64, np.float32, device=dev)
        assert k.config["block2d"] == "yes"
        check(k(a, b), a, b)


# ---- the emulated form: runs here ----------------------------------------------------------------
# 64 x 64 x 64 meets the 2-D blocks' restrictions (64-byte rows, pitch a multiple of 16); 50 x 70 x 45
# does not (the 1-D path) and has edge tiles and a K tail.
@pytest.mark.parametrize("dtype", LOW)
def test_dpas_and_block2d_emulated_match_numpy(rng, dtype):
    # Data-parallel tiles: the planner takes Stream-K for 96 x 32 x 160, whose emulated kernel the
    # CPU OpenCL runtime compiles in ~60 s; test_gpu_stream_k runs Stream-K with emulated DPAS.
    plan = {"dpas": "emulated", "block2d": "emulated", "split": "dp"}
    runs = runs_like_numpy(rng, dtype, [(64, 64, 64), (50, 70, 45), (96, 32, 160)], plan=plan)
    assert all(cfg["dpas"] == "emulated" and cfg["block2d"] == "emulated" for cfg, _ in runs)
    d = runs[-1][1].source("spirv")
    assert "MatrixMultiplyAccumulate" not in d and "2DBlock" not in d  # emulated: runs without them


@pytest.mark.parametrize("trans_a,trans_b", [(True, False), (False, True), (True, True)])
def test_dpas_emulated_transposes_and_alpha_beta(rng, trans_a, trans_b):
    dev = dpas_device()
    m, n, k = 48, 80, 64
    a, b = operands(rng, np.float16, (k, m) if trans_a else (m, k), (n, k) if trans_b else (k, n))
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=1.5, beta=-0.5, trans_a=trans_a, trans_b=trans_b, device=dev,
                 plan={"dpas": "emulated", "block2d": "emulated"})
    check(c, a.T if trans_a else a, b.T if trans_b else b, 1.5, -0.5, c0)


@pytest.mark.parametrize("a_type,b_type", [(np.int8, np.uint8), (np.uint8, np.int8)])
def test_dpas_emulated_mixed_signedness(rng, a_type, b_type):
    """The signed-components flags follow each operand (the instruction's A is the kernel's B)."""
    dev = dpas_device()
    a = operands(rng, a_type, (64, 64), (1, 1))[0]
    b = operands(rng, b_type, (64, 64), (1, 1))[0]
    c = coopjit.matmul(a, b, device=dev, plan={"dpas": "emulated", "block2d": "emulated"})
    assert np.array_equal(c.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("dtype", [np.float16, np.int8])
def test_dpas_emulated_with_1d_loads(rng, dtype):
    [(cfg, _)] = runs_like_numpy(rng, dtype, [(64, 40, 96)], plan={"dpas": "emulated"})
    assert cfg["block2d"] == "no" and cfg["dpas"] == "emulated"


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_block2d_emulated_matches_numpy(rng, dtype):
    runs = runs_like_numpy(rng, dtype, [(64, 64, 64), (128, 48, 32), (33, 64, 17)], plan={"block2d": "emulated"})
    assert all(cfg["dpas"] == "no" and cfg["block2d"] == "emulated" for cfg, _ in runs)


# ---- VNNI channels in the vector path --------------------------------------------------------------
# With K contiguous in the kernel's A (trans_b in the "col" layout), matrix_a's channels (omega
# consecutive K values, seeds/001) load as one 32-bit word each; 64 x 48 x 64 takes that path
# (aligned), 37 x 29 x 45 the element path (odd K: unaligned rows) and edge tiles.
@pytest.mark.parametrize("dtype", LOW)
def test_vnni_channel_loads_match_numpy(rng, dtype):
    for cfg, kern in runs_like_numpy(rng, dtype, [(64, 48, 64), (37, 29, 45)], trans_b=True):
        assert cfg["unit_stride_a_k"] is True and cfg["dpas"] == "no"
        assert "vnni.fast" in kern.source("llvm")


@pytest.mark.parametrize("trans_a,trans_b", [(True, False), (False, True), (True, True)])
def test_compiled_kernel_with_transposes_on_host_arrays(rng, trans_a, trans_b):
    dev = dpas_device()
    m, n, k = 40, 24, 56
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    kern = coopjit.compile_gemm(m, n, k, np.float32, trans_a=trans_a, trans_b=trans_b, device=dev)
    check(kern(a, b), a.T if trans_a else a, b.T if trans_b else b)


# ---- errors ---------------------------------------------------------------------------------------
def test_errors():
    dev = dpas_device()
    if not coopjit.device_info(dev)["dpas"]:
        with pytest.raises(ValueError, match="does not report DPAS"):
            coopjit.compile_gemm(64, 64, 64, np.float16, device=dev, plan={"dpas": "yes"})
    with pytest.raises(ValueError, match="DPAS takes f16 or bf16"):
        coopjit.compile_gemm(64, 64, 64, np.float32, device=dev, plan={"dpas": "emulated"})
    with pytest.raises(ValueError, match="plan dpas must be one of"):
        coopjit.compile_gemm(64, 64, 64, np.float16, device=dev, plan={"dpas": "maybe"})
    with pytest.raises(ValueError, match="must be 0"):
        coopjit.compile_gemm(64, 64, 64, np.float16, device=dev, plan={"block2d": 5})
    with pytest.raises(ValueError, match="multiple of 16"):
        spirv.compile_gemm(64, 64, 64, np.float16, target="xe-hpc", plan={"kb": 8})
    with pytest.raises(ValueError, match="unknown GPU target"):
        spirv.compile_gemm(64, 64, 64, np.float16, target="xe-lp")
    k = spirv.compile_gemm(16, 16, 16, np.float16, target="xe2")
    with pytest.raises(RuntimeError, match="validated with spirv-val, but there is no such device"):
        k(np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float16))
