"""Reductions down columns after session 28's planner rules, against NumPy in float64 (or exact
integers):
- the column form over contiguous columns (few rows: (3, n) along axis 0; narrow rows of up to
  2 KiB: (n, 500) along axis 0) runs tiles of 4 vectors (it ran up to 32) where a worker has more
  than 8 vectors of columns; up to 8, one tile as wide as them, as before;
- column_rows (rows split over the workers into rows of partials) reads 8 rows a step for sums
  and products read in their accumulator type (f32, f64, int64); min / max and inputs converted
  on the way (bf16, int32 into int64) keep one row a step (partials up to 16 KiB) or four.
Shapes leave tails of every kind: columns not a multiple of a tile, a worker's rows not a multiple
of 8, rows fewer than a step; NaN and infinities propagate as NumPy's do."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import _core

BF16 = ml_dtypes.bfloat16


def _check(x, axis, op):
    got = coopjit.reduce(x, axis=axis, op=op)
    if np.issubdtype(x.dtype, np.integer):
        ref = getattr(np, op)(x.astype(np.int64), axis=axis)
        np.testing.assert_array_equal(np.asarray(got, np.int64), ref)
        return
    ref = getattr(np, op)(x.astype(np.float64), axis=axis)
    if op == "max":  # exact: the largest element, in the input's type
        np.testing.assert_array_equal(np.asarray(got, np.float64), ref)
        return
    n = x.size // np.asarray(ref).size
    # A sum of n terms in float32 (f32 / bf16 inputs) or float64: each element meets at most
    # n + a few roundings; the bound is on the sum of |x| (the data here is non-negative), plus
    # the final rounding to the input's type (bf16: 2^-8).
    u = 2.0**-53 if x.dtype == np.float64 else 2.0**-24
    tol = (n + 16) * u * np.sum(np.abs(x.astype(np.float64)), axis=axis) * 1.01
    if x.dtype == BF16:
        tol = tol + np.abs(ref) * 2.0**-8
    err = np.abs(np.asarray(got, np.float64) - ref)
    assert np.all(err <= tol), (x.shape, axis, op, float(np.max(err - tol)))


def _data(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.random(shape, dtype=np.float32).astype(dtype)


@pytest.mark.parametrize("shape", [(3, 300_001), (5, 240_017), (1, 300_000), (15, 70_003)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int32])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_few_rows_along_axis_0(rng, threads, shape, dtype, op):
    # Fewer than 8 rows a worker: the column form's walk of a few rows, 4-vector tiles.
    _check(_data(rng, shape, dtype), 0, op)


@pytest.mark.parametrize("shape", [(20_001, 500), (30_000, 300), (7_001, 77)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int64])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_narrow_rows_along_axis_0(rng, threads, shape, dtype, op):
    # Rows of at most 2 KiB: the column form down every row, 4-vector tiles (several a row).
    _check(_data(rng, shape, dtype), 0, op)


@pytest.mark.parametrize("shape,axis", [((3, 2003, 2001), (0, 1)), ((6005, 2000), 0), ((1027, 4100), 0),
                                        ((13, 8191), 0), ((2, 9, 1, 3001), (0, 1, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int64, np.int32])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_column_rows_along_leading_axes(rng, threads, shape, axis, dtype, op):
    # column_rows: 8 rows a step for f32 / f64 / int64 sums; each worker's share leaves 0-7 rows
    # that go one at a time; the columns a partial tile at the end.
    _check(_data(rng, shape, dtype), axis, op)


@pytest.mark.parametrize("form", ["column", "column_rows"])
def test_nan_and_inf_down_the_columns(rng, threads, form):
    rows = 3 if form == "column" else 4001
    x = rng.random((rows, 3001), dtype=np.float32)
    x[rows // 2, 7] = np.nan
    x[rows - 1, 2999] = np.inf
    x[0, 3000] = -np.inf
    x[1, 3000] = np.inf
    for op in ("sum", "max"):
        got = np.asarray(coopjit.reduce(x, axis=0, op=op), np.float64)
        with np.errstate(invalid="ignore"):  # (inf - inf in NumPy's sum)
            ref = getattr(np, op)(x.astype(np.float64), axis=0)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_array_equal(got[np.isinf(ref)], ref[np.isinf(ref)])
        fin = np.isfinite(ref)
        np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-5)


def test_the_planner_takes_the_rules():
    def plan(op, form, rows, cols, dt="f32", acc="", sx_c=1):
        return _core.reduce_plan(op, form, rows, cols, cols * sx_c, sx_c, dt, acc, vector_bytes=64, threads=2)
    # Contiguous columns, more than 8 vectors a worker: 4 vectors of the accumulator's lanes.
    assert plan("sum", "column", 3, 4_000_000)["tile_cols"] == 64
    assert plan("max", "column", 100_000, 500)["tile_cols"] == 64
    assert plan("sum", "column", 3, 4_000_000, "f64")["tile_cols"] == 32
    assert plan("sum", "column", 3, 4_000_000, "i32", "i64")["tile_cols"] == 32
    # min / max of converted inputs (bf16 into f32) keep the wide tile.
    assert plan("max", "column", 3, 4_000_000, "bf16", "f32")["tile_cols"] == 512
    assert plan("sum", "column", 3, 4_000_000, "bf16", "f32")["tile_cols"] == 64
    # A worker's columns of up to 8 vectors: one tile as wide as them (each row read once).
    assert plan("sum", "column", 1_000_000, 128, "f64")["tile_cols"] == 64
    assert plan("sum", "column", 1_000_000, 80, "f64")["tile_cols"] == 40
    assert plan("sum", "column", 1_000_000, 300)["tile_cols"] == 64
    # Strided columns keep the wider tile (gathers, or a fixed stride's picks of 8 vectors).
    assert plan("sum", "column", 3, 40_000, sx_c=20)["tile_cols"] == 512
    assert plan("sum", "column", 3, 40_000, sx_c=3)["tile_cols"] == 128
    # column_rows: 8 rows a step for sums read in their accumulator type, whatever the partials' size.
    for dt, acc in (("f32", ""), ("f64", ""), ("i64", "")):
        for cols in (2000, 8192):
            assert plan("sum", "column_rows", 6000, cols, dt, acc)["tile_rows"] == 8, (dt, cols)
    # Converted inputs and integer max: one row a step up to 16 KiB of partials, four beyond;
    # float max / min read in their own type: 8 rows of 4 vectors (session 29).
    for op, dt in (("max", "f32"), ("min", "f64")):
        p = plan(op, "column_rows", 6000, 2000, dt)
        assert (p["tile_rows"], p["tile_cols"]) == (8, 64 if dt == "f32" else 32), (op, dt, p)
    for op, dt, acc in (("max", "i32", ""), ("sum", "bf16", "f32"), ("sum", "i32", "i64")):
        assert plan(op, "column_rows", 6000, 2000, dt, acc)["tile_rows"] == 1, (op, dt)
        assert plan(op, "column_rows", 6000, 8192, dt, acc)["tile_rows"] == 4, (op, dt)
