"""Thread-scope matrices (HLSL 0035: "as if each thread has a unique copy of the matrix") and the
operations 0035's scope table allows them: Load, Accumulate, OuterProduct, and vector x matrix
Multiply / MultiplyAdd with a bias, with typed vectors (InterpretedVector: fp8 e4m3 / e5m2
elements), the same kernels on the CPU and on opencl:0 (the SIMT lowering, shared with NVPTX),
against NumPy in float64 or exact integers. Each work-item has its own vector and its own matrix
position: on opencl:0 the item is group * S + lane, on the CPU (no lane ids: a work-group is one
invocation) the item is the group."""
import ml_dtypes
import numpy as np
import pytest

from coopjit import ptx
from coopjit.ir import KernelBuilder

from device_support import DEVICE, every_module_passes_spirv_val, lanes, needs_device, validated  # noqa: F401 - the fixture

TARGETS = ["cpu", DEVICE]
S = lanes(16)  # 16, or the device's subgroup size (NVIDIA: 32)
NP = {"i8": np.int8, "u8": np.uint8, "i32": np.int32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
      "f8_e4m3": ml_dtypes.float8_e4m3fn, "f8_e5m2": ml_dtypes.float8_e5m2, "f32": np.float32, "f64": np.float64}


def mat(t, r, c, use="acc", scope="thread"):
    return f"coopmatrix<{t}, {r}, {c}, {use}, {scope}>"


def item_of(b, target):
    if target == "cpu":
        return b.work_id("group")
    return b.add(b.mul(b.work_id("group"), S), b.work_id("lane"))


