"""Session 29: the column form's results stored non-temporally (plan stream_y) where Y is large
next to X (few rows: (3, n) along axis 0; many short rows: (n, 3) along axis 1), and every
column form's full tiles stored without the per-lane bounds test. Against NumPy in float64 (the
seed of each draw is in the parametrisation): sums within a blocked float sum's bound, min / max
exact; NaN and infinities as NumPy's; Y at every offset into a cache line (run_reduce reduces
the columns before Y's first 64-byte boundary in a call of their own), Y's neighbours untouched.
"""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import _core

BF16 = ml_dtypes.bfloat16
BIG = 1 << 20  # columns: Y of 4 MiB of f32, the planner's smallest streamed Y


@pytest.fixture(autouse=True)
def _plain_plans():
    _core.reduce_plan_overrides({})
    yield
    _core.reduce_plan_overrides({})


def _ref(x, axis, op):
    with np.errstate(invalid="ignore"):
        return _ref_(x, axis, op)


def _ref_(x, axis, op):
    if op in ("max", "min"):
        return getattr(np, op)(x.astype(np.float64), axis=axis)
    return np.sum(x.astype(np.float64), axis=axis)


def _check(got, x, axis, op):
    ref = _ref(x, axis, op)
    got = np.asarray(got, np.float64)
    if op in ("max", "min"):  # exact, NaN where NumPy's is
        np.testing.assert_array_equal(got, ref)
        return
    n = x.size // ref.size
    u = 2.0**-53 if x.dtype == np.float64 else 2.0**-24
    tol = (n + 16) * u * np.sum(np.abs(x.astype(np.float64)), axis=axis) * 1.01
    if x.dtype == BF16:
        tol = tol + np.abs(ref) * 2.0**-8
    fin = np.isfinite(ref)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), (x.shape, axis, op)
    assert np.array_equal(got[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)])
    err = np.abs(got[fin] - ref[fin])
    assert np.all(err <= tol[fin]), (x.shape, axis, op, float(np.max(err - tol[fin])))


def _draw(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.random(shape, dtype=np.float32) * 4 - 1).astype(dtype)


def test_planner_streams_large_y_only():
    f32 = dict(in_dtype="f32", vector_bytes=64, threads=1)
    assert _core.reduce_plan("sum", "column", 3, 4_000_000, **f32)["stream_y"]
    assert _core.reduce_plan("max", "column", 8, BIG, **f32)["stream_y"]
    # Y under 4 MiB, or under an eighth of X: ordinary stores
    assert not _core.reduce_plan("sum", "column", 3, BIG // 2, **f32)["stream_y"]
    assert not _core.reduce_plan("sum", "column", 9, BIG, **f32)["stream_y"]
    # other forms never
    assert not _core.reduce_plan("sum", "row", 4_000_000, 3, **f32)["stream_y"]
    assert not _core.reduce_plan("sum", "column_rows", 3, 4_000_000, **f32)["stream_y"]
    # the short rows' view (segments) of (4e6, 3) along axis 1
    p = _core.reduce_plan("sum", "column", 3, 4_000_000, 1, 3, **f32)
    assert p["segments"] and p["stream_y"]
    # bf16 in, bf16 out: Y of half the bytes; f64
    assert _core.reduce_plan("sum", "column", 2, 3_000_000, in_dtype="bf16", acc_dtype="f32", out_dtype="bf16",
                             vector_bytes=64, threads=1)["stream_y"]
    assert _core.reduce_plan("sum", "column", 3, BIG, in_dtype="f64", vector_bytes=32, threads=2)["stream_y"]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int32])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("rows,cols", [(3, BIG + 37), (1, BIG + 5), (8, BIG + 64)])
def test_few_rows_axis0(threads, dtype, op, rows, cols):
    before = coopjit.get_num_threads()
    coopjit.set_num_threads(threads)
    try:
        x = _draw((rows, cols), dtype, 29 + rows)
        got = coopjit.reduce(x, axis=0, op=op)
        if dtype == np.int32:
            ref = getattr(np, op)(x.astype(np.int64), axis=0)
            np.testing.assert_array_equal(np.asarray(got, np.int64), ref)
        else:
            _check(got, x, 0, op)
    finally:
        coopjit.set_num_threads(before)


@pytest.mark.parametrize("dtype,offset", [(t, o) for t in (np.float32, np.float64, BF16)
                                          for o in (0, 2, 4, 8, 16, 28, 32, 48, 60, 62)
                                          if o % np.dtype(t).itemsize == 0])
