"""Plan k_inner with nc_tiles (session 28, issue 14): the packed blocked nest in blocks of C of
mc_tiles row panels x nc_tiles column panels, each block through every K tile (its partial sums
kept in L2), each column panel's K-tile slice of B read by the block's row panels in turn. And
plan cycles' stamps fenced (lfence before and after rdtsc).

What is checked: results equal NumPy's (float64 / exact int64) on ragged shapes, several K tiles,
1-3 workers and shares, and are bit for bit those of the default order with the same K tiles (each
tile still adds its K tiles in order); the plan's key and fields; the refusals that remain; the
fenced stamps in the cross-compiled code. Here (no AMX) the emulated tiles and the f32 nest; with
the real tiles where the CPU has AMX (the 16-core Emerald Rapids host), skipped elsewhere."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import amx_modes

BF16 = ml_dtypes.bfloat16
FEATURES = coopjit.cpu_info()["features"]
HOST_AMX = bool(FEATURES.get("amx-tile")) and bool(FEATURES.get("amx-bf16")) and bool(FEATURES.get("amx-int8"))
WIDE = coopjit.cpu_info()["vector_bytes"] >= 64
MODES = amx_modes()


def operands(rng, dtype, m, n, k):
    if dtype == "bf16":
        return rng.uniform(-2, 2, (m, k)).astype(BF16), rng.uniform(-2, 2, (k, n)).astype(BF16)
    if dtype == "f32":
        return rng.uniform(-2, 2, (m, k)).astype(np.float32), rng.uniform(-2, 2, (k, n)).astype(np.float32)
    return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)


def check_against_numpy(a, b, c):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if a.dtype == np.int8:
        np.testing.assert_array_equal(c, ref.astype(np.int64))
        return
    bound = (a.shape[1] + 2) * np.finfo(np.float32).eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    rounding = np.abs(ref) * 2.0**-8 if c.dtype == BF16 else 0.0
    assert np.all(np.abs(c.astype(np.float64) - ref) <= bound + rounding)


# (dtype, m, n, k, plan): ragged edges in M, N and K; blocks of C smaller and larger than a
# worker's panels; several K tiles; 2 and 3 workers; shares.
CASES = [
    ("bf16", 200, 230, 300, {"threads": 1, "mc_tiles": 2, "nc_tiles": 3, "kt": 128}),
    ("bf16", 96, 64, 520, {"threads": 1, "mc_tiles": 8, "nc_tiles": 8, "kt": 64}),
    ("int8", 160, 200, 700, {"threads": 1, "mc_tiles": 2, "nc_tiles": 2, "kt": 256}),
    ("int8", 300, 130, 256, {"threads": 3, "kt": 128, "nc_tiles": 1}),
    ("bf16", 256, 320, 384, {"threads": 2, "nc_tiles": 2, "mc_tiles": 3, "kt": 128}),
    ("bf16", 512, 128, 256, {"threads": 2, "shares": 2, "mc_tiles": 2, "nc_tiles": 2, "kt": 64}),
    ("int8", 512, 256, 512, {"threads": 2, "shares": 3, "mc_tiles": 4, "nc_tiles": 3, "kt": 128}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype,m,n,k,plan", CASES)
@pytest.mark.parametrize("out", ["default", "bf16"])
def test_blocks_of_c_through_every_k_tile(mode, dtype, m, n, k, plan, out):
    if out == "bf16" and dtype != "bf16":
        pytest.skip("bf16 C is for bf16 products")
    rng = np.random.default_rng(28)  # seed: this session
    a, b = operands(rng, dtype, m, n, k)
    base = {"amx": mode, **plan}
    blocks = {**base, "k_inner": 1}
    kw = {"out": np.empty((m, n), BF16)} if out == "bf16" else {}
    c = coopjit.matmul(a, b, plan=blocks, **kw)
    check_against_numpy(a, b, c)
    cfg = coopjit.compile_gemm(m, n, k, a.dtype, plan=blocks).config
    assert cfg["k_inner"] is True and cfg["nc_tiles"] == plan["nc_tiles"] and cfg["amx"] == mode
    # Each tile adds its K tiles in the same order as the default nest: the same bits.
    default_order = {key: v for key, v in base.items() if key != "nc_tiles"}
    kw2 = {"out": np.empty((m, n), BF16)} if out == "bf16" else {}
    ref = coopjit.matmul(a, b, plan=default_order, **kw2)
    np.testing.assert_array_equal(np.asarray(c).view(np.uint8), np.asarray(ref).view(np.uint8))


@pytest.mark.parametrize("threads", [1, 3])
def test_f32_blocks_of_c_through_every_k_tile(threads):
    # The packed f32 nest (no tiles) takes the same order: C accumulated in place K tile by K tile.
    rng = np.random.default_rng(28)
    a, b = operands(rng, "f32", 190, 250, 600)
    plan = {"pack": 1, "threads": threads, "kt": 128, "mc_tiles": 2, "nc_tiles": 3, "k_inner": 1}
    c = coopjit.matmul(a, b, plan=plan)
    check_against_numpy(a, b, c)
    ref = coopjit.matmul(a, b, plan={"pack": 1, "threads": threads, "kt": 128, "mc_tiles": 2, "nc_tiles": 0})
    np.testing.assert_array_equal(c, ref)


def test_alpha_beta_into_a_strided_view():
    rng = np.random.default_rng(28)
    a, b = operands(rng, "bf16", 130, 100, 300)
    big = rng.uniform(-1, 1, (140, 230)).astype(np.float32)
    view = big[5:135, 10:210:2]
    before = view.astype(np.float64).copy()
    outside = big.copy()
    plan = {"amx": "emulated", "threads": 2, "kt": 64, "mc_tiles": 2, "nc_tiles": 2, "k_inner": 1}
    if not WIDE:
        pytest.skip("the AMX emulation needs AVX-512 vectors")
    coopjit.gemm(a, b, view, alpha=0.5, beta=-2.0, plan=plan)
    ref = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) - 2.0 * before
    bound = 2 * (300 + 4) * np.finfo(np.float32).eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(before))
    assert np.all(np.abs(view - ref) <= bound)
    mask = np.ones(big.shape, bool)
    mask[5:135, 10:210:2] = False
    np.testing.assert_array_equal(big[mask], outside[mask])  # nothing outside the view written


def test_key_and_refusals():
    x = np.zeros((1024, 1024), BF16)
    blocks = coopjit.cross_compile(x, x, cpu="sapphirerapids", threads=16,
                                   plan={"k_inner": 1, "nc_tiles": 8, "kt": 256})
    inner = coopjit.cross_compile(x, x, cpu="sapphirerapids", threads=16, plan={"k_inner": 1, "kt": 256})
    assert ".kinner" in blocks["key"] and ".nc8" in blocks["key"] and ".nc" not in inner["key"]
    # The same tile kernel: 2 + 2 operand tileloadd and 4 tile products a K step.
    for r in (blocks, inner):
        assert r["config"]["amx"] == "yes" and r["asm"].count("tdpbf16ps") >= 4
    a = np.zeros((64, 64), BF16)
    with pytest.raises(ValueError, match=r"nc_tiles=2 orders the packed blocked nest.*amx_prefetch=6"):
        coopjit.cross_compile(a, a, cpu="sapphirerapids", plan={"amx": "yes", "k_inner": 1, "nc_tiles": 2, "amx_prefetch": 6})
    with pytest.raises(ValueError, match=r"k_inner=1 .*pack=1"):
        coopjit.compile_gemm(64, 64, 256, np.float32, plan={"pack": 0, "k_inner": 1, "nc_tiles": 2})
    with pytest.raises(ValueError, match=r"k_inner=1 .*inline_b=0"):
        coopjit.compile_gemm(64, 64, 256, np.float32, plan={"pack": 1, "k_inner": 1, "inline_b": 1, "split": "dp"})


def test_cycles_stamps_are_fenced():
    # plan cycles: each rdtsc between two lfence (the stamp waits for the tile products before
    # it); a kernel without the field has neither.
    x = np.zeros((512, 512), BF16)
    plain = coopjit.cross_compile(x, x, cpu="sapphirerapids")
    timed = coopjit.cross_compile(x, x, cpu="sapphirerapids", plan={"cycles": 1})
    assert "lfence" not in plain["asm"] and "rdtsc" not in plain["asm"]
    lines = [ln.split()[0] for ln in timed["asm"].splitlines() if ln.strip() and not ln.strip().startswith((".", "#"))
             and not ln.rstrip().endswith(":")]
    stamps = [i for i, ins in enumerate(lines) if ins == "rdtsc"]
    assert stamps and lines.count("lfence") == 2 * len(stamps)
    # Each stamp right after an lfence; the other lfence follows it (LLVM may put register
    # moves between a fence and its stamp, and between the stamp and the next fence: its fence
    # comes before the next stamp's).
    for j, i in enumerate(stamps):
        before = i - 1
        while lines[before].startswith("mov"):
            before -= 1
        assert lines[before] == "lfence", lines[max(0, i - 3):i + 4]
        nxt = stamps[j + 1] - 1 if j + 1 < len(stamps) else len(lines)
        assert "lfence" in lines[i + 1:nxt], lines[i:i + 10]
