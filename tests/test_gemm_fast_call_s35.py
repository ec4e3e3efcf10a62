"""coopjit.gemm's plain calls (NumPy matrices, alpha 1, beta 0, no plan or epilogue) take matmul's
per-call fast path (session 35; the full path cost ~25 us a call): the same results as the full
path and as NumPy in float64, for every dtype, both transposes, a given or a new c; every other
call (alpha, beta, a plan, an overlapping or strided c, bad shapes) takes the full path, with its
errors."""
import numpy as np
import pytest

import coopjit
from coopjit import _core
from conftest import assert_gemm_close, dtype_operands

DTYPES = [np.float32, np.float64, "int8", "bf16", np.float16]


@pytest.fixture
def fast_calls(monkeypatch):
    calls = []
    real = _core.matmul_fast

    def counted(*args, **kw):
        got = real(*args, **kw)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(_core, "matmul_fast", counted)
    return calls


def _reference(a, b, trans_a, trans_b):
    x = (a.T if trans_a else a).astype(np.float64)
    y = (b.T if trans_b else b).astype(np.float64)
    return x @ y


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("given_c", [False, True])
def test_plain_calls_take_the_fast_path_with_the_full_paths_result(dtype, trans_a, trans_b, given_c, rng, fast_calls):
    m, n, k = 37, 29, 51
    a, b = dtype_operands(rng, dtype, m, n, k)
    a = np.ascontiguousarray(a.T) if trans_a else a
    b = np.ascontiguousarray(b.T) if trans_b else b
    full = coopjit.gemm(a, b, trans_a=trans_a, trans_b=trans_b, alpha=1.0, beta=0.0, plan={})  # plan=: the full path
    assert fast_calls == []
    if given_c:
        c = np.full(full.shape, 7, full.dtype)
        got = coopjit.gemm(a, b, c, trans_a=trans_a, trans_b=trans_b)
        assert got is c
    else:
        got = coopjit.gemm(a, b, trans_a=trans_a, trans_b=trans_b)
    assert fast_calls == [True]
    assert got.dtype == full.dtype and got.shape == full.shape == (m, n)
    ref = _reference(a, b, trans_a, trans_b)
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, ref.astype(np.int64))
    else:
        np.testing.assert_array_equal(got.astype(np.float64), full.astype(np.float64))  # the same kernel
        x, y = a.T if trans_a else a, b.T if trans_b else b
        if got.dtype.kind == "f":
            assert_gemm_close(got, x, y)
        else:  # bfloat16 out: its rounding (2^-8 relative) over float32 sums
            mag = np.abs(x.astype(np.float64)) @ np.abs(y.astype(np.float64))
            assert np.all(np.abs(got.astype(np.float64) - ref) <= 2.0**-7 * mag)


@pytest.mark.parametrize("case", ["alpha", "beta", "plan", "strided_c", "overlap", "int_alpha_2"])
def test_other_calls_take_the_full_path(case, rng, fast_calls):
    m, n, k = 20, 24, 16
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if case == "alpha":
        got = coopjit.gemm(a, b, alpha=2.0)
        assert_gemm_close(got, a, b, alpha=2.0)
    elif case == "int_alpha_2":
        got = coopjit.gemm(a, b, alpha=2)
        assert_gemm_close(got, a, b, alpha=2.0)
    elif case == "beta":
        c = c0.copy()
        coopjit.gemm(a, b, c, beta=0.5)
        assert_gemm_close(c, a, b, c0, beta=0.5)
    elif case == "plan":
        got = coopjit.gemm(a, b, plan={"threads": 1})
        assert_gemm_close(got, a, b)
    elif case == "strided_c":
        big = np.zeros((m, 2 * n), np.float32)
        c = big[:, ::2]
        coopjit.gemm(a, b, c)
        assert_gemm_close(c, a, b)
        assert not big[:, 1::2].any()  # nothing written between c's columns
    else:  # c is a's memory: computed apart, then written
        sq = rng.standard_normal((m, m)).astype(np.float32)
        want = sq.astype(np.float64) @ sq.astype(np.float64)
        sq0 = sq.copy()
        coopjit.gemm(sq, sq0, sq)
        assert_gemm_close(sq, sq0, sq0)
    # the fast path either was not asked or declined (strided or overlapping c)
    assert not any(fast_calls), (case, fast_calls)
    del want


def test_bad_calls_get_gemms_errors(rng, fast_calls):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        coopjit.gemm(a, b)
    b2 = rng.standard_normal((4, 6)).astype(np.float32)
    with pytest.raises(ValueError, match=r"c has shape \(3, 5\)"):
        coopjit.gemm(a, b2, np.zeros((3, 5), np.float32))
    with pytest.raises(TypeError):
        coopjit.gemm(a, np.zeros((4, 6), np.int16))
    c = np.zeros((3, 6), np.float32)
    c.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        coopjit.gemm(a, b2, c)
    assert not any(fast_calls)
