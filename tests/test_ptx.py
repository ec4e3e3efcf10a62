"""PTX for NVIDIA GPUs without one: the GEMM and reduction kernels the planner chooses for sm_80
(A100) and sm_90 (H100), lowered by the SIMT lowering's NVPTX target, compiled by LLVM's NVPTX
backend and assembled by ptxas (PyPI's nvidia-cuda-nvcc wheel, installed by scripts/setup.sh).
Skips, saying so, only where no ptxas is installed."""
import re

import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import spill_stores

TARGETS = ["sm_80", "sm_90"]


def assembled(ptxas, text, target):
    assert f".target {target}" in text and ".entry" in text
    report = ptxas(text, target)
    assert "Used" in report and "registers" in report, report
    assert " 0 bytes spill stores" in report, report  # the register tiles fit (255 registers a thread)
    return report


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8])
@pytest.mark.parametrize("trans", [(False, False), (True, True)])
def test_gemm_kernels_assemble(ptxas, target, dtype, trans):
    k = ptx.compile_gemm(257, 130, 96, dtype, target=target, trans_a=trans[0], trans_b=trans[1])
    cfg = k.config
    assert cfg["subgroup_size"] == 32 and cfg["dpas"] == "no" and cfg["block2d"] == "no"
    text = k.source("ptx")
    assert text == k.source()  # PTX is the default source for NVIDIA targets
    assert "shfl.sync" in text  # mul_add moves A / B components between the lanes of a warp
    tensor_cores = np.dtype(dtype) in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
    assert (cfg["mma"] == "yes") == tensor_cores
    insn = "mma.sync.aligned.m16n8k16.row.col.f32." + ("bf16.bf16" if dtype == ml_dtypes.bfloat16 else "f16.f16")
    assert (insn in text) == tensor_cores
    assert f".reqntid {cfg['work_group_size']}" in text
    assembled(ptxas, text, target)
    with pytest.raises(RuntimeError, match="no such device"):
        k(np.zeros((257, 96), dtype), np.zeros((96, 130), dtype))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("split", ["sk", "sk+dp"])
def test_stream_k_kernels_assemble(ptxas, target, split):
    k = ptx.compile_gemm(500, 300, 2048, np.float32, target=target, plan={"split": split})
    assert k.config["split"] == split
    if k.config["stages"] != 0:  # the f32 pipeline's two K loops in one Stream-K kernel: ~64 bytes of spills
        report = ptxas(k.source("ptx"), target)
        assert "Used" in report and "registers" in report, report
    else:
        assembled(ptxas, k.source("ptx"), target)
    assembled(ptxas, k._core.fixup_ptx, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form,unit,dtype,op", [("row", True, np.float32, "sum"), ("row", False, np.float64, "max"),
                                               ("column", True, np.int32, "sum"), ("column", False, ml_dtypes.bfloat16, "min"),
                                               ("2x2", True, np.float16, "prod"), ("2x2", False, np.float32, "max")])
def test_reduce_kernels_assemble(ptxas, target, form, unit, dtype, op):
    p = ptx.compile_reduce(64, 96, dtype, op=op, form=form, unit=unit, target=target)
    assert p.target == "nvptx64:" + target and p.subgroup_size == 32
    text = p.source("ptx")
    assembled(ptxas, text, target)
    assert ".reqntid 128" in text  # 4 warps a block
    if form == "2x2" or (form == "row") == unit:  # the reduced dimension runs over the lanes
        assert "shfl.sync" in text


@pytest.mark.parametrize("target", TARGETS)
def test_kernelbuilder_math_assembles(ptxas, target):
    from coopjit.ir import KernelBuilder

    b = KernelBuilder("fns", subgroup_size=32)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<bf16>")
    t = "coopmatrix<f32, 32, 8, acc, subgroup>"
    x = b.load(t, X, strides=(8, 1))
    y = b.per_element(x, lambda b, r, c, v: b.add(b.add(b.log(v), b.tanh(v)), b.add(b.exp(v), b.sqrt(v))))
    b.store(b.convert_matrix(y, "coopmatrix<bf16, 32, 8, acc, subgroup>"), Y, strides=(8, 1))
    prog = b._fn.compile_device("target:" + target)
    text = prog.source("ptx")
    for insn in ("ex2.approx", "lg2.approx", "sqrt.rn.f32", "cvt.rn.bf16.f32"):
        assert insn in text, insn
    assembled(ptxas, text, target)


def test_subgroup_16_is_refused_for_nvidia():
    from coopjit.ir import KernelBuilder

    b = KernelBuilder("k", subgroup_size=16)
    X = b.param("X", "ptr<f32>")
    b.store(b.load("coopmatrix<f32, 16, 8, acc, subgroup>", X, strides=(8, 1)), X, strides=(8, 1))
    with pytest.raises(Exception, match="subgroup_size 16"):
        b._fn.compile_device("target:sm_90")


@pytest.mark.parametrize("target", TARGETS)
def test_tensor_cores_can_be_turned_off(ptxas, target):
    k = ptx.compile_gemm(64, 64, 64, ml_dtypes.bfloat16, target=target, plan={"mma": "no"})
    assert k.config["mma"] == "no" and "mma.sync" not in k.source("ptx")
    assembled(ptxas, k.source("ptx"), target)
    with pytest.raises(ValueError, match="mma"):
        ptx.compile_gemm(64, 64, 64, np.float32, target=target, plan={"mma": "yes"})


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_stacked_tiny_products_run_on_fmas(ptxas, target, dtype):
    """Products of one 16 x 16 x 16 step at most (4096 stacked bf16 16^3 products: the batched
    case of issue 15) take the FMA kernel, whose whole product is shorter than the tensor-core
    pipeline's set-up; one step more (K = 32, M = 17) keeps the tensor cores; mma='yes' forces them."""
    from coopjit import _core

    ty = "bf16" if dtype == ml_dtypes.bfloat16 else "f16"
    for shape, tensor in (((16, 16, 16), False), ((8, 16, 12), False), ((16, 16, 32), True), ((17, 16, 16), True)):
        m, n, k = shape
        strides = [k, 1, n, 1, n, 1, 0, 0, 0, m * k, k * n, m * n]
        core = _core.gpu_gemm_kernel(f"target:{target}", [ty, ty, ty], [m, n, k, 1, 4096], strides, False, {}, None)
        assert core.config["mma"].startswith("yes") == tensor, (shape, core.plan_key)
        assert ("mma.sync" in core.ptx) == tensor
        launch = core.launcher([ty, ty, ty], [m, n, k, 1, 4096], strides, True)
        tile_m, tile_n = (int(v) for v in core.config["macro_tile"].split("x"))
        rows, cols = (n, m) if core.config["layout"] == "col" else (m, n)
        assert launch.groups == 4096 * -(-rows // tile_m) * -(-cols // tile_n)
        if not tensor:
            assembled(ptxas, core.ptx, target)
    forced = ptx.compile_gemm(16, 16, 16, dtype, target=target, plan={"mma": "yes"})
    assert forced.config["mma"] == "yes" and "mma.sync" in forced.source("ptx")


def test_unknown_target():
    with pytest.raises(ValueError, match="sm_80"):
        ptx.compile_gemm(8, 8, 8, target="sm_70")


def test_ptx_disk_cache(tmp_path):
    """A second process loads the PTX from the disk cache instead of running the NVPTX backend."""
    import os
    import subprocess
    import sys

    code = ("import numpy as np, coopjit, json; from coopjit import ptx, _core; "
            "k = ptx.compile_gemm(40, 30, 20, np.float64, target='sm_80'); "
            "print(json.dumps([_core.ptx_cache_stats(), len(k.source('ptx'))]))")
    env = dict(os.environ, COOPJIT_CACHE_DIR=str(tmp_path))
    env.pop("COOPJIT_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    import json

    (first, n1), (second, n2) = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert first == {"compiles": 1, "disk_loads": 0}, first
    assert second == {"compiles": 0, "disk_loads": 1}, second
    assert n1 == n2 > 1000


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (200, 136, 72), (64, 8, 8)])
def test_pipeline_kernels_assemble(ptxas, target, dtype, trans, shape):
    """The tensor-core pipeline the planner chooses for 16-bit operands whose strides and
    contiguous extents are whole 16-byte chunks: cp.async into 3 stages of shared memory,
    ldmatrix (.trans for the operands contiguous along M or N), mma.sync; no spills. (On sm_90 the
    default is the wgmma pipeline, test_wgmma_kernels_assemble; wgmma=no keeps this one.)"""
    k = ptx.compile_gemm(*shape, dtype, target=target, out_dtype=np.float32, trans_a=trans[0], trans_b=trans[1],
                         plan={"wgmma": "no"})
    cfg = k.config
    assert cfg["stages"] == 4 and cfg["mma"] == "yes"  # 4 stages: the opt-in shared memory allows
    text = k.source("ptx")
    assert "cp.async.cg.shared.global" in text and "cp.async.wait_group" in text and "bar.sync" in text
    assert "ldmatrix.sync.aligned.m8n8.x4" in text
    kernel_a_m = not trans[1]  # the kernel computes C^T = B^T A^T (layout col): its A is B^T
    kernel_b_n = trans[0]
    assert ("ldmatrix.sync.aligned.m8n8.x4.trans" in text) == (kernel_a_m or kernel_b_n), cfg["layout"]
    assert "mma.sync.aligned.m16n8k16.row.col.f32" in text
    assembled(ptxas, text, target)
    stage = (int(cfg["mr"]) * int(cfg["sg_m"]) + int(cfg["nr"]) * int(cfg["sg_n"])) * int(cfg["kb"]) * 2
    # Beyond the static 48 KiB the stages are the launch's dynamic shared memory.
    assert (".extern .shared .align 128 .b8 coopjit_dynamic_shared[]" in text) == (4 * stage > 48 * 1024)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("split", ["sk", "sk+dp"])
