"""The cooperative-matrix operation set, through kernels written in Python with coopjit.ir:
HLSL 0035's wave-matrix example, a GEMM with a fused epilogue, a row softmax, an outer product
accumulated into memory, and each operation against NumPy."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit.ir import KernelBuilder


def mat(t, r, c, use="acc", scope="subgroup"):
    return f"coopmatrix<{t}, {r}, {c}, {use}, {scope}>"


def test_hlsl_wave_matrix_example(rng):
    """HLSL 0035 'Example Usage: Wave Matrix': tanh on every element of B off the diagonal,
    then A x B into an f16 and an f32 accumulator."""
    b = KernelBuilder("wave_matrix")
    A, B = b.param("A", "ptr<f16>"), b.param("B", "ptr<f16>")
    C16, C32 = b.param("C16", "ptr<f16>"), b.param("C32", "ptr<f32>")
    ma = b.load(mat("f16", 8, 32, "a"), A, strides=(32, 1))
    mb = b.load(mat("f16", 32, 16, "b"), B, strides=(16, 1))

    def body(b, i, m):
        row, col = b.get_coordinate(m, i)
        return b.if_(b.ne(row, col), lambda t: [t.set(m, i, t.tanh(t.get(m, i)))], lambda e: [m], types=[m.type])

    (mb,) = b.for_range(0, b.length(mb), 1, [mb], body)
    acc16 = b.mul_add(ma, mb, b.splat(mat("f16", 8, 16), 0.0))
    acc32 = b.mul_add(ma, mb, b.splat(mat("f32", 8, 16), 0.0))
    b.store(acc16, C16, strides=(16, 1))
    b.store(acc32, C32, strides=(16, 1))
    ir = b.ir()
    for op in ("coopmatrix.get_coordinate", "coopmatrix.get", "coopmatrix.set", "tanh", "coopmatrix.length"):
        assert op in ir
    k = b.compile()
    a = rng.standard_normal((8, 32)).astype(np.float16)
    bm = rng.standard_normal((32, 16)).astype(np.float16)
    c16, c32 = np.zeros((8, 16), np.float16), np.zeros((8, 16), np.float32)
    b_before = bm.copy()
    k(a, bm, c16, c32)
    np.testing.assert_array_equal(bm, b_before)  # B in memory is not modified
    t = bm.astype(np.float64)
    off = ~np.eye(32, 16, dtype=bool)
    t[off] = np.tanh(t[off].astype(np.float16).astype(np.float64))
    t = t.astype(np.float16).astype(np.float64)  # tanh's result is an f16 element
    ref = a.astype(np.float64) @ t
    np.testing.assert_allclose(c32, ref, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(c16.astype(np.float64), ref, rtol=0, atol=32 * 2e-3 * np.abs(ref).max())


def test_gemm_with_fused_bias_relu_epilogue(rng):
    M, N, K = 8, 32, 64
    b = KernelBuilder("gemm_bias_relu")
    A, B, C, bias = (b.param(n, "ptr<f32>") for n in ("A", "B", "C", "bias"))
    acc = b.splat(mat("f32", M, N), 0.0)

    def kstep(b, k, acc):
        a = b.load(mat("f32", M, 8, "a"), A, 0, k, strides=(K, 1))
        x = b.load(mat("f32", 8, N, "b"), B, k, 0, strides=(N, 1))
        return b.mul_add(a, x, acc)

    (acc,) = b.for_range(0, K, 8, [acc], kstep)
    bias_rows = b.load(mat("f32", M, N), bias, strides=(0, 1))  # the bias row broadcast down M
    out = b.per_element(acc, lambda b, r, c, v, bv: b.max(b.add(v, bv), 0.0), extras=[bias_rows])
    b.store(out, C, strides=(N, 1))
    k = b.compile()
    a, x, bv = (rng.standard_normal(s).astype(np.float32) for s in ((M, K), (K, N), (N,)))
    c = np.zeros((M, N), np.float32)
    k(a, x, c, bv)
    np.testing.assert_allclose(c, np.maximum(a.astype(np.float64) @ x + bv, 0), rtol=1e-5, atol=1e-5)


def test_row_softmax(rng):
    R, C = 8, 24
    b = KernelBuilder("softmax")
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    t = mat("f32", R, C)
    x = b.load(t, X, strides=(C, 1))
    mx = b.reduce(x, "row", t, "max")
    e = b.per_element(x, lambda b, r, c, v, m: b.exp(b.sub(v, m)), extras=[mx])
    s = b.reduce(e, "row", t, "add")
    y = b.per_element(e, lambda b, r, c, v, d: b.div(v, d), extras=[s])
    b.store(y, Y, strides=(C, 1))
    k = b.compile()
    x = rng.standard_normal((R, C)).astype(np.float32) * 5
    y = np.zeros_like(x)
    k(x, y)
    ref = np.exp(x - x.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-7)


def test_outer_product_accumulated_twice(rng):
    b = KernelBuilder("outer")
    U, V, OUT = b.param("U", "ptr<f32>"), b.param("V", "ptr<f32>"), b.param("OUT", "ptr<f32>")
    u = b.vector_load("vector<f32, 16>", U)
    v = b.vector_load("vector<f32, 8>", V)
    op = b.outer_product(u, v, mat("f32", 16, 8, scope="thread"))
    b.accumulate(op, OUT, strides=(8, 1))
    k = b.compile()
    u, v = rng.standard_normal(16).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    out = np.ones((16, 8), np.float32)
    k(u, v, out)
    k(u, v, out)
    np.testing.assert_allclose(out, 1 + 2 * np.outer(u.astype(np.float64), v), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", ["row", "column", "both", "2x2"])
@pytest.mark.parametrize("combine", ["add", "mul", "min", "max", "user"])
def test_reduce_modes(rng, mode, combine):
    R, C = 6, 20
    rt = {"row": (R, 3), "column": (5, C), "both": (2, 2), "2x2": (R // 2, C // 2)}[mode]
    b = KernelBuilder("reduce")
    X, Y = b.param("X", "ptr<f64>"), b.param("Y", "ptr<f64>")
    x = b.load(mat("f64", R, C), X, strides=(C, 1))
    fn = (lambda b, p, q: b.add(b.mul(p, 0.5), q)) if combine == "user" else combine  # not associative: order shows
    r = b.reduce(x, mode, mat("f64", *rt), fn)
    b.store(r, Y, strides=(rt[1], 1))
    k = b.compile()
    x = rng.uniform(0.5, 1.5, (R, C))
    y = np.zeros(rt)
    k(x, y)
    ops = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum,
           "user": lambda p, q: p * 0.5 + q}
    f = ops[combine]

    def fold(vals):  # the order the CPU lowering combines in: first to last
        acc = vals[0]
        for v in vals[1:]:
            acc = f(acc, v)
        return acc

    if mode == "row":
        want = np.repeat(np.array([fold(list(x[i])) for i in range(R)])[:, None], rt[1], 1)
    elif mode == "column":
        want = np.repeat(np.array([fold(list(x[:, c])) for c in range(C)])[None, :], rt[0], 0)
    elif mode == "both":
        want = np.full(rt, fold(list(x.reshape(-1))))
    else:
        want = np.array([[fold([x[2 * i, 2 * c], x[2 * i + 1, 2 * c], x[2 * i, 2 * c + 1], x[2 * i + 1, 2 * c + 1]])
                          for c in range(C // 2)] for i in range(R // 2)])
    np.testing.assert_allclose(y, want, rtol=1e-12)


@pytest.mark.parametrize("dst", ["f16", "bf16", "f8_e4m3", "f8_e5m2", "i32", "u8"])
def test_convert_component_types_match_ml_dtypes(dst):
    vals = np.array([0, 1, -1, 0.5, 3.14159, -2.71828, 1e-3, 1e-6, 448, 460, 464, 470, 500, 57344, 61440, 1e5,
                     -1e5, 65504, 70000, np.inf, -np.inf, np.nan, 2**-9, 2**-10, 3 * 2**-11, 2**-16, 2**-17,
                     1.00390625, 1.01171875, 255.5, 256.7, -3.5] * 2, np.float32)[:64].reshape(4, 16)
    np_dst = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f8_e4m3": ml_dtypes.float8_e4m3fn,
              "f8_e5m2": ml_dtypes.float8_e5m2, "i32": np.int32, "u8": np.uint8}[dst]
    b = KernelBuilder("convert")
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", f"ptr<{dst}>")
    x = b.load(mat("f32", 4, 16), X, strides=(16, 1))
    b.store(b.convert_matrix(x, mat(dst, 4, 16)), Y, strides=(16, 1))
    k = b.compile()
    y = np.zeros((4, 16), np_dst)
    k(vals, y)
    if dst in ("i32", "u8"):  # saturating, NaN -> 0
        info = np.iinfo(np_dst)
        v64 = vals.astype(np.float64)  # clip in float64: info.max is not a float32
        want = np.clip(np.nan_to_num(v64, nan=0, posinf=info.max, neginf=info.min), info.min, info.max)
        np.testing.assert_array_equal(y, np.trunc(want).astype(np_dst))
        return
    with np.errstate(over="ignore", invalid="ignore"):
        want = vals.astype(np_dst)
    np.testing.assert_array_equal(y.view(np.uint8 if y.itemsize == 1 else np.uint16),
                                  want.view(np.uint8 if y.itemsize == 1 else np.uint16))


@pytest.mark.parametrize("src", ["f16", "bf16", "f8_e4m3", "f8_e5m2"])
def test_convert_low_precision_to_f32_is_exact(src):
    np_src = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f8_e4m3": ml_dtypes.float8_e4m3fn,
              "f8_e5m2": ml_dtypes.float8_e5m2}[src]
    bits = np.arange(256, dtype=np.uint8) if np.dtype(np_src).itemsize == 1 else \
        np.random.default_rng(0).integers(0, 65536, 256).astype(np.uint16)
    x = bits.view(np_src).reshape(16, 16)
    b = KernelBuilder("widen")
    X, Y = b.param("X", f"ptr<{src}>"), b.param("Y", "ptr<f32>")
    m = b.load(mat(src, 16, 16), X, strides=(16, 1))
    b.store(b.convert_matrix(m, mat("f32", 16, 16)), Y, strides=(16, 1))
    k = b.compile()
    y = np.zeros((16, 16), np.float32)
    k(x, y)
    want = x.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(y[ok], want[ok])


def test_transpose_use_conversion_and_sum_accumulate(rng):
    b = KernelBuilder("misc")
    X, Y, Z = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>"), b.param("Z", "ptr<f32>")
    x = b.load(mat("f32", 8, 16), X, strides=(16, 1))
    t = b.transpose(x)  # acc 8x16 -> b 16x8
    b.store(b.convert_matrix(t, mat("f32", 16, 8, "b")), Y, strides=(8, 1))
    sq = b.load(mat("f32", 8, 8), X, strides=(16, 1))
    a = b.convert_matrix(sq, mat("f32", 8, 8, "a"))
    bb = b.convert_matrix(sq, mat("f32", 8, 8, "b"))
    acc = b.sum_accumulate(a, bb, b.splat(mat("f32", 8, 8), 1.0))
    b.store(acc, Z, strides=(8, 1))
    k = b.compile()
    x = rng.standard_normal((8, 16)).astype(np.float32)
    y, z = np.zeros((16, 8), np.float32), np.zeros((8, 8), np.float32)
    k(x, y, z)
    np.testing.assert_array_equal(y, x.T)
    np.testing.assert_allclose(z, 1 + 2 * x[:, :8], rtol=1e-6)


def test_vector_matrix_multiply_add(rng):
    b = KernelBuilder("coopvec")
    V, W, BIAS, OUT = (b.param(n, t) for n, t in (("V", "ptr<f16>"), ("W", "ptr<f16>"), ("BIAS", "ptr<f32>"),
                                                   ("OUT", "ptr<f32>")))
    v = b.vector_load("vector<f16, 16>", V)
    w = b.load(mat("f16", 16, 8, "b", "thread"), W, strides=(8, 1))
    bias = b.vector_load("vector<f32, 8>", BIAS)
    b.vector_store(b.vector_multiply(v, w, "vector<f32, 8>", bias), OUT)
    k = b.compile()
    v, w = rng.standard_normal(16).astype(np.float16), rng.standard_normal((16, 8)).astype(np.float16)
    bias, out = rng.standard_normal(8).astype(np.float32), np.zeros(8, np.float32)
    k(v, w, bias, out)
    np.testing.assert_allclose(out, v.astype(np.float64) @ w + bias, rtol=1e-5, atol=1e-5)


def test_int8_mul_add_into_int32(rng):
    b = KernelBuilder("i8")
    A, B, C = b.param("A", "ptr<u8>"), b.param("B", "ptr<i8>"), b.param("C", "ptr<i32>")
    a = b.load(mat("u8", 4, 16, "a"), A, strides=(16, 1))
    x = b.load(mat("i8", 16, 16, "b"), B, strides=(16, 1))
    b.store(b.mul_add(a, x, b.splat(mat("i32", 4, 16), 0)), C, strides=(16, 1))
    k = b.compile()
    a = rng.integers(0, 256, (4, 16)).astype(np.uint8)
    x = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    c = np.zeros((4, 16), np.int32)
    k(a, x, c)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ x.astype(np.int64))


# ---- the verifier's rules for the operation set, from Python --------------------------------------
def rejected(build, *needles):
    b = KernelBuilder("bad")
    X = b.param("X", "ptr<f32>")
    build(b, X)
    with pytest.raises(coopjit.VerifyError) as e:
        b.compile()
    for n in needles:
        assert n in str(e.value), str(e.value)


def test_verifier_rules_of_the_operation_set():
    m = lambda b, X, t: b.load(t, X, strides=(16, 1))
    rejected(lambda b, X: b.reduce(m(b, X, mat("f32", 4, 16, "a")), "row", mat("f32", 4, 16, "a"), "add"),
             "coopmatrix.reduce", "accumulator")
    rejected(lambda b, X: b.reduce(m(b, X, mat("f32", 4, 16)), "row", mat("f32", 3, 16), "add"),
             "keeps the number of rows")
    rejected(lambda b, X: b.reduce(m(b, X, mat("f32", 4, 16)), "2x2", mat("f32", 2, 4), "max"), "halves both")
    rejected(lambda b, X: b.transpose(m(b, X, mat("f32", 4, 16, "b"))), "coopmatrix.transpose", "acc M x N to b N x M")
    rejected(lambda b, X: b.convert_matrix(m(b, X, mat("f32", 4, 16, "a")), mat("f32", 4, 16, "b")),
             "convert changes use only from acc to a or b")
    rejected(lambda b, X: b.get(m(b, X, mat("f32", 4, 16, scope="thread")), 0),
             "coopmatrix.get needs subgroup or workgroup scope")
    rejected(lambda b, X: b.cast(m(b, X, mat("f32", 4, 16, scope="thread")), mat("f16", 4, 16, scope="thread")),
             "coopmatrix.cast needs subgroup or workgroup scope")
    rejected(lambda b, X: b.vector_multiply(b.vector_load("vector<f32, 4>", X), m(b, X, mat("f32", 4, 16, "b")),
                                            "vector<f32, 16>"),
             "vector.multiply needs thread scope")
    rejected(lambda b, X: b.mul_add(m(b, X, mat("f32", 4, 16, "a")), m(b, X, mat("f32", 16, 16, "b")),
                                    b.splat(mat("f16", 4, 16), 0.0)),
             "mul_add component types")
    rejected(lambda b, X: b.per_element(m(b, X, mat("f32", 4, 16)),
                                        lambda b, r, c, v: b.convert(b.length(m(b, X, mat("f32", 4, 16))), "f32")),
             "scalar operations only")


def test_more_verifier_rules_of_the_operation_set():
    m = lambda b, X, t: b.load(t, X, strides=(16, 1))
    acc = mat("f32", 4, 16)
    rejected(lambda b, X: b.reduce(m(b, X, acc), "column", mat("f32", 4, 8), "add"), "keeps the number of columns")
    rejected(lambda b, X: b.reduce(m(b, X, acc), "row", mat("f16", 4, 16), "add"), "keeps the component type")
    rejected(lambda b, X: b.reduce(m(b, X, acc), "row", acc, lambda b, x, y: b.convert(x, "f64")),
             "combine function takes two f32 and returns one")
    rejected(lambda b, X: b.per_element(m(b, X, acc), lambda b, r, c, v, e: v, extras=[m(b, X, mat("f32", 4, 8))]),
             "extra operand 1 must be a matrix of type coopmatrix<f32, 4, 16, acc, subgroup> or a scalar")
    rejected(lambda b, X: b.per_element(m(b, X, acc), lambda b, r, c, v: b.convert(v, "f64")),
             "per-element function returns one f32")
    rejected(lambda b, X: b.convert_matrix(m(b, X, acc), mat("f32", 4, 8)), "convert keeps the shape and scope")
    rejected(lambda b, X: b.set(m(b, X, acc), 0, b.const(1, "f64")), "set takes (matrix, index, element of the component type)")
    rejected(lambda b, X: b.sum_accumulate(m(b, X, mat("f32", 4, 16, "a")), m(b, X, mat("f32", 4, 8, "b")),
                                           m(b, X, acc)), "sum_accumulate adds A and B element by element")
    rejected(lambda b, X: b.outer_product(b.vector_load("vector<f32, 4>", X), b.vector_load("vector<f32, 8>", X),
                                          mat("f32", 8, 4)), "outer_product of vector<4> and vector<8> is an acc 4 x 8")
    rejected(lambda b, X: b.vector_multiply(b.vector_load("vector<f32, 4>", X),
                                            m(b, X, mat("f32", 8, 16, "b", "thread")), "vector<f32, 16>"),
             "vector x matrix takes vector<M> and a b matrix M x K")
    rejected(lambda b, X: b.vector_multiply(b.vector_load("vector<f32, 8>", X),
                                            m(b, X, mat("f32", 8, 16, "b", "thread")), "vector<f32, 16>",
                                            bias=b.vector_load("vector<f32, 8>", X)), "the bias is vector<16>")
    rejected(lambda b, X: b.accumulate(m(b, X, mat("f32", 4, 16, "b")), X, strides=(16, 1)),
             "accumulate needs an accumulator matrix")
    rejected(lambda b, X: b.sum_accumulate(m(b, X, mat("f32", 4, 4, "a", "thread")), m(b, X, mat("f32", 4, 4, "b", "thread")),
                                           m(b, X, mat("f32", 4, 4, "acc", "thread"))),
             "coopmatrix.sum_accumulate needs subgroup or workgroup scope")


def test_type_strings_are_checked():
    b = KernelBuilder("types")
    with pytest.raises(ValueError, match="coopmatrix<component, rows, cols, use, scope>"):
        b.param("X", "coopmatrix<f32, 4>")
    with pytest.raises(TypeError, match="unknown component type 'f24'"):
        b.param("X", "ptr<f24>")
    with pytest.raises(ValueError, match="unknown matrix use 'c'"):
        b.param("X", "coopmatrix<f32, 4, 4, c, subgroup>")
    with pytest.raises(ValueError, match="'0' is not a positive size"):
        b.param("X", "vector<f32, 0>")


def test_flag_ops_value_spin_limit_and_targets():
    """flag.set's optional i32 value (0 re-arms a flag: the in-kernel Stream-K fix-up's reset) and
    flag.wait's spin_limit: printed, checked by the verifier and the builder (a value of another
    type, a negative limit, an int outside i32: errors naming them); run on the CPU (a set to 7, a
    wait for it, a reset, a set); on SPIR-V the atomics with a subgroup barrier after the wait,
    and spin_limit refused (no trap there)."""
    import re

    def flags_kernel(limit):
        b = KernelBuilder("flags")
        F = b.param("F", "ptr<i32>")
        b.flag_set(F, 2, 7)
        b.flag_wait(F, 2, spin_limit=limit)
        b.flag_set(F, 2, 0)
        b.flag_set(F, 4)
        return b, F

    b, F = flags_kernel(100)
    text = b.ir()
    assert len(re.findall(r"flag\.set %F\[%\w+\], %\w+", text)) == 2 and "{spin_limit = 100}" in text, text
    with pytest.raises(ValueError, match="spin_limit must be an int >= 0 .* got -1"):
        b.flag_wait(F, 0, spin_limit=-1)
    with pytest.raises(ValueError, match="value must be an i32 .* got 2147483648"):
        b.flag_set(F, 0, 2**31)
    flags = np.full(6, 0, np.int32)
    b.compile()(flags)
    np.testing.assert_array_equal(flags, [0, 0, 0, 0, 1, 0])
    rejected(lambda b, X: b.flag_set(b.param("G", "ptr<i32>"), 0, b.const(1.0, "f32")),
             "flag.set takes (ptr<i32>, index[, i32])", "f32")
    spirv = flags_kernel(0)[0]._fn.compile_device("target:generic").source("spirv")
    for insn in ("OpAtomicExchange", "OpAtomicOr", "OpControlBarrier"):
        assert insn in spirv, insn
    with pytest.raises(ValueError, match="spin_limit on spirv64: the target has no trap"):
        flags_kernel(10)[0]._fn.compile_device("target:generic")
