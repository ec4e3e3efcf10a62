"""Fused GEMM epilogues (matmul / gemm / compile_gemm keywords) against NumPy in float64: every
step and the combinations that matter, every dtype the product takes, the plans (splits, packing,
layouts, the blocked nest, skinny and matrix-vector walks, small fixed kernels, AMX emulated),
batches and broadcasting, and the errors."""
import math

import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit.ir import KernelBuilder

rng = np.random.default_rng(1717)
_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x):
    return _erf(np.asarray(x, np.float64)).astype(np.float64)


ACT = {
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
}


def reference(a, b, *, alpha=1.0, beta=0.0, c=None, scale=None, row_scale=None, bias=None, bias_axis=1,
              activation=None, residual=None, fn=None):
    """The documented order, in float64."""
    y = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if scale is not None:
        y = y * np.asarray(scale, np.float64)
    if row_scale is not None:
        y = y * np.asarray(row_scale, np.float64)[:, None]
    if beta != 0.0:
        y = y + beta * c.astype(np.float64)
    if bias is not None:
        bv = np.asarray(bias, np.float64)
        y = y + (bv if bias_axis == 1 else bv[:, None])
    if activation is not None:
        y = ACT[activation](y)
    if residual is not None:
        y = y + np.asarray(residual, np.float64)
    if fn is not None:
        y = fn(y)
    return y


def check(got, ref, a, b, *, scale=None, row_scale=None, out_eps=None, compute=np.float32, extra=0.0):
    """|got - ref| within the product's rounding bound (scaled by the scales, times 2 for the
    activation's slope), the activation's own error and the output type's rounding."""
    k = a.shape[-1]
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    if scale is not None:
        mag = mag * np.abs(np.asarray(scale, np.float64))
    if row_scale is not None:
        mag = mag * np.abs(np.asarray(row_scale, np.float64))[:, None]
    eps = np.finfo(compute).eps
    bound = 2.0 * (k + 4) * eps * mag + 64 * eps * (np.abs(ref) + 1.0) + extra
    if out_eps is not None:
        bound = bound + out_eps * np.abs(ref)
    got64 = np.asarray(got).astype(np.float64)
    assert got64.shape == ref.shape
    err = np.abs(got64 - ref)
    bad = ~(err <= bound)
    assert not bad.any(), f"{bad.sum()} elements off; worst {err[bad].max()} at {np.argwhere(bad)[0]}"


def rnd(*shape, dtype=np.float32, s=1.0):
    return (rng.standard_normal(shape) * s).astype(dtype)


@pytest.mark.parametrize("activation", sorted(ACT))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_activation_with_bias(activation, dtype):
    a, b = rnd(37, 19, dtype=dtype, s=1.5), rnd(19, 53, dtype=dtype)
    bias = rnd(53, dtype=dtype)
    got = coopjit.matmul(a, b, bias=bias, activation=activation)
    assert got.dtype == dtype
    check(got, reference(a, b, bias=bias, activation=activation), a, b, compute=dtype)


def test_activations_over_a_wide_range():
    # One column of B is the identity's: the product's row is the values themselves (exact), so
    # the activation is checked over [-30, 30] and at the edges of exp's range.
    x = np.concatenate([np.linspace(-30, 30, 601), [-100.0, -88.0, -87.0, 0.0, -0.0, 1e-6, -1e-6, 87.0, 89.0, 100.0]])
    a = x.astype(np.float32)[:, None]
    b = np.ones((1, 1), np.float32)
    for act in ACT:
        got = coopjit.matmul(a, b, activation=act)[:, 0].astype(np.float64)
        want = ACT[act](x.astype(np.float32).astype(np.float64))
        err = np.abs(got - want)
        assert np.all(err <= 4e-6 * np.abs(want) + 2e-7), (act, x[np.argmax(err - 4e-6 * np.abs(want))], err.max())