def test_pipeline_stream_k_assembles(ptxas, target, split):
    k = ptx.compile_gemm(520, 264, 2056, ml_dtypes.bfloat16, target=target, out_dtype=np.float32,
                         plan={"split": split, "workers": 7, "sk_flags": 0})
    assert k.config["stages"] == 4 and k.config["split"] == split
    report = ptxas(k.source("ptx"), target)  # Stream-K's two K loops: a few spills, reported, not asserted
    assert "Used" in report and "registers" in report, report
    assembled(ptxas, k._core.fixup_ptx, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_pipeline_int8_assembles(ptxas, target, dtype):
    """8-bit operands contiguous along K (B as N x K): the pipeline with mma.sync m16n8k32 (on
    sm_90 the default is wgmma, test_wgmma_int8_kernels_assemble; wgmma=no keeps this one)."""
    k = ptx.compile_gemm(4096, 4096, 4096, dtype, target=target, trans_b=True, plan={"wgmma": "no"} if target == "sm_90" else None)
    assert k.config["stages"] == 4 and k.config["kb"] == 64
    text = k.source("ptx")
    assert "mma.sync.aligned.m16n8k32.row.col" in text and "ldmatrix.sync.aligned.m8n8.x4" in text
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" not in text
    assembled(ptxas, text, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans", [(False, False), (True, True)])
def test_pipeline_fma_kernels_assemble(ptxas, target, dtype, trans):
    """f32 / f64: cp.async staging, 16-byte shared-memory vector loads, FMAs; no spills."""
    k = ptx.compile_gemm(4096, 4096, 4096, dtype, target=target, trans_a=trans[0], trans_b=trans[1])
    assert int(k.config["stages"]) >= 3 and k.config["mma"] == "no"
    text = k.source("ptx")
    assert "cp.async.cg.shared.global" in text and "ld.shared.v" in text and "fma.rn.f" in text
    assembled(ptxas, text, target)


# ---- Hopper's warpgroup pipeline (sm_90a: wgmma.mma_async) ---------------------------------------
# Every block shape the planner chooses for sm_90 (1 or 2 warpgroups; N tiles of 64, 128, 256),
# each operand orientation (K-major and M- / N-major shared-memory layouts), f16 and bf16, the
# Stream-K kernels and the fused epilogue.
@pytest.mark.parametrize("shape,tile", [((64, 64, 64), "64x64"), ((128, 128, 72), "128x128"), ((4096, 4096, 4096), "128x256"),
                                        ((520, 64, 136), "64x256")])
@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("tma", ["yes", "no"])
def test_wgmma_kernels_assemble(ptxas, shape, tile, trans, tma):
    """tma=yes (the default): the panels by cp.async.bulk.tensor from the two tensor-map parameters,
    on mbarriers; tma=no: cp.async by every work-item."""
    m, n, k = shape
    dtype = ml_dtypes.bfloat16 if trans[0] == trans[1] else np.float16
    kern = ptx.compile_gemm(m, n, k, dtype, target="sm_90", trans_a=trans[0], trans_b=trans[1], out_dtype=np.float32,
                            plan=None if tma == "yes" else {"tma": "no"})
    cfg = kern.config
    assert cfg["wgmma"].startswith("yes") and cfg["kb"] == 64 and cfg["mma"] == "yes"
    assert cfg["tma"].startswith(tma)
    # C row-major: the kernel computes C^T = B^T A^T (layout col), so its M runs along N.
    assert cfg["layout"] == "col" and cfg["macro_tile"] == tile
    text = kern.source("ptx")
    assert ".target sm_90a" in text and ".version 8." in text
    insn = f"wgmma.mma_async.sync.aligned.m64n{cfg['nr']}k16.f32." + ("bf16.bf16" if dtype == ml_dtypes.bfloat16 else "f16.f16")
    assert text.count(insn) == 4  # 64 K a step: 4 instructions of K 16
    for s in ("wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned", ".align 1024"):
        assert s in text, s
    assert "ldmatrix" not in text and "mma.sync" not in text
    bulk = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
    if tma == "yes":
        # Both maps by value (.param .align 64 .b8 [128]), their generic addresses in the copies (and
        # C's, for TMA stores: test_tma_store.py).
        maps = 2 if cfg["tma_store"] == "no" else 3
        assert text.count(".param .align 64 .b8") == maps and "cvta.param" in text, text[:3000]
        for s in (bulk, "mbarrier.init.shared::cta.b64", "mbarrier.try_wait.parity.shared::cta.b64",
                  "mbarrier.arrive.expect_tx.shared::cta.b64", "fence.mbarrier_init.release.cluster"):
            assert s in text, s
        assert "cp.async.cg.shared.global" not in text
    else:
        assert "cp.async.cg.shared.global" in text and "fence.proxy.async.shared::cta" in text and bulk not in text
    report = ptxas(text, "sm_90")
    assert "for 'sm_90a'" in report and "Used" in report, report
    # N tiles of 256 hold 128 f32 accumulators a work-item: ptxas reports a few spilled words.
    assert "Potential Performance Loss" not in report, report  # no wgmma serialization
    spills = spill_stores(report)
    assert spills and max(spills) <= (64 if cfg["nr"] == 256 else 0), report


# 8-bit operands on wgmma (s8 / u8 -> s32, m64nNk32): K-major operands read as they are; an operand
# contiguous along M or N is first copied K-major (plan field kmajor; 8-bit wgmma has no transpose).
@pytest.mark.parametrize("shape,tile", [((4096, 4096, 4096), "128x256"), ((208, 144, 80), "64x128"), ((64, 64, 128), "64x64"),
                                        ((528, 64, 144), "64x256"), ((1024, 1024, 1024), "64x128"), ((608, 2064, 1040), "64x256")])
@pytest.mark.parametrize("trans", [(False, True), (False, False), (True, True), (True, False)])
@pytest.mark.parametrize("tma", ["yes", "no"])
def test_wgmma_int8_kernels_assemble(ptxas, shape, tile, trans, tma):
    m, n, k = shape
    dtype = np.int8 if trans[0] == trans[1] else np.uint8
    kern = ptx.compile_gemm(m, n, k, dtype, target="sm_90", trans_a=trans[0], trans_b=trans[1],
                            plan=None if tma == "yes" else {"tma": "no"})
    cfg = kern.config
    assert cfg["wgmma"].startswith("yes") and "k32" in cfg["wgmma"] and cfg["kb"] == 128 and cfg["tma"].startswith(tma)
    # TMA plans take the warp-specialized kernel (gpu_plan_split.cpp, kWsInt8): a producer warpgroup over
    # two consumer warpgroups, a producer warp over one
    consumers = cfg["sg_m"] * cfg["sg_n"]
    assert cfg["ws"] == ((2 if consumers == 8 else "yes") if tma == "yes" else "no")
    # The kernel computes C^T = B^T A^T (layout col): its A is op(B)^T, K-major when B is given as N x K.
    copied = ("op(A)" if trans[0] else "") + (" and " if trans[0] and not trans[1] else "") + ("op(B)" if not trans[1] else "")
    assert cfg["kmajor"] == "no" if not copied else cfg["kmajor"].startswith(f"yes: {copied} copied"), cfg["kmajor"]
    assert cfg["layout"] == "col" and cfg["macro_tile"] == tile and cfg["unit_stride_b"] and cfg["unit_stride_a_k"]
    text = kern.source("ptx")
    s = "s8" if dtype == np.int8 else "u8"
    nr = int(cfg["nr"])
    assert text.count(f"wgmma.mma_async.sync.aligned.m64n{nr}k32.s32.{s}.{s} ") == 4  # 128 K a step: 4 of K 32
    assert "ldmatrix" not in text and "mma.sync" not in text
    assert ("cp.async.bulk.tensor.2d" in text) == (tma == "yes")
    assert f".reqntid {32 * consumers + (0 if tma == 'no' else 128 if consumers == 8 else 32)}" in text
    assert ("setmaxnreg.inc.sync.aligned.u32 224" in text) == (tma == "yes" and consumers == 8)
    report = ptxas(text, "sm_90")
    assert "for 'sm_90a'" in report and "Potential Performance Loss" not in report, report
    spills = spill_stores(report)
    # N tiles of 256 hold 128 s32 accumulators a work-item (ptxas 13: none spilled; a few words allowed as for 16-bit)
    assert spills and max(spills) <= (64 if cfg["nr"] == 256 else 0), report
    if copied:
        assembled(ptxas, kern._core.copy_ptx, "sm_90")
    else:
        assert kern._core.copy_ptx == ""


@pytest.mark.parametrize("trans_b", [True, False])
def test_wgmma_int8_stream_k_assembles(ptxas, trans_b):
    """Stream-K's int32 partial tiles (the main kernel's two K loops and the fix-up) on 8-bit wgmma."""
    kern = ptx.compile_gemm(528, 272, 2064, np.int8, target="sm_90", trans_b=trans_b, plan={"split": "sk+dp", "workers": 7})
    assert "k32" in kern.config["wgmma"] and kern.config["split"] == "sk+dp"
    assert kern.config["kmajor"].startswith("yes") != trans_b
    for text in (kern.source("ptx"), kern._core.fixup_ptx):
        report = ptxas(text, "sm_90")
        assert "Used" in report and "Potential Performance Loss" not in report, report


def test_wgmma_int8_plan_fields():
    """kmajor=no keeps an M- / N-contiguous 8-bit operand where it is (no tensor cores then);
    kmajor=yes is refused where there is nothing to copy or no wgmma; sm_80, batches and shapes
    off 16-element rows take no copies; wgmma=no keeps mma.sync on K-major operands."""
    k = ptx.compile_gemm(256, 256, 256, np.int8, target="sm_90", plan={"kmajor": "no"})
    assert k.config["kmajor"] == "no" and k.config["wgmma"] == "no" and "wgmma" not in k.source("ptx")
    assert ptx.compile_gemm(256, 256, 256, np.int8, target="sm_80").config["kmajor"] == "no"
    assert ptx.compile_gemm(256, 256, 200, np.int8, target="sm_90").config["kmajor"] == "no"  # K % 16
    assert ptx.compile_gemm(48, 256, 256, np.int8, target="sm_90").config["kmajor"] == "no"  # M < 64: no wgmma by default
    k = ptx.compile_gemm(256, 256, 256, np.int8, target="sm_90", trans_b=True, plan={"wgmma": "no"})
    assert k.config["wgmma"] == "no" and "mma.sync.aligned.m16n8k32" in k.source("ptx")
    for target, trans_b, plan, match in (("sm_90", True, {"kmajor": "yes"}, "kmajor=1"), ("sm_80", False, {"kmajor": "yes"}, "kmajor=1"),
                                         ("sm_90", False, {"kmajor": 2}, "kmajor=2 must be 0 or 1"),
                                         ("sm_90", False, {"kmajor": "yes", "wgmma": "no"}, "kmajor=1")):
        with pytest.raises(ValueError, match=match):
            ptx.compile_gemm(256, 256, 256, np.int8, target=target, trans_b=trans_b, plan=plan)


@pytest.mark.parametrize("shape,tile,trans", [((4096, 4096, 4096), "128x256", (False, False)), ((4096, 4096, 4096), "128x256", (True, True)),
                                              ((520, 64, 136), "64x256", (False, True)), ((128, 128, 72), "128x128", (True, False)),
                                              ((64, 64, 64), "64x64", (False, False))])
def test_wgmma_ws_kernels_assemble(ptxas, shape, tile, trans):
    """ws=2 (the default on data-parallel TMA plans, simt_tma_ws.cpp): a producer warpgroup after the
    consumer warps (.reqntid 4 warps more; setmaxnreg with two consumer warpgroups), a persistent walk over the tiles (nctaid), the
    producer's copies waiting on the empty barriers and the consumers' wgmmas on the full ones;
    ptxas: no wgmma serialization, spills no worse than the kernel without it."""
    m, n, k = shape
    dtype = ml_dtypes.bfloat16 if trans[0] == trans[1] else np.float16
    kern = ptx.compile_gemm(m, n, k, dtype, target="sm_90", trans_a=trans[0], trans_b=trans[1], out_dtype=np.float32,
                            plan={"ws": 2, "split": "dp"})
    cfg = kern.config
    assert cfg["ws"] == 2 and cfg["tma"].startswith("yes") and cfg["split"] == "dp" and cfg["macro_tile"] == tile
    consumers = cfg["sg_m"] * cfg["sg_n"]
    assert cfg["work_group_size"] == 32 * (consumers + 4)
    text = kern.source("ptx")
    assert f".reqntid {32 * (consumers + 4)}" in text, text[:2000]
    assert ("setmaxnreg.dec.sync.aligned.u32 56" in text) == (consumers == 8)
    assert ("setmaxnreg.inc.sync.aligned.u32 224" in text) == (consumers == 8)
    assert "%nctaid.x" in text and "%ctaid.x" in text
    for s in ("cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.shared::cta.b64",
              "mbarrier.arrive.expect_tx.shared::cta.b64"):
        assert s in text, s
    assert re.search(r"wgmma\.wait_group\.sync\.aligned\s+1;", text)  # one group left in flight
    assert "mbarrier.inval" not in text
    report = ptxas(text, "sm_90")
    assert "for 'sm_90a'" in report and "Used" in report, report
    assert "Potential Performance Loss" not in report, report
    spills = spill_stores(report)
    plain = ptxas(ptx.compile_gemm(m, n, k, dtype, target="sm_90", trans_a=trans[0], trans_b=trans[1], out_dtype=np.float32,
                                   plan={"ws": "no"}).source("ptx"), "sm_90")
    plain_spills = spill_stores(plain)
    assert spills and max(spills) <= max(plain_spills) + 64, (report, plain)  # a few words (ptxas: 8-48 bytes)


def test_wgmma_int8_ws_default_plans():
    """8-bit products on sm_90 (132 SMs): 128 x 256 blocks of two consumer warpgroups (64 x 256
    each, as 16-bit) under a producer warpgroup (ws 2), persistent where the tiles take more than a
    wave (4096^2, 8192^2; 2048^2: 128 tiles, one a block); fewer 128 x 256 tiles than half the SMs
    take 64 x 256 or 64 x 128 blocks (one consumer warpgroup, a producer warp); shapes that the
    Stream-K rule streams keep the kernel without producers; plan fields still choose."""
    for (m, n, k), tile, ws, pers, split in (((8192, 8192, 8192), "128x256", 2, "yes", "dp"), ((4096, 4096, 4096), "128x256", 2, "yes", "dp"),
                                             ((2048, 2048, 2048), "128x256", 2, "no", "dp"), ((1024, 1024, 1024), "64x128", "yes", "no", "dp"),
                                             ((1024, 2048, 1024), "64x256", "yes", "no", "dp"), ((2048, 1024, 4096), "64x256", "yes", "no", "dp"),
                                             ((512, 512, 8192), "64x128", "no", "no", "sk"), ((2048, 1280, 4096), "128x256", "no", "no", "sk")):
        for trans_b in (True, False):
            cfg = ptx.compile_gemm(m, n, k, np.int8, target="sm_90", trans_b=trans_b).config
            got = (cfg["macro_tile"], cfg["ws"], cfg["persistent"], cfg["split"])
            assert got == (tile, ws, pers, split), (m, n, k, trans_b, got)
            assert cfg["sg_n"] == 1 and cfg["nr"] == int(tile.split("x")[1]), cfg
    cfg = ptx.compile_gemm(1024, 1024, 1024, np.int8, target="sm_90", trans_b=True, plan={"nr": 128, "sg_n": 1}).config
    assert cfg["macro_tile"] == "128x128" and cfg["ws"] == 2
    cfg = ptx.compile_gemm(4096, 4096, 4096, np.int8, target="sm_90", trans_b=True, plan={"nr": 128, "sg_n": 2}).config
    assert cfg["macro_tile"] == "128x256" and cfg["ws"] == "yes"  # the four warpgroups of before
    assert ptx.compile_gemm(1024, 1024, 1024, np.int8, target="sm_90", trans_b=True, plan={"ws": "no"}).config["ws"] == "no"
    assert ptx.compile_gemm(4096, 4096, 4096, np.int8, target="sm_90", trans_b=True, plan={"tma": "no"}).config["ws"] == "no"
    assert ptx.compile_gemm(1024, 1024, 1024, np.int8, target="sm_80", trans_b=True).config["wgmma"] == "no"


@pytest.mark.parametrize("plan", [{"ws": 2, "split": "dp"}, {"ws": 2, "split": "dp", "nr": 128, "sg_n": 2},
                                  {"ws": "yes", "split": "dp", "persistent": "yes"},
                                  {"ws": "yes", "split": "sk+dp", "workers": 7}, {"ws": 2, "split": "sk", "nr": 128, "sg_n": 1}])
def test_wgmma_int8_ws_kernels_assemble(ptxas, plan):
    """The ws kernel's 8-bit plans on request: a producer warpgroup over four consumer warpgroups
    (640 threads, no setmaxnreg) or two (setmaxnreg as for 16-bit), the persistent walk, Stream-K
    (the walk of the block's parts, int32 partial tiles, the fix-up); ptxas: no wgmma serialization."""
    kern = ptx.compile_gemm(4096, 4096, 4096, np.int8, target="sm_90", trans_b=True, plan=plan)
    cfg = kern.config
    assert cfg["ws"] == plan["ws"] and cfg["split"] == plan["split"] and "k32" in cfg["wgmma"]
    consumers = cfg["sg_m"] * cfg["sg_n"]
    text = kern.source("ptx")
    assert f".reqntid {32 * consumers + (128 if plan['ws'] == 2 else 32)}" in text
    assert ("setmaxnreg.inc.sync.aligned.u32 224" in text) == (plan["ws"] == 2 and consumers == 8)
    assert text.count(f"wgmma.mma_async.sync.aligned.m64n{cfg['nr']}k32.s32.s8.s8 ") == 4
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in text and "%nctaid.x" in text
    for t in (text, kern._core.fixup_ptx) if plan["split"] != "dp" else (text,):
        report = ptxas(t, "sm_90")
        assert "for 'sm_90a'" in report and "Used" in report and "Potential Performance Loss" not in report, report


def _tiles(cfg, m, n):
    mt, nt = (int(x) for x in cfg["macro_tile"].split("x"))
    km, kn = (n, m) if cfg["layout"] == "col" else (m, n)
    return -(-km // mt) * -(-kn // nt)


def test_hopper_default_split():
    """The warp-specialized plans on sm_90 (132 SMs) take 2-tile SK + DP, with the in-kernel fix-up
    and the parts' K tiles downward, after one full wave where the second is at most half full, or
    after two where the third is at most a quarter full (session 14, CUDA graphs, against DP:
    133 tiles of 4864 x 896 1.5x, 136 of 4352 x 1024 1.2x, 144 1.4x, 152 of 1024 x 4864 1.35x
    and of 896 x 4864 1.02-1.04x, 165 1.3x, 198 1.1x, 266 of 4864 x 1792 1.2x, 270 1.2x, 297 1.14x);
    DP elsewhere: three full waves or more (400 tiles of 5120 x 2560 1.04x, 540 1.00x, 561 of
    4224^2 0.91-1.01x, 4096^2 0.86x), a second wave more than half full (231 tiles 0.95x), 32 tiles of 1024^2
    (Stream-K measured slower), waves the tiles fill (132 tiles of 1024 x 4224), one K tile, 2048^2
    and 8192^2. The non-ws TMA kernel keeps DP on 152 tiles; mma.sync plans (sm_80) take SK + DP
    there. Shapes whose 192 x 192 tiles carry less work a block (test_gpu_tiles192.py) take them, DP:
    4864 x 896, 896 x 4864 (130 tiles: one wave), 4864 x 1792 (260), 6912 x 1280 (252)."""
    bf16 = ml_dtypes.bfloat16
    # (4352 x 1024, 4608 x 1024, 5632 x 1152 and 2816 x 3456 take N tiles that fill their waves since
    # session 19, DP, test_gpu_ntile.py, and 2816 x 1920 128 x 320 since session 27 (132 tiles: one
    # wave; test_hopper_wide_tile_s27.py) and 1024 x 4864 128 x 320 with an edge since session 37 (128
    # tiles; test_wide_edge_s37.py): their 128 x 256 plans, named below, keep SK + DP)
    for (m, n, k), split in (((4864, 896, 8192), "dp"), ((4352, 1024, 4096), "dp"), ((4864, 1792, 8192), "dp"),
                             ((896, 4864, 8192), "dp"), ((1024, 4864, 8192), "dp"), ((4608, 1024, 8192), "dp"),
                             ((2816, 1920, 8192), "dp"), ((5632, 1152, 8192), "dp"), ((6912, 1280, 8192), "dp"),
                             ((1024, 1024, 1024), "dp"), ((4224, 4224, 4224), "dp"), ((6912, 2560, 4096), "dp"),
                             ((4096, 4096, 4096), "dp"), ((2048, 2048, 2048), "dp"), ((8192, 8192, 8192), "dp"),
                             ((1024, 4224, 4096), "dp"), ((4864, 896, 512), "dp"), ((5120, 2560, 4096), "dp"),
                             ((2816, 2688, 8192), "dp"), ((2816, 3456, 8192), "dp"), ((2816, 3840, 8192), "dp")):
        cfg = ptx.compile_gemm(m, n, k, bf16, target="sm_90").config
        tiles = _tiles(cfg, m, n)
        assert cfg["ws"] == 2 and cfg["split"] == split, (m, n, k, cfg["split"], tiles)
        full, last = divmod(tiles, 132)
        assert (split != "dp") == (cfg["macro_tile"] != "192x192" and k > 512 and last > 0 and
                                   ((full == 1 and last <= 66) or (full == 2 and last <= 33))), (m, n, k, tiles)
        streams = "yes" if split != "dp" else "no"
        assert cfg["sk_flags"].startswith(streams) and cfg["sk_down"].startswith(streams), (m, n, k, cfg["sk_flags"], cfg["sk_down"])
    # their 128 x 256 plans: 133, 152, 136, 144, 198 and 297 tiles, SK + DP
    for m, n, k in ((4864, 896, 8192), (896, 4864, 8192), (4352, 1024, 4096), (4608, 1024, 8192), (5632, 1152, 8192),
                    (2816, 3456, 8192), (2816, 1920, 8192), (1024, 4864, 8192)):
        cfg = ptx.compile_gemm(m, n, k, bf16, target="sm_90", plan={"nr": 256, "sg_m": 8}).config
        assert _tiles(cfg, m, n) in (133, 152, 136, 144, 198, 297, 165) and cfg["split"] == "sk+dp", (m, n, cfg["split"])
    assert ptx.compile_gemm(896, 4864, 8192, bf16, target="sm_90", plan={"ws": "no"}).config["split"] == "dp"
    sm80 = ptx.compile_gemm(896, 4864, 8192, bf16, target="sm_80").config
    assert sm80["wgmma"] == "no" and sm80["split"] == "sk+dp"


def test_wgmma_ws_plan_field():
    """ws: 2 by default on data-parallel TMA plans (1 / 2 on request), refused elsewhere."""
    assert ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90").config["ws"] == 2
    assert ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan={"tma": "no"}).config["ws"] == "no"
    assert ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan={"ws": "no"}).config["ws"] == "no"
    sk = ptx.compile_gemm(520, 264, 2056, ml_dtypes.bfloat16, target="sm_90", plan={"split": "sk+dp", "workers": 7, "ws": "no"})
    assert sk.config["ws"] == "no" and "setmaxnreg" not in sk.source("ptx") and ".reqntid 256" in sk.source("ptx")
    assert ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_80").config["ws"] == "no"
    one = ptx.compile_gemm(4096, 4096, 4096, ml_dtypes.bfloat16, target="sm_90", plan={"ws": "yes", "split": "dp"})
    assert one.config["ws"] == "yes" and ".reqntid 288" in one.source("ptx") and "setmaxnreg" not in one.source("ptx")
    for plan in ({"ws": "yes", "tma": "no"}, {"ws": "yes", "wgmma": "no"}):
        with pytest.raises(ValueError, match="ws=[12]: the warp-specialized kernel needs"):
            ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan=plan)
    with pytest.raises(ValueError, match="ws=2: the warp-specialized kernel needs .* int8 / uint8 inputs, not tma=0, batch=1, inputs i8"):
        ptx.compile_gemm(4096, 4096, 4096, np.int8, target="sm_90", trans_b=True, plan={"ws": 2, "tma": "no"})
    with pytest.raises(ValueError, match="ws=3 must be 0"):
        ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan={"ws": 3})


