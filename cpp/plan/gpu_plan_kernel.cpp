// The GPU planner's instruction phases (gpu_plan_internal.h): DPAS and 2-D block I/O on Intel GPUs,
// mma.sync and the multi-stage pipeline on NVIDIA GPUs, wgmma and the Tensor Memory Accelerator on
// Hopper, and the epilogue's staging through shared memory (with TMA stores of C).
#include "core/error.h"
#include "plan/gpu_plan_internal.h"

namespace coopjit {

void plan_gpu_dpas(GpuGemmPlan& p, const GpuPlanContext& c) {
  const GpuTargetInfo& target = c.target;
  const PlanOverrides& overrides = c.overrides;
  const int S = p.subgroup_size;
  // DPAS: the matrix engines' K; the instruction's M is 8 of the tile's columns.
  const bool dpas_types = (p.a_type == p.b_type && (p.a_type == ir::ScalarType::f16 || p.a_type == ir::ScalarType::bf16) &&
                           p.dtype == ir::ScalarType::f32) ||
                          ((p.a_type == ir::ScalarType::i8 || p.a_type == ir::ScalarType::u8) &&
                           (p.b_type == ir::ScalarType::i8 || p.b_type == ir::ScalarType::u8) && p.dtype == ir::ScalarType::i32);
  auto mode = [&](const char* key, bool has, const char* what) {
    auto it = overrides.find(key);
    if (it == overrides.end()) return has ? 1 : 0;
    if (it->second < 0 || it->second > 2)
      throw UserError(cat("plan override ", key, "=", it->second, " must be 0 (off), 1 (on) or 2 (emulated)"));
    if (it->second == 1 && !has)
      throw UserError(cat("plan override ", key, "=1: ", target.device, " does not report ", what,
                          " (", key, "=2 emulates it; coopjit.spirv.compile_gemm(..., target='xe-hpc') generates it)"));
    return static_cast<int>(it->second);
  };
  p.dpas = mode("dpas", target.dpas && dpas_types && S == 16, "DPAS at subgroup size 16 (cl_intel_subgroup_matrix_multiply_accumulate)");
  p.block2d = mode("block2d", target.block2d && S == 16, "2-D block I/O at subgroup size 16 (cl_intel_subgroup_2d_block_io)");
  if (p.dpas && !dpas_types)
    throw UserError(cat("plan dpas=", p.dpas, ": DPAS takes f16 or bf16 inputs with f32 accumulators, or i8 / u8 inputs with "
                        "i32 accumulators, not ", ir::name(p.a_type), " x ", ir::name(p.b_type), " -> ", ir::name(p.dtype)));
  if (p.dpas) p.kb = dpas_k(p);
}

void plan_gpu_mma(GpuGemmPlan& p, const GpuPlanContext& c) {
  const GpuTargetInfo& target = c.target;
  const int S = p.subgroup_size;
  // NVIDIA tensor cores for bf16 / f16 -> f32: K steps of one instruction's K (16).
  const bool mma_types = p.a_type == p.b_type && (p.a_type == ir::ScalarType::f16 || p.a_type == ir::ScalarType::bf16) &&
                         p.dtype == ir::ScalarType::f32;
  p.nvidia = target.mma;
  // A product of one 16 x 16 x 16 step at most (stacks of tiny matrices): FMAs on CUDA cores, whose
  // kernel is shorter than the tensor-core path's (measured on the H200, 4096 stacked bf16 16^3
  // products: 22.2 us with mma.sync and the pipeline, 65 us with mma.sync alone, 10.4 us on FMAs;
  // torch.bmm 16.6 us; benchmarks/recorded/issue15-h200-device-arrays.md).
  const bool tiny = c.M <= 16 && c.N <= 16 && c.spec.K <= 16;
  p.mma = target.mma && mma_types && S == 32 && !tiny ? 1 : 0;
  if (auto it = c.overrides.find("mma"); it != c.overrides.end()) {
    if (it->second != 0 && it->second != 1) throw UserError(cat("plan override mma=", it->second, " must be 0 or 1"));
    if (it->second == 1 && !(target.mma && mma_types))
      throw UserError(cat("plan override mma=1: mma.sync needs an NVIDIA target (", target.device,
                          ") and bf16 or f16 inputs with f32 accumulators"));
    p.mma = static_cast<int>(it->second);
  }
  // The accumulator S x nr (not 2S): the fragment moves of simt_mma.cpp then fit in registers
  // (ptxas for sm_90: 179 registers, no spills at 32 x 32, spills at 64 x 32).
  if (p.mma) p.kb = 16, p.mr = S;
}

// The pipeline (gpu_plan.h) where the operands allow it: warp tiles up to 64 x 64 (128 f32
// accumulators a lane), 2 x 2 warps a block (a 128 x 128 tile), K steps of 32, 3 stages of
// 16 KiB (48 KiB: the static shared memory limit).
void plan_gpu_pipeline(GpuGemmPlan& p, const GpuPlanContext& c) {
  const GemmSpec& spec = c.spec;
  const GpuTargetInfo& target = c.target;
  const PlanOverrides& overrides = c.overrides;
  const bool col = c.col;
  const int64_t M = c.M, N = c.N;
  const int S = p.subgroup_size;
  const int64_t K = spec.K;
  const int64_t a_rs = col ? spec.sb_c : spec.sa_r, a_cs = col ? spec.sb_r : spec.sa_c;  // kernel A (M x K)
  const int64_t b_rs = col ? spec.sa_c : spec.sb_r, b_cs = col ? spec.sa_r : spec.sb_c;  // kernel B (K x N)
  p.unit_bn = b_cs == 1 && b_rs != 1;
  // 8-bit integers (mma.sync m16n8k32 s8 / u8 -> s32): ldmatrix without .trans, so both
  // operands contiguous along K.
  const bool int8 = (p.a_type == ir::ScalarType::i8 || p.a_type == ir::ScalarType::u8) &&
                    (p.b_type == ir::ScalarType::i8 || p.b_type == ir::ScalarType::u8) && p.dtype == ir::ScalarType::i32;
  // f32 / f64 (no TF32): the same staging, FMAs on CUDA cores from shared memory.
  const bool fma = target.mma && S == 32 && p.a_type == p.b_type && p.a_type == p.dtype &&
                   (p.dtype == ir::ScalarType::f32 || p.dtype == ir::ScalarType::f64);
  const int64_t e = 16 / ir::size_in_bytes(p.a_type);  // elements a 16-byte chunk
  const bool a_ok = (a_rs == 1 && a_cs % e == 0 && M % e == 0 && !int8) || (a_cs == 1 && a_rs % e == 0 && K % e == 0);
  const bool b_ok = (b_rs == 1 && b_cs % e == 0 && K % e == 0) || (b_cs == 1 && b_rs % e == 0 && N % e == 0 && !int8);
  const bool batch_ok = spec.sa_b1 % e == 0 && spec.sa_b2 % e == 0 && spec.sb_b1 % e == 0 && spec.sb_b2 % e == 0;
  auto ov = overrides.find("stages");
  auto mo = overrides.find("mma");
  const bool int8_mma = int8 && target.mma && S == 32 && (mo == overrides.end() || mo->second != 0);
  if ((p.mma || int8_mma || fma) && a_ok && b_ok && batch_ok && (ov == overrides.end() || ov->second != 0)) {
    const int64_t most = p.dtype == ir::ScalarType::f64 ? 32 : 64;  // f64: 32 x 32 (64 registers of accumulators)
    auto warp_tile = [&](int64_t n) { return std::min<int64_t>(most, n <= 16 ? 16 : n <= 32 ? 32 : 64); };
    p.mma = fma ? 0 : 1;
    p.stages = 3;
    p.mr = warp_tile(M), p.nr = warp_tile(N);
    if (fma && p.dtype == ir::ScalarType::f32) p.mr = std::max(p.mr, 32);  // 8 lanes of 4-element vectors down M
    p.sg_m = M > p.mr ? 2 : 1, p.sg_n = N > p.nr ? 2 : 1;
    p.kb = static_cast<int>((K <= 16 || p.dtype == ir::ScalarType::f64 ? 16 : 32) * (int8 ? 2 : 1));  // K steps of 32 (64) bytes
    // 4 stages where the block may have their shared memory (64 KiB at 128 x 128 x 32: dynamic
    // shared memory beyond the static 48 KiB), else 3.
    const int64_t stage = (int64_t(p.mr) * p.sg_m + int64_t(p.nr) * p.sg_n) * p.kb * ir::size_in_bytes(p.a_type);
    p.stages = 4 * stage <= target.shared_bytes ? 4 : 3;
    // FMA: f32 K steps of 8 (ptxas: 255 registers, no spills; 16 spill), 4 stages of 8 KiB;
    // f64 32 x 32 warp tiles, K steps of 16, 3 stages of 16 KiB.
    // A K-contiguous f32 operand goes through registers (simt_mma_pipeline.cpp), its stage slots
    // written one step ahead. Where that is B alone (a row-major A @ B, the common case) 3 stages
    // (H200, session 31, 4096^3 / 8192^3: 0.911x / 0.922x cuBLAS against 4 stages' 0.891x /
    // 0.901x, the same run; kb 16 0.867x); a K-contiguous A (a @ b.T, a.T @ b.T) was 1.0-1.3%
    // slower with 3 stages than with 4 (two runs), and keeps 4.
    if (fma && p.dtype == ir::ScalarType::f32) p.kb = 8, p.stages = b_rs == 1 && a_cs != 1 ? 3 : 4;
    if (fma && p.dtype == ir::ScalarType::f64) p.stages = 3;
    // Each work-item copies whole 16-byte chunks of both panels (check_gpu_tile): f32 N tiles of 16
    // (N <= 16) give B's panel 32 chunks a stage, too few for 2 x 1 warps: one warp down M there
    // (16x4096x1024 f32 on sm_90 was refused by the planner's own check).
    const bool shaped = names_tile(overrides) || overrides.count("kb");  // (a plan naming its tile keeps it, checked as named)
    if (!shaped && !panel_chunks_whole(p) && p.sg_m > 1) p.sg_m = 1;
    if (!shaped && !panel_chunks_whole(p) && p.sg_n > 1) p.sg_n = 1;
  }
}

// Hopper (gpu_plan.h): bf16 / f16 pipelines on warpgroups, 128 x 256 blocks of 2 warpgroups
// (64 x 256 each, 128 f32 accumulators a work-item), K steps of 64, 4 stages of 48 KiB; smaller
// blocks where the matrix is smaller (plan_gpu_hopper_tile: the tile for the waves, the stages).
void plan_gpu_wgmma(GpuGemmPlan& p, const GpuPlanContext& c) {
  const GpuTargetInfo& target = c.target;
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M, N = c.N;
  const int S = p.subgroup_size;
  // 8-bit operands (s8 / u8 -> s32, wgmma m64nNk32) where the pipeline is planned: both
  // operands contiguous along K (the int8 pipeline's condition; 8-bit wgmma has no transpose).
  const bool wg_int8 = (p.a_type == ir::ScalarType::i8 || p.a_type == ir::ScalarType::u8) &&
                       (p.b_type == ir::ScalarType::i8 || p.b_type == ir::ScalarType::u8) && p.dtype == ir::ScalarType::i32;
  const bool wg_ok = target.wgmma && p.mma && p.stages && S == 32 &&
                     ((p.a_type == p.b_type && p.dtype == ir::ScalarType::f32 &&
                       (p.a_type == ir::ScalarType::bf16 || p.a_type == ir::ScalarType::f16)) ||
                      wg_int8);
  auto wo = overrides.find("wgmma");
  auto so = overrides.find("stages");
  if (wo != overrides.end() && wo->second != 0 && wo->second != 1)
    throw UserError(cat("plan override wgmma=", wo->second, " must be 0 or 1"));
  if (wo != overrides.end() && wo->second == 1 && (!wg_ok || (so != overrides.end() && so->second == 0)))
    throw UserError(cat("plan override wgmma=1: wgmma needs an sm_90 target (", target.device,
                        ") and bf16 or f16 inputs with f32 accumulators, or int8 / uint8 inputs with int32 accumulators, "
                        "whose strides allow the pipeline (stages)"));
  // By default where the matrix fills a warpgroup's 64 x 64 at least (mma.sync's smaller tiles
  // waste less on smaller ones).
  const bool on = wo != overrides.end() ? wo->second == 1
                                        : wg_ok && kWgmmaDefault && M >= 64 && N >= 64 && (so == overrides.end() || so->second != 0);
  if (on) {
    p.wgmma = 1;
    p.mr = 16, p.sg_m = M > 64 ? 8 : 4;
    p.nr = N > 128 ? 256 : N > 64 ? 128 : 64, p.sg_n = 1;
    p.kb = wg_int8 ? 128 : 64;  // K-major rows of 128 bytes either way
    // 8-bit: N tiles of 256 as for 16-bit (a warp's B 128 x 256 = 32 KiB: the verifier's limits
    // on 8-bit matrices are twice the elements), 128 s32 accumulators a work-item. Before (session
    // 10-12) two warpgroups of 64 x 128 side by side (4 warpgroups, sg_n 2, 64 accumulators): on
    // the H100 (CUDA graphs, benchmarks/recorded/issue16-h100-int8-session13.md) 4096^3 114 us
    // against 103 with the warp-specialized kernel (99 persistent), 8192^3 816 against 760 (750).
  }
}

void plan_gpu_tma(GpuGemmPlan& p, const GpuPlanContext& c) {
  auto to = c.overrides.find("tma");
  if (to != c.overrides.end() && to->second != 0 && to->second != 1)
    throw UserError(cat("plan override tma=", to->second, " must be 0 or 1"));
  if (to != c.overrides.end() && to->second == 1 && !p.wgmma)
    throw UserError("plan override tma=1: the Tensor Memory Accelerator feeds the wgmma pipeline (an sm_90 target, bf16 / f16 "
                    "inputs whose strides allow it, wgmma not turned off)");
  // Batched products keep cp.async (a 2-D tensor map describes one matrix).
  p.tma = p.wgmma && (to != c.overrides.end() ? to->second == 1 : kTmaDefault && c.spec.batch1 * c.spec.batch2 == 1);
}

// The epilogue's staging: each warp's region, the largest of 3072, 1536, 768 bytes that fits
// after the stages, or in them (epi_alias: ws DP plans of one tile a block; kWideFourStages).
void plan_gpu_epilogue(GpuGemmPlan& p, const GpuPlanContext& c) {
  const GemmSpec& spec = c.spec;
  const GpuTargetInfo& target = c.target;
  auto eo = c.overrides.find("epi_smem");
  if (eo != c.overrides.end() && (eo->second < 0 || eo->second > 1))
    throw UserError(cat("plan override epi_smem=", eo->second, " must be 0 (no) or 1 (yes)"));
  auto so = c.overrides.find("tma_store");
  if (so != c.overrides.end() && (so->second < 0 || so->second > 2))
    throw UserError(cat("plan override tma_store=", so->second, " must be 0 (no), 1 (yes) or 2 (boxes of a warpgroup)"));
  const bool staged = eo != c.overrides.end() ? eo->second != 0 : kEpiSmemDefault;
  int fit = 0, fit_tma = 0;
  const int64_t limit = std::max<int64_t>(48 * 1024, target.shared_bytes);
  // epi_alias: the staging in the stage slots where the block has one tile (its producer copies
  // no next tile's steps into them) and no partner block or Stream-K part writes them.
  auto ao = c.overrides.find("epi_alias");
  if (ao != c.overrides.end() && (ao->second < 0 || ao->second > 1))
    throw UserError(cat("plan override epi_alias=", ao->second, " must be 0 (no) or 1 (yes)"));
  const bool alias_ok = p.wgmma && p.tma && p.ws && !p.persistent && p.split == "dp" && !p.cluster && !p.sk_pair && staged &&
                        spec.batch1 * spec.batch2 == 1;
  if (ao != c.overrides.end() && ao->second == 1 && !alias_ok)
    throw UserError(cat("plan override epi_alias=1: the epilogue's staging in the stage slots needs a warp-specialized TMA plan (sm_90) of "
                        "one tile a block (data-parallel, not persistent, no cluster) whose epilogue is staged, not ws=", p.ws,
                        ", tma=", p.tma, ", persistent=", p.persistent, ", split ", p.split, ", cluster=", p.cluster, ", epi_smem ",
                        staged ? "on" : "off"));
  const int64_t stage = (16 * int64_t(p.sg_m) + int64_t(p.nr) * p.sg_n) * p.kb * ir::size_in_bytes(p.a_type);
  const bool four_fit = 4 * stage + 1024 + 16 * 4 <= limit;
  // kWideFourStages: 128 x 320 blocks (3 stages so that the staging fits after them) take 4
  // where the staging can go into them.
  const bool wide3 = p.nr * p.sg_n > 256 && p.stages == 3 && four_fit && !c.overrides.count("stages");
  p.epi_alias = ao != c.overrides.end() ? static_cast<int>(ao->second) : kWideFourStages && alias_ok && wide3 ? 1 : 0;
  if (p.epi_alias && wide3) p.stages = 4;
  if (p.wgmma) {
    const int64_t warps = int64_t(p.sg_m) * p.sg_n;
    const int64_t used = stage * p.stages + 1024 + (p.tma ? 16 * p.stages : 0);
    // (aliased: the regions from the slots' first byte, 1024-byte aligned, within the slots)
    auto fits = [&](int64_t e, bool aligned) {
      return p.epi_alias ? warps * e <= stage * p.stages : used + (aligned ? 1024 : 0) + warps * e <= limit;
    };
    for (int e : {3072, 1536, 768})
      if (fits(e, false)) {
        fit = e;
        break;
      }
    // TMA stores: one or two boxes of 2048 bytes a warp, the regions 1024-byte aligned (up to
    // 1024 bytes more); C of 2- or 4-byte elements. Fused epilogues too: their steps are computed on
    // the wgmma fragments (simt_wgmma.cpp, frag_like), which the staging takes as it takes alpha C.
    const int64_t c_bytes = ir::size_in_bytes(p.c_type);
    const bool c_ok = (c_bytes == 2 || c_bytes == 4) && p.c_type != ir::ScalarType::i16 && p.c_type != ir::ScalarType::u16 &&
                      p.c_type != ir::ScalarType::u32;
    if (p.tma && c_ok && spec.batch1 * spec.batch2 == 1)
      for (int e : {4096, 2048})
        if (fits(e, true)) {
          fit_tma = e;
          break;
        }
  }
  if (eo != c.overrides.end() && eo->second == 1 && !fit)
    throw UserError(cat("plan override epi_smem=1: the epilogue's staging needs a wgmma plan (sm_90) with at least 768 bytes a warp "
                        "of shared memory left after its ", p.stages, " stages, not wgmma=", p.wgmma));
  if (so != c.overrides.end() && so->second >= 1 && (!fit_tma || !staged))
    throw UserError(cat("plan override tma_store=", so->second, ": TMA stores of C need a wgmma TMA plan (sm_90, tma) of one unbatched product ",
                        "whose epilogue is staged (epi_smem, ", staged ? "on" : "off", ") with 2048 bytes a warp of shared memory "
                        "left after its ", p.stages, " stages, and C of bf16, f16, f32 or int32, not wgmma=", p.wgmma, ", tma=", p.tma,
                        ", batch=", spec.batch1 * spec.batch2, ", C ", ir::name(p.c_type)));
  p.tma_store = staged && fit_tma ? (so != c.overrides.end() ? static_cast<int>(so->second) : kTmaStoreDefault) : 0;
  p.epi_smem = staged ? (p.tma_store ? fit_tma : fit) : 0;
}

}  // namespace coopjit
