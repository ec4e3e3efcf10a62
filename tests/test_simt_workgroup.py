"""Workgroup-scope matrices (SPV_NV_cooperative_matrix2's workgroup scope, HLSL 0035's ThreadGroup)
in the SIMT lowering: a matrix spread over the subgroups of a work-group (simt_workgroup.cpp: a
row-major buffer in work-group shared memory, each work-item computing every W-th element). Kernels
written with coopjit.ir run on opencl:0 with 1 to 4 subgroups a work-group, and the same kernels on
the CPU (a work-group is one invocation there), and are checked against NumPy in float64: load / store (checked and not, any strides), mul_add (mixed precision too, inside
a K loop that carries the accumulator), the four reduce modes (built-in and user combines),
per-element functions with extra matrices and coordinates, component-type and use conversions,
transposes, element-wise arithmetic, splat, branches; the same kernels for NVIDIA pass ptxas.
Kernels over the shared-memory budget are errors that say so."""
import ml_dtypes
import numpy as np
import pytest

from coopjit import ptx
from coopjit.ir import KernelBuilder

from device_support import DEVICE, every_module_passes_spirv_val, lanes, needs_device, validated  # noqa: F401 - the fixture

S = lanes(16)  # the subgroup size of the kernels here: 16, or the device's (NVIDIA: 32)


def wg(t, r, c, use="acc"):
    return f"coopmatrix<{t}, {r}, {c}, {use}, workgroup>"


@pytest.fixture(params=["cpu", DEVICE])
def target(request):
    """The CPU (a work-group is one invocation there: workgroup scope is its subgroup) or the
    device (the SIMT lowering; skips only where it is absent)."""
    return "cpu" if request.param == "cpu" else needs_device()


def build(b, target=None):
    if target == "cpu":
        return b.compile()
    k = b.compile(device=needs_device())
    validated(k.spirv)
    return k


def gemm_kernel(M, N, K, kb, subgroups, S=S, t_in="f32", t_acc="f32"):
    """C = A @ B + C over K in steps of kb: a K loop carrying the workgroup-scope accumulator."""
    b = KernelBuilder("wg_gemm", S, subgroups=subgroups)
    A, B, C = b.param("A", f"ptr<{t_in}>"), b.param("B", f"ptr<{t_in}>"), b.param("C", f"ptr<{t_acc}>")
    c0 = b.load(wg(t_acc, M, N), C, strides=(N, 1))

    def step(b, k, acc):
        a = b.load(wg(t_in, M, kb, "a"), A, col=k, strides=(K, 1))
        x = b.load(wg(t_in, kb, N, "b"), B, row=k, strides=(N, 1))
        return [b.mul_add(a, x, acc)]

    (c,) = b.for_range(0, K, kb, inits=[c0], body=step)
    b.store(c, C, strides=(N, 1))
    return b


@pytest.mark.parametrize("M, N, K, kb, subgroups", [(16, 16, 32, 8, 4), (8, 24, 16, 16, 2), (32, 8, 24, 8, 3),
                                                   (4, 5, 7, 7, 1), (13, 11, 6, 3, 4)])
def test_mul_add_in_a_k_loop(rng, M, N, K, kb, subgroups, target):
    k = build(gemm_kernel(M, N, K, kb, subgroups), target)
    if target != "cpu":
        assert k.work_group_size == S * subgroups
    a, x, c = (rng.standard_normal(s).astype(np.float32) for s in ((M, K), (K, N), (M, N)))
    out = c.copy()
    k(a, x, out)
    want = a.astype(np.float64) @ x + c
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * K)


@pytest.mark.parametrize("t_in, t_acc, npin, npacc", [("f16", "f32", np.float16, np.float32),
                                                     ("bf16", "f32", ml_dtypes.bfloat16, np.float32),
                                                     ("i8", "i32", np.int8, np.int32),
                                                     ("f64", "f64", np.float64, np.float64)])
def test_mul_add_mixed_precision(rng, t_in, t_acc, npin, npacc, target):
    M, N, K = 16, 8, 32
    k = build(gemm_kernel(M, N, K, 16, 2, t_in=t_in, t_acc=t_acc), target)
    if np.dtype(npin).kind == "i":
        a, x = rng.integers(-100, 100, (M, K)).astype(npin), rng.integers(-100, 100, (K, N)).astype(npin)
        c = rng.integers(-1000, 1000, (M, N)).astype(npacc)
    else:
        a, x = rng.standard_normal((M, K)).astype(npin), rng.standard_normal((K, N)).astype(npin)
        c = rng.standard_normal((M, N)).astype(npacc)
    out = c.copy()
    k(a, x, out)
    want = a.astype(np.float64) @ x.astype(np.float64) + c
    if np.dtype(npacc).kind == "i":
        np.testing.assert_array_equal(out, want.astype(np.int64))
    else:
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("R, C, mode", [(r, c, m) for r, c in [(8, 20), (32, 8), (6, 10), (16, 16)]
                                         for m in ("row", "column", "both", "2x2")])
