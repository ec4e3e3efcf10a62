"""Session 28's audit of what session 27 added (plan cycles / c_prefetch, the K split on the tile
walk, the long-K float walk, row sums in levels and axis 0 of short rows, K-split alpha = +-inf)
and of what it left: each test is a bug the audit found or a gap it closed (it failed before its
fix). Records: benchmarks/recorded/audit-zen5-session28.txt."""
import os
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import check_int8_trans_b_product

BF16 = ml_dtypes.bfloat16


def _cancelling_operands(dtype, k=8192):
    """a @ b whose parts of K are large and cancel: the first half of K adds +X, the second -X but
    for its last element, -X + small; every partial sum in any order is exact (multiples of small
    within the type's precision), the total is `small`. Returns a, b, X * k / 2 (a half's sum)
    and small."""
    x, small = (2.0**500, 2.0**460) if dtype == np.float64 else (2.0**20, 4096.0)
    a = np.ones((4, k), dtype)
    b = np.empty((k, 5), dtype)
    b[: k // 2] = x
    b[k // 2 :] = -x
    b[-1] = -x + small
    b[:, 1] = -b[:, 1]
    return a, b, x * k / 2, small


_PLANS = [None, {"order": "k_outer", "ksplit": 2, "threads": 2}, {"order": "k_outer", "ksplit": 5, "threads": 3},
          {"order": "m_inner", "ksplit": 3, "threads": 2}, {"order": "m_inner", "threads": 1}, {"pack": 1, "threads": 1},
          {"split": "sk", "threads": 2}]


@pytest.mark.parametrize("plan", _PLANS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_large_finite_alpha_scales_the_whole_sum(plan, dtype, sign):
    # The kernels scale each part of a split K (ksplit parts, the tile walk's blocks of 2048 K, the
    # packed nest's K blocks) by alpha before adding them: alpha * part overflowed where alpha *
    # (a @ b) fits (f32: alpha 1e33, parts of 2^31, total 4096: NaN where NumPy's is 4.1e36).
    a, b, half, small = _cancelling_operands(dtype)
    top = float(np.finfo(dtype).max)
    alpha = sign * top / small / 8  # alpha * total fits; alpha * a part does not
    assert abs(alpha) * half / 4 > top  # (a quarter of a part still overflows scaled)
    a0, b0 = a.copy(), b.copy()
    want = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    assert np.isfinite(want).all()
    got = coopjit.gemm(a, b, alpha=alpha, plan=plan)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6)
    # into a strided view of c with beta: c's values before are taken once, nothing else written
    big = np.full((12, 12), 7.0, dtype)
    view = big[1:9:2, 2:12:2]
    view[...] = np.arange(20).reshape(4, 5)
    c0 = view.astype(np.float64)
    coopjit.gemm(a, b, view, alpha=alpha, beta=0.5, plan=plan)
    np.testing.assert_allclose(view.astype(np.float64), want + 0.5 * c0, rtol=1e-6)
    mask = np.ones(big.shape, bool)
    mask[1:9:2, 2:12:2] = False
    assert (big[mask] == 7.0).all()
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_alpha_keeps_numpy_s_overflow_and_nan(dtype):
    # Where alpha * (a @ b) itself overflows, or an input is NaN, the result is NumPy's (the
    # product computed again with alpha applied once gives the same infinities and NaN).
    a, b, _, small = _cancelling_operands(dtype)
    top = float(np.finfo(dtype).max)
    alpha = top / small * 4  # alpha * total overflows too
    a = a.copy()
    a[2, 7] = np.nan
    with np.errstate(all="ignore"):
        want = (alpha * (a.astype(np.float64) @ b.astype(np.float64))).astype(dtype)
    got = coopjit.gemm(a, b, alpha=alpha)
    np.testing.assert_array_equal(got, want)
    assert np.isinf(got[0]).all() and np.isnan(got[2]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_kernel_with_large_alpha_scales_the_whole_sum(dtype):
    a, b, _, small = _cancelling_operands(dtype)
    alpha = -np.finfo(dtype).max / small / 8
    want = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    kern = coopjit.compile_gemm(4, 5, a.shape[1], dtype)
    np.testing.assert_allclose(kern(a, b, alpha=alpha).astype(np.float64), want, rtol=1e-6)
    kern = coopjit.compile_gemm(4, 5, a.shape[1], dtype, accumulate=True)
    c = np.arange(20, dtype=dtype).reshape(4, 5)
    c0 = c.astype(np.float64)
    out = kern(a, b, c, alpha=alpha, beta=2.0)
    assert out is c
    np.testing.assert_allclose(c.astype(np.float64), want + 2.0 * c0, rtol=1e-6)
    # an epilogue operand the kernel was compiled without is still refused
    with pytest.raises(ValueError, match="compiled without an epilogue"):
        kern(a, b, alpha=alpha, bias=np.zeros(5, dtype))
    with pytest.raises(ValueError, match="compiled without an epilogue"):
        kern(a, b, alpha=np.inf, bias=np.zeros(5, dtype))


def test_large_alpha_on_ordinary_data_is_unchanged(rng):
    # the check reads C and takes nothing else: ordinary products with alpha 3 as before
    a = rng.standard_normal((33, 3000)).astype(np.float32)
    b = rng.standard_normal((3000, 17)).astype(np.float32)
    c = rng.standard_normal((33, 17)).astype(np.float32)
    want = 3.0 * (a.astype(np.float64) @ b) - 2.0 * c
    got = coopjit.gemm(a, b, c.copy(), alpha=3.0, beta=-2.0)
    scale = 3.0 * (np.abs(a.astype(np.float64)) @ np.abs(b)) + 2.0 * np.abs(c)
    assert (np.abs(got - want) / scale).max() < 1e-5


_OOM_SCRIPT = """
import resource, numpy as np, ml_dtypes, coopjit
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
a = np.ones((2048, 2048), np.float32)
plan = {"order": "k_outer", "ksplit": 512, "kt": 4, "pack": 0}
for x, kw, p in ((a, {}, plan), (a, {"bias": np.ones(2048, np.float32)}, plan), (a.astype(ml_dtypes.bfloat16), {}, plan),
                 (a, {}, dict(plan, order="m_inner"))):
    try:
        coopjit.gemm(x, x, plan=p, **kw)
        print("no error")
    except MemoryError as e:
        print("MemoryError:", e)
# the process goes on: the same products with a plan that fits
print(coopjit.gemm(a[:4], a[:, :5], plan={"order": "k_outer", "ksplit": 4})[0, 0], coopjit.gemm(a, a)[0, 0])
"""


@pytest.mark.skipif(any("asan" in os.environ.get(v, "").lower() for v in ("LD_PRELOAD", "ASAN_OPTIONS")),
                    reason="an address-space limit and AddressSanitizer's shadow memory do not mix")
def test_ksplit_scratch_past_memory_is_a_memory_error_naming_it():
    # The K split's blocks of partial sums past the memory (here the process's address space: 3
    # GiB for 511 blocks of 16 MiB) raised MemoryError("std::bad_alloc"), naming nothing.
    r = subprocess.run([sys.executable, "-c", _OOM_SCRIPT], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 5, r.stdout
    for line in lines[:4]:
        assert re.fullmatch(r"MemoryError: gemm: cannot allocate \d+ bytes \(8\d\d\d MiB\) for the K split's 51[12] "
                            r"blocks of partial sums of 2048 x 2048 \(plan ksplit=512; a smaller ksplit needs less\)",
                            line), line
    assert lines[4] == "2048.0 2048.0"


def test_int8_trans_b_product_helper_on_the_cpu(rng, monkeypatch):
    # conftest.check_int8_trans_b_product is the GPU files' int8 test body (they skip without a
    # Hopper GPU): here on the CPU, where it passes, and catches one wrong element of either call.
    check_int8_trans_b_product(rng, 70, 45, 300, "cpu", {"threads": 2}, lambda cfg: cfg["threads"] == 2)
    with pytest.raises(AssertionError):
        check_int8_trans_b_product(rng, 70, 45, 300, "cpu", {}, lambda cfg: cfg["threads"] == 1000)
    real = coopjit.gemm

    def off_by_one(a, b, c=None, **kw):
        r = real(a, b, c, **kw)
        r[3, 4] += 1
        return r

    monkeypatch.setattr(coopjit, "gemm", off_by_one)
    with pytest.raises(AssertionError):
        check_int8_trans_b_product(rng, 70, 45, 300, "cpu", {}, lambda cfg: True)


@pytest.mark.parametrize("nr", [264, 288, 296, 304, 312, 352, 376])
def test_wide_hopper_tile_that_does_not_load_whole_boxes_is_refused(nr):
    # 128 x nr wgmma blocks past 256 with a K-major B (nr a multiple of 8) passed the plan check
    # and failed in the lowering: RuntimeError "the K loop planned for wgmma does not match its
    # pipeline" (B's rows load in TMA boxes of 64 rows past 256). Now a ValueError naming nr; 320
    # and 384 still compile. (PTX for sm_90 is generated here without a GPU.)
    from coopjit import ptx
    plan = {"sg_m": 8, "nr": nr, "layout": "row", "split": "dp"}
    with pytest.raises(ValueError, match=f"plan wgmma nr={nr}: tiles wider than 256 load B in TMA boxes of 64 rows"):
        ptx.compile_gemm(2816, 1920, 4096, BF16, target="sm_90", trans_b=True, plan=plan)
    for ok in (320, 384):
        kern = ptx.compile_gemm(2816, 1920, 4096, BF16, target="sm_90", trans_b=True, plan=dict(plan, nr=ok))
        assert kern.config["macro_tile"] == f"128x{ok}"
        assert "wgmma.mma_async" in kern.source("ptx")
