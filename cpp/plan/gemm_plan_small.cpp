// The GEMM planner's phases for skinny and small products: the unpacked blocked nest (k_outer,
// K split among the workers, B's rows prefetched), matrix-vector products (the dot walk) and code
// built for one exact shape (fixed).
#include "plan/gemm_plan_internal.h"

#include <algorithm>

#include "core/error.h"

namespace coopjit {

// A small block of C and a long K on many cores (session 26): three tiles a worker or fewer
// (64x64x8192 f32: 12 tiles of 11 x 32 on 16 workers) left the data-parallel walk idle and
// Stream-K's partial tiles and fix-ups at 0.7x torch; 128x128x4096 (48 tiles) took the packed
// nest at 0.35x. K split among the workers instead (GemmPlan::ksplit over the whole M x N block):
// each worker runs the unpacked k_outer walk over all of C for its K range (at least 256 deep)
// into its own block of partial sums, worker 0 into C with beta; the caller adds the blocks.
// f32 / f64 C of the same inputs, no fused epilogue, one product; many cores only (the 2-core
// plans keep their walks); not for a matrix-vector product (N = 1: the dot walk). Not where the
// plan names the walk, the split, ksplit, mr / nr, pack, prepacked_b or fixed.
// Measured on the 16-core Emerald Rapids host (5 rounds of blocks, main -> branch, medians
// [min-max], us; torch): 64x64x8192 141.6 [134-166] -> 131.3 [111-140] (98.9), 64x128x8192
// 355.8 [280-364] -> 182.4 [165-201] (161.1), 16x16x65536 85.5 [80-113] -> 73.3 [69-77] (90.0),
// f64 64x64x8192 292.6 [280-319] -> 223.8 [204-242] (174.8), 32x32x16384 79.2 -> 78.0 (63.0, level),
// 128x128x4096 453.5 [384-492] -> 191.9 [177-231] (the plan forced; 156.7).
// benchmarks/recorded/issue14-emr16-ksplit-session26.txt.
bool ksplit_small_block(const GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const PlanOverrides& o = c.overrides;
  if (o.count("order") || o.count("ksplit") || o.count("split") || o.count("mr") || o.count("nr") || o.count("pack") ||
      o.count("prepacked_b") || o.count("fixed"))
    return false;
  const bool types = p.c_type == p.dtype && p.a_type == p.dtype && p.b_type == p.dtype &&
                     (p.dtype == ir::ScalarType::f32 || p.dtype == ir::ScalarType::f64);
  const int64_t tiles = ((c.M + p.mr - 1) / p.mr) * ((c.N + p.nr - 1) / p.nr);
  return c.cpu.max_threads >= 8 && p.threads >= 8 && types && !p.epilogue.any() && !p.prepacked_b &&
         spec.batch1 * spec.batch2 == 1 && c.M >= 2 && c.N >= 2 && tiles <= 3 * int64_t(p.threads) &&
         spec.K >= 256 * int64_t(p.threads);
}

void plan_skinny_walk(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const CpuTargetInfo& cpu = c.cpu;
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M, N = c.N;
  const int esize = c.esize;
  const double flops = c.flops;
  // Skinny products (the kernel's M up to 64 rows, long K, N wide enough to share among the
  // workers): B is the big operand, and each M tile of the tile walk would read its whole K x nr
  // panel again (1 MiB for f32 at K 4096: from L3 or memory). The blocked nest without packing
  // ("k_outer") reads a kt x nr slice of B once for all the M tiles (in L1 / L2), the workers
  // each on their own column panels, and adds the K tiles' partial products into C (an M x nr
  // panel that stays in L1 / L2). Needs one product. With C in another type than the
  // accumulator's (bf16 C of bf16 inputs) or a fused epilogue, the K tiles' partial sums stay in
  // the accumulator type in a scratch matrix (ceil(M / mr) * mr x ceil(N / nr) * nr, 16 KiB for
  // one row of 4096 f32), and the last K tile writes C once. Before, bf16 C kept the tile walk,
  // whose 1 x nr tile reads its column strip of B down all of K (a run of 128 bytes every 8 KiB
  // at N 4096): 2-core Zen 4, 1x4096x4096 bf16, one thread (CPU time), 5.5 ms (6 GB/s; torch
  // 5.4) where the same walk with f32 C took 1.7 ms (CHANGELOG, session 20).
  {
    int64_t tiles_n = (N + p.nr - 1) / p.nr, tiles_m = (M + p.mr - 1) / p.mr;
    if (!overrides.count("order") && !p.pack && spec.batch1 * spec.batch2 == 1 && M <= 64 &&
        spec.K >= 512 && N >= 256 && flops >= 4.0e6)
      p.order = "k_outer";
    // A small block of C and a long K on many cores (session 26): ksplit_small_block.
    if (!p.pack && ksplit_small_block(p, c)) {
      p.order = "k_outer";
      p.ksplit = p.threads;
      // Blocks of at most 64 x 64 and at least four vectors wide on AVX-512 (f32 64x64, f64 32-64
      // wide): each part runs the tile walk (m_inner) with 6 x 4-vector tiles instead, a tile's sums
      // in registers down the part's K (512 at 64x64x8192 on 16), C written once a part. The k_outer
      // walk's tile for 64 columns was 11 x 2 vectors (11 broadcasts of A, rows 32 KiB apart, a K
      // step for 22 FMAs, and C through L1 every K tile of 128). Measured on the 16-core Emerald
      // Rapids host (session 27, blocks of calls after a pause, 4 / 3 rounds, medians [min-max],
      // us; torch in its own process): f32 64x64x8192 146.7 [119-229] -> 106.0 [99-116] (ksplit 32:
      // 102.7 [101-105]; torch 101.7 [98-707]), f64 64x64x8192 238.8 [227-266] -> 201.3 [186-210]
      // (torch 177.8); one part alone on one thread (64x64x512 f32, A rows 32 KiB apart) 94.4 ->
      // 38.2. Not wider blocks: f32 64x128x8192 176.9 [174-215] -> 210.0 [165-212], 128x128x4096
      // 205.5 [202-221] -> 219.0 [192-226] (kept on k_outer, whose slice of B is reused from L1).
      // benchmarks/recorded/issue14-emr16-f32-session27.txt.
      // (Not where the plan names b_prefetch, a field of the k_outer walk.)
      if (c.M <= 64 && c.N <= 64 && c.N >= 4 * p.simd_width && cpu.vector_registers >= 32 &&
          p.simd_width * esize == 64 && !overrides.count("b_prefetch")) {
        p.order = "m_inner";
        p.mr = 6;
        p.nr = 4 * p.simd_width;
      }
    }
    // A plan that names ksplit (and no walk) takes the k_outer walk where it can (unpacked).
    if (!overrides.count("order") && overrides.count("ksplit") && p.ksplit > 1 && !p.pack &&
        spec.batch1 * spec.batch2 == 1)
      p.order = "k_outer";
    if (p.order == "k_outer") {
      if (p.pack) throw UserError("plan order='k_outer' is the unpacked blocked nest: it needs pack=0");
      if (spec.batch1 * spec.batch2 != 1)
        throw UserError(cat("plan order='k_outer' needs one product (not a batch of ", spec.batch1 * spec.batch2, ")"));
      if (!overrides.count("split")) p.split = "dp";
      // Zen 4, f32 / f64, 16 to 64 rows: tiles of 8 rows x 3 vectors (24 accumulators; 6-8 rows, the
      // height that pads M least) and K tiles of 256 rows, where the register-tile rule gave 4
      // vectors and 5-6 rows with K tiles of 64. B's rows are read in place (a K tile's slice of
      // 4-vector rows 16 KiB apart at N 4096 does not stay in Zen 4's 8-way L1: it comes from L2),
      // and 8 rows a load of B do better. Measured on the 2-core Zen 4 (session 19), one thread,
      // CPU time (OpenBLAS on one thread), before -> after, ms (NumPy): kernel calls (blocks
      // alternating, best of 5) 64x4096x4096 27.5-29.2 -> 22.7-23.8 (27.2-28.8), 32x4096x4096 17.1
      // -> 12.8 (18.0), 16x4096x4096 12.1 -> 7.9 (12.9), 64x4000x4000 25.7 -> 20.6 (25.6),
      // 64x2048x2048 7.05 -> 6.10 (7.33); coopjit.matmul, the two builds in alternating processes
      // (medians of 5): 24x512x2048 1.01 -> 0.50 (0.69), 48x1000x1500 3.12 -> 1.48 (1.98),
      // 16x1024x1024 0.72 -> 0.36 (0.71), 64x4096x1024 8.71 -> 5.96 (7.17), 33x700x3000 2.03 ->
      // 1.74 (2.22), 64x256x4096 1.87 -> 1.77 (1.71); 12x4096x4096 8.74 / 8.64 (equal). Not below
      // 16 rows: 9x4096x4096 7.90 -> 8.80, 10x2000x2000 1.44 -> 1.66 (two tiles of 6 rows padded
      // where 5 + 5 were not). f64 (kernel calls, best of 5, load 12): 32x2048x4096 17.7 -> 12.2
      // (NumPy 14.9), 64x2048x2048 15.3 -> 12.3 (12.6), 16x4096x2048 9.7 -> 8.8 (9.9). Zen 5
      // unmeasured: not taken there.
      bool zen4_tile = false;
      if (cpu.name == "znver4" && cpu.max_threads < 8 &&
          (p.dtype == ir::ScalarType::f32 || p.dtype == ir::ScalarType::f64) &&
          p.a_type == p.dtype && p.b_type == p.dtype && p.simd_width * esize == cpu.vector_bytes &&
          p.nr == 4 * p.simd_width && M >= 16 && !overrides.count("mr") && !overrides.count("nr")) {
        int best = 8;
        int64_t best_pad = INT64_MAX;
        for (int cand = 8; cand >= 6; --cand) {
          const int64_t pad = ceil_to(M, cand) - M;
          if (pad < best_pad) best_pad = pad, best = cand;
        }
        p.mr = best;
        p.nr = 3 * p.simd_width;
        zen4_tile = true;
      }
      tiles_n = (N + p.nr - 1) / p.nr, tiles_m = (M + p.mr - 1) / p.mr;
      // Workers share the column panels, every core on many cores too. (One row of tiles took 3/4
      // of them there, from a measurement with K tiles of 4 rows: 16 cores, 1x4096x4096 f32, 12
      // workers 0.79 ms, 16 workers 1.19. With K tiles of 64 KiB of a worker's columns, 12
      // workers split 64 column panels 6 / 5 and the call waits for the 6. On the 16-core Emerald
      // Rapids host, 5 rounds of blocks of calls after a pause, medians [min-max], us, 12 -> 16
      // workers: bf16 1x4096x4096 451 [363-486] -> 311 [279-321]; f32 554 [371-585] -> 434
      // [410-458] (torch 407, NumPy 402) in one run and 386 [360-572] -> 408 [319-461] (torch 400)
      // in the next: level; a column-major A times a vector (the same nest over A^T) 464 -> 446.
      // benchmarks/recorded/issue14-emr16-rows-session25.txt.)
      // (A K split of several rows keeps every worker: each takes a K range of all the panels.)
      if (!overrides.count("threads") && !(p.ksplit > 1 && M > 1))
        p.threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(p.threads, tiles_n)));
      // A 16 KiB slice of B per column panel and K tile, reused by every M tile from L1 (with the
      // M x nr panel of C). With one M tile nothing reuses it: K tiles of about 64 KiB of the
      // worker's columns keep its reads of B to a few rows at a time (streams the prefetchers
      // follow) with enough work per tile. Measured on Zen 4, 2 threads: 64x4096x4096 f32 17.8 /
      // 15.1 ms with kt 256 / 64; 1x4096x4096 (1 thread) 5.3 / 4.0 / 3.6 ms with kt 256 / 16 / 4;
      // on 16 cores 1.19 / 0.56 ms with kt 4 / 64.
      // On fewer than 8 cores, 128 KiB: one Zen 5 thread, 1x4096x4096 f32 from memory (CPU time)
      // kt 4 / 8 / 16 at 20.6 / 28.0 / 26.0 GB/s (64 KiB gave kt 4 there).
      if (zen4_tile && !overrides.count("kt")) {
        p.kt = 256;
      } else if (!overrides.count("kt")) {
        const int64_t cols = (N + p.threads - 1) / p.threads;
        const int64_t span = cpu.max_threads < 8 ? (int64_t(128) << 10) : (int64_t(64) << 10);
        const int64_t cap = tiles_m == 1
                                ? std::max<int64_t>(p.kb, std::min<int64_t>(1024, span / (cols * esize)) / p.kb * p.kb)
                                : std::max<int64_t>(p.kb, (int64_t(16) << 10) / (int64_t(p.nr) * esize) / p.kb * p.kb);
        const int64_t K1 = std::max<int64_t>(1, spec.K);  // K = 0: one K tile (no parts was a SIGFPE)
        const int64_t parts = (K1 + cap - 1) / cap;
        p.kt = ceil_to((K1 + parts - 1) / parts, p.kb);
      }
      if (!overrides.count("mc_tiles")) p.mc_tiles = static_cast<int>(std::min<int64_t>(4096, tiles_m));
      // One row of C (a vector times a row-major matrix): K split among the workers, each over
      // all of N (GemmPlan::ksplit), instead of the workers sharing N's column panels, where each
      // K tile of a worker's half of B was kt runs of 8 KiB 16 KiB apart (N 4096 f32): the
      // prefetchers restart every two pages. Measured on Zen 5, 2 threads, 1x4096x4096 f32 (the
      // dot walk of 4096x1x4096, which reads its rows whole, at 1.15 ms): see the README.
      // Needs C in the accumulator type f32 / f64 (the partial rows are added in the caller).
      // (A plan naming ksplit with a fused epilogue: the parts but the last K tile keep their sums
      // in scratch and a launch of the last K tile adds them and applies the epilogue once,
      // session 26; not chosen by the rules, unmeasured.)
      // bf16 C (f32 sums): each part's sums stay in its own scratch row and the caller adds the
      // parts and rounds once (the nest's phase 3). 2-core Zen 4, 1x4096x4096 bf16, 2 threads
      // (wall): see the CHANGELOG (session 20).
      // (A fused epilogue: the last K tile's launch applies it once to the parts' sum.)
      const bool ks_ok =
                         ((p.c_type == p.dtype && (p.dtype == ir::ScalarType::f32 || p.dtype == ir::ScalarType::f64 ||
                                                   p.dtype == ir::ScalarType::i32)) ||
                          (p.c_type == ir::ScalarType::bf16 && p.dtype == ir::ScalarType::f32));
      // (Two parts a thread, run as shares (the runtime's run_shares), were measured for f32 with
      // 16 MiB of B or more on the 2-core Zen 5 while other work shared its cores (session 23,
      // main -> branch in alternating processes, medians): 1x4096x4096 0.82 / 1.09 / 0.88x, 1x2048x2048
      // 0.80x; not taken. plan ksplit above the threads runs that way.
      // benchmarks/recorded/issue14-zen5-2core-gemv-session23.txt.)
      // On 8+ cores (session 34), f32 with B of 4-16 MiB and parts of 64 rows or more: there the
      // workers' column panels were short runs of B's rows (N 1024-4096), the split reads whole rows.
      // Measured on the 16-core Emerald Rapids host (16 workers, blocks of calls after a pause, 5
      // alternating rounds, medians, us, two runs where repeated; torch 16 threads; M x N x K):
      // 1x1024x2048 53.4 -> 35.5 (33.3), 1x2048x1024 49.4 ->
      // 43.1 (68.8), 1x2048x2048 92.5 / 104.8 -> 64.4 / 69.2 (65.4 / 113.7), 1x4096x1024 101.6 / 103.0
      // -> 70.5 / 80.2 (103.6 / 106.3), 1x1024x4096 135.2 -> 60.3 (80.7). Not from 32 MiB: 1x2048x4096
      // 183 -> 205, 1x4096x2048 193 -> 206, 1x8192x1024 162 -> 219, 1x4096x4096 429 -> 462 (1x1024x8192
      // and 1x3000x3000 gained: 237 -> 182, 227 -> 189), nor f64 1x2048x2048 (32 MiB) 174 -> 210.
      // (1x1024x1024, 4 MiB, gained too, 35.0 -> 27.1, but takes the tile walk: under this walk's 4 MFLOP.)
      // benchmarks/recorded/issue14-emr16-gemv-session34.txt.
      const int64_t b_bytes = spec.K * N * esize;
      const bool many_f32 = cpu.max_threads >= 8 && p.dtype == ir::ScalarType::f32 && p.a_type == p.dtype &&
                            p.b_type == p.dtype && p.c_type == p.dtype && b_bytes >= (int64_t(4) << 20) &&
                            b_bytes <= (int64_t(16) << 20) && spec.K >= 64 * int64_t(p.threads);
      // (Not where the plan names fixed: code for one exact shape runs all of K; before session 34 such
      // a plan was refused for the ksplit it had not asked for.)
      if (!overrides.count("ksplit") && !overrides.count("fixed") && ks_ok && !p.epilogue.any() && M == 1 && tiles_m == 1 && p.threads > 1 &&
          ((cpu.max_threads < 8 && spec.K >= 256 * int64_t(p.threads)) || many_f32))
        p.ksplit = p.threads;
      if (p.ksplit > 1) {
        if (!ks_ok)
          throw UserError(cat("plan ksplit=", p.ksplit, " splits K among the workers: it needs ",
                              "C in the accumulator type f32 / f64 / i32 (or bf16 C of f32 sums) (got C ",
                              ir::name(p.c_type), ", accumulator ", ir::name(p.dtype), ")"));
        // Each worker's K tiles over all of N: about 128 KiB of B a tile (8 rows of 16 KiB).
        // Measured on Zen 5, one thread, B in L3 (1x512x4096 and 1x2048x1024 f32): kt 4 / 8 / 16 /
        // 32 at 60-69 / 71-75 / 57-64 / 42-51 GB/s (CPU time), the dot walk 56-70.
        // (Several row panels keep the 16 KiB slices of B above: every M tile reuses them.)
        if (!overrides.count("kt") && tiles_m == 1) {
          const int64_t cap = std::max<int64_t>(p.kb, std::min<int64_t>(1024, (int64_t(128) << 10) / (N * esize)) / p.kb * p.kb);
          const int64_t part = std::max<int64_t>(1, (spec.K + p.ksplit - 1) / p.ksplit), parts = (part + cap - 1) / cap;
          p.kt = ceil_to((part + parts - 1) / parts, p.kb);
        } else if (!overrides.count("kt")) {
          // Several row panels: K tiles no deeper than the 16 KiB slices of B above, as many a part
          // as pad its K least (whole tiles a part: 64x128x8192 f32 on 16 workers took kt 84, so
          // parts of 588 and 14 parts; kt 64 gives 16 parts of 512).
          const int64_t part = std::max<int64_t>(1, (spec.K + p.ksplit - 1) / p.ksplit);
          const int64_t n0 = (part + p.kt - 1) / p.kt;
          int64_t best = p.kt, waste = INT64_MAX;
          for (int64_t n = n0; n < n0 + 8; ++n) {
            const int64_t kt = ceil_to((part + n - 1) / n, p.kb), w = kt * n - part;
            if (w < waste) waste = w, best = kt;
          }
          p.kt = best;
        }
      }
    }
  }
}