PLANS = [{}, {"split": "sk"}, {"split": "sk+dp"}, {"pack": True}, {"pack": True, "kt": 32}, {"layout": "col"},
         {"layout": "col", "pack": True, "kt": 48}, {"threads": 1}, {"threads": 2, "split": "sk", "kt": 16},
         {"mr": 4, "nr": 16}]


@pytest.mark.parametrize("plan", PLANS, ids=[str(p) for p in PLANS])
def test_all_steps_every_plan(plan):
    m, n, k = 45, 70, 131
    a, b = rnd(m, k), rnd(k, n)
    scale, row_scale, bias = rnd(n, s=0.5) + 1.0, rnd(m, s=0.5) + 1.0, rnd(n)
    residual = rnd(m, n)
    ref = reference(a, b, scale=scale, row_scale=row_scale, bias=bias, activation="gelu", residual=residual)
    got = coopjit.matmul(a, b, plan=plan, scale=scale, row_scale=row_scale, bias=bias, activation="gelu",
                         residual=residual)
    check(got, ref, a, b, scale=scale, row_scale=row_scale)
    # bias along M, the bfloat16 output
    ref = reference(a, b, bias=rnd(m) * 0 + bias[:1], bias_axis=0, activation="silu")
    got = coopjit.matmul(a, b, plan=plan, bias=np.full(m, bias[0]), bias_axis=0, activation="silu",
                         out_dtype=ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16
    check(got, ref, a, b, out_eps=2.0 ** -8)


def test_transposed_operands_and_column_major_output():
    m, n, k = 33, 29, 50
    a, b = rnd(k, m).T, rnd(n, k).T  # column-major views: the planner computes C^T = B^T A^T
    out = np.empty((n, m), np.float32).T
    bias, rs = rnd(n), rnd(m)
    got = coopjit.matmul(a, b, out=out, bias=bias, row_scale=rs, activation="tanh")
    assert got is out
    check(out, reference(a, b, bias=bias, row_scale=rs, activation="tanh"), a, b, row_scale=rs)


@pytest.mark.parametrize("shape", [(8, 16, 20), (64, 64, 64), (3, 7, 5)], ids=str)
def test_small_fixed_kernels(shape):
    m, n, k = shape
    a, b = rnd(m, k), rnd(k, n)
    bias = rnd(n)
    res = rnd(m, n)
    got = coopjit.matmul(a, b, bias=bias, residual=res, activation="relu")
    check(got, reference(a, b, bias=bias, residual=res, activation="relu"), a, b)


def test_skinny_and_matrix_vector_walks():
    # M = 48 rows, long K, wide N: the unpacked blocked nest ("k_outer"), its partial sums kept
    # apart until the last K tile applies the epilogue.
    a, b = rnd(48, 1024, s=0.2), rnd(1024, 512, s=0.2)
    bias = rnd(512)
    k = coopjit.compile_gemm(48, 512, 1024, bias=True, activation="gelu")
    for plan in ({}, {"order": "k_outer", "kt": 128}):
        got = coopjit.matmul(a, b, plan=plan, bias=bias, activation="gelu")
        check(got, reference(a, b, bias=bias, activation="gelu"), a, b)
    check(k(a, b, bias=bias), reference(a, b, bias=bias, activation="gelu"), a, b)
    # A matrix times a vector: the "dot" walk (one column of results per tile).
    a, x = rnd(300, 700), rnd(700)
    bias = rnd(300)
    got = coopjit.matmul(a, x, bias=bias, bias_axis=0, activation="sigmoid", residual=rnd(300) * 0 + 1.0)
    ref = reference(a, x[:, None], bias=bias, bias_axis=0, activation="sigmoid")[:, 0] + 1.0
    assert got.shape == (300,)
    check(got[:, None], ref[:, None], a, x[:, None])
    got = coopjit.matmul(a, x, plan={"order": "dot"}, bias=bias, bias_axis=0, activation="relu")
    check(got[:, None], reference(a, x[:, None], bias=bias, bias_axis=0, activation="relu"), a, x[:, None])


def test_batched_with_broadcast_residual_and_vectors():
    a, b = rnd(2, 3, 21, 40), rnd(40, 35)
    bias, res = rnd(35), rnd(3, 1, 35)  # the residual broadcasts over batch dim 0 and the rows
    got = coopjit.matmul(a, b, bias=bias, activation="relu", residual=res)
    assert got.shape == (2, 3, 21, 35)
    ref = np.maximum(a.astype(np.float64) @ b + bias, 0) + res
    for i in range(2):
        for j in range(3):
            check(got[i, j], ref[i, j], a[i, j], b)
    # a scalar bias is repeated; 1-D a
    x = rnd(40)
    got = coopjit.matmul(x, b, bias=2.0, activation="relu")
    assert got.shape == (35,)
    check(got[None], np.maximum(x.astype(np.float64) @ b + 2.0, 0)[None], x[None], b)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn"])
def test_low_precision_inputs(name):
    dt = np.float16 if name == "float16" else getattr(ml_dtypes, name)
    a, b = rnd(40, 64).astype(dt), rnd(64, 24).astype(dt)
    bias = rnd(24)
    got = coopjit.matmul(a, b, bias=bias, activation="gelu_tanh", out_dtype=np.float32)
    assert got.dtype == np.float32
    check(got, reference(a, b, bias=bias, activation="gelu_tanh"), a, b)
    got = coopjit.matmul(a, b, bias=bias)  # the default output: the 16-bit input type, float32 for float8
    assert got.dtype == (np.float32 if name.startswith("float8") else dt)


@pytest.mark.parametrize("amx", ["no", pytest.param("emulated", marks=pytest.mark.skipif(
    coopjit.cpu_info()["vector_bytes"] < 64,
    reason="the AMX emulation needs AVX-512 vectors; this CPU (or COOPJIT_CPU_LEVEL) gives 32-byte ones"))])
@pytest.mark.parametrize("a_dtype", [np.int8, np.uint8])
def test_w8a8_prepacked_scale_bias_gelu_bfloat16(a_dtype, amx):
    # int8 weights prepacked, int8 / uint8 activations: int32 sums scaled per column (and per
    # row: the activations' scales), bias, GELU, bfloat16 out.
    m, k, n = 24, 256, 80
    x = rng.integers(0 if a_dtype == np.uint8 else -128, 128, (m, k)).astype(a_dtype)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    ws, xs = (rng.random(n) * 1e-3).astype(np.float32), (rng.random(m) + 0.5).astype(np.float32)
    bias = rnd(n)
    pw = coopjit.prepack(w, plan={"amx": amx})
    got = coopjit.matmul(x, pw, scale=ws, row_scale=xs, bias=bias, activation="gelu", out_dtype=ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16
    ref = reference(x, w, scale=ws, row_scale=xs, bias=bias, activation="gelu")
    check(got, ref, x, w, scale=ws, row_scale=xs, out_eps=2.0 ** -8)
    # unpacked, and float32 by default
    got = coopjit.matmul(x, w, scale=ws, bias=bias)
    assert got.dtype == np.float32
    check(got, reference(x, w, scale=ws, bias=bias), x, w, scale=ws)


def test_gemm_beta_alpha_and_trans():
    m, n, k = 30, 41, 57
    a, b, c = rnd(k, m), rnd(n, k), rnd(m, n)
    c0 = c.copy()
    bias, sc = rnd(n), rnd(n)
    got = coopjit.gemm(a, b, c, alpha=0.5, beta=-2.0, trans_a=True, trans_b=True, scale=sc, bias=bias,
                       activation="relu")
    assert got is c
    ref = reference(a.T, b.T, alpha=0.5, beta=-2.0, c=c0, scale=sc, bias=bias, activation="relu")
    check(c, ref, a.T, b.T, scale=sc, extra=4 * np.finfo(np.float32).eps * np.abs(c0))


def test_user_function_sees_the_callers_coordinates():
    m, n, k = 37, 50, 23

    def fn(b: KernelBuilder, row, col, v):  # v + 1000 * row + col, as f32
        return b.add(v, b.convert(b.add(b.mul(row, 1000), col), "f32"))

    rows, cols = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
    for plan in ({}, {"layout": "col"}, {"split": "sk"}, {"pack": True, "kt": 8}):
        a, b = rnd(m, k), rnd(k, n)
        got = coopjit.matmul(a, b, plan=plan, activation="relu", epilogue=fn)
        ref = np.maximum(a.astype(np.float64) @ b, 0) + 1000 * rows + cols
        check(got, ref, a, b)


def test_compile_gemm_bound_and_per_call_operands():
    m, n, k = 40, 60, 32
    a, b = rnd(m, k), rnd(k, n)
    bias = rnd(n)
    kern = coopjit.compile_gemm(m, n, k, bias=bias, residual=True, activation="silu", out_dtype=ml_dtypes.bfloat16)
    assert kern.config["epilogue"] == kern.config["epilogue"] and "silu" in kern.config.notes.get("epilogue",
                                                                                                     kern.config["epilogue"])
    r1, r2 = rnd(m, n), rnd(m, n)
    check(kern(a, b, residual=r1), reference(a, b, bias=bias, activation="silu", residual=r1), a, b, out_eps=2.0 ** -8)
    check(kern(a, b, residual=r2), reference(a, b, bias=bias, activation="silu", residual=r2), a, b, out_eps=2.0 ** -8)
    other_bias = rnd(n)  # a per-call value replaces the bound one
    check(kern(a, b, residual=r1, bias=other_bias), reference(a, b, bias=other_bias, activation="silu", residual=r1),
          a, b, out_eps=2.0 ** -8)
    with pytest.raises(ValueError, match="residual"):
        kern(a, b)
    with pytest.raises(ValueError, match="scale"):
        kern(a, b, residual=r1, scale=bias)
    plain = coopjit.compile_gemm(m, n, k)
    with pytest.raises(ValueError, match="without an epilogue"):
        plain(a, b, bias=bias)
    # the plan round-trips (the epilogue is a fact of the kernel, not a choice)
    again = coopjit.compile_gemm(m, n, k, bias=bias, residual=True, activation="silu", out_dtype=ml_dtypes.bfloat16,
                                 plan=kern.config)
    assert again.config == kern.config


def test_the_fused_kernel_is_one_kernel_ir():
    kern = coopjit.compile_gemm(64, 64, 64, bias=True, activation="gelu")
    ir = kern.source("ir")
    assert "erf" in ir and "BIAS" in ir
    assert "erf" not in coopjit.compile_gemm(64, 64, 64).source("ir")


def test_inputs_are_not_modified_and_out_may_overlap_nothing():
    a, b = rnd(20, 30), rnd(30, 40)
    bias, res, sc = rnd(40), rnd(20, 40), rnd(40)
    copies = [x.copy() for x in (a, b, bias, res, sc)]
    coopjit.matmul(a, b, bias=bias, residual=res, scale=sc, activation="gelu")
    for x, y in zip((a, b, bias, res, sc), copies):
        assert np.array_equal(x, y)
    # the residual is the output itself (an in-place update: out = relu(a @ b) + out)
    out = rnd(20, 40)
    want = reference(a, b, activation="relu", residual=out.copy())
    coopjit.matmul(a, b, out=out, residual=out, activation="relu")
    check(out, want, a, b)


def test_float64_math_is_float64():
    a, b = rnd(16, 8, dtype=np.float64, s=2.0), rnd(8, 24, dtype=np.float64)
    for act in ("gelu", "tanh", "silu"):
        got = coopjit.matmul(a, b, activation=act)
        ref = reference(a, b, activation=act)
        assert np.allclose(got, ref, rtol=1e-13, atol=1e-14), act


def test_kernel_builder_erf_and_exp():
    # erf / exp / tanh of f32 are vector code on the CPU: compared with the C library in float64.
    kb = KernelBuilder("math", 16)
    x = kb.param("x", "ptr<f32>")
    y = kb.param("y", "ptr<f32>")
    n = kb.param("n", "index")
    t = "coopmatrix<f32, 1, 16, acc, subgroup>"

    def body(b, i):
        m = b.load(t, x, 0, i, strides=(0, 1), bounds=(1, n), checked=True)
        for fi, f in enumerate(("erf", "exp", "tanh")):
            r = b.per_element(m, lambda bb, r, c, v, _f=f: getattr(bb, _f)(v))
            b.store(r, y, fi, i, strides=(n, 1), bounds=(3, n), checked=True)

    kb.for_range(0, n, 16, body=body)
    k = kb.compile()
    xs = np.concatenate([np.linspace(-12, 12, 2001), [0.0, -0.0, 80.0, -80.0]]).astype(np.float32)
    ys = np.empty((3, xs.size), np.float32)
    k(xs, ys, xs.size)
    x64 = xs.astype(np.float64)
    for row, want in ((0, erf(x64)), (1, np.exp(x64)), (2, np.tanh(x64))):
        err = np.abs(ys[row] - want)
        assert np.all(err <= 3e-7 * np.abs(want) + 1e-7 * (row != 1) + 1e-38), (row, err.max())
    ys = np.empty((3, 3), np.float32)
    k(np.array([np.inf, -np.inf, np.nan], np.float32), ys, 3)
    assert ys[0, 0] == 1 and ys[0, 1] == -1 and np.isnan(ys[0, 2])
    assert ys[1, 0] == np.inf and ys[1, 1] == 0 and np.isnan(ys[1, 2])
    assert ys[2, 0] == 1 and ys[2, 1] == -1 and np.isnan(ys[2, 2])


class TestErrors:
    a, b = rnd(10, 12), rnd(12, 14)

    def test_vector_lengths_are_named(self):
        with pytest.raises(ValueError, match=r"bias has shape \(13,\).*14"):
            coopjit.matmul(self.a, self.b, bias=np.zeros(13, np.float32))
        with pytest.raises(ValueError, match=r"bias_axis=0"):
            coopjit.matmul(self.a, self.b, bias=np.zeros(10, np.float32))
        with pytest.raises(ValueError, match=r"row_scale has shape \(14,\).*10"):
            coopjit.matmul(self.a, self.b, row_scale=np.ones(14, np.float32))
        with pytest.raises(ValueError, match=r"residual has shape \(3, 14\)"):
            coopjit.matmul(self.a, self.b, residual=np.zeros((3, 14), np.float32))
        with pytest.raises(ValueError, match="bias_axis must be"):
            coopjit.matmul(self.a, self.b, bias=np.zeros(14, np.float32), bias_axis=2)

    def test_names_and_types(self):
        with pytest.raises(ValueError, match="unknown activation 'gelux'"):
            coopjit.matmul(self.a, self.b, activation="gelux")
        with pytest.raises(TypeError, match="activation must be"):
            coopjit.matmul(self.a, self.b, activation=3)
        with pytest.raises(TypeError, match="epilogue must be a function"):
            coopjit.matmul(self.a, self.b, epilogue=3)
        with pytest.raises(TypeError, match="out_dtype=int32"):
            coopjit.matmul(self.a, self.b, bias=np.zeros(14, np.float32), out_dtype=np.int32)
        with pytest.raises(TypeError, match="must hold numbers"):
            coopjit.matmul(self.a, self.b, bias=np.array(["x"] * 14))
        with pytest.raises(TypeError, match="must return an IR value"):
            coopjit.matmul(self.a, self.b, epilogue=lambda kb, r, c, v: 3.0)
        with pytest.raises(TypeError, match="must return a f32 value"):
            coopjit.matmul(self.a, self.b, epilogue=lambda kb, r, c, v: r)
        with pytest.raises(ValueError, match="added kernel parameters"):
            coopjit.matmul(self.a, self.b, epilogue=lambda kb, r, c, v: kb.add(v, kb.param("x", "f32")))
        with pytest.raises(Exception, match="boom"):
            coopjit.matmul(self.a, self.b, epilogue=lambda kb, r, c, v: (_ for _ in ()).throw(RuntimeError("boom")))

    def test_int8_with_beta_and_devices(self):
        x = np.ones((4, 8), np.int8)
        with pytest.raises(ValueError, match="residual="):
            coopjit.gemm(x, x.T.copy(), np.zeros((4, 4), np.float32), beta=1.0, scale=np.ones(4, np.float32))


DEVICES = ["opencl:0", "cuda:0"]


@pytest.mark.parametrize("device", DEVICES)
def test_epilogues_on_devices(device):
    # The same steps in the device recipe (SIMT lowering: SPIR-V for opencl:0, PTX for cuda:0),
    # against NumPy in float64: data-parallel and Stream-K, both layouts, a bfloat16 output, gemm
    # with beta, compile_gemm with per-call operands and a user function.
    if device not in coopjit.devices():
        pytest.skip(f"no {device} on this machine")
    m, n, k = 70, 90, 64
    a, b = rnd(m, k), rnd(k, n)
    sc, rs, bias, res = rnd(n) + 1.0, rnd(m) + 1.0, rnd(n), rnd(m, n)
    ref = reference(a, b, scale=sc, row_scale=rs, bias=bias, activation="gelu", residual=res)
    for plan in (None, {"split": "sk"}, {"layout": "row"}):
        got = coopjit.matmul(a, b, device=device, plan=plan, scale=sc, row_scale=rs, bias=bias, activation="gelu",
                             residual=res)
        check(got, ref, a, b, scale=sc, row_scale=rs)
    got = coopjit.matmul(a, b, device=device, bias=bias[:m] * 0 + 1.0, bias_axis=0, activation="silu",
                         out_dtype=ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16
    check(got, reference(a, b, bias=np.ones(m), bias_axis=0, activation="silu"), a, b, out_eps=2.0 ** -8)
    c = rnd(m, n)
    want = reference(a, b, alpha=2.0, beta=-1.0, c=c, activation="tanh")
    coopjit.gemm(a, b, c, alpha=2.0, beta=-1.0, activation="tanh", device=device)
    check(c, want, a, b, extra=1e-6)
    kern = coopjit.compile_gemm(m, n, k, device=device, bias=True, activation="relu",
                                epilogue=lambda q, row, col, v: q.add(v, q.convert(col, "f32")))
    got = kern(a, b, bias=bias)
    check(got, np.maximum(a.astype(np.float64) @ b + bias, 0) + np.arange(n), a, b)
    assert "erf" in coopjit.compile_gemm(m, n, k, device=device, activation="gelu").source("ir")
    # a batched product, the residual broadcast over the batch
    a3, res3 = rnd(3, 20, 24), rnd(20, 18)
    b3 = rnd(24, 18)
    got = coopjit.matmul(a3, b3, device=device, bias=bias[:18], activation="relu", residual=res3)
    for i in range(3):
        check(got[i], reference(a3[i], b3, bias=bias[:18], activation="relu", residual=res3), a3[i], b3)


def test_threads_building_fused_kernels_while_others_multiply():
    # Threads compiling fused kernels with their own functions while others run small products
    # (the fast path, which holds the GIL) and new shapes: every result right, nothing hangs.
    import threading

    results, errors = {}, []

    def fused(i):
        try:
            a, b = rnd(20 + i, 30), rnd(30, 10 + i)
            got = coopjit.matmul(a, b, activation="relu",
                                 epilogue=lambda q, r, c, v, k=i: q.add(v, q.const(float(k), "f32")))
            results[i] = np.abs(got - (np.maximum(a.astype(np.float64) @ b, 0) + i)).max()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def small(i):
        try:
            for n in range(2, 12):
                x = np.ones((n, n + i), np.float32)
                assert coopjit.matmul(x, x.T)[0, 0] == n + i
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=fused, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=small, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors
    assert all(results[i] < 1e-4 for i in range(4)), results
