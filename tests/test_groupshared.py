"""HLSL 0035's groupshared Matrix::Load / Store / Accumulate (work-group local memory) with component
conversion, on the CPU (a work-group is one invocation: its own array) and on the device (the SIMT
lowering: an array in work-group shared memory, several subgroups a work-group), for subgroup- and
workgroup-scope matrices, against NumPy: conversions round as coopmatrix.convert does
(ml_dtypes' round-to-nearest-even, saturating integers; test_ir_ops.py), accumulates convert each
element to the array's type and add in it, and sums from several subgroups are chosen exact in
any order. Accesses that may leave the array are refused; the kernels for NVIDIA pass ptxas."""
import re

import ml_dtypes
import numpy as np
import pytest

from coopjit import ptx
from coopjit.ir import KernelBuilder

from device_support import (build, every_module_passes_spirv_val, lanes, needs_device,  # noqa: F401,F811 - fixtures
                            target)

S = lanes(16)  # 16, or the device's subgroup size (NVIDIA: 32)
NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f8_e4m3": ml_dtypes.float8_e4m3fn,
      "f8_e5m2": ml_dtypes.float8_e5m2, "f32": np.float32, "f64": np.float64, "i32": np.int32, "u8": np.uint8,
      "i16": np.int16}


def mat(t, r, c, scope="subgroup", use="acc"):
    return f"coopmatrix<{t}, {r}, {c}, {use}, {scope}>"



def converted(vals, t):
    """vals (float32) converted to type t as coopmatrix.convert converts, back as float64."""
    if t in ("i32", "u8", "i16"):  # saturating, NaN -> 0, toward zero
        info = np.iinfo(NP[t])
        v = np.clip(np.nan_to_num(vals.astype(np.float64), nan=0, posinf=info.max, neginf=info.min), info.min, info.max)
        return np.trunc(v)
    with np.errstate(over="ignore", invalid="ignore"):
        return vals.astype(NP[t]).astype(np.float64)


EDGE = np.array([0, 1, -1, 0.5, 3.14159, -2.71828, 1e-3, 1e-6, 448, 460, 464, 470, 500, 57344, 61440, 1e5,
                 -1e5, 65504, 70000, np.inf, -np.inf, np.nan, 2**-9, 2**-10, 3 * 2**-11, 2**-16, 2**-17,
                 1.00390625, 1.01171875, 255.5, 256.7, -3.5], np.float32)


@pytest.mark.parametrize("scope", ["subgroup", "workgroup"])
@pytest.mark.parametrize("t", ["f16", "bf16", "f8_e4m3", "f8_e5m2", "i32", "u8"])
def test_store_converts_and_load_converts_back(rng, target, scope, t):
    """An f32 matrix stored into a groupshared array of type t (rounded, saturated) and loaded back
    as f32 after a barrier: each element is f32(t(x)) (exact but for i32's largest values)."""
    M, N = 8, 16
    b = KernelBuilder("gs_round", S, subgroups=2)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    g = b.groupshared(t, M * N)
    b.store(b.load(mat("f32", M, N, scope), X, strides=(N, 1)), g, strides=(N, 1))
    b.barrier()
    b.store(b.load(mat("f32", M, N, scope), g, strides=(N, 1)), Y, strides=(N, 1))
    assert f"groupshared<{t}, {M * N}>" in b.ir()
    k = build(b, target)
    x = np.concatenate([EDGE, EDGE, rng.standard_normal(M * N - 2 * EDGE.size).astype(np.float32) * 300]).reshape(M, N)
    y = np.full((M, N), -7, np.float32)
    k(x, y)
    np.testing.assert_array_equal(y, converted(x, t).astype(np.float32))  # and back to f32 (i32: rounded)


PAIRS = [("f32", "f16"), ("f32", "bf16"), ("f16", "f32"), ("i16", "i32"), ("f64", "f8_e5m2")]


# (f32 -> i32 at subgroup scope, where the adds sit in the subgroup's branch, is left out: Intel's
# CPU OpenCL runtime loses adds of a saturating float -> int conversion's results in divergent
# control flow there, though the SPIR-V adds each converted element (spirv-val checked); the CPU
# and the workgroup scope run it.)
@pytest.mark.parametrize("scope, mt, gt", [("subgroup", m, g) for m, g in PAIRS] +
                         [("workgroup", m, g) for m, g in PAIRS + [("f32", "i32")]])
