"""The AMX tile path (plan amx): packed panels read by tileloadd, tdpbf16ps / tdpfp16ps /
tdpb[su][su]d on 16 x 64-byte tiles, accumulators kept in tile registers across the K loop.

No machine here has AMX. What runs here:
  - the emulated form (plan amx="emulated"): the same program (packing, tile shapes, addressing,
    K loop, epilogue, Stream-K) with each tile dot product computed from the SDM's pseudo-code,
    against NumPy in float64 / int64;
  - coopjit.cross_compile for Sapphire Rapids / Granite Rapids: the plan chooses tiles and the
    assembly is read (tile configuration, the instructions, a K loop of tile loads and dot products
    with no tile stores, tilerelease).
The hardware tests skip where the CPU (or the kernel) gives no AMX, and say so."""
import re

import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16
FEATURES = coopjit.cpu_info()["features"]
HOST_AMX = bool(FEATURES.get("amx-tile")) and bool(FEATURES.get("amx-bf16"))
INT8_PAIRS = [(np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)]
EMU = {"amx": "emulated"}
# The emulation runs the tile program on 16-lane vectors: AVX-512 (this CPU at COOPJIT_CPU_LEVEL
# avx2 or below, or a CPU without AVX-512, refuses the plan with a ValueError).
WIDE = coopjit.cpu_info()["vector_bytes"] >= 64
needs_avx512 = pytest.mark.skipif(not WIDE, reason="the AMX emulation needs AVX-512 vectors; this CPU (or "
                                  "COOPJIT_CPU_LEVEL) gives 32-byte ones")


def ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def floats(rng, dtype, shape):
    return rng.uniform(-2, 2, shape).astype(dtype)


def f32_bound(a, b):
    """float32 accumulation of exact 16-bit products: (K + 2) eps32 of the magnitudes."""
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return (a.shape[1] + 2) * np.finfo(np.float32).eps * mag


def check_product(rng, dtype, m, n, k, plan):
    """matmul of random m x k and k x n operands (bf16 -> float32 within f32_bound, int8 -> int32
    exact) under `plan` against float64 / int64; returns the operands."""
    if dtype == BF16:
        a, b = floats(rng, BF16, (m, k)), floats(rng, BF16, (k, n))
        c = coopjit.matmul(a, b, out=np.empty((m, n), np.float32), plan=plan)
        assert np.all(np.abs(c - a.astype(np.float64) @ b.astype(np.float64)) <= f32_bound(a, b))
    else:
        a, b = ints(rng, np.int8, (m, k)), ints(rng, np.int8, (k, n))
        np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), a.astype(np.int64) @ b.astype(np.int64))
    return a, b


def plan_of(a, b, out_dtype, plan=None):
    types = coopjit._arrays.gemm_types(a.dtype, b.dtype, np.dtype(out_dtype))[0]
    c = np.empty((a.shape[0], b.shape[1]), out_dtype)
    return coopjit._plan.from_core(coopjit._core.gemm_plan(a, b, c, False, types, coopjit._gemm._overrides(plan)))


@pytest.mark.parametrize("dtype", [BF16, np.float16])
@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (100, 70, 130), (257, 96, 300)])
@needs_avx512
def test_emulated_tiles_16bit(rng, dtype, m, n, k):
    a, b = floats(rng, dtype, (m, k)), floats(rng, dtype, (k, n))
    cfg = plan_of(a, b, np.float32, EMU)
    assert cfg["amx"] == "emulated" and cfg["vnni"] == 2
    assert (cfg["mr"], cfg["nr"], cfg["kb"]) == (32, 32, 32)
    assert ("tdpbf16ps" if dtype == BF16 else "tdpfp16ps") in cfg.notes["vnni"]
    c = coopjit.matmul(a, b, out=np.empty((m, n), np.float32), plan=EMU)
    assert np.all(np.abs(c - a.astype(np.float64) @ b.astype(np.float64)) <= f32_bound(a, b))
    # input-typed output: the float32 result rounded once
    np.testing.assert_array_equal(coopjit.matmul(a, b, plan=EMU), c.astype(dtype))


@pytest.mark.parametrize("ta,tb", INT8_PAIRS)
@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (70, 50, 100), (130, 97, 333)])
@needs_avx512
def test_emulated_tiles_int8_are_exact(rng, ta, tb, m, n, k):
    a, b = ints(rng, ta, (m, k)), ints(rng, tb, (k, n))
    cfg = plan_of(a, b, np.int32, EMU)
    assert cfg["amx"] == "emulated" and cfg["vnni"] == 4 and cfg["kb"] == 64
    name = "tdpb" + ("u" if ta == np.uint8 else "s") + ("u" if tb == np.uint8 else "s") + "d"
    assert name in cfg.notes["vnni"] and "column sums" not in cfg.notes["vnni"]  # s8 x s8 is native: no A + 128
    np.testing.assert_array_equal(coopjit.matmul(a, b, plan=EMU), a.astype(np.int64) @ b.astype(np.int64))


