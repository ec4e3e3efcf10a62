// The GPU planner's tile phases (gpu_plan_internal.h): the orientation whose tiles carry less work
// over their waves (Hopper), the subgroup size and the SIMT register tile, and Hopper's tiles.
#include "core/error.h"
#include "plan/gpu_plan_internal.h"

namespace coopjit {

// The orientation (kOrientByWaves): both layouts planned, the other taken where it is a DP plan
// whose waves carry less tile area than this one's (gpu_tile_work: the tiles' measured rates, this
// one's 2-tile SK + DP counted as measured, sk_waves).
// Nothing (plan this product as its strides orient it) where the rule does not apply.
std::optional<GpuGemmPlan> plan_gpu_orient_by_waves(const GemmSpec& spec, const GpuTargetInfo& target,
                                                    const PlanOverrides& overrides) {
  if (!kOrientByWaves || !target.wgmma || overrides.count("layout") || names_tile(overrides)) return std::nullopt;
  const int by_strides = (spec.sc_c == 1) + (spec.sb_c == 1) >= (spec.sc_r == 1) + (spec.sa_r == 1) ? 1 : 0;  // 1: col
  PlanOverrides o = overrides;
  o["layout"] = by_strides;
  GpuGemmPlan p0 = plan_gpu_gemm(spec, target, o);
  // (full tiles only, 128 x 256 or 192 x 192: the rate a tile element measured alike; the smaller
  // tiles of small products keep the strides' layout)
  // (a cluster the caller asked for keeps the strides' layout; one the planner chose, kClusterWideTile, does not)
  auto orientable = [&](const GpuGemmPlan& q) {
    return q.wgmma && q.tma && q.ws && !q.kmajor && ir::size_in_bytes(q.a_type) == 2 && (!q.cluster || !overrides.count("cluster")) &&
           int64_t(q.mr) * q.sg_m * q.nr * q.sg_n >= (kNTileByWaves ? 128 * 128 : 128 * 256);
  };
  if (!orientable(p0)) return p0;
  o["layout"] = 1 - by_strides;
  GpuGemmPlan p1;
  try {
    p1 = plan_gpu_gemm(spec, target, o);
  } catch (const UserError&) {
    return p0;
  }
  // A plan's kernel M and N (the product's N and M in layout col) and its tile.
  struct Cut {
    int64_t km, kn, mt, nt;
  };
  auto cut = [&](const GpuGemmPlan& q) {
    const bool col = q.layout == "col";
    return Cut{col ? spec.N : spec.M, col ? spec.M : spec.N, int64_t(q.mr) * q.sg_m, int64_t(q.nr) * q.sg_n};
  };
  auto edges = [&](const GpuGemmPlan& q) {
    const Cut t = cut(q);
    return t.km % t.mt != 0 || t.kn % t.nt != 0;
  };
  // (and only whole tiles: 4200x1000 took row's 132 tiles with edges both ways and ran them at 468
  // TFLOP/s against the strides' 192 x 192 plan's 563 on the H100, session 18, where 4224x1024's
  // whole tiles ran at cuBLAS's rate)
  // (kWideEdgeOneWave: or the N-tile rule's 128 x 320 with an edge along the kernel's N, its tiles one wave)
  auto whole = [&](const GpuGemmPlan& q) {
    const Cut t = cut(q);
    if (t.km % t.mt) return false;
    return t.kn % t.nt == 0 || (kWideEdgeOneWave && t.mt == 128 && t.nt == 320 && spec.batch1 * spec.batch2 == 1 &&
                                (t.km / t.mt) * ((t.kn + t.nt - 1) / t.nt) <= std::max<int64_t>(1, q.workers));
  };
  // (or its SK + DP of whole 128 x 256 tiles after 3-7 full waves, kSkDpCostFewWaves)
  auto few_waves_sk = [&](const GpuGemmPlan& q) {
    const Cut t = cut(q);
    const int64_t tiles_k = q.kt > 0 ? (spec.K + q.kt - 1) / q.kt : 0;
    return kSkDpCostFewWaves && q.split == "sk+dp" && spec.batch1 * spec.batch2 == 1 &&
           ws16_streams_whole(t.km, t.kn, t.mt, t.nt, tiles_k, std::max<int64_t>(1, q.workers));
  };
  if (!orientable(p1) || !whole(p1) || (p1.split != "dp" && !few_waves_sk(p1))) return p0;
  const double w0 = gpu_tile_work(p0, spec), w1 = gpu_tile_work(p1, spec);
  // (where both carry the same work with 128 x 320 tiles, one wave each way, the one without edge tiles)
  const bool wide_tie = kWideEdgeOneWave && w1 == w0 && cut(p0).nt == 320 && cut(p1).nt == 320 && edges(p0) && !edges(p1);
  // (p1 with an edge, kWideEdgeOneWave: by the N-tile rule's 3% margin; 5120x832x4096's one wave of
  // row 128 x 320, 0.98 of col 128 x 256 SK + DP's work, ran 59.5 us against its 57.7, H200)
  // (p1 SK + DP after 3-7 full waves, kSkDpCostFewWaves: by the same margin; 6016x5376x8192's row SK
  // + DP, 0.98 of col 128 x 256 DP's work with edges, ran 703.9 us against its 678.9, H200)
  return (edges(p1) || p1.split != "dp" ? w1 < 0.97 * w0 : w1 < w0) || wide_tie ? p1 : p0;
}

void plan_gpu_simt_tile(GpuGemmPlan& p, const GpuPlanContext& c) {
  p.subgroup_size = choose_subgroup(c.target);
  const int S = p.subgroup_size;
  const bool wide = ir::size_in_bytes(c.spec.dtype) >= 8;  // f64: two registers per component
  // The tile (see gpu_plan.h for the register budget), no taller or wider than the matrix needs.
  p.mr = 2 * S;
  if (c.M <= S) p.mr = S;
  p.nr = wide ? 16 : 32;
  if (c.N <= 8) p.nr = 8;
  else if (c.N <= 16) p.nr = 16;
  p.kb = wide ? 4 : 8;
  p.sg_m = c.M > p.mr ? 2 : 1;
  p.sg_n = c.N > p.nr ? 2 : 1;
}

// wgmma plans (plan_gpu_wgmma: 128 x 256 blocks, smaller where the matrix is smaller): the tile
// for the product's waves, then the stages that fit the shared memory.
void plan_gpu_hopper_tile(GpuGemmPlan& p, const GpuPlanContext& c) {
  if (!p.wgmma) return;
  const GemmSpec& spec = c.spec;
  const GpuTargetInfo& target = c.target;
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M, N = c.N;
  const bool wg_int8 = (p.a_type == ir::ScalarType::i8 || p.a_type == ir::ScalarType::u8) &&
                       (p.b_type == ir::ScalarType::i8 || p.b_type == ir::ScalarType::u8) && p.dtype == ir::ScalarType::i32;
  // 8-bit products of few 128 x 256 tiles (under half the SMs): the largest smaller block that
  // gives at least half the SMs a tile, 64 x 256 or 64 x 128 (one warpgroup). There, 1024^3 on
  // the ws kernel ran 5.0 us in 64 x 128 blocks (128 tiles), 6.3 in 64 x 256 (64), 10.5 in
  // 128 x 256 (32; `torch._int_mm` 6.0).
  const bool shaped = names_tile(overrides);
  auto tiles_of = [&](int64_t mt, int64_t nt) { return spec.batch1 * spec.batch2 * ((M + mt - 1) / mt) * ((N + nt - 1) / nt); };
  if (wg_int8 && !shaped && p.sg_m == 8 && 2 * tiles_of(128, p.nr) < target.compute_units) {
    if (p.nr == 256 && 2 * tiles_of(64, 256) >= target.compute_units) p.sg_m = 4;
    else p.sg_m = 4, p.nr = std::min(p.nr, 128);
  }
  // 16-bit products whose 192 x 192 tiles (three consumer warpgroups of 64 x 192, the
  // warp-specialized kernel, plan_gpu_ws) carry less work a block than 128 x 256 tiles over their
  // waves: waves x tile area, the 192 x 192 kernel's taken as 2% more (it ran at 0.97-0.99 of the
  // 128 x 256 kernel's rate a tile element where their waves carry the same work: 4096^3,
  // 6144^3, 8192^3), as cuBLAS takes 192 x 192 there (TMA plans: the kernel without producers
  // has not run them). On the H100 (CUDA graphs, bf16, both persistent; session 15
  // benchmarks/recorded/issue16-h100-tiles-session15.md, session 16 issue16-h100-tiles-session16.md):
  // 896x4864x8192 (2 waves -> 1) 439 (SK + DP) -> 719-727 TFLOP/s, cuBLAS 720-735;
  // 3072x3072x8192 (3 -> 2) 692 (SK + DP) -> 780, cuBLAS 799; 4864x1792x8192 (3 -> 2) 704 (SK +
  // DP) -> 738, cuBLAS 738; 4224^3 (5 -> 4) 683 -> 736, cuBLAS 741. Kept 128 x 256: 4096^3 (4
  // waves either way) 771 against 684, 8192^3 (16 -> 15) 742 against 686, 6144^3 (9 -> 8, the
  // same work) 777 against 768, 2048^3 (1 wave either way) 672 against 604.
  // (Plans that ask for the kernel without producers or for clusters keep 128 x 256.)
  const auto ws_o = overrides.find("ws"), cl_o = overrides.find("cluster");
  const int64_t sms = std::max<int64_t>(1, target.compute_units);
  const int64_t waves256 = (tiles_of(128, 256) + sms - 1) / sms, waves192 = (tiles_of(192, 192) + sms - 1) / sms;
  if (p.tma && !wg_int8 && !shaped && p.sg_m == 8 && p.nr == 256 && spec.batch1 * spec.batch2 == 1 &&
      (ws_o == overrides.end() || ws_o->second != 0) && (cl_o == overrides.end() || cl_o->second == 0) &&
      102 * 192 * 192 * waves192 < 100 * 128 * 256 * waves256)
    p.sg_m = 12, p.nr = 192;
  // kNTileByWaves: 16-bit ws plans whose 128 x 256 / 192 x 192 tiles take more than a wave and
  // leave the last partly empty take the 128 x nt tile of least cost (gpu_plan_internal.h): nt with
  // a measured rate that cuts the kernel's N whole, any multiple of 8 where B is K-major (unit_b),
  // else of 64, DP, where that cuts the cost by 3% or more. (ptxas, bf16 4352x1024: 128 x nt up to
  // 232 spill 0-16 bytes, 240 and 248 104-116, 256 88.)
  if (kNTileByWaves && p.tma && !shaped && ir::size_in_bytes(p.a_type) == 2 && p.sg_n == 1 && p.mr == 16 &&
      ((p.sg_m == 8 && p.nr == 256) || (p.sg_m == 12 && p.nr == 192)) && spec.batch1 * spec.batch2 == 1 &&
      (ws_o == overrides.end() || ws_o->second != 0) && (cl_o == overrides.end() || cl_o->second == 0)) {
    const auto kt_o = overrides.find("kt");
    const int64_t kt = kt_o != overrides.end() && kt_o->second > 0 ? kt_o->second : 8 * int64_t(p.kb);
    const int64_t tiles_k = (spec.K + kt - 1) / kt;
    auto tiles = [&](int64_t mt, int64_t nt) { return ((M + mt - 1) / mt) * ((N + nt - 1) / nt); };
    // (candidates: ws16_streams' SK + DP only; the plan's own tile also kSkDpFewWaves', below.
    // Counting it here alone had sent 2176x6912 to col 128 x 256 DP with edges; the orientation rule
    // now takes the other layout's SK + DP too, kSkDpCostFewWaves: row 128 x 256 SK + DP there.)
    auto streams = [&](int64_t mt, int64_t nt) { return mt == 128 && ws16_streams(tiles(mt, nt), tiles_k, sms); };
    // (one wave of 128 x 320 DP: one tile a block, 4 stages, kRate320OneTile)
    auto cost = [&](int64_t mt, int64_t nt) {
      const int64_t t = tiles(mt, nt);
      const double waves = streams(mt, nt) ? sk_waves(t, sms) : double((t + sms - 1) / sms);
      const double rate = kWideFourStages && nt == 320 && t <= sms && !streams(mt, nt) ? kRate320OneTile : ntile_rate(mt, nt);
      return waves * double(mt * nt) / rate;
    };
    const int64_t mt0 = 16 * int64_t(p.sg_m), nt0 = p.nr, tiles0 = tiles(mt0, nt0);
    // (kSkDpFewWaves' SK + DP of whole 128 x 256 tiles after 3-7 full waves counted for the plan's
    // own tile, kSkDpCostFewWaves)
    const double cost0 = kSkDpCostFewWaves && ws16_streams_whole(M, N, mt0, nt0, tiles_k, sms)
                             ? sk_waves(tiles0, sms) * double(mt0 * nt0) / ntile_rate(mt0, nt0)
                             : cost(mt0, nt0);
    double best = cost0;
    int64_t bn = 0;
    // (Fewer than 6 waves of the plan's own tiles: 5632x5632x8192's 968 tiles of 128 x 256 (7.3 waves)
    // ran 757 TFLOP/s DP against 742 with the 1408 of 128 x 176 the cost chose, cuBLAS 802; where the
    // last wave is a small part of many, the rates' error outweighs it. Session 19, lead's run.)
    // (kWideTileByWaves: and 128 x 320, two consumer warpgroups of two wgmmas a K slice, without a
    // fused epilogue, which that tile does not take: check_gpu_work_group)
    const int64_t widest = kWideTileByWaves && !spec.epilogue.any() ? 320 : 256;
    // (kWideEdgeOneWave: 128 x 320 with an edge tile where its tiles make one wave)
    auto cuts = [&](int64_t nt) { return N % nt == 0 || (kWideEdgeOneWave && nt == 320 && tiles(128, nt) <= sms); };
    if (tiles0 > sms && tiles0 % sms && tiles0 < 6 * sms)
      for (int64_t nt = 128; nt <= widest; nt += 8)
        if (ntile_rate(128, nt) > 0 && cuts(nt) && (nt % 64 == 0 || p.unit_b) && !(mt0 == 128 && nt == nt0) && !streams(128, nt))
          if (const double c = cost(128, nt); c < 0.97 * cost0 && c < best) best = c, bn = nt;
    if (bn) p.sg_m = 8, p.nr = static_cast<int>(bn);
  }
  // 4 stages where the shared memory holds them (a stage: the block's A and B rows of 128 bytes
  // a K step; plus 1 KiB), else 3.
  const int64_t stage = (16 * int64_t(p.sg_m) + int64_t(p.nr) * p.sg_n) * 128;
  // (128 x 320 blocks: 3, so that the epilogue's staging fits after them; 4 would leave it none.
  // Those of one tile a block take 4 in plan_gpu_epilogue, the staging in the slots: kWideFourStages.)
  p.stages = 4 * stage + 1024 <= target.shared_bytes && p.nr <= 256 ? 4 : 3;
}

}  // namespace coopjit
