"""Session 26's audit of what sessions 20 and 22-25 did not reach: coopjit from several Python
threads at once, interrupts and the GIL, NaN / inf / -0.0 and integer wrap-around against NumPy,
the caller's floating-point state, and outputs that overlap themselves or the inputs. Each test is
a bug the audit found (it failed before its fix)."""
import re

import numpy as np
import pytest

import coopjit
from coopjit.ir import KernelBuilder


def _overlapping_rows(shape, row_step, dtype=np.float32):
    """A writable (rows, cols) view whose rows start `row_step` elements apart, fewer than its
    `cols` elements: row r's elements row_step.. are row r + 1's first ones; and its memory."""
    base = np.zeros(row_step * (shape[0] - 1) + shape[1], dtype)
    return np.lib.stride_tricks.as_strided(base, shape, (row_step * base.itemsize, base.itemsize)), base


@pytest.mark.parametrize("call", ["matmul", "matmul_fused", "gemm_beta", "kernel", "batched", "torch_as_strided",
                                  "reduce", "reduce2x2"])
def test_outputs_whose_elements_overlap_are_refused(rng, call):
    # Session 24 refused outputs with a zero stride; an output whose rows overlap with any other
    # stride (as_strided, torch's as_strided) was still written: each row's results landed on
    # the next row's, and gemm's beta * c read elements other rows had written.
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)
    out, base = _overlapping_rows((64, 16), 8)
    match = r"\(64, 16\)\) has byte strides \(32, 4\): its elements \(0, 8\) and \(1, 0\) are one element in memory"
    if call == "batched":
        out = np.lib.stride_tricks.as_strided(base, (2, 32, 16), (32 * 32, 32, 4))
        match = r"\(2, 32, 16\)\) has byte strides \(1024, 32, 4\): its elements \(0, 0, 8\) and \(0, 1, 0\) are one"
    if call == "torch_as_strided":
        torch = pytest.importorskip("torch")
        t = torch.zeros(base.size)
        out, base = t.as_strided((64, 16), (8, 1)), t
    with pytest.raises(ValueError, match=match):
        if call in ("matmul", "torch_as_strided"):
            coopjit.matmul(a, b, out=out)
        elif call == "matmul_fused":
            coopjit.matmul(a, b, out=out, bias=np.ones(16, np.float32), activation="relu")
        elif call == "gemm_beta":
            base[:] = 1.0
            coopjit.gemm(a, b, out, beta=1.0)
        elif call == "kernel":
            coopjit.compile_gemm(64, 16, 32)(a, b, out)
        elif call == "batched":
            coopjit.matmul(a.reshape(2, 32, 32), b, out=out)
        elif call == "reduce":
            coopjit.reduce(np.ones((64, 16, 3), np.float32), axis=2, out=out)
        else:
            coopjit.reduce2x2(np.ones((128, 32), np.float32), out=out)
    assert not base.any() or call == "gemm_beta" and (base == 1).all()


def test_outputs_whose_elements_are_apart_are_written(rng):
    # The overlap check refuses only outputs whose elements meet: an interleaved view (rows 8
    # bytes apart, columns 12: the dims' steps interleave, yet no two elements meet), reversed,
    # strided and transposed views are written element by element.
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((5, 2)).astype(np.float32)
    want = a.astype(np.float64) @ b
    base = np.full(16, np.nan, np.float32)
    out = np.lib.stride_tricks.as_strided(base, (3, 2), (8, 12))  # elements 0, 3, 2, 5, 4, 7 of base
    coopjit.matmul(a, b, out=out)
    np.testing.assert_allclose(out, want, rtol=1e-5)
    assert np.flatnonzero(~np.isnan(base)).tolist() == [0, 2, 3, 4, 5, 7]
    for view in (np.zeros((6, 4), np.float32)[::2, ::-2], np.zeros((2, 3), np.float32).T[::-1]):
        coopjit.gemm(a, b, view)
        np.testing.assert_allclose(view, want, rtol=1e-5)
    y = np.zeros(24, np.float32)[::-3]
    coopjit.reduce(np.ones((8, 4), np.float32), axis=1, out=y)
    assert (y == 4).all()


