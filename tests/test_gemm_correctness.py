"""GEMM and matmul against NumPy in float64: shapes, transposes, strides, alpha/beta, dtypes."""
import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close

DTYPES = [np.float32, np.float64]

SHAPES = [
    (0, 5, 7), (5, 0, 7), (5, 7, 0), (1, 1, 1), (1, 17, 1), (17, 1, 3), (2, 3, 5), (7, 11, 13),
    (16, 16, 16), (31, 33, 29), (64, 64, 64), (97, 101, 103), (128, 40, 257), (13, 300, 2),
    (1031, 37, 61), (45, 1029, 33), (29, 31, 1201),
]


def rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matmul_matches_numpy(rng, dtype, m, n, k):
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    c = coopjit.matmul(a, b)
    assert c.dtype == dtype and c.shape == (m, n)
    assert_gemm_close(c, a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 11, 13), (33, 65, 17), (130, 47, 71), (1003, 1001, 67)])
def test_gemm_transposes(rng, dtype, trans_a, trans_b, m, n, k):
    a = rand(rng, (k, m) if trans_a else (m, k), dtype)
    b = rand(rng, (n, k) if trans_b else (k, n), dtype)
    c = coopjit.gemm(a, b, trans_a=trans_a, trans_b=trans_b)
    assert_gemm_close(c, a.T if trans_a else a, b.T if trans_b else b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (2.5, 0.0), (-1.0, 1.0), (0.5, -2.0), (0.0, 3.0), (1.0, 1.0)])
def test_gemm_alpha_beta(rng, dtype, alpha, beta):
    a, b, c0 = rand(rng, (37, 29), dtype), rand(rng, (29, 43), dtype), rand(rng, (37, 43), dtype)
    c = c0.copy()
    got = coopjit.gemm(a, b, c, alpha=alpha, beta=beta)
    assert got is c  # updated in place and returned
    assert_gemm_close(c, a, b, c0, alpha, beta)


def views(rng, dtype):
    """(name, a_view, b_view) pairs of strided, negative-stride and sliced views."""
    big_a = rand(rng, (90, 80), dtype)
    big_b = rand(rng, (80, 100), dtype)
    yield "contiguous", big_a[:40, :30].copy(), big_b[:30, :50].copy()
    yield "slices", big_a[:40, :30], big_b[:30, :50]
    yield "step2", big_a[::2, ::2][:40, :30], big_b[::2, ::2][:30, :50]
    yield "negative", big_a[::-1, ::-1][:40, :30], big_b[::-1, ::-3][:30, :30]
    yield "neg-rows", big_a[::-2][:40], big_b[::-1][:80, 1::2]
    yield "transposed views", big_b.T[:41, :33], big_a.T[:33, ::3]
    yield "fortran", np.asfortranarray(big_a[:40, :30]), np.asfortranarray(big_b[:30, :50])
    yield "broadcast rows (stride 0)", np.broadcast_to(big_a[0, :30], (20, 30)), big_b[:30, :20]


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_views(rng, dtype):
    for name, a, b in views(rng, dtype):
        a_before, b_before = a.copy(), b.copy()
        c = coopjit.matmul(a, b)
        assert_gemm_close(c, a, b)
        np.testing.assert_array_equal(a, a_before, err_msg=f"{name}: a was modified")
        np.testing.assert_array_equal(b, b_before, err_msg=f"{name}: b was modified")


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_output(rng, dtype):
    a, b = rand(rng, (37, 23), dtype), rand(rng, (23, 45), dtype)
    for out in (np.zeros((45, 37), dtype).T, np.zeros((74, 90), dtype)[::2, ::2], np.zeros((37, 45), dtype)[::-1]):
        frame = out.base.copy() if out.base is not None else None
        got = coopjit.matmul(a, b, out=out)
        assert got is out
        assert_gemm_close(out, a, b)
        if frame is not None and out.base.shape == (74, 90):
            untouched = np.ones(out.base.shape, bool)
            untouched[::2, ::2][:, :] = False
            assert (out.base[untouched] == 0).all(), "elements outside the out view were written"


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_1d_operands(rng, dtype):
    a, b, v = rand(rng, (9, 13), dtype), rand(rng, (13, 5), dtype), rand(rng, (13,), dtype)
    np.testing.assert_allclose(coopjit.matmul(a, v), a.astype(np.float64) @ v, rtol=1e-5, atol=1e-5)
    w = rand(rng, (9,), dtype)
    np.testing.assert_allclose(coopjit.matmul(w, a), w.astype(np.float64) @ a, rtol=1e-5, atol=1e-5)
    r = coopjit.matmul(v, v)
    assert r.shape == () and np.isclose(r, float(v.astype(np.float64) @ v), rtol=1e-5)
    assert coopjit.matmul(v, b).shape == (5,)


