"""The operation set through the SIMT lowering: kernels written with coopjit.ir run on opencl:0
and are checked against NumPy: mul_add in layouts where A and B move between lanes (M < S, M > S,
odd N), the four reduce modes with built-in and user combines, use conversions and transposes,
per-element functions, sum_accumulate, outer products, atomic accumulation; unsupported operations
are errors that name them. Every module passes spirv-val."""
import numpy as np
import pytest

from coopjit.ir import KernelBuilder

from device_support import (every_module_passes_spirv_val, is_spirv, lanes, lanes_cases,  # noqa: F401 - the fixture
                            needs_device, validated)

S = lanes(16)  # the subgroup size of the kernels that name none: 16, or the device's (NVIDIA: 32)


def mat(t, r, c, use="acc", scope="subgroup"):
    return f"coopmatrix<{t}, {r}, {c}, {use}, {scope}>"


def build(b, sg=S):
    k = b.compile(device=needs_device())
    validated(k.spirv)
    assert k.subgroup_size == sg
    return k


@pytest.mark.parametrize("M, N, K, sg", lanes_cases([(8, 32, 8, 16), (4, 7, 4, 16), (64, 3, 16, 16), (16, 16, 32, 8),
                                                     (2, 40, 4, 32), (32, 5, 8, 16)]))