@needs_avx512
def test_emulated_tiles_int8_extremes():
    k = 1000
    for av in (-128, 127):
        for bv in (-128, 127):
            a = np.full((64, k), av, np.int8)
            b = np.full((k, 96), bv, np.int8)
            b[::7, ::3] = -bv - 1
            np.testing.assert_array_equal(coopjit.matmul(a, b, plan=EMU), a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("split", ["dp", "sk", "sk+dp"])
@needs_avx512
def test_emulated_tiles_stream_k(rng, split):
    # 3 x 2 output tiles of 32 x 32 over two workers and K tiles of 64: Stream-K hands partial
    # tiles through the workspace, converted from tiles to rows and back.
    m, n, k = 96, 64, 640
    a, b = floats(rng, BF16, (m, k)), floats(rng, BF16, (k, n))
    plan = {**EMU, "split": split, "threads": 2, "kt": 64}
    assert plan_of(a, b, np.float32, plan)["split"] == split
    c = coopjit.matmul(a, b, out=np.empty((m, n), np.float32), plan=plan)
    assert np.all(np.abs(c - a.astype(np.float64) @ b.astype(np.float64)) <= f32_bound(a, b))
    ai, bi = ints(rng, np.int8, (m, k)), ints(rng, np.int8, (k, n))
    np.testing.assert_array_equal(coopjit.matmul(ai, bi, plan=plan), ai.astype(np.int64) @ bi.astype(np.int64))


@needs_avx512
def test_emulated_tiles_gemm_transposes_alpha_beta(rng):
    # Transposed operands plan the "col" layout (the kernel's A is the caller's B^T).
    a, b = ints(rng, np.uint8, (200, 150)), ints(rng, np.int8, (170, 200))
    c0 = rng.integers(-10**6, 10**6, (150, 170)).astype(np.int32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=3, beta=-2, trans_a=True, trans_b=True, plan=EMU)
    np.testing.assert_array_equal(c, 3 * (a.T.astype(np.int64) @ b.T.astype(np.int64)) - 2 * c0)
    x, y = floats(rng, BF16, (130, 90)), floats(rng, BF16, (130, 70))
    cf = np.ones((90, 70), np.float32)
    coopjit.gemm(x, y, cf, alpha=0.5, beta=2.0, trans_a=True, plan=EMU)
    ref = 0.5 * (x.T.astype(np.float64) @ y.astype(np.float64)) + 2.0
    assert np.all(np.abs(cf - ref) <= f32_bound(x.T, y) + 1e-6)


@needs_avx512
def test_emulated_tiles_bf16_subnormals_count_as_zero():
    # TDPBF16PS reads subnormal bf16 inputs as zero (DAZ), as vdpbf16ps does.
    tiny = np.array(1e-39, np.float32).astype(BF16)  # a bf16 subnormal
    assert 0 < abs(float(tiny)) < np.finfo(np.float32).tiny
    a = np.full((64, 64), tiny, BF16)
    a[:, 0] = 1
    b = np.full((64, 64), 2**100, np.float32).astype(BF16)
    c = coopjit.matmul(a, b, out=np.empty((64, 64), np.float32), plan=EMU)
    np.testing.assert_array_equal(c, np.full((64, 64), 2.0**100, np.float32))


@needs_avx512
def test_amx_plan_errors(rng):
    a32 = rng.standard_normal((64, 64)).astype(np.float32)
    with pytest.raises(ValueError, match="no tile product for f32"):
        coopjit.matmul(a32, a32, plan=EMU)
    a = floats(rng, BF16, (64, 64))
    with pytest.raises(ValueError, match="uses mr=32"):
        coopjit.matmul(a, a, plan={**EMU, "mr": 8})
    with pytest.raises(ValueError, match="needs packed panels"):
        coopjit.matmul(a, a, plan={**EMU, "pack": False})
    u = ints(rng, np.uint8, (64, 64))
    with pytest.raises(ValueError, match="plan vnni=4"):  # u8 x u8 quads without tiles: no instruction reads them
        coopjit.matmul(u, u, plan={"pack": True, "vnni": 4, "amx": "no"})
    with pytest.raises(ValueError, match="plan amx must be one of"):
        coopjit.matmul(a, a, plan={"amx": "maybe"})
    if not HOST_AMX:
        with pytest.raises(ValueError, match="has no AMX tiles"):
            coopjit.matmul(a, a, plan={"amx": "yes"})
    with pytest.raises(ValueError, match="amx_feed=3 must be 0"):
        coopjit.matmul(a, a, plan={**EMU, "amx_feed": 3})
    with pytest.raises(ValueError, match="amx_feed=2 is for AMX plans"):
        coopjit.matmul(a, a, plan={"amx": "no", "amx_feed": 2})
    with pytest.raises(ValueError, match="amx_prefetch=7 must be 0"):
        coopjit.matmul(a, a, plan={**EMU, "amx_prefetch": 7})


@needs_avx512
@pytest.mark.parametrize("prefetch", [3, 4, 5])
@pytest.mark.parametrize("direct_a", [0, 1])
def test_l2_prefetch(rng, prefetch, direct_a):
    # amx_prefetch 3-5: prefetcht1 of A's and B's lines 8 / 16 K steps ahead (past a panel's end
    # too: a prefetch never faults); the products match float64, the code has the prefetches.
    m, n, k = 96, 80, 64 * 6
    plan = {"amx": "yes" if HOST_AMX else "emulated", "amx_prefetch": prefetch, "direct_a": direct_a, "threads": 2, "kt": 128}
    for dtype in (BF16, np.int8):
        a, b = check_product(rng, dtype, m, n, k, plan)
    asm = coopjit.cross_compile(a, b, cpu="sapphirerapids", plan={**plan, "amx": "yes"})["asm"]
    assert re.search(r"\bprefetcht1\b", asm) and bool(re.search(r"\bprefetcht0\b", asm)) == (prefetch != 5)


@needs_avx512
@pytest.mark.parametrize("threads,mc_tiles,kt,direct_a,prepacked", [(1, 2, 128, 0, 0), (2, 1, 256, 0, 1), (3, 3, 64, 0, 0),
                                                                     (2, 2, 128, 1, 0), (1, 8, 1024, 0, 1)])
def test_cold_panel_prefetch(rng, threads, mc_tiles, kt, direct_a, prepacked):
    # amx_prefetch 6: the next column panel's B slice and the next block's A panels into L2
    # (prefetcht1 at run-time offsets, past the panels' ends too: a prefetch never faults). Several
    # blocks of row panels, column panels a worker and K tiles (the partial sums continued), ragged
    # edges, B prepacked or packed; the products match float64 / int64.
    m, n, k = (192, 160, 256) if direct_a else (230, 200, 300)
    plan = {"amx": "yes" if HOST_AMX else "emulated", "amx_prefetch": 6, "threads": threads, "mc_tiles": mc_tiles,
            "kt": kt, "direct_a": direct_a, "grid_m": 1}
    for dtype in (BF16, np.int8):
        if prepacked:
            a = floats(rng, BF16, (m, k)) if dtype == BF16 else ints(rng, np.int8, (m, k))
            b = floats(rng, BF16, (k, n)) if dtype == BF16 else ints(rng, np.int8, (k, n))
            c = coopjit.matmul(a, coopjit.prepack(b, plan=plan), out=np.empty((m, n), np.int32 if dtype == np.int8 else np.float32),
                               plan=plan)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            if dtype == BF16:
                assert np.all(np.abs(c.astype(np.float64) - ref) <= f32_bound(a, b))
            else:
                np.testing.assert_array_equal(c, ref.astype(np.int64))
        else:
            check_product(rng, dtype, m, n, k, plan)


def test_cold_panel_prefetch_code():
    # amx_prefetch 6 adds, per K step of the blocked nest's kernels, the B part of its kernel (32
    # lines of a 2 KiB step over mc_tiles kernels: 4 with 8) and A's 32 lines (prefetcht1) to the
    # default's 32 prefetcht0 (the kernel's other tile walks, where it has any, have none: a
    # data-parallel plan's kernel is the blocked nest alone since session 35).
    a = np.zeros((512, 512), BF16)
    for pf, t1 in ((1, 0), (6, 4 + 32)):
        r = coopjit.cross_compile(a, a, cpu="sapphirerapids", plan={"amx_prefetch": pf, "mc_tiles": 8})
        assert r["config"]["amx_prefetch"] == pf
        loops = k_loops(r["asm"], "tdpbf16ps")
        assert loops
        far = []
        for body in loops:
            steps = len(tile_order(body, "tdpbf16ps")) // 8
            assert len(re.findall(r"\bprefetcht0\b", body)) == 32 * steps
            far.append(len(re.findall(r"\bprefetcht1\b", body)) / steps)
        assert t1 in far and set(far) <= {0, t1}, (pf, far)


def test_amx_is_not_chosen_without_amx(rng):
    a = floats(rng, BF16, (512, 512))
    cfg = plan_of(a, a, BF16)
    assert cfg["amx"] == ("yes" if HOST_AMX else "no")


def k_loops(asm, instruction):
    """The bodies of the innermost loops (a label, no other label, the jump back to it) that hold
    `instruction`."""
    out = []
    for m in re.finditer(r"^(\.LBB\w+):$", asm, re.M):
        back = re.compile(rf"^\s+j\w+\s+{re.escape(m.group(1))}$", re.M).search(asm, m.end())
        if not back:
            continue
        body = asm[m.end():back.start()]
        if re.search(rf"\b{instruction}\b", body) and not re.search(r"^\.LBB", body, re.M):
            out.append(body)
    return out


@pytest.mark.parametrize("ta,tb,instruction,cpu", [
    (BF16, BF16, "tdpbf16ps", "sapphirerapids"),
    (np.int8, np.int8, "tdpbssd", "sapphirerapids"),
    (np.uint8, np.int8, "tdpbusd", "sapphirerapids"),
    (np.float16, np.float16, "tdpfp16ps", "graniterapids"),
])
def test_cross_compiled_tiles(ta, tb, instruction, cpu):
    a, b = np.ones((512, 512), ta), np.ones((512, 512), tb)
    r = coopjit.cross_compile(a, b, cpu=cpu)
    assert r["config"]["amx"] == "yes" and instruction in r["config"].notes["vnni"]
    asm = r["asm"]
    for needed in ("ldtilecfg", "tileloadd", instruction, "tilezero", "tilerelease"):
        assert re.search(rf"\b{needed}\b", asm), needed
    loops = k_loops(asm, instruction)
    assert loops
    for body in loops:  # 2 A + 2 B tile loads, 4 dot products per step; the tiles stay in registers
        assert len(re.findall(rf"\b{instruction}\b", body)) % 4 == 0
        assert len(re.findall(r"\btileloadd\b", body)) == len(re.findall(rf"\b{instruction}\b", body))
        assert not re.search(r"\btilestored\b", body)
    assert not re.search(r"\bcoopjit_amx_tile_dp\b", asm)


@pytest.mark.parametrize("dtype,kt", [(BF16, 64), (BF16, 96), (np.float16, 32), (np.int8, 128), (np.uint8, 64)])
@pytest.mark.parametrize("m,n,k", [(64, 64, 256), (100, 70, 333), (33, 129, 700)])
@needs_avx512
def test_emulated_tiles_continue_partial_sums(rng, dtype, kt, m, n, k):
    """Several K tiles: the partial sums go to the scratch matrix and each K tile continues them
    in the tiles; the last applies alpha, beta, the conversion and an epilogue once."""
    plan = {**EMU, "kt": kt}
    if np.issubdtype(dtype, np.integer):
        a, b = ints(rng, dtype, (m, k)), ints(rng, np.int8, (k, n))
        ref = a.astype(np.int64) @ b.astype(np.int64)
        np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), ref)
        c0 = ints(rng, np.int32, (m, n)) // 4
        c = c0.copy()
        coopjit.gemm(a, b, c, alpha=3, beta=-2, plan=plan)
        np.testing.assert_array_equal(c, (3 * ref - 2 * c0.astype(np.int64)).astype(np.int32))
        return
    a, b = floats(rng, dtype, (m, k)), floats(rng, dtype, (k, n))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = f32_bound(a, b)
    assert plan_of(a, b, np.float32, plan)["kt"] == kt
    c = coopjit.matmul(a, b, out=np.empty((m, n), np.float32), plan=plan)
    assert np.all(np.abs(c - ref) <= bound)
    np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), c.astype(dtype))
    c0 = floats(rng, np.float32, (m, n))
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=0.5, beta=-1.5, plan=plan)
    assert np.all(np.abs(c - (0.5 * ref - 1.5 * c0.astype(np.float64))) <= 0.5 * bound + 1e-6 * np.abs(c0))
    bias = floats(rng, np.float32, (n,))
    e = coopjit.matmul(a, b, bias=bias, activation="relu", out_dtype=np.float32, plan=plan)
    assert np.all(np.abs(e - np.maximum(ref + bias, 0)) <= bound + 1e-6)