def test_out_overlapping_input_gives_right_answer(rng):
    a = rand(rng, (64, 64), np.float32)
    b = rand(rng, (64, 64), np.float32)
    a0, b0 = a.copy(), b.copy()
    coopjit.matmul(a, b, out=a)
    assert_gemm_close(a, a0, b0)
    c = b.copy()
    coopjit.gemm(a0, c, c, alpha=1.0, beta=1.0)  # c is both b and c
    assert_gemm_close(c, a0, b, b, 1.0, 1.0)
    # a partially overlapping view
    buf = rand(rng, (80, 64), np.float64)
    x0 = buf[:64].copy()
    y = rand(rng, (64, 64), np.float64)
    coopjit.matmul(buf[:64], y, out=buf[16:80])
    assert_gemm_close(buf[16:80], x0, y)


@pytest.mark.parametrize("dtype", DTYPES)
def test_non_finite_alpha_beta_propagate(rng, dtype):
    a, b, c0 = rand(rng, (8, 5), dtype), rand(rng, (5, 6), dtype), rand(rng, (8, 6), dtype)
    for alpha, beta in ((np.nan, 0.0), (np.inf, 0.0), (1.0, np.nan), (1.0, -np.inf)):
        c = c0.copy()
        coopjit.gemm(a, b, c, alpha=alpha, beta=beta)
        with np.errstate(invalid="ignore"):
            want = alpha * (a.astype(np.float64) @ b) + (beta * c0 if beta != 0 else 0)
        np.testing.assert_array_equal(np.isnan(c), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(c), np.isinf(want))


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_in_inputs_propagates(rng, dtype):
    a, b = rand(rng, (20, 10), dtype), rand(rng, (10, 40), dtype)
    a[3, 4] = np.nan
    b[7, 33] = np.inf
    c = coopjit.matmul(a, b)
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ b
    np.testing.assert_array_equal(np.isnan(c), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(c), np.isinf(want))


