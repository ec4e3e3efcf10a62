"""Plan field cycles (session 27, issue 14): the kernel's own time-stamp counter at its phases'
boundaries (packing A, packing B, the packing barrier, the AMX nest's first row panel of a block
for each column panel, the other tiles, their stores), added to per-worker counters that
coopjit._core._gemm_cycles() returns. What is checked: results equal NumPy's (float64 / int64)
and the plan without the counters bit for bit; every worker index that ran counts its calls; the
tiles' counts are the nest's; each phase's ticks are within the kernel's and each kernel's within
its call's (invariants of the counter, not timings); the plan's key, its refusals, and that a
kernel without the field reads no counter.

Here (no AMX): the emulated tiles (plan amx="emulated", AVX-512 vectors). The same checks run
with the real tiles where the CPU has AMX (the 16-core Emerald Rapids host) and skip elsewhere."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import amx_modes
from coopjit import _core

BF16 = ml_dtypes.bfloat16
FEATURES = coopjit.cpu_info()["features"]
HOST_AMX = bool(FEATURES.get("amx-tile")) and bool(FEATURES.get("amx-bf16")) and bool(FEATURES.get("amx-int8"))
WIDE = coopjit.cpu_info()["vector_bytes"] >= 64
MODES = amx_modes()
F = {name: i for i, name in enumerate(["kernel", "calls", "pack_a", "pack_b", "barrier", "tiles_first", "tiles_first_n",
                                       "tiles_other", "tiles_other_n", "tile_stores"])}


def operands(rng, dtype, m, n, k):
    if dtype == "bf16":
        return (rng.uniform(-2, 2, (m, k)).astype(BF16), rng.uniform(-2, 2, (k, n)).astype(BF16))
    return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)


def check_against_numpy(a, b, c):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if a.dtype == np.int8:
        np.testing.assert_array_equal(c, ref.astype(np.int64))
    else:
        bound = (a.shape[1] + 2) * np.finfo(np.float32).eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
        assert np.all(np.abs(c.astype(np.float64) - ref) <= bound + np.abs(ref) * 2.0**-8)  # (+ bf16 C's rounding)


def counters(d):
    return np.array(d["slots"], dtype=np.int64).reshape(-1, 16)


# (dtype, m, n, k, plan): one worker; several row blocks (mc_tiles 2) and K tiles; ragged edges;
# two and three workers (the packing barrier); shares (a packing launch, then workers x shares).
CASES = [
    ("bf16", 200, 96, 300, {"threads": 1, "mc_tiles": 2, "kt": 128}),
    ("int8", 160, 64, 520, {"threads": 1, "mc_tiles": 2, "kt": 256}),
    ("bf16", 256, 160, 200, {"threads": 2}),
    ("int8", 300, 130, 256, {"threads": 3, "kt": 128}),
    ("bf16", 512, 128, 128, {"threads": 2, "shares": 2, "mc_tiles": 2}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype,m,n,k,plan", CASES)
def test_counters_filled_and_results_unchanged(mode, dtype, m, n, k, plan):
    rng = np.random.default_rng(27)  # seed: this session
    a, b = operands(rng, dtype, m, n, k)
    base = {"amx": mode, **plan}
    plain = coopjit.matmul(a, b, plan=base)
    _core._gemm_cycles(True)
    c = coopjit.matmul(a, b, plan={**base, "cycles": 1})
    d = _core._gemm_cycles(True)
    check_against_numpy(a, b, c)
    np.testing.assert_array_equal(c, plain)
    cfg = coopjit.compile_gemm(m, n, k, a.dtype, plan={**base, "cycles": 1}).config
    assert cfg["cycles"] is True and cfg["amx"] == mode
    assert d["calls"] == 1 and d["call_ticks"] > 0
    assert d["fields"][:10] == list(F)
    cnt = counters(d)
    threads, shares = cfg["threads"], cfg["shares"]
    tiles_m, tiles_n, tiles_k = -(-m // 32), -(-n // 32), -(-k // cfg["kt"])
    # Each worker index ran once (a packing launch and a launch of shares: indices below the
    # threads twice), none past them.
    used = np.nonzero(cnt[:, F["calls"]])[0]
    if shares > 1 and threads > 1:
        expect = [2] * threads + [1] * (threads * shares - threads)
    else:
        expect = [1] * threads
    assert cnt[:len(expect), F["calls"]].tolist() == expect and len(used) == len(expect)
    # Every tile of every K tile counted once, first or other.
    assert int(cnt[:, F["tiles_first_n"]].sum() + cnt[:, F["tiles_other_n"]].sum()) == tiles_m * tiles_n * tiles_k
    if threads == 1:  # blocks of mc_tiles row panels, each once per column panel and K tile
        assert int(cnt[0, F["tiles_first_n"]]) == -(-tiles_m // cfg["mc_tiles"]) * tiles_n * tiles_k
    # Phases within their kernel call, kernels within the call.
    parts = cnt[:, [F[x] for x in ("pack_a", "pack_b", "barrier", "tiles_first", "tiles_other", "tile_stores")]]
    assert np.all(parts >= 0)
    assert np.all(parts.sum(axis=1) <= cnt[:, F["kernel"]])
    assert np.all(cnt[used, F["kernel"]] > 0) and np.all(cnt[:, F["kernel"]] <= d["call_ticks"])
    assert cnt[:, F["tiles_other"]].sum() > 0 and cnt[:, F["pack_a"]].sum() > 0 and cnt[:, F["pack_b"]].sum() > 0
    # Read and reset: nothing left.
    assert _core._gemm_cycles(True)["calls"] == 0


@pytest.mark.parametrize("mode", MODES)
def test_counters_add_up_over_calls_until_reset(mode):
    rng = np.random.default_rng(2701)
    a, b = operands(rng, "int8", 96, 64, 128)
    plan = {"amx": mode, "threads": 1, "pack": 1, "cycles": 1}
    _core._gemm_cycles(True)
    for _ in range(3):
        coopjit.matmul(a, b, plan=plan)
    d = _core._gemm_cycles(False)
    assert d["calls"] == 3 and counters(d)[0, F["calls"]] == 3
    tiles = int(counters(d)[0, F["tiles_first_n"]] + counters(d)[0, F["tiles_other_n"]])
    assert tiles == 3 * (3 * 2 * 1)  # calls x tiles_m x tiles_n x tiles_k
    assert _core._gemm_cycles(True)["calls"] == 3 and _core._gemm_cycles(True)["calls"] == 0
    # Calls of a plan without the field add nothing.
    coopjit.matmul(a, b, plan={"amx": mode, "threads": 1, "pack": 1})
    assert _core._gemm_cycles(True)["calls"] == 0


def test_plan_field_key_and_refusals():
    a = np.ones((64, 64), np.float32)
    k0 = coopjit.compile_gemm(64, 64, 64, np.float32, plan={"pack": 1})
    k1 = coopjit.compile_gemm(64, 64, 64, np.float32, plan={"pack": 1, "cycles": 1})
    assert k0.config["cycles"] is False and k1.config["cycles"] is True
    np.testing.assert_array_equal(coopjit.matmul(a, a, plan={"pack": 1, "cycles": 1}), a @ a)
    _core._gemm_cycles(True)
    with pytest.raises(ValueError, match=r"cycles=1 needs packed panels \(pack=1\)"):
        coopjit.matmul(a, a, plan={"pack": 0, "cycles": 1})
    with pytest.raises(ValueError, match=r"plan cycles must be True or False \(or 0 / 1\), got 2"):
        coopjit.matmul(a, a, plan={"pack": 1, "cycles": 2})


def test_cross_compiled_kernel_reads_the_counter_only_with_the_field():
    x = np.zeros((512, 512), BF16)
    plain = coopjit.cross_compile(x, x, cpu="sapphirerapids")
    timed = coopjit.cross_compile(x, x, cpu="sapphirerapids", plan={"cycles": 1})
    assert plain["config"]["amx"] == "yes" and timed["config"]["amx"] == "yes"
    assert "rdtsc" not in plain["asm"] and "rdtsc" in timed["asm"]
    assert plain["key"] + ".cycles" == timed["key"]
    # The tile code is the same: as many tile dot products and tile stores.
    for ins in ("tdpbf16ps", "tilestored", "tileloadd"):
        assert plain["asm"].count(ins) == timed["asm"].count(ins), ins


def test_tsc_advances():
    t0 = _core._tsc()
    coopjit.matmul(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
    assert _core._tsc() > t0


# Plan field c_prefetch: the lines a tile will write (C's at the last K tile, the scratch's partial
# sums before it) prefetched for writing during its K loop. A hint: the results are the plan's
# without it, bit for bit, and NumPy's; ragged edges (the prefetched rows and columns clamped into
# C), several K tiles, 16-bit C, strided C, several workers and shares.
CPF_CASES = [
    ("bf16", 200, 96, 300, {"threads": 1, "mc_tiles": 2, "kt": 128}, None),
    ("bf16", 130, 70, 520, {"threads": 2, "kt": 256}, "bf16"),
    ("int8", 161, 33, 520, {"threads": 1, "kt": 256}, None),
    ("int8", 300, 130, 256, {"threads": 3, "kt": 128}, None),
    ("bf16", 512, 128, 128, {"threads": 2, "shares": 2, "mc_tiles": 2}, "strided"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype,m,n,k,plan,out", CPF_CASES)
def test_c_prefetch_results_unchanged(mode, dtype, m, n, k, plan, out):
    rng = np.random.default_rng(2702)
    a, b = operands(rng, dtype, m, n, k)

    def run(p):
        if out == "bf16":
            return coopjit.matmul(a, b, out=np.empty((m, n), BF16), plan=p)
        if out == "strided":  # every other column of a wider float32 array
            wide = np.full((m, 2 * n), 7.0, np.float32)
            coopjit.matmul(a, b, out=wide[:, ::2], plan=p)
            assert np.all(wide[:, 1::2] == 7.0)  # nothing written between C's columns
            return wide[:, ::2]
        return coopjit.matmul(a, b, plan=p)

    base = {"amx": mode, **plan}
    c0 = run(base)
    c1 = run({**base, "c_prefetch": 1})
    np.testing.assert_array_equal(np.ascontiguousarray(c1).view(np.uint8), np.ascontiguousarray(c0).view(np.uint8))
    check_against_numpy(a, b, np.asarray(c1).astype(np.float64) if out == "bf16" else c1)
    assert coopjit.compile_gemm(m, n, k, a.dtype, plan={**base, "c_prefetch": 1}).config["c_prefetch"] is True


def test_c_prefetch_code_and_refusals():
    x = np.zeros((2048, 2048), BF16)
    plain = coopjit.cross_compile(x, x, cpu="sapphirerapids")
    pf = coopjit.cross_compile(x, x, cpu="sapphirerapids", plan={"c_prefetch": 1})
    assert pf["config"]["c_prefetch"] is True and pf["key"] == plain["key"] + ".cpf"
    assert "prefetchw" not in plain["asm"] and "prefetchw" in pf["asm"]
    for ins in ("tdpbf16ps", "tilestored", "tileloadd", "ldtilecfg"):
        assert plain["asm"].count(ins) == pf["asm"].count(ins), ins
    f = np.ones((64, 64), np.float32)
    with pytest.raises(ValueError, match=r"c_prefetch=1 is for AMX plans \(this plan has amx=0\)"):
        coopjit.matmul(f, f, plan={"pack": 1, "c_prefetch": 1})
    with pytest.raises(ValueError, match=r"plan c_prefetch must be True or False \(or 0 / 1\), got 3"):
        coopjit.matmul(f, f, plan={"pack": 1, "c_prefetch": 3})


@pytest.mark.parametrize("dtype,size,threads,want", [
    ("int8", 4096, 16, True), ("int8", 8192, 16, True), ("int8", 4096, 1, False), ("int8", 2048, 16, False),
    ("bf16", 4096, 16, False), ("bf16", 8192, 16, False)])
def test_planner_takes_c_prefetch_for_large_8bit_products_on_many_cores(dtype, size, threads, want):
    # The planner's rule (measured on the 16-core Emerald Rapids host: int8 4096^3 on 16 threads
    # 1.09x, outside the rounds' spread; bf16 inside it): 8-bit AMX products of 16M+ outputs on 8+ cores.
    x = np.zeros((size, size), np.int8 if dtype == "int8" else BF16)
    r = coopjit.cross_compile(x, x, cpu="sapphirerapids", threads=threads)
    assert r["config"]["amx"] == "yes" and r["config"]["c_prefetch"] is want
    assert r["key"].endswith(".cpf") is want and ("prefetchw" in r["asm"]) is want
    if want:  # plan c_prefetch=0 turns it off
        off = coopjit.cross_compile(x, x, cpu="sapphirerapids", threads=threads, plan={"c_prefetch": 0})
        assert off["config"]["c_prefetch"] is False and "prefetchw" not in off["asm"]
