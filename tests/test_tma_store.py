"""The Hopper kernel's epilogue through shared memory with TMA stores (plan field tma_store;
simt_wgmma.cpp, tma_store): C written from each warp's staging by cp.async.bulk.tensor shared ->
global from a tensor map for C that the host makes per call (gpu_gemm.cpp), edge tiles clipped by
the copy engine, C a tensor map cannot describe (a base not 16-byte aligned, an odd stride) stored
by the lanes instead. Without a GPU: the plan's rules and every module form the planner makes
with it on this machine's ptxas (PyPI's nvidia-cuda-nvcc; skipped, saying so, without it). On an
sm_90 GPU (cuda:0; skipped, saying which, elsewhere): against NumPy in float64 / exact int64, and
bit for bit against the same plan without TMA stores (the same sums, stored another way)."""
import re

import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import check_device_product as _check, check_int8_trans_b_product, needs_hopper, spill_stores

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16


# Every module form the planner makes with TMA stores: C contiguous along the kernel's rows (layout
# col: boxes of 16-row columns, swizzle 32 / 64) or its columns (layout row: 128-byte rows, swizzle
# 128), 16-bit C (stmatrix) and 32-bit C (pairs / elements), beta C, one and two consumer warpgroups,
# the kernel without producers, int8 -> int32, Stream-K in the ws kernel, the persistent walk.
CASES = [
    ((4096, 4096, 4096), BF16, BF16, False, {}),                                  # the default: ws 2, col
    ((4096, 4096, 4096), BF16, BF16, False, {"tma_store": "yes"}),                # boxes of a warp: 32-byte lines
    ((4096, 4096, 4096), BF16, np.float32, False, {}),
    ((1000, 600, 264), BF16, np.float32, False, {"layout": "row"}),
    ((1000, 600, 264), BF16, BF16, False, {"layout": "row"}),
    ((1000, 600, 264), np.float16, np.float16, True, {"ws": "no"}),               # + beta C, no producers
    ((520, 64, 136), BF16, np.float32, False, {}),                                # one warpgroup
    ((528, 64, 144), np.int8, None, False, {}),                                   # int32 out, one warpgroup
    ((2048, 2048, 2048), np.int8, None, True, {}),                                # int8 ws 2, beta C
    ((896, 4864, 8192), BF16, BF16, False, {"split": "sk+dp", "nr": 256}),        # Stream-K in the ws kernel
    ((1000, 600, 264), BF16, np.float32, False, {"ws": 2, "persistent": "yes", "split": "dp", "workers": 3}),
]


@pytest.mark.parametrize("case", CASES)
def test_tma_store_modules_assemble(ptxas, case):
    """Each warp (the default, tma_store 2, with 16-bit C whose rows are contiguous: each
    warpgroup): wait for the buffer's previous box to be read (wait_group.read), its writes,
    fence.proxy.async.shared::cta, bar.warp.sync (the warpgroup's named barrier), one lane's
    cp.async.bulk.tensor store and commit; the kernel waits for the reads before it returns; no
    shuffles. ptxas: no wgmma serialization, no more spills than the plan without TMA stores."""
    shape, dtype, out, acc, plan = case
    kw = {"out_dtype": out} if out is not None else {}
    args = dict(target="sm_90", trans_b=dtype == np.int8, accumulate=acc, **kw)
    kern = ptx.compile_gemm(*shape, dtype, plan=plan, **args)
    cfg = kern.config
    mode = 1 if plan.get("tma_store") == "yes" else 2  # the default: 2
    assert str(cfg["tma_store"]).startswith("yes" if mode == 1 else "2") and cfg["epi_smem"] == 4096
    assert ("_tmast2" if mode == 2 else "_tmast_") in kern.source("ptx")
    text = kern.source("ptx")
    wg = mode == 2 and cfg["layout"] == "col" and cfg["c_type"] in ("bf16", "f16")  # boxes of a warpgroup
    pieces = 256 * 2 // (16 * 4 if cfg["c_type"] in ("f32", "i32") else 16 * 2)  # boxes of 128 / esz columns
    assert text.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") >= 1
    for s in ("cp.async.bulk.commit_group", "cp.async.bulk.wait_group.read 0", "fence.proxy.async.shared::cta"):
        assert s in text, s
    assert bool(re.search(r"bar\.sync\s+%r\d+, 128;", text)) == wg and (wg or "bar.warp.sync" in text)
    assert "shfl" not in text and pieces > 0
    assert ("stmatrix.sync.aligned.m8n8.x4" in text) == (cfg["c_type"] in ("bf16", "f16"))
    report = ptxas(text, "sm_90")
    assert "Potential Performance Loss" not in report, report
    off = ptx.compile_gemm(*shape, dtype, plan=dict(plan, tma_store="no"), **args)
    assert off.config["tma_store"] == "no" and "cp.async.bulk.tensor.2d.global.shared" not in off.source("ptx")
    assert sum(spill_stores(report)) <= sum(spill_stores(ptxas(off.source("ptx"), "sm_90"))), report
    if cfg["split"] != "dp":  # the fix-up kernel writes C as before (its sums are not in wgmma's fragments)
        assert "cp.async.bulk.tensor.2d.global.shared" not in kern._core.fixup_ptx


