"""Workers over the flattened tile space (seeds/004): data-parallel, Stream-K and 2-tile
Stream-K + DP give NumPy's result, deterministically, on shapes where the splits differ."""
import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close


def seed_n_sk(tiles_mn, tiles_k, wg):
    """numTilesSK of seeds/004 for 2-tile Stream-K (all DP when the tiles divide evenly)."""
    total = tiles_mn * tiles_k
    if total % (wg * tiles_k) == 0:
        return 0
    n_dp = ((tiles_mn * tiles_k) // (wg * tiles_k) - 1) * wg * tiles_k
    return total - max(0, n_dp)


def test_split_formula_matches_the_seed():
    # The document's example: 10 x 12 macro tiles, 512 K iterations, 32 workgroups.
    assert coopjit._core.stream_k_tiles("sk+dp", 120, 512, 32) == 28672
    assert 120 * 512 - coopjit._core.stream_k_tiles("sk+dp", 120, 512, 32) == 32768
    for tiles_mn in range(1, 40):
        for tiles_k in (1, 2, 7):
            for wg in (1, 2, 3, 4, 8):
                want = 0 if wg == 1 else seed_n_sk(tiles_mn, tiles_k, wg)
                if wg > 1 and tiles_mn < wg:
                    want = tiles_mn * tiles_k  # fewer output tiles than workers: all stream
                got = coopjit._core.stream_k_tiles("sk+dp", tiles_mn, tiles_k, wg)
                assert got == want, (tiles_mn, tiles_k, wg)
                assert coopjit._core.stream_k_tiles("dp", tiles_mn, tiles_k, wg) == 0
                if wg > 1:
                    assert coopjit._core.stream_k_tiles("sk", tiles_mn, tiles_k, wg) == tiles_mn * tiles_k


# Shapes with an uneven number of output tiles and several K tiles, so that the three splits
# really differ: SK ranges start mid-tile and partial tiles meet through the workspace.
CASES = [(37, 70, 1000), (100, 33, 777), (13, 13, 2049), (250, 190, 300), (5, 1, 4097)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("split", ["dp", "sk", "sk+dp"])
@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("m,n,k", CASES)
def test_splits_match_numpy(rng, dtype, split, threads, m, n, k):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    plan = {"split": split, "threads": threads, "kt": 128}
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=1.5, beta=-0.5, plan=plan)
    assert_gemm_close(c, a, b, c0, 1.5, -0.5)


@pytest.mark.parametrize("split", ["sk", "sk+dp"])
def test_stream_k_is_deterministic(rng, split):
    a = rng.standard_normal((45, 3000)).astype(np.float32)
    b = rng.standard_normal((3000, 50)).astype(np.float32)
    plan = {"split": split, "threads": 3, "kt": 64}
    first = coopjit.matmul(a, b, plan=plan)
    for _ in range(5):
        np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), first)


def test_plan_records_the_split_and_threads():
    k = coopjit.compile_gemm(512, 512, 512, np.float32, plan={"split": "sk", "threads": 2, "kt": 64})
    cfg = k.config
    assert cfg["split"] == "sk" and cfg["threads"] == 2 and cfg["kt"] == 64
    small = coopjit.compile_gemm(8, 8, 8, np.float32).config
    assert small["threads"] == 1 and small["split"] == "dp"


def test_num_threads_setting():
    n = coopjit.get_num_threads()
    assert n >= 1
    try:
        coopjit.set_num_threads(1)
        assert coopjit.compile_gemm(1024, 1024, 1024, np.float32).config["threads"] == 1
    finally:
        coopjit.set_num_threads(n)
    with pytest.raises(ValueError, match="at least 1, got 0"):
        coopjit.set_num_threads(0)


def test_bad_split_override():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="split must be one of dp, sk, sk\\+dp, dp\\+sk, got 'stream'"):
        coopjit.matmul(a, a, plan={"split": "stream"})
    with pytest.raises(ValueError, match="kt=100 must be a multiple of kb=8"):
        coopjit.matmul(a, a, plan={"kt": 100, "kb": 8})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("split", ["dp", "sk+dp"])
@pytest.mark.parametrize("m,n,k", [(200, 193, 211), (37, 700, 300), (301, 64, 1029)])
def test_packed_panels_match_numpy(rng, dtype, split, m, n, k):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype)[:, ::-1].T  # negative strides
    c0 = rng.standard_normal((m, n)).astype(dtype)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=0.75, beta=2.0, plan={"pack": True, "split": split, "threads": 2, "kt": 64})
    assert_gemm_close(c, a, b, c0, 0.75, 2.0)


def test_packed_low_precision_converts_once(rng):
    import ml_dtypes
    a = rng.uniform(-1, 1, (200, 300)).astype(ml_dtypes.bfloat16)
    b = rng.uniform(-1, 1, (300, 150)).astype(ml_dtypes.bfloat16)
    out = np.zeros((200, 150), np.float32)
    coopjit.matmul(a, b, out=out, plan={"pack": True})
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out - ref).max() <= 302 * np.finfo(np.float32).eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))).max()
    with pytest.raises(ValueError, match="pack=1 needs one product, not a batch of 3"):
        coopjit.matmul(np.ones((3, 4, 4), np.float32), np.ones((4, 4), np.float32), plan={"pack": True})