// The K split on the unpacked tile walk (order='m_inner' with ksplit): each part runs the walk over
// all of C for its K range (a tile's sums in registers down the part's K, C written once a part),
// part 0 into C with beta, the others into zeroed blocks the caller adds (the plain form of the
// runtime's K split: C in the accumulator type, no fused epilogue, one product).
void plan_ksplit_tile_walk(GemmPlan& p, const PlanContext& c) {
  const PlanOverrides& overrides = c.overrides;
  if (p.ksplit <= 1 || p.order != "m_inner") return;
  // (ksplit named without a walk takes the k_outer walk of an unpacked plan, plan_skinny_walk; a plan
  // that keeps the tile walk, a packed one, is refused as before)
  if (!overrides.count("order") && overrides.count("ksplit"))
    throw UserError(cat("plan ksplit=", p.ksplit, " is a launch of the k_outer walk (order='k_outer'); the plan's ",
                        "walk is ", p.order));
  const bool types = p.c_type == p.dtype && (p.dtype == ir::ScalarType::f32 || p.dtype == ir::ScalarType::f64 ||
                                             p.dtype == ir::ScalarType::i32);
  if (p.pack || c.spec.batch1 * c.spec.batch2 != 1 || !types || p.epilogue.any())
    throw UserError(cat("plan ksplit=", p.ksplit, " with order='m_inner' splits K of the unpacked tile walk: it ",
                        "needs pack=0, one product, C in the accumulator type f32 / f64 / i32 and no fused ",
                        "epilogue (got pack=", p.pack, ", a batch of ", c.spec.batch1 * c.spec.batch2, ", C ",
                        ir::name(p.c_type), ", accumulator ", ir::name(p.dtype),
                        p.epilogue.any() ? ", an epilogue" : "", "); order='k_outer' takes the others"));
  if (!overrides.count("split")) p.split = "dp";
  if (p.split != "dp")
    throw UserError(cat("plan ksplit=", p.ksplit, " runs each K range as one worker's data-parallel walk: it needs ",
                        "split='dp' (got '", p.split, "')"));
}