def test_tma_store_plan_fields():
    """tma_store: on by default on wgmma TMA plans (each warp's region two 2048-byte boxes, part of
    the kernel's name); off without TMA, on sm_80, without the staging; overrides other than 0 / 1, or 1 where it cannot apply, refused naming the values."""
    k = ptx.compile_gemm(4096, 4096, 4096, BF16, target="sm_90")
    assert k.config["tma_store"] == 2 and k.config["epi_smem"] == 4096
    assert ptx.compile_gemm(4096, 4096, 4096, BF16, target="sm_90", plan={"tma_store": "yes"}).config["tma_store"].startswith("yes")
    assert k.config["work_group_size"] == 384
    for target, plan in (("sm_90", {"tma": "no"}), ("sm_80", {}), ("sm_90", {"epi_smem": "no"}), ("sm_90", {"tma_store": "no"})):
        c = ptx.compile_gemm(4096, 4096, 4096, BF16, target=target, plan=plan).config
        assert c["tma_store"] == "no", (target, plan)
        assert c["epi_smem"] == (3072 if target == "sm_90" and plan.get("epi_smem") != "no" else "no"), (target, plan)
    for plan, match in (({"tma_store": 3}, "tma_store=3 must be 0"), ({"tma_store": "yes", "tma": "no"}, "tma=0"),
                        ({"tma_store": "yes", "epi_smem": "no"}, r"epi_smem, off"), ({"tma_store": "yes", "wgmma": "no"}, "wgmma=0")):
        with pytest.raises(ValueError, match=match):
            ptx.compile_gemm(4096, 4096, 4096, BF16, target="sm_90", plan=plan)
    with pytest.raises(ValueError, match="unknown plan field 'tma_stores'"):
        ptx.compile_gemm(64, 64, 64, BF16, target="sm_90", plan={"tma_stores": 1})


# ---- on the GPU ---------------------------------------------------------------------------------

def _hopper():
    needs_hopper(DEV, "no TMA stores")


@pytest.mark.parametrize("plan", [{}, {"ws": "no"}, {"layout": "row"}, {"nr": 128, "sg_n": 1},
                                  {"ws": 2, "persistent": "yes", "workers": 3}, {"tma_store": 2}, {"tma_store": 2, "ws": "no"},
                                  {"tma_store": 2, "persistent": "yes", "workers": 3}])