def test_cross_compiled_tiles_move_partial_sums_whole():
    """With several K tiles, a partial sum goes between the scratch matrix and the tile registers
    by tileloadd / tilestored (4 tiles of 16 x 64 bytes), with no trip through vectors: the block
    that continues a sum starts with 4 tile loads before its K loop. (The Stream-K walk's: a
    data-parallel plan's kernel has the blocked nest alone since session 35.)"""
    a = np.ones((2048, 2048), BF16)
    r = coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=2, plan={"kt": 256, "split": "sk"})
    assert r["config"]["amx"] == "yes" and r["config"]["kt"] == 256 and r["key"].endswith(".sk")
    asm = r["asm"]
    # 4 accumulator tile loads (tmm0-3) right before the 2 A + 2 B loads of a K loop
    acc = r"\s+tileloadd\s+\([^)]*\), %tmm[0-3]\n(?:[^\n]*\n){0,4}?"
    assert re.search("(?:" + acc + "){4}", asm), "no K loop continues a partial sum loaded into tiles"
    # and stores of the 4 accumulator tiles straight to memory, one after the other
    assert re.search(r"(\s+tilestored\s+%tmm[0-3], \([^)]*\)\n){4}", asm)


def test_cross_compile_for_a_cpu_without_amx():
    a = np.ones((512, 512), BF16)
    r = coopjit.cross_compile(a, a, cpu="znver4")
    assert r["config"]["amx"] == "no" and r["config"]["vnni"] == 2
    assert re.search(r"\bvdpbf16ps\b", r["asm"]) and not re.search(r"\btdp\w+\b", r["asm"])
    with pytest.raises(ValueError, match="not an x86 CPU LLVM knows"):
        coopjit.cross_compile(a, a, cpu="pentium-9000")
    with pytest.raises(ValueError, match="has no AMX tiles"):
        coopjit.cross_compile(a, a, cpu="znver4", plan={"amx": "yes"})


