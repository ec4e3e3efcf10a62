// The GEMM planner's packed-nest phases: whether to pack, the K tile and row-panel blocks of the
// packed nest and its 2-D grid of workers, B packed by its reader (inline_b) and column-panel
// blocks (nc_tiles).
#include "plan/gemm_plan_internal.h"

#include <algorithm>

#include "core/error.h"

namespace coopjit {

namespace {

// The 2-D grid of the blocked nest (grid_m 0: the kernel's own choice at run time): of the
// divisors g of the worker count with g <= the row panels, the one whose blocks read the fewest
// rows of A plus columns of B per worker; the smaller g on ties (2 workers: 1 x 2). Estimated
// here for mc_tiles.
// (of W workers: the rows of workers g)
int64_t run_time_grid(const GemmPlan& p, const PlanContext& c, int64_t W) {
  const int64_t M = c.M, N = c.N;
  const int64_t tiles_m = (M + p.mr - 1) / p.mr, tiles_n = (N + p.nr - 1) / p.nr;
  int64_t best = -1, grid = 1;
  for (int64_t g = 1; g <= W; ++g) {
    if (W % g != 0 || tiles_m < g) continue;
    const int64_t cost = (tiles_m + g - 1) / g * p.mr + (tiles_n + W / g - 1) / (W / g) * p.nr;
    if (best < 0 || cost < best) best = cost, grid = g;
  }
  return grid;
}

}  // namespace

void plan_packing(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const CpuTargetInfo& cpu = c.cpu;
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M, N = c.N;
  const int64_t a_row_bytes = c.a_row_bytes, b_row_bytes = c.b_row_bytes;
  const int esize = c.esize;
  const double flops = c.flops;
  // Packing pays for itself once each panel is reused many times: one batch, big in every
  // dimension (the copies are O(MK + KN) against O(MNK) work).
  p.pack = spec.batch1 * spec.batch2 == 1 && std::min({spec.M, spec.N, spec.K}) >= 256 && flops >= 5.0e7;
  // On many cores the unpacked walk's strided reads of B cost more (every worker's panels come
  // from L3): from 128 rows and columns. Measured on 16 cores, 513x129x700 f32: 598 us
  // unpacked, 333 packed.
  if (cpu.max_threads >= 8 && spec.batch1 * spec.batch2 == 1 && std::min(spec.M, spec.N) >= 128 && spec.K >= 256 &&
      flops >= 5.0e7)
    p.pack = true;
  // Skinny products on many cores (M up to 64 over several row tiles: the unpacked k_outer walk,
  // plan_skinny_walk) whose B rows (or A rows) lie a multiple of 4 KiB apart, 8 KiB or more: that
  // walk's K tile of a column panel (kt rows of 256 bytes) sits at one page offset, in 4 of L1's 64
  // sets, so every M tile reads it again from L2 (A's K tile likewise, for every column panel).
  // Packing (B by its reader, K tile by K tile: plan_inline_b) reads each once into contiguous panels.
  // Measured on the 16-core Emerald Rapids host, f32, one thread (CPU time): 64x512x1024 60 -> 118
  // GFLOP/s (64x512x1000, no aliasing: 118 either way), 64x4096x4096 69 -> 96, 64x4096x4000 81 ->
  // 98; 16 workers: 64x4096x4096 3.09 -> 2.45 ms (NumPy 2.60), 16x4096x4096 1.28 -> 1.13 (NumPy
  // 1.28), 64x4096x4000 3.37 -> 2.71 (NumPy 2.27), 64x4096x1024 0.86 / 1.01 -> 0.91 / 0.96 (two
  // runs; NumPy 0.70-0.84).
  // (this rule and the column-major one below: one product of 2+ row tiles up to 64 rows, K >= 512,
  // 4+ MFLOP, multiplied by FMAs, not AMX tiles or dot instructions: the k_outer walk's products)
  const bool k_outer_product = spec.batch1 * spec.batch2 == 1 && M <= 64 && M > p.mr && spec.K >= 512 &&
                               flops >= 4.0e6 && amx_group(p.a_type, p.b_type, p.dtype, cpu) == 0 &&
                               dot_group(p.a_type, p.b_type, p.dtype, cpu) <= 1;
  {
    auto aliased = [](int64_t bytes) { return bytes >= 8192 && bytes % 4096 == 0; };
    if (cpu.max_threads >= 8 && !overrides.count("order") && k_outer_product && N * esize >= 8192 &&
        (aliased(b_row_bytes) || aliased(a_row_bytes)) && p.unit_b)
      p.pack = true;
  }
  // Few rows over a wide B on the 2 MiB-L2 Xeons with fewer than 8 cores (xeon_few_core_rows): packed,
  // B by its reader (plan_inline_b). Measured on the 2-core Emerald Rapids guest (session 34, 2
  // workers, f32, blocks of calls after a pause, 3-5 alternating rounds, medians, ms; torch 2
  // threads): 16x4096x4096 7.65 / 6.71 -> 6.66 / 6.01 (torch 6.20 / 5.37), 32x4096x4096 13.0 -> 11.5,
  // 64x4096x4096 22.6 / 22.5 -> 13.9 / 14.6 (torch 13.6 / 14.1), 64x2048x2048 6.35 / 5.49 -> 4.23 / 3.86
  // (3.11 / 2.96), 64x4096x1024 5.75 -> 3.52 (3.74), 48x1000x1500 1.21 -> 0.93 (0.85), 16x1024x1024
  // 0.45 -> 0.33 (0.33), 100x2000x2000 7.87 -> 4.54 (4.01), 128x4096x4096 89.3 / 99.7 -> 25.2 (24-28);
  // f64 64x2048x2048 11.3 -> 10.6 (torch 8.3, NumPy 7.7). Not two row tiles or fewer (8x4096x4096
  // 3.83 -> 5.02, 4x4096x4096 2.26 -> 3.51: the k_outer nest stays), nor a narrow B (4096x64x4096
  // 14.5 -> 21.4, whose B panels stay in L2).
  // (both rules below: not where the plan names the walk, a K split or code for one exact shape)
  const bool walk_named = overrides.count("order") || overrides.count("ksplit") || overrides.count("fixed");
  if (!walk_named && xeon_few_core_rows(p, c)) p.pack = true;
  // Skinny products whose B has a run-time column stride (a column-major B, a @ w.T, or strided
  // columns), on any CPU and core count: the unpacked k_outer walk gathered B's lanes one by one,
  // again for every row tile. Packed (B by its reader where plan_inline_b gives it), B is read once,
  // a column-major B's K steps a column's rows at a time (GemmRecipe::kb_rows_contiguous). Measured
  // on the 16-core Emerald Rapids host and the 2-core guest (session 34, f32, k_outer -> packed):
  // benchmarks/recorded/issue14-kmajor-b-session34.txt.
  if (!walk_named && !p.unit_b && k_outer_product && N >= 256) p.pack = true;
  // The same B (column-major: a @ w.T) in the unpacked tile walk (m_inner), any row count past two
  // row tiles: each row tile read B's K steps across its columns again (a column's kb rows a load,
  // then shuffles), so the walk cost rows / mr transposes of B where packing does one. Packed from
  // 48 columns (one panel of N = 37 gained nothing) and 0.35 MFLOP a worker (on 16 workers 128^3,
  // 0.26, ran longer packed); f32 / f64 without conversions (the types measured). Measured on the
  // 16-core Emerald Rapids host (session 35, a @ w.T, blocks of calls, medians of 4 alternating
  // rounds, unpacked -> packed, us; torch): 2 cores (taskset, 2 threads): 72x56x48 21.0 -> 10.5
  // (13.3), 64^3 33.7 -> 12.3 (12.1), 128^3 120 -> 59 (35), 200^3 297 -> 148 (101), 256^3 1199 ->
  // 246 (176), 300x200x100 207 -> 141 (68), 513x129x700 1778 -> 612 (570), 2048x64x256 914 -> 552
  // (416); 100x37x250 45 -> 46 (not taken). 16 threads: 64^3 (one worker) 14.8 -> 8.3 (12.1),
  // 200^3 71 -> 54 (33), 256^3 209 -> 71 (54), 300x200x100 47.5 -> 43.2 (25.9); 128^3 30.8 -> 36.4
  // and 100x37x250 14.8 -> 40.7 (not taken). benchmarks/recorded/issue14-nt-session35.txt.
  {
    const bool plain = plain_float(p);
    if (!walk_named && !p.unit_b && plain && spec.batch1 * spec.batch2 == 1 && M > 2 * p.mr && N >= 48 &&
        flops >= 0.35e6 * double(std::max(1, p.threads)))
      p.pack = true;
  }
  // Mid-size float products on many cores whose packed nest leaves its busiest worker 10% more
  // tiles than the unpacked tile walk's: the nest's grid gives each worker a block of row and
  // column panels behind the packing barrier (513x129x700 f32 on 16: 65 row panels of 8 by 3
  // column panels, a 16 x 1 grid, 13 workers with 15 tiles and 3 idle; the launch trace: busy
  // median 130 us, the last 182), where the tile walk shares its 195 tiles among all 16, 13 at
  // most (any thread takes any share: median 110, the last 137). Fewer column panels than
  // workers, up to 20 MFLOP and 8+ tiles a worker (the data-parallel split), AVX-512 (measured
  // there); f32 / f64 without conversions (the dot-instruction products pack below); not the
  // skinny products (up to 64 rows: the rules above), nor plans that name the workers, the tile,
  // the grid or the walk. Measured on the 16-core Emerald Rapids host, 16 workers, plan= against
  // the packed default, medians of 3 alternating rounds (session 18, benchmarks/mid_rows_16core.py;
  // NumPy, torch in the same rounds): f32 513x129x700 195 -> 163 us (NumPy 174, torch 138);
  // session 17 1.16x / 1.09x. Where the nest's blocks are even the tile walk gained nothing
  // measurable (session 17: 1000x130x1000 f32 0.99x) and the rule leaves them packed (512^3 f32,
  // 1.16x once in session 17, is not measured again). (The many-core rule above had measured 598
  // us unpacked against 333 packed in an earlier session, before session 17's data-parallel
  // launches and the pool's hold.) benchmarks/recorded/issue14-emr16-mid-rows-session18.txt.
  // (A B of unit column stride only: the tile walk transposes a column-major B again for every row
  // tile, the rule above. 200^3 a @ w.T on 16: 71 us unpacked, 54 packed.)
  {
    const bool plain = plain_float(p);
    const bool own = !overrides.count("order") && !overrides.count("threads") && !overrides.count("mr") &&
                     !overrides.count("nr") && !overrides.count("grid_m");  // (the planner's own choices)
    const int64_t tiles_m = (M + p.mr - 1) / p.mr, tiles_n = (N + p.nr - 1) / p.nr, W = p.threads;
    if (p.pack && own && plain && p.unit_b && cpu.max_threads >= 8 && cpu.vector_registers >= 32 && W >= 8 &&
        spec.batch1 * spec.batch2 == 1 && M > 64 && tiles_n < W && tiles_m * tiles_n >= 8 * W && flops < 2.0e7 * double(W)) {
      const int64_t gm = run_time_grid(p, c, W), gn = W / gm;
      const int64_t nest_most = (tiles_m + gm - 1) / gm * ((tiles_n + gn - 1) / gn);
      const int64_t walk_most = (tiles_m * tiles_n + W - 1) / W;
      if (10 * nest_most >= 11 * walk_most) p.pack = false;
    }
  }
  // Products with a dot instruction need packed panels for it (pairs / quads side by side, and
  // s8 x s8's column sums): the copies pay for themselves much sooner. Measured on Zen 5, both
  // threads, 256^3: int8 189 -> 842 GOP/s, bf16 244 -> 483 GFLOP/s; 128^3 int8 204 -> 555.
  // Skinny ones too, from 4 rows (or columns): unpacked, each element was widened and multiplied
  // on its own. Measured on Zen 4 (session 17, one thread, CPU time, default -> pack=1, B then
  // packed by its reader): int8 x 4096x4096 with 4 / 8 / 16 / 32 / 48 rows 3.20 / 6.21 / 9.34 /
  // 17.4 / 24.9 -> 2.14 / 2.49 / 3.16 / 3.93 / 5.95 ms, 32x1024x4096 4.75 -> 1.83, 16x4096x1024
  // 2.68 -> 1.50; bf16 16 / 32 rows 16.8 / 32.1 -> 5.67 / 8.81 ms (one row: 1.41 -> 1.57, kept).
  // On the 16-core Emerald Rapids host these ran 6-12x behind torch (session 17, 16 threads:
  // int8 32 / 48 rows 3.2 / 4.9 ms against torch._int_mm's 0.51 / 0.41, bf16 16 rows 2.3 against
  // 0.61); packed they take AMX tiles there, which was not measured for fewer than 64 rows.
  // (Not where the plan names a walk: the unpacked k_outer walk stays asked for.)
  // 8-bit products (quads) on AVX-512 without AMX (session 28): the same forms from 0.06 MFLOP (not
  // 2) and from 32 in every dimension (not 64). Unpacked, each byte was widened and multiplied on
  // its own: int8 64^3 ran at 135 GOP/s on one Zen 5 thread, 0.6x torch._int_mm. Measured on the
  // 2-core Zen 5, one thread's CPU time (medians of 3 alternating processes, load 10-11), main ->
  // packed, us (torch._int_mm): 32^3 1.24 -> 1.04 (1.69), 40^3 2.01 -> 1.27 (1.94), 48^3 2.58 ->
  // 1.31 (1.70), 64^3 3.91 -> 1.79 (2.32), 96x96x64 10.9 -> 2.6 (2.9), 256x256x32 33.5 -> 6.6
  // (8.4), 64x16x64 1.87 -> 1.30 (1.78), 16x64x64 1.64 -> 1.14, 64x64x200 13.3 -> 3.8 (4.1); 24^3 (under
  // 0.06 MFLOP) 1.16-1.17 either way. Zen 4 (the same instructions) unmeasured. Not where the plan names
  // a walk, ksplit, fixed, pack or simd_width (the forms they ask for stay as before: half-width
  // vectors widen the bytes on load, which VNNI panels refuse).
  // benchmarks/recorded/issue14-zen5-2core-rows-session28.txt.
  {
    const int dg = dot_group(p.a_type, p.b_type, p.dtype, cpu);
    const bool amx = amx_group(p.a_type, p.b_type, p.dtype, cpu) > 0;
    const bool one = spec.batch1 * spec.batch2 == 1;
    const bool skinny = !overrides.count("order") && spec.K >= 64 && std::min(spec.M, spec.N) >= 4 &&
                        std::max(spec.M, spec.N) >= 64;
    const bool dots = one && flops >= 2.0e6 && (dg > 1 || amx);
    const bool quads = one && dg == 4 && !amx && cpu.vector_registers >= 32 && flops >= 6.0e4 &&
                       !overrides.count("order") && !overrides.count("ksplit") && !overrides.count("fixed") &&
                       !overrides.count("pack") && !overrides.count("simd_width");
    if ((dots && (std::min({spec.M, spec.N, spec.K}) >= 64 || skinny)) ||
        (quads && (std::min({spec.M, spec.N, spec.K}) >= 32 || skinny)))
      p.pack = true;
  }
  // A small block of C and a long K on many cores: the K split of the whole block (the k_outer
  // walk, unpacked; see plan_skinny_walk). 128x128x4096 f32 on 16 workers, packed 454 us, split
  // 192 (benchmarks/recorded/issue14-emr16-ksplit-session26.txt).
  if (ksplit_small_block(p, c)) p.pack = false;
  // Packed products have hundreds of tiles per worker: the last wave's imbalance is noise, and
  // the cache-blocked nest (data-parallel over column panels) is what they need.
  if (p.pack) p.split = "dp";
}

void plan_packed_blocks(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const PlanOverrides& overrides = c.overrides;
  const int64_t N = c.N;
  // The blocked nest's K tile: C (or the scratch of partial sums) is read and written once per
  // K tile, which costs more than a B slice that spills from L1 to L2. 4 KiB of B per column
  // (1024 f32, 2048 bf16, 4096 int8 in K; a 256 KiB slice of a 64-column panel, in L2 with the
  // A block; f64 1024 as well), in equal tiles. Measured on Zen 5, one thread, 2048^3: f32 212 ->
  // 233 GFLOP/s (kt 256 -> 1024), bf16 344 -> 462, int8 719 -> 898, f64 102 -> 109 (512 -> 1024).
  // (AMX plans too: measured on the 16-core Emerald Rapids host, 4096^3, 16 threads, with their
  // partial sums continued in the tiles: bf16 3.66 / 3.96 / 3.86 TFLOP/s with kt 256 / 512 / 2048,
  // int8 3.80 / 6.23 / 8.50 TOP/s with kt 512 / 1024 / 4096.)
  if (p.pack && !overrides.count("kt")) {
    const int64_t cap = 4096 / std::min(4, ir::size_in_bytes(p.vnni > 1 ? p.b_type : p.dtype));  // f64: 1024 too
    // (K = 0: one K tile of kb; dividing by no parts was a SIGFPE, session 20's audit)
    const int64_t kp = ceil_to(std::max<int64_t>(1, spec.K), p.kb), parts = (kp + cap - 1) / cap;
    p.kt = ceil_to((kp + parts - 1) / parts, p.kb);
  }
  // Row panels per block: the worker's B slices of one K tile stream past each block of A
  // (from L3 once they outgrow L2), so once they pass 4 MiB the blocks grow 6x. Measured on
  // Zen 5, one thread, 4096^3: f32 / bf16 / int8 219 / 410 / 835 GFLOP/s with 8 panels, 229 /
  // 448 / 891 with 48; at 1024 and 2048 the two are within noise.
  const int grid = p.grid_m != 0 ? p.grid_m : static_cast<int>(run_time_grid(p, c, p.threads));
  if (p.pack && !overrides.count("mc_tiles")) {
    const int64_t gn = std::max(1, p.threads / std::min(grid, p.threads));  // worker columns
    const int64_t cols = (N + gn - 1) / gn;
    const double bset = double(std::min(p.kt, ceil_to(spec.K, p.kb))) * cols * ir::size_in_bytes(packed_b_type(p));
    p.mc_tiles = bset > 4.0 * (1 << 20) ? 48 : 8;
    // AMX tiles: each micro kernel reads its A panel's K-tile slice (mr x kt) straight into the
    // tiles, once per column panel, and tileloadd keeps pace with the tile products only from L2:
    // the block of A (mc_tiles of those slices) stays within 1 MiB, half the 2 MiB L2 per core of
    // every AMX CPU so far (Sapphire, Emerald, Granite Rapids). Measured on the 16-core Emerald
    // Rapids host, one core (session 11): the 2 x 2 tile loop with A's block in L2 at 65-69% of
    // the tile peak, with a 6 MiB block (48 panels of kt 2048) at 26-30%; coopjit with mc_tiles 48
    // -> 8, one thread: bf16 2048^3 557 -> 820 GFLOP/s, 4096^3 570 -> 811, int8 4096^3 845 -> 1040
    // GOP/s; 16 workers: int8 8192^3 9.8 -> 11.4 TOP/s. Smaller K tiles with bigger blocks (the
    // same 1 MiB of A: kt 1024 / 512 / 256 bf16 elements with 16 / 32 / 64 panels, int8 twice the
    // K) lose to this default (kt 2048 / 4096, 8 panels) (session 15, 16 workers against the
    // default: bf16 4096^3 0.86 / 0.76 / 0.64x, 8192^3 0.79 / 0.66 / 0.53x, int8 4096^3 0.87 /
    // 0.79 / 0.71x, 8192^3 0.90 / 0.74 / 0.67x; k_inner no better; the nest in C on one core,
    // bf16 2048^3: 1021-1034 GFLOP/s with this default, 672-687 / 480-512 / 411-454 with those).
    if (p.amx) {
      // (K = 0: a slice of one kb, as the K tile above; a slice of 0 bytes was a SIGFPE on AMX CPUs)
      const int64_t slice =
          int64_t(p.mr) * std::min(p.kt, ceil_to(std::max<int64_t>(1, spec.K), p.kb)) * ir::size_in_bytes(packed_a_type(p));
      p.mc_tiles = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(p.mc_tiles, (int64_t(1) << 20) / slice)));
    }
  }
}