@pytest.mark.parametrize("subgroups", [1, 3])
def test_subgroups_accumulate_into_one_array(rng, target, scope, mt, gt, subgroups):
    """The work-group zeroes a groupshared array of type gt, then adds T tiles (matrices of type mt)
    into it, tile s by subgroup s % subgroups at subgroup scope (the whole work-group at workgroup
    scope), and writes it out as f32 from subgroup 0. The tiles hold integers (halves for fp8) whose
    sums are exact in gt in any order, so a lost concurrent update shows."""
    M, N, T = 8, 8, 6
    b = KernelBuilder("gs_acc", S, subgroups=subgroups)
    X, Y = b.param("X", f"ptr<{mt}>"), b.param("Y", "ptr<f32>")
    g = b.groupshared(gt, M * N)
    b.store(b.splat(mat(mt, M, N, scope), 0), g, strides=(N, 1))
    b.barrier()
    def add_tile(b, s):
        b.accumulate(b.load(mat(mt, M, N, scope), X, b.mul(s, M), 0, strides=(N, 1)), g, strides=(N, 1))

    # (A loop from the subgroup id in steps of the subgroup count is miscompiled by Intel's CPU
    # OpenCL runtime here, as simt_workgroup.cpp's wg_each says: a loop over all, and an if.)
    if scope == "subgroup":
        mine = lambda b, s: b.eq(b.rem(s, b.work_id("subgroups")), b.work_id("subgroup"))
        b.for_range(0, T, 1, body=lambda b, s: b.if_(mine(b, s), lambda b: add_tile(b, s)))
    else:
        b.for_range(0, T, 1, body=add_tile)
    b.barrier()
    out = lambda b: b.store(b.load(mat("f32", M, N, scope), g, strides=(N, 1)), Y, strides=(N, 1))
    if scope == "subgroup":
        b.if_(b.eq(b.work_id("subgroup"), 0), out)
    else:
        out(b)
    k = build(b, target)
    if gt.startswith("f8"):
        tiles = rng.integers(-1, 2, (T, M, N)) * 0.5  # sums of 6 halves: exact in e5m2
    else:
        tiles = rng.integers(-8, 9, (T, M, N)).astype(np.float64)
    x = tiles.astype(NP[mt])
    y = np.full((M, N), -99, np.float32)
    k(x, y)
    want = tiles.sum(0)
    assert np.all(want.astype(NP[gt]).astype(np.float64) == want), "the test's sums must be exact in gt"
    np.testing.assert_array_equal(y.astype(np.float64), want)


@pytest.mark.parametrize("scope", ["subgroup", "workgroup"])
def test_accumulate_converts_then_adds_in_the_array_type(rng, target, scope):
    """Accumulate into f16: each f32 element is rounded to f16, then added to the f16 element in f16
    (HLSL 0035: converted to the target type); adding in f32 and rounding the sum differs."""
    M, N = 16, 16
    b = KernelBuilder("gs_acc_round", S, subgroups=2)
    X, Z, Y = b.param("X", "ptr<f32>"), b.param("Z", "ptr<f32>"), b.param("Y", "ptr<f32>")
    g = b.groupshared("f16", M * N)
    b.store(b.load(mat("f32", M, N, scope), Z, strides=(N, 1)), g, strides=(N, 1))
    b.barrier()
    if scope == "subgroup":  # one subgroup adds: one add per element
        b.if_(b.eq(b.work_id("subgroup"), 0),
              lambda b: b.accumulate(b.load(mat("f32", M, N, scope), X, strides=(N, 1)), g, strides=(N, 1)))
    else:
        b.accumulate(b.load(mat("f32", M, N, scope), X, strides=(N, 1)), g, strides=(N, 1))
    b.barrier()
    b.store(b.load(mat("f32", M, N, scope), g, strides=(N, 1)), Y, strides=(N, 1))
    k = build(b, target)
    x = rng.uniform(0.5, 4, (M, N)).astype(np.float32)
    z = rng.uniform(0.5, 4, (M, N)).astype(np.float32)
    y = np.zeros((M, N), np.float32)
    k(x, z, y)
    z16, x16 = z.astype(np.float16).astype(np.float64), x.astype(np.float16).astype(np.float64)
    want = (z16 + x16).astype(np.float16)  # the exact sum of two f16 in [0.5, 4) rounded once
    np.testing.assert_array_equal(y, want.astype(np.float32))
    assert not np.array_equal(want, (z16 + x.astype(np.float64)).astype(np.float16)), "the test must tell the two apart"


