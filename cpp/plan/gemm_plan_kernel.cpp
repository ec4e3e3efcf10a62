// The GEMM planner's instruction phase: FMAs, dot instructions on VNNI panels (vdpbf16ps,
// vpdpbusd) or AMX tiles, and what each needs of the tile, the K step and the packing.
#include "plan/gemm_plan_internal.h"

#include <algorithm>

#include "core/error.h"

namespace coopjit {

void plan_instructions(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const CpuTargetInfo& cpu = c.cpu;
  const PlanOverrides& overrides = c.overrides;
  const bool col = c.col;
  const bool a_unit = c.a_unit;
  // A's unit K stride as a constant: packing reads A's rows as vectors, and the unpacked K loop
  // broadcasts mr x kb elements a step from rows whose K offsets are then displacements of mr
  // row pointers, where a run-time stride took a register (spilled) for each of the mr x kb.
  p.unit_a = a_unit;
  // VNNI: packed panels keep low-precision inputs as they are, in the dot instructions' order.
  if (!overrides.count("vnni")) p.vnni = p.pack ? dot_group(p.a_type, p.b_type, p.dtype, cpu) : 1;
  if (p.vnni > 1) {
    // The panels of a dot instruction's group, or of an AMX tile product's (the same VNNI
    // panels): u8 x u8 has no AVX-512 dot instruction but has tdpbuud, so a u8 weight prepacked on
    // an AMX CPU names vnni=4 (checked again below, once the tiles are decided).
    const int g = dot_group(p.a_type, p.b_type, p.dtype, cpu);
    const int tiles = amx_group(p.a_type, p.b_type, p.dtype, cpu, overrides.count("amx") && overrides.at("amx") == 2);
    if (!p.pack || (g != p.vnni && tiles != p.vnni))
      throw UserError(cat("plan vnni=", p.vnni, " needs packed panels (pack=1) and a product the CPU has a dot ",
                          "instruction of that group for (", ir::name(p.a_type), " x ", ir::name(p.b_type), " -> ",
                          ir::name(p.dtype), ": group ", g, ")"));
    if (p.kb % p.vnni != 0) throw UserError(cat("plan kb=", p.kb, " must be a multiple of vnni=", p.vnni));
  }
  // AMX: packed products the CPU has tiles for take them (a tile instruction does 16 x 16 x 64
  // bytes of K: 16 times the work of a 512-bit dot instruction). Register tile 32 x 32 (2 x 2
  // accumulator tiles, 2 A and 2 B tiles: the 8 tile registers), one tile row of K per step.
  {
    auto it = overrides.find("amx");
    const int group = amx_group(p.a_type, p.b_type, p.dtype, cpu);
    if (it != overrides.end()) {
      p.amx = static_cast<int>(it->second);
      if (p.amx == 1 && group == 0)
        throw UserError(cat("plan amx=1: this CPU (or process) has no AMX tiles for ", ir::name(p.a_type), " x ",
                            ir::name(p.b_type), " -> ", ir::name(p.dtype), "; amx=2 runs the same program with ",
                            "emulated tile instructions"));
      if (p.amx == 2 && amx_group(p.a_type, p.b_type, p.dtype, cpu, true) == 0)
        throw UserError(cat("plan amx=2: AMX has no tile product for ", ir::name(p.a_type), " x ", ir::name(p.b_type),
                            " -> ", ir::name(p.dtype), " (bf16 or f16 pairs to f32, 8-bit quads to i32)"));
    } else if (p.pack && group > 0 && cpu.vector_bytes == 64 &&
               (!overrides.count("vnni") || overrides.at("vnni") == group)) {  // (a prepacked B names its vnni)
      p.amx = 1;
    }
    if (p.amx && !p.pack && !overrides.count("pack") && spec.batch1 * spec.batch2 == 1) {
      p.pack = true;  // asked for tiles: they read packed panels
      if (!overrides.count("split")) p.split = "dp";
    }
    if (!p.amx && p.vnni > 1 && dot_group(p.a_type, p.b_type, p.dtype, cpu) != p.vnni)
      throw UserError(cat("plan vnni=", p.vnni, " for ", ir::name(p.a_type), " x ", ir::name(p.b_type), " -> ",
                          ir::name(p.dtype), " needs AMX tiles (the CPU has no dot instruction of that group), but ",
                          "the plan has amx=0"));
    if (p.amx) {
      if (!p.pack) throw UserError(cat("plan amx=", p.amx, " needs packed panels (pack=1)"));
      if (cpu.vector_bytes != 64)
        throw UserError(cat("plan amx=", p.amx, " needs 16-lane (AVX-512) vectors for its epilogue; this target has ",
                            cpu.vector_bytes, "-byte vectors"));
      const int g = amx_group(p.a_type, p.b_type, p.dtype, cpu, true);
      if (overrides.count("vnni") && p.vnni != g)
        throw UserError(cat("plan amx=", p.amx, " needs vnni=", g, ", got vnni=", p.vnni));
      const int kb = 64 / ir::size_in_bytes(p.a_type);
      for (auto [name, want] : {std::pair<const char*, int>{"mr", 32}, {"nr", 32}, {"kb", kb}})
        if (auto o = overrides.find(name); o != overrides.end() && o->second != want)
          throw UserError(cat("plan amx=", p.amx, " uses ", name, "=", want, " (AMX tiles), got ", name, "=", o->second));
      p.vnni = g;
      p.mr = 32;
      p.nr = 32;
      p.kb = kb;
      // bf16 tiles on many cores: each worker on whole column panels (its B slices stay in its
      // L2; A is read by all, from L3) beats the 2-D grid that reads the fewest bytes. Measured on
      // the 16-core Emerald Rapids host, 16 workers, grid_m 1 against the run-time choice (4):
      // 512^3 1.23x, 1024^3 1.15x, 4096^3 1.08x (session 9) and 1.24x (session 8). int8 went
      // both ways (1024^3: 1.10x and 0.86x), so it keeps the run-time choice.
      // (bf16 256^3 too, 8 column panels for 16 workers: grid_m 1 21.2 [19.5-25.0] us, the run-time
      // grid 25.7 [22.7-25.9] (session 25, the same host and rounds as int8's below).)
      if (p.a_type == ir::ScalarType::bf16 && cpu.max_threads >= 8 && !overrides.count("grid_m")) p.grid_m = 1;
      // 8-bit products on many cores with a C of 16M+ elements (int32: 64 MiB and more): each
      // tile's C lines prefetched for writing during its K loop (plan c_prefetch). The 16-core
      // Emerald Rapids host (H200 machine, session 27), 16 threads, 3 alternating rounds of
      // blocks: int8 4096^3 26.74 [26.67-26.77] -> 24.53 [24.52-25.56] ms (torch._int_mm 30.69),
      // and in another process 30.37 [29.64-38.66] -> 27.35 [25.73-27.89]; 1024^3 level (0.295 /
      // 0.288 ms, spreads overlap); bf16 1024^3 / 4096^3 / 8192^3 1.06 / 1.02 / 1.19x but inside
      // the spreads, so bf16 keeps it off (benchmarks/recorded/issue14-emr16-amx-session27.txt).
      if (ir::size_in_bytes(p.a_type) == 1 && cpu.max_threads >= 8 && spec.M * spec.N >= (int64_t(1) << 24) &&
          !overrides.count("c_prefetch"))
        p.c_prefetch = true;
      // Many workers: the tiles read a row-major A where it is, one row of workers, each packing
      // only the B panels it reads: no worker reads panels another core has just written, which
      // cost a 16-worker bf16 512^3 call ~80 us a worker on the 16-core Emerald Rapids host.
      // Measured there (session 10, 16 workers, against packed A): bf16 512^3 171 -> 125 us,
      // 1024^3 712 -> 611, 2048^3 4160 -> 3600; int8 1024^3 419 -> 290, 4096^3 15.2 -> 14.0 ms.
      // Rows of 8 KiB (bf16 K = 4096: 16 tile rows in one L1 set) lost (bf16 4096^3 28.7 -> 36.1
      // ms), as did one worker (no other core's panels to avoid): those keep packing A.
      // One row of workers only with a column panel for every worker (int8; bf16 keeps its rule
      // above): below that, some of them sit idle. The 16-core Emerald Rapids host, int8 256^3 on
      // 16 workers (8 column panels), 5 rounds of blocks of calls after a pause, medians [min-max],
      // us: grid_m 1 37.6 [34.3-44.3] / 35.8 [34.9-36.6], the run-time grid (A still read in place)
      // 24.9 [23.5-26.6] / 24.6 [24.2-25.6]; torch._int_mm 24.6 / 24.2 (two runs, session 25,
      // benchmarks/recorded/issue14-emr16-rows-session25.txt).
      const int64_t m_k = col ? spec.N : spec.M;
      const int64_t panels_n = ((col ? spec.M : spec.N) + p.nr - 1) / p.nr;
      if (!overrides.count("direct_a") && cpu.max_threads >= 8 && p.unit_a && m_k % p.mr == 0 &&
          spec.K % p.kb == 0 && spec.K * ir::size_in_bytes(p.a_type) <= 4096) {
        p.direct_a = true;
        if (!overrides.count("grid_m") && panels_n >= p.threads) p.grid_m = 1;
      }
      if (p.direct_a && (!p.unit_a || spec.K % p.kb != 0 || (col ? spec.N : spec.M) % p.mr != 0))
        throw UserError(cat("plan direct_a=1 needs a row-major A (unit K stride in the kernel's orientation), K a ",
                            "multiple of ", p.kb, " and M a multiple of ", p.mr, " (got M=", col ? spec.N : spec.M,
                            ", K=", spec.K, ", unit stride ", p.unit_a ? "yes" : "no", ")"));
    } else if (p.direct_a) {
      throw UserError("plan direct_a=1 is for AMX plans (this plan has amx=0)");
    } else if (p.amx_feed != 0) {
      throw UserError(cat("plan amx_feed=", p.amx_feed, " is for AMX plans (this plan has amx=0)"));
    } else if (p.c_prefetch) {
      throw UserError("plan c_prefetch=1 is for AMX plans (this plan has amx=0)");
    }
  }
  // The VNNI loads of B keep a kb x nr step in registers (the lowering's limit of 64 vectors).
  if (p.vnni > 1 && !p.amx && int64_t(p.kb) * (p.nr / p.simd_width) > 64)
    throw UserError(cat("plan kb=", p.kb, " with nr=", p.nr, " and vnni=", p.vnni, " needs ", p.kb * (p.nr / p.simd_width),
                        " vectors of B per step; at most 64 (kb <= ", 64 / (p.nr / p.simd_width), ")"));
}

}  // namespace coopjit
