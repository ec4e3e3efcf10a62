"""VNNI panels of A packed 64 bytes of each row a step (session 29): full mr-row panels of a
row-major A load 64 bytes of each row, interleave the rows' 32-bit channels in registers and
store the panel's block whole (before: a store a 4-byte channel); the rest of K (below a multiple
of 64 bytes), the last, partial row panel and A with other strides take the kb steps as before.
int8 x int8 (A + 128 in the panels, minus 128 x B's column sums), uint8 x int8 and bf16 products
against NumPy in int64 (exact) / float64, across K around multiples of 64 bytes, M around
multiples of mr, named kb / mr / kt and 1 / 2 workers (own_a)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16
# K: below one wide step, exactly one, one plus a tail of each kind, several; M: partial panels
SHAPES = [(6, 64, 64), (7, 64, 64), (13, 70, 63), (12, 64, 65), (48, 80, 128), (50, 64, 129), (97, 33, 200),
          (128, 128, 256), (130, 96, 260), (64, 64, 704), (257, 65, 320)]
PLANS = [{}, {"kb": 8}, {"kb": 16}, {"mr": 4, "nr": 32}, {"mr": 8, "nr": 48}, {"kt": 128}, {"inline_b": 1}]


def _ints(rng, shape, dt):
    lo, hi = (-128, 128) if dt == np.int8 else (0, 256)
    return rng.integers(lo, hi, shape).astype(dt)


def _run(a, b, plan, threads):
    if plan.get("mr") == 8 and not coopjit.cpu_info()["features"].get("avx512f"):
        pytest.skip("the 8 x 48 tile needs AVX-512's 32 registers (this CPU: no AVX-512)")
    old = coopjit.get_num_threads()
    coopjit.set_num_threads(threads)
    try:
        # amx=0: the VNNI panels are what these tests check; on a CPU with AMX tiles the planner
        # would take the tiles instead, whose mr / kb the named plans contradict (refused)
        return coopjit.matmul(a, b, plan=dict(plan, pack=1, amx=0))
    finally:
        coopjit.set_num_threads(old)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("kinds", [(np.int8, np.int8), (np.uint8, np.int8)])
def test_quad_panels_exact(m, n, k, kinds, plan, threads, rng):
    a, b = _ints(rng, (m, k), kinds[0]), _ints(rng, (k, n), kinds[1])
    a0, b0 = a.copy(), b.copy()
    got = _run(a, b, plan, threads)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (50, 64, 129), (130, 96, 260)])
def test_quad_panels_extremes(m, n, k, threads):
    # every byte at its limit: the + 128 offset and the column sums at their ends
    a, b = np.full((m, k), -128, np.int8), np.full((k, n), -128, np.int8)
    np.testing.assert_array_equal(_run(a, b, {}, threads), np.full((m, n), 128 * 128 * k, np.int64))
    a[:, 1::3] = 127
    np.testing.assert_array_equal(_run(a, b, {}, threads), a.astype(np.int64) @ b.astype(np.int64))
    ua = np.full((m, k), 255, np.uint8)
    np.testing.assert_array_equal(_run(ua, b, {}, threads), np.full((m, n), -255 * 128 * k, np.int64))


@pytest.mark.parametrize("layout", ["F", "rowstride", "colstride", "offset"])
@pytest.mark.parametrize("m,n,k", [(50, 64, 129), (130, 96, 260)])
def test_quad_panels_other_layouts(m, n, k, layout, rng):
    # A not row-major with unit stride (kb steps), or row-major at an odd offset (wide steps, unaligned)
    a = _ints(rng, (m, k), np.int8)
    b = _ints(rng, (k, n), np.int8)
    if layout == "F":
        av = np.asfortranarray(a)
    elif layout == "rowstride":
        big = np.zeros((2 * m, k + 5), np.int8)
        big[::2, 3:k + 3] = a
        av = big[::2, 3:k + 3]
    elif layout == "colstride":
        big = np.zeros((m, 2 * k), np.int8)
        big[:, ::2] = a
        av = big[:, ::2]
    else:
        buf = np.zeros(m * k + 1, np.int8)
        av = buf[1:].reshape(m, k)
        av[...] = a
    np.testing.assert_array_equal(_run(av, b, {}, 1), a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("plan", [{}, {"kb": 8}, {"mr": 8, "nr": 48}])
@pytest.mark.parametrize("m,n,k", [(7, 64, 64), (13, 70, 31), (48, 80, 96), (50, 64, 129), (130, 96, 260), (513, 129, 700)])
def test_pair_panels_bf16(m, n, k, plan, threads, rng):
    a = rng.standard_normal((m, k), dtype=np.float32).astype(BF16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(BF16)
    got = np.asarray(_run(a, b, plan, threads), np.float64)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # f32 sums of exact bf16 products (k eps of the absolute sums), then the result rounded to bf16
    assert got.shape == (m, n)
    tol = 4 * k * np.finfo(np.float32).eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert np.all(np.abs(got - ref) <= tol + np.abs(ref) * 2.0 ** -8)


@pytest.mark.parametrize("cpu", ["znver4", "znver5", "skylake", "alderlake", "sapphirerapids"])
@pytest.mark.parametrize("kind", ["i8", "bf16"])
def test_cross_compiles(cpu, kind):
    # other CPUs' code (AVX-512, AVX2 with AVX-VNNI, AMX, none) still compiles for these panels
    dt = np.int8 if kind == "i8" else BF16
    a, b = np.zeros((130, 260), dt), np.zeros((260, 96), dt)
    r = coopjit.cross_compile(a, b, cpu=cpu, threads=1, plan={"pack": 1})
    assert r["config"]["pack"] and r["asm"]
