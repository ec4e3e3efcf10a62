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
// ws DP plans of one tile a block whose blocks are 128 x 320 (3 stages of 56 KiB, so that the
// epilogue's staging fits after them): 4 stages, the staging in the stage slots (plan field
// epi_alias, plan_gpu_epilogue). Session 38 on the H200 (CUDA graphs, bf16, x 8192, the same
// plan without staging: 3 stages against 4): the 4th stage took 3-4% off the one-wave products
// (2176^2 116.0 -> 112.0 us, 1856x2560 116.2 -> 113.1, 1920x2816 120.9 -> 116.0), which waited
// for TMA data with 3 (session 29's ncu: 42% of the consumers' samples).
inline constexpr bool kWideFourStages = true;
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
// sk_flags plans: the successor's partial read through the stage slots (plan field sk_stage, where
// it fits them) and each flag set by one work-item of the warp after a warp barrier (plan field
// sk_one_release), by default. A per-block timeline (plan field sk_trace) put a part with a
// successor at ~9,200 cycles more than a plain epilogue (its 32 ld.global.v4 a lane latency-bound),
// the part that stores its sum at ~4,500 cycles of stores, ~2,100 to its release and ~5,300 more
// before the next part starts. On the H100 (benchmarks/recorded/issue16-h100-streamk-session20.md,
// CUDA graphs, bf16, medians of 3 alternating rounds, every round faster) both against neither:
// 1024x4864x8192 1.064x (115.4 against 122.8 us), 2816x1920x8192 1.034x (120.4 against 124.5),
// SK + DP forced on 896x4864x8192 1.063x and on 4352x1024x4096 1.129x; C bit-identical.
inline constexpr int kSkStageDefault = 1;
inline constexpr int kSkOneReleaseDefault = 1;
// sk_stage plans: the seam inside each cluster pair of blocks through distributed shared memory
// (plan field sk_pair): off until it measures ahead (benchmarks/recorded/issue16-h100-sk-dsmem-session25.md).
inline constexpr int kSkPairDefault = 0;
// sk_flags plans: the partial tile a part leaves for its predecessor written through the stage
// slots and stored by the producer with cp.async.bulk (plan field sk_stage_store, where sk_stage
// fits): off. The timeline put the tail's store side at ~2,400 cycles where it was ~9,400 (stores
// 3,270, release 2,470, the gap to the next part 3,700), and the next part's K loop ~6,800 cycles
// slower (8,285 -> 9,126 a K tile, 1024x4864x8192; a bulk group a slot, mode 2, alike): the 128
// KiB leaving the SM cost the same whoever issues them. On the H100
// (benchmarks/recorded/issue16-h100-streamk-session21.md, CUDA graphs, medians of 5 alternating
// rounds) against the same plan without it: 1024x4864x8192 0.98 / 0.97x (modes 1 / 2),
// 2816x1920x8192 0.99 / 0.99x, SK + DP forced 896x4864x8192 1.00 / 0.99x, 4352x1024x4096 0.95 /
// 0.98x, 4224x4224x8192 0.99 / 0.98x.
inline constexpr int kSkStageStoreDefault = 0;
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
// 16-bit ws plans: the N tile (128 x nt) chosen so that the tiles fill their waves (plan_gpu_hopper_tile,
// issue 16, sessions 18-19), by a cost: waves x tile area / the rate a tile element of 128 x nt ran at
// (ntile_rate), against the plan's own tile, whose 2-tile SK + DP is counted as full + 0.3 + last /
// (2 SMs) waves (sk_waves). Only N tiles that cut the kernel's N whole, with a measured rate, DP,
// more than a wave of the plan's own tiles, and 3% less cost. Measured on the H100 (session 19,
// benchmarks/recorded/issue16-h100-waves-session19.md, CUDA graphs, bf16, K 8192 unless named;
// TFLOP/s, cuBLAS / the plan before / the N tile):
//   4352x1024x4096  col 128 x 136: 682 / 536 (SK + DP 128 x 256) / 617   (x8192: 700 / 627 / 654; f16 676 / 644 / 668)
//   4608x1024       col 128 x 144: 745 / 648 (SK + DP) / 722
//   5632x1152       row 128 x 192: 790 / 740 (SK + DP) / 772   (col 128 x 128: 656)
//   2816x3456       row 128 x 192: 792 / 721 (SK + DP) / 797   (col 128 x 152, edges: 623)
//   4224^3          col 128 x 176: 751 / 741 (192 x 192) / 747  (x8192: 775 / 766 / 773)
// and kept: 1024x4864 764 / 671 (SK + DP) against col 128 x 176 with edges 653; 2816x1920 815 / 715
// (SK + DP) against col 128 x 168 with edges 701; 4864x1792 746 / 749 (192 x 192) against 128 x 176
// with edges 759 (not taken: edges); 4352x1024 col 128 x 144 with edges 601 / 613 (x4096 / x8192).
// (The row layout's B is N-major there: N tiles of multiples of 64, 128 x 192.) With C staged in
// pieces down to 8 columns (simt_wgmma.cpp) 128 x 136 then ran 4352x1024x4096 / x8192 at 654 / 695
// (cuBLAS 679 / 699, before 532 / 646), and 3456x4608 took 128 x 192 at 772 (128 x 256 DP 718,
// cuBLAS 780).
inline constexpr bool kNTileByWaves = true;
// kNTileByWaves' candidates also take 128 x 320 (nr 320 in the row of N tiles; rate below) for
// products without a fused epilogue. H200, session 27 (benchmarks/recorded/issue16-h200-streamk-session27.md,
// CUDA graphs, medians of 3 rounds, us; cuBLAS / the plan before / row 128 x 320 DP):
// 2816x1920x8192 bf16 108.5 / 117.9 (col 128 x 256 SK + DP) / 111.7, f16 113.4 / 123.5 / 115.3.
inline constexpr bool kWideTileByWaves = true;
// kWideEdgeOneWave: the N-tile rule's 128 x 320 also where it leaves an edge tile along the kernel's
// N (TMA fills its loads past N with zeros and clips its stores), where those tiles make one wave
// (its cost then: one wave of 128 x 320 against the plan's tile's waves, the rule's 3% margin);
// the orientation rule takes such a plan of the other layout by the same margin (its kernel M
// whole), and between two plans of one wave of 128 x 320 the one without edges. Where 128 x 256
// tiles take a wave and a part of another (2-tile SK + DP), 128 x 320 tiles may fit one. H200,
// session 37 (benchmarks/recorded/issue16-h200-edge320-session37.md: CUDA graphs, medians of 3
// rounds, us, bf16; the plan before named, in the same process): 37 products the rule changes,
// two runs, 36 faster by 0.5-57% and one the margin now excludes (5120x832x4096, row 128 x 320 at
// 0.98 of SK + DP's work: 59.5 against 57.7); e.g. 2176^2 x 8192 119.1 -> 107.5 (cuBLAS 106.1),
// 1856x2560x8192 136.7 -> 107.3, 896x5696x4096 89.9 -> 57.4, 832x5120x4096 89.3 -> 56.5 (cuBLAS
// 77.5), 1024x4864x8192 (row) 112.7 -> 110.1. Not where the edge tiles still take two waves
// (2304^2: 209.7 against SK + DP's 118.3), nor against smaller tiles of one wave (896x4864: 104.3
// against 192 x 192's 96.9; the cost chooses those).
inline constexpr bool kWideEdgeOneWave = true;
// kClusterWideTile (off): the planner's own 128 x 320 DP plans (kWideTileByWaves) in clusters of 2
// sharing B's panels (plan field cluster; B's five 64-column boxes 3 + 2, or two of 160 rows where
// B is K-major), as cuBLAS's nvjet 320 x 128 coopB kernel runs them, where the tiles along M are
// even. Slower on the H200 (session 28, benchmarks/recorded/issue16-h200-cluster320-session28.md,
// CUDA graphs, medians of 3 rounds, us, clusters / without / cuBLAS): 2816x1920x8192 bf16 112.6 /
// 110.6 / 107.8, f16 115.6 / 114.2 / 112.2, 4096x2560x8192 222.0 / 219.2 / 211.6 (persistent;
// one tile a block 223.6), 1920x2816x8192 112.7 / 112.2 / 109.8: off.
inline constexpr bool kClusterWideTile = false;
// The rate a tile element of 128 x nt tiles ran at on the H100 against 128 x 256 (one wave of whole
// tiles, 4224x1024x8192: 790 TFLOP/s), from the session-19 table above (time a wave of tiles at K
// 8192: 128 54.0 us, 136 52.5 (55.8 before C was staged in pieces of 8 columns too), 144 53.6, 176
// 63.0, 192 66.7-68.8, 256 89.7); 0: not measured with whole tiles, not taken (152 and 168 ran
// 0.84 / 0.93 with edges). 192 x 192: 0.98 (as tiles192 counts it).
inline double ntile_rate(int64_t mt, int64_t nt) {
  if (mt == 192) return nt == 192 ? 0.98 : 0.0;
  if (mt != 128) return 0.0;
  switch (nt) {
    case 128: return 0.83;
    case 136: return 0.91;
    case 144: return 0.94;
    case 176: return 0.98;
    case 192:
    case 256: return 1.0;
    // 128 x 320 (two wgmmas a K slice, session 27; H200, bf16, K 8192): one wave of 132 whole
    // tiles (2816x1920) 111.7 us, 6 waves (5632^2, 792 tiles) 668.7 us = 111.5 a wave, against
    // 128 x 256's 7.33 waves there in 681.3 (at most 85.2 a wave): 0.96 at least.
    case 320: return 0.96;
    default: return 0.0;
  }
}
// 128 x 320 blocks of one tile a block (one wave, DP), which take 4 stages with the epilogue's
// staging in them (kWideFourStages): one wave of 2816x1920x8192 108.3 us against 111.2 with 3
// stages (H200, session 38): 0.96 x 111.2 / 108.3, 0.98.
inline constexpr double kRate320OneTile = 0.98;
// 16-bit ws plans' 2-tile SK + DP on the H100 (the automatic plans of session 19's table, whole
// 128 x 256 tiles, K 8192: 136 tiles 1.31 waves' time, 144 1.33, 152 1.36, 165 1.38, 198 1.60, 297
// 2.47): about full waves + 0.3 + last / (2 SMs).
// After 3 or more full waves (kSkDpFewWaves, below) the H200 measured the last wave's tiles
// streamed in 0.79-0.87 of a wave (DP: 1; session 28, both runs): full + 0.85 (the orientation
// rule's gpu_tile_work of such plans).
inline double sk_waves(int64_t tiles, int64_t workers) {
  const int64_t full = tiles / workers, last = tiles % workers;
  if (full >= 3) return double(full) + 0.85;
  return double(full) + 0.3 + 0.5 * double(last) / double(workers);
}
// 16-bit ws plans: where 2-tile SK + DP is the default (plan_gpu_split's rule and its figures).
inline bool ws16_streams(int64_t tiles, int64_t tiles_k, int64_t workers) {
  const int64_t full = tiles / workers, last = tiles % workers;
  return tiles_k >= 2 && last > 0 && ((full == 1 && 2 * last <= workers) || (full == 2 && 4 * last <= workers));
}
// kSkDpFewWaves: 16-bit ws plans of whole 128 x 256 tiles (M, N: the kernel's) also take 2-tile SK
// + DP after 3 to 7 full waves where the last is at most half full. Three runs agree (CUDA graphs,
// bf16, col 128 x 256, SK + DP / DP / cuBLAS, us): 5632x5632x8192 (968 tiles: 7 waves of 132 + 44)
// H200 session 28 663.2 / 679.8 / 642.7, session 27 667.4 / 681.3, H100 session 26 679 / 694;
// 3584x4096x8192 (448: 3 + 52; not used to make the rule) 312.3 / 329.6 / 311.9; 4864x3072x8192
// (456: 3 + 60) 314.9 / 326.3 / 313.4 (benchmarks/recorded/issue16-h200-cluster320-session28.md).
// Not taken: 8192^3 (15 waves + 68: H100 SK + DP 1527 against DP 1495, session 26), 4224^2 (edge
// tiles: 0.91-1.01x on the H100, session 14), a last wave over half full (4096^2, 3 + 116: 0.86x
// there). plan_gpu_split makes the split; since session 37 the N-tile and orientation rules count
// it too (kSkDpCostFewWaves, below: 4864x3072 then takes its col SK + DP; before, row 128 x 192 DP
// at 326.3 us).
inline constexpr bool kSkDpFewWaves = true;
// kSkDpCostFewWaves: the N-tile rule (kNTileByWaves) counts kSkDpFewWaves' SK + DP for the plan's
// own whole 128 x 256 tiles (full + 0.85 waves, sk_waves), so that a narrower DP tile must beat
// that by the rule's 3%; the orientation rule takes the other layout's such SK + DP plan where it
// carries 3% less work. H200, session 37 (the record above; the plan before named): 12 products
// that change, 4864x3072x8192 331.4 -> 319.2 us (cuBLAS 316.8; row 128 x 192 DP before),
// x4096 171.6 -> 166.6, 3712x3840x8192 322.7 -> 307.5, 5504x2560x8192 330.0 -> 308.7 (col DP with
// edges before), 3072x4736x8192 326.9 -> 317.4; 2432x6144x4096 165.5 -> 166.5 and 6144x2432x4096
// 164.7 -> 166.6 the two slower, 3840^2 x 4096 level. Without the orientation rule's margin
// 6016x5376x8192 took row SK + DP (0.98 of col DP's work) at 703.9 against 678.9: kept out.
inline constexpr bool kSkDpCostFewWaves = true;
inline bool ws16_streams_whole(int64_t M, int64_t N, int64_t mt, int64_t nt, int64_t tiles_k, int64_t workers) {
  if (!kSkDpFewWaves || mt != 128 || nt != 256 || M % mt || N % nt || workers < 1) return false;
  const int64_t tiles = (M / mt) * (N / nt), full = tiles / workers, last = tiles % workers;
  return tiles_k >= 2 && last > 0 && full >= 3 && full <= 7 && 2 * last <= workers;
}