def test_y_offsets_and_neighbours(dtype, offset):
    """out= at every offset into a line (of whole elements): the head before the first 64-byte
    boundary and the streamed rest; the bytes around out are not written."""
    item = np.dtype(dtype).itemsize
    cols = BIG + 19
    x = _draw((3, cols), dtype, 7 + offset)
    buf = np.full(cols * item + 256, 0x5A, np.uint8)
    start = (-buf.ctypes.data) % 64 + 64 + offset
    out = buf[start:start + cols * item].view(dtype)
    before = buf.copy()
    coopjit.reduce(x, axis=0, op="sum", out=out)
    _check(out, x, 0, "sum")
    np.testing.assert_array_equal(buf[:start], before[:start])
    np.testing.assert_array_equal(buf[start + cols * item:], before[start + cols * item:])


@pytest.mark.parametrize("n", [3, 5, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_short_rows_axis1(n, dtype, op):
    x = _draw((BIG + 3, n), dtype, 100 + n)
    _check(coopjit.reduce(x, axis=1, op=op), x, 1, op)


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_nan_inf_streamed(op):
    x = _draw((3, BIG + 40), np.float32, 5)
    x[0, 17] = np.nan
    x[2, 100_000] = np.nan
    x[1, 200_000] = np.inf
    x[0, 300_000] = -np.inf
    x[1, 400_000], x[2, 400_000] = np.inf, -np.inf  # sum NaN, max inf, min -inf
    x[:, -1] = np.nan  # the last, partial tile
    got = coopjit.reduce(x, axis=0, op=op)
    _check(got, x, 0, op)


@pytest.mark.parametrize("stream", [0, 1])
def test_override_same_result(stream):
    """stream_y forced on or off: the same values (bit for bit for max, the same sum order)."""
    x = _draw((4, BIG + 77), np.float32, 11)
    base = coopjit.reduce(x, axis=0)
    _core.reduce_plan_overrides({"column.stream_y": stream})
    np.testing.assert_array_equal(coopjit.reduce(x, axis=0), base)
    small = _draw((3, 1000), np.float32, 12)  # forced on a small Y (asked for: still aligned)
    _check(coopjit.reduce(small, axis=0), small, 0, "sum")


def test_override_checked():
    with pytest.raises(ValueError, match="stream_y"):
        _core.reduce_plan_overrides({"column.stream_y": 2})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("shape", [(4096, 4096), (6007, 2001), (21, 70_000), (1000, 1000)])
def test_column_rows_float_min_max(dtype, op, shape):
    """Float min / max down the columns of wide rows (column_rows, 8 rows of 4 vectors a step
    since session 29): rows not a multiple of 8, columns not of a tile, NaN and infinities."""
    x = _draw(shape, dtype, shape[0])
    rng = np.random.default_rng(shape[1])
    for _ in range(6):
        x[rng.integers(shape[0]), rng.integers(shape[1])] = np.nan
    x[rng.integers(shape[0]), rng.integers(shape[1])] = np.inf
    x[rng.integers(shape[0]), rng.integers(shape[1])] = -np.inf
    x[-1, -1] = np.nan  # the last row's tail
    _check(coopjit.reduce(x, axis=0, op=op), x, 0, op)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int32, np.int8])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("n", [16, 32, 48, 64, 128, 200, 1024, 5000])
def test_row_tiles_across_lanes(dtype, op, n):
    """Row tiles of 2-S rows reduced across their lanes together (session 29): rows of whole
    vectors (4 or 8 a tile) and others, a row count that leaves a partial tile, NaN in a row."""
    rows = 8 * 37 + 5
    x = _draw((rows, n), dtype, n) if np.dtype(dtype).kind == "f" or dtype == BF16 else \
        np.random.default_rng(n).integers(-100, 100, (rows, n)).astype(dtype)
    if dtype != np.int32 and dtype != np.int8:
        x[3, n // 2] = np.nan
        x[rows - 1, 0] = np.inf
    got = coopjit.reduce(x, axis=1, op=op)
    if np.dtype(dtype).kind == "i":
        ref = getattr(np, op)(x.astype(np.int64), axis=1)
        np.testing.assert_array_equal(np.asarray(got, np.int64), ref)
    else:
        _check(got, x, 1, op)
