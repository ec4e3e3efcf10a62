"""Where coopjit had to choose between readings of HLSL 0035 (seeds/003), the choice, on the CPU and
on opencl:0 (README, "Operations of the documents, by target"): the x4 K rule of 8-bit matrices,
Multiply<OutTy> with float inputs of two types or into a wider accumulator (f32 x f32 -> f64,
f16 x f8 -> f32), and Length / Get / Set counting one 8-bit element per component. References:
exact integers, NumPy in float64."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit.ir import KernelBuilder

from device_support import DEVICE, every_module_passes_spirv_val, lanes, needs_device, validated  # noqa: F401 - the fixture

TARGETS = ["cpu", DEVICE]
S = lanes(16)  # 16, or the device's subgroup size (NVIDIA: 32)
NP = {"i8": np.int8, "u8": np.uint8, "i32": np.int32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
      "f8_e4m3": ml_dtypes.float8_e4m3fn, "f8_e5m2": ml_dtypes.float8_e5m2, "f32": np.float32, "f64": np.float64}


def mat(t, r, c, use="acc", scope="subgroup"):
    return f"coopmatrix<{t}, {r}, {c}, {use}, {scope}>"


def compiled(b, target):
    if target == "cpu":
        return b.compile()
    k = b.compile(device=needs_device())
    validated(k.spirv)
    return k


def product_kernel(M, N, K, at, bt, ct, S=S):
    b = KernelBuilder("product", S)
    A, B, C = b.param("A", f"ptr<{at}>"), b.param("B", f"ptr<{bt}>"), b.param("C", f"ptr<{ct}>")
    a = b.load(mat(at, M, K, "a"), A, strides=(K, 1))
    x = b.load(mat(bt, K, N, "b"), B, strides=(N, 1))
    b.store(b.mul_add(a, x, b.load(mat(ct, M, N), C, strides=(N, 1))), C, strides=(N, 1))
    return b


@pytest.mark.parametrize("target, M, K, at, bt", [("cpu", 4, 256, "i8", "i8"), ("cpu", 4, 512, "u8", "i8"),
                                                   (DEVICE, 1, 256, "i8", "i8")])
def test_8bit_k_is_four_times_the_scalar_limit(rng, target, M, K, at, bt):
    """0035: "Sizes for matrices of packed data types are 4 times the valid size for a scalar
    element": 8-bit A and B take K up to 4 x 128 = 512. (On opencl:0 one row and K = 256: the
    driver takes about 9 s to build the unrolled product; K = 512 is generated and validated in
    the next test.)"""
    N = 16
    k = compiled(product_kernel(M, N, K, at, bt, "i32"), target)
    a = rng.integers(np.iinfo(NP[at]).min, np.iinfo(NP[at]).max, (M, K), endpoint=True).astype(NP[at])
    x = rng.integers(-128, 128, (K, N)).astype(NP[bt])
    c = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    want = c.astype(np.int64) + a.astype(np.int64) @ x.astype(np.int64)
    k(a, x, c)
    np.testing.assert_array_equal(c, want)


def test_8bit_k_512_is_generated_for_gpus():
    """The SIMT lowering builds K = 512 for 8-bit inputs: SPIR-V checked with spirv-val."""
    from coopjit import spirv

    if "error" in spirv.tools()["spirv-val"]:
        pytest.skip("no spirv-val (SPIRV-Tools)")
    prog = product_kernel(1, 16, 512, "u8", "i8", "i32", S=16)._fn.compile_device("target:generic")
    spirv.validate(prog.spirv)


@pytest.mark.parametrize("K, at, bt, limit", [(1024, "i8", "i8", "[4, 512]"), (256, "f16", "f16", "[4, 128]"),
                                              (16, "i8", "f16", None)])
def test_k_beyond_the_rule_is_refused(K, at, bt, limit):
    b = product_kernel(4, 16, K, at, bt, "i32" if bt[0] == "i" else "f32")
    with pytest.raises(coopjit.VerifyError) as e:
        b.compile()
    text = str(e.value)
    assert (f"K = {K} must be a power of two in {limit}" in text) if limit else "component types" in text, text


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("at, bt, ct", [("f32", "f32", "f64"), ("f16", "f8_e4m3", "f32"), ("bf16", "f16", "f32"),
                                        ("f8_e5m2", "f8_e4m3", "f32"), ("f32", "f16", "f64"), ("f64", "f32", "f64")])
def test_multiply_with_outty_and_mixed_float_inputs(rng, target, at, bt, ct):
    """Multiply<OutTy> with "potentially mismatched element types": the inputs are converted to the
    accumulator's type (exactly: it holds them) and multiplied and added there, so the result is
    the float64 product of the inputs' values to the accumulator's rounding."""
    M, N, K = 8, 12, 16
    k = compiled(product_kernel(M, N, K, at, bt, ct), target)
    a = rng.standard_normal((M, K)).astype(NP[at])
    x = rng.standard_normal((K, N)).astype(NP[bt])
    c = rng.standard_normal((M, N)).astype(NP[ct])
    want = c.astype(np.float64) + a.astype(np.float64) @ x.astype(np.float64)
    k(a, x, c)
    tol = 1e-13 if ct == "f64" else 2e-6
    np.testing.assert_allclose(c, want, rtol=tol, atol=tol)
    if ct == "f64":  # products and sums in f64: far below f32's rounding (about 1e-7 here)
        assert np.abs(c - want).max() < 1e-12


@pytest.mark.parametrize("at, bt, ct", [("f32", "f32", "f16"), ("f64", "f64", "f32"), ("f64", "f16", "f32"),
                                        ("f16", "bf16", "f16"), ("i8", "f16", "f32")])
def test_narrowing_or_mixed_kinds_are_refused(at, bt, ct):
    with pytest.raises(coopjit.VerifyError, match="mul_add component types"):
        product_kernel(8, 16, 16, at, bt, ct).compile()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", ["i8", "u8", "f8_e4m3"])
def test_length_get_set_count_one_8bit_element_per_component(rng, target, t):
    """coopjit's 8-bit matrices hold one element per component (its 8-bit types are scalars, not
    0035's int8_t4_packed words): Length counts elements, GetCoordinate names each, Set writes one.
    Every element is set to (row * N + col) % R through its component (R = 64; 16 for fp8, whose
    integers are exact to 16): the stored matrix shows each element reached with its own
    coordinates."""
    R = 16 if t.startswith("f8") else 64
    M, N = 8, 20
    b = KernelBuilder("elements", S)
    X, Y = b.param("X", f"ptr<{t}>"), b.param("Y", f"ptr<{t}>")
    m = b.load(mat(t, M, N), X, strides=(N, 1))

    def body(b, i, m):
        row, col = b.get_coordinate(m, i)
        code = b.rem(b.add(b.mul(row, N), col), R)
        old = b.get(m, i)  # the element itself: X holds zeros, so code + old == code
        return b.set(m, i, b.add(b.convert(code, t), old))

    (m,) = b.for_range(0, b.length(m), 1, [m], body)
    b.store(m, Y, strides=(N, 1))
    k = compiled(b, target)
    y = np.full((M, N), 99, NP[t])
    k(np.zeros((M, N), NP[t]), y)
    want = (np.arange(M * N).reshape(M, N) % R).astype(np.float64)
    np.testing.assert_array_equal(y.astype(np.float64), want)