@needs_avx512
def test_emulated_code_calls_the_emulation(rng):
    a = floats(rng, BF16, (64, 64))
    r = coopjit.cross_compile(a, a, cpu="sapphirerapids", plan=EMU)
    assert r["config"]["amx"] == "emulated"
    assert "coopjit_amx_tile_dp" in r["asm"] and not re.search(r"\btdpbf16ps\b", r["asm"])


@pytest.mark.skipif(not HOST_AMX, reason="this CPU has no AMX (amx-tile, amx-bf16): the tile instructions cannot run")
@pytest.mark.parametrize("feed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [BF16, np.int8])
def test_hardware_tiles(rng, dtype, feed):
    m, n, k = 300, 260, 700
    for plan in ({"amx": "yes", "amx_feed": feed},
                 {"amx": "yes", "amx_feed": feed, "amx_prefetch": (0, 1, 2)[feed], "kt": 128, "threads": 3},
                 {"amx": "yes", "amx_feed": feed, "direct_a": 1, "threads": 4, "kt": 256}):
        if plan.get("direct_a"):
            m, k = 320, 704  # multiples of 32 and of 64 (a direct A reads whole tiles)
        a, b = check_product(rng, dtype, m, n, k, plan)
    w = ints(rng, np.int8, (k, n)) if dtype == np.int8 else floats(rng, BF16, (k, n))
    pw = coopjit.prepack(w, plan={"amx_feed": feed})
    ref = a.astype(np.float64) @ w.astype(np.float64)
    if dtype == BF16:
        assert np.all(np.abs(coopjit.matmul(a, pw, out=np.empty((m, n), np.float32)) - ref) <= f32_bound(a, w))
    else:
        np.testing.assert_array_equal(coopjit.matmul(a, pw), ref.astype(np.int64))


HOST_CLDEMOTE = bool(FEATURES.get("cldemote"))


def test_cross_compiled_packing_demotes_its_panels():
    """plan demote: each packed block's 64-byte lines get a CLDEMOTE after the store (A's 2 KiB
    and B's 2 KiB a K step with tiles); refused where the CPU has no CLDEMOTE or nothing is packed."""
    a = np.ones((512, 512), BF16)
    plain = coopjit.cross_compile(a, a, cpu="sapphirerapids")["asm"]
    assert not re.search(r"\bcldemote\b", plain)
    for plan in ({"demote": 1}, {"demote": 1, "amx_feed": 2}):
        r = coopjit.cross_compile(a, a, cpu="sapphirerapids", plan=plan)
        assert r["config"]["demote"] is True and r["key"].endswith(".demote")
        # the packing loops: a 32 x 32 block of A or B (2 KiB) stored, then its 32 lines demoted
        n = len(re.findall(r"\bcldemote\b", r["asm"]))
        assert n > 0 and n % 32 == 0, n
    f = np.ones((300, 300), np.float32)
    assert re.search(r"\bcldemote\b", coopjit.cross_compile(f, f, cpu="sapphirerapids", plan={"demote": 1, "pack": 1})["asm"])
    with pytest.raises(ValueError, match="needs packed panels"):
        coopjit.cross_compile(f, f, cpu="sapphirerapids", plan={"demote": 1, "pack": 0})
    if not HOST_CLDEMOTE:
        with pytest.raises(ValueError, match="has no CLDEMOTE"):
            coopjit.matmul(f, f, plan={"demote": 1, "pack": 1})


@pytest.mark.skipif(not (HOST_AMX and HOST_CLDEMOTE), reason="this CPU has no AMX tiles or no CLDEMOTE")
@pytest.mark.parametrize("dtype", [BF16, np.int8, np.float32])
def test_hardware_demoted_panels(rng, dtype):
    m, n, k = 300, 260, 700
    a = ints(rng, dtype, (m, k)) if dtype == np.int8 else floats(rng, dtype, (m, k))
    b = ints(rng, dtype, (k, n)) if dtype == np.int8 else floats(rng, dtype, (k, n))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for plan in ({"demote": 1, "pack": 1}, {"demote": 1, "pack": 1, "threads": 3, "kt": 128}):
        if dtype == np.int8:
            np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), ref.astype(np.int64))
        else:
            c = coopjit.matmul(a, b, out=np.empty((m, n), np.float32), plan=plan)
            assert np.all(np.abs(c - ref) <= f32_bound(a, b))


