"""Stream-K's seam inside a cluster pair through distributed shared memory (plan field sk_pair,
gemm_recipe_gpu.cpp / simt_tma_ws.cpp ws_pair_send): blocks 2c and 2c + 1 launched as a cluster of
2; the tail part of the tile they share is written by block 2c + 1 into block 2c's stage slots
(st.shared::cluster) instead of the workspace; the seams between pairs keep the workspace and
flags.

- The planner's checks (here, without a GPU: the sm_90 target by name): what sk_pair needs, each
  refusal naming the offending values; the PTX of a pair plan (a cluster of 2, the remote stores
  and arrivals, no multicast) through ptxas where it is installed.
- On an sm_90 GPU (skipped elsewhere, saying why): C against NumPy in float64 and bit-identical to
  the same plan without sk_pair (the same partial sums added in the same order), over one, two and
  many split tiles, seams inside and between pairs, DP tiles after the Stream-K parts, edges in M /
  N / K, bf16 / f16 inputs and f32 / 16-bit C, each kernel called three times (barriers re-made,
  the flags reset by each launch)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import _core
from conftest import needs_hopper, spill_stores

DEV = "cuda:0"
BASE = {"layout": 1, "sg_m": 8, "nr": 256, "split": 2, "sk_flags": 1, "ws": 2}  # the core's overrides (layout 1: col, split 2: sk+dp)
PLAN = {"layout": "col", "sg_m": 8, "nr": 256, "split": "sk+dp", "sk_flags": "yes"}  # coopjit.compile_gemm's


def _plan(shape, ov, types=("bf16", "bf16", "f32")):
    m, n, k = shape
    strides = [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0]
    return _core.gpu_gemm_kernel("target:sm_90", list(types), [m, n, k, 1, 1], strides, False, ov, None)


def test_pair_plan_key_fields_and_default_off():
    """sk_pair is off by default (the planner's plan for the SK shapes of session 24 has no .pair);
    asked for, the key takes .pair and the config says what it does."""
    # (the tile named: the planner's own is 128 x 320 DP, on 2816 x 1920 since session 27, on
    # 1024 x 4864 (with an edge, one wave) since session 37)
    for shape, tile in (((1024, 4864, 8192), {"sg_m": 8, "nr": 256}), ((2816, 1920, 8192), {"sg_m": 8, "nr": 256})):
        auto = _plan(shape, tile)
        assert ".skdp." in auto.plan_key and ".pair" not in auto.plan_key
        pair = _plan(shape, dict(tile, sk_pair=1))
        assert pair.plan_key == auto.plan_key.replace(".rel1.", ".rel1.pair.")


@pytest.mark.parametrize("shape,ov,words", [
    ((2816, 1920, 2048), {"sk_stage": 0}, ["sk_stage 1, not 0"]),
    ((2816, 1920, 2048), {"sk_stage_store": 1}, ["sk_stage_store / sk_prefetch / sk_trace (1 / 0 / 0)"]),
    ((2816, 1920, 2048), {"sk_prefetch": 1}, ["(0 / 1 / 0)"]),
    ((2816, 1920, 2048), {"workers": 131}, ["an even number of workers (131)"]),
    ((1024, 1024, 2048), {"split": 1}, ["a tile or more (128 iterations over 132 workers, 4 a tile)"]),
    ((2816, 1920, 2048), {"sk_pair": 2}, ["plan override sk_pair=2 must be 0 (no) or 1"]),
])
def test_pair_refusals_name_the_values(shape, ov, words):
    """Each condition of sk_pair refused with a UserError naming the values. 2816x1920x2048: 165
    tiles of 128 x 256 over 4 K tiles of 512 (SK + DP: all 165 streamed, 5 K tiles a worker);
    1024x1024x2048 plain Stream-K: 32 tiles, 128 iterations over 132 workers (under a tile each)."""
    with pytest.raises(Exception) as e:
        _plan(shape, {**BASE, "sk_pair": 1, **ov})
    for w in words:
        assert w in str(e.value), str(e.value)


def test_pair_taken_where_its_conditions_hold():
    """The same plans with the conditions met: 2816x1920x2048 (132 workers), plain Stream-K over 64
    workers with K tiles of 64 (165 x 32 iterations, 82 a worker, 32 a tile)."""
    assert ".pair" in _plan((2816, 1920, 2048), dict(BASE, sk_pair=1)).plan_key
    assert ".pair" in _plan((2816, 1920, 2048), dict(BASE, sk_pair=1, split=1, workers=64, kt=64)).plan_key


def test_pair_refused_without_the_ws_stream_k_kernel():
    """A DP plan (no Stream-K) or a plan without the in-kernel flags cannot take sk_pair."""
    for ov in ({"split": 0, "sk_flags": 0}, {"sk_flags": 0}):
        with pytest.raises(Exception) as e:
            _plan((2816, 1920, 2048), dict(BASE, sk_pair=1, **ov))
        assert "plan override sk_pair=1: the pair exchange needs" in str(e.value), str(e.value)


def test_pair_ptx_cluster_remote_stores(ptxas):
    """The pair plan's PTX: a cluster of 2 (no multicast copies), the partner's mailbox / ready
    barrier and its data barrier reached through mapa, the partial's 16-byte remote stores (32 a
    work-item: 128 x 256 f32 over 256 consumer work-items), cluster barriers; the plan without
    sk_pair has none of them. ptxas (sm_90a) takes it; spills printed as a fact."""
    shape, tile = (1024, 4864, 8192), {"sg_m": 8, "nr": 256}  # (the SK + DP tile, named: see above)
    base, pair = _plan(shape, tile), _plan(shape, dict(tile, sk_pair=1))
    p = pair.ptx
    assert ".reqnctapercluster 2, 1, 1" in p and ".multicast::cluster" not in p
    assert p.count("st.shared::cluster.v4.f32") == 32 and p.count("mbarrier.arrive.release.cluster.shared::cluster.b64") == 2
    assert p.count("mbarrier.try_wait.parity.acquire.cluster") == 2 and "barrier.cluster.arrive" in p
    assert not any(w in base.ptx for w in ("reqnctapercluster", "mapa.", "st.shared::cluster", "barrier.cluster"))
    report = ptxas(p, "sm_90a")
    print("sk_pair 1024x4864x8192 spill stores:", spill_stores(report), "(without:", spill_stores(ptxas(base.ptx, "sm_90a")), ")")


# ---- on the GPU ---------------------------------------------------------------------------------

@pytest.fixture()
def hopper():
    needs_hopper(DEV, "no wgmma or clusters")


def _check(c, a, b):
    """c against float64: products of 16-bit floats exact in f32, sums rounded in f32; 16-bit C
    also rounded once at the end."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    rel = 2.0**-8 if c.dtype == ml_dtypes.bfloat16 else 2.0**-11 if c.dtype == np.float16 else 0.0
    bound = (a.shape[-1] + 4) * 2.0**-23 * mag + rel * np.abs(ref) + 1e-30
    err = np.abs(c.astype(np.float64) - ref)
    assert np.isfinite(c.astype(np.float32)).all() and (err <= bound).all(), (err - bound).max()


