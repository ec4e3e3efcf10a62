"""A B whose columns are contiguous along K (column-major, a @ w.T, or a view with a column stride
longer than K) packed into panels (issue 14, session 34): each whole K step of the packing reads
its columns' kb rows at once (the lowering's column tile) where the row stride is 1 at run time,
else gathers as before. The packing phase and B packed by its reader, for f32 / f64 / bf16 / f16 /
int8 (AMX rows where the CPU has AMX, VNNI panels and the s8 column sums where it has not), against
NumPy in float64 (exact integers), at N / K edges, with beta, on 1 and 2 workers; the kernel's IR
has the run-time test exactly where B's column stride is not known to be 1; and the planner packs
the skinny products of such a B on every CPU."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from gemm_reference import check_product

BF16 = ml_dtypes.bfloat16


def _b_views(rng, dtype, k, n):
    """B as a column-major array, as the transpose of a wider row-major array (column stride
    > K), and (control) row-major."""
    def draw(shape):
        if np.issubdtype(np.dtype(dtype), np.integer):
            info = np.iinfo(dtype)
            return rng.integers(info.min, info.max + 1, shape).astype(dtype)
        return rng.uniform(-1, 1, shape).astype(dtype)
    col = np.asfortranarray(draw((k, n)))
    wide = draw((n, k + 37))
    return {"F": col, "T-wide": wide.T[:k], "C": np.ascontiguousarray(draw((k, n)))}


def _check(c, a, b, beta=0.0, c0=None):
    if np.issubdtype(c.dtype, np.integer):
        ref = a.astype(np.int64) @ b.astype(np.int64)
        if beta:
            ref = ref + int(beta) * c0.astype(np.int64)
        np.testing.assert_array_equal(c, ref)
    elif a.dtype == np.float64:
        check_product(c, a, b, beta=beta, c0=c0, acc_eps=np.finfo(np.float64).eps)
    else:
        check_product(c, a, b, beta=beta, c0=c0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.float16, np.int8])
@pytest.mark.parametrize("m,n,k", [(16, 1000, 1030), (37, 515, 700), (300, 129, 301)])
@pytest.mark.parametrize("form", [None, {"pack": 1, "inline_b": 1}, {"pack": 1, "inline_b": 0}])
def test_column_major_b_matches_numpy(rng, dtype, m, n, k, form):
    if np.issubdtype(np.dtype(dtype), np.integer):
        a = rng.integers(-128, 128, (m, k)).astype(dtype)
    else:
        a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    views = _b_views(rng, dtype, k, n)
    for name, b in views.items():
        keep = b.copy(order="K")
        for threads in (1, 2):
            plan = dict(form or {}, threads=threads)
            try:
                c = coopjit.matmul(a, b, plan=plan)
            except ValueError as e:
                # (a form a product's plan refuses, by name: inline_b needs a column panel per worker)
                assert form is not None and "inline_b" in str(e), (name, plan, e)
                continue
            _check(c, a, b)
        np.testing.assert_array_equal(b, keep)  # the input is not modified


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("inline_b", [0, 1])
def test_column_major_b_with_beta_and_strided_c(rng, dtype, inline_b):
    m, n, k = 40, 777, 515
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    b = np.asfortranarray(rng.uniform(-1, 1, (k, n)).astype(dtype))
    c0 = rng.uniform(-1, 1, (m, 2 * n)).astype(dtype)
    c = c0.copy()
    coopjit.gemm(a, b, c[:, ::2], beta=-0.5, plan={"pack": 1, "inline_b": inline_b})
    _check(c[:, ::2], a, b, beta=-0.5, c0=c0[:, ::2])
    np.testing.assert_array_equal(c[:, 1::2], c0[:, 1::2])


def test_the_run_time_test_is_where_b_column_stride_is_not_one():
    a = np.ones((64, 1024), np.float32)
    for b, want in [(np.asfortranarray(np.ones((1024, 2048), np.float32)), True),
                    (np.ones((1024, 2048), np.float32), False)]:
        for form in ({"pack": 1, "inline_b": 1}, {"pack": 1, "inline_b": 0}):
            ir = coopjit.cross_compile(a, b, cpu="emeraldrapids", threads=2, plan=form)["ir"]
            assert ("b_kmajor" in ir) == want, (b.strides, form)
    # (AMX plans that copy B in whole 1 KiB tiles read it with 2-D tile loads: no test there)
    bf = np.ones((64, 1024), BF16)
    ir = coopjit.cross_compile(bf, np.asfortranarray(np.ones((1024, 2048), BF16)), cpu="sapphirerapids", threads=2,
                               plan={"amx": 1, "amx_feed": 2, "inline_b": 0})["ir"]
    assert "b_kmajor" not in ir


@pytest.mark.parametrize("cpu,threads", [("emeraldrapids", 16), ("emeraldrapids", 2), ("znver5", 2), ("znver4", 2),
                                         ("znver5", 16)])
def test_skinny_products_of_a_column_major_b_are_packed(cpu, threads):
    # The unpacked k_outer walk gathered a column-major B's lanes for every row tile (16-core host:
    # 64x4096x4096 f32 0.15x torch): 2+ row tiles up to 64 rows are packed on every CPU.
    def cfg(m, n, k, order="F", dtype=np.float32):
        b = np.ones((k, n), dtype, order=order)
        return coopjit.cross_compile(np.ones((m, k), dtype), b, cpu=cpu, threads=threads, code=False)["config"]
    for m, n, k in [(64, 4096, 4096), (16, 1024, 1024), (8, 4096, 4096), (32, 2048, 1024), (48, 1000, 1500)]:
        for dtype in (np.float32, np.float64):
            c = cfg(m, n, k, dtype=dtype)
            assert c["pack"] and c["order"] == "m_inner" and m > int(c["mr"]), (m, n, k, dtype, c)
    # one row tile, a short K and a row-major B keep the k_outer walk (row-major B only on the CPUs
    # whose own rules do not pack it: not the few-core Xeons)
    c = cfg(5, 4096, 4096)
    assert c["order"] == "k_outer" and not c["pack"], c
    # (K below the k_outer walk's 512: the tile walk's products, packed too since session 35:
    # test_gemm_nt_pack_s35; 2-core guest, 2 threads: 511 us unpacked, 171 packed, torch 176)
    c = cfg(16, 4096, 128)
    assert c["pack"] and c["order"] == "m_inner", c
    if not (cpu == "emeraldrapids" and threads < 8):
        c = cfg(16, 1024, 1024, order="C")
        assert c["order"] == "k_outer" and not c["pack"], c
    # a walk asked for by name stays
    b = np.ones((4096, 4096), np.float32, order="F")
    c = coopjit.cross_compile(np.ones((64, 4096), np.float32), b, cpu=cpu, threads=threads, plan={"order": "k_outer"},
                              code=False)["config"]
    assert c["order"] == "k_outer" and not c["pack"], c
