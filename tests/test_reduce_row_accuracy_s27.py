"""Float sums along rows (the row form: long rows, a 1-D array's pieces, few long rows, stride-0
and strided data) against math.fsum / float64 (session 27).

Each lane of a row tile sums every tile_cols-th element of its row; with one accumulator a lane
its chain ran over cols / tile_cols elements (1e6 stride-0 elements: 3.7e-5 where NumPy's pairwise
sum gives 6.3e-8). The planner now gives float row sums longer than 128 tiles levels of partial
sums (plan sum_block x sum_levels): a lane's chains are at most sum_block long at each level and
the top level's n / sum_block^levels. For a sum of non-negative terms whose every element passes
through at most d roundings, |error| <= d u / (1 - d u) * sum (u = 2^-24, float32's unit
roundoff): each bound below is that, with d counted for the scheme the test names (levels of 16,
three of them; the cross-lane tree of log2(64) levels; a 1-D array's second pass over its pieces'
partials) and checked against the plan. Constant (stride-0 or filled) data is the worst case of a
chain: every step rounds the same way."""
import math

import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import _core

U = 2.0**-24  # float32's unit roundoff
BLOCK, LEVELS = 16, 3  # the scheme the bounds count (plan sum_block x sum_levels)
BF16 = ml_dtypes.bfloat16


def _depth(lane):
    """Roundings an element of a lane of `lane` elements meets: its levels' chains (the walk's head
    and tail tiles two more), the cross-lane tree (log2 of 64 lanes), a second pass over pieces'
    partials and tails (a row of at most ~200 elements: its own lanes' chains and tree) and the
    conversion steps: a generous 16."""
    top = math.ceil(lane / BLOCK**LEVELS)
    return LEVELS * BLOCK + top + 2 + 6 + 16


def _bound(depth):
    return depth * U / (1 - depth * U)


def _rel(got, exact):
    return float(np.max(np.abs(np.asarray(got, np.float64) - exact) / np.abs(exact)))


def test_the_plan_levels_long_float_row_sums():
    # the scheme the bounds below count; a row of 128 tiles or less keeps one chain (8192 f32 in
    # AVX-512's tiles of 64 columns, 4096 in AVX2's of 32)
    for dt in ("f32", "bf16", "f16", "f64"):
        p = _core.reduce_plan("sum", "row", 8, 2**20, in_dtype=dt, acc_dtype="f64" if dt == "f64" else "f32")
        assert (p["sum_block"], p["sum_levels"]) == (BLOCK, LEVELS), (dt, p)
        assert p["key"].endswith(f".sb{BLOCK}x{LEVELS}")
    for op in ("max", "min", "prod"):
        assert _core.reduce_plan(op, "row", 8, 2**20)["sum_block"] == 0
    cols = 128 * int(_core.reduce_plan("sum", "row", 8, 2**20)["tile_cols"])
    assert _core.reduce_plan("sum", "row", 8, cols)["sum_block"] == 0
    assert _core.reduce_plan("sum", "row", 8, cols + 1)["sum_block"] == BLOCK
    assert _core.reduce_plan("sum", "row", 8, cols, in_dtype="i32", acc_dtype="i64")["sum_block"] == 0


def _lane_1d(n, threads):
    # a 1-D array: 4 pieces a worker, each a row of a 4 x 64 row tile
    return math.ceil(n / (4 * threads) / 64)


# (name, maker(rng) -> (array, axis), lane elements(n, threads)); constant data: a value drawn once
CASES = [
    ("stride0-1e6", lambda r: (np.broadcast_to(np.float32(r.random()), (10**6,)), None), _lane_1d),
    ("stride0-2^24", lambda r: (np.broadcast_to(np.float32(r.random()), (2**24,)), None), _lane_1d),
    ("filled-2^24+7", lambda r: (np.full(2**24 + 7, np.float32(r.random())), None), _lane_1d),
    ("filled-strided-2^22", lambda r: (np.full(2**23 + 1, np.float32(r.random()))[::2], None), _lane_1d),
    ("uniform-2^24", lambda r: (r.random(2**24, dtype=np.float32), None), _lane_1d),
    ("stride0-rows-(1e6,1)-axis0", lambda r: (np.broadcast_to(np.float32([[r.random()]]), (10**6, 1)), 0), _lane_1d),
    ("few-rows-(3,2^22)-axis1", lambda r: (np.full((3, 2**22), np.float32(r.random())), 1), _lane_1d),
    ("rows-(16,2^20)-axis1", lambda r: (np.full((16, 2**20), np.float32(r.random())), 1),
     lambda n, t: math.ceil(2**20 / 64)),
    ("rows-3d-(16,1024,1024)-axes12", lambda r: (np.full((16, 1024, 1024), np.float32(r.random())), (1, 2)),
     lambda n, t: math.ceil(2**20 / 64)),
    ("rows-strided-(16,2^21)[:,::2]-axis1",
     lambda r: (np.full((16, 2**21), np.float32(r.random()))[:, ::2], 1), lambda n, t: math.ceil(2**20 / 64)),
]