def test_grouped_tile_walk_assembles(ptxas):
    """group_m: the band walk's index arithmetic in the data-parallel and Stream-K kernels."""
    for plan in ({"group_m": 8}, {"group_m": 3, "split": "sk+dp", "workers": 7}):
        kern = ptx.compile_gemm(1000, 600, 264, ml_dtypes.bfloat16, target="sm_90", plan=plan)
        assert kern.config["group_m"] == plan["group_m"]
        assert "Used" in ptxas(kern.source("ptx"), "sm_90")
    with pytest.raises(ValueError, match="group_m=-1"):
        ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan={"group_m": -1})


def test_wgmma_stream_k_and_epilogue_assemble(ptxas):
    kern = ptx.compile_gemm(520, 264, 2056, ml_dtypes.bfloat16, target="sm_90", plan={"split": "sk+dp", "workers": 7, "sk_flags": 0})
    assert kern.config["wgmma"].startswith("yes") and kern.config["split"] == "sk+dp" and kern.config["tma"].startswith("yes")
    assert "cp.async.bulk.tensor.2d" in kern.source("ptx")
    for text in (kern.source("ptx"), kern._core.fixup_ptx):
        assert "Used" in ptxas(text, "sm_90")


def test_wgmma_plan_field():
    """wgmma=no keeps the mma.sync pipeline on sm_90; other targets and types refuse wgmma=yes."""
    k = ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan={"wgmma": "no"})
    assert k.config["wgmma"] == "no" and "mma.sync.aligned.m16n8k16" in k.source("ptx") and ".target sm_90\n" in k.source("ptx")
    assert ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_80").config["wgmma"] == "no"
    assert ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan={"stages": 0}).config["wgmma"] == "no"
    for target, dtype, plan in (("sm_80", ml_dtypes.bfloat16, {"wgmma": "yes"}), ("sm_90", np.float32, {"wgmma": "yes"}),
                                ("sm_90", ml_dtypes.bfloat16, {"wgmma": "yes", "stages": 0})):
        with pytest.raises(ValueError, match="wgmma"):
            ptx.compile_gemm(256, 256, 256, dtype, target=target, plan=plan)
    # tma: on wgmma plans only; batched products keep cp.async.
    assert k.config["tma"] == "no"
    with pytest.raises(ValueError, match="tma=1"):
        ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan={"wgmma": "no", "tma": "yes"})
    with pytest.raises(ValueError, match="tma=2 must be 0 or 1"):
        ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan={"tma": 2})
    with pytest.raises(ValueError, match="plan wgmma: mr=16"):  # (nr a multiple of 64 without TMA)
        ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan={"wgmma": "yes", "nr": 96, "tma": 0})
    with pytest.raises(ValueError, match="nr of 8"):  # (any multiple of 8 with TMA and K-major B: tests/test_gpu_ntile.py)
        ptx.compile_gemm(256, 256, 256, ml_dtypes.bfloat16, target="sm_90", plan={"wgmma": "yes", "nr": 100})


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("store,clamp,view,decode", [(False, "constant", 0, ""), (False, "mirror_repeat", 2, "blocked"),
                                                    (True, "repeat", 1, ""), (True, "undefined", 0, "")])
