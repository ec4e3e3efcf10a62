// The GPU GEMM planner's phases (internal to cpp/plan/): plan_gpu_gemm (gpu_plan.cpp) runs them in
// order on one GpuGemmPlan, each deciding its own fields from the facts of the product
// (GpuPlanContext) and what the earlier phases left. The caller's tile overrides are applied after
// the instruction and tile phases (apply_gpu_overrides) and checked by check_gpu_tile; the phases
// after it check the overrides they read. The defaults the rules take (measured on the H100) are
// the constants below, each with its figures.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "plan/gpu_plan.h"

namespace coopjit {

// Whether sm_90 plans take the wgmma pipeline by default (the plan field wgmma chooses either way).
inline constexpr bool kWgmmaDefault = true;
// Whether wgmma plans take the Tensor Memory Accelerator by default (the plan field tma chooses).
inline constexpr bool kTmaDefault = true;
// The warp-specialized kernel data-parallel TMA plans take by default (plan field ws): 0 none, 1 a
// producer warp, 2 a producer warpgroup with setmaxnreg. On the H100, bf16 4096^3: 553 TFLOP/s
// with 2 against 474 without (benchmarks/recorded/issue16-h100-session10.md).
inline constexpr int kWsDefault = 2;
// 8-bit (s8 / u8 -> s32) TMA plans take it too (2 with two consumer warpgroups, else 1), and a
// persistent grid where the tiles take more than a wave: on the H100 (CUDA graphs,
// benchmarks/recorded/issue16-h100-int8-session13.md) 128 x 256 blocks of two warpgroups, 2048^3
// 16.5 us with ws 2 against 17.1 without, 4096^3 103 (99 persistent) against 105, 8192^3 760 (750)
// against 775; 1024^3 in 64 x 128 blocks (one warpgroup) 5.0 with ws 1 against 5.9.
inline constexpr bool kWsInt8 = true;
// The epilogue staged through shared memory (plan field epi_smem) by default on wgmma plans.
inline constexpr bool kEpiSmemDefault = true;
// wgmma TMA plans: C written by TMA stores from the staging (plan field tma_store) by default, 2:
// boxes of a warpgroup where C's rows are contiguous (16-bit C), else of a warp. On the H100 (CUDA
// graphs, benchmarks/recorded/issue16-h100-tmastore-session14.md) 1 against the lanes' stores:
// 1.09-1.16x on products whose epilogue is a large share, 1.02-1.04x with edge tiles, 0.98-1.01x
// elsewhere; 2 against 1: 1.01-1.03x (bf16 / f16 2048^3 1.03x, 4096^3 with the persistent walk 1.03x).
inline constexpr int kTmaStoreDefault = 2;
// ws plans: a persistent grid (plan field persistent) by default where the tiles take more than a
// wave (the producer loads the block's next tile under this one's epilogue). On the H100 (CUDA
// graphs, bf16, benchmarks/recorded/issue16-h100-tiles-session16.md) against one tile a block:
// 128 x 256 tiles 4224^3 1.07x (683 against 641 TFLOP/s), 4096^3 1.02x, 6144^3 1.03x, 8192^3
// 1.02x, 4224x4224x8192 1.02x; 192 x 192 tiles 1.01-1.03x; one wave 1.00-1.01x.
inline constexpr bool kPersistentDefault = true;
// ws Stream-K plans: the fix-up in the kernel, after flags (plan field sk_flags), by default (where
// every worker's part is a tile or more). On the H100 (benchmarks/recorded/issue16-h100-streamk-session14.md,
// CUDA graphs, bf16) SK + DP with the flags ran 1.03-1.13x the same split with the fix-up launch
// (133 tiles: 615 against 566 TFLOP/s; 4224^2 x 8192 0.99x) since the part with a successor adds
// its sum after the plain K loop (ptxas: 108 bytes of spills with bf16 C against the fix-up
// kernel's 156). Session 13's form, the sum loaded as the K loop's initial accumulators, spilled
// 572-736 bytes and ran 0.83-0.92x the fix-up launch.
inline constexpr int kSkFlagsDefault = 1;
// ws Stream-K plans of 16-bit inputs: each part's K tiles from its last down to its first (plan
// field sk_down), by default: the blocks streaming at once then read the K panels of one or two
// offsets, not of one an SM. On the H100 (benchmarks/recorded/issue16-h100-streamk-session14.md,
// CUDA graphs, bf16, SK + DP with flags) against K upward: 133 tiles 1.03x, 136 1.01x, 144 1.83x,
// 152 1.07-1.18x, 165 1.07x, 198 1.05x, 266 1.08x, 270 1.27x, 400 1.01x, 512 1.05x, 540 1.01x,
// 561 1.03-1.18x. (Measured
// with the flags; the fix-up launch's plans take it too, the walk being the same.)
inline constexpr int kSkDownDefault = 1;
// 16-bit warp-specialized TMA plans: the orientation (layout row / col: which of the product's
// M and N the kernel's 128-row side runs along) whose tiles carry less work over their waves, by
// default (a plan that names layout or a tile keeps it). The layout by the strides alone
// (C row-major: col) cut 4224x1024 into 8 x 17 tiles of 128 x 256 (136: two waves; 192 x 192 the
// planner's way out, one wave of 132 at 0.9 of cuBLAS), where the other orientation cuts it into 33 x
// 4 = 132, one wave, as cuBLAS does (nvjet 256 x 128 tiles, 128 along the 4224; session 18,
// benchmarks/recorded/issue16-h100-single-wave-session18.md). On the H100 one wave of 128 whole
// 128 x 256 tiles (4096x1024x8192) ran 779-794 TFLOP/s against cuBLAS's 791-804, and the row layout
// ran the same products at 1.00-1.02x of col (session 11, issue16-h100-session11.md); 4224x1024x4096
// / x8192 now run at 742-761 / 791-796 TFLOP/s against cuBLAS's 752-762 / 789-794 (1.00x; the 192 x 192
// plan before: 671-676 / 710-717). Whole tiles only (see plan_gpu_orient_by_waves, gpu_plan_tile.cpp).
inline constexpr bool kOrientByWaves = true;
// ws plans of 8-bit inputs given ws: 2-tile SK + DP where the last wave's tiles are at most 1 /
// this of the SMs after one or two full waves (16-bit inputs: plan_gpu_split's rule).
inline constexpr int64_t kWsStreamKLast = 16;
// 16-bit ws plans: N tiles of any multiple of 8 (128..256) chosen so that the tiles fill their
// waves (plan_gpu_hopper_tile, issue 16 session 18). Measured on the H100 with the plan's nr override:
// 128 x 136 ran 4352x1024x4096 / x8192 at 620 / 666 TFLOP/s against the automatic SK + DP plan's 529 /
// 652 (cuBLAS 681 / 696), 128 x 144 4608x1024x8192 at 724 against 648 (cuBLAS 749). Off until the other
// shapes it would change are measured (1024x4864, 2816x1920, 5632x1152 (128 x 128), 2816x3456, and
// 4224^3 / 4864x1792, which run at 0.99-1.00x cuBLAS today).
inline constexpr bool kNTileByWaves = false;

inline bool pow2(int64_t x) { return x >= 1 && (x & (x - 1)) == 0; }

// 16 when the device has it (Xe-HPC, Xe2: the native width), else the nearest it has.
inline int choose_subgroup(const GpuTargetInfo& t) {
  const auto& s = t.subgroup_sizes;
  if (s.empty() || std::find(s.begin(), s.end(), 16) != s.end()) return 16;
  if (std::find(s.begin(), s.end(), 32) != s.end()) return 32;
  return static_cast<int>(*std::max_element(s.begin(), s.end()));
}

// DPAS's K (the instruction's K for the kernel's A type): 16 for 16-bit inputs, 32 for 8-bit.
inline int dpas_k(const GpuGemmPlan& p) { return ir::size_in_bytes(p.a_type) == 1 ? 32 : 16; }

// Whether the overrides name the tile (mr, nr, sg_m or sg_n): the tile rules then leave it.
inline bool names_tile(const PlanOverrides& o) { return o.count("mr") || o.count("nr") || o.count("sg_m") || o.count("sg_n"); }

/// The facts of one product in the kernel's orientation ("col" swaps the caller's A and B).
struct GpuPlanContext {
  const GemmSpec& spec;
  const GpuTargetInfo& target;
  const PlanOverrides& overrides;
  bool col;        // layout "col": the kernel computes C^T = B^T A^T
  int64_t M, N;    // the kernel's M and N (the caller's N and M in "col")
};

/// What plan_gpu_split found that plan_gpu_ws decides by.
struct GpuTileCounts {
  int64_t batch;     // batch1 x batch2
  int64_t tiles_mn;  // output tiles over the batch
  int64_t tiles_k;   // K tiles of kt
  int ws_default;    // the ws level the plan takes when the overrides do not name one
};

// gpu_plan_layout.cpp: the plans made by planning another product (the K-major copies of 8-bit
// operands), and the layout by the strides with the types and unit strides (returns the context).
std::optional<GpuGemmPlan> plan_gpu_kmajor(const GemmSpec& spec, const GpuTargetInfo& target, const PlanOverrides& overrides);
GpuPlanContext plan_gpu_orientation(const GemmSpec& spec, const GpuTargetInfo& target, const PlanOverrides& overrides,
                                    GpuGemmPlan& p);

// gpu_plan_tile.cpp: the orientation by waves (kOrientByWaves: both layouts planned), the subgroup
// size and the SIMT register tile, and Hopper's tiles (8-bit products of few tiles, 192 x 192,
// kNTileByWaves) with the stages that fit them.
std::optional<GpuGemmPlan> plan_gpu_orient_by_waves(const GemmSpec& spec, const GpuTargetInfo& target,
                                                    const PlanOverrides& overrides);
void plan_gpu_simt_tile(GpuGemmPlan& p, const GpuPlanContext& c);
void plan_gpu_hopper_tile(GpuGemmPlan& p, const GpuPlanContext& c);

// gpu_plan_kernel.cpp: the instructions: DPAS and 2-D block I/O (Intel), mma.sync and the
// multi-stage pipeline (NVIDIA), wgmma and the Tensor Memory Accelerator (Hopper), and the
// epilogue's staging through shared memory with TMA stores of C.
void plan_gpu_dpas(GpuGemmPlan& p, const GpuPlanContext& c);
void plan_gpu_mma(GpuGemmPlan& p, const GpuPlanContext& c);
void plan_gpu_pipeline(GpuGemmPlan& p, const GpuPlanContext& c);
void plan_gpu_wgmma(GpuGemmPlan& p, const GpuPlanContext& c);
void plan_gpu_tma(GpuGemmPlan& p, const GpuPlanContext& c);
void plan_gpu_epilogue(GpuGemmPlan& p, const GpuPlanContext& c);

// gpu_plan_overrides.cpp: the caller's tile fields in place of the defaults, the checks of the
// tile against the instructions, and (last) of the work-group's size.
void apply_gpu_overrides(GpuGemmPlan& p, const GpuPlanContext& c);
void check_gpu_tile(const GpuGemmPlan& p, const GpuPlanContext& c);
void check_gpu_work_group(const GpuGemmPlan& p, const GpuPlanContext& c);

// gpu_plan_split.cpp: the K tile, the workers and the split among them (DP / Stream-K); then the
// warp-specialized kernel (ws) with its persistent grid and Stream-K options, and clusters.
GpuTileCounts plan_gpu_split(GpuGemmPlan& p, const GpuPlanContext& c);
void plan_gpu_ws(GpuGemmPlan& p, const GpuPlanContext& c, const GpuTileCounts& t);
void plan_gpu_cluster(GpuGemmPlan& p, const GpuPlanContext& c);

}  // namespace coopjit
