"""Property-based sweep (hypothesis) of matmul, gemm and reduce against NumPy in float64 (issue 12):
shapes (with 1-D and batched operands), strides (views, transposes, negative strides, steps),
dtypes, byte orders and out= / c aliasing an input. Inputs are multiples of 1/4 in [-2, 2], so
that products are exact and only the accumulation order and the output's rounding differ from
the float64 reference. Examples are bounded (and derandomized) to keep the sweep under a minute:
shapes come from a small set, so the kernels compiled for them are reused."""
import ml_dtypes
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import coopjit  # noqa: E402

SETTINGS = settings(max_examples=45, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
DIMS = [1, 2, 3, 5, 8, 17]
GEMM_DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
               np.int8, np.uint8]
VIEWS = ["contiguous", "transposed", "reversed", "stepped", "fortran"]


def _values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return rng.integers(0, 6, shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-5, 6, shape).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    return (rng.integers(-8, 9, shape) / 4).astype(dtype)


def _operand(rng, shape, dtype, view, big_endian):
    """An array of `shape` holding the values, laid out as `view` says, in either byte order."""
    base = _values(rng, shape, dtype)
    if big_endian and np.dtype(dtype).itemsize > 1 and np.dtype(dtype).kind in "fiu" and dtype != ml_dtypes.bfloat16:
        base = base.astype(np.dtype(dtype).newbyteorder(">"))
    if view == "transposed" and base.ndim >= 2:
        return np.ascontiguousarray(np.swapaxes(base, -1, -2)).swapaxes(-1, -2)
    if view == "reversed" and base.ndim >= 1:
        return np.ascontiguousarray(base[..., ::-1])[..., ::-1] if base.ndim == 1 else \
            np.ascontiguousarray(base[..., ::-1, :])[..., ::-1, :]
    if view == "stepped":
        big = np.zeros(shape[:-1] + (2 * shape[-1],), base.dtype)
        big[..., ::2] = base
        return big[..., ::2]
    if view == "fortran":
        return np.asfortranarray(base)
    return base


def _tolerance(ref, mag, k, out_dtype):
    out_dtype = np.dtype(out_dtype)
    if out_dtype.kind in "iu":
        return np.zeros_like(ref)
    eps_out = float(ml_dtypes.finfo(out_dtype).eps) if out_dtype == ml_dtypes.bfloat16 else float(np.finfo(out_dtype).eps)
    eps_acc = float(np.finfo(np.float64 if out_dtype == np.float64 else np.float32).eps)
    return (k + 2) * eps_acc * mag + eps_out * np.abs(ref) + 1e-30


def _check(got, ref, mag, k, out_dtype):
    got64 = np.asarray(got).astype(np.float64)
    assert got64.shape == ref.shape, (got64.shape, ref.shape)
    err = np.abs(got64 - ref)
    tol = _tolerance(ref, mag, k, out_dtype)
    assert (err <= tol).all(), f"max error {err.max()} (tolerance {tol.flat[np.argmax(err - tol)]}); got {got64}, want {ref}"


@st.composite
def matmul_cases(draw):
    dtype = draw(st.sampled_from(GEMM_DTYPES))
    m, k, n = (draw(st.sampled_from(DIMS)) for _ in range(3))
    a_1d, b_1d = draw(st.booleans()) and draw(st.booleans()), draw(st.booleans()) and draw(st.booleans())
    batch = draw(st.sampled_from([(), (), (), (2,), (3, 1), (1, 2)]))
    a_batch = () if a_1d else batch
    b_batch = () if b_1d else draw(st.sampled_from([batch, batch[1:], ()]))
    return dict(dtype=dtype, m=m, k=k, n=n, a_1d=a_1d, b_1d=b_1d, a_batch=a_batch, b_batch=b_batch,
                views=(draw(st.sampled_from(VIEWS)), draw(st.sampled_from(VIEWS))),
                big=(draw(st.booleans()), draw(st.booleans())),
                out=draw(st.sampled_from(["none", "fresh", "big_endian", "strided", "alias_a", "alias_b", "overlap_a"])),
                seed=draw(st.integers(0, 2**16)))