def test_mul_add_in_every_layout(rng, M, N, K, sg):
    b = KernelBuilder("mma", sg)
    A, B, C = (b.param(n, "ptr<f64>") for n in "ABC")
    a = b.load(mat("f64", M, K, "a"), A, strides=(K, 1))
    x = b.load(mat("f64", K, N, "b"), B, strides=(1, K))  # B stored transposed: any strides
    c = b.load(mat("f64", M, N), C, strides=(N, 1))
    b.store(b.mul_add(a, x, c), C, strides=(N, 1))
    k = build(b, sg)
    av, bv, cv = rng.standard_normal((M, K)), rng.standard_normal((K, N)), rng.standard_normal((M, N))
    out = cv.copy()
    k(av, np.ascontiguousarray(bv.T), out)
    np.testing.assert_allclose(out, av @ bv + cv, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("R, C, mode", [(r, c, m) for r, c in [(8, 20), (32, 8), (1, 40), (16, 16)]
                                         for m in ("row", "column", "both", "2x2") if m != "2x2" or r % 2 == 0])
@pytest.mark.parametrize("combine", ["add", "max", "user"])
def test_reduce_modes(rng, R, C, mode, combine):
    rt = {"row": (R, 3), "column": (2, C), "both": (2, 2), "2x2": (R // 2, C // 2)}[mode]
    b = KernelBuilder("reduce", S)
    X, Y = b.param("X", "ptr<f64>"), b.param("Y", "ptr<f64>")
    x = b.load(mat("f64", R, C), X, strides=(C, 1))
    fn = (lambda b, p, q: b.add(b.mul(p, 1.0), q)) if combine == "user" else combine  # a user region
    r = b.reduce(x, mode, mat("f64", *rt), fn)
    b.store(r, Y, strides=(rt[1], 1))
    k = build(b)
    xv = rng.uniform(0.5, 1.5, (R, C))
    y = np.zeros(rt)
    k(xv, y)
    f = np.max if combine == "max" else np.sum
    if mode == "row":
        want = np.repeat(f(xv, axis=1)[:, None], rt[1], 1)
    elif mode == "column":
        want = np.repeat(f(xv, axis=0)[None, :], rt[0], 0)
    elif mode == "both":
        want = np.full(rt, f(xv))
    else:
        want = f(xv.reshape(R // 2, 2, C // 2, 2), axis=(1, 3))
    np.testing.assert_allclose(y, want, rtol=1e-14)


def test_use_conversions_and_transpose_feed_mul_add(rng):
    # acc -> a and acc -> b (SPV_NV_cooperative_matrix2 use conversion), acc -> b transposed.
    b = KernelBuilder("uses", S)
    X, Y, Z, OUT1, OUT2 = (b.param(n, "ptr<f32>") for n in ("X", "Y", "Z", "OUT1", "OUT2"))
    x = b.load(mat("f32", 16, 8), X, strides=(8, 1))
    y = b.load(mat("f32", 8, 12), Y, strides=(12, 1))
    z = b.load(mat("f32", 16, 8), Z, strides=(8, 1))
    xa = b.convert_matrix(x, mat("f32", 16, 8, "a"))
    yb = b.convert_matrix(y, mat("f32", 8, 12, "b"))
    b.store(b.mul_add(xa, yb, b.splat(mat("f32", 16, 12), 0.0)), OUT1, strides=(12, 1))
    zt = b.transpose(z)  # b 8 x 16
    b.store(b.mul_add(xa, zt, b.splat(mat("f32", 16, 16), 1.0)), OUT2, strides=(16, 1))
    k = build(b)
    xv, yv, zv = (rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (8, 12), (16, 8)))
    o1, o2 = np.zeros((16, 12), np.float32), np.zeros((16, 16), np.float32)
    k(xv, yv, zv, o1, o2)
    np.testing.assert_allclose(o1, xv.astype(np.float64) @ yv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o2, xv.astype(np.float64) @ zv.T + 1, rtol=1e-5, atol=1e-5)


def test_per_element_with_extras_and_component_types(rng):
    b = KernelBuilder("pe", S)
    X, B, Y, H = b.param("X", "ptr<f32>"), b.param("B", "ptr<f32>"), b.param("Y", "ptr<f32>"), b.param("H", "ptr<f16>")
    s = b.param("s", "f32")
    t = mat("f32", 4, 24)
    x = b.load(t, X, strides=(24, 1))
    bias = b.load(t, B, strides=(0, 1))  # one row broadcast down the matrix
    y = b.per_element(x, lambda b, r, c, v, bv, sv: b.add(b.mul(b.max(b.add(v, bv), 0.0), sv),
                                                       b.convert(b.add(b.mul(r, 100), c), "f32")), extras=[bias, s])
    b.store(y, Y, strides=(24, 1))
    b.store(b.convert_matrix(y, mat("f16", 4, 24)), H, strides=(24, 1))
    k = build(b)
    xv, bv = rng.standard_normal((4, 24)).astype(np.float32), rng.standard_normal(24).astype(np.float32)
    out, half = np.zeros((4, 24), np.float32), np.zeros((4, 24), np.float16)
    k(xv, bv, out, half, 2.5)
    want = np.maximum(xv + bv, 0) * 2.5 + np.add.outer(np.arange(4) * 100, np.arange(24))
    np.testing.assert_allclose(out, want, rtol=1e-6)
    np.testing.assert_array_equal(half, out.astype(np.float16))


def test_sum_accumulate_outer_product_and_atomic_accumulate(rng):
    b = KernelBuilder("misc", S)
    A, B, C, U, V, OUT = (b.param(n, "ptr<f32>") for n in ("A", "B", "C", "U", "V", "OUT"))
    a = b.load(mat("f32", 16, 8, "a"), A, strides=(8, 1))
    x = b.load(mat("f32", 16, 8, "b"), B, strides=(8, 1))
    c = b.load(mat("f32", 16, 8), C, strides=(8, 1))
    b.store(b.sum_accumulate(a, x, c), C, strides=(8, 1))
    u = b.vector_load("vector<f32, 16>", U)
    v = b.vector_load("vector<f32, 8>", V)
    op = b.outer_product(u, v, mat("f32", 16, 8))
    b.accumulate(op, OUT, strides=(8, 1))
    b.accumulate(op, OUT, strides=(8, 1))
    k = build(b)
    av, xv, cv = (rng.standard_normal((16, 8)).astype(np.float32) for _ in range(3))
    uv, vv = rng.standard_normal(16).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    c_out, out = cv.copy(), np.ones((16, 8), np.float32)
    k(av, xv, c_out, uv, vv, out)
    np.testing.assert_allclose(c_out, av + xv + cv, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out, 1 + 2 * np.outer(uv, vv), rtol=1e-6, atol=1e-6)


def test_checked_access_at_any_position(rng):
    # A 16 x 8 window at (-3, 5) of a 10 x 9 matrix: what falls outside reads zero and is not written.
    b = KernelBuilder("edges", S)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    r0, c0 = b.param("r0", "index"), b.param("c0", "index")
    m = b.load(mat("f32", 16, 8), X, r0, c0, strides=(9, 1), bounds=(10, 9), checked=True)
    b.store(b.scale(m, 2.0), Y, r0, c0, strides=(9, 1), bounds=(10, 9), checked=True)
    k = build(b)
    xv = rng.standard_normal((10, 9)).astype(np.float32)
    for r, c in ((-3, 5), (0, 0), (4, 2), (9, 8)):
        y = np.full((10, 9), 7, np.float32)
        k(xv, y, r, c)
        inside = np.zeros((10, 9), bool)
        inside[max(r, 0):r + 16, max(c, 0):c + 8] = True
        np.testing.assert_array_equal(y[inside], 2 * xv[inside])
        assert (y[~inside] == 7).all()


def test_unsupported_operations_name_themselves():
    needs_device()
    b = KernelBuilder("odd_rows", S)
    X = b.param("X", "ptr<f32>")
    b.store(b.load(mat("f32", 6, 4), X, strides=(4, 1)), X, strides=(4, 1))
    with pytest.raises(ValueError, match="rows 6 is not a power of two"):
        b.compile(device=needs_device())


def test_flags_are_global_atomics(rng):
    # Stream-K's flags (flag.set: release store, flag.wait: acquire spin) in one work-group: set,
    # then wait for what is set, then publish a tile; the plan for GPUs is data-parallel (no flags).
    b = KernelBuilder("flags", S)
    F, X, Y = b.param("F", "ptr<i32>"), b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    b.flag_set(F, 3)
    b.flag_wait(F, 3)
    b.store(b.load(mat("f32", 16, 4), X, strides=(4, 1)), Y, strides=(4, 1))
    k = build(b)
    if is_spirv():
        text = k.source("spirv")
        assert "OpAtomicExchange" in text and "OpAtomicOr" in text  # (LLVM 22 writes atomic store / load as plain ones)
        assert "OpControlBarrier" in text  # the subgroup leaves the wait together
    else:  # NVPTX: a release exchange and acquire loads at .gpu scope, the warp leaving together
        text = k.source("ptx")
        assert "atom.release.gpu.global.exch.b32" in text and "ld.acquire.gpu.global.b32" in text and "bar.warp.sync" in text
    flags = np.zeros(5, np.int32)
    x, y = rng.standard_normal((16, 4)).astype(np.float32), np.zeros((16, 4), np.float32)
    k(flags, x, y)
    np.testing.assert_array_equal(flags, [0, 0, 0, 1, 0])
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("dst", ["f8_e4m3", "f8_e5m2"])
def test_convert_to_fp8_rounds_and_saturates_like_ml_dtypes(dst):
    # f32 -> fp8 on the device (fp8_convert.cpp, shared with the CPU): nearest even, subnormals,
    # e4m3fn's overflow to NaN, e5m2's to infinity, NaN.
    import ml_dtypes

    npd = {"f8_e4m3": ml_dtypes.float8_e4m3fn, "f8_e5m2": ml_dtypes.float8_e5m2}[dst]
    vals = np.array([0, 1, -1, 0.5, 3.14159, -2.71828, 1e-3, 1e-6, 448, 460, 464, 470, 500, 57344, 61440, 1e5,
                     -1e5, 65504, 70000, np.inf, -np.inf, np.nan, 2**-9, 2**-10, 3 * 2**-11, 2**-16, 2**-17,
                     1.00390625, 1.01171875, 255.5, 256.7, -3.5] * 2, np.float32)[:64].reshape(4, 16)
    b = KernelBuilder("to_fp8", S)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", f"ptr<{dst}>")
    x = b.load(mat("f32", 4, 16), X, strides=(16, 1))
    b.store(b.convert_matrix(x, mat(dst, 4, 16)), Y, strides=(16, 1))
    k = build(b)
    y = np.zeros((4, 16), npd)
    k(vals, y)
    with np.errstate(over="ignore", invalid="ignore"):
        want = vals.astype(npd)
    np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))


def test_splat_of_a_lane_varying_value_reads_the_first_lane():
    # HLSL 0035's Splat of a value that differs between lanes takes the first lane's
    # (WaveReadLaneFirst): every element is the same, lane 0's value (here 5 + 0).
    b = KernelBuilder("splat_first", S)
    OUT = b.param("OUT", "ptr<f32>")
    v = b.add(b.convert(b.work_id("lane"), "f32"), 5.0)
    b.store(b.splat(mat("f32", 16, 16), v), OUT, strides=(16, 1))
    k = build(b)
    out = np.full((16, 16), -1.0, np.float32)
    k(out, groups=1)
    np.testing.assert_array_equal(out, np.full((16, 16), 5.0, np.float32))
