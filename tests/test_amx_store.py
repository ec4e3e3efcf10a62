"""Plan amx_store (AMX plans, default on): a full tile of the blocked nest's last K tile goes from
the tiles straight to C when alpha is 1 (f32 / i32 C by tilestored at C's row stride, bf16 C
through vcvtneps2bf16), other tiles and other epilogues as before. Against NumPy in float64 /
int64, and bit for bit against amx_store 0 (the old epilogue); emulated tiles here, hardware
tiles where the CPU has them (else skipped, saying so)."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16
FEATURES = coopjit.cpu_info()["features"]
WIDE = coopjit.cpu_info()["vector_bytes"] >= 64
needs_avx512 = pytest.mark.skipif(not WIDE, reason="the AMX emulation needs AVX-512 vectors; this CPU (or "
                                  "COOPJIT_CPU_LEVEL) gives 32-byte ones")


def tiles_or_skip(tiles, feature):
    if tiles == "yes" and not (FEATURES.get("amx-tile") and FEATURES.get(feature)):
        pytest.skip(f"this CPU (or process) has no AMX tiles ({feature}): the tile instructions cannot run")


def operands(rng, dtype, m, n, k):
    if dtype == BF16:
        return rng.uniform(-2, 2, (m, k)).astype(BF16), rng.uniform(-2, 2, (k, n)).astype(BF16)
    info = np.iinfo(dtype)
    return (rng.integers(info.min, info.max + 1, (m, k)).astype(dtype),
            rng.integers(np.iinfo(np.int8).min, np.iinfo(np.int8).max + 1, (k, n)).astype(np.int8))


def f32_bound(a, b):
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return (a.shape[1] + 2) * np.finfo(np.float32).eps * mag


def config(a, b, out, plan):
    c = np.empty((a.shape[0], b.shape[1]), out)
    types = coopjit._arrays.gemm_types(a.dtype, b.dtype, np.dtype(out))[0]
    return coopjit._plan.from_core(coopjit._core.gemm_plan(a, b, c, False, types, coopjit._gemm._overrides(plan)))


# (m, n, k, plan): edge tiles along M and N, one and several K tiles, the row-block and the
# column-panel orders, one and several workers, A read where it is.
CASES = [(64, 64, 64, {"threads": 1}),
         (200, 150, 300, {"threads": 3, "kt": 128}),
         (256, 320, 512, {"threads": 2, "kt": 128, "nc_tiles": 2}),
         (96, 64, 256, {"threads": 1, "direct_a": 1})]


@pytest.mark.parametrize("tiles", ["emulated", "yes"])
@pytest.mark.parametrize("dtype", [BF16, np.int8, np.uint8])
@pytest.mark.parametrize("m,n,k,plan", CASES)
@needs_avx512
def test_tile_store_gives_the_reference_and_the_old_epilogue(rng, tiles, dtype, m, n, k, plan):
    tiles_or_skip(tiles, "amx-bf16" if dtype == BF16 else "amx-int8")
    a, b = operands(rng, dtype, m, n, k)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    outs = [np.float32, BF16] if dtype == BF16 else [np.int32]
    for out in outs:
        got = {}
        for store in (1, 0):
            full = {"amx": tiles, "amx_store": store, **plan}
            cfg = config(a, b, out, full)
            assert (cfg["amx"], cfg["amx_store"], cfg["pack"]) == (tiles, bool(store), True), cfg
            kw = {"out": np.empty((m, n), np.float32)} if out == np.float32 else {}
            got[store] = coopjit.matmul(a, b, plan=full, **kw)
            assert got[store].dtype == out
        if out == np.int32:
            np.testing.assert_array_equal(got[1], ref.astype(np.int64))
        elif out == np.float32:
            assert np.all(np.abs(got[1] - ref) <= f32_bound(a, b))
        else:  # the f32 sum rounded once to bf16, to nearest even (as ml_dtypes rounds it)
            assert np.all(np.abs(got[1].astype(np.float64) - ref) <= f32_bound(a, b) + np.abs(ref) * 2.0**-8)
            f32 = coopjit.matmul(a, b, plan={"amx": tiles, **plan}, out=np.empty((m, n), np.float32))
            np.testing.assert_array_equal(got[1].view(np.uint16), f32.astype(BF16).view(np.uint16))
        bits = np.uint16 if out == BF16 else np.uint32
        np.testing.assert_array_equal(got[1].view(bits), got[0].view(bits))


@pytest.mark.parametrize("tiles", ["emulated", "yes"])
@needs_avx512
def test_tile_store_leaves_alpha_beta_epilogues_and_strided_c(rng, tiles):
    # alpha != 1, beta, a fused bias, a C with a column stride: the general epilogue.
    tiles_or_skip(tiles, "amx-bf16")
    m, n, k = 96, 160, 256
    plan = {"amx": tiles, "threads": 2, "kt": 128}
    a, b = operands(rng, BF16, m, n, k)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = f32_bound(a, b)
    c = rng.standard_normal((m, n)).astype(np.float32)
    c0 = c.astype(np.float64)
    coopjit.gemm(a, b, c, alpha=1.5, beta=-0.5, plan=plan)
    assert np.all(np.abs(c - (1.5 * ref - 0.5 * c0)) <= 1.5 * bound + 1e-6 * np.abs(c0))
    c = np.zeros((m, n), np.float32)
    coopjit.gemm(a, b, c, alpha=-2.0, plan=plan)
    assert np.all(np.abs(c + 2.0 * ref) <= 2.0 * bound)
    bias = rng.standard_normal(n).astype(np.float32)
    got = coopjit.matmul(a, b, plan=plan, bias=bias, out=np.empty((m, n), np.float32))
    assert np.all(np.abs(got - (ref + bias)) <= bound + 1e-6 * np.abs(bias))
    wide = np.zeros((m, 2 * n), np.float32)
    coopjit.matmul(a, b, out=wide[:, ::2], plan=plan)
    assert np.all(np.abs(wide[:, ::2] - ref) <= bound) and not wide[:, 1::2].any()
    ai, bi = operands(rng, np.int8, m, n, k)
    ci = np.zeros((m, n), np.int32)
    coopjit.gemm(ai, bi, ci, alpha=3.0, plan={**plan, "amx": tiles})
    np.testing.assert_array_equal(ci, 3 * (ai.astype(np.int64) @ bi.astype(np.int64)))


@pytest.mark.parametrize("tiles", ["emulated", "yes"])
@needs_avx512
def test_tile_store_rounds_special_values_as_the_old_epilogue(rng, tiles):
    # Infinities, NaN and sums past bf16's range: the same bf16 bits either way.
    tiles_or_skip(tiles, "amx-bf16")
    m = n = k = 64
    a, b = operands(rng, BF16, m, n, k)
    a[3, 5] = np.inf
    a[7, 9] = np.nan
    a[10, :] = BF16(3.0e38)
    b[:, 4] = BF16(-2.5e38)
    got = {s: coopjit.matmul(a, b, plan={"amx": tiles, "amx_store": s, "threads": 1}) for s in (1, 0)}
    assert got[1].dtype == BF16
    np.testing.assert_array_equal(got[1].view(np.uint16), got[0].view(np.uint16))
    f32 = coopjit.matmul(a, b, plan={"amx": tiles, "threads": 1}, out=np.empty((m, n), np.float32))
    np.testing.assert_array_equal(got[1].astype(np.float32), f32.astype(BF16).astype(np.float32))  # (NaN == NaN here)
    assert np.isinf(got[1][10].astype(np.float32)).any() and np.isnan(got[1][7].astype(np.float32)).all()


def test_tile_store_is_a_plan_field_in_the_key_and_the_asm():
    a = np.zeros((512, 512), BF16)
    on = coopjit.cross_compile(a, a, cpu="sapphirerapids")
    off = coopjit.cross_compile(a, a, cpu="sapphirerapids", plan={"amx_store": 0})
    assert (on["config"]["amx"], on["config"]["amx_store"], off["config"]["amx_store"]) == ("yes", True, False)
    assert on["key"] != off["key"]
    # bf16 C: the tiles' rows converted by vcvtneps2bf16 (AVX512-BF16) on the tile path only
    assert "vcvtneps2bf16" in on["asm"] and "vcvtneps2bf16" not in off["asm"]
    i8 = np.zeros((512, 512), np.int8)
    on8 = coopjit.cross_compile(i8, i8, cpu="sapphirerapids")["asm"]
    off8 = coopjit.cross_compile(i8, i8, cpu="sapphirerapids", plan={"amx_store": 0})["asm"]
    assert on8.count("tilestored") > off8.count("tilestored")


def test_tile_store_takes_zero_or_one(rng):
    a = np.zeros((64, 64), BF16)
    with pytest.raises(ValueError, match=r"plan amx_store must be True or False \(or 0 / 1\), got 2"):
        coopjit.matmul(a, a, plan={"amx": "emulated", "amx_store": 2})