void plan_b_prefetch(GemmPlan& p, const PlanContext& c) {
  const CpuTargetInfo& cpu = c.cpu;
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M;
  // b_prefetch: B's rows of each k_outer tile prefetched 1 KiB ahead (4 tiles of 64 f32). One
  // Zen 5 thread, 1x4096x4096 f32 from memory (CPU time, session 14): 33-34 -> 36-38 GB/s (NumPy
  // 41); 256 / 512 / 2048 / 4096 bytes ahead 36.7 / 35.6 / 35.8 / 29.7; 64x4096x4096 127 -> 135
  // GFLOP/s, 16x4096x4096 74 -> 77. Below 8 cores only: on the 16-core Emerald Rapids host (16
  // workers, blocks of calls) 64x4096x4096 f32 took 4.8 ms with it and 4.3 without.
  // Not on Zen 4 for one row panel (M up to mr: kt of 8 to 16 rows, as many streams of B, which its
  // hardware prefetchers follow; the prefetches, one per line loaded, cost it a quarter). Measured on
  // the 2-core Zen 4 (session 17, blocks of calls alternating, medians, load 2-5 of other builds),
  // 1x4096x4096 f32, one thread (CPU time) 1024 / none: 3.89 / 3.42, 4.05 / 2.93, 4.79 / 3.68 ms
  // (three runs; NumPy 2.39 / 2.70 / 2.95); 2 threads (wall, ksplit 2) 2.04 / 1.73 ms (NumPy 1.58);
  // 4x4096x4096 one thread 6.04 / 5.26, 2 threads 4.62 / 4.12. With two or more row panels (kt 64:
  // 64 rows of B at once) it keeps them: one thread 16x4096x4096 12.2 / 16.4 ms, 8x4096x4096 8.0 /
  // 10.3. benchmarks/recorded/issue14-zen4-2core-rows-session17.txt.
  const bool one_row_panel = (M + p.mr - 1) / p.mr == 1;
  if (p.order == "k_outer" && !overrides.count("b_prefetch") && cpu.max_threads < 8 &&
      !(cpu.name == "znver4" && one_row_panel))
    p.b_prefetch = 1024;
  if (p.ksplit > 1 && p.order != "k_outer" && p.order != "m_inner")
    throw UserError(cat("plan ksplit=", p.ksplit, " is a launch of the k_outer walk (order='k_outer') or the tile ",
                        "walk (order='m_inner'); the plan's walk is ", p.order));
}

