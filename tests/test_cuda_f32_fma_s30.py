"""f32 / f64 products on NVIDIA CUDA cores (the FMA pipeline of simt_mma_pipeline.cpp, session 30):
panels contiguous along M / N stored row-major (no swizzle) and read as 16-byte vectors at
constant offsets, a K-contiguous f32 B copied transposed ([k][n], padded rows; 16-byte global loads
stored transposed from registers since session 31),
the next K step's fragments read before this one's FMAs.

The PTX tests run anywhere (the lowering compiles sm_90 code without a GPU); the products are
checked against NumPy in float64 on a GPU and skip, saying so, without one."""
import numpy as np
import pytest

import coopjit
from coopjit import _core
from conftest import assert_gemm_close, needs_cuda

DEV = "cuda:0"
PLANS = [None, {"kb": 4}, {"kb": 16}, {"sg_m": 4, "sg_n": 2}, {"sg_m": 2, "sg_n": 4}, {"stages": 2}, {"stages": 3}]


def kernel_ptx(m, n, k, plan, trans_b=False, dtype="f32"):
    sb = [1, k] if trans_b else [n, 1]
    return _core.gpu_gemm_kernel("target:sm_90", [dtype] * 3, [m, n, k, 1, 1], [k, 1, *sb, n, 1, 0, 0, 0, 0, 0, 0],
                                 False, plan or {}, None).ptx


@pytest.mark.parametrize("plan", PLANS, ids=str)
def test_named_f32_plans_keep_the_pipeline(plan):
    """Every named f32 tile of 4096^3 lowers to the shared-memory pipeline (cp.async stages, 16-byte
    shared reads), not the generic lowering: the padded B rows are counted in the plan's shared
    memory (256 x 128 blocks of 4 stages fell back to the generic loop, at half the speed, when
    they were not)."""
    ptx = kernel_ptx(4096, 4096, 4096, plan)
    assert "cp.async" in ptx and "ld.shared.v4" in ptx
    # a row-major A (the kernel's B under the column layout: K-contiguous) goes through registers
    # (16-byte global loads, stored transposed: session 31), no 4-byte copies left
    assert "ld.global.v4" in ptx and "cp.async.ca.shared.global" not in ptx


@pytest.mark.parametrize("trans_b", [False, True], ids=["a@b", "a@b.T"])
def test_k_step_reads_are_vectors_without_address_arithmetic(trans_b):
    """The 4096^3 f32 K loop: 1024 FMAs and 48 16-byte shared reads a step of 8, and (almost) no
    integer instructions between them (the swizzle's XORs and per-load address sums are gone);
    for a @ b.T both operands are K-contiguous and both are copied transposed."""
    text = kernel_ptx(4096, 4096, 4096, None, trans_b=trans_b)
    # the transposed panels through registers: 2 16-byte loads a thread a step and panel, in the
    # prologue (step 0) and the loop
    assert text.count("ld.global.v4") == (8 if trans_b else 4) and "cp.async.ca" not in text
    ptx = text.splitlines()
    commits = [i for i, line in enumerate(ptx) if "cp.async.commit_group" in line]
    last_fma = max(i for i, line in enumerate(ptx) if "fma.rn.f32" in line)
    # the K loop's body follows its commit (the last one, after the prologue's), to its last FMA
    loop = [line.strip().split()[0] if line.strip() else "" for line in ptx[commits[-1]:last_fma + 1]]
    fma = sum(op.startswith("fma.rn.f32") for op in loop)
    lds = sum(op.startswith("ld.shared") for op in loop)
    other = sum(bool(op) and not op.startswith(("fma", "ld.shared", "//", "$", "@")) for op in loop)
    assert fma == 1024 and lds == 48 and all(op != "ld.shared.b32" for op in loop)
    assert other < 64, other


@pytest.fixture
def cuda():
    needs_cuda(DEV)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(256, 512, 136), (1000, 333, 517), (129, 67, 200), (64, 48, 40), (513, 264, 72)])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_products_against_float64(cuda, rng, dtype, shape, trans_a, trans_b):
    m, n, k = shape
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-1.5, beta=0.5, trans_a=trans_a, trans_b=trans_b, device=DEV)
    assert_gemm_close(c, a.T if trans_a else a, b.T if trans_b else b, c0, -1.5, 0.5)


@pytest.mark.parametrize("plan", PLANS, ids=str)
@pytest.mark.parametrize("shape", [(512, 512, 256), (520, 264, 96), (264, 1040, 40)])
def test_named_f32_plans_against_float64(cuda, rng, plan, shape):
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    try:
        kern = coopjit.compile_gemm(m, n, k, np.float32, device=DEV, plan=plan)
    except ValueError as e:  # a named tile the shape cannot take: refused, naming it
        assert any(str(v) in str(e) for v in (plan or {}).values()), e
        return
    c = np.full((m, n), np.nan, np.float32)
    kern(a, b, c)
    assert_gemm_close(c, a, b)