void plan_inline_b(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const CpuTargetInfo& cpu = c.cpu;
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M, N = c.N;
  // B packed by its reader, per K tile and column panel (GemmPlan::inline_b): where the packed A
  // of all the rows, one K tile of it, stays in L2 (512 KiB at most: one block of row panels), B
  // is the big operand and a packing phase costs three passes over its bytes (read, write the
  // panels, read them back from L3 or memory) where this costs one. Needs one row of workers
  // (each packs only its own column panels) and at least a column panel per worker. Measured on
  // Zen 5, 2 threads: int8 64x4096x4096 see the README.
  // AMX plans (the same VNNI rows the tiles read) take it on many cores where the product is
  // skinny (up to 64 rows, below), else only when asked: on the 16-core Emerald Rapids host
  // (session 15, 16 workers, 64x4096x4096) bf16 1.146 -> 0.99 ms, int8 0.87 -> 0.80 ms (1.15x /
  // 1.08x, within that host's round-to-round noise; torch 1.14 / 0.76 ms), where a B packed
  // beforehand (prepack) runs in 0.64 / 0.61 ms; session 17 (medians of 5 rounds, the plan through
  // the tuned-plan table, plan=None calls): int8 64x4096x4096 748 -> 534 us (torch._int_mm 508).
  {
    const int64_t tiles_m = (M + p.mr - 1) / p.mr, tiles_n = (N + p.nr - 1) / p.nr;
    const double a_slice =
        double(tiles_m * p.mr) * double(std::min(p.kt, ceil_to(spec.K, p.kb))) * ir::size_in_bytes(packed_a_type(p));
    // Skinny products on many cores (up to 64 rows, the rows of plan_packing's aliasing rule): their
    // A slice at inline_b's own K tile (below) is at most 64 KiB, but at the packed K tile f64's 64
    // rows (13 tiles of 5: 65 rows of 8 KiB, 520 KiB) passed the bound above and kept the packing
    // phase. Measured on the 16-core Emerald Rapids host (session 16, medians of rounds through
    // plan=): f64 64x4096x2048 3.66 -> 2.81 ms (NumPy 2.60; the packing launch took 2.4 ms of the
    // 4.6 of a traced call), a second, noisier run 4.71 -> 3.71 (NumPy 4.07).
    // benchmarks/recorded/issue14-emr16-gemv-session16.txt.
    const bool skinny = cpu.max_threads >= 8 && M <= 64;
    // AMX plans take it up to 64 rows on any number of cores: on 8+ as above, and on fewer since
    // session 33 (2 threads, medians of 30 calls, m x 4096 x 4096, packing phase -> inline_b). On
    // the 2-core Emerald Rapids guest: bf16 M = 16 / 32 / 64 6.3 / 7.3 / 8.7-9.1 ms -> 4.0 / 4.0 /
    // 5.1-5.7 ms, int8 M = 16 / 64 4.1 / 4.7 -> 2.8 / 2.0 ms. On the 16-core host held to 2 cores
    // (taskset, 2 workers): bf16 4.43 / 4.65 / 5.18 -> 2.84 / 3.26 / 4.10 ms, int8 2.00 / 2.44 ->
    // 1.77 / 1.92 ms; there 128 and 256 rows lost (bf16 4.34 -> 6.99, 6.04 -> 6.97 ms) where the
    // guest gained: left to the packing phase. benchmarks/recorded/session33-emr2-inline-b.txt.
    const bool skinny_amx = p.amx && M <= 64;
    // (and few rows over a wide B on the 2 MiB-L2 Xeons with fewer than 8 cores, up to 512 rows:
    // xeon_few_core_rows; 2-core Emerald Rapids guest, f32, packing phase -> inline_b, ms:
    // 128x4096x4096 30.5 -> 25.2, 256x4096x4096 49.0 -> 42.8, 512x2048x2048 25.3 -> 22.6; 1024^3
    // 11.05 -> 11.90, beyond the rule)
    const bool few_core_rows = xeon_few_core_rows(p, c);
    if (!overrides.count("inline_b"))
      p.inline_b = p.pack && !p.prepacked_b && (!p.amx || (skinny_amx && p.amx_feed != 2)) && p.split == "dp" &&
                   tiles_n >= p.threads && (a_slice <= 512.0 * 1024 || skinny || skinny_amx || few_core_rows) &&
                   (!overrides.count("grid_m") || p.grid_m == 1) &&
                   !(overrides.count("shares") && overrides.at("shares") > 1) &&  // (shares cut the blocked nest)
                   !(overrides.count("k_inner") && overrides.at("k_inner") == 1) &&  // (k_inner orders it)
                   !(overrides.count("nc_tiles") && overrides.at("nc_tiles") > 0);  // (and nc_tiles)
    if (p.inline_b) {
      if (!p.pack || p.prepacked_b || p.split != "dp")
        throw UserError(cat("plan inline_b=1 packs B inside the blocked nest: it needs pack=1, a B that is not ",
                            "prepacked and split='dp' (got pack=", p.pack, ", prepacked_b=", p.prepacked_b, ", split='",
                            p.split, "')"));
      if (overrides.count("grid_m") && p.grid_m != 1)
        throw UserError(cat("plan inline_b=1 needs one row of workers (grid_m=1), got grid_m=", p.grid_m));
      // (amx_feed 2 reads B as packed 1 KiB tiles; the reader packs VNNI rows: session 17 found the
      // pair giving wrong sums once the skinny rule above took inline_b on 8+ cores)
      if (p.amx && p.amx_feed == 2)
        throw UserError("plan inline_b=1 packs B in VNNI rows; amx_feed=2 reads B as whole 1 KiB tiles: use amx_feed 0 or 1, or inline_b=0");
      p.grid_m = 1;
      // K tiles whose slice of a column panel stays in L1 (32 KiB: int8 512, bf16 256, f32 128 in
      // K), reused by every row panel; C's column panel stays in L1 / L2 across them.
      if (!overrides.count("kt")) {
        const int64_t cap = std::max<int64_t>(p.kb, (int64_t(32) << 10) / (int64_t(p.nr) * ir::size_in_bytes(packed_b_type(p))) / p.kb * p.kb);
        const int64_t kp = ceil_to(std::max<int64_t>(1, spec.K), p.kb), parts = (kp + cap - 1) / cap;
        p.kt = ceil_to((kp + parts - 1) / parts, p.kb);
      }
      if (!overrides.count("mc_tiles")) p.mc_tiles = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(4096, tiles_m)));
    }
  }
}

