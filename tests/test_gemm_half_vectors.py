"""Half-width vectors (plan simd_width) for narrow products on Zen 4 (issue 14, session 18).

Zen 4 runs a 512-bit FMA as two 256-bit halves, so 8-lane f32 (4-lane f64) vectors do as many
FMAs a cycle as 16-lane ones while padding a narrow N less (37 columns: 40 lanes, not 48). The
planner takes them for the kernel's N of 2 to 5 half vectors where they pad less, on znver4 only;
`plan={"simd_width": w}` asks for either width on any AVX-512 CPU. Every product is checked
against NumPy in float64."""
import numpy as np
import pytest

import coopjit

AVX512 = coopjit.cpu_info()["vector_bytes"] == 64


def _operands(rng, dtype, shape_a, shape_b):
    return rng.uniform(-1, 1, shape_a).astype(dtype), rng.uniform(-1, 1, shape_b).astype(dtype)


def _check(got, want, dtype, k):
    tol = (1e-12 if dtype == np.float64 else 2e-6) * max(k, 1)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


def _cfg(m, n, k, dtype=np.float32, cpu="znver4", threads=2, trans_a=False, plan=None):
    a = np.ones((k, m), dtype).T if trans_a else np.ones((m, k), dtype)
    return coopjit.cross_compile(a, np.ones((k, n), dtype), cpu=cpu, threads=threads, plan=plan, code=False)["config"]


@pytest.mark.parametrize("n,want", [(2, 8), (5, 8), (8, 8), (9, 16), (16, 16), (17, 8), (20, 8), (24, 8), (32, 16),
                                    (33, 8), (37, 8), (40, 8), (41, 16), (48, 16), (64, 16), (100, 16)])
def test_planner_takes_half_vectors_on_zen4_where_they_pad_less(n, want):
    # f32 on znver4: 8 lanes where ceil(N / 8) * 8 < ceil(N / 16) * 16 and N fits 5 of them.
    for m, k in ((100, 250), (1000, 250), (37, 64)):
        cfg = _cfg(m, n, k)
        assert cfg["simd_width"] == want, (m, n, k, cfg)
        if want == 8:
            # one column tile of whole half vectors over all of N; the rows from the accumulator budget
            assert cfg["nr"] == -(-n // 8) * 8 and cfg["mr"] * cfg["nr"] // 8 <= 24, cfg
    # other CPUs keep their full width
    for cpu in ("znver5", "sapphirerapids", "skylake-avx512"):
        assert _cfg(100, n, 250, cpu=cpu)["simd_width"] == 16, cpu
    # f64: 4 lanes up to 20 columns
    for n64, want64 in ((3, 4), (8, 8), (9, 4), (12, 4), (16, 8), (17, 4), (20, 4), (21, 8)):
        assert _cfg(100, n64, 250, np.float64)["simd_width"] == want64, n64


def test_planner_half_vectors_left_alone_elsewhere():
    # the caller's N in "col" (A transposed: C^T = B^T A^T, the kernel's N is the caller's M)
    cfg = _cfg(37, 500, 250, trans_a=True, plan={"layout": "col"})
    assert cfg["layout"] == "col" and cfg["simd_width"] == 8 and cfg["nr"] == 40, cfg
    # matrix-vector products keep the dot walk on full vectors
    cfg = _cfg(4096, 1, 4096)
    assert cfg["order"] == "dot" and cfg["simd_width"] == 16, cfg
    # an explicit width wins, and the tile follows it
    cfg = _cfg(100, 37, 250, plan={"simd_width": 16})
    assert cfg["simd_width"] == 16 and cfg["nr"] == 48, cfg
    cfg = _cfg(100, 48, 250, plan={"simd_width": 8})
    assert cfg["simd_width"] == 8 and cfg["nr"] % 8 == 0, cfg


@pytest.mark.parametrize("bad", [4, 12, 32, 0])
def test_simd_width_override_errors(bad):
    a, b = np.ones((10, 10), np.float32), np.ones((10, 10), np.float32)
    with pytest.raises(ValueError, match=rf"simd_width={bad}.*16.*8"):
        coopjit.cross_compile(a, b, cpu="znver4", plan={"simd_width": bad})
    # a CPU with 32-byte vectors has no half width here
    with pytest.raises(ValueError, match=r"simd_width=4.*8"):
        coopjit.cross_compile(a, b, cpu="znver2", plan={"simd_width": 4})


@pytest.mark.skipif(not AVX512, reason="half-width vectors are asked for on AVX-512 CPUs")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(100, 37, 250), (1, 5, 7), (3, 2, 1), (37, 33, 64), (100, 40, 250), (13, 9, 300),
                                   (300, 20, 129), (64, 17, 64), (7, 41, 33)])