@pytest.mark.parametrize("combine", ["add", "max", "user"])
def test_reduce_modes(rng, R, C, mode, combine, target):
    rt = {"row": (R, 3), "column": (2, C), "both": (2, 2), "2x2": (R // 2, C // 2)}[mode]
    b = KernelBuilder("wg_reduce", S, subgroups=4)
    X, Y = b.param("X", "ptr<f64>"), b.param("Y", "ptr<f64>")
    x = b.load(wg("f64", R, C), X, strides=(C, 1))
    fn = (lambda b, p, q: b.add(b.mul(p, 1.0), q)) if combine == "user" else combine
    b.store(b.reduce(x, mode, wg("f64", *rt), fn), Y, strides=(rt[1], 1))
    k = build(b, target)
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


def test_per_element_conversions_transpose_and_arithmetic(rng, target):
    b = KernelBuilder("wg_misc", S, subgroups=2)
    X, B, Y, H, T, Z = (b.param(n, t) for n, t in (("X", "ptr<f32>"), ("B", "ptr<f32>"), ("Y", "ptr<f32>"),
                                                  ("H", "ptr<f16>"), ("T", "ptr<f32>"), ("Z", "ptr<f32>")))
    s = b.param("s", "f32")
    t = wg("f32", 12, 20)
    x = b.load(t, X, strides=(20, 1))
    bias = b.load(t, B, strides=(0, 1))  # one row broadcast down the matrix
    y = b.per_element(x, lambda b, r, c, v, bv, sv: b.add(b.mul(b.max(b.add(v, bv), 0.0), sv),
                                                       b.convert(b.add(b.mul(r, 100), c), "f32")), extras=[bias, s])
    b.store(y, Y, strides=(20, 1))
    b.store(b.convert_matrix(y, wg("f16", 12, 20)), H, strides=(20, 1))
    b.store(b.transpose(x), T, strides=(12, 1))                     # acc 12 x 20 -> b 20 x 12
    xa = b.convert_matrix(x, wg("f32", 12, 20, "a"))                # a use conversion feeding mul_add
    z = b.mul_add(xa, b.transpose(bias), b.splat(wg("f32", 12, 12), 1.5))
    z = b.matrix_binary("sub", b.scale(z, 2.0), b.splat(wg("f32", 12, 12), 3.0))
    b.store(z, Z, strides=(12, 1))
    k = build(b, target)
    xv, bv = rng.standard_normal((12, 20)).astype(np.float32), rng.standard_normal(20).astype(np.float32)
    out, half, tr, zz = (np.zeros(sh, dt) for sh, dt in (((12, 20), np.float32), ((12, 20), np.float16),
                                                        ((20, 12), np.float32), ((12, 12), np.float32)))
    k(xv, bv, out, half, tr, zz, 2.5)
    want = np.maximum(xv.astype(np.float64) + bv, 0) * 2.5 + np.add.outer(np.arange(12) * 100, np.arange(20))
    np.testing.assert_allclose(out, want, rtol=1e-6)
    np.testing.assert_array_equal(half, out.astype(np.float16))
    np.testing.assert_array_equal(tr, xv.T)
    bias_mat = np.tile(bv.astype(np.float64), (12, 1))
    np.testing.assert_allclose(zz, 2 * (xv.astype(np.float64) @ bias_mat.T + 1.5) - 3, rtol=1e-5, atol=1e-4)


def test_checked_access_branches_and_the_first_lanes_splat(rng, target):
    # A 16 x 16 window hanging off a 10 x 9 matrix (checked: zeros in, nothing out); a branch on a
    # scalar picks one of two matrices; a splat of the lane id reads work-item 0's (0).
    b = KernelBuilder("wg_edges", S, subgroups=4)
    X, Y, Z = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>"), b.param("Z", "ptr<f32>")
    r, c, flag = b.param("r", "index"), b.param("c", "index"), b.param("flag", "index")
    t = wg("f32", 16, 16)
    x = b.load(t, X, row=r, col=c, strides=(9, 1), bounds=(10, 9), checked=True)
    y = b.if_(b.gt(flag, 0), lambda b: [b.scale(x, 2.0)], lambda b: [b.scale(x, -1.0)], types=[t])[0]
    # (the CPU has no lane id: a subgroup is one invocation there)
    lane = b.convert(b.work_id("lane"), "f32") if target != "cpu" else b.const(0.0, "f32")
    y = b.matrix_binary("add", y, b.splat(t, lane))
    b.store(y, Y, row=r, col=c, strides=(9, 1), bounds=(10, 9), checked=True)
    b.store(y, Z, strides=(16, 1))
    k = build(b, target)
    for rr, cc, fl in ((0, 0, 1), (-3, 2, 0), (4, -6, 1)):
        xv = rng.standard_normal((10, 9)).astype(np.float32)
        yv = np.full((10, 9), 7.0, np.float32)
        zv = np.zeros((16, 16), np.float32)
        k(xv, yv, zv, rr, cc, fl)
        scale = 2.0 if fl else -1.0
        window = np.zeros((16, 16), np.float32)
        inside = np.zeros((10, 9), bool)
        for i in range(16):
            for j in range(16):
                if 0 <= rr + i < 10 and 0 <= cc + j < 9:
                    window[i, j] = xv[rr + i, cc + j]
                    inside[rr + i, cc + j] = True
        np.testing.assert_array_equal(zv, window * scale)
        np.testing.assert_array_equal(yv[inside], scale * xv[inside])
        assert (yv[~inside] == 7).all()


def test_unsupported_operations_name_themselves():
    b = KernelBuilder("wg_big", S, subgroups=2)
    X = b.param("X", "ptr<f64>")
    b.store(b.scale(b.load(wg("f64", 64, 64), X, strides=(64, 1)), 2.0), X, strides=(64, 1))
    with pytest.raises(ValueError, match="more than 32768 bytes of work-group shared memory"):
        b.compile(device=needs_device())


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_workgroup_kernels_assemble_for_nvidia(target):
    """The same lowering for NVIDIA (warps of 32, 4 warps: a warpgroup): ptxas accepts it."""
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    b = gemm_kernel(64, 32, 64, 16, 4, S=32, t_in="f16", t_acc="f32")
    prog = b._fn.compile_device("target:" + target)
    assert prog.work_group_size == 128
    text = prog.source("ptx")
    assert ".shared" in text and "bar.sync" in text
    report = ptx.ptxas(text, target)
    assert "Used" in report and "registers" in report, report
    b = KernelBuilder("wg_reduce", 32, subgroups=4)
    X, Y, T = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>"), b.param("T", "ptr<bf16>")
    x = b.load(wg("f32", 32, 32), X, strides=(32, 1))
    y = b.per_element(x, lambda b, r, c, v: b.add(v, b.convert(r, "f32")))
    b.store(b.reduce(y, "row", wg("f32", 32, 1), "max"), Y, strides=(1, 1))
    b.store(b.convert_matrix(b.transpose(y), wg("bf16", 32, 32, "b")), T, strides=(32, 1))
    report = ptx.ptxas(b._fn.compile_device("target:" + target).source("ptx"), target)
    assert "Used" in report, report


def test_element_access_and_sum_accumulate(rng):
    # HLSL's Length / Get / Set / GetCoordinate at ThreadGroup scope: component i of work-item t
    # is element i W + t (W = 32 work-items here: 32 / S subgroups), padding beyond the matrix.
    b = KernelBuilder("wg_elems", S, subgroups=32 // S)
    X, Y, L, A, B, C = (b.param(n, "ptr<f32>") for n in "XYLABC")
    t = wg("f32", 6, 10)  # 60 elements: 2 a work-item, the second one padding from work-item 28 on
    x = b.load(t, X, strides=(10, 1))
    r, c = b.get_coordinate(x, 0)
    y = b.set(x, 0, b.add(b.get(x, 0), b.convert(b.add(b.mul(r, 100), c), "f32")))
    y = b.set(y, 1, b.mul(b.get(x, 1), -2.0))
    b.store(y, Y, strides=(10, 1))
    b.store(b.scale(b.splat(t, 1.0), b.convert(b.length(x), "f32")), L, strides=(10, 1))
    s = b.sum_accumulate(b.load(wg("f32", 6, 10, "a"), A, strides=(10, 1)), b.load(wg("f32", 6, 10, "b"), B, strides=(10, 1)),
                         b.load(t, C, strides=(10, 1)))
    b.store(s, C, strides=(10, 1))
    k = build(b)  # the device's distribution of elements over work-items (the CPU's differs)
    xv, av, bv, cv = (rng.standard_normal((6, 10)).astype(np.float32) for _ in range(4))
    yv, lv, out = np.zeros((6, 10), np.float32), np.zeros((6, 10), np.float32), cv.copy()
    k(xv, yv, lv, av, bv, out)
    want = xv.astype(np.float64).copy().reshape(-1)
    e = np.arange(60)
    want[:32] += (e[:32] // 10) * 100 + e[:32] % 10  # component 0: elements 0..31
    want[32:] *= -2                                   # component 1: elements 32..59
    np.testing.assert_allclose(yv.reshape(-1), want, rtol=1e-6)
    assert (lv == 2).all()
    np.testing.assert_allclose(out, cv.astype(np.float64) + av + bv, rtol=1e-6, atol=1e-6)