# (shape, plan extras, what it covers); the plans' workers even, every range a tile or more
CASES = [
    ((1024, 4864, 1024), {}, "152 tiles over the SMs, all streamed: many split tiles, seams inside and between pairs"),
    ((256, 384, 1024), {"workers": 2}, "3 tiles over 2 workers: one split tile, inside the pair"),
    ((768, 384, 1024), {"workers": 4}, "9 tiles: 4 DP, 5 streamed over 4 workers: seams in pair 0, between the pairs, in pair 1"),
    ((1024, 1280, 1536), {"workers": 6}, "40 tiles: 30 DP, 10 streamed over 6: a pair without a seam, two seams between pairs"),
    ((520, 264, 2056), {"workers": 4}, "edge tiles in M and N, a K tail of 8 in the last K tile"),
    ((264, 1000, 1000), {"workers": 6, "kt": 64}, "16 K tiles of 64 (the last of 40), edges, 10 tiles streamed over 6"),
]


@pytest.mark.parametrize("dt,out", [(ml_dtypes.bfloat16, np.float32), (np.float16, np.float32), (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
                                    (np.float16, np.float16)])
@pytest.mark.parametrize("shape,extra,what", CASES, ids=[f"{s[0]}x{s[1]}x{s[2]}" for s, _, _ in CASES])
def test_pair_matches_float64_and_the_plan_without_it(hopper, rng, dt, out, shape, extra, what):
    m, n, k = shape
    plan = dict(PLAN, **extra)
    a = rng.standard_normal((m, k)).astype(dt)
    b = rng.standard_normal((k, n)).astype(dt)
    old = coopjit.compile_gemm(m, n, k, dt, device=DEV, out_dtype=out, plan=plan)
    new = coopjit.compile_gemm(m, n, k, dt, device=DEV, out_dtype=out, plan=dict(plan, sk_pair=1))
    assert new.config["sk_pair"].startswith("yes") and old.config["sk_pair"] == "no"
    want = old(a, b)
    _check(want, a, b)
    for _ in range(3):
        got = new(a, b)
        _check(got, a, b)
        assert np.array_equal(got, want), what
