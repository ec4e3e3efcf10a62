// The GEMM planner's worker phases: how many workers, how they split the output tiles
// (data-parallel, Stream-K or both), and how many shares of the packed nest each takes.
#include "plan/gemm_plan_internal.h"

#include <algorithm>

#include "core/error.h"

namespace coopjit {

void plan_workers(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const CpuTargetInfo& cpu = c.cpu;
  const int64_t M = c.M, N = c.N;
  const double flops = c.flops;
  // Workers: one per core for problems worth the hand-off (a few microseconds), one otherwise;
  // never more workers than output tiles unless Stream-K can split K among them. From 1.5 MFLOP
  // two workers (2-core Zen 5, back to back: 100x37x250 f32 / f64 13.4 / 32 -> 8 / 18 us,
  // 64x64x200 f32 7.6 -> 5.1; data-parallel launches are independent, so a late worker no longer
  // holds the call), from 4 MFLOP every core (below that, 16 workers' hand-off would cost more
  // than their shares of a few microseconds).
  // On 8+ cores every core from 1 MFLOP, data-parallel below 4 MFLOP: a launch to spinning
  // workers costs 2-3 us with 2-4 of them and 5-8 us with 16 (the pool's launch trace, 256x16x16
  // f32 on the 16-core Emerald Rapids host, session 17), while these products run at a third of
  // a core's peak (unpacked, ragged tiles: 100x37x250 f32 37 us on one thread). Measured there
  // (medians of 5 rounds, plan=None calls, the plan through the tuned-plan table), us a call:
  // 100x37x250 f32 2 workers (Stream-K) 22.4-23.6, 4 / 8 / 16 data-parallel 15.3 / 13.1-14.3 /
  // 13.2, 16 Stream-K 11.3-11.6 (NumPy 18.6-22.3, torch 12.9-14.1); f64 2 / 8 61.7 / 24.5;
  // 64x64x200 f32 2 / 8 15.7 / 10.5; 128x128x64 2 / 8 19.2 / 10.2; 96x96x64 (1.2 MFLOP) 1 / 4 /
  // 8 / 16 14.8 / 10.2 / 9.1 / 9.6 (NumPy 12.7, torch 10.0); 64x64x64 (0.5 MFLOP) 1 / 2 / 4 / 8
  // 7.2 / 7.1 / 6.7 / 7.8 (NumPy 6.8): one worker. Data-parallel, not Stream-K: the 16-worker
  // Stream-K rounds that ran at 3 ms a call (2 of 5, f32 and f64: a split tile's owner waiting
  // for a worker the host had descheduled) had no data-parallel counterpart, whose shares any
  // thread takes.
  const int64_t tiles_mn = spec.batch1 * spec.batch2 * ((M + p.mr - 1) / p.mr) * ((N + p.nr - 1) / p.nr);
  const bool many = cpu.max_threads >= 8;
  p.threads = flops < (many ? 1.0e6 : 1.5e6) ? 1
              : flops < 4.0e6 && !many ? std::min(2, std::max(1, cpu.max_threads))
                                       : std::max(1, cpu.max_threads);
  p.kt = 256;
  const int64_t tiles_k = std::max<int64_t>(1, (spec.K + p.kt - 1) / p.kt);
  if (p.threads > tiles_mn * tiles_k) p.threads = static_cast<int>(std::max<int64_t>(1, tiles_mn * tiles_k));
  p.split = p.threads > 1 ? "sk+dp" : "dp";
  // Many whole tiles per worker: the last wave's imbalance is under an eighth, less than what
  // Stream-K's partial tiles cost (workspace, flags). Measured on 16 cores (Emerald Rapids),
  // 4096x64x4096 f32 (683 tiles): dp 2.25 ms, sk+dp 3.16.
  if (tiles_mn >= 8 * int64_t(p.threads) || (many && flops < 4.0e6)) p.split = "dp";
}

void plan_wave_tile(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const CpuTargetInfo& cpu = c.cpu;
  const PlanOverrides& overrides = c.overrides;
  // Data-parallel launches of one unpacked product on many cores with more output tiles than
  // workers but fewer than two a worker: with the padding rule's height (plan_register_tile) a
  // few workers take two tiles and the call waits for them (100x37x250 f32 on 16: 17 tiles of 6 x
  // 48). Instead the height from that up to the register budget's whose busiest worker has the
  // fewest rows (tiles a worker, rounded up, times the height), the taller on ties. (Not shorter
  // tiles: each row of a tile then costs more broadcasts per FMA, unmeasured here.) Measured
  // on the 16-core Emerald Rapids host, 100x37x250 f32 on 16 workers (5 rounds, blocks of calls
  // after a pause, medians [min-max], us): mr 6 (17 tiles) 13.6 [12.9-17.9], mr 7 (15 tiles)
  // 11.2 [10.5-11.6], mr 8 11.3, mr 4 (25 tiles) 10.1 [10.0-11.0]; torch 12.8, NumPy 27.8; the
  // next run, mr 6 against this rule's 7 on 15 workers: 12.5 [11.2-13.3] -> 10.5 [10.4-12.2]
  // (torch 12.0) (benchmarks/recorded/issue14-emr16-rows-session25.txt). f32 / f64 without conversions; not
  // where the plan names the tile, the workers, the split or the walk (the tile walk, m_inner, only).
  const bool plain = plain_float(p);
  if (!plain || p.pack || p.order != "m_inner" || p.split != "dp" || p.ksplit > 1 || cpu.max_threads < 8 ||
      p.threads < 8 ||
      spec.batch1 * spec.batch2 != 1 || overrides.count("mr") || overrides.count("nr") ||
      overrides.count("threads") || overrides.count("split") || overrides.count("order"))
    return;
  const int64_t M = c.M, N = c.N, W = p.threads;
  const int64_t tiles_n = (N + p.nr - 1) / p.nr;
  auto tiles = [&](int64_t mr) { return (M + mr - 1) / mr * tiles_n; };
  if (tiles(p.mr) <= W || tiles(p.mr) >= 2 * W) return;
  const int nvec = std::max(1, p.nr / p.simd_width);
  const int top = std::max(p.mr, std::min(cpu.vector_registers >= 32 ? 16 : 8, (cpu.vector_registers * 3 / 4) / nvec));
  int best = p.mr;
  int64_t best_rows = (tiles(p.mr) + W - 1) / W * p.mr;
  for (int mr = static_cast<int>(std::min<int64_t>(top, M)); mr > p.mr; --mr) {
    const int64_t rows = (tiles(mr) + W - 1) / W * mr;
    if (rows < best_rows) best_rows = rows, best = mr;
  }
  p.mr = best;
  p.threads = static_cast<int>(std::min<int64_t>(W, tiles(best)));
}

void plan_shares(GemmPlan& p, const PlanContext& c) {
  const CpuTargetInfo& cpu = c.cpu;
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M;
  const double flops = c.flops;
  // Many cores: the blocked nest as 4 shares a thread (GemmPlan::shares). A call lasts as long as
  // its slowest worker, and on the 16-core Emerald Rapids host (a virtual machine) one worker of
  // 16 ran up to 1.5x the median worker's time with the same work (session 12, the pool's launch
  // trace: bf16 4096^3 kernel time median 17.1 ms, longest 25.9; int8 13.5 / 20.2; f32 1024^3
  // 1.6 / 2.4), the slow ones not the same from call to call (pinning the threads made it worse).
  // From 50 MFLOP a worker (1024^3 on 16): below it a share's panels, packed by other cores, cost
  // more than the balance saves (16 workers, all through plan=: f32 513x129x700 159 -> 255 us with
  // 4 shares a thread, 1000x130x1000 359 -> 560). And with 2 row panels a share at least (bf16 64 x
  // 4096 x 4096, 2 row panels: 0.96 -> 1.14 ms).
  {
    const int64_t tiles_m = (M + p.mr - 1) / p.mr;
    if (!overrides.count("shares"))
      p.shares = cpu.max_threads >= 8 && p.threads >= 8 && p.pack && !p.inline_b && p.split == "dp" &&
                         flops >= 5.0e7 * p.threads && tiles_m >= 2 * 4 * std::max(1, p.grid_m)
                     ? 4
                     : 1;
    // f32 x f32 products of 4 GFLOP a worker or more on those many cores (4096^3 on 16): 8 shares a
    // thread, so that the fast vCPUs take more of the slow ones' work (the host's vCPUs compute at
    // two rates about 2:1 apart, benchmarks/recorded/issue14-emr16-shares-session19.txt). Measured
    // on the 16-core Emerald Rapids host (session 22, plan= shares 8 against the default, medians
    // of 5 / 3 alternating rounds): 4096^3 103.3 -> 94.1 ms (torch 116.0), 8192^3 817 -> 741 ms
    // (torch 718); 2048^3 (1.07 GFLOP a worker) 12.7 -> 13.2 and 1024^3 2.0 -> 2.0: kept at 4.
    if (!overrides.count("shares") && p.shares == 4 && !p.amx && p.a_type == ir::ScalarType::f32 &&
        p.b_type == ir::ScalarType::f32 && flops >= 4.0e9 * p.threads && tiles_m >= 2 * 8 * std::max(1, p.grid_m))
      p.shares = 8;
    // Matrix-vector products (the dot walk) on many cores: up to 4 shares a thread, each at least
    // 256 KiB of A (a row block of a few tens of microseconds), handed out like the packed nest's.
    // The walk's workers each stream a fixed block of A's rows, and the call lasts as long as the
    // slowest: on the 16-core Emerald Rapids host (a KVM guest whose vCPUs run at two rates) the
    // launch trace of 4096x4096 f32 showed 16 workers busy median 211 / max 357 us (session 22,
    // main's build; NumPy 294 us a call, coopjit 399). With shares, a thread that finishes its
    // own takes the next of a slower one's. Same host, main against this rule in alternating
    // processes (4 rounds, medians, us; NumPy in the same processes): 4096x4096 440 -> 327 (NumPy
    // 425-443), 2048x2048 70.8 -> 47.3 (56-68), 16384x4096 2139 -> 1583 (1689-2014), 4099x3001
    // 385 -> 241 (332-344); shares 1 / 2 / 4 / 8 at 4096x4096 (plan=): 531 / 512 / 422 / 397.
    // benchmarks/recorded/issue14-emr16-skinny-session22.txt.
    if (!overrides.count("shares") && p.order == "dot" && cpu.max_threads >= 8 && p.threads >= 8) {
      // (over a batch's products: the walk's tiles span them all)
      const int64_t batch = c.spec.batch1 * c.spec.batch2;
      const int64_t bytes = M * c.spec.K * ir::size_in_bytes(p.a_type) * batch;
      const int64_t tiles = (M + p.mr - 1) / p.mr * batch;
      p.shares = static_cast<int>(std::max<int64_t>(
          1, std::min<int64_t>({4, bytes / (int64_t(p.threads) << 18), tiles / p.threads})));
    }
    // The unpacked tile walk (m_inner, data-parallel, one product) likewise, 4 a thread from the
    // packed nest's 50 MFLOP a worker, with 4 row tiles a share at least: its row blocks are
    // independent like the dot walk's. Same host, same run (plan=, 4 rounds), 4096x64x4096 f32:
    // shares 1 / 2 / 4 2984 / 2635 / 2583 us (torch 2775); the launch trace's busy max 2948 /
    // 1454 / 912 us a share against median 2025 / 1052 / 558.
    // A batch of products too (session 28): the walk's tiles run over the whole batch, and a
    // share is a range of them like the dot walk's. Same host (5 alternating rounds of blocks of
    // calls, medians [min-max], us; the plan through the tuned-plan table), 8 x 512^3 f32: 1 share
    // 2038.6 [1602-2597] -> 4 shares 1467.1 [1461-1548] (torch 2180.7 [1614-2221]);
    // benchmarks/recorded/issue14-emr16-rows-session28.txt.
    if (!overrides.count("shares") && p.order == "m_inner" && !p.pack && p.split == "dp" &&
        cpu.max_threads >= 8 && p.threads >= 8 && flops >= 5.0e7 * p.threads &&
        tiles_m * c.spec.batch1 * c.spec.batch2 >= 4 * 4 * int64_t(p.threads))
      p.shares = 4;
    // Below that, from 50 MFLOP in all and 2 row tiles a share (session 29): 2 shares a thread;
    // f32 products of 32+ rows and columns and K from 128 where the planner chose the walk, on
    // AVX-512 (the measured ones: not the short K of an outer product, whose C streams to memory).
    // Same host (5 alternating rounds of blocks of calls, medians [min-max], us; the plan through
    // the tuned-plan table; two runs), f32 513x129x700 (65 row tiles of 8): 1 share 114.9 [104-131]
    // / 133.8 [117-136] -> 2 shares 85.1 [76-104] / 102.4 [84-114] (torch 119.3 / 118.7); 32 x 128^3
    // 131.2 [129-144] / 136.0 [132-148] -> 125.5 [117-130] / 125.5 [117-127] (torch 116.6 / 127.7).
    // benchmarks/recorded/issue14-emr16-rows-session29.txt.
    else if (!overrides.count("shares") && p.order == "m_inner" && !p.pack && p.split == "dp" &&
             cpu.max_threads >= 8 && cpu.vector_registers >= 32 && p.threads >= 8 && flops >= 5.0e7 &&
             p.a_type == ir::ScalarType::f32 &&
             p.b_type == ir::ScalarType::f32 && p.c_type == ir::ScalarType::f32 && c.spec.K >= 128 &&
             std::min(M, c.N) >= 32 && !overrides.count("pack") && !overrides.count("order") &&
             tiles_m * c.spec.batch1 * c.spec.batch2 >= 2 * 2 * int64_t(p.threads))
      p.shares = 2;
    // The packed nest with B packed by its reader (inline_b) of a skinny product (16-64 rows: the
    // measured ones) on many cores: 4 shares a thread (each share a range of column panels with
    // its own slot of B, handed out by the pool after A's packing launch, none where AMX tiles read
    // A in place), so that the fast vCPUs take the slow ones' columns; from 4 column panels a
    // thread and 16 MFLOP a worker, f32 x f32 and AMX 8-bit products on AVX-512 (measured). Same
    // host, runs and method as above (us),
    // one share -> 4: f32 64x4096x4096 2454.9 [2049-2576] / 2681.2 [2394-2775] -> 1841.5
    // [1768-1922] / 1957.1 [1889-2072] (torch 2355.9 / 2450.1), 16x4096x4096 847.7 [802-1143] ->
    // 757.6 [741-795] (torch 1097.3; one run); int8 64x4096x4096 615.1 [487-728] / 568.7 [551-636]
    // -> 498.6 [460-603] / 505.9 [457-544] (torch._int_mm 495.0 / 500.0). (B's rows prefetched
    // further on in K as they are packed, b_prefetch 1024 / 4096, no faster: not taken.)
    const bool ib_types = (p.a_type == ir::ScalarType::f32 && p.b_type == ir::ScalarType::f32 && !p.amx) ||
                          (p.amx && p.vnni == 4);
    if (!overrides.count("shares") && p.pack && p.inline_b && p.split == "dp" && ib_types && cpu.max_threads >= 8 &&
        cpu.vector_registers >= 32 &&
        p.threads >= 8 && M >= 16 && M <= 64 && flops >= 1.6e7 * p.threads && (c.N + p.nr - 1) / p.nr >= 4 * int64_t(p.threads))
      p.shares = 4;
  }
  // The unpacked walks' shares (dot, m_inner): their row blocks are independent.
  const bool walk_shares = !p.pack && (p.order == "dot" || p.order == "m_inner");
  if (p.shares > 1 && walk_shares) {
    if (p.split != "dp")
      throw UserError(cat("plan shares=", p.shares, " hands out the ", p.order, " walk's row blocks: it needs split='dp' (got ",
                          p.split, ")"));
  } else if (p.shares > 1 && (!p.pack || p.split != "dp")) {
    throw UserError(cat("plan shares=", p.shares, " cuts the packed blocked nest (or the unpacked dot / m_inner walks' row blocks): ",
                        "it needs pack=1 and split='dp' (got pack=", p.pack, ", split='", p.split, "', order=", p.order, ")"));
  }
  // (inline_b with shares, session 29: a share is a range of column panels with its own slot of
  // B, one row of shares; named only, see plan_inline_b's rule.)
  if (p.k_inner && (!p.pack || p.inline_b))
    throw UserError(cat("plan k_inner=1 orders the packed blocked nest: it needs pack=1 and inline_b=0 (got pack=", p.pack,
                        ", inline_b=", p.inline_b, ")"));
}

}  // namespace coopjit