@pytest.mark.parametrize("out", [np.float32, BF16, np.float16])
def test_tma_store_gemm(rng, plan, out):
    """Edge tiles (1000 x 600: neither a multiple of the tile) clipped by the copy engine, C along
    the kernel's rows and columns, f32 / bf16 / f16 out, one tile a block and the persistent walk
    (a tile's last box in flight under the next tile's K loop); alpha / beta; against float64 and
    equal, bit for bit, to the plan without TMA stores."""
    _hopper()
    m, n, k = 1000, 600, 264
    dtype = np.float16 if out == np.float16 else BF16
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    plan = dict(plan, split="dp")
    kern = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out, plan=plan)
    off = coopjit.compile_gemm(m, n, k, dtype, device=DEV, out_dtype=out, plan=dict(plan, tma_store="no"))
    assert str(kern.config["tma_store"]).startswith(("yes", "2")) and off.config["tma_store"] == "no"
    c = kern(a, b)
    _check(c, a, b, out)
    assert np.array_equal(c.view(np.uint8), off(a, b).view(np.uint8))
    c0 = rng.standard_normal((m, n)).astype(out)
    got, want = c0.copy(), c0.copy()
    coopjit.gemm(a, b, got, alpha=-1.5, beta=0.5, device=DEV, plan=plan)
    coopjit.gemm(a, b, want, alpha=-1.5, beta=0.5, device=DEV, plan=dict(plan, tma_store="no"))
    _check(got, a, b, out, c0, -1.5, 0.5)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def test_tma_store_with_fused_epilogues(rng):
    """Fused epilogues (bias + relu / GELU / SiLU, a residual after the activation) compute on the
    wgmma fragments (session 21) and take TMA stores by default: the same C bit for bit as the plan
    without them (tma_store=no), against float64, an edge tile in both dimensions (clipped by the
    copy engine), and compile_gemm's kernel reports it."""
    _hopper()
    m, n, k = 1000, 600, 264
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    bias = rng.standard_normal(n).astype(np.float32)
    res = rng.standard_normal((m, n)).astype(np.float32)
    y = a.astype(np.float64) @ b.astype(np.float64) + bias
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(bias)
    erf = np.vectorize(__import__("math").erf)
    acts = {"relu": lambda v: np.maximum(v, 0), "gelu": lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))),
            "silu": lambda v: v / (1 + np.exp(-v))}
    for act, with_res in (("relu", False), ("gelu", False), ("silu", False), ("gelu", True)):
        kw = dict(bias=bias, activation=act, residual=res if with_res else None)
        kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, bias=bias, activation=act, residual=True if with_res else None)
        assert str(kern.config["tma_store"]).startswith(("yes", "2")), (act, kern.config)
        got = coopjit.matmul(a, b, device=DEV, **kw)
        off = coopjit.matmul(a, b, device=DEV, plan={"tma_store": "no"}, **kw)
        assert np.array_equal(got.view(np.uint16), off.view(np.uint16)), act
        want = acts[act](y) + (res if with_res else 0)
        # bf16 rounding of the result, the f32 sums' rounding, the activation's f32 math (a few ulp)
        tol = 2.0**-8 * np.abs(want) + 136 * 2.0**-23 * (mag + np.abs(want)) + 1e-6
        assert (np.abs(got.astype(np.float64) - want) <= tol).all(), (act, with_res)


def test_tma_store_with_fused_epilogues_in_stream_k(rng):
    """The fused epilogue (bias + SiLU + a residual) of a Stream-K plan of the warp-specialized kernel
    (the in-kernel fix-up, flags): the tile's last part adds the partials, applies the steps on the
    fragments and stores C by TMA (the partials never): bit for bit the plan without TMA stores, and
    against float64."""
    _hopper()
    m, n, k = 1024, 1024, 4096
    a = rng.standard_normal((m, k)).astype(BF16)
    b = (rng.standard_normal((k, n)) * k ** -0.5).astype(BF16)
    bias = rng.standard_normal(n).astype(np.float32)
    res = rng.standard_normal((m, n)).astype(np.float32)
    plan = {"split": "sk", "sk_flags": "yes"}
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, bias=True, activation="silu", residual=True, plan=plan)
    assert str(kern.config["tma_store"]).startswith(("yes", "2")) and kern.config["split"] == "sk", kern.config
    got = kern(a, b, bias=bias, residual=res)
    off = coopjit.compile_gemm(m, n, k, BF16, device=DEV, bias=True, activation="silu", residual=True,
                               plan=dict(plan, tma_store="no"))(a, b, bias=bias, residual=res)
    assert np.array_equal(got.view(np.uint16), off.view(np.uint16))
    y = a.astype(np.float64) @ b.astype(np.float64) + bias
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(bias)
    want = y / (1 + np.exp(-y)) + res
    tol = 2.0**-8 * np.abs(want) + k * 2.0**-23 * (mag + np.abs(want)) + 1e-6
    assert (np.abs(got.astype(np.float64) - want) <= tol).all()


