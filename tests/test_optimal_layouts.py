"""HLSL 0035's implementation-chosen layouts: linalg::AccumulatorLayout() and
MatrixLayout::MulOptimal / OuterProductOptimal (thread-scope Load / Accumulate, 0035's layout
tables), on the CPU and opencl:0 (the SIMT lowering; its PTX assembled by ptxas), against NumPy in
float64 and seeds/001's layout tables."""
import numpy as np
import pytest

import coopjit
from coopjit import layout, ptx
from coopjit.ir import KernelBuilder

from device_support import DEVICE, every_module_passes_spirv_val, lanes, needs_device, validated  # noqa: F401 - the fixture

TARGETS = ["cpu", DEVICE]
S = lanes(16)  # 16, or the device's subgroup size (NVIDIA: 32)


def item_of(b, target):
    """The work-item: group * S + lane on the device; the group on the CPU (no lane ids)."""
    if target == "cpu":
        return b.work_id("group")
    return b.add(b.mul(b.work_id("group"), S), b.work_id("lane"))


def run(b, target, *args, items):
    if target == "cpu":
        b.compile()(*args, groups=items)
    else:
        k = b.compile(device=needs_device())
        validated(k.spirv)
        k(*args, groups=items // S)


def acc_matches(use, rows, cols, t, sg):
    a, x = layout.coopmatrix(rows, cols, "acc", t, sg).table(), layout.coopmatrix(rows, cols, use, t, sg).table()
    return a.shape == x.shape and bool((a == x).all())


def test_accumulator_layout_is_the_b_layout_of_seed_001():
    """Every accumulator type of a multiply, every shape: the accumulator's lanes hold what a B
    matrix's hold (seeds/001's tables), and for 16-bit types not what an A matrix's hold (so the
    answer is not a coin toss: A would be wrong there)."""
    assert layout.accumulator_layout() == "b"
    for t in ("f16", "bf16", "f32", "f64", "i32"):
        for sg in (16, 32):
            for rows in (1, 2, 4, 8, 16, 32, 64):
                for cols in (1, 3, 8, 16, 17, 32):
                    assert acc_matches("b", rows, cols, t, sg), (t, sg, rows, cols)
                    if t in ("f16", "bf16") and rows > 1 and cols % 2 == 0:  # A: VNNI pairs along an even K
                        assert not acc_matches("a", rows, cols, t, sg), (t, sg, rows, cols)


@pytest.mark.parametrize("target", TARGETS)
def test_accumulator_layout_in_a_kernel(target):
    """KernelBuilder.accumulator_layout(): DXIL's value (0: A, 1: B) as an index constant a kernel
    computes with, here written to every element of a matrix."""
    want = 1 if acc_matches("b", 16, 16, "f16", S) else 0
    b = KernelBuilder("acc_layout", S)
    X = b.param("X", "ptr<i32>")
    t = "coopmatrix<i32, 16, 16, acc, subgroup>"
    b.store(b.splat(t, b.convert(b.accumulator_layout(), "i32")), X, strides=(16, 1))
    x = np.full((16, 16), -1, np.int32)
    if target == "cpu":
        b.compile()(x)
    else:
        k = b.compile(device=needs_device())
        validated(k.spirv)
        k(x, groups=1)
    assert (x == want).all()


@pytest.mark.parametrize("lay", layout.OPTIMAL_LAYOUTS)
@pytest.mark.parametrize("use", ["a", "b", "acc"])
def test_to_and_from_optimal_are_inverse_and_packed(rng, lay, use):
    m = rng.integers(0, 1000, (5, 7))
    packed = layout.to_optimal(m, lay, use)
    assert packed.shape == (35,) and sorted(packed) == sorted(m.reshape(-1))  # every element once, no gaps
    np.testing.assert_array_equal(layout.from_optimal(packed, 5, 7, lay, use), m)
    sr, sc = layout.optimal_strides(lay, 5, 7, use)
    for i, j in [(0, 0), (4, 6), (2, 3)]:
        assert packed[i * sr + j * sc] == m[i, j]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t, M, N", [("f32", 8, 5), ("f64", 3, 16), ("i32", 6, 6)])
def test_outer_product_optimal_round_trip(rng, target, t, M, N):
    """Kernel 1: each work-item accumulates u (x) v in OuterProductOptimal at its own start; kernel 2
    loads it back in that layout (a thread-scope Load, 0035: any layout) and accumulates it row-major.
    Both buffers against NumPy: the row-major one is u (x) v, the optimal one reads back as it."""
    items = 2 * S
    dt = {"f32": np.float32, "f64": np.float64, "i32": np.int32}[t]
    mt = f"coopmatrix<{t}, {M}, {N}, acc, thread>"
    b = KernelBuilder("opo_acc", S)
    U, V, X = b.param("U", f"ptr<{t}>"), b.param("V", f"ptr<{t}>"), b.param("X", f"ptr<{t}>")
    i = item_of(b, target)
    u = b.vector_load(f"vector<{t}, {M}>", U, b.mul(i, M))
    v = b.vector_load(f"vector<{t}, {N}>", V, b.mul(i, N))
    b.accumulate(b.outer_product(u, v, mt), X, b.mul(i, M * N), layout="outer_product_optimal")
    uu = rng.integers(-9, 10, (items, M)).astype(dt)
    vv = rng.integers(-9, 10, (items, N)).astype(dt)
    x = np.zeros(items * M * N, dt)
    run(b, target, uu, vv, x, items=items)
    want = np.einsum("pm,pn->pmn", uu.astype(np.float64), vv.astype(np.float64))
    for p in range(items):
        np.testing.assert_array_equal(layout.from_optimal(x[p * M * N:(p + 1) * M * N], M, N,
                                                          "outer_product_optimal", "acc"), want[p])

    b = KernelBuilder("opo_load", S)
    X, Y = b.param("X", f"ptr<{t}>"), b.param("Y", f"ptr<{t}>")
    i = item_of(b, target)
    m = b.load(mt, X, b.mul(i, M * N), layout="outer_product_optimal")
    b.accumulate(m, Y, b.mul(i, M), 0, strides=(N, 1), bounds=(items * M, N))
    y = np.zeros((items * M, N), dt)
    run(b, target, x, y, items=items)
    np.testing.assert_array_equal(y.reshape(items, M, N), want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mt, rt", [("f16", "f32"), ("f32", "f32"), ("i8", "i32")])
def test_mul_optimal_b_matrix_feeds_vector_multiply(rng, target, mt, rt):
    """Weights converted once to MulOptimal (coopjit.layout.to_optimal, as D3D12's
    ConvertLinearAlgebraMatrix), loaded in that layout as each work-item's thread-scope B matrix,
    and consumed by vector x matrix MultiplyAdd with a bias: against NumPy in float64."""
    K, N, items = 12, 7, 2 * S
    NP = {"f16": np.float16, "f32": np.float32, "i8": np.int8, "i32": np.int32}
    w = rng.integers(-8, 9, (items, K, N)).astype(NP[mt])
    packed = np.concatenate([layout.to_optimal(w[p], "mul_optimal", "b") for p in range(items)])
    assert not np.array_equal(packed, w.reshape(-1)), "the layout is not row-major here: the test tells them apart"
    vv = rng.integers(-8, 9, (items, K)).astype(NP[mt])
    bias = rng.integers(-8, 9, (items, N)).astype(NP[rt])
    b = KernelBuilder("mulopt", S)
    V, W, B, OUT = (b.param("V", f"ptr<{mt}>"), b.param("W", f"ptr<{mt}>"), b.param("B", f"ptr<{rt}>"),
                    b.param("OUT", f"ptr<{rt}>"))
    i = item_of(b, target)
    v = b.vector_load(f"vector<{mt}, {K}>", V, b.mul(i, K))
    m = b.load(f"coopmatrix<{mt}, {K}, {N}, b, thread>", W, b.mul(i, K * N), layout="mul_optimal")
    bv = b.vector_load(f"vector<{rt}, {N}>", B, b.mul(i, N))
    b.vector_store(b.vector_multiply(v, m, f"vector<{rt}, {N}>", bv), OUT, b.mul(i, N))
    out = np.zeros((items, N), NP[rt])
    run(b, target, vv, packed, bias, out, items=items)
    want = np.einsum("pk,pkn->pn", vv.astype(np.float64), w.astype(np.float64)) + bias
    np.testing.assert_array_equal(out.astype(np.float64), want)  # small integers: exact in every type


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_optimal_layout_kernels_assemble(target):
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    b = KernelBuilder("mulopt", 32)
    V, W, OUT = b.param("V", "ptr<f16>"), b.param("W", "ptr<f16>"), b.param("OUT", "ptr<f32>")
    i = b.add(b.mul(b.work_id("group"), 32), b.work_id("lane"))
    v = b.vector_load("vector<f16, 16>", V, b.mul(i, 16))
    m = b.load("coopmatrix<f16, 16, 8, b, thread>", W, b.mul(i, 128), layout="mul_optimal")
    acc = b.outer_product(b.vector_multiply(v, m, "vector<f32, 8>"), b.vector_load("vector<f32, 4>", OUT, 0),
                          "coopmatrix<f32, 8, 4, acc, thread>")
    b.accumulate(acc, OUT, b.mul(i, 32), layout="outer_product_optimal")
    text = b._fn.compile_device("target:" + target).source("ptx")
    assert f".target {target}" in text and ".entry" in text
    report = ptx.ptxas(text, target)
    assert "Used" in report and "registers" in report, report


def test_optimal_layout_errors():
    b = KernelBuilder("bad", S)
    X = b.param("X", "ptr<f32>")
    with pytest.raises(ValueError, match="thread-scope matrices.*subgroup"):
        b.load("coopmatrix<f32, 16, 16, b, subgroup>", X, layout="mul_optimal")
    with pytest.raises(ValueError, match=r"Stride is 0.*strides=\(4, 1\)"):
        b.load("coopmatrix<f32, 4, 4, b, thread>", X, strides=(4, 1), layout="mul_optimal")
    with pytest.raises(ValueError, match="unknown layout 'zigzag'"):
        b.load("coopmatrix<f32, 4, 4, b, thread>", X, layout="zigzag")
    with pytest.raises(ValueError, match="col must be 0"):
        b.load("coopmatrix<f32, 4, 4, b, thread>", X, 0, 3, layout="mul_optimal")
    m = b.load("coopmatrix<f32, 4, 4, acc, thread>", X, layout="outer_product_optimal")
    with pytest.raises(ValueError, match="'outer_product_optimal' only"):
        b.accumulate(m, X, layout="mul_optimal")
    with pytest.raises(ValueError, match="unknown optimal layout"):
        layout.optimal_strides("row_major", 4, 4, "b")
