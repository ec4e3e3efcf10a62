// The GEMM planner's first phases: the kernel's orientation (layout, operand types, unit strides)
// and its register tile (mr x nr accumulators, the K step kb); and the check that a tile, overridden
// or not, fits the register file.
#include "plan/gemm_plan_internal.h"

#include <algorithm>
#include <climits>

#include "core/error.h"

namespace coopjit {

PlanContext plan_orientation(const GemmSpec& spec, const CpuTargetInfo& cpu, const PlanOverrides& overrides,
                             GemmPlan& p) {
  p.dtype = spec.dtype;
  p.accumulate = spec.accumulate;
  p.epilogue = spec.epilogue;
  const int esize = ir::size_in_bytes(spec.dtype);
  p.simd_width = cpu.vector_bytes / esize;

  // Layout: score each orientation by how many of (B, C) have unit stride along the kernel's N.
  // "col" swaps the roles: the kernel's B is A^T (its N stride is sa_r), its C is C^T (sc_r).
  int row_score = (spec.sb_c == 1) + (spec.sc_c == 1);
  int col_score = (spec.sa_r == 1) + (spec.sc_r == 1);
  p.layout = col_score > row_score ? "col" : "row";
  // A vector times a matrix whose columns are contiguous (C = a B, B's K stride 1): in "col" the
  // kernel's N is 1 and its A runs along K with unit stride (the "dot" walk: plan_gemv; a vector of
  // another stride is gathered first). A strided vector kept "row" (the k_outer nest reading B
  // across its columns): one Zen 5 thread (CPU time), f32 x[:, ::2] @ a column-major B 4096 x 4096
  // 45.5 -> 1.43 ms (contiguous x 1.40, NumPy 1.63), 3000 x 700 584 -> 91 us.
  if (spec.M == 1 && spec.N > 1 && spec.sb_r == 1 && spec.sb_c != 1) p.layout = "col";
  // A column-major matrix times a vector (C = A x, A's M stride 1, N = 1): the scores tie (a column
  // C and x have unit stride either way) and "row" walked A's columns in m_inner tiles; in "col" the
  // kernel's B is A^T, row-major, and the product is the vector-matrix one (the k_outer nest, its K
  // split among the workers). One Zen 5 thread (CPU time), row -> col: f32 4096x4096 6.09 -> 1.48
  // ms, 1024x4096 1.09 -> 0.38, 300x2000 0.17 -> 0.034, 256x512 26 -> 8 us; f64 4096x4096 10.8 ->
  // 3.1 ms; bf16 4096x4096 16.8 -> 0.74 ms. One product only (a batch keeps the walk it had), and
  // not the small ones (every dimension up to 64: code for their exact shape).
  if (spec.N == 1 && spec.M > 1 && spec.sa_r == 1 && spec.sa_c != 1 && spec.batch1 * spec.batch2 == 1 &&
      std::max(spec.M, spec.K) > 64)
    p.layout = "col";
  if (auto it = overrides.find("layout"); it != overrides.end()) {
    if (it->second != 0 && it->second != 1)
      throw UserError(cat("plan override layout=", it->second, " must be 0 (row) or 1 (col)"));
    p.layout = it->second ? "col" : "row";
  }
  bool col = p.layout == "col";
  p.a_type = col ? spec.b_type : spec.a_type;  // the kernel's A is the caller's B^T in "col"
  p.b_type = col ? spec.a_type : spec.b_type;
  p.c_type = spec.c_type;
  int64_t N = col ? spec.M : spec.N, M = col ? spec.N : spec.M;
  p.unit_b = (col ? spec.sa_r : spec.sb_c) == 1;
  const bool a_unit = (col ? spec.sb_r : spec.sa_c) == 1;
  // The bytes between the kernel's rows of A (along M) and of B (along K).
  const int64_t a_row_bytes = (col ? spec.sb_c : spec.sa_r) * int64_t(ir::size_in_bytes(p.a_type));
  const int64_t b_row_bytes = (col ? spec.sa_c : spec.sb_r) * int64_t(ir::size_in_bytes(p.b_type));
  p.unit_c = (col ? spec.sc_r : spec.sc_c) == 1;
  // Half-width vectors (8 f32 / 4 f64 lanes on an AVX-512 CPU, its 32 registers and masks kept).
  // Zen 4 runs a 512-bit FMA as two 256-bit halves: 8-lane FMAs do as much a cycle, and pad a
  // narrow N less. Taken there for the kernel's N of 2 to 5 half vectors where they pad less (one
  // column tile over all of N: plan_register_tile): 37 f32 columns in 40 lanes, not 48. Measured on
  // the 2-core Zen 4 (session 18), one thread, CPU time of the kernel call (blocks alternating,
  // medians of 9), 16 -> 8 lanes, us (NumPy): 100x37x250 f32 26.2 -> 19.1 (18.6), 100x33x250 25.4 ->
  // 19.0 (16.3), 100x20x250 16.2 -> 13.1 (10.4), 100x5x250 10.3 -> 8.3 (4.2), 300x37x250 69.2 -> 55.7
  // (69.4), 1000x37x250 224 -> 186 (235), 64x37x64 4.3 -> 4.1 (4.1), 20x33x50 1.6 / 1.6 (1.8);
  // 100x40x250 (no edge) 25.4 -> 19.1 (19.4). Not for dot / VNNI / AMX products (16-lane
  // instructions), nor N = 1 (the dot walk). benchmarks/recorded/issue14-zen4-2core-rows-session18.txt.
  {
    const int full = cpu.vector_bytes / esize, half = full / 2;
    const bool plain = p.a_type == spec.dtype && p.b_type == spec.dtype &&
                       (spec.dtype == ir::ScalarType::f32 || spec.dtype == ir::ScalarType::f64);
    if (auto it = overrides.find("simd_width"); it != overrides.end()) {
      if (it->second != full && !(cpu.vector_bytes == 64 && it->second == half))
        throw UserError(cat("plan override simd_width=", it->second, " must be ", full,
                            cpu.vector_bytes == 64 ? cat(" or ", half, " (half-width vectors of an AVX-512 CPU)") : std::string(),
                            " for ", ir::name(spec.dtype), " on this CPU (", cpu.vector_bytes, "-byte vectors)"));
      p.simd_width = static_cast<int>(it->second);
    } else if (cpu.name == "znver4" && cpu.vector_bytes == 64 && plain && N >= 2 && N <= 5 * half &&
               ceil_to(N, half) < ceil_to(N, full)) {
      p.simd_width = half;
    }
  }
  return PlanContext{spec, cpu, overrides, col, M, N, a_unit, a_row_bytes, b_row_bytes, esize,
                     2.0 * spec.M * spec.N * spec.K * spec.batch1 * spec.batch2};
}

void plan_register_tile(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const CpuTargetInfo& cpu = c.cpu;
  const int64_t M = c.M, N = c.N;
  const bool a_unit = c.a_unit;
  const int64_t a_row_bytes = c.a_row_bytes;
  // Register tile: mr x (nr / S) accumulators, the nr / S vectors of B and one broadcast of A
  // must fit the register file. Four vectors of B per k (nr = 64 f32 lanes) and mr = 6 rows: one
  // broadcast of A feeds four FMAs. Measured on Zen 5 (2 cores, 1024^3, one thread, f32 / bf16 /
  // int8): 6 x 64 runs at 89% / 79% / 75% of peak where 14 x 32 (one broadcast per two FMAs, every
  // register in use) runs at 73% / 54% / 57%: broadcasts take FP pipe slots there, and a full
  // register file leaves the scheduler nothing to rename. About 3/4 of the registers hold
  // accumulators.
  const int regs = cpu.vector_registers;
  const int64_t nvec_n = ceil_to(N, p.simd_width) / p.simd_width;  // vectors N needs
  int nvec = static_cast<int>(std::min<int64_t>(regs >= 32 ? 4 : 2, std::max<int64_t>(1, nvec_n)));
  // Up to a few hundred columns: the width (4, 2 or 1 vectors) that pads N least, the wider on
  // ties (ragged edge tiles take the slower checked path).
  // Where A outgrows half the core's L2, each column tile reads A again from L3, so narrow
  // tiles cost more than their padding saves: of 1 to 3 vectors, the width with the least
  // padded vectors x (1 + 1 / width) (a read of A per tile of width vectors), the wider on ties.
  // (4 vectors, whose unpacked B slice of a K tile outgrows L1, ran slower everywhere here.)
  // Measured on Zen 5, one thread, CPU time per call (us), least padding -> this:
  // 513x129x700 f32 16x16 690-720 -> 8x48 500-525, f64 16x8 1440-1670 -> 8x24 970-990;
  // 2000x200x300 f32 1620 -> 1330, f64 3280 -> 2460; 1000x130x1000 f64 4330 -> 2560;
  // 256x100x2000 f32 700-730 -> 740 (12x32: 650-670), f64 1600 -> 1130-1180.
  const bool a_streams = double(M) * double(spec.K) * ir::size_in_bytes(p.a_type) > 0.5 * double(cpu.l2_bytes);
  // Half-width vectors (plan_orientation) for up to 5 of them: one column tile over all of N (their
  // FMAs cost half of a full one's on Zen 4, so five take the room of two and a half; A is read once).
  if (p.simd_width * c.esize * 2 == cpu.vector_bytes && nvec_n <= 5) {
    nvec = static_cast<int>(std::max<int64_t>(1, nvec_n));
  } else if (N <= 256 && a_streams) {
    int best = nvec;
    double best_cost = 1e300;
    for (int cand = std::min(nvec, 3); cand >= 1; --cand) {
      const double cost = double(ceil_to(nvec_n, cand)) * (1.0 + 1.0 / cand);
      if (cost < best_cost) best_cost = cost, best = cand;
    }
    nvec = best;
  } else if (N <= 256) {
    int best = nvec;
    int64_t best_pad = INT64_MAX;
    for (int cand = nvec; cand >= 1; cand /= 2) {
      int64_t pad = ceil_to(nvec_n, cand) - nvec_n;
      if (pad < best_pad) best_pad = pad, best = cand;
    }
    nvec = best;
  }
  // Many cores, f32, N of exactly four vectors (64) and a streamed A: one column tile of four
  // vectors (6 x 64), which reads A once, where the rule above took two tiles of two (12 x 32), each
  // reading A again. Measured on the 16-core Emerald Rapids host (session 28, 16 workers, 4 shares
  // a thread; 5 alternating rounds of blocks of calls after a pause, medians [min-max], us; the
  // plan through the tuned-plan table): 4096x64x4096 12 x 32 1698.8 [1510-1832] -> 6 x 64 1196.9
  // [1178-1292] (torch 1801.7 [1625-1814]); benchmarks/recorded/issue14-emr16-rows-session28.txt.
  // (Few cores keep the rule above: the Zen 5 thread measured four vectors slower. Tall A only, 16
  // tiles of 6 rows a core or more, the 4 shares of 4 row tiles a thread of plan_shares: shorter
  // ones (256x64x8192, a few tiles a worker) were not measured. Not where the plan names mr or nr.)
  if (cpu.max_threads >= 8 && a_streams && regs >= 32 && p.simd_width * c.esize == cpu.vector_bytes &&
      p.dtype == ir::ScalarType::f32 && p.a_type == p.dtype && p.b_type == p.dtype && N == 4 * p.simd_width &&
      M >= 6 * 16 * int64_t(cpu.max_threads) && !c.overrides.count("mr") && !c.overrides.count("nr"))
    nvec = 4;
  p.nr = nvec * p.simd_width;
  // mr: as tall as the accumulator budget allows (each broadcast of A feeds a row's FMAs, so
  // shorter tiles pay more broadcasts per FMA); for matrices up to a few hundred rows, the height
  // in [3/4 max, max] that leaves the least padding (edge tiles take the slower checked path).
  // Measured on Zen 5, one thread, unpacked f32: 128^3 with 4 / 5 / 6 rows 173 / 196 / 192
  // GFLOP/s, 256^3 183 / - / 222.
  int mr = std::max(1, (regs * 3 / 4) / nvec);
  mr = std::min(mr, regs >= 32 ? 16 : 8);
  // A read in place along rows a multiple of 4 KiB apart (K of 1024 f32, 512 f64, ...): the mr
  // rows a tile broadcasts from fall in the same L1 set, and more of them than its ways (8 on
  // Zen 4's 32 KiB L1; 12 on Zen 5 and Golden Cove) evict each other every k step. At most 8
  // rows there, on few cores (the 16-core plans are tuned apart). Zen 4, f32, CPU time, 11 ->
  // 8 rows x 32 lanes: 64x64x8192 one thread 74 -> 107 GFLOP/s (2 threads 71 -> 189, wall, load
  // 2.4); 4096x64x4096 83 -> 100; 256x64x8192 96 -> 106; 128x32x4096 70 -> 87 (12 -> 8 rows).
  if (a_unit && a_row_bytes != 0 && a_row_bytes % 4096 == 0 && cpu.max_threads < 8) mr = std::min(mr, 8);
  // Small products (code for their exact shape, up to 64 in every dimension: plan_fixed_shape) look
  // down to half the height: a whole number of shorter tiles beats a ragged last one there (its
  // rows checked). Measured on the 2-core Zen 4 (session 17), one thread, CPU time of the kernel
  // call alone (blocks of calls, medians of 9): 32x32x32 f32 11 rows (3 tiles, the last of 10) 1.5
  // us, 8 rows 1.25 (NumPy's whole matmul 1.6); 64x64x64 5 rows 5.5-5.6, 4 rows 5.4 (NumPy 5.8).
  const bool small_fixed = std::max({spec.M, spec.N, spec.K}) <= 64;
  if (M <= 256) {
    int best = mr;
    int64_t best_pad = INT64_MAX;
    for (int cand = mr; cand >= std::max(1, small_fixed ? mr / 2 : mr - mr / 4); --cand) {
      int64_t pad = (M + cand - 1) / cand * cand - M;
      if (pad < best_pad) best_pad = pad, best = cand;
    }
    mr = best;
  }
  p.mr = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(mr, M)));
  // K step of one mul_add: HLSL 0035 allows powers of two in [4, 128] for subgroup scope.
  p.kb = 4;
}

