// The GEMM planner's phases (internal to cpp/plan/): plan_gemm (gemm_plan.cpp) runs them in
// order on one GemmPlan, each deciding its own fields from the facts of the product (PlanContext)
// and what the earlier phases left; overrides are applied after the defaults of the phases before
// apply_overrides and checked by the phases after it.
#pragma once

#include <cstdint>

#include "plan/gemm_plan.h"

namespace coopjit {

/// The facts of one product in the kernel's orientation ("col" swaps the caller's A and B).
struct PlanContext {
  const GemmSpec& spec;
  const CpuTargetInfo& cpu;
  const PlanOverrides& overrides;
  bool col;                     // layout "col": the kernel computes C^T = B^T A^T
  int64_t M, N;                 // the kernel's M and N (the caller's N and M in "col")
  bool a_unit;                  // the kernel's A has unit stride along K
  int64_t a_row_bytes;          // bytes between the kernel's rows of A (along M)
  int64_t b_row_bytes;          // bytes between the kernel's rows of B (along K)
  int esize;                    // bytes of the accumulator type
  double flops;                 // 2 M N K over the whole batch
};

inline int64_t ceil_to(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Intel's Xeons with 2 MiB of L2 a core and AMX tiles (LLVM's names): rules measured on the
// 16-core Emerald Rapids host that hold for the same core at any worker count.
inline bool intel_xeon_2mib_l2(const CpuTargetInfo& cpu) {
  return cpu.name == "sapphirerapids" || cpu.name == "emeraldrapids" || cpu.name == "graniterapids";
}

// f32 or f64 products without conversions (A, B and C of the accumulator's type): the plans
// several float rules were measured on.
inline bool plain_float(const GemmPlan& p) {
  return (p.dtype == ir::ScalarType::f32 || p.dtype == ir::ScalarType::f64) && p.a_type == p.dtype &&
         p.b_type == p.dtype && p.c_type == p.dtype;
}

// Float products of few rows over a wide B on those Xeons with fewer than 8 cores (session 34, CI's
// 2-core Emerald Rapids guest): more than two row tiles and up to 512 rows in the kernel's
// orientation, B (K x N, N and K 256 or more) larger than the 2 MiB L2, f32 / f64 without
// conversions, one product, AVX-512 (measured there; the AVX2 level keeps its plans). The
// unpacked walks the planner took for them (the k_outer nest up to 64 rows, the tile walk above)
// read B's rows in place, from L3, again for every row tile or K tile; packed by its reader
// (inline_b) B is read once. plan_packing packs them, plan_inline_b gives them the reader's
// packing. benchmarks/recorded/issue14-emr2-rows-session34.txt.
inline bool xeon_few_core_rows(const GemmPlan& p, const PlanContext& c) {
  const GemmSpec& s = c.spec;
  return intel_xeon_2mib_l2(c.cpu) && c.cpu.max_threads < 8 && c.cpu.vector_bytes == 64 && plain_float(p) &&
         s.batch1 * s.batch2 == 1 && c.M > 2 * p.mr && c.M <= 512 && c.N >= 256 && s.K >= 256 &&
         s.K * c.N * c.esize > (int64_t(2) << 20);
}

// gemm_plan_tile.cpp: the layout and types (returns the context), the register tile and the K
// step, and (last) the check that the tile fits the register file.
PlanContext plan_orientation(const GemmSpec& spec, const CpuTargetInfo& cpu, const PlanOverrides& overrides,
                             GemmPlan& p);
void plan_register_tile(GemmPlan& p, const PlanContext& c);
void check_register_tile(const GemmPlan& p, const PlanContext& c);

// gemm_plan_threads.cpp: the workers and the split among them (DP / Stream-K), the tile height
// that evens out a data-parallel launch of few tiles on many cores, and the shares a worker of
// the packed nest takes.
void plan_workers(GemmPlan& p, const PlanContext& c);
void plan_wave_tile(GemmPlan& p, const PlanContext& c);
void plan_shares(GemmPlan& p, const PlanContext& c);

// gemm_plan_overrides.cpp: the caller's overrides, each checked for range, replacing the defaults.
void apply_overrides(GemmPlan& p, const PlanContext& c);

// gemm_plan_kernel.cpp: the instruction family: FMA, dot instructions (VNNI panels) or AMX tiles.
void plan_instructions(GemmPlan& p, const PlanContext& c);

// gemm_plan_blocking.cpp: the packed blocked nest: whether to pack, its K tile and row-panel
// blocks, B packed by its reader (inline_b), column-panel blocks (nc_tiles).
void plan_packing(GemmPlan& p, const PlanContext& c);
void plan_packed_blocks(GemmPlan& p, const PlanContext& c);
void plan_inline_b(GemmPlan& p, const PlanContext& c);
void plan_column_blocks(GemmPlan& p, const PlanContext& c);
void plan_own_a(GemmPlan& p, const PlanContext& c);

// gemm_plan_small.cpp: the walks of skinny and small products: the unpacked blocked nest
// (k_outer, ksplit, b_prefetch), matrix-vector products (dot) and fixed-shape code.
void plan_skinny_walk(GemmPlan& p, const PlanContext& c);
// A small block of C and a long K on many cores: the K split of the whole block (plan_packing
// leaves it unpacked, plan_skinny_walk takes the k_outer walk with ksplit = threads).
bool ksplit_small_block(const GemmPlan& p, const PlanContext& c);
void plan_ksplit_tile_walk(GemmPlan& p, const PlanContext& c);
void plan_b_prefetch(GemmPlan& p, const PlanContext& c);
void plan_gemv(GemmPlan& p, const PlanContext& c);
void plan_fixed_shape(GemmPlan& p, const PlanContext& c);

}  // namespace coopjit
