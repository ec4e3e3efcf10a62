"""Matrix-vector products (issue 14, session 25): the dot walk of a vector of any stride (gathered into
a contiguous copy first) and of batches of products (the batch a parallel dimension of the walk), and
matmul's per-call fast path for a 1-D operand; against NumPy in float64 (int64 for integers)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16
TYPES = {np.dtype(np.float32): ["f32"] * 3, np.dtype(np.float64): ["f64"] * 3, np.dtype(BF16): ["bf16", "bf16", "f32"],
         np.dtype(np.float16): ["f16", "f16", "f32"], np.dtype(np.int8): ["i8", "i8", "i32"],
         np.dtype(np.uint8): ["u8", "u8", "i32"]}


def _rand(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, shape).astype(dtype)
    return rng.uniform(-1, 1, shape).astype(dtype)


def _check(c, a, b):
    # numpy.matmul in float64 (int64), with a bound from the magnitudes for floats: the
    # accumulator's rounding over K terms (any order) plus the output's; integers exactly.
    if a.dtype.kind in "iu":
        np.testing.assert_array_equal(c, np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(np.int32))
        return
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, mag = np.matmul(a64, b64), np.matmul(np.abs(a64), np.abs(b64))
    acc_eps = np.finfo(np.float64 if a.dtype == np.float64 else np.float32).eps
    out_eps = np.finfo(c.dtype).eps if c.dtype != BF16 else 2.0**-8
    err = np.abs(c.astype(np.float64) - ref)
    assert c.shape == ref.shape, (c.shape, ref.shape)
    assert np.all(err <= (a.shape[-1] + 2) * acc_eps * mag + out_eps * np.abs(ref) + 1e-30), err.max()


def _threads(*counts):
    keep = coopjit.get_num_threads()
    try:
        for t in counts:
            coopjit.set_num_threads(t)
            yield t
    finally:
        coopjit.set_num_threads(keep)


def _plan(a, b):
    """The plan of a 2-D product a @ b (b a 2-D view) on this CPU."""
    c = np.empty((a.shape[0], b.shape[1]), np.int32 if a.dtype.kind in "iu" else
                 np.float64 if a.dtype == np.float64 else np.float32)
    return coopjit._core.gemm_plan(a, b, c, False, TYPES[a.dtype], {})


def _vectors(rng, k, dtype):
    """x of K elements in the layouts a caller passes: every other element, a column of a wider
    matrix, reversed, reversed with a step, a broadcast scalar (stride 0)."""
    wide = _rand(rng, (k, 5), dtype)
    return {"step2": _rand(rng, (2 * k,), dtype)[::2], "column": wide[:, 3], "reversed": _rand(rng, (k,), dtype)[::-1],
            "reversed3": _rand(rng, (3 * k,), dtype)[::-3], "broadcast": np.broadcast_to(_rand(rng, (1,), dtype), (k,))}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.float16, np.int8])
@pytest.mark.parametrize("m,k", [(1024, 1024), (1001, 777), (9, 4100), (37, 65), (8, 65), (130, 2051)])
def test_strided_vector_takes_the_dot_walk(rng, dtype, m, k):
    # A row-major A times a vector of any stride: the dot walk (the vector gathered first), 1-D and
    # 2-D forms, every worker count; the caller's vector is left as it was.
    a = _rand(rng, (m, k), dtype)
    for name, x in _vectors(rng, k, dtype).items():
        keep = x.copy()
        assert _plan(a, x[:, None])["order"] == "dot", name
        for _ in _threads(1, 2, 3):
            _check(coopjit.matmul(a, x), a, x)
            _check(coopjit.matmul(a, x[:, None]), a, x[:, None])
        np.testing.assert_array_equal(x, keep)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_strided_vector_gemm_beta_and_strided_c(rng, dtype):
    # gemm with alpha / beta, a strided x and C a reversed column of a wider matrix; the other columns
    # untouched.
    m, k = 515, 3001
    a = _rand(rng, (m, k), dtype)
    x = _rand(rng, (3 * k, 1), dtype)[::3]
    c_type = np.float32 if dtype == BF16 else dtype
    big = _rand(rng, (m, 3), c_type)
    keep = big.copy()
    c = big[::-1, 1:2]
    coopjit.gemm(a, x, c, alpha=2.0, beta=-0.5)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    ref = 2.0 * (a64 @ x64) - 0.5 * keep[::-1, 1:2].astype(np.float64)
    mag = 2.0 * (np.abs(a64) @ np.abs(x64)) + 0.5 * np.abs(keep[::-1, 1:2])
    assert np.all(np.abs(c - ref) <= (k + 4) * np.finfo(np.float32 if dtype == BF16 else dtype).eps * mag)
    np.testing.assert_array_equal(big[:, [0, 2]], keep[:, [0, 2]])


def test_strided_vector_row_times_column_major_b(rng):
    # The same walk in the "col" orientation: a strided row vector times a column-major B (the
    # kernel's vector is the caller's A).
    k, n = 3000, 700
    b = np.asfortranarray(_rand(rng, (k, n), np.float32))
    x = _rand(rng, (1, 2 * k), np.float32)[:, ::2]
    cfg = coopjit._core.gemm_plan(x, b, np.empty((1, n), np.float32), False, TYPES[np.dtype(np.float32)], {})
    assert (cfg["layout"], cfg["order"]) == ("col", "dot"), cfg
    for _ in _threads(1, 2):
        _check(coopjit.matmul(x, b), x, b)
        _check(coopjit.matmul(x[0], b), x[0], b)


def test_strided_vector_plan_fields():
    # plan order=2 with a strided vector is taken (it was refused); fixed=1 is refused with the stride
    # named (the code would read the copy through the caller's strides).
    a = np.ones((40, 50), np.float32)
    x = np.ones((100, 1), np.float32)[::2]
    np.testing.assert_array_equal(coopjit.matmul(a, x, plan={"order": "dot"}), np.full((40, 1), 50, np.float32))
    with pytest.raises(ValueError, match=r"fixed=1 builds the strides into the code.*stride along K is 2, not 1"):
        coopjit.matmul(a, x, plan={"order": "dot", "fixed": True})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int8])
@pytest.mark.parametrize("shapes", [
    ((4, 1024, 1024), (4, 1024, 1)),      # each product its own x
    ((3, 1001, 777), (777,)),             # one x for the batch (1-D)
    ((3, 1001, 777), (777, 1)),           # one x for the batch (2-D)
    ((2, 3, 130, 513), (3, 513, 1)),      # two batch levels, x broadcast along the outer one
    ((1, 300, 2000), (5, 2000, 1)),       # A broadcast, x of each product
    ((5, 9, 4100), (5, 4100, 1)),         # few rows a product (tiles of workers cross products)
    ((7, 37, 65), (7, 65, 1)),            # short rows, K tails
])
def test_batched_vectors_take_the_dot_walk(rng, dtype, shapes):
    sa, sb = shapes
    a = _rand(rng, sa, dtype)
    b = _rand(rng, sb, dtype)
    for _ in _threads(1, 2, 3):
        _check(coopjit.matmul(a, b), a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_batched_strided_vectors(rng, dtype):
    # Batches whose vectors are strided: every other element, columns of a wider array, reversed
    # batches, a transposed stack; the batch dims broadcast.
    a = _rand(rng, (4, 300, 1100), dtype)
    xs = {
        "step2": _rand(rng, (4, 2200, 1), dtype)[:, ::2],
        "columns": _rand(rng, (4, 1100, 6), dtype)[:, :, 4:5],
        "reversed": _rand(rng, (4, 1100, 1), dtype)[::-1, ::-1],
        "transposed": _rand(rng, (1100, 4), dtype).T[:, :, None],
        "broadcast": _rand(rng, (1, 3300, 1), dtype)[:, ::3],
    }
    for name, x in xs.items():
        keep = x.copy()
        for _ in _threads(1, 2):
            _check(coopjit.matmul(a, x), a, x)
        np.testing.assert_array_equal(x, keep)
        _check(coopjit.matmul(a[::-1], x), a[::-1], x)


def test_batched_plans():
    # A batch of matrix-vector products takes the dot walk (was the batched tile walk), its workers
    # counted over the whole batch; a batch of products with N > 1 keeps its walk.
    a = np.ones((4, 4096, 4096), np.float32)[:, :8]  # (4, 8, 4096): 4 x 2 row tiles
    x = np.ones((4, 4096, 1), np.float32)
    c = np.empty((4, 8, 1), np.float32)
    cfg = coopjit._core.gemm_plan(a, x, c, False, ["f32"] * 3, {})
    assert cfg["order"] == "dot", cfg
    cfg = coopjit._core.gemm_plan(a, np.ones((4, 4096, 2), np.float32), np.empty((4, 8, 2), np.float32), False,
                                  ["f32"] * 3, {})
    assert cfg["order"] != "dot", cfg


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_batched_dot_walk_gemm_views(rng, beta):
    # The batched walk through the core's gemm with beta and a C whose batch and row strides are not
    # its shape's (every other column of a wider stack).
    a = _rand(rng, (3, 257, 1030), np.float32)
    x = _rand(rng, (3, 2060, 1), np.float32)[:, ::2]
    big = _rand(rng, (3, 257, 4), np.float32)
    keep = big.copy()
    c = big[:, :, 2:3]
    coopjit._core.gemm(a, x, c, 1.5, beta, {}, ["f32"] * 3)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    ref = 1.5 * (a64 @ x64) + beta * keep[:, :, 2:3]
    mag = 1.5 * (np.abs(a64) @ np.abs(x64)) + abs(beta) * np.abs(keep[:, :, 2:3])
    assert np.all(np.abs(c - ref) <= (1030 + 4) * np.finfo(np.float32).eps * mag)
    np.testing.assert_array_equal(big[:, :, [0, 1, 3]], keep[:, :, [0, 1, 3]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.float16, np.int8, np.uint8])
def test_one_dimensional_operand_fast_path(rng, dtype):
    # matmul's per-call fast path takes a 1-D operand (A @ x, x @ B, stacks): the same results and
    # shapes as numpy.matmul, out= of the result's shape, and the cases it leaves to Python (x @ y,
    # a mismatched out) still right.
    a = _rand(rng, (70, 90), dtype)
    x = _rand(rng, (90,), dtype)
    y = _rand(rng, (70,), dtype)
    stack = _rand(rng, (3, 70, 90), dtype)
    for left, right in ((a, x), (y, a), (stack, x), (y, stack), (a, x[::-1]), (y[::2], a[::2])):
        got = coopjit._core.matmul_fast(left, right, None)
        assert got is not None and got.shape == np.matmul(left, right).shape
        _check(got, left, right)
        _check(coopjit.matmul(left, right), left, right)
    out_type = np.int32 if np.dtype(dtype).kind in "iu" else np.float32 if dtype in (BF16, np.float16) else dtype
    out = np.empty((70,), out_type)
    assert coopjit.matmul(a, x, out=out) is out
    _check(out, a, x)
    assert coopjit._core.matmul_fast(x, x, None) is None  # a scalar: Python's path
    r = coopjit.matmul(x, x)
    assert np.ndim(r) == 0
    with pytest.raises(ValueError, match="out has shape"):
        coopjit.matmul(a, x, out=np.empty((70, 1), out_type))
    with pytest.raises(ValueError, match="inner dimensions differ"):
        coopjit.matmul(a, y)