@pytest.mark.parametrize("subgroups", [1, 4])
def test_tensor_access_kernels_assemble(ptxas, target, store, clamp, view, decode, subgroups):
    """load_tensor / store_tensor through a layout (and a view, and the blocked decode function)
    in the SIMT lowering for NVIDIA, of a warp's matrix or a workgroup-scope one over 4 warps: the
    kernels load_matrix / store_matrix run with device= (and subgroups=)."""
    perm = {0: [], 1: [1, 2, 0], 2: [0, 2, 1]}[view]
    fn = coopjit._core.tensor_access_function(store, "f32", 16, 12, clamp, 3, view, perm, decode, 32, subgroups)
    prog = fn.compile_device("target:" + target)
    assert prog.subgroup_size == 32
    assembled(ptxas, prog.source("ptx"), target)


# The epilogue through shared memory (plan field epi_smem; simt_wgmma.cpp, frag_store): every
# module form the planner makes with it, on this machine's ptxas.
@pytest.mark.parametrize("case", [
    ((4096, 4096, 4096), ml_dtypes.bfloat16, ml_dtypes.bfloat16, False, {}),       # the default: ws 2, C contiguous along rows
    ((1000, 600, 264), ml_dtypes.bfloat16, np.float32, False, {"layout": "row"}),  # C contiguous along columns: pairs
    ((1000, 600, 264), ml_dtypes.bfloat16, ml_dtypes.bfloat16, False, {"layout": "row"}),  # the same, stmatrix
    ((1000, 600, 264), np.float16, np.float16, True, {"ws": "no"}),                # + beta C, loaded in D's order
    ((1000, 600, 264), ml_dtypes.bfloat16, np.float32, False, {"tma": "no", "nr": 128, "sg_n": 1}),
    ((520, 64, 136), ml_dtypes.bfloat16, np.float32, False, {}),                   # one warpgroup
    ((528, 64, 144), np.int8, None, False, {}),                                    # int32 out, one warpgroup
    ((2048, 2048, 2048), np.int8, None, True, {}),                                 # 4 warpgroups: 1536 bytes a warp
])
def test_wgmma_epilogue_staging_assembles(ptxas, case):
    """The staged epilogue: a region of shared memory a warp (3072 bytes, or less where the stages
    leave less), bar.warp.sync between its writes and its 16-byte reads, 16-byte global stores, no
    shuffles (no gather into the coopmatrix layout); ptxas: no wgmma serialization, no spills
    (with beta C fewer than the plan without it, which gathers as before)."""
    shape, dtype, out, acc, plan = case
    plan = dict(plan, tma_store="no")  # (C by the lanes from the staging; by TMA stores: test_tma_store.py)
    kw = {"out_dtype": out} if out is not None else {}
    kern = ptx.compile_gemm(*shape, dtype, target="sm_90", trans_b=dtype == np.int8, accumulate=acc, plan=plan, **kw)
    cfg = kern.config
    warps = cfg["sg_m"] * cfg["sg_n"]
    assert cfg["wgmma"].startswith("yes") and cfg["epi_smem"] == (3072 if warps <= 8 else 1536)
    text = kern.source("ptx")
    assert text.count("bar.warp.sync") >= 2 and "st.global.v4" in text and "ld.shared.v4" in text and "shfl" not in text
    c16 = out in (ml_dtypes.bfloat16, np.float16)  # 16-bit C: stmatrix, transposed where C's rows are contiguous
    assert ("stmatrix.sync.aligned.m8n8.x4" in text) == c16
    assert ("stmatrix.sync.aligned.m8n8.x4.trans" in text) == (c16 and cfg["layout"] == "col")
    report = ptxas(text, "sm_90")
    off = ptx.compile_gemm(*shape, dtype, target="sm_90", trans_b=dtype == np.int8, accumulate=acc, plan=dict(plan, epi_smem="no"), **kw)
    assert off.config["epi_smem"] == "no" and "bar.warp.sync" not in off.source("ptx")
    assert "Potential Performance Loss" not in report, report
    spilled = [sum(spill_stores(r)) for r in (report, ptxas(off.source("ptx"), "sm_90"))]
    # beta C: some spills remain (C's old values and the accumulators live together), fewer than before
    assert spilled[0] == 0 if not acc else spilled[0] < spilled[1], (spilled, report)


