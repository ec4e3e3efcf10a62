"""Stream-K on the GPU path (seeds/004): data-parallel, Stream-K and 2-tile Stream-K + DP splits
of GPU GEMMs run on opencl:0 against NumPy in float64, on shapes where the splits differ; the
split's tile counts against the seed's formulas written again here; results that do not depend
on timing (the fix-up adds the partial tiles in a fixed order)."""
import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close

from device_support import every_module_passes_spirv_val, needs_device, subgroup_sizes  # noqa: F401 - the fixture


def seed_sk_tiles(split, tiles_mn, tiles_k, workers):
    """seeds/004: numTilesSK of the flattened (output tile, K tile) space; the rest is DP."""
    total = tiles_mn * tiles_k
    if split == "dp" or workers <= 1:
        return 0
    if split == "sk":
        return total
    if total % (workers * tiles_k) == 0:
        return 0
    return total - max(0, tiles_mn // workers - 1) * workers * tiles_k


def tiles(m, n, k, cfg):
    """(output tiles, K tiles) of a plan, in the kernel's orientation ("col" swaps M and N)."""
    mt, nt = int(cfg["mr"]) * int(cfg["sg_m"]), int(cfg["nr"]) * int(cfg["sg_n"])
    if cfg["layout"] == "col":
        m, n = n, m
    return -(-m // mt) * -(-n // nt), max(1, -(-k // int(cfg["kt"])))


# (m, n, k, workers, kt): 1 to 13 x 4 output tiles of 64 x 64 (2 x 2 subgroups of 32 x 32: the plan
# Intel GPUs get by default, named so that every device splits the same tiles), 1 to 19 K tiles.
TILE = {"mr": 32, "nr": 32, "sg_m": 2, "sg_n": 2}
CASES = [(100, 130, 300, 4, 16), (200, 70, 1000, 7, 64), (64, 64, 640, 5, 32), (1, 1, 500, 3, 16),
         (830, 240, 96, 7, 16), (500, 200, 128, 5, 32), (33, 17, 0, 3, 16)]


@pytest.mark.parametrize("m,n,k,workers,kt", CASES)
@pytest.mark.parametrize("split", ["dp", "sk", "sk+dp", "dp+sk"])
def test_splits_match_numpy(rng, split, m, n, k, workers, kt):
    dev = needs_device()
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    plan = {"split": split, "workers": workers, "kt": kt, **TILE}
    kern = coopjit.compile_gemm(m, n, k, np.float32, device=dev, plan=plan, accumulate=True)
    cfg = kern.config
    assert cfg["split"] == split and cfg["workers"] == workers and cfg["kt"] == kt
    c = c0.copy()
    kern(a, b, c, alpha=1.5, beta=-0.5)
    assert_gemm_close(c, a, b, c0, 1.5, -0.5)


def test_dp_sk_streams_the_last_wave():
    """dp+sk (GPU plans): DP on the full waves, the last wave's tiles streamed: tiles % workers of
    them, all when fewer tiles than workers, none when the tiles divide evenly."""
    from coopjit import _core

    for tiles_mn, tiles_k, workers in ((152, 16, 132), (133, 9, 132), (561, 9, 132), (512, 8, 128), (20, 3, 7), (5, 4, 7)):
        want = (tiles_mn - tiles_mn // workers * workers) * tiles_k
        assert _core.stream_k_tiles("dp+sk", tiles_mn, tiles_k, workers) == want
    with pytest.raises(ValueError, match="split"):
        coopjit.compile_gemm(64, 64, 64, np.float32, plan={"split": "dp+sk"})  # the CPU planner: dp, sk, sk+dp


def test_the_cases_exercise_every_split():
    """Each split means something different on these shapes: SK+DP keeps some DP tiles and
    streams others (on most of them), SK streams all."""
    dev = needs_device()
    mixed = 0
    for m, n, k, workers, kt in CASES:
        plan = {"split": "sk+dp", "workers": workers, "kt": kt, **TILE}
        cfg = coopjit.compile_gemm(m, n, k, np.float32, device=dev, plan=plan).config
        tmn, tk = tiles(m, n, k, cfg)
        sk = seed_sk_tiles("sk+dp", tmn, tk, workers)
        assert seed_sk_tiles("sk", tmn, tk, workers) == tmn * tk and sk % tk == 0
        mixed += 0 < sk < tmn * tk
    assert mixed >= 2


@pytest.mark.parametrize("split", ["sk", "sk+dp"])
def test_results_do_not_depend_on_timing(rng, split):
    dev = needs_device()
    a = rng.standard_normal((200, 300)).astype(np.float32)
    b = rng.standard_normal((300, 150)).astype(np.float32)
    plan = {"split": split, "workers": 5, "kt": 16}
    first = coopjit.matmul(a, b, device=dev, plan=plan)
    for _ in range(3):
        assert np.array_equal(coopjit.matmul(a, b, device=dev, plan=plan), first)


@pytest.mark.parametrize("dtype", [np.float64, np.int8])
def test_stream_k_other_types(rng, dtype):
    dev = needs_device()
    if np.dtype(dtype).kind == "i":
        a = rng.integers(-128, 128, (70, 400)).astype(dtype)
        b = rng.integers(-128, 128, (400, 90)).astype(dtype)
    else:
        a, b = rng.standard_normal((70, 400)).astype(dtype), rng.standard_normal((400, 90)).astype(dtype)
    c = coopjit.matmul(a, b, device=dev, plan={"split": "sk", "workers": 3, "kt": 32})
    if np.dtype(dtype).kind == "i":
        assert np.array_equal(c.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))
    else:
        assert_gemm_close(c, a, b)


def test_stream_k_with_emulated_dpas(rng):
    dev = needs_device()
    if 16 not in subgroup_sizes():
        pytest.skip(f"DPAS (emulated too) is Intel's: subgroups of 16, and {dev} runs {subgroup_sizes()}")
    a = rng.standard_normal((96, 256)).astype(np.float16)
    b = rng.standard_normal((256, 64)).astype(np.float16)
    kern = coopjit.compile_gemm(96, 64, 256, np.float16, device=dev, out_dtype=np.float32,
                                plan={"split": "sk+dp", "workers": 3, "dpas": "emulated"})
    assert kern.config["kt"] == 8 * 16
    assert_gemm_close(kern(a, b), a, b)


def test_batched_stream_k(rng):
    dev = needs_device()
    a = rng.standard_normal((3, 40, 200)).astype(np.float32)
    b = rng.standard_normal((200, 50)).astype(np.float32)
    c = coopjit.matmul(a, b, device=dev, plan={"split": "sk", "workers": 4, "kt": 16})
    for i in range(3):
        assert_gemm_close(c[i], a[i], b)


def test_default_split_follows_the_waves():
    """DP when the tiles fill the workers' waves; Stream-K when few tiles meet a long K."""
    dev = needs_device()
    workers = int(coopjit.compile_gemm(64, 64, 64, device=dev).config["workers"])
    assert coopjit.compile_gemm(64, 64, 64, device=dev).config["split"] == "dp"  # one K tile
    assert coopjit.compile_gemm(64, 64, 4096, device=dev).config["split"] == "sk"  # 1 tile < workers
    side = 64 * int(np.ceil(np.sqrt(workers)))
    full = coopjit.compile_gemm(side, side, 4096, device=dev).config
    assert full["split"] == ("dp" if tiles(side, side, 4096, full)[0] % workers == 0 else full["split"])


def test_bad_split_overrides():
    dev = needs_device()
    with pytest.raises(ValueError, match="plan split must be one of"):
        coopjit.matmul(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), device=dev, plan={"split": "2tile"})
    with pytest.raises(ValueError, match="multiple of kb"):
        coopjit.compile_gemm(64, 64, 64, device=dev, plan={"split": "sk", "kt": 12})
    with pytest.raises(ValueError, match="workers=0 is out of range"):
        coopjit.compile_gemm(64, 64, 64, device=dev, plan={"split": "sk", "workers": 0})