void plan_own_a(GemmPlan& p, const PlanContext& c) {
  const PlanOverrides& overrides = c.overrides;
  // bf16 products on 2-4 workers of a machine under 8 cores, A's packed panels up to 3 MiB (1024^3):
  // one row of workers, each packing A itself (the kernel's own grid for 512^3 on 2 was 2 x 1). With the
  // panels shared, a worker read the panels the other core had packed (lines modified in that
  // core's caches) behind a barrier that waited for the slower packer, and a worker descheduled
  // or started late held up the other. Measured on the 2-core Zen 4 (session 21, 2 workers, the
  // same process, plan= against the default, loaded by other builds: the workers' CPU time from
  // the launch trace): 256^3 146 -> 95 us, 512^3 863 -> 723, 1024^3 5517 -> 5316 (2048^3 40.8 ->
  // 40.3 ms: not taken, nor int8: 512^3 332 -> 324 us, 1024^3 2812 -> 2785).
  // int8 / uint8 (vnni 4) too since session 26: on the 2-core Zen 5 (2 workers, plan= own_a 0 / 1
  // in one process, alternating blocks, loaded by other builds; the launch trace's busier worker,
  // min / median us) 256^3 24.4 / 25.6 -> 20.2 / 21.7, 512^3 158.9 / 168.4 -> 143.1 / 154.8, 1024^3
  // 1186 -> 1114 (min); a call, median of 7 rounds, 256^3 29.5 -> 28.0, 512^3 174.0 -> 169.1 (torch._int_mm
  // 24.1 / 150.4: still behind). benchmarks/recorded/issue14-zen5-2core-int8-session26.txt.
  if (!overrides.count("own_a")) {
    const GemmSpec& spec = c.spec;
    const int64_t tiles_m = (c.M + p.mr - 1) / p.mr, tiles_n = (c.N + p.nr - 1) / p.nr;
    const double a_bytes = double(tiles_m * p.mr) * double(ceil_to(std::max<int64_t>(1, spec.K), p.kb)) *
                           ir::size_in_bytes(packed_a_type(p));
    p.own_a = p.pack && !p.amx && (p.vnni == 2 || p.vnni == 4) && p.split == "dp" && p.shares == 1 && !p.direct_a &&
              c.cpu.max_threads < 8 && p.threads >= 2 && p.threads <= 4 && p.grid_m <= 1 && tiles_n >= p.threads &&
              a_bytes <= 3.0 * (1 << 20) && !overrides.count("grid_m") && spec.batch1 * spec.batch2 == 1;
  }
  if (!p.own_a) return;
  if (p.direct_a && !overrides.count("direct_a")) p.direct_a = false;  // (asked for: A packed, not read where it is)
  if (!p.pack || p.split != "dp" || p.shares > 1 || p.direct_a)
    throw UserError(cat("plan own_a=1 gives each worker its own packed copy of A in the data-parallel packed nest: it ",
                        "needs pack=1, split='dp', shares=1 and direct_a=0 (got pack=", p.pack, ", split='", p.split,
                        "', shares=", p.shares, ", direct_a=", p.direct_a, ")"));
  if (overrides.count("grid_m") && p.grid_m != 1)
    throw UserError(cat("plan own_a=1 needs one row of workers (grid_m=1), got grid_m=", p.grid_m));
  p.grid_m = 1;
}

