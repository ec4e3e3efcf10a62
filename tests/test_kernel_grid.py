"""KernelBuilder kernels on a launch grid on the CPU: work-group ids, the pool's workers, a grid
that is required (never a default that covers part of the data), extents checked for the grid
given; and the row softmax of issue 17 against NumPy in float64."""
import numpy as np
import pytest

from coopjit.bench import softmax_kernel
from coopjit.ir import KernelBuilder


def mat(t, r, c):
    return f"coopmatrix<{t}, {r}, {c}, acc, subgroup>"


def row_scaler(rows_per_group=8, cols=32):
    """Y[r, :] = X[r, :] * (r + 1) for the rows of work-group g: g * rows_per_group ..."""
    b = KernelBuilder("row_scaler")
    X, Y, R = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>"), b.param("rows", "index")
    r0 = b.mul(b.work_id("group"), rows_per_group)
    t = mat("f32", rows_per_group, cols)
    x = b.load(t, X, r0, 0, strides=(cols, 1), bounds=(R, cols), checked=True)
    y = b.per_element(x, lambda q, r, c, v, base: q.mul(v, q.convert(q.add(q.add(base, r), 1), "f32")), extras=[r0])
    b.store(y, Y, r0, 0, strides=(cols, 1), bounds=(R, cols), checked=True)
    return b.compile()


def test_every_group_runs_once_over_the_pool():
    k = row_scaler()
    assert k.reads_groups
    for rows in (8, 64, 1000, 65536):
        x = np.random.default_rng(rows).standard_normal((rows, 32)).astype(np.float32)
        y = np.full_like(x, np.nan)
        k(x, y, rows, groups=-(-rows // 8))
        np.testing.assert_array_equal(y, x * (np.arange(rows, dtype=np.float32)[:, None] + 1))


def test_group_count_and_ids_are_the_launch_grid():
    b = KernelBuilder("ids")
    out = b.param("out", "ptr<i64>")
    g, n = b.work_id("group"), b.work_id("groups")
    # out[g] = g * 1000 + groups, and the other dims of a one-dimensional grid: 0 and 1
    v = b.add(b.add(b.mul(g, 1000), n), b.add(b.work_id("group", 1), b.sub(b.work_id("groups", 2), 1)))
    v = b.add(b.mul(v, 10), b.add(b.work_id("subgroup"), b.sub(b.work_id("subgroups"), 1)))
    m = b.splat(mat("i64", 1, 1), b.convert(v, "i64"))
    b.store(m, out, g, 0, strides=(1, 1), bounds=(n, 1), checked=True)
    k = b.compile()
    for groups in (1, 3, 37):
        res = np.zeros(groups, np.int64)
        k(res, groups=groups)
        np.testing.assert_array_equal(res, (np.arange(groups) * 1000 + groups) * 10)
    res = np.zeros(4, np.int64)
    k(res, groups=0)  # no work-group: nothing runs, nothing is written
    assert not res.any()


def test_the_grid_is_required_and_checked():
    k = row_scaler()
    x = np.ones((64, 32), np.float32)
    y = np.empty_like(x)
    with pytest.raises(TypeError, match="groups=<number of work-groups>"):
        k(x, y, 64)
    with pytest.raises(ValueError, match="groups=-1"):
        k(x, y, 64, groups=-1)
    with pytest.raises(TypeError, match="groups must be an int"):
        k(x, y, 64, groups=2.0)
    # the rows a call touches follow its grid: 9 groups of 8 rows reach row 71 of a 64-row X,
    # which the checked load's bound (rows = 72) lets it read
    with pytest.raises(ValueError, match="argument 0 .X."):
        k(x, y, 72, groups=9)
    plain = KernelBuilder("plain")
    X = plain.param("X", "ptr<f32>")
    plain.store(plain.scale(plain.load(mat("f32", 1, 16), X), 2.0), X)
    pk = plain.compile()
    assert not pk.reads_groups
    with pytest.raises(ValueError, match="reads no work-group id"):
        pk(np.ones(16, np.float32), groups=4)
    z = np.ones(16, np.float32)
    pk(z, groups=1)
    pk(z)
    np.testing.assert_array_equal(z, 4.0)


def test_lane_ids_are_refused_on_the_cpu():
    b = KernelBuilder("lanes")
    out = b.param("out", "ptr<i64>")
    b.store(b.splat(mat("i64", 1, 1), b.convert(b.work_id("lane"), "i64")), out)
    with pytest.raises(Exception, match="no lane id"):
        b.compile()


@pytest.mark.parametrize("shape", [(8192, 1024), (37, 200), (5, 64)], ids=str)
def test_row_softmax_on_the_grid(shape):
    rows, cols = shape
    k = softmax_kernel(cols)  # the README's and the benchmark's
    x = (np.random.default_rng(rows).standard_normal(shape) * 4).astype(np.float32)
    x[0, :3] = [80.0, -80.0, 0.0]  # exp's range edges after the max is subtracted
    y = np.full_like(x, np.nan)
    k(x, y, rows, groups=-(-rows // 4))
    ref = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(y, ref, rtol=2e-6, atol=1e-9)
