"""HLSL 0035's ThreadGroup-scope OuterProduct and Accumulate (to a buffer) in the SIMT lowering
(simt_workgroup.cpp: the matrix a row-major buffer in work-group shared memory, each work-item
computing, or adding, every W-th element), on the device with 1 to 4 subgroups a work-group and on
the CPU (a work-group is one invocation), against NumPy: outer products in float64 (and exactly
where the inputs make them exact), accumulates from several work-groups into the same elements
with sums exact in any order (test_accumulate_types.py's addends), elements outside the bounds
untouched. (0035 allows vector x matrix Multiply / MultiplyAdd at Thread scope only: the verifier
refuses them at ThreadGroup scope, tested here too.) The kernels for NVIDIA pass ptxas."""
import re

import numpy as np
import pytest

from coopjit import ptx
from coopjit.ir import KernelBuilder

from device_support import (build, every_module_passes_spirv_val, lanes, needs_device,  # noqa: F401,F811 - fixtures
                            target)
from test_accumulate_types import NP, addends, check

S = lanes(16)  # 16, or the device's subgroup size (NVIDIA: 32)


def wg(t, r, c, use="acc"):
    return f"coopmatrix<{t}, {r}, {c}, {use}, workgroup>"



@pytest.mark.parametrize("it, rt", [("f32", "f32"), ("f16", "f32"), ("bf16", "f32"), ("f8_e4m3", "f32"),
                                    ("f64", "f64"), ("i32", "i32"), ("f16", "f16")])