def test_workgroup_matrix_to_subgroup_blocks(rng, target):
    """A workgroup-scope f32 matrix staged in a bf16 array, read back by each subgroup as its own
    band of rows (subgroup scope, a column-major load: strides (1, M)) and written transposed."""
    sgs, R, N = 4, 4, 16
    M = sgs * R
    b = KernelBuilder("gs_bands", S, subgroups=sgs)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    g = b.groupshared("bf16", M * N)
    b.store(b.load(mat("f32", M, N, "workgroup"), X, strides=(N, 1)), g, strides=(1, M))  # column-major in g
    b.barrier()
    if target == "cpu":  # one invocation: all the bands in a loop
        bands = lambda body: b.for_range(0, sgs, 1, body=body)
    else:
        bands = lambda body: body(b, b.work_id("subgroup"))

    def band(b, s):
        m = b.load(mat("f32", R, N), g, b.mul(s, R), 0, strides=(1, M))
        b.store(m, Y, b.mul(s, R), 0, strides=(1, M))  # m[i, j] = X[sR + i, j] to Y[j, sR + i]: Y = X^T

    bands(band)
    k = build(b, target)
    x = rng.standard_normal((M, N)).astype(np.float32)
    y = np.zeros((N, M), np.float32)
    k(x, y)
    np.testing.assert_array_equal(y, x.astype(ml_dtypes.bfloat16).astype(np.float32).T)


