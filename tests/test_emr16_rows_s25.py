"""Session 25's many-core plans (issue 14), measured on the 16-core Emerald Rapids host
(benchmarks/recorded/issue14-emr16-rows-session25.txt): a vector times a row-major matrix (and a
column-major matrix times a vector, the same nest over A^T) on every core; the tile walk of a
data-parallel launch of between one and two tiles a worker takes the height whose busiest worker
has the fewest rows; int8 AMX tiles keep one row of workers only where every worker has a column panel;
sums along long rows cut into 4 shares a worker. The planner's choices are read through
coopjit.cross_compile / coopjit._core.reduce_plan for that host and from this machine's planner
with a pool of 16; every product and sum is checked against NumPy in float64 (int64 for int8)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import _core
from conftest import planned

BF16 = ml_dtypes.bfloat16
HOST = "emeraldrapids"
WIDE = coopjit.cpu_info()["vector_bytes"] >= 64  # (the AMX emulation needs AVX-512 vectors)


def test_vector_times_matrix_takes_every_core_of_a_many_core_host():
    # 64 column panels: 16 workers take 4 each (12 took 6 or 5), K tiles of 64 KiB of a worker's columns
    cfg = planned(1, 4096, 4096, cpu=HOST)
    assert (cfg["order"], cfg["threads"], cfg["kt"], cfg["ksplit"]) == ("k_outer", 16, 64, 0), cfg
    # a column-major A times a vector: the same nest over A^T ("col", session 24's rule)
    a, x = np.asfortranarray(np.zeros((4096, 4096), np.float32)), np.zeros((4096, 1), np.float32)
    cfg = coopjit.cross_compile(a, x, cpu=HOST, threads=16, code=False)["config"]
    assert (cfg["layout"], cfg["order"], cfg["threads"]) == ("col", "k_outer", 16), cfg
    # fewer column panels than cores: one worker a panel
    assert planned(1, 512, 4096, cpu=HOST)["threads"] == 8
    # few cores keep their plan: K split between the 2 workers of a 2-core Zen 5
    z = planned(1, 4096, 4096, cpu="znver5", threads=2)
    assert (z["order"], z["threads"], z["ksplit"]) == ("k_outer", 2, 2), z
    # a plan that names the workers keeps them
    assert planned(1, 4096, 4096, cpu=HOST, plan={"threads": 12})["threads"] == 12


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_few_tiles_a_worker_take_the_height_that_evens_the_launch(dtype):
    cfg = planned(100, 37, 250, dtype, cpu=HOST)
    tiles = -(-100 // cfg["mr"]) * -(-37 // cfg["nr"])
    if dtype == np.float32:
        # 6 x 48 gave 17 tiles on 16 workers (one took two); 7 x 48 gives 15, one each
        assert (cfg["mr"], cfg["nr"], cfg["threads"], cfg["split"]) == (7, 48, 15, "dp"), cfg
    else:
        # 13 x 8: 40 tiles, more than two a worker: the padding rule's height stays
        assert (cfg["mr"], cfg["nr"], cfg["threads"]) == (13, 8, 16), cfg
    assert cfg["threads"] == min(16, tiles), cfg
    # named tiles, workers or split, few cores: as before
    assert planned(100, 37, 250, dtype, cpu=HOST, plan={"mr": 6})["mr"] == 6
    assert planned(100, 37, 250, dtype, cpu=HOST, plan={"threads": 16})["threads"] == 16
    assert planned(100, 37, 250, cpu="znver5", threads=2)["mr"] == 6
    # never shorter than the padding rule's height (96x96x64: 24 tiles of 12 x 32 stay)
    assert planned(96, 96, 64, cpu=HOST)["mr"] == 12


def test_int8_tiles_keep_one_row_of_workers_only_with_a_panel_for_each():
    # 256^3: 8 column panels of 32 for 16 workers: the run-time 2-D grid (A still read in place)
    small = np.ones((256, 256), np.int8)
    cfg = coopjit.cross_compile(small, small, cpu=HOST, threads=16, code=False)["config"]
    assert (cfg["amx"], cfg["direct_a"], cfg["grid_m"]) == ("yes", True, 0), cfg
    u8 = coopjit.cross_compile(small.view(np.uint8), small, cpu=HOST, threads=16, code=False)["config"]
    assert (u8["amx"], u8["direct_a"], u8["grid_m"]) == ("yes", True, 0), u8
    # 8 workers: a panel each, one row of workers as before
    assert coopjit.cross_compile(small, small, cpu=HOST, threads=8, code=False)["config"]["grid_m"] == 1
    # 512^3 and up: 16+ panels, one row of workers
    big = np.ones((512, 512), np.int8)
    assert coopjit.cross_compile(big, big, cpu=HOST, threads=16, code=False)["config"]["grid_m"] == 1
    # a named grid stays
    assert coopjit.cross_compile(small, small, cpu=HOST, threads=16, plan={"grid_m": 1}, code=False)["config"]["grid_m"] == 1
    # bf16 keeps one row of workers at 256^3 too (measured faster there)
    b = np.ones((256, 256), BF16)
    assert coopjit.cross_compile(b, b, cpu=HOST, threads=16, code=False)["config"]["grid_m"] == 1


@pytest.mark.parametrize("rows,cols,threads,shares", [
    (8192, 8192, 16, 64), (4096, 4096, 16, 64), (16384, 4096, 16, 64), (2048, 32768, 16, 64), (1024, 4096, 16, 64),
    (8192, 8192, 8, 32), (8192, 8192, 64, 256),
    (2048, 32768, 64, 0),   # 512 row tiles: fewer than 4 a share
    (512, 4096, 16, 0),     # 8 MiB: under 256 KiB a share
    (8192, 8192, 4, 0),     # few workers: one share each
    (8192, 512, 16, 0),     # rows of 2 KiB
    (64, 1048576, 16, 0),   # 16 row tiles (the pieces of a sum of everything)
])
def test_long_row_sums_take_four_shares_a_worker(rows, cols, threads, shares):
    p = _core.reduce_plan("sum", "row", rows, cols, vector_bytes=64, threads=threads)
    assert (p["threads"], p["shares"]) == (threads, shares), p
    # not max (unmeasured), not down columns
    assert _core.reduce_plan("max", "row", rows, cols, vector_bytes=64, threads=threads)["shares"] == 0
    assert _core.reduce_plan("sum", "column", rows, cols, vector_bytes=64, threads=threads)["shares"] == 0


# ---- the products and sums on this machine's planner with a pool of 16 (8+ workers count as many cores)


def test_the_many_core_plans_match_numpy(rng, pool):
    pool(16)
    cases = [
        (rng.standard_normal((1, 4096)).astype(np.float32), rng.standard_normal((4096, 4096)).astype(np.float32)),
        (np.asfortranarray(rng.standard_normal((2048, 3000)).astype(np.float32)),
         rng.standard_normal((3000, 1)).astype(np.float32)),
        (rng.standard_normal((1, 3001)), rng.standard_normal((3001, 2500))),  # f64, ragged panels
        (rng.standard_normal((100, 250)).astype(np.float32), rng.standard_normal((250, 37)).astype(np.float32)),
        (rng.standard_normal((101, 250)).astype(np.float32), rng.standard_normal((250, 40)).astype(np.float32)),
    ]
    for a, b in cases:
        c = np.empty((a.shape[0], b.shape[1]), a.dtype)
        cfg = _core.gemm_plan(a, b, c, False, [a.dtype.name[0] + a.dtype.name[-2:]] * 3, {})
        got = coopjit.matmul(a, b)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        eps = np.finfo(a.dtype).eps
        bound = 4 * a.shape[1] * eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
        assert np.all(np.abs(got - ref) <= bound), (a.shape, b.shape, cfg)
    # the planner's picks here, where they come from the rules above
    assert _core.gemm_plan(cases[0][0], cases[0][1], np.empty((1, 4096), np.float32), False, ["f32"] * 3, {})["threads"] == "16"
    if coopjit.cpu_info()["vector_bytes"] == 64:  # (the rule's tile for AVX-512's 32 registers)
        assert _core.gemm_plan(cases[3][0], cases[3][1], np.empty((100, 37), np.float32), False, ["f32"] * 3, {})["mr"] == "7"


@pytest.mark.skipif(not WIDE, reason="the AMX emulation needs AVX-512 vectors; this CPU (or COOPJIT_CPU_LEVEL) gives 32-byte ones")
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_emulated_tiles_on_the_run_time_grid_with_a_read_in_place_match_numpy(rng, pool, dtype):
    pool(16)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, (256, 256)).astype(dtype)
    b = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    out = np.int32
    plan = {"amx": "emulated"}
    c = np.empty((256, 256), out)
    types = coopjit._arrays.gemm_types(a.dtype, b.dtype, np.dtype(out))[0]
    cfg = _core.gemm_plan(a, b, c, False, types, coopjit._kernel_args._overrides(plan))
    assert (cfg["direct_a"], cfg["grid_m"], cfg["threads"]) == ("true", "auto", "16"), cfg
    got = coopjit.matmul(a, b, out=c, plan=plan)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(got, ref.astype(np.int64))


@pytest.mark.parametrize("shape", [(4096, 4096), (4099, 4097), (8192, 1030)])
def test_sums_along_rows_in_shares_match_numpy(rng, pool, shape):
    pool(16)
    x = rng.random(shape, dtype=np.float32)
    p = _core.reduce_plan("sum", "row", *shape)
    assert p["threads"] == 16 and p["shares"] == 64, p
    ref = np.sum(x, axis=1, dtype=np.float64)
    got = coopjit.reduce(x, axis=1, op="sum")
    assert got.dtype == np.float32 and np.all(np.abs(got - ref) <= shape[1] * np.finfo(np.float32).eps * ref)
    # a view with rows a gap apart (the same plan, strided rows)
    v = x[::2, 1:]
    np.testing.assert_allclose(coopjit.reduce(v, axis=1, op="sum"), np.sum(v, axis=1, dtype=np.float64), rtol=1e-4)
