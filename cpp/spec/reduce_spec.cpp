// Validation and planning of reductions (reduce_spec.h).
#include "spec/reduce_spec.h"

#include <algorithm>

#include "core/error.h"

namespace coopjit {

void ReduceSpec::validate() const {
  if (op != "sum" && op != "prod" && op != "min" && op != "max")
    throw UserError(cat("unknown reduction '", op, "' (known: sum, prod, min, max)"));
  if (form != "row" && form != "column" && form != "2x2" && form != "column_rows")
    throw InternalError(cat("unknown reduction form '", form, "'"));
  if (rows < 0 || cols < 0) throw UserError(cat("negative reduction size ", rows, " x ", cols));
}

std::string ReducePlan::key(const ReduceSpec& s) const {
  return cat("reduce.", s.op, ".", s.form, ".", ir::name(s.in), ".", ir::name(s.acc), ".", ir::name(s.out), ".s",
             simd_width, ".t", tile_rows, "x", tile_cols, unit ? ".u" : ".g",
             block_cols ? cat(".cb", block_cols) : std::string(), stride ? cat(".sc", stride) : std::string(),
             unit_y ? ".uy" : "", prefetch ? cat(".pf", prefetch) : std::string(),
             read_past ? ".rp" : "", segments ? ".seg" : "", stream_y ? ".nt" : "",
             sum_block ? cat(".sb", sum_block, "x", sum_levels) : std::string());
}

bool stream_y_pays(const ReduceSpec& s, const ReducePlan& p) {
  // The column form's Y written with streaming stores where it is large next to X: each line of
  // Y written with ordinary stores is first read (RFO), then written back, so a Y of a third of
  // X's bytes (3 rows) costs X + 2 Y of traffic for X + Y. Y of at least 4 MiB (beyond a core's
  // share of the caches, where the lines would be evicted unread anyway) and at least an eighth
  // of X's bytes (where the read of Y is a measurable part of the traffic). Full tiles whose
  // results start on 64-byte boundaries only (their width in Y's bytes a multiple of 64).
  const int64_t yb = s.cols * ir::size_in_bytes(s.out);
  const double xb = double(s.rows) * s.cols * ir::size_in_bytes(s.in);
  return s.form == "column" && p.unit_y && yb >= (int64_t(4) << 20) && 8.0 * yb >= xb &&
         (int64_t(p.tile_cols) * ir::size_in_bytes(s.out)) % 64 == 0;
}

ReducePlan plan_reduce(const ReduceSpec& s, int vector_bytes, int max_threads) {
  s.validate();
  ReducePlan p;
  p.simd_width = std::max(1, vector_bytes / ir::size_in_bytes(s.acc));
  // Enough independent accumulator vectors to cover the add latency, few enough to stay in
  // registers: 4 rows x 4 vectors for a row reduction. Down columns, one row of as many vectors
  // as there are registers (2 KiB of each f32 row with AVX-512): long contiguous runs per row
  // are what the prefetchers follow. Measured on Zen 5, one thread, 8192 x 8192 f32 down the
  // columns: 4 x 8 vectors 21 GB/s, 1 x 16 24, 1 x 32 34 (the row form: 38), 1 x 48 21
  // (spills). Narrow arrays get narrower tiles, so that every worker has columns.
  const double bytes = double(s.rows) * s.cols * ir::size_in_bytes(s.in);
  p.threads = bytes < (1 << 20) ? 1 : std::max(1, max_threads);
  p.tile_cols = p.simd_width * 4;
  p.tile_rows = 4;
  if (s.form == "column") {
    const int64_t regs = vector_bytes >= 64 ? 32 : 16;
    const int64_t per_worker = (s.cols + p.threads - 1) / p.threads;
    const int64_t nvec = std::max<int64_t>(4, std::min<int64_t>(regs, (per_worker + p.simd_width - 1) / p.simd_width));
    p.tile_rows = 1;
    p.tile_cols = p.simd_width * static_cast<int>(nvec);
    // Contiguous columns wider than 8 vectors a worker: 4 vectors. The column form now walks
    // few rows (fewer than 8 a worker: (3, 4e6) along axis 0) or narrow ones (up to 2 KiB:
    // (1e6, 500)); long walks down wide rows are column_rows (run_reduce). There a row of 32
    // vectors ran at half the rate of 4 (with session 26's levels of partial sums, 3 x 32
    // accumulators): Zen 5, one thread, CPU time, 11 blocks, GB/s of the input read, 32 / 4 / 8
    // vectors: f32 sums (3, 4e6) 19 / 38 / 29, (5, 2.4e6) 25 / 49 / 40, (1e5, 500) 21 / 35 / 37,
    // (4e4, 300) 30 / 33 / 28; f32 max (3, 4e6) 35 / 40 / 21, (1e5, 500) 16 / 29 / 27; f64 sums
    // (3, 4e6) 24-25 / 33 / 36, (5, 2.4e6) 31 / 43 / 38, (1e5, 250) 22 / 36 / 37; int32 into
    // int64 (1e5, 500) 13 / 32 / 30. A worker's columns of up to 8 vectors keep one tile as wide
    // as them (each row read once): (1e6, 64) f64 along axis 0, 8 vectors -> two tiles of 4:
    // sum 42 -> 36, max 41 -> 31. min / max of converted inputs (bf16, f16 into f32) keep the
    // wide tile: (3, 4e6) bf16 max along axis 0 10-11 -> 9 GB/s with 4 vectors (1 thread).
    const bool converted_min_max = (s.op == "min" || s.op == "max") && s.in != s.acc;
    if (s.sx_c == 1 && !converted_min_max && (per_worker + p.simd_width - 1) / p.simd_width > 8)
      p.tile_cols = p.simd_width * 4;
  }
  // Float min / max along long rows: one row of 8 vectors. Each combine there is three
  // instructions (scalar_bin: vrangeps, a NaN test into a mask, a masked add), and 4 x 4
  // accumulators with their loads outgrow the 32 registers (copies each step). Measured on
  // Zen 5, one thread, CPU time, max along rows of 4096 x 4096: f32 4 x 4 28 GB/s, 2 x 8 30,
  // 1 x 4 34, 1 x 8 37-38, 1 x 16 37; f64 31 / 36 (4 x 4 / 1 x 8); sums and integer max keep 4 x 4
  // (f32 sum 1 x 8 38 against 43; int32 max 46 against 48).
  if (s.form == "row" && (s.op == "min" || s.op == "max") && ir::is_float(s.acc) && s.cols >= 1024)
    p.tile_rows = 1, p.tile_cols = p.simd_width * 8;
  // Rows of 1-4 whole vectors: the tile as wide as the row, so that every load of a row tile is
  // a whole unmasked vector (a 4 x 64-lane tile over rows of 48 f32 loaded every vector masked),
  // 8 or 4 rows of them (4 x 4 vectors: the default tile). Other rows up to 8 KiB: 4 rows x 2 vectors, so that less of a tile is
  // masked at a row's head and tail. Measured on Zen 5, sums of 48 MB of f32 rows, one thread
  // (CPU time; 4 x 4 vectors against this): 40 elements 7.4 / 31 GB/s, 100 13 / 20, 128 21 / 36,
  // 256 20 / 30, 512 29 / 38, 1024 37 / 44, 2048 45 / 48; 4096 50 / 49 and longer rows keep 4 x 4;
  // 2 threads: 48 elements 9.4 / 35, 32 (the row form instead of the column form of short rows)
  // 18 / 38.
  if (s.form == "row" && p.tile_rows == 4 && s.cols % p.simd_width == 0 && s.cols <= 4 * p.simd_width) {
    const int64_t vecs = s.cols / p.simd_width;
    p.tile_cols = p.simd_width * static_cast<int>(vecs);
    p.tile_rows = vecs <= 2 ? 8 : 4;
  } else if (s.form == "row" && p.tile_rows == 4 && s.cols * ir::size_in_bytes(s.in) <= 8192) {
    p.tile_cols = p.simd_width * 2;
  }
  // Contiguous rows shorter than 1 KiB: a row tile reads R short runs side by side, which the
  // hardware prefetchers do not follow; the lines 8 KiB past each main tile's are prefetched
  // into L1. Zen 5, one thread, CPU time, sums of 48 MB of f32 rows: 32 elements
  // 35 -> 40 GB/s, 40 31 -> 43, 64 37 -> 43, 100 27 -> 36-38, 128 35 -> 42 (4 and 16 KiB ahead:
  // less); rows of 1 KiB and longer measured 0.85-1.0x with it, so they are not prefetched.
  if (s.form == "row" && s.sx_c == 1 && s.sx_r > 0) {
    const int64_t row_bytes = s.sx_r * ir::size_in_bytes(s.in);
    if (row_bytes < 1024) p.prefetch = 8192;
  }
  // Rows followed by the next row (a stride of at least the row and a tile, the gap between
  // rows under a page, so that every byte read past a row's end lies on a page that holds the
  // next row): a row's tail tile is read whole and its elements past the row's end replaced by
  // the identity, in every row tile with a row after it (the last keeps the masked tile, so
  // nothing past the buffer is read). The masked tile checks every row and column. Zen 5, one
  // thread, CPU time, sums of 48 MB of f32 rows at offset 16 into a line (the row's full tiles
  // start at its first line boundary, so that a row of whole lines has a head and a tail):
  // 256 elements 31 -> 39 GB/s, 512 40 -> 49, 1024 46 -> 51; 100 36 -> 36-41.
  if (s.form == "row" && s.sx_c == 1 && s.sx_r >= s.cols && s.sx_r >= p.tile_cols &&
      (s.sx_r - s.cols) * ir::size_in_bytes(s.in) < 4096 - 512)
    p.read_past = true;
  // Float sums along rows longer than 128 tiles (8192 f32): levels of partial sums of 16 tiles
  // (a lane's chain of 16 elements, then 16 of those, ...; ReducePlan::sum_block; the kernel
  // runs them on walks of more than 8 blocks), so that a lane's error grows like
  // (3 * 16 + n / 4096) * eps, not n * eps (n: the lane's elements). One Zen 5 thread, sums of
  // constant (stride-0) data: 1e6 elements 3.7e-5 -> 1.4e-7 (NumPy's pairwise sum 6.3e-8),
  // 2^24 5.5e-4 -> 1.7e-7; blocks of 32 / 64 tiles in 2 levels: 4.1e-7 / 8.7e-7.
  if (s.form == "row" && s.op == "sum" && ir::is_float(s.acc) && s.cols > int64_t(8 * 16) * p.tile_cols)
    p.sum_block = 16, p.sum_levels = 3;
  if (s.form == "2x2") p.tile_rows = 8, p.tile_cols = p.simd_width * 2;
  // column_rows: tiles of 8 vectors; a block as wide as the row (up to 256 KiB of partials), so
  // that each worker reads its rows front to back, one stream. A row of partials up to 16 KiB
  // (half the smallest L1 of these CPUs, Zen 4's 32 KiB) stays in L1 next to X's lines: one row
  // a step (a single stream); wider ones live in L2, and 4 rows a step update them a quarter
  // as often. Zen 4, one thread, CPU time, sums down the columns of f32 arrays (% of NumPy's copy
  // at the same time; before: blocks of 16 KiB of partials, 4 rows a step): 4096^2 95 -> 106%,
  // 8192 x 1024 74 -> 120%, 16384 x 4096 82 -> 99%, 8192^2 72 -> 94%, 2048 x 32768 74 -> 105%,
  // 1024 x 65536 70 -> 100%, 256 x 262144 82 -> 105%; max 4096^2 87 -> 111%. One row a step
  // over partials wider than 16 KiB: 8192^2 64%, 2048 x 32768 62%; blocks of 16 KiB of a wider
  // row one row a step: 49% (each run of 16 KiB then a jump).
  if (s.form == "column_rows") {
    p.tile_cols = p.simd_width * 8;
    const int64_t acc = ir::size_in_bytes(s.acc);
    const int64_t row8 = std::max<int64_t>(1, (s.cols + p.tile_cols - 1) / p.tile_cols) * p.tile_cols;
    p.tile_rows = row8 * acc <= 16384 ? 1 : 4;
    // Sums (and products) read in their accumulator type (f32, f64, int64): 8 rows a step
    // whatever the row's length. One row a step ran at half the copy rate on Zen 5 (one
    // thread, CPU time, 48 MB of f32 / f64, GB/s of the input read, 1 / 4 / 8 rows a step):
    // (6000, 2000) f32 25 / 38 / 43 (NumPy 47), 4096^2 28 / 40 / 46 (NumPy 46), 8192 x 1024 30 /
    // 42 / 47, (6000, 2000) f64 28 / - / 40; 8192^2 (4 rows before) 43 / 45 with 8. Inputs
    // converted on the way (bf16 / f16 into f32) and integer min / max keep one row (float min /
    // max: below): (6000, 2000) bf16
    // sum 53 / 42 (8 rows), f32 max 32 / 26-28 (4-8 rows): their combines need the registers
    // (hzen measured f32 max 2048^2 326 -> 287 us with 8 rows; hred's (6000, 2000) went the other
    // way: one row kept). Both helpers' sum figures: issue14-zen5-2core-rows-session28.txt and
    // issue14-zen5-2core-reduce-session28.txt.
    if ((s.op == "sum" || s.op == "prod") && s.in == s.acc) p.tile_rows = 8;
    // Float min / max read in their own type (f32, f64): 8 rows a step too, in tiles of 4
    // vectors. Each combine is three instructions (scalar_bin: vrangeps, a NaN test, a masked
    // add), and 8 rows of 8 vectors loaded for the tree spilled (64 vectors live); 4 vectors
    // keep them in registers. Zen 5, one thread, CPU time, GB/s of the input read, max along
    // axis 0, one row a step (4 above 16 KiB) / 8 x 8 vectors / 8 x 4 / 8 x 2 (f64: 8 x 4 and
    // 8 x 8 vectors): f32 4096^2 31.6 / 29.6 / 39.7 / 39.4, 8192^2 35.5 / 32.5 / 39.0 / 37.1,
    // (6000, 2000) 33.9 / 26.9 / 37.4 / 39.8, (64, 1e6) 41.6 / - / 42.4 / 40.9; f64 8192^2
    // 39.9 / 34.4 (8 x 8) / 42.6 (8 x 4).
    const bool float_min_max = (s.op == "min" || s.op == "max") && ir::is_float(s.acc) && s.in == s.acc;
    if (float_min_max) p.tile_rows = 8, p.tile_cols = p.simd_width * 4;
    const int64_t row = std::max<int64_t>(1, (s.cols + p.tile_cols - 1) / p.tile_cols) * p.tile_cols;
    const int64_t most = std::max<int64_t>(p.tile_cols, (int64_t(256) << 10) / acc / p.tile_cols * p.tile_cols);
    p.block_cols = static_cast<int>(std::min<int64_t>(row, most));
  }
  p.unit = s.sx_c == 1;  // the tile's columns run along X's columns in every form
  // A contiguous Y (what coopjit.reduce passes): the column form's results are stored as whole
  // vectors. With the stride a kernel argument they were scattered, 2 vscatterqps a vector: rows
  // of 3 f32 (the n x K view of short rows) read at 13 GB/s on one Zen 5 thread, ...
  p.unit_y = s.sy_c == 1;
  // Down the columns of a small constant stride (the n x K view of K short rows of n elements):
  // the stride is built into the kernel, whose loads then read whole vectors and pick every
  // stride-th element instead of gathering one element a lane (strides of 2-16; segment tiles,
  // below, up to 4S).
  // The pick needs registers of its own: 8 accumulator vectors, not 32 (which spilled).
  // (A segment tile of n x S elements at most 4096, coopmatrix.reduce's limit: max of int8 rows
  // of 65-127 elements, 64 lanes, failed the IR verifier.)
  const bool segments = s.form == "column" && s.sx_r == 1 && s.rows == s.sx_c && s.sx_c >= 2 &&
                        s.sx_c <= 4 * p.simd_width && s.sx_c * p.simd_width <= 4096;
  if (s.form == "column" && s.sx_c >= 2 && (s.sx_c <= 16 || segments)) {
    p.stride = s.sx_c;
    p.tile_cols = std::min(p.tile_cols, p.simd_width * 8);
    // The view of K contiguous short rows of up to 4S elements (X's rows are the rows' n
    // elements, 1 apart; its columns the rows, n apart): each tile of S or 2S rows is one n x CW
    // load of n whole vectors a chunk of S rows (plan segments), reduced down its columns (the
    // lowering: rows of up to 7 through picks of each row of the view, longer ones row by row of X
    // with constant masks, then the S rows across their lanes together), where each of the n rows
    // of the view loaded the n vectors again, one element further on, and rows of 17-32 f32 were
    // gathered. Zen 5, one thread, CPU time, 48 MB, sums of f32 rows of 3 / 5 / 8 / 12 / 17 / 24 /
    // 31 elements 14 / 13 / 12 / 12 / 8 / 8 / 5 -> 33 / 34 / 34 / 33 / 30 / 32 / 32 GB/s; int32
    // rows of 17-31 (summed into int64, S = 8) 4-8 -> 23-42.
    if (segments) {
      p.segments = true;
      p.tile_cols = p.simd_width * (s.sx_c <= 4 ? 2 : 1);
    }
  }
  // Sums along long contiguous rows on 8+ workers: 4 shares a worker (ReducePlan::shares), each
  // at least 256 KiB and 4 row tiles, so that the workers on fast vCPUs take the slow ones' later
  // shares. On the 16-core Emerald Rapids host (a KVM guest whose vCPUs run at two rates about
  // 2:1 apart; 5 rounds, medians [min-max], GB/s of the input read), f32 sums along the rows of
  // 8192^2 / 4096^2, blocks of calls after a pause: 16 shares 155.5 [135.8-163.7] / 154.5
  // [154.0-156.8], 64 shares 212.4 [205.6-217.2] / 197.6 [179.0-208.6] (torch 156.1 / 157.5);
  // one call after 0.3 s idle (bench --quick's way): 91.3 [58.6-101.0] / 65.5 [24.7-75.2] ->
  // 101.5 [72.9-108.0] / 70.9 [61.4-75.3]. The next run, the planner's shares against 16: blocks
  // 152.1 [149.5-164.2] / 161.3 [137.6-172.6] -> 208.1 [178.8-256.6] / 210.0 [194.7-217.1] (torch
  // 141.4 at 8192^2), single calls 92.8 / 69.2 -> 101.3 / 70.7 (spreads overlapping). Session 24
  // had measured 1.1-1.2x in blocks (benchmarks/recorded/issue14-emr16-many-session24.txt,
  // -rows-session25.txt).
  if (s.form == "row" && s.op == "sum" && p.threads >= 8 && s.sx_c == 1 && s.cols * ir::size_in_bytes(s.in) >= 4096) {
    const int64_t want = 4 * int64_t(p.threads);
    const int64_t row_tiles = (s.rows + p.tile_rows - 1) / p.tile_rows;
    if (row_tiles >= 4 * want && bytes >= double(want) * (256 << 10)) p.shares = static_cast<int>(want);
  }
  p.stream_y = stream_y_pays(s, p);
  return p;
}

}  // namespace coopjit
