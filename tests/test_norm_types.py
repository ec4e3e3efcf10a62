"""HLSL 0035's SNorm / UNorm F16 / F32 / F64 component types (coopmatrix<snorm_f32, ...>,
coopmatrix<unorm_f16, ...>). 0035 lists them (ComponentType SNormF16 .. UNormF64) and says no
more (its Conversions section is empty); coopjit's reading, D3D's snorm / unorm float: the values
of such a matrix are in [-1, 1] / [0, 1], so every operation producing one clamps its elements
into the range (NaN to 0), stored as the float type. Checked on the CPU and opencl:0 against
NumPy (np.clip), PTX assembled by ptxas."""
import numpy as np
import pytest

from coopjit import ptx
from coopjit.ir import KernelBuilder

from device_support import DEVICE, every_module_passes_spirv_val, lanes, needs_device, validated  # noqa: F401 - the fixture

TARGETS = ["cpu", DEVICE]
S = lanes(16)  # 16, or the device's subgroup size (NVIDIA: 32)
NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
RANGE = {"snorm": (-1.0, 1.0), "unorm": (0.0, 1.0)}


def run(b, target, *args):
    if target == "cpu":
        b.compile()(*args)
    else:
        k = b.compile(device=needs_device())
        validated(k.spirv)
        k(*args, groups=1)


def clip(x, norm):
    lo, hi = RANGE[norm]
    out = np.clip(x.astype(np.float64), lo, hi)
    out[np.isnan(x.astype(np.float64))] = 0
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("norm", ["snorm", "unorm"])
@pytest.mark.parametrize("t", ["f16", "f32", "f64"])
def test_load_clamps_into_the_range(rng, target, norm, t):
    """A load into a norm matrix, stored back as the float type: the elements clamped, NaN 0."""
    x = (rng.standard_normal((16, 16)) * 2).astype(NP[t])
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    b = KernelBuilder("norm_load", S)
    X, Y = b.param("X", f"ptr<{t}>"), b.param("Y", f"ptr<{t}>")
    m = b.load(f"coopmatrix<{norm}_{t}, 16, 16, acc, subgroup>", X, strides=(16, 1))
    assert m.type == f"coopmatrix<{norm}_{t}, 16, 16, acc, subgroup>"
    b.store(m, Y, strides=(16, 1))
    y = np.full((16, 16), 7, NP[t])
    run(b, target, x, y)
    np.testing.assert_array_equal(y.astype(np.float64), clip(x, norm))
    assert (x > RANGE[norm][1]).any() and (x < RANGE[norm][0]).any(), "the data leaves the range on both sides"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("norm", ["snorm", "unorm"])
def test_operations_producing_norm_matrices_clamp(rng, target, norm):
    """mul_add into a norm accumulator, per_element, scale, splat, set and a cast into a norm type:
    each result clamped (the norm accumulator C is clamped when loaded)."""
    a = rng.standard_normal((16, 16)).astype(np.float16)
    bm = rng.standard_normal((16, 16)).astype(np.float16)
    c = (rng.standard_normal((16, 16)) * 2).astype(np.float32)
    acc = f"coopmatrix<{norm}_f32, 16, 16, acc, subgroup>"
    b = KernelBuilder("norm_ops", S)
    A, B, C = b.param("A", "ptr<f16>"), b.param("B", "ptr<f16>"), b.param("C", "ptr<f32>")
    O1, O2, O3, O4, O5 = (b.param(f"O{i}", "ptr<f32>") for i in range(1, 6))
    O6 = b.param("O6", "ptr<f16>")
    am = b.load("coopmatrix<f16, 16, 16, a, subgroup>", A, strides=(16, 1))
    bb = b.load("coopmatrix<f16, 16, 16, b, subgroup>", B, strides=(16, 1))
    cm = b.load(acc, C, strides=(16, 1))
    d = b.mul_add(am, bb, cm)
    b.store(d, O1, strides=(16, 1))
    b.store(b.per_element(cm, lambda b, r, col, v: b.mul(v, 3.0)), O2, strides=(16, 1))
    b.store(b.scale(cm, -2.0), O3, strides=(16, 1))
    b.store(b.splat(acc, 2.5), O4, strides=(16, 1))
    b.store(b.set(b.splat(acc, 0.25), 0, -7.0), O5, strides=(16, 1))
    plain = b.load("coopmatrix<f32, 16, 16, acc, subgroup>", C, strides=(16, 1))
    b.store(b.cast(plain, f"coopmatrix<{norm}_f16, 16, 16, acc, subgroup>"), O6, strides=(16, 1))
    outs = [np.zeros((16, 16), np.float32) for _ in range(5)] + [np.zeros((16, 16), np.float16)]
    run(b, target, a, bm, c, *outs)
    cc = clip(c, norm)
    want_d = clip(a.astype(np.float64) @ bm.astype(np.float64) + cc, norm)
    np.testing.assert_allclose(outs[0], want_d, rtol=1e-5, atol=1e-5)
    assert ((want_d == RANGE[norm][1]) | (want_d == RANGE[norm][0])).any(), "the product leaves the range"
    np.testing.assert_allclose(outs[1], clip(cc * 3, norm), rtol=1e-6)
    np.testing.assert_allclose(outs[2], clip(cc * -2, norm), rtol=1e-6)
    assert (outs[3] == 1.0).all()
    # set: component 0 of every work-item's share gets -7 (clamped); the rest keep 0.25
    assert set(np.unique(outs[4])) <= {0.25, RANGE[norm][0]} and (outs[4] == RANGE[norm][0]).any()
    np.testing.assert_array_equal(outs[5].astype(np.float64), clip(c.astype(np.float16), norm))


def test_norm_errors():
    b = KernelBuilder("bad", S)
    X = b.param("X", "ptr<f32>")
    with pytest.raises(ValueError, match="SNorm / UNorm components are f16, f32 or f64.*i32"):
        b.load("coopmatrix<snorm_i32, 16, 16, acc, subgroup>", X, strides=(16, 1))
    m = b.load("coopmatrix<unorm_f32, 4, 4, acc, thread>", X, strides=(4, 1))
    b.accumulate(m, X, strides=(4, 1))
    with pytest.raises(ValueError, match="not built for thread-scope matrices"):
        b.compile()


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_norm_ptx_assembles(target):
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    b = KernelBuilder("norm", 32)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f16>")
    m = b.load("coopmatrix<snorm_f32, 32, 8, acc, subgroup>", X, strides=(8, 1))
    b.store(b.cast(m, "coopmatrix<unorm_f16, 32, 8, acc, subgroup>"), Y, strides=(8, 1))
    text = b._fn.compile_device("target:" + target).source("ptx")
    assert f".target {target}" in text and ".entry" in text
    report = ptx.ptxas(text, target)
    assert "Used" in report and "registers" in report, report