def test_zero_sized_dimensions_match_numpy():
    for m, n, k in [(0, 3, 4), (3, 0, 4), (3, 4, 0), (0, 0, 0)]:
        a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
        got = coopjit.matmul(a, b)
        want = np.matmul(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    c = np.full((3, 4), 2.0)
    coopjit.gemm(np.ones((3, 0)), np.ones((0, 4)), c, alpha=1.0, beta=0.5)
    np.testing.assert_array_equal(c, np.full((3, 4), 1.0))


def test_large_square(rng):
    a, b = rand(rng, (1100, 1100), np.float32), rand(rng, (1100, 1100), np.float32)
    assert_gemm_close(coopjit.matmul(a, b), a, b)


def test_plan_overrides_give_same_result(rng):
    a, b = rand(rng, (50, 70), np.float64), rand(rng, (70, 90), np.float64)
    for plan in ({"layout": "col"}, {"mr": 3, "nr": 8}, {"kb": 8}, {"layout": "col", "mr": 5, "kb": 16}):
        assert_gemm_close(coopjit.matmul(a, b, plan=plan), a, b)


BATCH_CASES = [
    ((4, 5, 6), (6, 7)),            # a stack times one matrix (b broadcast, stride 0)
    ((5, 6), (3, 6, 2)),            # one matrix times a stack
    ((2, 3, 4, 5), (2, 3, 5, 6)),   # two batch dims, contiguous: merged into one
    ((2, 1, 4, 5), (1, 3, 5, 6)),   # broadcast on both sides: two batch levels
    ((3, 1, 2, 4, 5), (1, 2, 1, 5, 6)),  # three batch dims that do not merge
    ((7,), (2, 7, 3)),              # 1-D times a stack
    ((2, 4, 7), (7,)),              # a stack times 1-D
    ((0, 3, 4), (4, 5)),            # empty batch
    ((4096, 16, 16), (4096, 16, 16)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", BATCH_CASES)
def test_batched_matmul_matches_numpy(rng, dtype, sa, sb):
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    got = coopjit.matmul(a, b)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape and got.dtype == dtype
    k = a.shape[-1]
    tol = (k + 2) * np.finfo(dtype).eps * np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert (np.abs(got - want) <= tol + np.finfo(dtype).tiny).all()


def test_batched_strided_and_transposed_views(rng):
    base = rand(rng, (6, 9, 10), np.float32)
    a = base[::2, 1:, ::-1][:, :7, :5]          # (3, 7, 5) strided, negative
    b = np.swapaxes(rand(rng, (3, 4, 5), np.float32), 1, 2)  # (3, 5, 4) transposed views
    out = np.zeros((4, 3, 7), np.float32).transpose(1, 2, 0)  # (3, 7, 4) non-contiguous
    got = coopjit.matmul(a, b, out=out)
    assert got is out
    np.testing.assert_allclose(out, np.matmul(a.astype(np.float64), b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_out_on_the_fast_path_and_around_it(rng, dtype):
    a = rng.standard_normal((6, 5, 4)).astype(dtype)
    b = rng.standard_normal((4, 3)).astype(dtype)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = np.full((6, 5, 3), np.nan, dtype)
    assert coopjit.matmul(a, b, out=out) is out
    assert_gemm_close(out.reshape(30, 3), a.reshape(30, 4), b)
    # a strided out (not C-contiguous) and an out that is an input: the full path, same results
    wide = np.full((6, 5, 6), np.nan, dtype)
    coopjit.matmul(a, b, out=wide[:, :, ::2])
    np.testing.assert_allclose(wide[:, :, ::2], ref, rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-5)
    assert np.isnan(wide[:, :, 1::2]).all()
    sq = rng.standard_normal((3, 4, 4)).astype(dtype)
    expect = sq.astype(np.float64) @ sq.astype(np.float64)
    coopjit.matmul(sq, sq, out=sq)
    np.testing.assert_allclose(sq, expect, rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-5)


LOWP_FAST = ["int8", "uint8", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]


@pytest.mark.parametrize("name", LOWP_FAST)
def test_low_precision_fast_path_matches_the_full_path(rng, name):
    # matmul's C++ per-call path takes every GEMM dtype; plan={} forces the Python path: the two
    # must agree bit for bit, stacks and out= included, and match NumPy in float64.
    import ml_dtypes
    dt = np.dtype(getattr(ml_dtypes, name, None) or name)
    if dt.kind in "iu":
        a = rng.integers(-100 if dt.kind == "i" else 0, 100, (3, 20, 24)).astype(dt)
        b = rng.integers(-100 if dt.kind == "i" else 0, 100, (24, 12)).astype(dt)
    else:
        a, b = rng.uniform(-2, 2, (3, 20, 24)).astype(dt), rng.uniform(-2, 2, (24, 12)).astype(dt)
    assert coopjit._core.matmul_fast(a, b, None) is not None
    fast, full = coopjit.matmul(a, b), coopjit.matmul(a, b, plan={})
    assert fast.dtype == full.dtype
    np.testing.assert_array_equal(fast.view(np.uint8), full.view(np.uint8))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if dt.kind in "iu":
        np.testing.assert_array_equal(fast, ref)
    else:
        tol = (24 + 2) * np.finfo(np.float32).eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
        if fast.dtype != np.float32:  # rounded once to the 16-bit output
            tol = tol + np.abs(ref) * 2.0 ** -(8 if name == "bfloat16" else 11)
        assert (np.abs(fast.astype(np.float64) - ref) <= tol).all()
    if name in ("float16", "bfloat16"):  # a float32 out is allowed (and is the accurate result)
        out = np.full((3, 20, 12), np.nan, np.float32)
        assert coopjit.matmul(a, b, out=out) is out
        np.testing.assert_array_equal(out, coopjit.matmul(a, b, out=np.empty((3, 20, 12), np.float32), plan={}))
    # mixed int8 / uint8 takes the fast path too; other mixes go to Python, which refuses them
    if name == "int8":
        u = rng.integers(0, 200, (24, 12)).astype(np.uint8)
        np.testing.assert_array_equal(coopjit.matmul(a, u), a.astype(np.int64) @ u.astype(np.int64))
    # other mixes follow numpy.matmul's promotion (float64 here), through the Python path
    mixed = coopjit.matmul(a, b.astype(np.float64))
    assert mixed.dtype == np.float64
    np.testing.assert_allclose(mixed, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-12, atol=1e-12)
