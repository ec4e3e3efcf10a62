// The GPU planner's split phases (gpu_plan_internal.h): the Stream-K K tile, the workers and the
// split of the tiles among them (DP / Stream-K), then the warp-specialized kernel (ws) with its
// persistent grid and Stream-K options (sk_flags, sk_down), and clusters of blocks.
#include "core/error.h"
#include "plan/gemm_plan.h"
#include "plan/gpu_plan_internal.h"

namespace coopjit {

namespace {

// A 0 / 1 (/ 2) option of the warp-specialized Stream-K kernel: its override where given, in
// [0, max] ("plan override NAME=V must be MEANINGS") and above 0 only where `allowed` ("plan
// override NAME=V: " and why_not()); else `dflt`.
template <typename WhyNot>
int sk_option(const PlanOverrides& overrides, const char* name, int64_t max, const char* meanings, bool allowed,
              WhyNot why_not, int dflt) {
  auto it = overrides.find(name);
  if (it == overrides.end()) return dflt;
  if (it->second < 0 || it->second > max) throw UserError(cat("plan override ", name, "=", it->second, " must be ", meanings));
  if (it->second >= 1 && !allowed) throw UserError(cat("plan override ", name, "=", it->second, ": ", why_not()));
  return static_cast<int>(it->second);
}

}  // namespace

GpuTileCounts plan_gpu_split(GpuGemmPlan& p, const GpuPlanContext& c) {
  const GemmSpec& spec = c.spec;
  const GpuTargetInfo& target = c.target;
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M, N = c.N;
  if (!overrides.count("kt")) p.kt = 8 * p.kb;
  if (p.kt % p.kb != 0)
    throw UserError(cat("plan kt=", p.kt, " must be a multiple of kb=", p.kb, " (a K tile is whole K steps)"));
  // The split (gpu_plan.h): workers from the compute units, DP unless the last wave is poor.
  p.workers = target.compute_units * std::max(1, 64 / (p.sg_m * p.sg_n));
  // NVIDIA: a persistent grid of the blocks resident at once; the pipeline's 48 KiB of shared
  // memory and ~230 registers a thread leave room for 2 blocks of 4 warps an SM (65536 registers).
  if (p.stages) p.workers = target.compute_units * std::max(1, 8 / (p.sg_m * p.sg_n));
  if (p.wgmma) p.workers = target.compute_units;  // 97-193 KiB of shared memory: one block an SM
  if (auto it = overrides.find("workers"); it != overrides.end()) {
    if (it->second < 1 || it->second > (int64_t(1) << 20))
      throw UserError(cat("plan override workers=", it->second, " is out of range [1, 2^20]"));
    p.workers = it->second;
  }
  const int64_t batch = spec.batch1 * spec.batch2;
  const int64_t tiles_mn = batch * ((M + int64_t(p.mr) * p.sg_m - 1) / (int64_t(p.mr) * p.sg_m)) *
                           ((N + int64_t(p.nr) * p.sg_n - 1) / (int64_t(p.nr) * p.sg_n));
  const int64_t tiles_k = std::max<int64_t>(1, (spec.K + p.kt - 1) / p.kt);
  const int64_t waves = (tiles_mn + p.workers - 1) / std::max<int64_t>(1, p.workers);
  // Hopper's warpgroup plans keep DP when the tiles fill a wave: on the H100 (whole-program
  // machine code, session 10) 152 tiles of 128 x 256 on 132 SMs ran 1.06x faster DP than SK + DP,
  // the shape most favourable to Stream-K (a second wave 15% full).
  // The warp-specialized kernel (ws, below: TMA plans of one product of 16-bit inputs) streams
  // inside its persistent grid instead (simt_tma_ws.cpp), where it measured faster: 2-tile SK + DP
  // after one or two full waves (the rule and its figures below, ws_sk). On the H100 in session 12
  // (benchmarks/recorded/issue16-h100-streamk-session12.md, kernel times, the fix-up launch) 133
  // tiles on 132 SMs ran 1.32x faster so (110 us + 17 us fix-up against 168); 266 tiles 1.09x;
  // 152 tiles, 561 (4224^2) and 32 (1024^2, Stream-K) slower with any split than DP.
  const bool sk_dp = !p.wgmma;
  // The ws level a TMA plan of one product takes by default: 16-bit inputs with two consumer
  // warpgroups (128-row blocks) or three (192 x 192 tiles), the shapes measured; with one, setmaxnreg has no registers to
  // move (256 work-items may have 255 each). 8-bit inputs: kWsInt8.
  const bool sixteen_bit = ir::size_in_bytes(p.a_type) == 2;
  // (8-bit shapes that the rule below streams keep the kernel without producers, as measured before)
  const bool sk_rule = tiles_k >= 2 && tiles_mn > 0 && 4 * tiles_mn < 3 * waves * p.workers && (tiles_mn < p.workers || sk_dp);
  const int ws_default = !(p.wgmma && p.tma && batch == 1) ? 0
                         : sixteen_bit                       ? (p.sg_m * p.sg_n == 8 || p.sg_m * p.sg_n == 12 ? kWsDefault : 0)
                         : kWsInt8 && !sk_rule               ? (p.sg_m * p.sg_n == 8 ? 2 : 1)
                                                             : 0;
  const auto ws_o = overrides.find("ws");
  // (8-bit plans stay DP by default: on the H100 their 2-tile SK + DP inside the ws kernel ran
  // 1.15x DP on 133 tiles of 128 x 256 but 0.86x on 136, benchmarks/recorded/issue16-h100-int8-session13.md)
  const bool ws_sk = p.wgmma && p.tma && batch == 1 && (ws_o != overrides.end() ? ws_o->second != 0 : sixteen_bit && ws_default != 0);
  if (ws_sk) {
    const int64_t full = tiles_mn / p.workers, last = tiles_mn % p.workers;  // full waves, the last wave's tiles
    // 16-bit inputs (the in-kernel fix-up and the downward parts by default, below): after one full
    // wave where the second is at most half full, or after two where the third is at most a
    // quarter full. On the H100 (benchmarks/recorded/issue16-h100-streamk-session14.md, CUDA
    // graphs, bf16, SK + DP with flags and sk_down against DP, runs 2 and 3): 133 tiles
    // 1.48-1.54x, 136 1.23-1.24x, 144 1.39-1.41x, 152 1.35-1.37x (1.02-1.04x with edge tiles: 896 x
    // 4864), 165 1.30-1.31x, 198 1.12-1.13x, 266 1.24x, 270 1.17-1.18x, 297 1.14x; a second wave
    // 3/4 full (231 tiles) 0.95x; after three or more full waves no gain: 400 tiles 1.04-1.05x,
    // 540 1.00x, 561 (4224^2) 0.91-1.01x, 512 (4096^2) 0.86x. (Session 13, the fix-up launch and
    // K upward: 133 1.35x, 136 1.09x, 266 1.10x, 400 0.96x, 152 0.87-1.06x: one or two full
    // waves, the last at most 1 / kWsStreamKLast full, which 8-bit plans given ws keep.)
    const bool streams = sixteen_bit ? ws16_streams(tiles_mn, tiles_k, p.workers) ||
                                           (p.sg_n == 1 && ws16_streams_whole(M, N, int64_t(p.mr) * p.sg_m, p.nr, tiles_k, p.workers))
                                     : (full == 1 || full == 2) && last * kWsStreamKLast <= p.workers;
    // 192 x 192 tiles stay DP: their SK + DP (flags, K up or down) ran 0.74-0.89x of persistent DP
    // on the H100 where the last wave is partly empty (4224^3, 3072x3072x8192, 4864x1792x8192;
    // benchmarks/recorded/issue16-h100-tiles-session16.md).
    if (tiles_k >= 2 && last > 0 && streams && p.sg_m * p.sg_n != 12) p.split = "sk+dp";
  } else if (sk_rule) {
    p.split = tiles_mn < p.workers ? "sk" : "sk+dp";
  }
  if (auto it = overrides.find("split"); it != overrides.end()) {
    if (it->second < 0 || it->second > 3)
      throw UserError(cat("plan override split=", it->second, " must be 0 (dp), 1 (sk), 2 (sk+dp) or 3 (dp+sk)"));
    static const char* names[] = {"dp", "sk", "sk+dp", "dp+sk"};
    p.split = names[it->second];
  }
  return GpuTileCounts{batch, tiles_mn, tiles_k, ws_default};
}

void plan_gpu_ws(GpuGemmPlan& p, const GpuPlanContext& c, const GpuTileCounts& t) {
  const GpuTargetInfo& target = c.target;
  const PlanOverrides& overrides = c.overrides;
  const int64_t batch = t.batch, tiles_mn = t.tiles_mn, tiles_k = t.tiles_k;
  const bool sixteen_bit = ir::size_in_bytes(p.a_type) == 2;
  auto wo = overrides.find("ws");
  if (wo != overrides.end() && (wo->second < 0 || wo->second > 2))
    throw UserError(cat("plan override ws=", wo->second, " must be 0 (no), 1 (a producer warp) or 2 (a producer warpgroup)"));
  // bf16 / f16 -> f32 or s8 / u8 -> s32 (the wgmma plans' types; Stream-K splits too: a
  // persistent grid of the SMs, gemm_recipe_gpu.cpp, simt_tma_ws.cpp)
  const bool ws_ok = p.tma && batch == 1;
  if (wo != overrides.end() && wo->second != 0 && !ws_ok)
    throw UserError(cat("plan override ws=", wo->second, ": the warp-specialized kernel needs a TMA plan (sm_90, wgmma, tma) of one "
                        "unbatched product of bf16 / f16 or int8 / uint8 inputs, not tma=", p.tma, ", batch=", batch, ", inputs ",
                        ir::name(p.a_type)));
  p.ws = static_cast<int>(wo != overrides.end() ? wo->second : t.ws_default);
  auto po = overrides.find("persistent");
  if (po != overrides.end() && (po->second < 0 || po->second > 1))
    throw UserError(cat("plan override persistent=", po->second, " must be 0 (no) or 1 (yes)"));
  if (po != overrides.end() && po->second == 1 && !p.ws)
    throw UserError(cat("plan override persistent=1: the persistent grid is the warp-specialized kernel's (ws 1 or 2), not ws=", p.ws));
  // Stream-K ws plans are persistent: each block its Stream-K iterations, then DP tiles g, g + grid, ...
  if (po != overrides.end() && po->second == 0 && p.ws && p.split != "dp")
    throw UserError(cat("plan override persistent=0: the warp-specialized Stream-K kernel (split ", p.split,
                        ") is a persistent grid of the SMs"));
  // (8-bit: kWsInt8's figures; 16-bit: kPersistentDefault's)
  const bool waves = tiles_mn > p.workers && (!sixteen_bit || kPersistentDefault);
  p.persistent = po != overrides.end() ? static_cast<int>(po->second) : p.ws && (p.split != "dp" || waves) ? 1 : 0;
  // kTileBands: the tiles in bands of M tiles (group_m) where a persistent 16-bit or 8-bit DP
  // grid of 128 x 256 tiles (the tile measured) on the planner's workers (the SMs) walks more tiles
  // than it has workers, M has more tiles than a band and the kernel's A outgrows the L2
  const bool eight_bit = ir::size_in_bytes(p.a_type) == 1;
  if (kTileBands && !overrides.count("group_m") && !overrides.count("workers") && p.ws && p.persistent && p.split == "dp" &&
      (sixteen_bit || (eight_bit && kTileBandsInt8)) && tiles_mn > p.workers && batch == 1) {
    const int64_t mt = int64_t(p.mr) * p.sg_m, nt = int64_t(p.nr) * p.sg_n, tiles_m = (c.M + mt - 1) / mt;
    const int64_t g = band_m_tiles(p.workers, mt, nt);
    const int64_t a_bytes = c.M * c.spec.K * ir::size_in_bytes(p.a_type);  // the kernel's A, read again each wave unbanded
    if (mt == 128 && nt == 256 && tiles_m > g && g <= 256 && a_bytes > kBandL2Bytes) p.group_m = static_cast<int>(g);
  }
  // The in-kernel fix-up spins on flags that other blocks of the launch set: only where every
  // block is resident at once (a grid of at most p.workers blocks, here at most the SMs, each
  // taking one SM: the ws kernels' 97-217 KiB of shared memory leave room for one).
  auto fo = overrides.find("sk_flags");
  if (fo != overrides.end() && (fo->second < 0 || fo->second > 1))
    throw UserError(cat("plan override sk_flags=", fo->second, " must be 0 (a fix-up launch) or 1 (flags in the kernel)"));
  // (16-bit inputs: the flags were built and tested before the ws kernel took 8-bit ones)
  const bool co_resident = p.ws && p.persistent && p.split != "dp" && p.workers <= target.compute_units && sixteen_bit;
  if (fo != overrides.end() && fo->second == 1 && !co_resident)
    throw UserError(cat("plan override sk_flags=1: the in-kernel Stream-K fix-up needs a warp-specialized Stream-K plan (ws, split not dp) "
                        "of bf16 / f16 inputs whose grid of workers=", p.workers, " blocks fits ", target.compute_units,
                        " SMs, not ws=", p.ws, ", split ", p.split, ", inputs ", ir::name(p.a_type)));
  // By default only where every worker's part is a tile or more (2-tile SK + DP): then the only
  // wait is a worker's last part's, for its successor's first, done long before; shorter parts
  // form chains whose waits serialize them (the fix-up launch adds them in parallel).
  const int64_t sk_it = co_resident ? stream_k_tiles(p.split, tiles_mn, tiles_k, p.workers) : 0;
  const bool whole_parts = sk_it > 0 && sk_it >= std::min(p.workers, sk_it) * tiles_k;
  p.sk_flags = fo != overrides.end() ? static_cast<int>(fo->second) : co_resident && whole_parts ? kSkFlagsDefault : 0;
  const bool ws_stream_k = p.ws && p.split != "dp";
  p.sk_down = sk_option(overrides, "sk_down", 1, "0 (K upward) or 1 (each Stream-K part's K tiles downward)", ws_stream_k,
                        [&] {
                          return cat("the Stream-K parts' K order is the warp-specialized kernel's producer's (ws, split not dp), "
                                     "not ws=", p.ws, ", split ", p.split);
                        },
                        ws_stream_k && sixteen_bit ? kSkDownDefault : 0);
  // A debug field: the consumers' clock at the units' boundaries, only when asked for.
  p.sk_trace = sk_option(overrides, "sk_trace", 1, "0 (no) or 1 (the units' clock after the flags)", p.sk_flags, [&] {
    return cat("the trace is written after the in-kernel fix-up's flags (sk_flags 1), not sk_flags=", p.sk_flags);
  }, 0);
  p.sk_prefetch = sk_option(overrides, "sk_prefetch", 1, "0 (no) or 1 (the successor's partial prefetched into L2)", p.sk_flags, [&] {
    return cat("the prefetch is of the in-kernel fix-up's partial tiles (sk_flags 1), not sk_flags=", p.sk_flags);
  }, 0);
  const int64_t slot = (int64_t(p.mr) * p.sg_m + int64_t(p.nr) * p.sg_n) * p.kb * ir::size_in_bytes(p.a_type);
  const int64_t region = int64_t(p.mr) * p.nr * ir::size_in_bytes(p.dtype);  // a warp's part of the partial
  const int64_t part = region * p.sg_m * p.sg_n;
  const bool stage_fits = p.sk_flags && p.stages > 0 && p.dtype == ir::ScalarType::f32 && slot % region == 0 &&
                          (part + slot - 1) / slot <= p.stages;
  auto stage_refusal = [&] {
    return cat("the in-kernel fix-up (sk_flags 1, not ", p.sk_flags, ") of f32 partial tiles whose ", part,
               " bytes fill at most the ", p.stages, " stage slots of ", slot, " bytes, each warp's ", region, " in one slot");
  };
  p.sk_stage = sk_option(overrides, "sk_stage", 1, "0 (no) or 1 (the successor's partial through the stage slots)", stage_fits,
                         stage_refusal, stage_fits ? kSkStageDefault : 0);
  p.sk_stage_store = sk_option(overrides, "sk_stage_store", 2,
                               "0 (no), 1 (the partial for the predecessor stored through the stage slots) "
                               "or 2 (the same, each slot reused once its store has read it)",
                               stage_fits, stage_refusal, stage_fits ? kSkStageStoreDefault : 0);
  p.sk_one_release = sk_option(overrides, "sk_one_release", 1, "0 (every work-item's release) or 1 (one a warp)", p.sk_flags, [&] {
    return cat("the in-kernel fix-up's flags (sk_flags 1), not sk_flags=", p.sk_flags);
  }, p.sk_flags ? kSkOneReleaseDefault : 0);
  // Pairs of blocks passing the seam's partial through distributed shared memory (gpu_plan.h): the
  // head of the tile block 2c shares with block 2c + 1 takes it in its stage slots, so each split
  // tile must have two parts (every worker's range a tile or more: sk_it >= workers tiles_k) and
  // the blocks pair up (workers even; the grid is the workers then).
  const bool pair_ok = p.sk_stage && !p.sk_stage_store && !p.sk_prefetch && !p.sk_trace && p.cluster == 0 && p.workers % 2 == 0 &&
                       sk_it > 0 && sk_it >= p.workers * tiles_k;
  p.sk_pair = sk_option(overrides, "sk_pair", 1, "0 (no) or 1 (the seam inside each cluster pair through distributed shared memory)",
                        pair_ok, [&] {
                          return cat("the pair exchange needs the successor's partial through the stage slots (sk_stage 1, not ",
                                     p.sk_stage, "), no sk_stage_store / sk_prefetch / sk_trace (", p.sk_stage_store, " / ",
                                     p.sk_prefetch, " / ", p.sk_trace, "), an even number of workers (", p.workers,
                                     ") and every worker's Stream-K range a tile or more (", sk_it, " iterations over ", p.workers,
                                     " workers, ", tiles_k, " a tile)");
                        }, pair_ok ? kSkPairDefault : 0);
}

void plan_gpu_cluster(GpuGemmPlan& p, const GpuPlanContext& c) {
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M;
  // Clusters of 2 blocks sharing B's panels (plan field cluster): off by default. On the H100
  // (benchmarks/recorded/issue16-h100-cluster-session15.txt, CUDA graphs, bf16) against the same
  // plan without them: 0.95-0.98x one tile a block, 0.98-1.00x persistent (4096^3, 8192^3,
  // 4864x1792x8192, 896x4864x8192, 1024x4352x4096).
  auto co = overrides.find("cluster");
  if (co != overrides.end() && co->second != 0 && co->second != 2)
    throw UserError(cat("plan override cluster=", co->second, " must be 0 (no clusters) or 2 (pairs of blocks sharing B's panels)"));
  if (co != overrides.end() && co->second == 2) {
    const int64_t mt = int64_t(p.mr) * p.sg_m, nt = int64_t(p.nr) * p.sg_n, tiles_m = (M + mt - 1) / mt;
    // B's boxes must split between the two blocks: K-contiguous B in boxes of nt / 2 rows (at most
    // 256; 128 x 320: two of 160), else nt / 64 boxes of 64 columns (128 x 320: five, 3 + 2
    // alternating; simt_tma.cpp)
    if (!p.ws || p.split != "dp" || tiles_m % 2 || (p.group_m % 2) || nt % 64 || nt < 128 || (p.persistent && p.workers < 2))
      // (the product's own dimension named: under layout col the kernel's M is the caller's N)
      throw UserError(cat("plan override cluster=2: clusters need a warp-specialized DP plan (ws, split dp) whose tiles along the "
                          "kernel's M are even (", c.col ? "N=" : "M=", M, c.col ? " (the kernel's M under layout col)" : "",
                          " in tiles of ", mt, ": ", tiles_m, "), group_m 0 or even, N tiles a multiple of 64 from 128 "
                          "and 2 workers or more, not ws=", p.ws, ", split ", p.split, ", group_m=", p.group_m, ", N tile ", nt,
                          ", workers=", p.workers));
    p.cluster = 2;
  }
  // kClusterWideTile: the planner's own 128 x 320 DP tiles (not a tile the caller named), tiles
  // along M even, 2 workers or more
  if (co == overrides.end() && kClusterWideTile && !names_tile(overrides) && p.wgmma && p.tma && p.ws == 2 &&
      p.split == "dp" && p.sg_m == 8 && p.sg_n == 1 && p.nr == 320 && p.group_m % 2 == 0 && (!p.persistent || p.workers >= 2)) {
    const int64_t mt = int64_t(p.mr) * p.sg_m;
    if (((M + mt - 1) / mt) % 2 == 0) p.cluster = 2;
  }
}

}  // namespace coopjit
