"""Plan k_inner: the packed blocked nest takes each block of row panels through every K tile
before the next block (the block's partial sums stay in L2; AMX plans keep each tile's partial
sums as one contiguous block of the scratch). Results against float64 NumPy (exact for int8) with
several K tiles, several blocks, ragged edges, shares and worker counts, the tile program (real
AMX where the CPU has it, else its emulation), a bf16 result, alpha / beta, the config's
round trip, and bad values."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import check_dtype_product as _check, dtype_operands as _operands, tile_program_amx



@pytest.mark.parametrize("dtype, m, n, k, plan", [
    (np.float32, 301, 257, 333, {"threads": 3, "kt": 64, "mc_tiles": 5}),  # 6 K tiles, several blocks, ragged
    (np.float64, 97, 130, 515, {"threads": 2, "kt": 128, "mc_tiles": 3}),
    (np.float32, 300, 200, 700, {"threads": 4, "shares": 3, "kt": 128, "mc_tiles": 2}),  # shares cut the nest
    ("bf16", 129, 100, 260, {"threads": 2, "amx": "no", "kt": 64, "mc_tiles": 2}),  # vector dot products
    ("int8", 70, 130, 515, {"threads": 3, "amx": "no", "kt": 128, "mc_tiles": 2}),
])
def test_k_inner_gives_the_reference_product(rng, dtype, m, n, k, plan):
    a, b = _operands(rng, dtype, m, n, k)
    full = {"pack": 1, "k_inner": 1, **plan}
    cfg = coopjit.compile_gemm(m, n, k, a.dtype, plan=full).config
    assert cfg["k_inner"] is True and cfg["kt"] < k, cfg  # several K tiles
    _check(coopjit.matmul(a, b, plan=full), a, b, dtype)


@pytest.mark.parametrize("dtype", ["bf16", "int8"])
@pytest.mark.parametrize("direct_a", [0, 1])
def test_k_inner_tiles(rng, dtype, direct_a):
    # The tile program: partial sums tile by tile in the scratch, continued in the tiles, the last
    # K tile applying alpha / beta; M a multiple of 32 and K of the tile step (direct_a's needs),
    # N ragged (a zero-padded last column panel).
    m, n, k = 160, 200, 64 * 5
    a, b = _operands(rng, dtype, m, n, k)
    plan = {"amx": tile_program_amx(), "threads": 2, "shares": 2, "k_inner": 1, "direct_a": direct_a, "mc_tiles": 2,
            "kt": 64 if dtype == "bf16" else 128}
    cfg = coopjit.compile_gemm(m, n, k, a.dtype, plan=plan).config
    assert cfg["k_inner"] is True and cfg["amx"] != "none" and cfg["kt"] < k, cfg
    _check(coopjit.matmul(a, b, plan=plan), a, b, dtype)
    _check(coopjit.matmul(a, coopjit.prepack(b, plan=plan), plan=plan), a, b, dtype)
    if dtype == "int8":  # C += 3 A B - 2 C: the old C read back at the last K tile
        c = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
        c0 = c.copy()
        coopjit.gemm(a, b, c, alpha=3, beta=-2, plan=plan)
        _check(c, a, b, dtype, 3.0, -2.0, c0)
    else:  # C in bf16: the last K tile converts the sums once
        out = coopjit.matmul(a, b, plan=plan, out_dtype=ml_dtypes.bfloat16)
        assert out.dtype == ml_dtypes.bfloat16
        _check(out, a, b, dtype)


def test_k_inner_round_trips_and_leaves_the_default():
    kern = coopjit.compile_gemm(256, 256, 600, np.float32, plan={"pack": 1, "k_inner": 1, "kt": 128})
    again = coopjit.compile_gemm(256, 256, 600, np.float32, plan=kern.config)
    assert again.config["k_inner"] is True and again.config == kern.config
    assert coopjit.compile_gemm(256, 256, 600, np.float32, plan={"pack": 1, "kt": 128}).config["k_inner"] is False


@pytest.mark.parametrize("plan, words", [
    ({"pack": 1, "k_inner": 2}, "k_inner"),
    ({"pack": 0, "k_inner": 1}, "pack=1"),
    ({"pack": 1, "inline_b": 1, "k_inner": 1, "split": "dp"}, "inline_b=0"),
    ({"pack": 1, "k_inner": "yes"}, "k_inner"),
])
def test_k_inner_bad_values(plan, words):
    with pytest.raises((ValueError, TypeError), match=words):
        coopjit.compile_gemm(64, 64, 256, np.float32, plan=plan)