@pytest.mark.parametrize("dtype", [BF16, np.float16, np.int8, np.uint8])
@pytest.mark.parametrize("m,n,k,kt,threads", [(64, 64, 64, None, 1), (96, 70, 320, 128, 2), (128, 129, 256, None, 3)])
@needs_avx512
def test_emulated_tiles_read_a_direct(rng, dtype, m, n, k, kt, threads):
    """plan direct_a: the tiles read A's rows where they are (a view with a longer row stride
    here), A unpacked, against NumPy; several K tiles and workers; and its conditions."""
    plan = {**EMU, "direct_a": 1, "threads": threads, **({"kt": kt} if kt else {})}
    wide = ints(rng, dtype, (m, k + 64)) if np.issubdtype(dtype, np.integer) else floats(rng, dtype, (m, k + 64))
    a = wide[:, :k]
    if np.issubdtype(dtype, np.integer):
        b = ints(rng, np.int8, (k, n))
        assert plan_of(a, b, np.int32, plan)["direct_a"] is True
        np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), a.astype(np.int64) @ b.astype(np.int64))
        return
    b = floats(rng, dtype, (k, n))
    assert plan_of(a, b, np.float32, plan)["direct_a"] is True
    c = coopjit.matmul(a, b, out=np.empty((m, n), np.float32), plan=plan)
    assert np.all(np.abs(c - a.astype(np.float64) @ b.astype(np.float64)) <= f32_bound(a, b))
    with pytest.raises(ValueError, match="direct_a=1 needs a row-major A"):
        coopjit.matmul(a[: m - 1], b, plan=plan)  # M not a multiple of 32
    with pytest.raises(ValueError, match="direct_a=1 is for AMX plans"):
        coopjit.matmul(a, b, plan={"amx": "no", "direct_a": 1})


@pytest.mark.parametrize("feed", [1, 2])
@pytest.mark.parametrize("dtype", [BF16, np.float16, np.int8, np.uint8])
@pytest.mark.parametrize("m,n,k,kt", [(64, 64, 64, None), (100, 70, 333, 128), (33, 129, 700, 256)])
@needs_avx512
def test_emulated_tiles_fed_interleaved_and_from_whole_tiles(rng, feed, dtype, m, n, k, kt):
    """amx_feed 1 (each tile loaded before its first dot product) and 2 (also B panels as 1 KiB
    tiles: the packing, the tile addresses and prepack's layout) against NumPy: edges in M, N
    and K, several K tiles (partial sums continued), prepacked weights."""
    plan = {**EMU, "amx_feed": feed, **({"kt": kt} if kt else {})}
    assert plan_of(np.ones((m, k), dtype), np.ones((k, n), dtype), np.float32 if dtype in (BF16, np.float16)
                   else np.int32, plan)["amx_feed"] == feed
    if np.issubdtype(dtype, np.integer):
        a, b = ints(rng, dtype, (m, k)), ints(rng, np.int8, (k, n))
        ref = a.astype(np.int64) @ b.astype(np.int64)
        np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), ref)
        pw = coopjit.prepack(b, plan=plan)
        np.testing.assert_array_equal(pw.unpacked(), b)
        np.testing.assert_array_equal(coopjit.matmul(a, pw), ref)
        return
    a, b = floats(rng, dtype, (m, k)), floats(rng, dtype, (k, n))
    ref, bound = a.astype(np.float64) @ b.astype(np.float64), f32_bound(a, b)
    c = coopjit.matmul(a, b, out=np.empty((m, n), np.float32), plan=plan)
    assert np.all(np.abs(c - ref) <= bound)
    np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), c.astype(dtype))
    if dtype == BF16:
        pw = coopjit.prepack(b, plan=plan)
        assert pw.format["amx_tiles"] == (feed == 2)
        np.testing.assert_array_equal(pw.unpacked(), b)
        assert np.all(np.abs(coopjit.matmul(a, pw, out=np.empty((m, n), np.float32)) - ref) <= bound)


def tile_order(body, instruction):
    """The K loop body's tile loads (L) and dot products (T) in program order."""
    return "".join("L" if w == "tileloadd" else "T" for w in re.findall(rf"\b(tileloadd|{instruction})\b", body))