def test_wgmma_epilogue_staging_plan_fields():
    """epi_smem: on by default on wgmma plans, part of the kernel's name; off elsewhere; an
    override of 2, or of yes on a plan without wgmma, is refused naming the value."""
    k = ptx.compile_gemm(4096, 4096, 4096, ml_dtypes.bfloat16, target="sm_90", plan={"tma_store": "no"})
    assert k.config["epi_smem"] == 3072 and "_epi3072" in k.source("ptx")
    # (with TMA stores, the default: two boxes of 2048 bytes a warp; test_tma_store.py)
    k = ptx.compile_gemm(4096, 4096, 4096, ml_dtypes.bfloat16, target="sm_90")
    assert k.config["epi_smem"] == 4096 and "_epi4096_tmast" in k.source("ptx")
    assert ptx.compile_gemm(4096, 4096, 4096, ml_dtypes.bfloat16, target="sm_80").config["epi_smem"] == "no"
    assert ptx.compile_gemm(4096, 4096, 4096, ml_dtypes.bfloat16, target="sm_90", plan={"wgmma": "no"}).config["epi_smem"] == "no"
    for target, plan, match in (("sm_90", {"epi_smem": 2}, "epi_smem=2 must be 0"), ("sm_80", {"epi_smem": "yes"}, "epi_smem=1"),
                                ("sm_90", {"epi_smem": "yes", "wgmma": "no"}, "epi_smem=1")):
        with pytest.raises(ValueError, match=match):
            ptx.compile_gemm(4096, 4096, 4096, ml_dtypes.bfloat16, target=target, plan=plan)


