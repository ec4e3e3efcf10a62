"""coopmatrix.accumulate (HLSL 0035 Matrix::Accumulate: an atomic add into memory "in the component
type of the matrix") for every component type, on the CPU and on opencl:0 (the SIMT lowering,
shared with NVPTX), against exact references: integers wrap as NumPy's do, and the float inputs
are chosen so that every partial sum is exactly representable in the component type, whatever
order the adds land in; then a lost update (a race the compare-exchange loop must prevent) shows
as a wrong element. Work-groups, and at thread scope every lane of a subgroup, add into the same
elements at once; 8- and 16-bit neighbours share 32-bit words (added by compare-exchange on the
word on GPUs), and elements outside the bounds, in the same words, must keep their values."""
import ml_dtypes
import numpy as np
import pytest

from coopjit import ptx
from coopjit.ir import KernelBuilder

from device_support import DEVICE, every_module_passes_spirv_val, lanes, needs_device, validated  # noqa: F401 - the fixture

TARGETS = ["cpu", DEVICE]
NP = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16, "i32": np.int32, "u32": np.uint32,
      "i64": np.int64, "u64": np.uint64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
      "f8_e4m3": ml_dtypes.float8_e4m3fn, "f8_e5m2": ml_dtypes.float8_e5m2, "f32": np.float32, "f64": np.float64}
TYPES = list(NP)


def mat(t, r, c, use="acc", scope="subgroup"):
    return f"coopmatrix<{t}, {r}, {c}, {use}, {scope}>"


def compiled(b, target):
    if target == "cpu":
        return b.compile()
    k = b.compile(device=needs_device())
    validated(k.spirv)
    return k


def addends(rng, t, shape):
    """Values whose sums, in any order and with up to 16 terms, are exact in type t (floats) or
    arbitrary (integers: the reference wraps like the device)."""
    if t.startswith("f8"):  # multiples of 1/2 up to 4 in magnitude: exact in e4m3 and e5m2
        return (rng.integers(-1, 2, shape) * 0.5).astype(NP[t])
    if t in ("f16", "bf16"):  # integers: sums up to 16 * 8 = 128 are exact with 8 significant bits
        return rng.integers(-8, 9, shape).astype(NP[t])
    if t in ("f32", "f64"):
        return rng.standard_normal(shape).astype(NP[t])
    info = np.iinfo(NP[t])
    return rng.integers(info.min, info.max, shape, dtype=NP[t], endpoint=True)