def _add_row_kernel():
    kb = KernelBuilder("add_row_s26")
    x = kb.param("X", "ptr<f32>")
    m = kb.load("coopmatrix<f32, 4, 16, acc, subgroup>", x, strides=(16, 1))
    m = kb.per_element(m, lambda b, row, col, v: b.add(v, b.convert(row, "f32")))
    kb.store(m, x, strides=(16, 1))
    return kb.compile()


@pytest.mark.parametrize("strides", [(0, 4), (8, 4)])
def test_custom_kernel_arrays_it_writes_whose_elements_overlap_are_refused(strides):
    # A custom kernel's non-contiguous argument goes through a C-order copy written back after the
    # run: into a view whose elements overlap (rows 0 or 2 elements apart), the copies' elements
    # landed on one another (a zero-stride X held row 3's values in all of row 0's).
    kern = _add_row_kernel()
    base = np.zeros(strides[0] // 4 * 3 + 16, np.float32)
    x = np.lib.stride_tricks.as_strided(base, (4, 16), strides)
    match = r"argument 0 \(X\) \(float32 \(4, 16\)\) has byte strides .*one element in memory"
    with pytest.raises(ValueError, match=match):
        kern(x)
    assert not base.any()
    y = np.zeros((4, 32), np.float32)[:, ::2]  # (apart: written through its copy)
    kern(y)
    np.testing.assert_array_equal(y, np.repeat(np.arange(4, dtype=np.float32)[:, None], 16, axis=1))


@pytest.mark.parametrize("strides", [(0, 4), (32, 4)])
def test_load_matrix_out_whose_elements_overlap_is_refused(strides):
    # load_matrix wrote a (4, 16) out whose rows are one row (or overlap, 8 elements apart) in
    # place: the rows' elements landed on one another (a zero-stride out held row 3 of the buffer).
    base = np.zeros(strides[0] // 4 * 3 + 16, np.float32)
    out = np.lib.stride_tricks.as_strided(base, (4, 16), strides)
    buf = np.arange(64, dtype=np.float32)
    with pytest.raises(ValueError, match=r"load_matrix: out \(float32 \(4, 16\)\) has byte strides .*one element in"):
        coopjit.load_matrix(buf, 4, 16, coopjit.TensorLayout((4, 16)), out=out)
    assert not base.any()
    fine = np.zeros((4, 32), np.float32)[:, ::2]
    coopjit.load_matrix(buf, 4, 16, coopjit.TensorLayout((4, 16)), out=fine)
    np.testing.assert_array_equal(fine, buf.reshape(4, 16))


@pytest.mark.parametrize("field", ["ksplit", "b_prefetch"])
def test_plan_refusals_name_the_walk_as_plans_take_it(rng, field):
    # A plan field of another walk was refused naming "order=1" / "order=2", the core's numbers:
    # plan={"order": 1} is itself refused ("order must be one of m_inner, k_outer, dot (a str)").
    # The refusal names the value a plan takes, and that value makes the plan valid.
    a = rng.standard_normal((1, 512)).astype(np.float32)
    b = rng.standard_normal((512, 256)).astype(np.float32)
    plan = {"ksplit": 2} if field == "ksplit" else {"b_prefetch": 64}
    # (ksplit runs on the tile walk too since session 27: the dot walk is the other walk here)
    other = "dot" if field == "ksplit" else "m_inner"
    with pytest.raises(ValueError, match=rf"\(order='k_outer'\).* the plan's walk is {other}") as e:
        coopjit.matmul(a, b, plan={**plan, "order": other})
    order = re.search(r"order='(\w+)'", str(e.value)).group(1)
    got = coopjit.matmul(a, b, plan={**plan, "order": order})
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
