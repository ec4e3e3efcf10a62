"""VNNI packing and the CPU's dot-product instructions: bfloat16 pairs through AVX512-BF16
(vdpbf16ps) and 8-bit quads through AVX512-VNNI (vpdpbusd; s8 x s8 as (A + 128) B minus 128
times B's column sums), in packed panels, on the fly, and from coopjit.prepack; against NumPy in
float64 / int64."""
import re

import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16
FEATURES = coopjit.cpu_info()["features"]
HAS_BF16 = bool(FEATURES.get("avx512bf16"))
# vpdpbusd: AVX512-VNNI on 512-bit vectors, AVX-VNNI (its VEX form) on 256-bit ones, as under
# COOPJIT_CPU_LEVEL=avx2 on a CPU that has both
HAS_VNNI = bool((FEATURES.get("avx512vnni") and FEATURES.get("avx512bw")) or FEATURES.get("avxvnni"))
INT8_PAIRS = [(np.uint8, np.int8), (np.int8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)]
NO_AMX = {"amx": "no"}  # these tests are about the AVX-512 dot path (AMX CPUs take tiles by default)


def ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def expected_vnni(ta, tb):
    """The group the plan must choose for a packed product of these (caller's) types here."""
    if ta == BF16:
        return 2 if HAS_BF16 else 1
    if ta == np.uint8 and tb == np.uint8:
        return 1  # vpdpbusd multiplies unsigned by signed bytes
    return 4 if HAS_VNNI else 1


def bf16_bound(a, b):
    """float32 accumulation of the exact bf16 products: (K + 2) eps32 of the magnitudes."""
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return (a.shape[1] + 2) * np.finfo(np.float32).eps * mag