@SETTINGS
@given(matmul_cases())
def test_matmul_matches_numpy(case):
    rng = np.random.default_rng(case["seed"])
    dtype, m, k, n = case["dtype"], case["m"], case["k"], case["n"]
    a_shape = (k,) if case["a_1d"] else case["a_batch"] + (m, k)
    b_shape = (k,) if case["b_1d"] else case["b_batch"] + (k, n)
    a = _operand(rng, a_shape, dtype, case["views"][0], case["big"][0])
    b = _operand(rng, b_shape, dtype, case["views"][1], case["big"][1])
    out_dtype = np.dtype(np.int32 if np.dtype(dtype).kind in "iu" else np.float32 if np.dtype(dtype).itemsize == 1
                         else dtype)
    out_shape = np.broadcast_shapes(a_shape[:-2] if len(a_shape) > 2 else (), b_shape[:-2] if len(b_shape) > 2 else ()) \
        + ((m,) if not case["a_1d"] else ()) + ((n,) if not case["b_1d"] else ())
    kind = case["out"]
    if kind == "overlap_a" and a.dtype == out_dtype and out_shape:
        # a and out in one buffer, out starting in the middle of a: a partial overlap
        size = int(np.prod(out_shape))
        buf = np.zeros(a.size + size, a.dtype)
        buf[: a.size] = a.reshape(-1)
        a = buf[: a.size].reshape(a.shape)
        overlapping_out = buf[a.size // 2: a.size // 2 + size].reshape(out_shape)
    else:
        overlapping_out = None
    a0, b0 = a.copy(), b.copy()
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    mag = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert ref.shape == out_shape
    out = overlapping_out
    if kind == "fresh":
        out = np.empty(ref.shape, out_dtype)
    elif kind == "big_endian":
        out = np.empty(ref.shape, out_dtype.newbyteorder(">") if out_dtype.itemsize > 1 and out_dtype != ml_dtypes.bfloat16
                       else out_dtype)
    elif kind == "strided":
        out = np.zeros(ref.shape[:-1] + (2 * ref.shape[-1],) if ref.ndim else (), out_dtype)
        out = out[..., ::2] if ref.ndim else out
    elif kind in ("alias_a", "alias_b"):
        src = a if kind == "alias_a" else b
        if src.shape == ref.shape and src.dtype == out_dtype and src.flags.writeable:
            out = src  # the product written over one of its own inputs
    got = coopjit.matmul(a, b, out=out)
    if out is not None:
        assert got is out
    else:
        assert np.isscalar(got) == np.isscalar(ref) or np.ndim(ref) == 0
    _check(got, ref, mag, k, out_dtype)
    if out is not a and overlapping_out is None:
        assert np.array_equal(a, a0) and a.dtype == a0.dtype
    if out is not b:
        assert np.array_equal(b, b0) and b.dtype == b0.dtype


@st.composite
def gemm_cases(draw):
    return dict(dtype=draw(st.sampled_from([np.float32, np.float64, np.float16, np.int8])),
                m=draw(st.sampled_from(DIMS)), k=draw(st.sampled_from(DIMS)), n=draw(st.sampled_from(DIMS)),
                trans=(draw(st.booleans()), draw(st.booleans())),
                views=(draw(st.sampled_from(VIEWS)), draw(st.sampled_from(VIEWS)), draw(st.sampled_from(VIEWS))),
                big=(draw(st.booleans()), draw(st.booleans()), draw(st.booleans())),
                alpha=draw(st.sampled_from([1.0, -0.5, 2.0])), beta=draw(st.sampled_from([0.0, 1.0, -1.5])),
                c=draw(st.sampled_from(["given", "none", "alias_a", "alias_b"])), seed=draw(st.integers(0, 2**16)))


@SETTINGS
@given(gemm_cases())
def test_gemm_matches_numpy(case):
    rng = np.random.default_rng(case["seed"])
    dtype, m, k, n = case["dtype"], case["m"], case["k"], case["n"]
    ta, tb = case["trans"]
    integer = np.dtype(dtype).kind in "iu"
    alpha, beta = (float(int(case["alpha"] * 2)), float(int(case["beta"] * 2))) if integer else (case["alpha"], case["beta"])
    a = _operand(rng, (k, m) if ta else (m, k), dtype, case["views"][0], case["big"][0])
    b = _operand(rng, (n, k) if tb else (k, n), dtype, case["views"][1], case["big"][1])
    out_dtype = np.dtype(np.int32 if integer else dtype)
    c = None
    if case["c"] == "given":
        c = _operand(rng, (m, n), out_dtype, case["views"][2], case["big"][2])
    elif case["c"] in ("alias_a", "alias_b"):
        src = a if case["c"] == "alias_a" else b
        if src.shape == (m, n) and src.dtype == out_dtype:
            c = src
    a64 = (a.T if ta else a).astype(np.float64)
    b64 = (b.T if tb else b).astype(np.float64)
    c64 = None if c is None else c.astype(np.float64)
    ref = alpha * (a64 @ b64) + (beta * c64 if c is not None and beta != 0.0 else 0.0)
    mag = abs(alpha) * (np.abs(a64) @ np.abs(b64)) + (abs(beta) * np.abs(c64) if c is not None else 0.0)
    a0, b0 = a.copy(), b.copy()
    got = coopjit.gemm(a, b, c, alpha=alpha, beta=beta if c is not None else 0.0, trans_a=ta, trans_b=tb)
    if c is not None:
        assert got is c
    else:
        ref = alpha * (a64 @ b64)
    _check(got, ref, mag, k + 1, out_dtype)
    if c is not a:
        assert np.array_equal(a, a0)
    if c is not b:
        assert np.array_equal(b, b0)


@st.composite
def reduce_cases(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.sampled_from([1, 2, 3, 6, 37])) for _ in range(ndim))
    axis = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1),
                          st.sets(st.integers(0, ndim - 1), min_size=1).map(lambda s: tuple(sorted(s)))))
    return dict(shape=shape, axis=axis,
                dtype=draw(st.sampled_from([np.float32, np.float64, np.float16, np.int32, np.int8, np.uint8, np.bool_])),
                op=draw(st.sampled_from(["sum", "prod", "min", "max"])),
                view=draw(st.sampled_from(VIEWS)), big=draw(st.booleans()),
                out=draw(st.sampled_from(["none", "fresh", "big_endian", "alias"])), seed=draw(st.integers(0, 2**16)))