def check(got, start, terms, t):
    """got == start + the terms' sum over axis 0, exactly (wrapping integers, exact float sums)."""
    if t in ("f32", "f64"):
        want = start.astype(np.float64) + terms.astype(np.float64).sum(0)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-5 if t == "f32" else 1e-12, atol=1e-5)
        return
    if t[0] in "iu":
        want = (start.astype(np.int64) + terms.astype(np.int64).sum(0)).astype(NP[t])  # wraps like the device
        np.testing.assert_array_equal(got, want)
        return
    want = start.astype(np.float64) + terms.astype(np.float64).sum(0)
    assert np.all(want.astype(NP[t]).astype(np.float64) == want), "the test's sums must be exact"
    np.testing.assert_array_equal(got.astype(np.float64), want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", TYPES)
def test_work_groups_accumulate_into_the_same_elements(rng, target, t):
    """G work-groups each add their own M x N slice into one M x N window of a wider output, at
    column 1 (8- and 16-bit elements not word-aligned) with bounds that leave the window's last
    column out: that column and the one before the window keep their values."""
    G, M, N, W = 8, 8, 6, 9
    S = lanes(16)
    b = KernelBuilder("acc_groups", S)
    X, OUT = b.param("X", f"ptr<{t}>"), b.param("OUT", f"ptr<{t}>")
    g = b.work_id("group")
    m = b.load(mat(t, M, N), X, b.mul(g, M), 0, strides=(N, 1))
    b.accumulate(m, OUT, 0, 1, strides=(W, 1), bounds=(M, N))  # the window's column N - 1 is at W-col N: outside
    k = compiled(b, target)
    x = addends(rng, t, (G, M, N))
    start = addends(rng, t, (M, W))
    out = start.copy()
    k(x, out, groups=G)
    inside = np.zeros((M, W), bool)
    inside[:, 1:N] = True  # bounds (M, N) from column 1: columns 1 .. N - 1
    check(out[:, 1:N], start[:, 1:N], x[:, :, : N - 1], t)
    np.testing.assert_array_equal(out[~inside].view(np.uint8), start[~inside].view(np.uint8))


@pytest.mark.parametrize("t", ["i8", "u16", "f16", "bf16", "f8_e4m3", "f8_e5m2", "f32", "i64"])
def test_every_lane_adds_into_every_element(rng, t):
    """Thread scope (each work-item its own matrix): every lane of every work-group adds the outer
    product of its own vectors into the same 4 x 5 elements, 16 x 4 adds per element at once.
    (opencl:0 only: the CPU target has no lane ids; its thread scope is in test_thread_scope.py.)"""
    target = DEVICE
    G, S, M, N = 4, lanes(16), 4, 5
    b = KernelBuilder("acc_lanes", S)
    U, V, OUT = b.param("U", f"ptr<{t}>"), b.param("V", f"ptr<{t}>"), b.param("OUT", f"ptr<{t}>")
    item = b.add(b.mul(b.work_id("group"), S), b.work_id("lane"))
    u = b.vector_load(f"vector<{t}, {M}>", U, b.mul(item, M))
    v = b.vector_load(f"vector<{t}, {N}>", V, b.mul(item, N))
    b.accumulate(b.outer_product(u, v, mat(t, M, N, scope="thread")), OUT, strides=(N, 1))
    k = compiled(b, target)
    items = G * S
    if t.startswith("f8") or t in ("f16", "bf16"):  # products of {-1, 0, 1}: 64 (S = 32: 128) terms, exact sums
        u = rng.integers(-1, 2, (items, M)).astype(NP[t])
        v = rng.integers(-1, 2, (items, N)).astype(NP[t])
        if t.startswith("f8"):  # at most 4 items nonzero: |sums| <= 4, exact in e5m2 too
            u[4:] = 0
    else:
        u, v = addends(rng, t, (items, M)), addends(rng, t, (items, N))
    start = addends(rng, t, (M, N)) if not t.startswith("f8") else np.zeros((M, N), NP[t])
    out = start.copy()
    k(u, v, out, groups=G)
    if t[0] in "iu":
        terms = np.einsum("pm,pn->pmn", u.astype(np.int64), v.astype(np.int64)).astype(NP[t])  # products wrap too
    else:
        terms = np.einsum("pm,pn->pmn", u.astype(np.float64), v.astype(np.float64)).astype(NP[t])
    check(out, start, terms, t)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("t", ["i8", "f16", "bf16", "f8_e5m2", "f32", "f64", "i32"])
def test_accumulate_assembles_for_nvidia(target, t):
    """The same lowering for NVPTX: 8- and 16-bit adds as 32-bit compare-and-swap loops, f32 / f64
    as atomic float adds. PTX generated and assembled by ptxas, not run here (no NVIDIA GPU)."""
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    b = KernelBuilder("acc_ptx", 32)
    X, OUT = b.param("X", f"ptr<{t}>"), b.param("OUT", f"ptr<{t}>")
    b.accumulate(b.load(mat(t, 8, 6), X, strides=(6, 1)), OUT, strides=(6, 1))
    text = b._fn.compile_device("target:" + target).source("ptx")
    if t in ("f32", "f64"):
        assert ".add.f" in text and "atom.global.cas" not in text and "atom.cas" not in text
    elif t == "i32":
        assert ".add.u32" in text or ".add.s32" in text
    else:
        assert "cas.b32" in text
    report = ptx.ptxas(text, target)
    assert "registers" in report