@pytest.mark.parametrize("ta,instruction", [(BF16, "tdpbf16ps"), (np.int8, "tdpbssd")])
def test_cross_compiled_tile_feeds(ta, instruction):
    """amx_feed 0: a K step's 4 tile loads, then its 4 dot products; 1 and 2: each tile loaded
    just before its first dot product, A1 before A0's last (A0 B0 T00 B1 A1 T01 T10 T11), in 4
    tile registers."""
    a = np.ones((512, 512), ta)
    for feed, want in ((0, "LLLLTTTT"), (1, "LLTLLTTT"), (2, "LLTLLTTT")):
        r = coopjit.cross_compile(a, a, cpu="sapphirerapids", plan={"amx_feed": feed})
        assert r["config"]["amx_feed"] == feed and (f".amx1f{feed}" in r["key"]) == (feed > 0)
        loops = k_loops(r["asm"], instruction)
        assert loops
        for body in loops:
            order = tile_order(body, instruction)
            assert len(order) % 8 == 0 and order == want * (len(order) // 8), (feed, order)
            loads = re.findall(r"\btileloadd\s+\([^)]*\), %(tmm\d)", body)
            assert len(set(loads[:4])) == 4, (feed, loads)  # A0, B0, B1, A1 in registers of their own
    # amx_prefetch: none, the 32 lines of A's next-but-one step (the default), and B's 32 too
    for pf, lines in ((0, 0), (1, 32), (2, 64)):
        r = coopjit.cross_compile(a, a, cpu="sapphirerapids", plan={"amx_prefetch": pf})
        assert r["config"]["amx_prefetch"] == pf
        for body in k_loops(r["asm"], instruction):
            assert len(re.findall(r"\bprefetcht0\b", body)) == lines * (len(tile_order(body, instruction)) // 8)


@pytest.mark.parametrize("dtype", [BF16, np.int8, np.uint8])
@needs_avx512
def test_emulated_tiles_with_prepacked_weights(rng, dtype):
    k, n = 300, 150
    w = floats(rng, BF16, (k, n)) if dtype == BF16 else ints(rng, dtype, (k, n))
    w_before = w.copy()
    pw = coopjit.prepack(w, plan=EMU)
    assert pw.nr == 32 and pw.kb == 64 // np.dtype(dtype).itemsize
    # u8 x u8 has no AVX-512 dot instruction but a tile product (tdpbuud): the u8 weight's u8
    # packing keeps vnni=4 for the tiles (an AMX CPU refused it as a plan error)
    a_types = [BF16] if dtype == BF16 else ([np.uint8, np.int8] if dtype == np.int8 else [np.int8, np.uint8])
    for at in a_types:
        a = floats(rng, BF16, (70, k)) if at == BF16 else ints(rng, at, (70, k))
        ref = a.astype(np.float64) @ w.astype(np.float64)
        if dtype == BF16:
            c = coopjit.matmul(a, pw, out=np.empty((70, n), np.float32))
            assert np.all(np.abs(c - ref) <= f32_bound(a, w))
        else:
            np.testing.assert_array_equal(coopjit.matmul(a, pw), ref.astype(np.int64))
    np.testing.assert_array_equal(w, w_before)
    with pytest.raises(ValueError, match="does not fit a prepacked operand"):
        coopjit.matmul(a, pw, plan={"amx": "no"})


@pytest.mark.parametrize("dtype,kb,vnni", [(BF16, 32, 2), (np.int8, 64, 4)])
def test_prepacked_weights_take_tiles_on_amx_cpus(dtype, kb, vnni):
    # A weight prepacked on an AMX CPU names its panel format (nr 32, kb, vnni) in every product's
    # plan: the planner must still choose the tiles (and not refuse kb x nr for the dot path).
    a, b = np.ones((512, 512), dtype), np.ones((512, 512), dtype)
    plan = {"layout": "row", "pack": True, "prepacked_b": True, "nr": 32, "kb": kb, "vnni": vnni}
    r = coopjit.cross_compile(a, b, cpu="sapphirerapids", plan=plan)
    assert r["config"]["amx"] == "yes" and r["config"]["prepacked_b"] is True


def test_bf16_tiles_on_many_cores_give_each_worker_whole_column_panels():
    """The planner's grid for AMX bf16 on 8 or more cores is one row of workers (grid_m 1: each
    worker's B slices stay in its L2), measured faster on 16 cores than the run-time 2-D choice;
    int8 takes it with a direct A (below), fewer cores and an explicit grid_m keep theirs."""
    a = np.ones((1024, 1024), BF16)
    i = np.ones((8192, 8192), np.int8)
    assert coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=16, code=False)["config"]["grid_m"] == 1
    assert coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=2, code=False)["config"]["grid_m"] == 0
    assert coopjit.cross_compile(i, i, cpu="sapphirerapids", threads=16, code=False)["config"]["grid_m"] == 0
    assert coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=16, plan={"grid_m": 4}, code=False)["config"]["grid_m"] == 4
    assert coopjit.cross_compile(a, a, cpu="znver4", threads=16, code=False)["config"]["grid_m"] == 0  # no tiles there


@pytest.mark.parametrize("dtype,size,threads,direct", [
    (BF16, 512, 16, True), (BF16, 2048, 16, True), (np.int8, 1024, 16, True), (np.int8, 4096, 16, True),
    (BF16, 4096, 16, False),   # rows of 8 KiB: 16 tile rows in one L1 set (measured slower)
    (np.int8, 8192, 16, False),
    (BF16, 1024, 4, False),    # few workers: measured on 16
    (BF16, 1000, 16, False),   # M, K not multiples of the tile
])
def test_many_cores_read_a_where_it_is(dtype, size, threads, direct):
    """On 8+ cores the planner has the tiles read a row-major A where it is (direct_a, one row of
    workers, each packing only its own B panels) where A's rows are at most 4 KiB and M, K fit
    whole tiles; and nowhere else."""
    a = np.ones((size, size), dtype)
    cfg = coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=threads, code=False)["config"]
    assert cfg["direct_a"] is direct
    if direct:
        assert cfg["grid_m"] == 1
    assert coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=threads, plan={"direct_a": 0}, code=False)["config"]["direct_a"] is False


