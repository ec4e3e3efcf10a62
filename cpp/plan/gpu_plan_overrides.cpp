// The GPU planner's overrides of the tile (gpu_plan_internal.h): the caller's fields in place of the
// defaults the instruction and tile phases chose, each checked for range, then the tile checked
// against the instructions it feeds; and the work-group's size against the target's.
#include "core/error.h"
#include "ir/verifier.h"
#include "plan/gpu_plan_internal.h"

namespace coopjit {

// The most accumulator registers (4 bytes) a work-item's tile may take (check_gpu_tile).
constexpr int64_t kMaxAccumulatorRegisters = 512;

void apply_gpu_overrides(GpuGemmPlan& p, const GpuPlanContext& c) {
  const PlanOverrides& overrides = c.overrides;
  if (auto it = overrides.find("group_m"); it != overrides.end()) {
    if (it->second < 0 || it->second > 256)
      throw UserError(cat("plan override group_m=", it->second, " is out of range [0, 256] (0: the tiles walk down M)"));
    p.group_m = static_cast<int>(it->second);
  }
  if (auto it = overrides.find("stages"); it != overrides.end()) {
    if (it->second != 0 && (it->second < 2 || it->second > 8))
      throw UserError(cat("plan override stages=", it->second, ": 0 (no pipeline) or 2..8 on an mma plan whose operands allow it"));
    if (it->second != 0 && !p.stages)
      throw UserError(cat("plan override stages=", it->second, ": the pipeline needs unit-stride operands whose other strides and "
                          "contiguous extents are multiples of 8 elements"));
    p.stages = static_cast<int>(it->second);
  }

  for (const auto& [k, v] : overrides) {
    if (k == "layout" || k == "dpas" || k == "block2d" || k == "mma" || k == "split" || k == "workers" || k == "stages" || k == "wgmma" ||
        k == "tma" || k == "group_m" || k == "ws" || k == "kmajor" || k == "epi_smem" || k == "epi_alias" || k == "persistent" || k == "sk_flags" ||
        k == "tma_store" || k == "sk_down" || k == "sk_trace" || k == "sk_prefetch" || k == "sk_stage" || k == "sk_stage_store" || k == "sk_one_release" || k == "sk_pair" || k == "cluster")
      continue;
    int* field = k == "mr" ? &p.mr : k == "nr" ? &p.nr : k == "kb" ? &p.kb : k == "sg_m" ? &p.sg_m
               : k == "sg_n" ? &p.sg_n : k == "subgroup_size" ? &p.subgroup_size : k == "kt" ? &p.kt : nullptr;
    if (!field)
      throw UserError(cat("unknown GPU plan override '", k, "' (known: layout, subgroup_size, mr, nr, kb, sg_m, sg_n, dpas, block2d, mma, stages, wgmma, tma, ws, epi_smem, epi_alias, tma_store, persistent, sk_flags, sk_down, sk_trace, sk_prefetch, sk_stage, sk_stage_store, sk_one_release, sk_pair, group_m, cluster, kmajor, split, kt, workers)"));
    // (kt, the Stream-K K tile, is K elements: the planner's own is 8 K steps, 512 for kb 64)
    // (nr up to 512 on wgmma plans: their 128 x 320 blocks, check_gpu_tile; other tiles stop at 256)
    const bool kt = k == "kt";
    const int64_t most = kt ? int64_t(1) << 30 : k == "nr" && p.wgmma ? 512 : 256;
    if (v < 1 || v > most)
      throw UserError(cat("plan override ", k, "=", v, " is out of range [1, ", kt ? "2^30" : std::to_string(most), "]"));
    *field = static_cast<int>(v);
  }
  // wgmma blocks wider than 256 (128 x 320): 3 stages unless named, so that the epilogue's staging
  // fits after them (4 would leave it none; one-tile blocks take 4 with the staging in the slots:
  // plan_gpu_epilogue, kWideFourStages).
  if (p.wgmma && p.nr > 256 && p.stages > 3 && !overrides.count("stages")) p.stages = 3;
}

void check_gpu_tile(const GpuGemmPlan& p, const GpuPlanContext& c) {
  const GpuTargetInfo& target = c.target;
  if (!pow2(p.subgroup_size) ||
      (!target.subgroup_sizes.empty() &&
       std::find(target.subgroup_sizes.begin(), target.subgroup_sizes.end(), p.subgroup_size) == target.subgroup_sizes.end()))
    throw UserError(cat("plan subgroup_size=", p.subgroup_size, " is not one of ", target.device, "'s subgroup sizes"));
  if (!pow2(p.mr)) throw UserError(cat("plan mr=", p.mr, " must be a power of two (the coopmatrix layout's M)"));
  if (p.kb < 4 || p.kb > 128 || !pow2(p.kb))
    throw UserError(cat("plan kb=", p.kb, " must be a power of two in [4, 128] (the K rule of subgroup scope matrices)"));
  if ((p.dpas || p.block2d) && p.subgroup_size != 16)
    throw UserError(cat("plan dpas / block2d need subgroup_size 16, not ", p.subgroup_size));
  if (p.dpas && (p.mr % 16 != 0 || p.kb % dpas_k(p) != 0 || (p.nr % 8 != 0 && p.nr != 1 && p.nr != 2 && p.nr != 4)))
    throw UserError(cat("plan dpas: mr=", p.mr, " must be a multiple of 16, kb=", p.kb, " of ", dpas_k(p),
                        ", nr=", p.nr, " a multiple of 8 or 1, 2, 4 (the instruction's N, K and M)"));
  if (p.mma && (p.subgroup_size != 32 || p.mr % 16 != 0 || p.nr % 8 != 0 || p.kb % 16 != 0))
    throw UserError(cat("plan mma: subgroup_size 32, mr a multiple of 16, nr of 8 and kb of 16 (the instruction's M, N, K), not ",
                        p.subgroup_size, ", ", p.mr, ", ", p.nr, ", ", p.kb));
  if (p.stages) {
    const int64_t panels = (int64_t(p.mr) * p.sg_m + int64_t(p.nr) * p.sg_n) * p.kb;
    const int64_t esz = ir::size_in_bytes(p.a_type);
    // (TMA plans' copies are not split among the work-items: B's panel any multiple of 8 rows, below)
    const bool chunks = !(p.wgmma && p.tma);
    if (p.mr % 16 || (chunks && p.nr % 16) || (p.mma && p.kb % (32 / esz)) || (chunks && !panel_chunks_whole(p)) ||
        (panels * esz + fma_stage_pad(p)) * p.stages > std::max<int64_t>(48 * 1024, target.shared_bytes))
      throw UserError(cat("plan stages=", p.stages, ": mr=", p.mr, ", nr=", p.nr, " multiples of 16, kb=", p.kb,
                          " of 16, the panels whole 16-byte chunks per work-item, and ", p.stages,
                          " stages of them within ", std::max<int64_t>(48 * 1024, target.shared_bytes), " bytes of shared memory"));
  }
  if (p.wgmma) {
    const int64_t esz = ir::size_in_bytes(p.a_type), kb_want = 128 / esz;  // kb: 64 (16-bit), 128 (8-bit)
    const int64_t bytes = (16 * int64_t(p.sg_m) + int64_t(p.nr) * p.sg_n) * p.kb * esz * p.stages + 1024 + (p.tma ? 16 * p.stages : 0);
    // nr: wgmma's n, a multiple of 64 (B's N-major panels: atoms of 64 columns); with TMA and a
    // K-major B (unit_b) any multiple of 8 (wgmma's n; B's boxes of nr rows, C's epilogue stores
    // staged in pieces of 16 columns or lane by lane, simt_wgmma.cpp)
    // (128-row tiles or fewer: 192-row ones have 128 registers a work-item, and 192 x 216 did not
    // assemble (ptxas: insufficient registers), 192 x 200 spilled 364 bytes and ran at 0.99x 192 x 192)
    // nr past 256 (two wgmmas a K slice, simt_wgmma.cpp; up to 384): TMA plans of two consumer
    // warpgroups (sg_m 8, sg_n 1), whose warp-specialized kernel (ws 2, check_gpu_work_group)
    // raises their registers with setmaxnreg (an N-major B in pieces of whole 64-column atoms).
    const int nr_unit = p.tma && p.unit_b && p.sg_n == 1 && p.sg_m <= 8 ? 8 : 64;
    const bool wide_ok = p.nr <= 256 || (p.nr <= 384 && p.tma && p.sg_m == 8 && p.sg_n == 1);
    if (p.mr != 16 || p.sg_m % 4 || p.nr % nr_unit || !wide_ok || p.kb != kb_want || p.stages < 2 ||
        bytes > std::max<int64_t>(48 * 1024, target.shared_bytes))
      throw UserError(cat("plan wgmma: mr=16, sg_m a multiple of 4, nr a multiple of 64 (of 8 with TMA, K-major B, sg_n 1 and sg_m up to 8) up to 256 "
                          "(up to 384 with TMA, sg_m 8 and sg_n 1), kb=", kb_want, " and 2..8 stages "
                          "within ", std::max<int64_t>(48 * 1024, target.shared_bytes), " bytes of shared memory, not mr=", p.mr,
                          ", sg_m=", p.sg_m, ", nr=", p.nr, ", sg_n=", p.sg_n, ", tma=", p.tma, ", kb=", p.kb, ", stages=", p.stages, " (", bytes, " bytes)"));
  }
  // The subgroup's accumulator tile (SIMT, DPAS and mma.sync plans; wgmma's are the warpgroup's):
  // an mr x nr matrix that the lowering unrolls into each work-item's registers, mr x nr /
  // subgroup_size components a work-item (two 4-byte registers each for 8-byte types). Checked here,
  // before any code is generated: the kernel IR's size limits (ir/verifier.h; opencl:0's
  // 256 x 256 tile was refused only by the IR verifier), then the registers: past twice the largest
  // register file a work-item has (256 registers in Xe-HPC's large-GRF mode; NVIDIA's 255) the
  // accumulators live in memory, and the kernel takes minutes to compile (opencl:0, 256^3 f32,
  // subgroup 16, CPU time on the 2-core Zen 5: 32 x 32 (64 a work-item) the planner's, 64 x 32 (128)
  // 7 s, 64 x 64 / 128 x 32 / 32 x 128 (256) 14-19 s, 128 x 128 (1024) 51-70 s).
  if (!p.wgmma) {
    const int64_t elems = int64_t(p.mr) * p.nr;
    const bool bytes8 = ir::size_in_bytes(p.a_type) == 1 && ir::size_in_bytes(p.b_type) == 1;
    const int64_t max_macs = bytes8 ? 2 * ir::kMaxMulAdds : ir::kMaxMulAdds;
    struct Operand { const char* what; const char* dims; int64_t rows, cols; ir::ScalarType t; };
    for (const Operand& m : {Operand{"accumulator", "mr x nr", p.mr, p.nr, p.dtype}, Operand{"A", "mr x kb", p.mr, p.kb, p.a_type},
                             Operand{"B", "kb x nr", p.kb, p.nr, p.b_type}}) {
      const int64_t limit = ir::size_in_bytes(m.t) == 1 ? 2 * ir::kMaxRegisterElements : ir::kMaxRegisterElements;
      if (m.rows * m.cols > limit)
        throw UserError(cat("plan tile mr=", p.mr, " nr=", p.nr, " kb=", p.kb, ": a subgroup's ", m.what, " matrix of ", m.dims,
                            " = ", m.rows * m.cols, " elements; at most ", limit,
                            " (the kernel IR's limit on a matrix computed on in registers)"));
    }
    if (elems * p.kb > max_macs)
      throw UserError(cat("plan tile mr=", p.mr, " nr=", p.nr, " kb=", p.kb, ": a K step of mr x nr x kb = ", elems * p.kb,
                          " multiply-adds; at most ", max_macs, " (the kernel IR's limit on one mul_add, unrolled into "
                          "registers): lower kb"));
    const int64_t words = std::max<int64_t>(1, ir::size_in_bytes(p.dtype) / 4);
    const int64_t regs = elems * words / p.subgroup_size;
    if (regs > kMaxAccumulatorRegisters)
      throw UserError(cat("plan tile mr=", p.mr, " nr=", p.nr, " with subgroup_size ", p.subgroup_size, ": ", regs,
                          " accumulator registers a work-item (mr x nr / subgroup_size", words > 1 ? " x 2 for 8-byte values" : "",
                          "); at most ", kMaxAccumulatorRegisters, " (twice the largest register file of a work-item, 256 "
                          "registers): lower mr or nr (raise sg_m / sg_n to keep the work-group's tile)"));
  }
}

void check_gpu_work_group(const GpuGemmPlan& p, const GpuPlanContext& c) {
  if (p.work_group_size() + (p.ws == 2 ? 128 : p.ws ? 32 : 0) > c.target.max_work_group_size)
    throw UserError(cat("plan work-group of ", p.sg_m, " x ", p.sg_n, " subgroups of ", p.subgroup_size, " = ",
                        p.work_group_size(), " work-items exceeds ", c.target.device, "'s maximum ", c.target.max_work_group_size));
  // wgmma plans: each warp's mr x nr accumulators live in its threads' registers for the whole K loop;
  // ptxas gives a launch of T threads at most 65536 / T registers a thread (a multiple of 8, 255 at
  // most) and fails ("Insufficient registers") when those and some 32 more (addresses, loop state,
  // descriptors) do not fit. Measured on the H100 (session 26): col sg_m 20 nr 128 ws 2 (768
  // work-items, 80 registers, 64 accumulators) failed; sg_m 16 nr 128 ws 2 (640, 96, 64) and
  // sg_m 12 nr 192 ws 2 (512, 128, 96) assemble; 192 x 216 (128, 108) did not (session 17).
  // The warp-specialized kernel of a producer warpgroup and two consumer warpgroups (ws 2, 8
  // consumer warps) moves registers to the consumers (setmaxnreg, simt_tma_ws.cpp: kConsumerRegs
  // 224 each); nr past 256 needs it.
  if (p.wgmma && p.nr > 256 && !(p.ws == 2 && p.work_group_size() == 256))
    throw UserError(cat("plan wgmma nr=", p.nr, ": tiles wider than 256 need the warp-specialized kernel of a producer warpgroup "
                        "(ws 2) and two consumer warpgroups (sg_m 8, sg_n 1), not ws=", p.ws, ", sg_m=", p.sg_m, ", sg_n=", p.sg_n));
  // (a fused epilogue's per-element steps are unrolled over a warp's 16 x nr accumulators: the
  // kernel IR's limit is 4096 elements, nr 256)
  if (p.wgmma && p.nr > 256 && p.epilogue.any())
    throw UserError(cat("plan wgmma nr=", p.nr, ": a fused epilogue (bias, scale, activation, residual) runs on tiles of nr 256 or "
                        "less (its steps are unrolled over a warp's 16 x nr accumulators, at most 4096 elements)"));
  // (wider than 256: B's rows load in TMA boxes of tma_box_rows (64 rows past 256), which must
  // divide them, as the lowering requires (simt_wgmma.cpp); 320 and 384 do. Other widths of a
  // K-major B (multiples of 8: 264 ... 376) passed the checks above and failed in the lowering
  // with an internal error, "the K loop planned for wgmma does not match its pipeline"; session 28)
  if (p.wgmma && p.tma && p.nr > 256 && int64_t(p.nr) * p.sg_n % p.tma_box_rows(false))
    throw UserError(cat("plan wgmma nr=", p.nr, ": tiles wider than 256 load B in TMA boxes of ", p.tma_box_rows(false),
                        " rows, which must divide its ", int64_t(p.nr) * p.sg_n, " rows (nr 320 or 384)"));
  if (p.wgmma) {
    const int64_t threads = p.work_group_size() + (p.ws == 2 ? 128 : p.ws ? 32 : 0);
    const int64_t regs = p.ws == 2 && p.work_group_size() == 256 ? 224 : std::min<int64_t>(255, 65536 / threads / 8 * 8);
    const int64_t acc = int64_t(p.mr) * p.nr * ir::size_in_bytes(p.dtype) / 4 / p.subgroup_size;
    if (acc + 32 > regs)
      throw UserError(cat("plan wgmma tile mr=", p.mr, " nr=", p.nr, " with sg_m=", p.sg_m, " sg_n=", p.sg_n, " and ws=", p.ws,
                          ": ", threads, " work-items a block leave ", regs, " registers a work-item, fewer than its ", acc,
                          " accumulator registers and 32 more: lower sg_m or nr"));
  }
}

}  // namespace coopjit