void plan_gemv(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const CpuTargetInfo& cpu = c.cpu;
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M, N = c.N;
  const bool a_unit = c.a_unit;
  // Matrix-vector products (the kernel's N is 1; A's rows with unit stride along K): the "dot"
  // walk streams A once, each worker on its own block of rows, at the memory's speed (see the
  // recipe); mr rows x nr lanes along K per tile. B's column (the vector) of another stride
  // (x[::2], a column of a wider matrix, reversed) is gathered into a contiguous buffer of K
  // elements before the launch (run_gemm), which the walk reads: the tile walk (m_inner) that took
  // it read x element by element for every 8-row tile (2-core Zen 5, one thread, f32 4096x4096 @
  // x[::2]: 3.1-3.2 ms, NumPy 1.4-1.5; session 24). A batch of products (each its own A, x and C,
  // or a broadcast one): the walk's tiles run over the whole batch, each worker a contiguous range
  // of (product, row tile) pairs (the batched tile walk took 4 x 4096x1x4096 in 12.5 ms on one
  // thread, NumPy 6.0).
  {
    const bool dot_ok = N == 1 && a_unit;
    if (!overrides.count("order") && dot_ok && !p.pack && M >= 8 && spec.K >= 64 &&
        std::max({spec.M, spec.N, spec.K}) > 64)
      p.order = "dot";
    if (p.order == "dot") {
      if (!dot_ok || p.pack)
        throw UserError(cat("plan order='dot' needs matrix-vector products (N = 1 in the kernel's orientation) ",
                            "with A's rows of unit stride, unpacked; got M=", M, " N=", N));
      if (!overrides.count("mr")) p.mr = 4;
      if (!overrides.count("nr")) p.nr = 4 * p.simd_width;
      if (!overrides.count("split")) p.split = "dp";
      p.kt = std::max<int64_t>(p.kb, ceil_to(std::max<int64_t>(1, spec.K), p.kb));  // one K tile: no Stream-K here
      if (p.split != "dp") throw UserError("plan order='dot' is data-parallel over rows: it needs split='dp'");
      const int64_t tiles_m = (M + p.mr - 1) / p.mr * spec.batch1 * spec.batch2;  // over the batch
      // About 64 KiB of A per worker at least: smaller shares cost more to hand out than they save.
      // Every core otherwise: each worker streams its rows at about one core's rate while it runs,
      // so the call lasts as long as the slowest worker's share (plus the launch). Measured on the
      // 16-core Emerald Rapids host (session 16; 12 workers, the 3/4 of the cores that an earlier
      // session measured as saturating the memory, against 16; medians of rounds, wall time through
      // plan=; the launch trace's busy medians at 16 workers: 17.6 GB/s a worker, one thread 15.8
      // GB/s): 4096x4096 f32 0.60 -> 0.47 ms (NumPy 0.40), 16384x4096 2.64 -> 2.14 (NumPy 2.32),
      // 2048x2048 0.165 -> 0.084 (NumPy 0.062); a second, noisier run 1.17 -> 0.72, 4.40 -> 3.66,
      // 0.83 -> 0.25. benchmarks/recorded/issue14-emr16-gemv-session16.txt.
      const int64_t bytes = M * spec.K * ir::size_in_bytes(p.a_type) * spec.batch1 * spec.batch2;  // (broadcast A too)
      if (!overrides.count("threads"))
        p.threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({int64_t(cpu.max_threads), tiles_m, bytes >> 16})));
      // A's rows prefetched 1 KiB ahead (b_prefetch: the walk's streamed matrix is A), on Zen 5 below
      // 8 cores, as the k_outer nest prefetches B's: with mr rows of A read side by side, two workers
      // of the 2-core Zen 5 (the launch trace's busy time a worker, medians of 3 runs, f32 4096x4096)
      // 718-735 -> 676-684 us without / with (the vector-matrix product of the same matrix 649-694;
      // 2048 bytes ahead 667-689, 4096 731-759); f64 4096x4096 1514 -> 1424; 16384x4096 f32 equal
      // (3110 / 3101), 1024x4096 (in L3) 95 -> 90. benchmarks/recorded/issue14-zen5-2core-mv-session24.txt.
      // (From 1 MiB of A: smaller products were not measured.)
      if (!overrides.count("b_prefetch") && cpu.name == "znver5" && cpu.max_threads < 8 && bytes >= (int64_t(1) << 20))
        p.b_prefetch = 1024;
    }
  }
  // (b_prefetch is checked here, once the dot walk is decided: it prefetches the rows of the matrix
  // the walk streams, B's in the k_outer nest, A's in the dot walk.)
  // (inline_b, session 29: B's rows further on in K, as each worker packs its slices)
  if (p.b_prefetch && p.order != "k_outer" && p.order != "dot" && !p.inline_b)
    throw UserError(cat("plan b_prefetch=", p.b_prefetch, " prefetches B's rows in the unpacked blocked nest (order='k_outer') ",
                        "or as the packed nest packs them (inline_b=1), or A's in the dot walk (order='dot'); the plan's walk is ",
                        p.order, " (inline_b=", p.inline_b, ")"));
}