@pytest.mark.parametrize("subgroups", [1, 2, 4])
def test_outer_product_at_workgroup_scope(rng, target, it, rt, subgroups):
    """u (M) x v (N) as a workgroup-scope M x N accumulator (converted to rt first), plus a loaded
    matrix, stored: (u v^T)[i, j] + c[i, j]."""
    M, N = 12, 20
    b = KernelBuilder("wg_outer", S, subgroups=subgroups)
    U, V, C, OUT = b.param("U", f"ptr<{it}>"), b.param("V", f"ptr<{it}>"), b.param("C", f"ptr<{rt}>"), b.param("OUT", f"ptr<{rt}>")
    u = b.vector_load(f"vector<{it}, {M}>", U)
    v = b.vector_load(f"vector<{it}, {N}>", V)
    p = b.outer_product(u, v, wg(rt, M, N))
    b.store(b.matrix_binary("add", p, b.load(wg(rt, M, N), C, strides=(N, 1))), OUT, strides=(N, 1))
    k = build(b, target)
    if it == "i32":
        u, v, c = rng.integers(-1000, 1000, M), rng.integers(-1000, 1000, N), rng.integers(-10**6, 10**6, (M, N))
    elif it == "f8_e4m3":
        u, v, c = rng.integers(-8, 9, M) * 0.5, rng.integers(-8, 9, N) * 0.25, rng.standard_normal((M, N))
    else:
        u, v, c = rng.standard_normal(M), rng.standard_normal(N), rng.standard_normal((M, N))
    u, v, c = u.astype(NP[it]), v.astype(NP[it]), c.astype(NP[rt])
    out = np.zeros((M, N), NP[rt])
    k(u, v, c, out)
    if rt == "i32":
        np.testing.assert_array_equal(out, (np.outer(u.astype(np.int64), v.astype(np.int64)) + c).astype(np.int32))
        return
    prod = np.outer(u.astype(np.float64), v.astype(np.float64))
    if rt == "f16":  # the product rounded to f16, then the sum rounded to f16
        want = (prod.astype(np.float16).astype(np.float64) + c.astype(np.float64))
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=2e-3)
        return
    tol = 1e-6 if rt == "f32" else 1e-13
    np.testing.assert_allclose(out.astype(np.float64), prod + c.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("t", ["f32", "f64", "i32", "u64", "f16", "bf16", "i8", "u16", "f8_e5m2"])
@pytest.mark.parametrize("subgroups", [1, 3])
def test_work_groups_accumulate_a_workgroup_matrix(rng, target, t, subgroups):
    """G work-groups each add their own M x N slice (a workgroup-scope matrix) into one window of
    a wider output at column 1, bounds leaving the window's last column out: those columns and
    the one before keep their values (8- and 16-bit elements share words with them)."""
    G, M, N, W = 5, 8, 6, 9
    b = KernelBuilder("wg_acc", S, subgroups=subgroups)
    X, OUT = b.param("X", f"ptr<{t}>"), b.param("OUT", f"ptr<{t}>")
    g = b.work_id("group")
    m = b.load(wg(t, M, N), X, b.mul(g, M), 0, strides=(N, 1))
    b.accumulate(m, OUT, 0, 1, strides=(W, 1), bounds=(M, N))
    k = build(b, target)
    x = addends(rng, t, (G, M, N))
    start = addends(rng, t, (M, W))
    out = start.copy()
    k(x, out, groups=G)
    inside = np.zeros((M, W), bool)
    inside[:, 1:N] = True
    check(out[:, 1:N], start[:, 1:N], x[:, :, : N - 1], t)
    np.testing.assert_array_equal(out[~inside].view(np.uint8), start[~inside].view(np.uint8))


def test_accumulate_of_an_outer_product_column_major(rng, target):
    """An outer product accumulated column-major (strides (1, M)): OUT^T += u v^T, at workgroup
    scope over 2 subgroups, twice (a loop): OUT^T = start^T + 2 u v^T."""
    M, N = 16, 8
    b = KernelBuilder("wg_outer_acc", S, subgroups=2)
    U, V, OUT = b.param("U", "ptr<f32>"), b.param("V", "ptr<f32>"), b.param("OUT", "ptr<f32>")
    p = b.outer_product(b.vector_load(f"vector<f32, {M}>", U), b.vector_load(f"vector<f32, {N}>", V), wg("f32", M, N))
    b.for_range(0, 2, 1, body=lambda b, i: b.accumulate(p, OUT, strides=(1, M)))
    k = build(b, target)
    u, v = rng.integers(-8, 9, M).astype(np.float32), rng.integers(-8, 9, N).astype(np.float32)
    start = rng.integers(-100, 100, (N, M)).astype(np.float32)
    out = start.copy()
    k(u, v, out)
    np.testing.assert_array_equal(out, start + 2 * np.outer(u, v).T)


def test_vector_multiply_needs_thread_scope():
    """0035's scope table: Multiply(vector, Matrix) and MultiplyAdd are Thread scope only."""
    b = KernelBuilder("wg_vecmul", S, subgroups=2)
    V, W, OUT = b.param("V", "ptr<f32>"), b.param("W", "ptr<f32>"), b.param("OUT", "ptr<f32>")
    r = b.vector_multiply(b.vector_load("vector<f32, 8>", V), b.load(wg("f32", 8, 4, "b"), W, strides=(4, 1)), "vector<f32, 4>")
    b.vector_store(r, OUT)
    with pytest.raises(ValueError, match="needs thread scope matrices"):
        b.compile()


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_workgroup_outer_product_and_accumulate_assemble_for_nvidia(target):
    """For NVIDIA (4 warps of 32): a workgroup-scope outer product accumulated (f32: red/atom add
    on global memory) and an f16 one (compare-exchange on the 32-bit word); ptxas accepts them."""
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    b = KernelBuilder("wg_outer_ptx", 32, subgroups=4)
    U, OUT, H = b.param("U", "ptr<f32>"), b.param("OUT", "ptr<f32>"), b.param("H", "ptr<f16>")
    u = b.vector_load("vector<f32, 16>", U)
    b.accumulate(b.outer_product(u, u, wg("f32", 16, 16)), OUT, strides=(16, 1))
    b.accumulate(b.cast(b.outer_product(u, u, wg("f32", 16, 16)), wg("f16", 16, 16)), H, strides=(16, 1))
    text = b._fn.compile_device("target:" + target).source("ptx")
    assert re.search(r"atom\.[a-z.]*global\.cas\.b32", text) and re.search(r"(red|atom)\.[a-z.]*global\.add\.f32", text)
    assert "registers" in ptx.ptxas(text, target)