@pytest.mark.parametrize("make,lane", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_float32_row_sum_error_within_the_blocked_bound(rng, threads, make, lane):
    x, axis = make(rng)
    exact = x.astype(np.float64).sum(axis=axis)
    if axis is None:
        exact = math.fsum(np.asarray(x, np.float64).ravel().tolist()) if x.size <= 2**22 else float(exact)
    n = x.size if axis is None else x.shape[-1] if axis != 0 else x.shape[0]
    got = coopjit.reduce(x, axis=axis)
    assert _rel(got, exact) <= _bound(_depth(lane(n, threads))), (_rel(got, exact), _bound(_depth(lane(n, threads))))


@pytest.mark.parametrize("dt", [BF16, np.float16], ids=["bf16", "f16"])
def test_low_precision_row_sums_accumulate_in_blocks(rng, dt):
    # The kernel's float32 sum of bf16 / f16 rows, into a float32 out (the row form the public
    # reduce runs for long rows and a 1-D array's pieces): the accumulation alone, not the result's
    # rounding to the input type. A constant of 8 / 11 significant bits: 2^18 of them in one chain
    # need 26 / 29 bits, so a chain rounds (before: 2^24 elements in 64 lanes).
    v = dt(2.0**-10 * (1 + rng.random()))
    n = 2**24
    x = np.full((2, n), v, dt)
    y = np.empty(2, np.float32)
    _core.reduce2d("sum", "row", x, y, "bf16" if dt == BF16 else "f16", "f32", "f32")
    exact = float(v) * n
    bound = _bound(_depth(n // 64))
    assert _rel(y, exact) <= bound, (_rel(y, exact), bound)
    # and through reduce: the float32 sum rounded once to the input type
    got = coopjit.reduce(x, axis=1).astype(np.float64)
    ulp = float(np.abs(np.spacing(dt(exact))))
    assert np.all(np.abs(got - exact) <= ulp / 2 + bound * exact), (got, exact)


def test_float64_row_sum_levels(rng):
    v = rng.random()
    x = np.broadcast_to(np.float64(v), (2**22,))
    u64 = 2.0**-53
    d = _depth(_lane_1d(x.size, coopjit.get_num_threads()) * 2)  # 8 f64 lanes a vector: twice the elements
    assert abs(coopjit.reduce(x) - v * 2**22) <= d * u64 * v * 2**22


@pytest.mark.parametrize("op", ["max", "min", "prod"])
def test_other_ops_of_long_rows_unchanged(rng, op):
    x = (1 + rng.random((3, 2**20), dtype=np.float32) / 2**20)
    exact = getattr(np, op if op != "prod" else "prod")(x.astype(np.float64), axis=1)
    got = coopjit.reduce(x, axis=1, op=op)
    if op == "prod":
        assert _rel(got, exact) <= 2**20 * U  # n u: a product's error bound does not depend on the order
    else:
        assert np.array_equal(got, x.max(axis=1) if op == "max" else x.min(axis=1))


def test_sum_block_overrides_are_checked():
    with pytest.raises(ValueError, match="sum_levels=9 is out of range"):
        _core.reduce_plan_overrides({"row.sum_levels": 9})
    try:
        _core.reduce_plan_overrides({"row.sum_block": 0})  # one chain a lane again (the A/B)
        x = np.broadcast_to(np.float32(0.1), (10**6,))
        assert coopjit.reduce(x) == pytest.approx(0.1 * 10**6, rel=1e-3)
    finally:
        _core.reduce_plan_overrides({})


# Axis 0 of many contiguous short rows (n x K, K elements under a line) to K values: the memory as
# rows of W elements (a multiple of K and of 8 vectors of accumulator lanes) reduced down their
# columns, then each column's W / K partials and the rows the W-wide view leaves over.
SHORT = [(4_000_000, 3), (1_000_003, 5), (300_001, 7), (2**20, 15), (2**20 + 1, 2), (2**18 + 3, 1)]


@pytest.mark.parametrize("shape", SHORT, ids=[f"{r}x{c}" for r, c in SHORT])
@pytest.mark.parametrize("dt", [np.float32, np.float64, BF16, np.int32, np.uint8, np.float16],
                         ids=["f32", "f64", "bf16", "i32", "u8", "f16"])
def test_axis0_of_short_rows_against_float64(rng, threads, shape, dt):
    if np.dtype(dt).itemsize * shape[0] * shape[1] < 2**20:
        shape = (2**20 // shape[1] + 7, shape[1])
    # (integers up to 50; float16 data under 1/64, so that a sum stays under its 65504)
    x = (rng.random(shape, dtype=np.float32) * (50 if np.dtype(dt).kind in "iu" else 2**-6 if dt == np.float16
                                                 else 1)).astype(dt)
    before = x.copy()
    x64 = x.astype(np.float64)
    for op in ("sum", "max", "min"):
        got = coopjit.reduce(x, axis=0, op=op)
        ref = getattr(np, op)(x64, axis=0)
        if op != "sum":
            assert np.array_equal(got.astype(np.float64), ref), op
        elif np.dtype(dt).kind in "iu":
            assert got.dtype == (np.uint64 if np.dtype(dt).kind == "u" else np.int64) and np.array_equal(got, ref)
        else:
            out_u = 2.0 ** -(np.finfo(dt).nmant + 1) if dt != BF16 else 2.0**-8  # (bf16: 8 significant bits)
            acc_u = 2.0**-53 if dt == np.float64 else U
            # three levels of 256 down the view's columns, the partials' column, the output rounding
            d = 3 * 256 + 64
            assert _rel(got, ref) <= out_u + d * acc_u, (op, _rel(got, ref))
    assert np.array_equal(x.view(np.uint8), before.view(np.uint8))


def test_axis0_of_short_rows_propagates_nan(threads):
    x = np.ones((2**20, 3), np.float32)
    x[777_777, 1] = np.nan
    x[5, 2] = -np.inf
    for op in ("sum", "max", "min"):
        got = coopjit.reduce(x, axis=0, op=op)
        ref = getattr(np, op)(x, axis=0)
        assert np.array_equal(got, ref, equal_nan=True), (op, got, ref)