@SETTINGS
@given(reduce_cases())
def test_reduce_matches_numpy(case):
    rng = np.random.default_rng(case["seed"])
    dtype, op, axis = np.dtype(case["dtype"]), case["op"], case["axis"]
    x = _operand(rng, case["shape"], dtype, case["view"], case["big"])
    if op == "prod" and dtype.kind == "f":  # bounded products: values in {-1, -1/2, 1/2, 1}
        x[...] = rng.choice(np.array([-1, -0.5, 0.5, 1], dtype.newbyteorder("=")), x.shape)
    x0 = x.copy()
    fn = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}[op]
    ref_native = fn(x, axis=axis)  # NumPy's own result: its dtype is the one coopjit must give
    ref_dtype = np.asarray(ref_native).dtype.newbyteorder("=")
    ref = fn(x.astype(np.float64) if dtype.kind == "f" else x, axis=axis)
    out, kind = None, case["out"]
    shape = np.shape(ref)
    if kind == "fresh" and shape:
        out = np.empty(shape, ref_dtype)
    elif kind == "big_endian" and shape and ref_dtype.itemsize > 1:
        out = np.empty(shape, ref_dtype.newbyteorder(">"))
    elif kind == "alias" and shape and x.dtype == ref_dtype and x.flags.writeable:
        flat = x.reshape(-1) if x.flags.c_contiguous else None
        if flat is not None and flat.size >= int(np.prod(shape)):
            out = flat[: int(np.prod(shape))].reshape(shape)  # the result over the first input elements
    got = coopjit.reduce(x, axis=axis, op=op, out=out)
    if out is not None:
        assert got is out
    else:
        assert np.shape(got) == shape and np.asarray(got).dtype == ref_dtype, (np.asarray(got).dtype, ref_dtype)
    if dtype.kind == "f" and op in ("sum", "prod"):
        n = x.size // max(1, int(np.prod(shape)))
        mag = np.sum(np.abs(x0.astype(np.float64)), axis=axis) if op == "sum" else np.abs(ref)
        _check(got, np.asarray(ref, np.float64), np.asarray(mag), n, ref_dtype)
    else:
        assert np.array_equal(np.asarray(got), np.asarray(ref)), (got, ref)
    if out is None or not np.shares_memory(out, x):
        assert np.array_equal(x, x0)