@pytest.mark.parametrize("m,n,k", [(320, 290, 300), (257, 520, 515)])
def test_bf16_packed_products(rng, m, n, k):
    a = rng.uniform(-2, 2, (m, k)).astype(BF16)
    b = rng.uniform(-2, 2, (k, n)).astype(BF16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    kern = coopjit.compile_gemm(m, n, k, BF16, out_dtype=np.float32, plan=NO_AMX)
    assert kern.config["pack"] is True
    assert kern.config["vnni"] == expected_vnni(BF16, BF16)
    c = np.empty((m, n), np.float32)
    kern(a, b, c)
    assert np.all(np.abs(c - ref) <= bf16_bound(a, b))
    # bfloat16 output: the float32 result of the same plan rounded once (the default plan takes
    # AMX tiles where the CPU has them: another summation order, so only the same plan is
    # compared bit for bit)
    np.testing.assert_array_equal(coopjit.matmul(a, b, plan=NO_AMX), c.astype(BF16))


@pytest.mark.parametrize("ta,tb", INT8_PAIRS)
@pytest.mark.parametrize("m,n,k", [(320, 290, 300), (257, 520, 515)])
def test_int8_packed_products_are_exact(rng, ta, tb, m, n, k):
    a, b = ints(rng, ta, (m, k)), ints(rng, tb, (k, n))
    # compile_gemm takes one dtype: the plan of the mixed pair comes from the core's planner.
    plan = coopjit._core.gemm_plan(a, b, np.empty((m, n), np.int32), False,
                                   coopjit._arrays.gemm_types(a.dtype, b.dtype)[0], {"amx": 0})
    assert plan["pack"] == "true" and plan["vnni"].startswith(str(expected_vnni(ta, tb))), plan["vnni"]
    np.testing.assert_array_equal(coopjit.matmul(a, b), a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("ta,tb", INT8_PAIRS[:3])
def test_int8_gemm_transposes_alpha_beta(rng, ta, tb):
    # Transposed operands plan the "col" layout: the kernel's A is the caller's B, so u8 x s8
    # becomes s8 x u8 inside, and the other way round.
    a, b = ints(rng, ta, (280, 300)), ints(rng, tb, (310, 280))
    c0 = rng.integers(-10**6, 10**6, (300, 310)).astype(np.int32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=3, beta=-2, trans_a=True, trans_b=True)
    np.testing.assert_array_equal(c, 3 * (a.T.astype(np.int64) @ b.T.astype(np.int64)) - 2 * c0)


def test_int8_extremes(rng):
    # The (A + 128) B - 128 colsum(B) identity at its edges: A + 128 = 0 and = 255, long K.
    k = 3000
    for av in (-128, 127):
        for bv in (-128, 127):
            a = np.full((260, k), av, np.int8)
            b = np.full((k, 270), bv, np.int8)
            b[::7, ::3] = -bv - 1
            np.testing.assert_array_equal(coopjit.matmul(a, b), a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("dtype", [BF16, np.int8])
def test_vnni_off_computes_the_same(rng, dtype):
    m = n = k = 320
    if dtype == BF16:
        a, b = rng.uniform(-1, 1, (m, k)).astype(BF16), rng.uniform(-1, 1, (k, n)).astype(BF16)
    else:
        a, b = ints(rng, np.int8, (m, k)), ints(rng, np.int8, (k, n))
    out = np.float32 if dtype == BF16 else np.int32
    on = coopjit.compile_gemm(m, n, k, dtype, out_dtype=out)
    off = coopjit.compile_gemm(m, n, k, dtype, out_dtype=out, plan={"vnni": 1})
    assert off.config["vnni"] == 1
    c_on, c_off = np.empty((m, n), out), np.empty((m, n), out)
    on(a, b, c_on)
    off(a, b, c_off)
    if dtype == BF16:
        assert np.all(np.abs(c_on - c_off) <= 2 * bf16_bound(a, b))
    else:
        np.testing.assert_array_equal(c_on, c_off)


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no AVX512-BF16")
def test_bf16_uses_vdpbf16ps_packed_and_on_the_fly(rng):
    packed = coopjit.compile_gemm(512, 512, 512, BF16, plan=NO_AMX).source("asm")
    assert re.search(r"\bvdpbf16ps\b", packed)
    assert not re.search(r"\bvfmadd\w*ps\b", packed)
    small = coopjit.compile_gemm(16, 64, 32, BF16)  # no packing: pairs interleaved in registers
    assert small.config["pack"] is False
    assert re.search(r"\bvdpbf16ps\b", small.source("asm"))
    a, b = rng.uniform(-1, 1, (16, 32)).astype(BF16), rng.uniform(-1, 1, (32, 64)).astype(BF16)
    c = np.empty((16, 64), np.float32)
    coopjit.compile_gemm(16, 64, 32, BF16, out_dtype=np.float32)(a, b, c)
    assert np.all(np.abs(c - a.astype(np.float64) @ b.astype(np.float64)) <= bf16_bound(a, b))


@pytest.mark.skipif(not HAS_VNNI, reason="this CPU has no VNNI (AVX512-VNNI or AVX-VNNI)")
def test_int8_uses_vpdpbusd():
    kern = coopjit.compile_gemm(512, 512, 512, np.int8, plan=NO_AMX)
    asm = kern.source("asm")
    # at least one vpdpbusd per accumulator register of the register tile (its K step unrolled)
    tile_regs = int(kern.config["mr"]) * int(kern.config["nr"]) // int(kern.config["simd_width"])
    assert len(re.findall(r"\bvpdpbusd\b", asm)) >= tile_regs


@pytest.mark.parametrize("dtype", [BF16, np.int8, np.uint8])
def test_prepacked_vnni_weights(rng, dtype):
    k, n = 300, 150
    if dtype == BF16:
        w = rng.uniform(-1, 1, (k, n)).astype(BF16)
    else:
        w = ints(rng, dtype, (k, n))
    w_before = w.copy()
    pw = coopjit.prepack(w)
    a_types = [BF16] if dtype == BF16 else ([np.uint8, np.int8] if dtype == np.int8 else [np.int8])
    for ta in a_types:
        assert pw.vnni == expected_vnni(ta, dtype)
        for m in (3, 290):
            x = rng.uniform(-1, 1, (m, k)).astype(BF16) if dtype == BF16 else ints(rng, ta, (m, k))
            got = coopjit.matmul(x, pw)
            if dtype == BF16:
                c = np.empty((m, n), np.float32)
                coopjit.matmul(x, pw, out=c)
                assert np.all(np.abs(c - x.astype(np.float64) @ w.astype(np.float64)) <= bf16_bound(x, w))
                assert got.dtype == BF16
            else:
                np.testing.assert_array_equal(got, x.astype(np.int64) @ w.astype(np.int64))
    np.testing.assert_array_equal(w, w_before)


@pytest.mark.skipif(not HAS_VNNI, reason="this CPU has no VNNI (AVX512-VNNI or AVX-VNNI)")
def test_prepacked_u8_weight_with_u8_input_runs(rng):
    """u8 x u8 has no VNNI dot instruction: the weight is repacked once for that A type (issue 12
    item 11: this was a plan error)."""
    w = rng.integers(0, 256, (64, 32)).astype(np.uint8)
    x = rng.integers(0, 256, (300, 64)).astype(np.uint8)
    pw = coopjit.prepack(w)
    got = coopjit.matmul(x, pw)
    assert got.dtype == np.int32 and np.array_equal(got, x.astype(np.int64) @ w.astype(np.int64))


def test_bad_vnni_overrides():
    with pytest.raises(ValueError, match=r"vnni=3 must be 1, 2 or 4"):
        coopjit.compile_gemm(300, 300, 300, np.float32, plan={"vnni": 3})
    with pytest.raises(ValueError, match=r"plan vnni=2 needs packed panels"):
        coopjit.compile_gemm(300, 300, 300, np.float32, plan={"vnni": 2})
    with pytest.raises(ValueError, match=r"plan vnni=4 needs packed panels"):
        coopjit.compile_gemm(8, 8, 8, np.int8, plan={"vnni": 4})


@pytest.mark.parametrize("kt", [128, 256])
def test_bf16_output_over_several_k_tiles_rounds_once(rng, kt):
    # Partial sums of the K tiles stay in float32 (the scratch) and C is rounded once at the end:
    # the same bits as the float32 output of the same plan, rounded to bfloat16.
    m, n, k = 300, 330, 700
    a, b = rng.uniform(-1, 1, (m, k)).astype(BF16), rng.uniform(-1, 1, (k, n)).astype(BF16)
    plan = {"kt": kt, "pack": True}
    c32 = np.empty((m, n), np.float32)
    coopjit.compile_gemm(m, n, k, BF16, out_dtype=np.float32, plan=plan)(a, b, c32)
    c16 = np.empty((m, n), BF16)
    kern = coopjit.compile_gemm(m, n, k, BF16, plan=plan)
    assert kern.config["kt"] == kt
    kern(a, b, c16)
    np.testing.assert_array_equal(c16.view(np.uint16), c32.astype(BF16).view(np.uint16))
    assert np.all(np.abs(c32 - a.astype(np.float64) @ b.astype(np.float64)) <= bf16_bound(a, b))


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no AVX512-BF16")
def test_bf16_subnormal_inputs_flush_on_the_dot_path_and_not_with_vnni_off():
    # vdpbf16ps treats subnormal bf16 inputs as zero (as oneDNN / PyTorch do); the plan field
    # vnni=1 (inputs widened to float32 while packing) keeps them. Documented in the README.
    m, n, k = 320, 290, 300
    a = np.full((m, k), 2.0 ** -130, np.float32).astype(BF16)  # below bf16's smallest normal, 2^-126
    b = np.full((k, n), 2.0 ** 100, np.float32).astype(BF16)
    exact = k * 2.0 ** -30
    dot, wide = np.empty((m, n), np.float32), np.empty((m, n), np.float32)
    coopjit.compile_gemm(m, n, k, BF16, out_dtype=np.float32)(a, b, dot)
    coopjit.compile_gemm(m, n, k, BF16, out_dtype=np.float32, plan={"vnni": 1})(a, b, wide)
    assert np.all(dot == 0.0)
    np.testing.assert_allclose(wide, exact, rtol=1e-6)


@pytest.mark.parametrize("cpu,lanes,i8_dot,bf16_dot", [
    ("alderlake", 8, True, False),        # AVX2 + AVX-VNNI (its list names avxvnni, not the avx2 it implies)
    ("skylake-avx512", 16, False, False),
    ("cascadelake", 16, True, False),     # AVX512-VNNI, no AVX512-BF16
    ("znver4", 16, True, True),
])
def test_cross_compiled_code_uses_the_named_cpus_instructions(cpu, lanes, i8_dot, bf16_dot):
    """cross_compile plans and lowers for the CPU it names, whatever this host has (the lowering
    read the host's features for its dot instructions; a named CPU's implied features were
    missing, so alderlake got 4-lane vectors)."""
    f = np.ones((256, 256), np.float32)
    assert coopjit.cross_compile(f, f, cpu=cpu, code=False)["config"]["simd_width"] == lanes
    i8 = np.ones((256, 256), np.int8)
    r = coopjit.cross_compile(i8, i8, cpu=cpu, plan=NO_AMX)
    assert (r["config"]["vnni"] == 4) == i8_dot
    assert bool(re.search(r"\bvpdpbusd\b", r["asm"])) == i8_dot
    bf = np.ones((256, 256), BF16)
    r = coopjit.cross_compile(bf, bf, cpu=cpu, plan=NO_AMX)
    assert (r["config"]["vnni"] == 2) == bf16_dot
    assert bool(re.search(r"\bvdpbf16ps\b", r["asm"])) == bf16_dot