def test_half_vectors_against_numpy(rng, dtype, m, n, k):
    # Every tile at N's edge (masked half vectors, rows unchecked in the K loop), M's edge and the
    # K tail, on one worker and on all of them.
    half = 32 // np.dtype(dtype).itemsize
    a, b = _operands(rng, dtype, (m, k), (k, n))
    want = a.astype(np.float64) @ b.astype(np.float64)
    threads = coopjit.get_num_threads()
    try:
        for t in sorted({1, threads}):
            coopjit.set_num_threads(t)
            got = coopjit.matmul(a, b, plan={"simd_width": half})
            _check(got, want, dtype, k)
            # B a strided view (its rows 3 columns longer than N)
            wide = np.concatenate([b, np.ones((k, 3), dtype)], axis=1)
            got = coopjit.matmul(a, wide[:, :n], plan={"simd_width": half})
            _check(got, want, dtype, k)
    finally:
        coopjit.set_num_threads(threads)
    assert coopjit.compile_gemm(m, n, k, dtype, plan={"simd_width": half}).config["simd_width"] == half


@pytest.mark.skipif(not AVX512, reason="half-width vectors are asked for on AVX-512 CPUs")
@pytest.mark.parametrize("m,n,k", [(100, 37, 250), (9, 20, 65), (50, 5, 100)])
def test_half_vectors_epilogue_and_accumulate(rng, m, n, k):
    a, b = _operands(rng, np.float32, (m, k), (k, n))
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = coopjit.matmul(a, b, bias=bias, activation="relu", plan={"simd_width": 8})
    _check(got, np.maximum(want + bias, 0), np.float32, k)
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    c = c0.copy()
    kern = coopjit.compile_gemm(m, n, k, np.float32, accumulate=True, plan={"simd_width": 8})
    assert kern.config["simd_width"] == 8
    kern(a, b, c, beta=1.0)
    _check(c, want + c0, np.float32, k)
    # a batch of them in one launch
    a3, b3 = _operands(rng, np.float32, (3, m, k), (3, k, n))
    got = coopjit.matmul(a3, b3, plan={"simd_width": 8})
    _check(got, np.matmul(a3.astype(np.float64), b3.astype(np.float64)), np.float32, k)


def test_default_plan_on_this_cpu(rng):
    # The host's own default for the row (Zen 4: half vectors) against NumPy.
    a, b = _operands(rng, np.float32, (100, 250), (250, 37))
    cfg = coopjit.compile_gemm(100, 37, 250, np.float32).config
    znver4 = coopjit.cpu_info()["name"] == "znver4"
    half = cfg["simd_width"] * 4 < coopjit.cpu_info()["vector_bytes"]  # (an AVX2 CPU's 8 lanes are whole vectors)
    assert half == znver4, cfg
    _check(coopjit.matmul(a, b), a.astype(np.float64) @ b.astype(np.float64), np.float32, 250)


@pytest.mark.skipif(not AVX512, reason="half-width vectors are asked for on AVX-512 CPUs")
def test_half_vectors_in_other_walks_and_types(rng):
    # Asked for by plan=: the packed nest, the k_outer walk, one row of C, a matrix times a vector,
    # and unpacked bf16 / int8 inputs (widened on load); dot instructions (VNNI panels) refuse them.
    import ml_dtypes

    for m, n, k, plan in ((300, 300, 300, {"pack": 1}), (8, 1000, 2048, {"order": "k_outer"}), (1, 1000, 2048, {}),
                          (1000, 1, 700, {})):
        a, b = _operands(rng, np.float32, (m, k), (k, n))
        got = coopjit.matmul(a, b, plan=dict(plan, simd_width=8))
        _check(got, a.astype(np.float64) @ b.astype(np.float64), np.float32, k)
    bf = ml_dtypes.bfloat16
    a, b = _operands(rng, bf, (100, 250), (250, 37))
    got = coopjit.matmul(a, b, plan={"simd_width": 8})
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2 ** -7, atol=2 ** -7 * np.abs(want).max())
    a8, b8 = rng.integers(-100, 100, (64, 300)).astype(np.int8), rng.integers(-100, 100, (300, 20)).astype(np.int8)
    np.testing.assert_array_equal(coopjit.matmul(a8, b8, plan={"simd_width": 8}).astype(np.int64),
                                  a8.astype(np.int64) @ b8.astype(np.int64))
    if coopjit.cpu_info()["name"] in ("znver4", "znver5", "sapphirerapids", "emeraldrapids", "graniterapids"):
        with pytest.raises(ValueError, match=r"simd_width=8.*vnni=2"):
            coopjit.matmul(*_operands(rng, bf, (300, 300), (300, 300)), plan={"simd_width": 8, "pack": 1, "amx": "no"})