@pytest.mark.parametrize("dtype,size,threads,capped", [
    (BF16, 2048, 1, True), (BF16, 4096, 4, True), (BF16, 8192, 1, True), (np.int8, 4096, 1, True),
    (np.int8, 8192, 16, True),  # B slices past 4 MiB: 48 row panels (6 MiB of A) before
    (BF16, 1024, 1, False), (BF16, 4096, 16, False), (np.int8, 2048, 1, False), (np.int8, 1024, 16, False),
])
def test_tile_plans_keep_the_block_of_a_in_l2(dtype, size, threads, capped):
    """AMX plans size the block of A (mc_tiles row panels, each mr rows of one K tile) to at most
    1 MiB, half the 2 MiB L2 per core of the AMX CPUs: the tile loads keep pace with the tile
    products only from L2 (a 6 MiB block from L3 ran at under a third of the rate). The block
    is still as large as that allows (B's slices are read once per block), and an explicit
    mc_tiles is kept."""
    # (A and B as rows of one repeated row: the plan depends on the shapes, dtypes and strides)
    a = np.lib.stride_tricks.as_strided(np.zeros(size, dtype), (size, size), (0, np.dtype(dtype).itemsize))
    cfg = coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=threads, code=False)["config"]
    assert cfg["amx"] == "yes"
    slice_bytes = cfg["mr"] * min(cfg["kt"], size) * np.dtype(dtype).itemsize
    assert cfg["mc_tiles"] * slice_bytes <= 1 << 20, cfg
    assert cfg["mc_tiles"] == 8 or (cfg["mc_tiles"] + 1) * slice_bytes > 1 << 20, cfg
    vec_rule = 48 if capped else 8  # the vector plans' rule: 48 panels once B's slices pass 4 MiB
    assert (cfg["mc_tiles"] < vec_rule) is capped, cfg
    pinned = coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=threads, plan={"mc_tiles": 48}, code=False)["config"]
    assert pinned["mc_tiles"] == 48
    # without tiles (a CPU with none) the block rule is the vector plans' own
    vec = coopjit.cross_compile(a, a, cpu="znver4", threads=threads, code=False)["config"]
    assert vec["amx"] == "no" and vec["mc_tiles"] in (8, 48)


@pytest.mark.parametrize("dtype", [BF16, np.float16, np.int8, np.uint8])
@pytest.mark.parametrize("m,n,k,kt,threads,direct_a", [
    (64, 64, 64, None, 1, 0), (64, 300, 1001, 256, 2, 0), (37, 129, 700, 128, 3, 0), (64, 256, 512, 128, 2, 1)])
