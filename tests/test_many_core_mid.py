"""Many-core plans for mid-size float products (issue 14, session 18): on 8+ cores, f32 / f64
products whose column panels are fewer than the workers stay unpacked up to 20 MFLOP a worker (the
tile walk shares every tile among the workers, where the packed nest's grid left some of them
idle). The planner's choices are read through coopjit.cross_compile for a 16-core Sapphire Rapids
(8-core too) and a 2-core Zen 4, whose plans stay as they were; the products are computed on a
pool of 16 and checked against NumPy in float64 at the rule's edges."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import planned


def tiles_n(cfg, n):
    return -(-n // cfg["nr"])


F32, F64 = np.float32, np.float64
# Inside the rule on 16 workers: the packed nest's busiest worker would have 10% more tiles than the
# tile walk's (513x129x700 f32: a 16 x 1 grid of 5 row panels x 3 column panels, 15 tiles, against
# 13 of 195; 512x129x700: an 8 x 2 grid of 8 x 2, 16 against 12), fewer column panels than workers,
# under 20 MFLOP and 8+ tiles a worker.
INSIDE = [(513, 129, 700, F32), (512, 129, 700, F32), (513, 129, 2400, F32), (400, 256, 400, F32),
          (400, 256, 400, F64), (257, 129, 1000, F64)]
# Just outside: 20 MFLOP a worker (513x129x2420: 3.2e8); even blocks (1000x130x1000: 24 tiles
# against 24, 2000x200x300 80 against 79, f64 513x129x700 27 against 25); fewer than 8 tiles a worker
# (300x129x1000: 114 tiles); as many column panels as workers (256x1024x512, f64 512^3).
OUTSIDE = [(513, 129, 2420, F32), (1000, 130, 1000, F32), (1000, 130, 1000, F64), (2000, 200, 300, F32),
           (513, 129, 700, F64), (300, 129, 1000, F32), (256, 1024, 512, F32), (512, 512, 512, F64)]


@pytest.mark.parametrize("m,n,k,dtype", INSIDE)
def test_mid_products_stay_unpacked_on_many_cores(m, n, k, dtype):
    cfg = planned(m, n, k, dtype)
    assert 2.0 * m * n * k < 2.0e7 * cfg["threads"], cfg
    assert tiles_n(cfg, n) < cfg["threads"] == 16, cfg
    assert -(-m // cfg["mr"]) * tiles_n(cfg, n) >= 8 * 16, cfg
    assert (cfg["pack"], cfg["order"], cfg["split"]) == (False, "m_inner", "dp"), cfg


@pytest.mark.parametrize("m,n,k,dtype", OUTSIDE)
def test_larger_wider_or_even_products_keep_packing(m, n, k, dtype):
    cfg = planned(m, n, k, dtype)
    assert (cfg["pack"], cfg["split"]) == (True, "dp"), cfg


def test_the_bound_scales_with_the_workers():
    # 8 workers: 1.6e8 (264x129x2340 is 1.59e8, 264x129x2360 1.61e8; a 4 x 2 grid of 9 x 2 tiles
    # against 13 of 99)
    assert not planned(264, 129, 2340, threads=8)["pack"]
    assert planned(264, 129, 2360, threads=8)["pack"]
    assert not planned(513, 129, 2400)["pack"] and planned(513, 129, 2420)["pack"]  # 16: 3.2e8


def test_other_products_and_hosts_keep_their_plans():
    # few cores: as before (the 2-core Zen 4 packs 512^3, not 513x129x700); AVX2's 16 registers
    # (not measured) keep packing on many cores
    assert planned(512, 512, 512, threads=2, cpu="znver4")["pack"]
    assert not planned(513, 129, 700, threads=2, cpu="znver4")["pack"]
    assert planned(512, 512, 512, threads=7, cpu="znver4")["pack"]
    assert planned(513, 129, 700, cpu="skylake")["pack"]
    assert not planned(513, 129, 700, cpu="znver4")["pack"]
    # dot-instruction products pack on any host
    assert planned(513, 129, 700, ml_dtypes.bfloat16)["pack"]
    # a plan naming pack keeps it; one naming the workers, the tile or the walk keeps the packing
    # the rule would have left (the rule is for the planner's own choices)
    assert planned(513, 129, 700, plan={"pack": 1})["pack"]
    for plan in ({"threads": 16}, {"mr": 7}, {"nr": 32, "mr": 12}, {"grid_m": 16}):
        assert planned(513, 129, 700, plan=plan)["pack"], plan
    assert not planned(513, 129, 700, plan={"kt": 352})["pack"]
    # skinny products (64 rows) keep the skinny rules
    assert planned(64, 4096, 4096)["pack"]


@pytest.mark.parametrize("m,n,k,dtype,packed", [(*c, False) for c in INSIDE[:3] + INSIDE[-1:]] +
                         [(*c, True) for c in OUTSIDE[:2] + OUTSIDE[4:5]])
def test_mid_products_on_sixteen_workers_match_numpy(rng, pool, m, n, k, dtype, packed):
    pool(16)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    cfg = coopjit.compile_gemm(m, n, k, dtype).config
    if coopjit.cpu_info()["vector_bytes"] >= 64:  # (the rule is for AVX-512's 32 registers)
        assert cfg["pack"] == packed, cfg
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 8 * np.sqrt(k) * np.finfo(dtype).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    for _ in range(2):  # back to back, the pool's threads still spinning
        assert np.all(np.abs(coopjit.matmul(a, b) - ref) <= tol)
    out = np.full((m, n), np.nan, dtype)
    assert np.all(np.abs(coopjit.matmul(a, b, out=out) - ref) <= tol)
    # strided operands (views of larger arrays) and C accumulated with beta
    big = rng.standard_normal((m, k + 3)).astype(dtype)
    av = big[:, 1 : k + 1]
    av[...] = a
    c = rng.standard_normal((m, n)).astype(dtype)
    want = 0.5 * ref + 2.0 * c.astype(np.float64)
    got = coopjit.gemm(av, b, c.copy(), alpha=0.5, beta=2.0)
    assert np.all(np.abs(got - want) <= tol + 8 * np.finfo(dtype).eps * np.abs(want))