def test_wgmma_ws_persistent_plan_fields(ptxas):
    """persistent: by default where the tiles take more than a wave (4096^3: 512 tiles of 128 x 256
    on 132 SMs; 4224^3: 484 of 192 x 192), not where they fit one (2048^3: 128); on a ws plan the
    kernel loops over tiles (nctaid) and assembles; refused without ws or with another value, naming it."""
    assert ptx.compile_gemm(2048, 2048, 2048, ml_dtypes.bfloat16, target="sm_90").config["persistent"] == "no"
    for n in (4096, 4224):
        cfg = ptx.compile_gemm(n, n, n, ml_dtypes.bfloat16, target="sm_90").config
        assert cfg["persistent"].startswith("yes") and cfg["split"] == "dp", cfg
    assert ptx.compile_gemm(4096, 4096, 4096, ml_dtypes.bfloat16, target="sm_90", plan={"persistent": "no"}).config["persistent"] == "no"
    k = ptx.compile_gemm(4096, 4096, 4096, ml_dtypes.bfloat16, target="sm_90", plan={"persistent": "yes"})
    assert k.config["persistent"] == "yes" and k.config["ws"] == 2 and "_pers" in k.source("ptx")
    report = ptxas(k.source("ptx"), "sm_90")
    assert "Used" in report and "Potential Performance Loss" not in report, report
    for plan, match in (({"persistent": 2}, "persistent=2 must be 0"), ({"persistent": "yes", "ws": "no"}, "persistent=1"),
                        ({"persistent": "yes", "split": "sk", "tma": "no"}, "ws=")):
        with pytest.raises(ValueError, match=match):
            ptx.compile_gemm(4096, 4096, 4096, ml_dtypes.bfloat16, target="sm_90", plan=plan)


@pytest.mark.parametrize("split", ["sk", "sk+dp"])
@pytest.mark.parametrize("plan", [{"ws": 2}, {"ws": 1, "kt": 192}, {"ws": 2, "group_m": 3}])
def test_wgmma_ws_stream_k_assembles(ptxas, split, plan):
    """Stream-K / SK + DP in the warp-specialized kernel: the producer's walk over the block's
    Stream-K parts (the kernel's workers, sk_iters, tiles_k) and then its DP tiles, the consumers'
    partial tiles to the workspace; the fix-up kernel (sk_flags 0; the in-kernel fix-up:
    test_wgmma_ws_stream_k_flags_assemble). ptxas: no wgmma serialization, spills no worse than
    the data-parallel ws kernel."""
    kern = ptx.compile_gemm(1000, 600, 2056, ml_dtypes.bfloat16, target="sm_90", out_dtype=np.float32,
                            plan=dict(plan, split=split, workers=7, sk_flags=0))
    cfg = kern.config
    assert cfg["split"] == split and cfg["ws"] == ("yes" if plan["ws"] == 1 else 2) and cfg["persistent"].startswith("yes")
    text = kern.source("ptx")
    for s in ("cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity.shared::cta.b64", "%nctaid.x", ".param .u64 "):
        assert s in text, s
    assert re.search(r"wgmma\.wait_group\.sync\.aligned\s+1;", text)
    report = ptxas(text, "sm_90")
    assert "for 'sm_90a'" in report and "Potential Performance Loss" not in report, report
    spills = spill_stores(report)
    dp = ptxas(ptx.compile_gemm(1000, 600, 2056, ml_dtypes.bfloat16, target="sm_90", out_dtype=np.float32,
                                plan=dict(plan, split="dp", persistent="yes", tma_store="no")).source("ptx"), "sm_90")
    dp_spills = spill_stores(dp)
    # (against the DP kernel without TMA stores, which spills more than with them: 544 bytes
    # against 0 with ws 1; the Stream-K kernel with them 356, without 696)
    # (ptxas, 168 registers a consumer thread: 88 bytes more than the persistent DP kernel with ws 2,
    # 152 with ws 1: the units' bounds kept across the K loop)
    assert spills and max(spills) <= max(dp_spills) + 160, (report, dp)
    assert "Used" in ptxas(kern._core.fixup_ptx, "sm_90")


def test_wgmma_ws_stream_k_plan_fields():
    """ws Stream-K plans are persistent (persistent=0 refused); the non-ws TMA kernel keeps Stream-K too."""
    bf16 = ml_dtypes.bfloat16
    with pytest.raises(ValueError, match="persistent=0: the warp-specialized Stream-K kernel"):
        ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "sk", "ws": 2, "persistent": "no"})
    k = ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "sk+dp", "ws": "no"})
    assert k.config["ws"] == "no" and k.config["persistent"] == "no"
    with pytest.raises(ValueError, match="ws=2: the warp-specialized kernel needs"):
        ptx.compile_gemm(64, 64, 4096, bf16, target="sm_90", plan={"split": "sk", "ws": 2, "tma": "no"})


@pytest.mark.parametrize("target", TARGETS)
def test_flag_ops_lower_to_release_acquire_at_gpu_scope(ptxas, target):
    """flag.set / flag.wait (the in-kernel Stream-K fix-up's flags) through the NVPTX target:
    every lane's set an atom.release.gpu exchange (read-modify-writes continue the release, so one
    acquire sees the warp's writes), the wait a poll of ld.acquire.gpu with a nanosleep between
    polls, the warp leaving together (bar.warp.sync) and, with a spin_limit, a trap; ptxas
    assembles it."""
    from coopjit.ir import KernelBuilder

    b = KernelBuilder("flags", subgroup_size=32)
    F, X, Y = b.param("F", "ptr<i32>"), b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    t = "coopmatrix<f32, 32, 8, acc, subgroup>"
    b.store(b.load(t, X, strides=(8, 1)), Y, strides=(8, 1))
    b.flag_set(F, 3)
    b.flag_wait(F, 5, spin_limit=1000)
    b.flag_set(F, 5, 0)
    text = b._fn.compile_device("target:" + target).source("ptx")
    for insn in ("atom.release.gpu.global.exch.b32", "ld.acquire.gpu.global.b32", "nanosleep.u32", "bar.warp.sync", "trap;"):
        assert insn in text, insn
    assert text.count("atom.release.gpu.global.exch.b32") == 2 and "atom.global" not in text
    assert re.search(r"setp\.\w+\.s64\s+%p\d+, %rd\d+, 999;|, 1000;", text)  # the poll count's limit
    assembled(ptxas, text, target)
    # Without a limit: no trap.
    b2 = KernelBuilder("flags2", subgroup_size=32)
    F2 = b2.param("F", "ptr<i32>")
    b2.flag_wait(F2, 0)
    text2 = b2._fn.compile_device("target:" + target).source("ptx")
    assert "ld.acquire.gpu.global.b32" in text2 and "trap;" not in text2


@pytest.mark.parametrize("split,workers", [("sk", 7), ("sk+dp", 7), ("sk", 132)])
def test_wgmma_ws_stream_k_flags_assemble(ptxas, split, workers):
    """ws Stream-K plans whose grid fits the SMs add the split tiles' parts in the kernel (plan field
    sk_flags 1): no fix-up kernel, the flags' release / acquire at .gpu scope with a
    bounded spin; ptxas: no wgmma serialization, spills no worse than with the fix-up launch (the
    parts' loads and flags beside the accumulators) by more than a little."""
    bf16 = ml_dtypes.bfloat16
    kern = ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", out_dtype=np.float32,
                            plan={"split": split, "ws": 2, "workers": workers, "sk_flags": 1})
    cfg = kern.config
    assert cfg["split"] == split and cfg["sk_flags"] == "yes" and kern._core.fixup_ptx == ""
    text = kern.source("ptx")
    for insn in ("atom.release.gpu.global.exch.b32", "ld.acquire.gpu.global.b32", "bar.warp.sync", "trap;", "nanosleep.u32"):
        assert insn in text, insn
    # The parts in the fragments' own order (frag_native, session 17): each lane's NR / 2 f32 sums
    # as NR / 8 16-byte accesses a store / load, none element by element (two epilogues: the
    # part's store and the successor's load are built twice).
    # (sk_stage, the default where it fits: the successor's part by cp.async through the stage slots)
    groups = int(cfg["nr"]) // 8
    accesses = re.findall(r"^\s*((?:ld|st)\.global[\w.]*)", text, re.M)
    loads = len(re.findall(r"^\s*cp\.async\.cg\.shared\.global", text, re.M)) if cfg["sk_stage"].startswith("yes") else accesses.count("ld.global.v4.b32")
    assert loads == 2 * groups and accesses.count("st.global.v4.b32") == 2 * groups, accesses
    assert all(".v4." in a for a in accesses), sorted(set(accesses))
    report = ptxas(text, "sm_90")
    assert "for 'sm_90a'" in report and "Potential Performance Loss" not in report, report
    spills = max(spill_stores(report))
    off = ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", out_dtype=np.float32,
                           plan={"split": split, "ws": 2, "workers": workers, "sk_flags": 0})
    assert off.config["sk_flags"] == "no" and "ld.acquire" not in off.source("ptx")
    assert "Used" in ptxas(off._core.fixup_ptx, "sm_90")
    off_spills = max(spill_stores(ptxas(off.source("ptx"), "sm_90")))
    # (ptxas 13: 160 against 88 bytes with f32 C, 108 against 156 with bf16 C: the K loop is the
    # plain one and the successor's part is added after it; session 13's form, the part loaded as
    # the loop's initial accumulators, spilled 572)
    assert spills <= off_spills + 96, (spills, off_spills, report)