@pytest.mark.parametrize("layout", ["col", "row"])
def test_tma_store_views_and_fallback(rng, layout):
    """out= views of torch tensors: 16-byte aligned (a row stride of 640, 16 elements on: TMA
    stores clipped to the view), 2 elements on (a base a tensor map cannot take: the lanes store
    it) and an odd row stride (601: the same); through compile_gemm's kernel and through the
    prepared launch of coopjit.gemm (the per-call cache; its fall-back launch made at the first
    unaligned C, the tensor maps made again for each other C). Nothing outside the view written."""
    _hopper()
    torch = pytest.importorskip("torch")
    m, n, k = 1000, 600, 264
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    ta, tb = (torch.from_numpy(x.astype(np.float32)).cuda().bfloat16() for x in (a, b))
    plan = {"split": "dp", "layout": layout}
    for cols, first in ((640, 16), (640, 2), (601, 0), (640, 16), (640, 8)):
        c0 = rng.standard_normal((m + 8, cols)).astype(np.float32)
        for call in range(2):  # the second through the prepared launch
            tc = torch.from_numpy(c0).cuda()
            view = tc[8:, first:first + n]
            coopjit.gemm(ta, tb, view, alpha=-1.5, beta=0.5, plan=plan)
            torch.cuda.synchronize()
            got = tc.cpu().numpy()
            _check(got[8:, first:first + n], a, b, np.float32, c0[8:, first:first + n], -1.5, 0.5)
            got[8:, first:first + n] = c0[8:, first:first + n]
            assert np.array_equal(got, c0), (cols, first, call)  # nothing written outside the view


def test_tma_store_int8_copies_and_unaligned_out(rng):
    """int8 with B contiguous along N (copied K-major first, plan field kmajor) into int32 out= views
    of a torch tensor: 16-byte aligned (TMA stores) and one element on (the launch without them),
    each twice (the prepared launch); exact against int64, nothing outside the view written."""
    _hopper()
    torch = pytest.importorskip("torch")
    m, n, k = 520, 400, 528
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    ref = a.astype(np.int64) @ b.astype(np.int64)
    for first in (4, 1, 4, 1):
        c0 = rng.integers(-1000, 1000, (m, 416)).astype(np.int32)
        for _ in range(2):
            tc = torch.from_numpy(c0).cuda()
            coopjit.matmul(ta, tb, out=tc[:, first:first + n])
            torch.cuda.synchronize()
            got = tc.cpu().numpy()
            assert (got[:, first:first + n].astype(np.int64) == ref).all(), first
            got[:, first:first + n] = c0[:, first:first + n]
            assert np.array_equal(got, c0), first


@pytest.mark.parametrize("shape,plan", [((520, 400, 528), {}), ((1040, 4112, 528), {}), ((528, 272, 1040), {"nr": 128, "sg_n": 1}),
                                        ((528, 272, 2064), {"ws": "yes", "split": "sk+dp", "workers": 7})])
def test_tma_store_int8_exact(rng, shape, plan):
    """int8 -> int32 through TMA stores (boxes of 16 x 32, swizzle 64): edge tiles, one and two
    consumer warpgroups, the persistent walk over more than a wave (1040 x 4112), Stream-K in the
    ws kernel; alpha / beta; exact against int64."""
    _hopper()
    m, n, k = shape
    check_int8_trans_b_product(rng, m, n, k, DEV, plan, lambda cfg: cfg["tma_store"] == 2)


@pytest.mark.parametrize("split,workers,mode", [("sk+dp", 7, 1), ("sk", 7, 1), ("dp+sk", 5, 1), ("sk+dp", 7, 2), ("sk", 7, 2)])
def test_tma_store_stream_k(rng, split, workers, mode):
    """Stream-K in the ws kernel: whole tiles by TMA stores, partial tiles to the workspace through
    the same staging (after the last store's read), the fix-up launch's C by the lanes; edge
    tiles, a K tail; bf16 out; against float64 and equal to the plan without TMA stores."""
    _hopper()
    m, n, k = 520, 776, 1000
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    plan = {"split": split, "ws": 2, "workers": workers, "tma_store": mode}
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, plan=plan)
    assert str(kern.config["tma_store"]).startswith("yes" if mode == 1 else "2") and kern.config["split"] == split
    c = kern(a, b)
    _check(c, a, b, BF16)
    off = coopjit.compile_gemm(m, n, k, BF16, device=DEV, plan=dict(plan, tma_store="no"))
    assert np.array_equal(c.view(np.uint8), off(a, b).view(np.uint8))