void check_register_tile(const GemmPlan& p, const PlanContext& c) {
  const int regs = c.cpu.vector_registers;
  if (p.simd_width * c.esize != c.cpu.vector_bytes && (p.vnni > 1 || p.amx))
    throw UserError(cat("plan simd_width=", p.simd_width, " (half-width vectors) is for FMA products; this plan has vnni=",
                        p.vnni, ", amx=", p.amx, " (16-lane instructions)"));
  if (p.nr % p.simd_width != 0)
    throw UserError(cat("plan override nr=", p.nr, " must be a multiple of the vector width ", p.simd_width));
  // Accumulators: past the register file they cannot all stay in registers, and there is no room
  // left for B's vectors and A's broadcast (Zen 5, 256^3, one thread, CPU time against the
  // planner's plan; benchmarks/recorded/plan-limits-acc-zen5-session25.txt): AVX-512's 32
  // registers, f32 6 x 64: 33-40 accumulators (11 x 48, 34 x 16, 9 x 64, 12 x 48, 10 x 64)
  // 0.44-0.49x, 64 0.33x; AVX2's 16 (COOPJIT_CPU_LEVEL=avx2), f32 6 x 16 / f64 6 x 8: 18-32
  // 0.52-0.70x. At most the registers are taken (twice them until session 25); plans at the limit
  // run at 0.46-0.72x too (8 x 64, 16 x 32, 32 x 16; AVX2 4 x 32, 8 x 16), the planner's own at
  // three quarters of it or less. AMX plans' accumulators are tile rows (4x).
  const int acc_limit = (p.amx ? 4 : 1) * regs;
  if (p.mr * (p.nr / p.simd_width) > acc_limit)
    throw UserError(cat("plan tile mr=", p.mr, " nr=", p.nr, " needs ", p.mr * (p.nr / p.simd_width),
                        " accumulator registers (mr x nr / simd_width ", p.simd_width, "); at most ", acc_limit,
                        " are allowed (", p.amx ? "4 x the " : "the ", regs, " vector registers",
                        p.amx ? "" : ": past them the tile's accumulators spill", ")"));
  // A K step (kb) is one mul_add, lowered into straight-line code: mr x kb broadcasts of A, kb x nr
  // vectors of B and mr x nr / simd_width x kb FMAs (dot products for vnni > 1). Past 16 x the
  // registers LLVM's scheduler keeps too much of it live: the same Zen 5 thread ran 8 x 32 at kb 16
  // / 32 (256 / 512 FMAs) at 0.98x / 0.95x, 6 x 64 at kb 32 (768) 0.46x, 8 x 32 and 4 x 64 at kb 64
  // (1024) 0.46x / 0.43x, kb 128 (2048-8192) 0.29-0.38x, and compiling such a step took 5-80 s
  // (16 x 64 at kb 128: 8192 FMAs, 45-80 s) where the planner's (kb 4) take well under one.
  if (!p.amx) {
    const int64_t step = int64_t(p.mr) * (p.nr / p.simd_width) * p.kb / std::max(1, p.vnni);
    int64_t kb_max = 128;  // the largest kb (a power of two) that fits
    while (kb_max >= 4 && int64_t(p.mr) * (p.nr / p.simd_width) * kb_max / std::max(1, p.vnni) > 16 * regs) kb_max /= 2;
    if (step > 16 * regs)
      throw UserError(cat("plan tile mr=", p.mr, " nr=", p.nr, " kb=", p.kb, ": one K step is ", step,
                          p.vnni > 1 ? " vector dot products" : " vector FMAs", " (mr x nr / simd_width ", p.simd_width,
                          " x kb", p.vnni > 1 ? cat(" / vnni ", p.vnni) : std::string(),
                          ") unrolled into one block; at most ", 16 * regs, " (16 x the ", regs,
                          " vector registers): ", kb_max >= 4 ? cat("kb <= ", kb_max) : std::string("a smaller tile")));
  }
}

}  // namespace coopjit