void plan_column_blocks(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const CpuTargetInfo& cpu = c.cpu;
  const PlanOverrides& overrides = c.overrides;
  const int64_t M = c.M;
  // Column-panel blocks (GemmPlan::nc_tiles) on many cores, f32 / f64 (no dot instructions), where
  // a worker's row panels (one K tile of them) outgrow half its L2: one column panel a block, so
  // each K-tile slice of B (256 B a K step against 24 of A, 64 f32 x 1024 K) is read from L3 once
  // and then from L2 by every row panel of the worker, and A streams past it. In the mc_tiles
  // order each block of row panels read the slice again, its first tile from L3 at the micro
  // kernel's rate, which L3 does not keep up with. Measured on the 16-core Emerald Rapids host
  // (session 15, this order through mc_tiles=4096 against the default, the same panels and K
  // tiles): one thread 2048^3 f32 81.5% -> 90.7% of the peak (130 -> 117 ms); 16 threads 4096^3
  // 1.05x (114 -> 108 ms), 8192^3 1.06x, 2048^3 1.02x, f64 4096^3 1.04x; 1024^3 on 16 threads,
  // whose 22 row panels a share (540 KiB of A) stay in L2 either way, 0.94x (2.08 -> 2.21 ms):
  // it keeps the row blocks. Blocks of 2+ panels (A's slice reused from L1 across the block) are
  // not measured there: plan= only. benchmarks/recorded/issue14-emr16-f32-session15.txt.
  // AMX plans keep the row blocks: with their tiles (plan= nc_tiles 1 / 2 / 4 / 8 against the
  // default, the 16-core host, session 16) 16 workers measured bf16 1024^3 0.82-0.94x, 2048^3
  // 0.84-0.96x, 4096^3 0.86-1.05x, 8192^3 0.84-0.97x; int8 1024^3 0.69-0.85x, 2048^3 0.85-0.91x,
  // 4096^3 1.02-1.15x, 8192^3 0.85-1.11x (the wins within that host's round-to-round noise); one
  // thread 2048^3 bf16 0.68-1.02x, int8 0.81-1.10x. The nest in C on one core (amx_nest_probe.c
  // order 2) got more from 8-panel blocks (2048^3 int8 74% of the tile loop's peak against 32-40%
  // in the row-block order; bf16 54% against 48%), which coopjit's nest did not show.
  // benchmarks/recorded/issue14-emr16-amx-nc-tiles-session16.txt.
  // On those Xeons the same order for f32 at 1-7 workers too (the pool's size set by set_num_threads):
  // measured on the 16-core Emerald Rapids host (session 22, main's plan against plan= nc_tiles 1,
  // medians of 5 alternating rounds, torch at the same thread count): one thread f32 1024^3 20.0
  // -> 16.4 ms (torch 17.4), 2048^3 164 -> 152 ms (torch 142); 2 threads 1024^3 12.4 -> 12.0 ms
  // (torch 10.5), within that host's rounds.
  // benchmarks/recorded/issue14-emr16-f32-squares-session22.txt.
  const bool xeon_f32 = intel_xeon_2mib_l2(cpu) && p.a_type == ir::ScalarType::f32 && p.b_type == ir::ScalarType::f32;
  if (!overrides.count("nc_tiles") && !overrides.count("mc_tiles") && (cpu.max_threads >= 8 || xeon_f32) && p.pack &&
      !p.amx && p.vnni == 1 && !p.inline_b && !p.k_inner && p.split == "dp") {
    // The worker's row panels as the kernel chooses its grid (GemmRecipe::blocked): grid_m (times
    // the shares), or run_time_grid of the threads x shares.
    const int64_t tiles_m = (M + p.mr - 1) / p.mr;
    const int64_t W = int64_t(p.threads) * p.shares;
    const int64_t gm = p.grid_m > 0 ? std::min<int64_t>(int64_t(p.grid_m) * p.shares, W) : run_time_grid(p, c, W);
    const double rows_a = double((tiles_m + gm - 1) / gm) * p.mr * double(std::min(p.kt, ceil_to(spec.K, p.kb))) *
                          ir::size_in_bytes(p.dtype);
    // (at 1-7 workers of those Xeons: where the rows outgrow the whole 2 MiB L2; 512^3 on one
    // worker, 1 MiB of A, is not measured and keeps the row blocks)
    const double bound = cpu.max_threads >= 8 ? 0.5 * double(cpu.l2_bytes) : double(int64_t(2) << 20);
    if (rows_a > bound) p.nc_tiles = 1;
  }
  // AMX plans take the same order (each tile's partial sums continued in the tiles from the
  // scratch, as in the row-block order); amx_prefetch 6 fetches the next block of row panels'
  // cold panels, which this order does not have.
  // With k_inner (session 28) nc_tiles is the column size of the blocks of C that go through
  // every K tile (mc_tiles x nc_tiles tiles, their partial sums in L2).
  if (p.nc_tiles > 0 && (!p.pack || p.inline_b || (p.amx && p.amx_prefetch == 6)))
    throw UserError(cat("plan nc_tiles=", p.nc_tiles, " orders the packed blocked nest by column panels: it needs pack=1, ",
                        "inline_b=0 and no amx_prefetch=6 (got pack=", p.pack, ", inline_b=", p.inline_b,
                        ", amx_prefetch=", p.amx ? p.amx_prefetch : 0, ")"));
}

}  // namespace coopjit