@pytest.mark.parametrize("tiles", ["emulated", "yes"])
@needs_avx512
def test_tiles_pack_b_inline(rng, dtype, m, n, k, kt, threads, direct_a, tiles):
    """plan inline_b with tiles: each worker packs its column panels' slices of one K tile into
    its slot (VNNI rows, the tiles' layout) inside the blocked nest, against NumPy; edges in M, N
    and K, several K tiles and workers (data-parallel: inline_b needs it; a many-core CPU would
    choose Stream-K for these), A packed or read where it is (direct_a). The planner takes it
    for tile products of up to 64 rows (on 8+ cores: test_many_core_small.py; on fewer since
    session 33) with enough column panels for the workers, and packs B first for 128 rows.
    Hardware tiles where this CPU has them."""
    feature = "amx-int8" if np.issubdtype(dtype, np.integer) else "amx-fp16" if dtype == np.float16 else "amx-bf16"
    if tiles == "yes" and not (HOST_AMX and FEATURES.get(feature)):
        pytest.skip("this CPU (or process) has no AMX tiles")
    plan = {"amx": tiles, "inline_b": 1, "pack": 1, "split": "dp", "threads": threads, "direct_a": direct_a,
            **({"kt": kt} if kt else {})}
    out = np.int32 if np.issubdtype(dtype, np.integer) else np.float32
    if np.issubdtype(dtype, np.integer):
        a, b = ints(rng, dtype, (m, k)), ints(rng, np.int8, (k, n))
        cfg = plan_of(a, b, out, plan)
        np.testing.assert_array_equal(coopjit.matmul(a, b, plan=plan), a.astype(np.int64) @ b.astype(np.int64))
    else:
        a, b = floats(rng, dtype, (m, k)), floats(rng, dtype, (k, n))
        cfg = plan_of(a, b, out, plan)
        c = coopjit.matmul(a, b, out=np.empty((m, n), np.float32), plan=plan)
        assert np.all(np.abs(c - a.astype(np.float64) @ b.astype(np.float64)) <= f32_bound(a, b))
    assert cfg["inline_b"] is True and cfg["amx"] == tiles and cfg["grid_m"] == 1, cfg
    auto = plan_of(a, b, out, {"amx": tiles, "split": "dp"})
    if -(-n // auto["nr"]) >= auto["threads"]:  # a column panel for each worker
        assert auto["inline_b"] is True, auto
    a2 = np.concatenate([a, a])  # 74 / 128 rows, more than 64: the packing phase, on any core count
    assert plan_of(a2, b, out, {"amx": tiles, "split": "dp"})["inline_b"] is False
    with pytest.raises(ValueError, match="amx_feed=2 reads B as whole 1 KiB tiles"):
        coopjit.matmul(a, b, plan={**plan, "amx_feed": 2})
    with pytest.raises(ValueError, match="inline_b=1 packs B inside the blocked nest"):
        coopjit.matmul(a, coopjit.prepack(b, plan={"amx": tiles}), plan={"amx": tiles, "inline_b": 1})


NC_CASES = [  # (m, n, k, plan): edges in M, N and K, several K tiles and workers
    (301, 257, 333, {"threads": 1, "kt": 128, "nc_tiles": 2, "split": "dp"}),  # 9 column panels: a short last block
    (230, 200, 300, {"threads": 3, "kt": 128, "nc_tiles": 1, "split": "dp"}),
    (200, 330, 700, {"threads": 4, "grid_m": 2, "kt": 256, "nc_tiles": 3, "split": "dp"}),  # a 2 x 2 grid
    (300, 200, 700, {"threads": 4, "shares": 3, "kt": 256, "nc_tiles": 2, "split": "dp"}),  # shares cut the nest
    (97, 70, 40, {"threads": 2, "nc_tiles": 4096, "split": "dp"}),  # one K tile, one block of everything
    (192, 160, 256, {"threads": 2, "kt": 128, "direct_a": 1, "nc_tiles": 2, "split": "dp"}),  # A read where it is
]


@pytest.mark.parametrize("tiles", ["emulated", "yes"])
@pytest.mark.parametrize("ta,tb", [(BF16, BF16), (np.int8, np.int8), (np.uint8, np.int8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("m,n,k,plan", NC_CASES)
@needs_avx512
def test_tiles_by_column_panels(rng, tiles, ta, tb, m, n, k, plan):
    """plan nc_tiles with tiles: for each K tile, blocks of column panels, each row panel across a
    block, the partial sums continued in the tiles from the scratch between K tiles; against
    float64 / int64. Hardware tiles where this CPU has them (else skipped, saying so)."""
    feature = "amx-bf16" if ta == BF16 else "amx-int8"
    if tiles == "yes" and not (HOST_AMX and FEATURES.get(feature)):
        pytest.skip(f"this CPU (or process) has no AMX tiles ({feature}): the tile instructions cannot run")
    full = {"amx": tiles, **plan}
    if ta == BF16:
        a, b = floats(rng, BF16, (m, k)), floats(rng, BF16, (k, n))
        out = np.float32
    else:
        a, b = ints(rng, ta, (m, k)), ints(rng, tb, (k, n))
        out = np.int32
    cfg = plan_of(a, b, out, full)
    assert (cfg["amx"], cfg["nc_tiles"], cfg["inline_b"]) == (tiles, plan["nc_tiles"], False), cfg
    c = coopjit.matmul(a, b, out=np.empty((m, n), out), plan=full)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if ta == BF16:
        assert np.all(np.abs(c - ref) <= f32_bound(a, b))
    else:
        np.testing.assert_array_equal(c, ref.astype(np.int64))


@pytest.mark.parametrize("tiles", ["emulated", "yes"])
@needs_avx512
def test_tiles_by_column_panels_alpha_beta_out_types_and_prepacked_b(rng, tiles):
    # alpha / beta and a bf16 C apply once, at the last K tile (the partial sums stay in the
    # scratch); a prepacked B (VNNI panels of the tiles) reads the same; the key names nc_tiles.
    if tiles == "yes" and not HOST_AMX:
        pytest.skip("this CPU (or process) has no AMX tiles (amx-tile, amx-bf16): the tile instructions cannot run")
    m, n, k = 150, 300, 400
    plan = {"amx": tiles, "threads": 2, "kt": 128, "nc_tiles": 2, "split": "dp"}
    a, b = floats(rng, BF16, (m, k)), floats(rng, BF16, (k, n))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c = rng.standard_normal((m, n)).astype(np.float32)
    c0 = c.astype(np.float64)
    coopjit.gemm(a, b, c, alpha=1.5, beta=-0.5, plan=plan)
    assert np.all(np.abs(c - (1.5 * ref - 0.5 * c0)) <= 1.5 * f32_bound(a, b) + 1e-6 * np.abs(c0))
    lo = coopjit.matmul(a, b, plan=plan)  # bf16 out: the f32 sum rounded once
    assert lo.dtype == BF16
    assert np.all(np.abs(lo.astype(np.float64) - ref) <= f32_bound(a, b) + np.abs(ref) * 2.0**-8)
    pb = coopjit.prepack(b, plan={"amx": tiles})
    got = coopjit.matmul(a, pb, out=np.empty((m, n), np.float32), plan=plan)
    assert np.all(np.abs(got - ref) <= f32_bound(a, b))
    keys = {nc: coopjit.cross_compile(a, b, cpu="sapphirerapids", plan={**plan, "amx": "yes", "nc_tiles": nc}, code=False)["key"]
            for nc in (0, 1, 2)}
    assert len(set(keys.values())) == 3, keys


@needs_avx512
def test_tiles_by_column_panels_refuse_the_cold_panel_prefetch(rng):
    # amx_prefetch 6 fetches the next block of row panels' cold panels: the column-panel order
    # has no such block.
    a = floats(rng, BF16, (64, 64))
    with pytest.raises(ValueError, match=r"nc_tiles=2 orders the packed blocked nest.*amx_prefetch=6"):
        coopjit.matmul(a, a, plan={**EMU, "nc_tiles": 2, "amx_prefetch": 6})
    for pf in (0, 1, 5):
        c = coopjit.matmul(a, a, out=np.empty((64, 64), np.float32), plan={**EMU, "nc_tiles": 2, "amx_prefetch": pf})
        assert np.all(np.abs(c - a.astype(np.float64) @ a.astype(np.float64)) <= f32_bound(a, a))


def test_cross_compiled_tiles_by_column_panels():
    # The column-panel order keeps the tile kernel: the K loop's 2 + 2 tileloadd and 4 tile
    # products, the partial sums moved whole between K tiles (tileloadd / tilestored).
    a = np.zeros((1024, 1024), BF16)
    r = coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=16, plan={"nc_tiles": 2, "kt": 256})
    assert r["config"]["nc_tiles"] == 2 and r["config"]["amx"] == "yes"
    loops = k_loops(r["asm"], "tdpbf16ps")
    assert loops and all(len(tile_order(body, "tdpbf16ps")) % 8 == 0 for body in loops)
    assert re.search(r"\btilestored\b", r["asm"])


@pytest.mark.parametrize("dtype,size", [(BF16, 1024), (BF16, 4096), (np.int8, 4096), (np.int8, 8192)])
def test_tile_plans_keep_the_row_block_order(dtype, size):
    # nc_tiles with tiles measured within noise or slower than the row blocks on the 16-core
    # host (session 16): the planner keeps 0 for AMX plans; a plan that names it gets it.
    a = np.zeros((size, size), dtype)
    cfg = coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=16, code=False)["config"]
    assert (cfg["amx"], cfg["nc_tiles"]) == ("yes", 0), cfg
    named = coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=16, plan={"nc_tiles": 4}, code=False)["config"]
    assert (named["amx"], named["nc_tiles"]) == ("yes", 4), named