@pytest.mark.parametrize("sk_flags", [0, 1])
def test_wgmma_ws_stream_k_down_assembles(ptxas, sk_flags):
    """Plan field sk_down: the producer copies each Stream-K part's K steps from the part's last
    down to its first (the consumers take the stages in the order they fill: nothing else
    changes); with and without the in-kernel fix-up; ptxas: no wgmma serialization, the spills of
    the upward kernel; refused outside ws Stream-K plans and for values other than 0 / 1."""
    bf16 = ml_dtypes.bfloat16

    def kern(down, **kw):
        return ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", out_dtype=np.float32,
                                plan=dict({"split": "sk+dp", "ws": 2, "workers": 7, "sk_flags": sk_flags, "sk_down": down}, **kw))

    down, up = kern(1), kern(0)
    assert down.config["sk_down"].startswith("yes") and up.config["sk_down"] == "no"
    assert down.source("llvm").count("k_down") >= 1 and "k_down" not in up.source("llvm")
    spills = []
    for k in (down, up):
        report = ptxas(k.source("ptx"), "sm_90")
        assert "for 'sm_90a'" in report and "Potential Performance Loss" not in report, report
        spills.append(max(spill_stores(report)))
    assert spills[0] <= spills[1] + 16, spills
    assert kern(1, ws=1, kt=192).config["sk_down"].startswith("yes")
    with pytest.raises(ValueError, match="sk_down=1: .*ws=2, split dp"):
        ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "dp", "ws": 2, "sk_down": 1})
    with pytest.raises(ValueError, match="sk_down=1: .*ws=0, split sk"):
        ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "sk", "ws": 0, "sk_down": 1})
    with pytest.raises(ValueError, match="sk_down=2 must be 0"):
        ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "sk", "ws": 2, "sk_down": 2})


STREAMED = {"layout": "col", "sg_m": 8, "nr": 256, "split": "sk+dp"}  # the automatic plan of 1024x4864x8192


@pytest.mark.parametrize("shape,extra", [((1024, 4864, 8192), {}), ((1000, 600, 2056), {"workers": 7}),
                                         ((512, 4224, 8192), {"split": "sk", "sk_flags": 1})])
def test_wgmma_ws_stream_k_stage_read_and_one_release_assemble(ptxas, shape, extra):
    """The in-kernel fix-up's defaults of session 20: the successor's partial read through the
    stage slots (plan field sk_stage: each lane's NR / 8 16-byte groups by cp.async, then
    ld.shared.v4, where plain 16-byte global loads were latency-bound) and each flag set by one
    work-item of the warp after bar.warp.sync (sk_one_release: one atom.release a set, not 32);
    both off give session 19's kernel. ptxas: no wgmma serialization, spills no worse."""
    bf16 = ml_dtypes.bfloat16
    on = ptx.compile_gemm(*shape, bf16, target="sm_90", plan=dict(STREAMED, **extra))
    off = ptx.compile_gemm(*shape, bf16, target="sm_90", plan=dict(STREAMED, sk_stage=0, sk_one_release=0, **extra))
    assert on.config["sk_flags"] == "yes" and on.config["sk_stage"].startswith("yes") and on.config["sk_one_release"].startswith("yes")
    assert off.config["sk_stage"] == "no" and off.config["sk_one_release"] == "no"
    assert ".stg.rel1." in on._core.plan_key and ".stg" not in off._core.plan_key
    groups = 256 // 8
    t_on, t_off = on.source("ptx"), off.source("ptx")
    count = lambda t, pat: len(re.findall(pat, t, re.M))  # noqa: E731
    # (the successor's part is read in two branches: a tile's head writes C, any other part its own sum)
    assert count(t_on, r"^\s*cp\.async\.cg\.shared\.global") == 2 * groups and count(t_on, r"^\s*ld\.shared\.v4\.f32") == 2 * groups
    assert count(t_on, r"^\s*ld\.global\.v4") == 0 and count(t_off, r"^\s*ld\.global\.v4") == 2 * groups
    assert "cp.async.wait_all" in t_on and "cp.async" not in t_off.replace("cp.async.bulk", "")
    # one release exchange a flag set, inside a branch on the lane (3 sets: own flag, 2 resets)
    assert count(t_on, r"atom\.release\.gpu\.global\.exch") == 3 == count(t_off, r"atom\.release\.gpu\.global\.exch")
    spills = []
    for t in (t_on, t_off):
        report = ptxas(t, "sm_90")
        assert "for 'sm_90a'" in report and "Potential Performance Loss" not in report, report
        spills.append(max(spill_stores(report)))
    assert spills[0] <= spills[1] + 16, spills


@pytest.mark.parametrize("shape,extra", [((1024, 4864, 8192), {}), ((1000, 600, 2056), {"workers": 7}),
                                         ((512, 4224, 8192), {"split": "sk", "sk_flags": 1}),
                                         ((1024, 4864, 8192), {"sk_stage": 0})])
@pytest.mark.parametrize("mode", [1, 2])
def test_wgmma_ws_stream_k_stage_store_assembles(ptxas, shape, extra, mode):
    """Plan field sk_stage_store (session 21, off by default): a part after a tile's head writes its
    sum into the stage slots (st.shared.v4, a proxy fence, no global stores of it, no flag of its
    own), and the producer stores them with cp.async.bulk, waits for them (wait_group.read before
    the slots' reuse, wait_group 0 then fence.proxy.async.global before the flags) and sets the
    block's 8 flags; in the key. Mode 2: a bulk group a slot, each slot reused once its group is
    read. ptxas: no wgmma serialization, spills no worse."""
    bf16 = ml_dtypes.bfloat16
    base = dict(STREAMED, **extra)
    on = ptx.compile_gemm(*shape, bf16, target="sm_90", plan=dict(base, sk_stage_store=mode))
    off = ptx.compile_gemm(*shape, bf16, target="sm_90", plan=base)
    assert on.config["sk_stage_store"] == mode if mode == 2 else on.config["sk_stage_store"].startswith("yes")
    assert off.config["sk_stage_store"] == "no"
    assert (".sst." if mode == 1 else ".sst2.") in on._core.plan_key and ".sst" not in off._core.plan_key
    groups = 256 // 8
    t_on, t_off = on.source("ptx"), off.source("ptx")
    count = lambda t, pat: len(re.findall(pat, t, re.M))  # noqa: E731
    # the part's sum in two branches (with or without a successor's added)
    # (the C epilogue's TMA stores have their own proxy fences)
    fences = r"^\s*fence\.proxy\.async\.shared::cta"
    stores = r"^\s*st\.shared\.v4\.[bf]32"
    assert count(t_on, stores) == count(t_off, stores) + 2 * groups and count(t_on, fences) == count(t_off, fences) + 2
    assert count(t_on, r"^\s*st\.global\.v4") == count(t_off, r"^\s*st\.global\.v4") - 2 * groups
    # the producer's: 3 bulk stores (128 KiB in slots of 48 KiB) wherever a store may fall due (the C
    # epilogue's TMA stores wait for their reads too), then the waits before the flags, 8 a wait
    # (LLVM merges some of the copies)
    bulk = count(t_on, r"^\s*cp\.async\.bulk\.global\.shared::cta\.bulk_group")
    reads = r"^\s*cp\.async\.bulk\.wait_group\.read 0"
    assert bulk > 0 and bulk % 3 == 0 and count(t_on, reads) > count(t_off, reads)
    waits = count(t_on, r"^\s*cp\.async\.bulk\.wait_group 0")
    assert waits > 0 and waits == count(t_on, r"^\s*fence\.proxy\.async\.global") and "fence.proxy.async.global" not in t_off
    # each wait's 8 flags released; the consumers' own flag gone (2 resets remain)
    atoms = count(t_on, r"atom\.release\.gpu\.global\.exch")
    assert atoms > 2 and (atoms - 2) % 8 == 0
    assert "cp.async.bulk.global" not in t_off
    spills = []
    for t in (t_on, t_off):
        report = ptxas(t, "sm_90")
        assert "for 'sm_90a'" in report and "Potential Performance Loss" not in report, report
        spills.append(max(spill_stores(report)))
    assert spills[0] <= spills[1] + 16, spills