// kTileBands: 16-bit persistent ws DP plans walk their tiles in bands of group_m M tiles (down M
// inside a band, simt_tma_ws.cpp) so that a wave of `workers` tiles is about as many M tiles as N
// tiles' worth of rows: group_m = sqrt(workers * nt / mt) rounded to an even number (128 x 256 on
// 132 SMs: 16, 128 x 192: 14). Without bands a wave of 128 x 256 tiles at 8192^3 is all 64 M tiles
// of two N tiles: the wave reads all of A (128 MiB, past the 50 MB L2) again. H200, session 29
// (benchmarks/recorded/issue16-h200-squares-session29.md, ncu of one launch): DRAM read 2.39 GB
// without bands, cuBLAS's nvjet kernel 1.25 GB; CUDA graphs, medians of 4 rounds, us, bf16
// without / group_m 8 / 16 / 32 / cuBLAS: 1497.8 / 1418.5 / 1383.3 / 1417.1 / 1389.1; f16 without
// / 16 / cuBLAS 1527.7 / 1429.4 / 1517.4; run 2, branch / main (group_m 0) / cuBLAS, 3 rounds:
// 8192^3 bf16 1420.5 / 1443.8 / 1404.6, f16 1462.4 / 1536.7 / 1504.7. 4096^3, whose A (32 MiB)
// stays in the L2 without bands, was level (bf16 177.0 / 177.5 / 177.0, f16 185.4 / 184.3 /
// 182.2): so only where the kernel's A (M x K) is over kBandL2Bytes (the H100's and H200's 50 MB
// L2). Only 128 x 256 tiles (the tile measured; 128 x 192, 192 x 192 and 128 x 320 would take
// 14, 12 and 18 by the same count, not measured), and only where the tiles outrun the workers and
// M has more tiles than a band (else the walk is the same).
inline constexpr bool kTileBands = true;
// kTileBandsInt8: s8 / u8 -> s32 ws plans (128 x 256 tiles too, K steps of 128 bytes) take the
// same bands by the same rule (session 28's int8 plans walked down M). H200, session 36
// (benchmarks/recorded/issue16-h200-int8-bands-session36.md; _int_mm's layout, so the kernel's A
// is the product's B^T: N x K; CUDA graphs, 3 alternating rounds, medians, us, each range under
// 1%), without bands / group_m 16 / 8: 8192^3 (kernel A 64 MiB) 715.3 / 688.3 / 693.5,
// 12288x12288x4096 (48 MiB) 859.9 / 795.9 / 804.8, 4096x16384x4096 (64 MiB) 409.7 / 366.9 / 364.9;
// under the L2: 6144^3 (36 MiB) 303.5 / 298.7 / 300.5, 16384x4096x4096 (16 MiB) 365.9 / 365.2 /
// 367.0, 4096^3 (16 MiB, run 1: group_m 8 only) 94.3 / - / 94.4.
inline constexpr bool kTileBandsInt8 = true;
inline constexpr int64_t kBandL2Bytes = 50 * 1000 * 1000;
inline int64_t band_m_tiles(int64_t workers, int64_t mt, int64_t nt) {
  int64_t g = 2;  // the even number nearest sqrt(workers nt / mt)
  while ((g + 2) * (g + 2) * mt <= workers * nt || (g + 1) * (g + 1) * mt < workers * nt) g += 2;
  return g;
}

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
// The pipeline's copies (cp.async, not TMA): each work-item of the block copies whole 16-byte chunks
// of both panels (A's mr x sg_m rows, B's nr x sg_n, kb elements each) a stage.
inline bool panel_chunks_whole(const GpuGemmPlan& p) {
  const int64_t threads = 32 * int64_t(p.sg_m) * p.sg_n, esz = ir::size_in_bytes(p.a_type);
  return (int64_t(p.mr) * p.sg_m * p.kb * esz / 16) % threads == 0 && (int64_t(p.nr) * p.sg_n * p.kb * esz / 16) % threads == 0;
}

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
