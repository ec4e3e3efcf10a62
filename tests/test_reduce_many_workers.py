"""Reductions on many workers (issue 14, session 24): the planner's choice for another CPU through
coopjit._core.reduce_plan (vector width and worker count; the 16-core Emerald Rapids host's row
sums keep 4-row tiles: one-row tiles measured no better there), and the reduce plan field
`shares` (the work cut into more shares than threads, run_shares) against NumPy in float64."""
import numpy as np
import pytest

import coopjit
from coopjit import _core


@pytest.mark.parametrize("threads", [1, 2, 4, 8, 16, 64])
@pytest.mark.parametrize("rows,cols", [(8192, 8192), (4096, 4096), (16384, 4096), (2048, 32768)])
def test_long_rows_keep_four_row_tiles_on_any_worker_count(threads, rows, cols):
    # AVX-512 (the Emerald Rapids host, Zen 4 / 5): 16 f32 lanes, tiles of 4 rows x 4 vectors. Session
    # 24 measured one-row tiles of 8 vectors on 16 workers there: 0.94x / 0.91x at 8192^2 / 4096^2
    # (benchmarks/recorded/issue14-emr16-many-session24.txt). One share a worker below 8 workers,
    # 4 on 8+ where each has 4 row tiles and 256 KiB (session 25: test_emr16_rows_s25.py).
    p = _core.reduce_plan("sum", "row", rows, cols, vector_bytes=64, threads=threads)
    many = threads >= 8 and rows // 4 >= 16 * threads and rows * cols * 4 >= 4 * threads * (256 << 10)
    assert (p["simd_width"], p["tile_rows"], p["tile_cols"], p["threads"], p["shares"]) == \
        (16, 4, 64, threads, 4 * threads if many else 0), p
    assert p["unit"] and p["read_past"] and p["prefetch"] == 0, p
    # (rows longer than 128 tiles sum in levels, plan sum_block: session 27)
    assert p["key"] == "reduce.sum.row.f32.f32.f32.s16.t4x64.u.uy.rp" + (".sb16x3" if cols > 128 * 64 else ""), p
    # AVX2: 8 lanes, the same tile in vectors.
    p = _core.reduce_plan("sum", "row", rows, cols, vector_bytes=32, threads=threads)
    assert (p["simd_width"], p["tile_rows"], p["tile_cols"]) == (8, 4, 32), p


def test_reduce_plan_answers_the_planner_for_other_shapes_and_forms():
    # Under 1 MiB: one worker, whatever the count.
    assert _core.reduce_plan("sum", "row", 64, 1024, vector_bytes=64, threads=16)["threads"] == 1
    # Float max along long rows: one row of 8 vectors (plan_reduce's min / max rule).
    p = _core.reduce_plan("max", "row", 4096, 4096, vector_bytes=64, threads=16)
    assert (p["tile_rows"], p["tile_cols"]) == (1, 128), p
    # Rows of 2 vectors: the tile as wide as the row, 8 rows.
    p = _core.reduce_plan("sum", "row", 65536, 32, vector_bytes=64, threads=16)
    assert (p["tile_rows"], p["tile_cols"]) == (8, 32), p
    # f64 sums: 8 lanes; int8 summed into int64.
    assert _core.reduce_plan("sum", "row", 4096, 4096, in_dtype="f64", vector_bytes=64)["simd_width"] == 8
    p = _core.reduce_plan("sum", "row", 4096, 4096, in_dtype="i8", acc_dtype="i64", vector_bytes=64)
    assert p["simd_width"] == 8 and p["key"].startswith("reduce.sum.row.i8.i64.i64."), p
    # Down contiguous columns, one row of 4 vectors (session 28: 32 vectors ran at half the
    # rate on Zen 5); strided columns keep up to 32; column_rows blocks of partials, 8 rows a
    # step for sums read in their accumulator type, one for integer max.
    p = _core.reduce_plan("sum", "column", 4096, 4096, vector_bytes=64, threads=16)
    assert (p["tile_rows"], p["tile_cols"]) == (1, 64), p
    p = _core.reduce_plan("sum", "column", 4096, 4096, sx_r=4096 * 20, sx_c=20, vector_bytes=64, threads=16)
    assert (p["tile_rows"], p["tile_cols"]) == (1, 256), p
    p = _core.reduce_plan("sum", "column_rows", 4096, 4096, vector_bytes=64, threads=16)
    assert (p["tile_rows"], p["tile_cols"], p["block_cols"]) == (8, 128, 4096), p
    # float max: 8 rows of 4 vectors (session 29); integer max one row
    p = _core.reduce_plan("max", "column_rows", 4096, 4096, vector_bytes=64, threads=16)
    assert (p["tile_rows"], p["tile_cols"]) == (8, 64), p
    assert _core.reduce_plan("max", "column_rows", 4096, 4096, in_dtype="i32", vector_bytes=64,
                             threads=16)["tile_rows"] == 1
    # Rows with a gap of a page or more after them: no reading past a row's end.
    assert _core.reduce_plan("sum", "row", 4096, 4096, sx_r=4096 + 1024, vector_bytes=64)["read_past"] is False
    assert _core.reduce_plan("sum", "row", 4096, 4096, sx_r=4096 + 64, vector_bytes=64)["read_past"] is True
    # 0: this machine's vector width and pool.
    here = _core.reduce_plan("sum", "row", 4096, 4096)
    assert here["simd_width"] * 4 == coopjit.cpu_info()["vector_bytes"], here
    assert here["threads"] == coopjit.get_num_threads(), here