def test_element_reads_and_writes(rng, target):
    """store_element / load_element on a groupshared array: the first subgroup (the CPU's only
    invocation) writes i * 1.5 to element i of an f16 array, a matrix load reads it as f32; and
    load_element reads back what a matrix store wrote (to i16: saturated)."""
    n = 64
    b = KernelBuilder("gs_elems", S, subgroups=2)
    X, Y, Z = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>"), b.param("Z", "ptr<i16>")
    g = b.groupshared("f16", n)
    h = b.groupshared("i16", n)
    b.for_range(0, n, 1, body=lambda b, i: b.store_element(g, i, b.convert(b.mul(b.convert(i, "f32"), 1.5), "f16")))
    b.store(b.load(mat("f32", 4, 16), X, strides=(16, 1)), h, strides=(16, 1))
    b.barrier()
    b.store(b.load(mat("f32", 4, 16), g, strides=(16, 1)), Y, strides=(16, 1))
    b.for_range(0, n, 1, body=lambda b, i: b.store_element(Z, i, b.load_element(h, i)))
    k = build(b, target)
    x = (rng.standard_normal((4, 16)) * 30000).astype(np.float32)
    y, z = np.zeros((4, 16), np.float32), np.zeros(n, np.int16)
    k(x, y, z)
    np.testing.assert_array_equal(y.reshape(-1), (np.arange(n) * 1.5).astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(z.astype(np.float64), converted(x, "i16").reshape(-1))


def test_splat_of_an_element_read_at_the_lane_reads_the_first_lane():
    """Each work-item writes 2 * lane + 1 to its element of a groupshared array and reads it back
    (load_element at the lane: a lane-varying value); a splat of it takes the first lane's, 1 (HLSL
    0035: Splat(WaveReadLaneFirst(v))). (The device only: the CPU has no lane ids.)"""
    target = needs_device()
    b = KernelBuilder("gs_lanes", S)
    Y = b.param("Y", "ptr<f32>")
    g = b.groupshared("f32", S)
    lane = b.work_id("lane")
    b.store_element(g, lane, b.add(b.mul(b.convert(lane, "f32"), 2.0), 1.0))
    b.barrier()
    b.store(b.splat(mat("f32", 4, S), b.load_element(g, lane)), Y, strides=(S, 1))
    k = build(b, target)
    y = np.zeros((4, S), np.float32)
    k(y)
    np.testing.assert_array_equal(y, np.ones((4, S), np.float32))


def test_accesses_must_stay_inside_the_array():
    b = KernelBuilder("gs_out")
    X = b.param("X", "ptr<f32>")
    g = b.groupshared("f16", 100)
    b.store(b.load(mat("f32", 16, 16), X, strides=(16, 1)), g, strides=(16, 1))
    with pytest.raises(ValueError, match=r"reaches elements 0 to 255 of the groupshared array groupshared<f16, 100>"):
        b.compile()
    # checked bounds keep it inside: rows 0..5 of 16 columns = elements 0..95
    b = KernelBuilder("gs_checked")
    X = b.param("X", "ptr<f32>")
    g = b.groupshared("f16", 100)
    b.store(b.load(mat("f32", 16, 16), X, strides=(16, 1)), g, strides=(16, 1), bounds=(6, 16), checked=True)
    b.compile()
    # a position known at the call: checked per call
    b = KernelBuilder("gs_param")
    X, r = b.param("X", "ptr<f32>"), b.param("r", "index")
    g = b.groupshared("f32", 64)
    b.store(b.load(mat("f32", 2, 16), X, strides=(16, 1)), g, r, 0, strides=(16, 1))
    k = b.compile()
    k(np.ones((2, 16), np.float32), 2)
    with pytest.raises(ValueError, match=r"reaches elements 48 to 79 of the groupshared array groupshared<f32, 64>"):
        k(np.ones((2, 16), np.float32), 3)
    # a position that depends on data
    b = KernelBuilder("gs_data")
    X = b.param("X", "ptr<i32>")
    g = b.groupshared("i32", 64)
    b.store_element(g, b.convert(b.load_element(X, 0), "index"), 1)
    with pytest.raises(ValueError, match="the position in the groupshared array groupshared<i32, 64> depends on data"):
        b.compile()


def test_bad_groupshared_declarations_and_uses():
    b = KernelBuilder("gs_bad")
    with pytest.raises(ValueError, match=r"groupshared<f32, 9000>: a groupshared array has 1 to 8192 elements"):
        b.groupshared("f32", 9000)
        b.compile()
    b = KernelBuilder("gs_bad0")
    with pytest.raises(ValueError, match="at least one element, got 0"):
        b.groupshared("f32", 0)
    with pytest.raises(TypeError, match="length must be an int"):
        b.groupshared("f32", 2.5)
    b = KernelBuilder("gs_param_type")
    b.param("G", "groupshared<f32, 16>")
    with pytest.raises(ValueError, match="a groupshared array is declared in the kernel"):
        b.compile()
    b = KernelBuilder("gs_thread")
    X = b.param("X", "ptr<f32>")
    g = b.groupshared("f32", 16)
    b.accumulate(b.load(mat("f32", 4, 4, "thread"), X, strides=(4, 1)), g, strides=(4, 1))
    with pytest.raises(ValueError, match="groupshared accumulate needs a subgroup or workgroup scope matrix"):
        b.compile()
    b = KernelBuilder("gs_vec")
    g = b.groupshared("f32", 16)
    b.vector_store(b.vector_load("vector<f32, 4>", g), g)
    with pytest.raises(ValueError, match=r"vector.load does not take a groupshared array \(groupshared<f32, 16>\)"):
        b.compile()
    b = KernelBuilder("gs_loop")
    g = b.groupshared("f32", 16)
    b.for_range(0, 2, 1, inits=[g], body=lambda b, i, x: [x])
    with pytest.raises(ValueError, match=r"cannot be carried by for"):
        b.compile()
    b = KernelBuilder("gs_buffer_convert")
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f16>")
    b.store(b.load(mat("f32", 4, 16), X, strides=(16, 1)), Y, strides=(16, 1))
    with pytest.raises(ValueError, match="differs from the matrix component type f32.*only a groupshared array converts"):
        b.compile()


def test_over_the_device_budget_is_an_error():
    """The groupshared arrays and workgroup-scope matrices share 32 KiB of work-group memory."""
    b = KernelBuilder("gs_budget", S, subgroups=2)
    X = b.param("X", "ptr<f32>")
    g = b.groupshared("f32", 8192)
    m = b.load(mat("f32", 8, 8, "workgroup"), X, strides=(8, 1))
    b.store(m, g, strides=(8, 1))
    with pytest.raises(ValueError, match="more than 32768 bytes of work-group shared memory"):
        b.compile(device=needs_device())


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_groupshared_kernels_assemble_for_nvidia(target):
    """The conversion kernels for NVIDIA (warps of 32, 4 warps): .shared loads, stores and the
    16-bit accumulate's compare-exchange on its 32-bit word; ptxas accepts them."""
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    b = KernelBuilder("gs_ptx", 32, subgroups=4)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    g = b.groupshared("f16", 32 * 32)
    for scope in ("subgroup", "workgroup"):
        m = b.load(mat("f32", 32, 32, scope), X, strides=(32, 1))
        b.store(m, g, strides=(32, 1))
        b.barrier()
        b.accumulate(m, g, strides=(32, 1))
        b.barrier()
        b.store(b.load(mat("f32", 32, 32, scope), g, strides=(32, 1)), Y, strides=(32, 1))
    text = b._fn.compile_device("target:" + target).source("ptx")
    assert "st.shared.b16" in text and "ld.shared.b16" in text and re.search(r"atom\.[a-z.]*shared\.cas\.b32", text)
    assert "registers" in ptx.ptxas(text, target)
