"""Axis-0 reductions of wide rows (the column_rows form: each worker adds its rows into a row of
partials): 8 rows a step at every width since session 28 (one row a step over 3-16 KiB of partials
read at 0.6-0.7x NumPy's axis-0 sum on Zen 5). The plan, and results against NumPy in float64 /
int64 for row counts around the step (1, 7, 8, 9, 17, 1000) and widths with remainders."""
import numpy as np
import pytest

import coopjit
from coopjit import _core


@pytest.mark.parametrize("rows,cols", [(2048, 2048), (4096, 1024), (8192, 768), (8192, 8192), (2048, 16384)])
@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_column_rows_plan_takes_eight_rows_a_step(rows, cols, dt):
    p = _core.reduce_plan("sum", "column_rows", rows, cols, in_dtype=dt)
    assert p["tile_rows"] == 8, p


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [1, 7, 8, 9, 17, 1000])
@pytest.mark.parametrize("cols", [100, 1024, 2050, 3000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_axis0_of_wide_rows(rows, cols, dtype, op, threads, rng):
    if np.dtype(dtype).kind == "i":
        x = rng.integers(-1000, 1000, (rows, cols)).astype(dtype)
    else:
        x = rng.standard_normal((rows, cols)).astype(dtype)
    x0 = x.copy()
    old = coopjit.get_num_threads()
    coopjit.set_num_threads(threads)
    try:
        got = coopjit.reduce(x, axis=0, op=op)
    finally:
        coopjit.set_num_threads(old)
    np.testing.assert_array_equal(x, x0)
    if op == "max":
        np.testing.assert_array_equal(got, x.max(axis=0))
        return
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(got, x.astype(np.int64).sum(axis=0))
        return
    ref = x.astype(np.float64).sum(axis=0)
    scale = np.abs(x.astype(np.float64)).sum(axis=0)
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(got.astype(np.float64) - ref) <= 2 * rows * eps * scale + 1e-300), (rows, cols, dtype)


def test_strided_and_transposed_views(rng):
    x = rng.standard_normal((600, 4100)).astype(np.float32)
    for v in (x[::3, 1:4001], x[50:, ::2], np.asfortranarray(x)):
        ref = v.astype(np.float64).sum(axis=0)
        got = coopjit.reduce(v, axis=0)
        assert np.max(np.abs(got - ref)) <= 2 * v.shape[0] * np.finfo(np.float32).eps * np.abs(v).sum(axis=0).max()
