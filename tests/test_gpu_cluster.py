"""Clusters of 2 blocks sharing B's panels in the Hopper warp-specialized kernel (plan field cluster;
simt_tma_ws.cpp): the blocks of a pair take tiles at the same N and adjacent M, each copies its A
panel and half of B's boxes, multicast by TMA into both blocks' slot; each consumer warp releases
a slot on both blocks' empty barrier. Without a GPU: the plan's rules and every module form the
planner makes with it on this machine's ptxas (PyPI's nvidia-cuda-nvcc; skipped, saying so,
without it). On an sm_90 GPU (cuda:0; skipped, saying which, elsewhere): against NumPy in float64
/ exact int64, and bit for bit against the same plan without clusters (the same sums in the same
order)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import (check_cluster_matches_plain, check_device_product as _check, check_int8_trans_b_product, needs_hopper,
                      spill_stores)

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16


# Every module form clusters take: B K-contiguous (layout col: boxes of 128 rows, one a block) and
# N-contiguous (layout row: boxes of 64 columns, two a block), a producer warpgroup (ws 2) and a
# producer warp (ws 1), one tile a block and the persistent walk, 16-bit and f32 C, the staged
# epilogue with and without TMA stores, one consumer warpgroup (N tiles of 128), int8 -> int32.
CASES = [
    ((4096, 4096, 4096), BF16, BF16, {"cluster": 2}),
    ((4096, 4096, 4096), BF16, BF16, {"cluster": 2, "persistent": "yes"}),
    ((4096, 4096, 4096), BF16, np.float32, {"cluster": 2, "layout": "row"}),
    ((1000, 704, 264), np.float16, np.float16, {"cluster": 2, "ws": "yes", "tma_store": "no"}),
    ((1000, 704, 264), BF16, BF16, {"cluster": 2, "nr": 128, "sg_n": 1, "group_m": 2}),
    ((2048, 2048, 2048), np.int8, None, {"cluster": 2}),
]


@pytest.mark.parametrize("case", CASES)
def test_cluster_modules_assemble(ptxas, case):
    """The kernel is marked for clusters of 2 (.reqnctapercluster), its B copies are multicast
    (half the boxes of the plan without clusters, a mask of both blocks), its consumers' releases
    go through mapa to both blocks' barriers, and it ends at a cluster barrier. ptxas: no wgmma
    serialization, no more spills than the same plan without clusters."""
    shape, dtype, out, plan = case
    kw = {"out_dtype": out} if out is not None else {}
    args = dict(target="sm_90", trans_b=dtype == np.int8, **kw)
    plan = dict(plan, split="dp")
    kern = ptx.compile_gemm(*shape, dtype, plan=plan, **args)
    off = ptx.compile_gemm(*shape, dtype, plan=dict(plan, cluster="no"), **args)
    assert str(kern.config["cluster"]).startswith("2") and off.config["cluster"] == "no"
    text, base = kern.source("ptx"), off.source("ptx")
    assert ".reqnctapercluster 2, 1, 1" in text and ".reqnctapercluster" not in base
    loads = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
    multicast = text.count(loads + ".multicast::cluster")
    assert multicast >= 1 and ".multicast" not in base
    # the producer's copies: A's boxes as before, B's half of them (multicast)
    assert text.count(loads) - multicast < base.count(loads)
    assert "mapa.shared::cluster.u32" in text and "mbarrier.arrive.shared::cluster.b64" in text
    assert "barrier.cluster.arrive.release" in text and "barrier.cluster.wait.acquire" in text
    # the remote arrivals at CTA scope: .release.cluster put two MEMBAR.ALL.GPU before each (SASS),
    # a step and warp, and ran the kernel at 0.46x on the H100
    assert "mbarrier.arrive.release.cluster" not in text
    assert "barrier.cluster" not in base and "mapa" not in base
    report = ptxas(text, "sm_90")
    assert "Potential Performance Loss" not in report, report
    # (the producer warp's kernel, ws 1, has no setmaxnreg: 168 registers, and spills without
    # clusters too: f16 1000 x 704, 604 bytes, 640 with)
    assert sum(spill_stores(report)) <= sum(spill_stores(ptxas(base, "sm_90"))) + (64 if plan.get("ws") == "yes" else 0), report


def test_cluster_plan_fields():
    """cluster: off by default; 2 where the ws DP plan's tiles along M are even (part of the
    kernel's name; B's tensor-map boxes halve); refused naming the values elsewhere: odd tiles
    along M, Stream-K, no ws, odd group_m, values other than 0 / 2."""
    k = ptx.compile_gemm(4096, 4096, 4096, BF16, target="sm_90")
    assert k.config["cluster"] == "no" and "_cl2" not in k.source("ptx")
    c = ptx.compile_gemm(4096, 4096, 4096, BF16, target="sm_90", plan={"cluster": 2, "split": "dp"})
    assert str(c.config["cluster"]).startswith("2") and c.config["ws"] == 2 and c.config["work_group_size"] == 384
    # layout col (row-major A and B): the kernel's M is N; 4224 / 128 = 33 tiles
    for plan, shape, match in (({"cluster": 2}, (4096, 4224, 4096), r"33"),
                               ({"cluster": 2, "split": "sk+dp"}, (4096, 4096, 4096), "split sk"),
                               ({"cluster": 2, "ws": "no"}, (4096, 4096, 4096), "ws=0"),
                               ({"cluster": 2, "group_m": 3}, (4096, 4096, 4096), "group_m=3"),
                               ({"cluster": 1}, (4096, 4096, 4096), "cluster=1 must be 0"),
                               ({"cluster": 2, "tma": "no"}, (4096, 4096, 4096), "ws=0")):
        with pytest.raises(ValueError, match=match):
            ptx.compile_gemm(*shape, BF16, target="sm_90", plan=dict({"split": "dp", "layout": "col"}, **plan))


# ---- on the GPU ---------------------------------------------------------------------------------

def _hopper():
    needs_hopper(DEV, "no clusters")


# 1000 x 704 x 264: edge tiles along both (zero-filled copies, clipped stores), a K tail; layout col:
# the kernel's M is 704 (6 tiles of 128), row: 1000 (8).
@pytest.mark.parametrize("plan", [{}, {"layout": "row"}, {"persistent": "yes", "workers": 4}, {"persistent": "yes", "workers": 3},
                                  {"ws": "yes"}, {"nr": 128, "sg_n": 1}, {"tma_store": "no"}, {"group_m": 2, "persistent": "yes", "workers": 2}])
@pytest.mark.parametrize("out", [np.float32, BF16, np.float16])
def test_cluster_gemm(rng, plan, out):
    """Against float64 and bit for bit the plan without clusters; alpha / beta; the persistent walk
    (several tiles a block: workers 4, and 3, whose grid is rounded down to 2 blocks)."""
    _hopper()
    check_cluster_matches_plain(rng, 1000, 704, 264, DEV, dict(plan, split="dp", cluster=2), out)


@pytest.mark.parametrize("shape", [(2048, 2048, 2048), (1024, 4864, 1000)])
def test_cluster_gemm_large(rng, shape):
    """Many tiles (128 and 152: more than the SMs; one tile a block and the persistent walk), bf16 out,
    against float64."""
    _hopper()
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    for extra in ({}, {"persistent": "yes"}):
        got = coopjit.matmul(a, b, device=DEV, plan=dict(extra, split="dp", cluster=2))
        _check(got, a, b, BF16)


def test_cluster_int8_exact(rng):
    """int8 -> int32 (B K-contiguous) in clusters: exact against int64, alpha / beta."""
    _hopper()
    m, n, k = 1000, 700, 1040  # tiles of 128 x 256: 8 x 3 or 6 x 4 (either orientation)
    plan = {"cluster": 2, "split": "dp", "sg_m": 8, "nr": 256, "ws": 2}  # (8-bit plans of under a wave: no ws by default)
    check_int8_trans_b_product(rng, m, n, k, DEV, plan, lambda cfg: str(cfg["cluster"]).startswith("2"))