void plan_fixed_shape(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const PlanOverrides& overrides = c.overrides;
  if (p.kt % p.kb != 0)
    throw UserError(cat("plan kt=", p.kt, " must be a multiple of kb=", p.kb, " (whole mul_add steps per K tile)"));
  // Small products get code for their exact shape and strides (see GemmPlan::fixed): the
  // per-product work is a few hundred cycles, and runtime strides cost a third of it in
  // address arithmetic (spilled row pointers). `fixed=0` turns it off.
  // (Not a dot walk whose vector is gathered first (run_gemm): the copy's strides are not the
  // caller's.)
  const bool gathers = p.order == "dot" && (p.layout == "col" ? spec.sa_c : spec.sb_r) != 1;
  bool fix = !p.pack && std::max({spec.M, spec.N, spec.K}) <= 64 && spec.K > 0 && p.ksplit <= 1 && !gathers;
  if (auto it = overrides.find("fixed"); it != overrides.end()) {
    if (it->second != 0 && it->second != 1) throw UserError(cat("plan override fixed=", it->second, " must be 0 or 1"));
    if (it->second == 1 && p.ksplit > 1)
      throw UserError(cat("plan fixed=1 builds K into the code; ksplit=", p.ksplit, " runs it on parts of K"));
    if (it->second == 1 && gathers)
      throw UserError(cat("plan fixed=1 builds the strides into the code; the dot walk (order='dot') reads a copy of the ",
                          "vector (its stride along K is ", p.layout == "col" ? spec.sa_c : spec.sb_r, ", not 1)"));
    fix = it->second == 1 && !p.pack;
  }
  if (fix) p.fixed = gemm_args(spec, p).fixed_view();
}

}  // namespace coopjit
