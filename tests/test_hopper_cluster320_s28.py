"""Clusters of 2 blocks sharing B's panels (plan field cluster) on the 128 x 320 Hopper blocks (issue
16, session 28; simt_tma.cpp tma_copy_step): cuBLAS's nvjet 320 x 128 kernel runs that tile in
clusters of 2 with B multicast. The pair takes tiles at the same N and adjacent M, so B's panel is
shared: where B is K-major its 320 rows are two boxes of 160, one a block; where it is N-major they
are five boxes of 64 columns, which split 3 + 2, the block taking three alternating with the K
step's parity (rank ^ parity 0: boxes 0-2, else 3-4). N tiles of any multiple of 64 from 128 take
clusters now (before: multiples of 128), so 192 x 192 splits its three boxes 2 + 1 the same way.
Without a GPU: the modules on this machine's ptxas (skipped, saying so, without one) and the plan's
rules. On an sm_90 GPU (cuda:0; skipped, saying which, elsewhere): against NumPy in float64 (exact
int64 for int8) and bit for bit against the same plan without clusters (the same sums in the same
order): edge tiles both ways, K tails, both B orientations, layout row and col, one tile a block
and the persistent walk (odd worker counts round the grid down to pairs), alpha / beta.
Seed 1234 (conftest's rng)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import ptx
from conftest import (check_cluster_matches_plain, check_device_product as _check, check_int8_trans_b_product, needs_hopper,
                      spill_stores)

DEV = "cuda:0"
BF16 = ml_dtypes.bfloat16
W320 = {"sg_m": 8, "nr": 320, "split": "dp", "cluster": 2}
LOADS = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"

# (shape, trans_b, plan, B's boxes a tile, module sites of the producer's copies)
CASES = [
    ((2816, 1920, 8192), False, {"layout": "row"}, 5),  # N-major B: 3 + 2 boxes of 64 columns
    ((2816, 1920, 8192), True, {"layout": "row"}, 2),   # K-major B: 2 boxes of 160 rows
    ((1920, 2816, 8192), False, {"layout": "col"}, 2),  # col: the kernel's B is A, K-major
    ((2816, 1920, 8192), False, {"layout": "row", "persistent": "yes"}, 5),
    ((2816, 1920, 8192), False, {"layout": "row", "nr": 384}, 6),  # 3 + 3
    ((4864, 3072, 8192), False, {"layout": "row", "sg_m": 12, "nr": 192}, 3),  # 192 x 192: 2 + 1
]


@pytest.mark.parametrize("case", CASES)
def test_cluster_wide_modules_assemble(ptxas, case):
    """Marked for clusters of 2, B's copies multicast in this block's share of the boxes; ptxas: no wgmma serialization, the registers and spills
    of the plan without clusters (168 / 0 for the 320 tile)."""
    shape, trans_b, plan, boxes = case
    plan = dict(W320, **plan)
    kern = ptx.compile_gemm(*shape, BF16, target="sm_90", trans_b=trans_b, plan=plan)
    off = ptx.compile_gemm(*shape, BF16, target="sm_90", trans_b=trans_b, plan=dict(plan, cluster=0))
    assert str(kern.config["cluster"]).startswith("2") and off.config["cluster"] == "no"
    assert kern.config["macro_tile"] == off.config["macro_tile"]
    text, base = kern.source("ptx"), off.source("ptx")
    assert ".reqnctapercluster 2, 1, 1" in text and ".reqnctapercluster" not in base
    # per module site of the producer's copies (LLVM may duplicate the loop's): this block's share
    # of B's boxes multicast (the larger share where they are odd: h in the loop and one under the
    # lead branch), A's boxes copied to this block alone
    share = boxes - boxes // 2
    multicast = text.count(LOADS + ".multicast::cluster")
    sites, rest = divmod(multicast, share)
    assert sites >= 1 and rest == 0, (multicast, share)
    assert (text.count(LOADS) - multicast) % sites == 0 and ".multicast" not in base
    report, report0 = ptxas(text, "sm_90"), ptxas(base, "sm_90")
    assert "Potential Performance Loss" not in report, report
    assert sum(spill_stores(report)) <= sum(spill_stores(report0)), report


def test_cluster_wide_plan_rules():
    """cluster=2 on 128 x 320 is part of the kernel's name; refused naming the values where it
    cannot work: odd tiles along the kernel's M (the pair's second block would have no tile of its
    own: col 2816 x 1920's kernel M is the product's N, 1920, 15 tiles; the message names N),
    Stream-K, an N tile under 128 or not a multiple of 64."""
    c = ptx.compile_gemm(2816, 1920, 8192, BF16, target="sm_90", plan=dict(W320, layout="row"))
    assert c.config["macro_tile"] == "128x320" and "_cl2" in c.source("ptx")
    for plan, trans_b, match in (({"layout": "col"}, False, r"N=1920 \(the kernel's M under layout col\) in tiles of 128: 15"),
                                 ({"layout": "row", "split": "sk+dp"}, False, "split sk"),
                                 ({"layout": "row", "nr": 64}, False, "N tile 64"),
                                 ({"layout": "row", "nr": 136}, True, "N tile 136")):  # (K-major B: wgmma tiles of 8s)
        with pytest.raises(ValueError, match=match):
            ptx.compile_gemm(2816, 1920, 8192, BF16, target="sm_90", trans_b=trans_b, plan=dict(W320, **plan))


def test_planner_default_unchanged_without_override():
    """Without the override the planner's 128 x 320 plans keep clusters off (kClusterWideTile: they
    ran 0.4-3% slower in clusters on the H200, benchmarks/recorded/issue16-h200-cluster320-session28.md)."""
    for shape in ((2816, 1920, 8192), (4096, 2560, 8192), (1920, 2816, 8192)):
        k = ptx.compile_gemm(*shape, BF16, target="sm_90")
        assert k.config["macro_tile"] == "128x320" and k.config["cluster"] == "no", k.config


# ---- on the GPU ---------------------------------------------------------------------------------

def _hopper():
    needs_hopper(DEV, "clusters of 128 x 320 blocks")


# 1000 x 704 x 264 row: 8 M tiles (the last of 104 rows), N 704 = 2 x 320 + 64 (the third tile's
# boxes 1-4 out of range, zero-filled, still counted on both blocks' barriers), K 264 = 4 x 64 + 8.
# 704 x 1000 x 1000 row: 6 M tiles (the last of 64 rows), N 1000 = 3 x 320 + 40. layout col of
# 704 x 1000: the kernel's M is 1000 (8 tiles), its N 704.
@pytest.mark.parametrize("plan", [{"layout": "row"}, {"layout": "row", "persistent": "yes", "workers": 3},
                                  {"layout": "row", "persistent": "yes", "workers": 5}, {"layout": "row", "persistent": "no"},
                                  {"layout": "row", "tma_store": "no"}, {"layout": "row", "nr": 384},
                                  {"layout": "row", "sg_m": 12, "nr": 192}])
@pytest.mark.parametrize("out", [np.float32, BF16, np.float16])
@pytest.mark.parametrize("shape", [(1000, 704, 264), (704, 1000, 1000)])
def test_cluster_wide_gemm(rng, plan, out, shape):
    """Against float64 and bit for bit the plan without clusters; alpha / beta through gemm."""
    _hopper()
    check_cluster_matches_plain(rng, *shape, DEV, dict(W320, **plan), out)


@pytest.mark.parametrize("layout,shape", [("row", (1000, 704, 1000)), ("col", (704, 1000, 264))])
def test_cluster_wide_k_major_b(rng, layout, shape):
    """B transposed (K-major: two boxes of 160 rows, one a block) and layout col (the kernel's B is
    A, K-major): against float64 and the plan without clusters, bit for bit."""
    _hopper()
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(BF16)
    bt = rng.standard_normal((n, k)).astype(BF16)
    plan = dict(W320, layout=layout)
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, trans_b=True, plan=plan)
    off = coopjit.compile_gemm(m, n, k, BF16, device=DEV, trans_b=True, plan=dict(plan, cluster=0))
    c = kern(a, bt)
    _check(c, a, np.ascontiguousarray(bt.T), BF16)
    assert np.array_equal(c.view(np.uint8), off(a, bt).view(np.uint8))


@pytest.mark.parametrize("shape,layout,extra", [((2816, 1920, 8192), "row", {}), ((1920, 2816, 2048), "col", {}),
                                                ((4096, 2560, 1040), "row", {"persistent": "yes"}),
                                                ((4864, 3072, 1024), "row", {})])
def test_cluster_wide_gemm_large(rng, shape, layout, extra):
    """The trailing shapes' tiles (2816 x 1920: 132 tiles, one a block; 4096 x 2560: 256 on the
    persistent walk; 4864 x 3072: 380 with a ragged N edge), bf16 out, against float64."""
    _hopper()
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    kern = coopjit.compile_gemm(m, n, k, BF16, device=DEV, plan=dict(W320, layout=layout, **extra))
    assert kern.config["macro_tile"] == "128x320" and str(kern.config["cluster"]).startswith("2")
    _check(kern(a, b), a, b, BF16)


def test_cluster_wide_int8_exact(rng):
    """int8 -> int32 (B K-contiguous) in 128 x 320 clusters: exact against int64, alpha / beta."""
    _hopper()
    check_int8_trans_b_product(rng, 1000, 704, 1040, DEV, dict(W320, layout="row", ws=2),
                               lambda cfg: cfg["macro_tile"] == "128x320" and str(cfg["cluster"]).startswith("2"))
