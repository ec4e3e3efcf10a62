"""Edges of the CPU products that session 20's audit (scripts/fuzz_cpu_plans.py) found broken: products
with K = 0 under the plans that size their K tiles from K (the packed nest, B packed by its reader,
the k_outer walk, ksplit), kernels compiled for K = 0 called with their own operands, and fused
epilogues whose bias / scale / row_scale vectors lie in the output's memory. Every result is checked
against NumPy in float64."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16
# The plans whose K tile came from dividing K into parts (a SIGFPE at K = 0 before the fix).
K_PLANS = [{"order": "k_outer"}, {"order": "k_outer", "mr": 8, "nr": 48, "kt": 256}, {"pack": 1},
           {"pack": 1, "inline_b": 1}, {"pack": 1, "k_inner": 1}]


def _out_dtype(dtype):
    return np.dtype(np.int32) if np.dtype(dtype).kind in "iu" else np.dtype(dtype)


@pytest.mark.parametrize("threads", [1, 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int8])
@pytest.mark.parametrize("m,n", [(5, 3), (64, 130)])
@pytest.mark.parametrize("plan", K_PLANS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_products_with_k_zero_under_k_tiled_plans(rng, pool, threads, dtype, m, n, plan):
    if np.dtype(dtype).itemsize < 4 and (plan.get("order") == "k_outer" or "nr" in plan):
        plan = {"order": "k_outer"}  # (16 f32 lanes a vector: nr 48 is a f32 tile)
    pool(threads)
    a, b = np.ones((m, 0), dtype), np.ones((0, n), dtype)
    odt = _out_dtype(dtype)
    try:
        got = coopjit.matmul(a, b, plan=plan)
    except ValueError as e:  # a plan that does not apply to these types is refused, by name
        assert any(key in str(e) for key in plan), e
        return
    assert got.shape == (m, n) and got.dtype == odt
    np.testing.assert_array_equal(got.astype(np.float64), np.zeros((m, n)))
    c0 = rng.integers(-4, 5, (m, n)).astype(odt)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=2.0, beta=-3.0, plan=plan)
    np.testing.assert_array_equal(c.astype(np.float64), -3.0 * c0.astype(np.float64))


@pytest.mark.parametrize("threads", [1, 2, 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_row_with_k_zero_and_ksplit(rng, pool, threads, dtype):
    pool(threads)
    n = 300
    a, b = np.ones((1, 0), dtype), np.ones((0, n), dtype)
    got = coopjit.matmul(a, b, plan={"order": "k_outer", "ksplit": 2})
    np.testing.assert_array_equal(got, np.zeros((1, n)))
    c0 = rng.standard_normal((1, n)).astype(dtype)
    c = c0.copy()
    coopjit.gemm(a, b, c, beta=0.5, plan={"order": "k_outer", "ksplit": 3, "threads": 3})
    np.testing.assert_allclose(c.astype(np.float64), 0.5 * c0.astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16, np.int8])
@pytest.mark.parametrize("m,n", [(1, 4096), (16, 512), (256, 256), (4096, 1)])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
def test_kernel_compiled_for_k_zero_takes_its_own_operands(rng, dtype, m, n, trans_a, trans_b):
    kern = coopjit.compile_gemm(m, n, 0, dtype, trans_a=trans_a, trans_b=trans_b)
    a = np.ones((0, m) if trans_a else (m, 0), dtype)
    b = np.ones((n, 0) if trans_b else (0, n), dtype)
    got = kern(a, b)
    assert got.shape == (m, n) and got.dtype == _out_dtype(dtype)
    np.testing.assert_array_equal(got.astype(np.float64), np.zeros((m, n)))
    odt = _out_dtype(dtype)
    acc = coopjit.compile_gemm(m, n, 0, dtype, trans_a=trans_a, trans_b=trans_b, accumulate=True)
    c0 = rng.integers(-4, 5, (m, n)).astype(odt)
    c = c0.copy()
    assert acc(a, b, c, alpha=3.0, beta=2.0) is c
    np.testing.assert_array_equal(c.astype(np.float64), 2.0 * c0.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8])
def test_fused_kernel_compiled_for_k_zero(rng, dtype):
    m, n = 33, 70
    kern = coopjit.compile_gemm(m, n, 0, dtype, bias=True, activation="relu", residual=True)
    bias = rng.standard_normal(n).astype(np.float32)
    res = rng.standard_normal((m, n)).astype(np.float32)
    got = kern(np.ones((m, 0), dtype), np.ones((0, n), dtype), bias=bias, residual=res)
    want = np.maximum(np.broadcast_to(bias.astype(np.float64), (m, n)), 0.0) + res.astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6, atol=1e-6)
    # the same through matmul
    got = coopjit.matmul(np.ones((m, 0), dtype), np.ones((0, n), dtype), bias=bias, activation="relu", residual=res)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("api", ["matmul", "gemm", "kernel", "prepack", "batch"])
@pytest.mark.parametrize("step", ["bias", "scale", "row_scale", "bias_axis0"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_epilogue_vectors_inside_the_output(rng, api, step, dtype):
    """bias= / scale= / row_scale= given as views of the output's own memory: read as they were
    before the call (the kernel read them while writing the output over them)."""
    m, n, k = 16, 64, 32
    a = rng.integers(-3, 4, (m, k)).astype(dtype)
    b = rng.integers(-3, 4, (k, n)).astype(dtype)
    out = rng.integers(-3, 4, (m, n)).astype(dtype)
    length = m if step in ("row_scale", "bias_axis0") else n
    vec = out.reshape(-1)[5: 5 + length]  # the second row and the next, in out's memory
    v, c0, ab = vec.astype(np.float64), out.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64)
    kw = {"bias": vec, "bias_axis": 0} if step == "bias_axis0" else {step: vec}
    want = {"bias": lambda: ab + v[None, :], "scale": lambda: ab * v[None, :], "row_scale": lambda: ab * v[:, None],
            "bias_axis0": lambda: ab + v[:, None]}[step]()
    if api == "matmul":
        got = coopjit.matmul(a, b, out=out, **kw)
    elif api == "gemm":
        got = coopjit.gemm(a, b, out, beta=0.5, **kw)
        want = want + 0.5 * c0
    elif api == "kernel":
        steps = {key: (val if key == "bias_axis" else True) for key, val in kw.items()}
        kern = coopjit.compile_gemm(m, n, k, dtype, **steps)
        got = kern(a, b, out, **{key: val for key, val in kw.items() if key != "bias_axis"})
    elif api == "prepack":
        got = coopjit.matmul(a, coopjit.prepack(b), out=out, **kw)
    else:
        got = coopjit.matmul(a[None], b[None], out=out[None], **kw)[0]
    assert np.shares_memory(got, out)
    np.testing.assert_array_equal(np.asarray(got, np.float64), want)


@pytest.mark.parametrize("m,n,k,operand", [(2**40, 2**40, 2**40, "A"), (2**62 - 1, 2**62 - 1, 2**62 - 1, "A"),
                                           (1, 2**40, 2**30, "B"), (2**26, 2**26, 1, "C")])
def test_sizes_no_memory_holds_are_refused_by_name(m, n, k, operand):
    """The planner's int64 tile counts and offsets overflowed (undefined behaviour, UBSan) for these
    legal-looking compile_gemm sizes; now a ValueError names the operand and the sizes."""
    with pytest.raises(ValueError, match=rf"{operand} of .* elements is more than 2\^50 \(M={m} N={n} K={k}\)"):
        coopjit.compile_gemm(m, n, k, np.float32)


@pytest.mark.parametrize("m,n,k", [(2**21, 2**21, 2**21), (1, 2**25, 2**25), (2**25, 1, 2**25)])
def test_large_sizes_below_the_bound_still_plan(m, n, k):
    kern = coopjit.compile_gemm(m, n, k, np.float32)
    assert (kern.m, kern.n, kern.k) == (m, n, k) and kern.config["threads"] >= 1


@pytest.mark.parametrize("threads", [1, 16])
@pytest.mark.parametrize("dtype", [BF16, np.int8])
@pytest.mark.parametrize("plan", [{"pack": 1}, {"pack": 1, "inline_b": 1}, {"pack": 1, "k_inner": 1}],
                         ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_k_zero_plans_for_amx_cpus(threads, dtype, plan):
    """K = 0 planned for an AMX CPU (cross_compile: nothing runs): the AMX block of A was sized by
    dividing by a slice of 0 bytes (a SIGFPE on the 16-core Emerald Rapids host, session 20; the
    emulated tiles here take another path). The plan must come back with the tiles and a K tile."""
    a, b = np.ones((64, 0), dtype), np.ones((0, 130), dtype)
    cfg = coopjit.cross_compile(a, b, cpu="sapphirerapids", threads=threads, plan=plan)["config"]  # with code: the crash was a K = 0 plan
    assert cfg["amx"] == "yes" and cfg["kt"] >= 1 and cfg["mc_tiles"] >= 1, cfg