@pytest.mark.parametrize("kwargs,match", [
    ({"vector_bytes": 48}, "vector_bytes must be 16, 32 or 64.*got 48"),
    ({"vector_bytes": -1}, r"got -1 and 0"),
    ({"threads": 2000}, r"threads in \[0, 1024\].*got 0 and 2000"),
])
def test_reduce_plan_checks_its_target(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _core.reduce_plan("sum", "row", 64, 64, **kwargs)


def test_reduce_plan_checks_op_form_and_types():
    with pytest.raises(ValueError, match="unknown form 'diagonal'"):
        _core.reduce_plan("sum", "diagonal", 64, 64)
    with pytest.raises(ValueError, match="unknown reduction 'mean'"):
        _core.reduce_plan("mean", "row", 64, 64)
    with pytest.raises(ValueError, match="negative reduction size"):
        _core.reduce_plan("sum", "row", -1, 64)
    with pytest.raises(TypeError, match="unknown component type 'f33'"):
        _core.reduce_plan("sum", "row", 64, 64, in_dtype="f33")


@pytest.fixture
def threads():
    before = coopjit.get_num_threads()
    yield coopjit.set_num_threads
    coopjit.set_num_threads(before)
    _core.reduce_plan_overrides({})


@pytest.mark.parametrize("workers", [2, 16])
@pytest.mark.parametrize("plan", [{"shares": 3}, {"shares": 64}, {"row.shares": 4096},
                                  {"row.shares": 64, "row.tile_rows": 1, "row.tile_cols": 128},
                                  {"column.shares": 40, "column.split": 0}, {"column.shares": 33}])
@pytest.mark.parametrize("shape", [(203, 8193), (5, 100), (4096, 300)])
def test_shares_give_numpy_results(rng, threads, workers, plan, shape):
    # More shares than threads (and than tiles: 5 x 100 has 2 row tiles) along both axes, sums and
    # max of f32 and int32, and the 2x2 form; integers, so every order of the sums is exact.
    threads(workers)
    x = rng.integers(-50, 51, shape)
    _core.reduce_plan_overrides(plan)
    for dt in (np.float32, np.int32):
        a = x.astype(dt)
        for axis in (0, 1, None):
            for op in ("sum", "max"):
                got = coopjit.reduce(a, axis, op)
                want = getattr(np, op)(a.astype(np.float64), axis=axis)
                np.testing.assert_array_equal(np.asarray(got, np.float64), want, err_msg=f"{plan} {dt} {axis} {op}")
    even = x[: shape[0] // 2 * 2, : shape[1] // 2 * 2].astype(np.float32)
    want = even.astype(np.float64).reshape(even.shape[0] // 2, 2, even.shape[1] // 2, 2).sum(axis=(1, 3))
    np.testing.assert_array_equal(np.asarray(coopjit.reduce2x2(even), np.float64), want, err_msg=str(plan))


def test_shares_leave_the_kernel_and_the_input_as_they_are(threads):
    threads(4)
    x = np.arange(64 * 4096, dtype=np.float32).reshape(64, 4096) % 7
    keep = x.copy()
    y = np.empty(64, np.float32)
    planner = _core.reduce_ir("sum", "row", x, y, "f32", "f32", "f32")
    _core.reduce_plan_overrides({"shares": 16})
    assert _core.reduce_ir("sum", "row", x, y, "f32", "f32", "f32") == planner  # (a launch's property)
    np.testing.assert_array_equal(coopjit.reduce(x, 1), x.astype(np.float64).sum(axis=1))
    np.testing.assert_array_equal(x, keep)


def test_shares_override_is_checked():
    try:
        with pytest.raises(ValueError, match=r"shares=5000 is out of range \[0, 4096\]"):
            _core.reduce_plan_overrides({"shares": 5000})
        with pytest.raises(ValueError, match=r"row.shares=-1 is out of range"):
            _core.reduce_plan_overrides({"row.shares": -1})
        # column_rows: a worker's index is its row of partials
        with pytest.raises(ValueError, match="unknown reduce plan override 'column_rows.shares'"):
            _core.reduce_plan_overrides({"column_rows.shares": 8})
    finally:
        _core.reduce_plan_overrides({})