def run(b, target, *args, items=None):
    """items work-items (None: one work-group that reads no group id)."""
    if target == "cpu":
        b.compile()(*args, groups=items)
    else:
        k = b.compile(device=needs_device())
        validated(k.spirv)
        k(*args, groups=None if items is None else items // S)


def values(rng, t, shape):
    if t[0] in "iu":
        info = np.iinfo(NP[t])
        return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(NP[t])
    return rng.standard_normal(shape).astype(NP[t])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("vt, mt, rt, bias_t", [
    ("f32", "f32", "f32", None), ("f16", "f16", "f32", "f32"), ("f32", "f32", "f64", "f16"),
    ("i8", "i8", "i32", "i32"), ("u8", "i8", "i32", None),
    ("f8_e4m3", "f16", "f32", "f32"), ("f8_e5m2", "f8_e4m3", "f32", None), ("bf16", "bf16", "f32", "bf16")])
def test_vector_matrix_multiply_add(rng, target, vt, mt, rt, bias_t):
    """out[item] = v[item] @ W[item] (+ bias[item]), W an M x K thread-scope b matrix at the item's
    own rows of a tall array; fp8 vectors are 0035's InterpretedVector<.., F8_E4M3 / F8_E5M2>."""
    M, K, items = 8, 5, 2 * S
    b = KernelBuilder("vecmat", S)
    V, W, OUT = b.param("V", f"ptr<{vt}>"), b.param("W", f"ptr<{mt}>"), b.param("OUT", f"ptr<{rt}>")
    BIAS = b.param("BIAS", f"ptr<{bias_t}>") if bias_t else None
    i = item_of(b, target)
    v = b.vector_load(f"vector<{vt}, {M}>", V, b.mul(i, M))
    w = b.load(mat(mt, M, K, "b"), W, b.mul(i, M), 0, strides=(K, 1))
    bias = b.vector_load(f"vector<{bias_t}, {K}>", BIAS, b.mul(i, K)) if bias_t else None
    b.vector_store(b.vector_multiply(v, w, f"vector<{rt}, {K}>", bias), OUT, b.mul(i, K))
    vv, ww = values(rng, vt, (items, M)), values(rng, mt, (items * M, K))
    out = np.zeros((items, K), NP[rt])
    args = [vv, ww, out] + ([values(rng, bias_t, (items, K))] if bias_t else [])
    run(b, target, *args, items=items)
    want = np.einsum("pm,pmk->pk", vv.astype(np.float64), ww.astype(np.float64).reshape(items, M, K))
    if bias_t:
        want += args[3].astype(np.float64)
    if rt == "i32":
        np.testing.assert_array_equal(out, want.astype(np.int64))
    else:
        tol = {"f32": 1e-5, "f64": 1e-6}[rt]  # f64 from f32 inputs: the products are exact in f64
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("target", TARGETS)
def test_checked_thread_load_reads_zero_outside(rng, target):
    """Each item loads a 4 x 3 matrix at (item - 2, 1) of a 10 x 3 array, bounds (10, 3): rows and
    columns outside read zero; a vector of ones times it gives the column sums of what is inside."""
    R, C, M, K, items = 10, 3, 4, 3, S
    b = KernelBuilder("tload", S)
    W, OUT = b.param("W", "ptr<f64>"), b.param("OUT", "ptr<f64>")
    ONES = b.param("ONES", "ptr<f64>")
    i = item_of(b, target)
    w = b.load(mat("f64", M, K, "b"), W, b.sub(i, 2), 1, strides=(C, 1), bounds=(R, C), checked=True)
    b.vector_store(b.vector_multiply(b.vector_load(f"vector<f64, {M}>", ONES), w, f"vector<f64, {K}>"), OUT,
                   b.mul(i, K))
    ww = rng.standard_normal((R, C))
    out = np.full((items, K), np.nan)
    run(b, target, ww, out, np.ones(M), items=items)
    padded = np.zeros((R + 2 * M + items, C + K))
    padded[M + 2 : M + 2 + R, :C] = ww  # row r of W at M + 2 + r, so the item's window starts at M + item
    want = np.stack([padded[M + p : 2 * M + p, 1 : 1 + K].sum(0) for p in range(items)])
    np.testing.assert_allclose(out, want, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("it, rt", [("f32", "f32"), ("f16", "f32"), ("i8", "i32"), ("bf16", "bf16")])
def test_outer_product_at_thread_scope(rng, target, it, rt):
    """Each item's outer product of its own vectors, accumulated into its own 6 x 4 block."""
    M, N, items = 6, 4, S
    b = KernelBuilder("touter", S)
    U, V, OUT = b.param("U", f"ptr<{it}>"), b.param("V", f"ptr<{it}>"), b.param("OUT", f"ptr<{rt}>")
    i = item_of(b, target)
    u = b.vector_load(f"vector<{it}, {M}>", U, b.mul(i, M))
    v = b.vector_load(f"vector<{it}, {N}>", V, b.mul(i, N))
    b.accumulate(b.outer_product(u, v, mat(rt, M, N)), OUT, b.mul(i, M), 0, strides=(N, 1), bounds=(items * M, N))
    uu, vv = values(rng, it, (items, M)), values(rng, it, (items, N))
    out = np.ones((items * M, N), NP[rt])
    run(b, target, uu, vv, out, items=items)
    want = 1 + np.einsum("pm,pn->pmn", uu.astype(np.float64), vv.astype(np.float64)).reshape(items * M, N)
    if rt == "i32":
        np.testing.assert_array_equal(out, want.astype(np.int64))
    elif rt == "bf16":  # the product rounded to bf16, then 1 + it rounded
        prod = np.einsum("pm,pn->pmn", uu.astype(np.float64), vv.astype(np.float64)).astype(NP[rt]).astype(np.float64)
        np.testing.assert_array_equal(out.astype(np.float64),
                                      (1 + prod.reshape(items * M, N)).astype(NP[rt]).astype(np.float64))
    else:
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("it, rt", [("f16", "f32"), ("i8", "i32"), ("f64", "f64")])
def test_outer_product_at_subgroup_scope_mixed_types(rng, target, it, rt):
    M, N = 16, 5
    b = KernelBuilder("souter", S)
    U, V, OUT = b.param("U", f"ptr<{it}>"), b.param("V", f"ptr<{it}>"), b.param("OUT", f"ptr<{rt}>")
    u = b.vector_load(f"vector<{it}, {M}>", U)
    v = b.vector_load(f"vector<{it}, {N}>", V)
    b.store(b.outer_product(u, v, mat(rt, M, N, scope="subgroup")), OUT, strides=(N, 1))
    uu, vv = values(rng, it, M), values(rng, it, N)
    out = np.zeros((M, N), NP[rt])
    run(b, target, uu, vv, out)
    want = np.outer(uu.astype(np.float64), vv.astype(np.float64))
    if rt == "i32":
        np.testing.assert_array_equal(out, want.astype(np.int64))
    else:
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_thread_scope_assembles_for_nvidia(target):
    """PTX of a vector x thread-scope matrix multiply-add and a thread-scope outer product
    accumulated: generated and assembled by ptxas, not run here (no NVIDIA GPU)."""
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    b = KernelBuilder("tptx", 32)
    V, W, OUT = b.param("V", "ptr<f8_e4m3>"), b.param("W", "ptr<f16>"), b.param("OUT", "ptr<f32>")
    i = b.add(b.mul(b.work_id("group"), 32), b.work_id("lane"))
    v = b.vector_load("vector<f8_e4m3, 8>", V, b.mul(i, 8))
    w = b.load(mat("f16", 8, 4, "b"), W, strides=(4, 1))
    r = b.vector_multiply(v, w, "vector<f32, 4>", b.vector_load("vector<f32, 4>", OUT, b.mul(i, 4)))
    b.vector_store(r, OUT, b.mul(i, 4))
    b.accumulate(b.outer_product(r, r, mat("f32", 4, 4)), OUT, strides=(4, 1))
    text = b._fn.compile_device("target:" + target).source("ptx")
    assert "fma.rn.f32" in text and ("red.global.add.f32" in text or "atom.global.add.f32" in text)
    assert "registers" in ptx.ptxas(text, target)


@pytest.mark.parametrize("target", TARGETS)
def test_thread_scope_matrices_through_if_and_loops(rng, target):
    """A thread-scope matrix chosen per item by an if (odd items W1, even W0: divergent on a
    subgroup) and carried by a loop that adds v @ W to a vector three times."""
    M, K, items = 4, 6, S
    b = KernelBuilder("tflow", S)
    V, W0, W1, OUT = b.param("V", "ptr<f64>"), b.param("W0", "ptr<f64>"), b.param("W1", "ptr<f64>"), b.param("OUT", "ptr<f64>")
    i = item_of(b, target)
    t = mat("f64", M, K, "b")
    (w,) = b.if_(b.eq(b.rem(i, 2), 1), lambda x: [x.load(t, W1, strides=(K, 1))], lambda x: [x.load(t, W0, strides=(K, 1))],
                 types=[t])
    v = b.vector_load(f"vector<f64, {M}>", V, b.mul(i, M))
    acc = b.vector_load(f"vector<f64, {K}>", OUT, b.mul(i, K))
    (acc, w) = b.for_range(0, 3, 1, [acc, w], lambda x, k, a, m: [x.vector_multiply(v, m, f"vector<f64, {K}>", a), m])
    b.vector_store(acc, OUT, b.mul(i, K))
    vv, w0, w1 = rng.standard_normal((items, M)), rng.standard_normal((M, K)), rng.standard_normal((M, K))
    out = rng.standard_normal((items, K))
    want = out + 3 * np.stack([vv[p] @ (w1 if p % 2 else w0) for p in range(items)])
    run(b, target, vv, w0, w1, out, items=items)
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-13)