def test_stream_k_debug_and_option_fields_plan_rules(ptxas):
    """sk_trace (debug: the consumers' %clock / %globaltimer_lo at each unit's boundaries, plain
    stores after the flags) and sk_prefetch (cp.async.bulk.prefetch.L2 of the successor's partial
    by the producer) only when asked for, in the key; sk_stage / sk_one_release / sk_trace /
    sk_prefetch need the in-kernel fix-up and refuse other values, naming them; sk_stage refuses
    a tile whose partial does not fit the stage slots."""
    bf16 = ml_dtypes.bfloat16
    auto = ptx.compile_gemm(1024, 4864, 8192, bf16, target="sm_90")
    assert auto.config["sk_trace"] == "no" and auto.config["sk_prefetch"] == "no" and ".trace" not in auto._core.plan_key
    tr = ptx.compile_gemm(1024, 4864, 8192, bf16, target="sm_90", plan=dict(STREAMED, sk_trace=1))
    text = tr.source("ptx")
    assert ".trace." in tr._core.plan_key and "%globaltimer_lo" in text and "%clock" in text
    assert "%globaltimer" not in auto.source("ptx")
    pf = ptx.compile_gemm(1024, 4864, 8192, bf16, target="sm_90", plan=dict(STREAMED, sk_prefetch=1))
    assert ".pf." in pf._core.plan_key and text.count("cp.async.bulk.prefetch.L2") == 0
    assert pf.source("ptx").count("cp.async.bulk.prefetch.L2.global") == 1
    for k in (tr, pf):
        report = ptxas(k.source("ptx"), "sm_90")
        assert "for 'sm_90a'" in report and "Potential Performance Loss" not in report, report
    assert auto.config["sk_stage_store"] == "no"
    for field in ("sk_trace", "sk_prefetch", "sk_one_release", "sk_stage", "sk_stage_store"):
        bad = 3 if field == "sk_stage_store" else 2
        with pytest.raises(ValueError, match=f"{field}={bad} must be 0"):
            ptx.compile_gemm(1024, 4864, 8192, bf16, target="sm_90", plan=dict(STREAMED, **{field: bad}))
        with pytest.raises(ValueError, match=f"{field}=1: .*sk_flags"):
            ptx.compile_gemm(1024, 4864, 8192, bf16, target="sm_90", plan=dict(STREAMED, sk_flags=0, **{field: 1}))
    # 128 x 256 tiles of 2 stages: 128 KiB of partial in 2 slots of 48 KiB
    with pytest.raises(ValueError, match="sk_stage=1: .*131072 bytes fill at most the 2 stage slots of 49152"):
        ptx.compile_gemm(1024, 4864, 8192, bf16, target="sm_90", plan=dict(STREAMED, stages=2, sk_stage=1))
    with pytest.raises(ValueError, match="sk_stage_store=1: .*131072 bytes fill at most the 2 stage slots of 49152"):
        ptx.compile_gemm(1024, 4864, 8192, bf16, target="sm_90", plan=dict(STREAMED, stages=2, sk_stage_store=1))
    two = ptx.compile_gemm(1024, 4864, 8192, bf16, target="sm_90", plan=dict(STREAMED, stages=2))
    assert two.config["sk_stage"] == "no" and two.config["sk_one_release"].startswith("yes")
    from coopjit import _core
    assert _core.gpu_stream_k_flags("cuda:7", 12345) == []  # no flags allocation of that device and stream


def test_wgmma_ws_stream_k_flags_plan_rules():
    """sk_flags needs a ws Stream-K plan whose grid is resident at once (workers <= the SMs);
    beyond the SMs the planner keeps the fix-up launch; bad values are refused, naming them."""
    bf16 = ml_dtypes.bfloat16
    sms = 132  # ptx's sm_90 target: an H100 SXM
    k = ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "sk", "ws": 2, "workers": sms + 1})
    assert k.config["sk_flags"].startswith("no") and k._core.fixup_ptx
    with pytest.raises(ValueError, match=f"sk_flags=1: .*workers={sms + 1} blocks fits {sms} SMs"):
        ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "sk", "ws": 2, "workers": sms + 1, "sk_flags": 1})
    with pytest.raises(ValueError, match="sk_flags=1: .*split dp"):
        ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "dp", "ws": 2, "sk_flags": 1})
    with pytest.raises(ValueError, match="sk_flags=1: .*ws=0"):
        ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "sk", "ws": 0, "sk_flags": 1})
    with pytest.raises(ValueError, match="sk_flags=1: .*inputs i8"):  # (built and tested for 16-bit inputs)
        ptx.compile_gemm(1024, 640, 2048, np.int8, target="sm_90", plan={"split": "sk", "ws": 2, "sk_flags": 1})
    with pytest.raises(ValueError, match="sk_flags=2 must be 0"):
        ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "sk", "ws": 2, "sk_flags": 2})
    assert ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "dp"}).config["sk_flags"] == "no"
    # By default where every worker's part is a tile or more (measured faster than the fix-up launch,
    # gpu_plan_internal.h's kSkFlagsDefault): the automatic plan of 133 tiles on 132 SMs streams with flags;
    # plain Stream-K whose parts are shorter than a tile (chains of waits) keeps the fix-up launch.
    auto = ptx.compile_gemm(4864, 896, 8192, bf16, target="sm_90", plan={"nr": 256}).config  # (128 x 256 tiles)
    assert auto["split"] == "sk+dp" and auto["sk_flags"].startswith("yes")
    short = ptx.compile_gemm(1000, 600, 2056, bf16, target="sm_90", plan={"split": "sk", "ws": 2, "workers": 40})
    assert short.config["sk_flags"] == "no" and short._core.fixup_ptx


def test_a_hopper_plans_own_k_tile_is_a_valid_override():
    # The planner's Stream-K K tile is 8 K steps (512 elements for kb 64); a plan handed back with it
    # must build the same kernel, where the override's range once stopped at 256.
    # (1280 x 4352: 170 tiles of 128 x 256, SK + DP; 1024 x 4864 (session 37) and 1280 x 3584 (session
    # 38), this test's shapes before, take one wave of 128 x 320 DP now)
    kern = ptx.compile_gemm(1280, 4352, 8192, ml_dtypes.bfloat16, target="sm_90")
    plan = kern.config
    assert plan["split"] == "sk+dp" and plan["kt"] > 256
    again = ptx.compile_gemm(1280, 4352, 8192, ml_dtypes.bfloat16, target="sm_90", plan={"kt": plan["kt"], "split": plan["split"]})
    assert again.config == plan
    with pytest.raises(ValueError, match=r"kt=2147483648 is out of range \[1, 2\^30\]"):
        ptx.compile_gemm(1024, 4864, 8192, ml_dtypes.bfloat16, target="sm_90", plan={"kt": 2**31})
    with pytest.raises(ValueError, match="kt=96 must be a multiple of kb=64"):
        ptx.compile_gemm(1024, 4864, 8192, ml_dtypes.bfloat16, target="sm_90", plan={"kt": 96})


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("shape", [(16, 4096, 1024), (8, 512, 64), (1, 4096, 512), (4096, 16, 1024), (100, 8, 64), (17, 3000, 100)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_pipeline_plans_products_with_at_most_16_columns(target, shape, dtype):
    # The f32 FMA pipeline's N tile of 16 gave B's panel 32 16-byte chunks a stage for 64 work-items:
    # the planner's own check refused its plan (16x4096x1024 f32). Each work-item now copies whole
    # chunks of both panels, and ptxas assembles the kernel.
    kern = ptx.compile_gemm(*shape, dtype, target=target)
    p = kern.config
    threads = 32 * int(p["sg_m"]) * int(p["sg_n"])
    esz = np.dtype(dtype).itemsize
    if int(p["stages"]):
        for rows in (int(p["mr"]) * int(p["sg_m"]), int(p["nr"]) * int(p["sg_n"])):
            assert rows * int(p["kb"]) * esz // 16 % threads == 0, p
    assert ".entry" in kern.source("ptx")
