// GemmPlan: how a GemmSpec is computed on a target. A plain value: printable, comparable,
// hashable (key()), and overridable field by field (by the caller and, later, the autotuner).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/types.h"
#include "spec/gemm_spec.h"

namespace coopjit {

/// What the planner needs to know about the CPU.
struct CpuTargetInfo {
  int vector_bytes = 64;  // widest usable vector register (64 with AVX-512, 32 with AVX2)
  int vector_registers = 32;
  int max_threads = 1;  // the worker pool's size
  bool dot_bf16 = false;  // AVX512-BF16: vdpbf16ps (pairs of bf16 products into f32)
  bool dot_i8 = false;    // AVX512-VNNI: vpdpbusd (quads of u8 x s8 products into i32)
  // AMX tile units the process may use (the CPU has them and the kernel granted XTILEDATA):
  // tdpbf16ps, tdpb[su][su]d, tdpfp16ps.
  bool amx_bf16 = false, amx_int8 = false, amx_fp16 = false;
  bool cldemote = false;  // CLDEMOTE: a line pushed from the core's caches to the shared L3
  int64_t l2_bytes = 1 << 20;  // one core's L2 (the host's from the OS; 1 MiB for a named CPU)
  std::string name;  // LLVM's CPU name ("znver4", "sapphirerapids"; empty: unknown): rules measured on one CPU
};

// plan.cycles (debugging): each kernel call adds the time-stamp counter's ticks of its phases to
// kCycleFields 64-bit counters of its worker index (a share's index in a launch of shares), in a
// buffer the runtime passes as the 13th pointer (gemm.h: gemm_cycles).
enum class CycleField : int {
  kernel = 0,        // the whole kernel call
  calls = 1,         // kernel calls
  pack_a = 2,        // packing A's row panels
  pack_b = 3,        // packing B's column panels
  barrier = 4,       // waiting at the packing barrier (phase 0)
  tiles_first = 5,   // AMX blocked nest: the first row panel of a block for each column panel (B's slice cold)
  tiles_first_n = 6, //   (their count)
  tiles_other = 7,   // the other row panels' tiles (their K loops, with the load of continued partial sums)
  tiles_other_n = 8, //   (their count)
  tile_stores = 9,   // each tile's epilogue, or its partial sums stored for the next K tile
};
constexpr int64_t kCycleFields = 16;

struct GemmPlan {
  ir::ScalarType dtype = ir::ScalarType::f32;  // accumulator
  ir::ScalarType a_type = ir::ScalarType::f32, b_type = ir::ScalarType::f32, c_type = ir::ScalarType::f32;  // kernel's
  // Layout: "row" computes C = A B as given; "col" computes C^T = B^T A^T, so that the kernel's
  // fast (vector) dimension is the one with unit stride in memory.
  std::string layout = "row";
  int simd_width = 16;  // lanes of one vector register: the subgroup size of the CPU lowering
  int mr = 8, nr = 32;  // register tile: an mr x nr accumulator coopmatrix
  int kb = 4;           // K step of one mul_add (A is mr x kb, B is kb x nr)
  bool unit_a = false;  // A's column stride is 1 in the kernel's orientation (a constant in the code)
  bool unit_b = true;   // B's column stride is 1 in the kernel's orientation (vector loads)
  bool unit_c = true;   // C's column stride is 1 in the kernel's orientation (vector stores)
  bool accumulate = false;
  std::string order = "m_inner";  // tile walk: consecutive tiles share a B panel
  bool pack = false;  // copy A and B into contiguous tile panels (in the accumulator type) first
  int mc_tiles = 8;   // row panels per block of the packed, cache-blocked loop nest
  // Workers along M in the blocked nest (packed or k_outer): the workers form a grid_m x
  // (workers / grid_m) grid, each on its own block of C's row and column panels (1: column panels
  // only). A 2-D grid reads less of A per worker: 1024^3 on 16 workers, 4 x 4 blocks of 256 x 256
  // instead of 16 blocks of 1024 x 64. 0: chosen when the kernel runs, from the worker count and
  // the tile counts (one code for every size; see the recipe).
  int grid_m = 0;
  // The k_outer walk of one row of C (M = 1 in the kernel's orientation: a vector times a
  // row-major matrix) or of a small M x N block (few tiles for the workers, long K; session 26):
  // K split into ksplit parts, one worker each over the whole of C, each part of B read front to
  // back; worker 0 writes C (with beta), the others their own zeroed block of partial sums, which
  // the caller then adds into C (f32 / f64 / i32 C). A fused epilogue: the parts but the last K
  // tile run as phase 3 (sums in scratch), the caller adds them, and a phase 4 launch of the last
  // K tile adds that sum to its own and applies the epilogue once. bf16 C of f32 sums: every
  // part runs as phase 3 (its sums left in its own scratch row, in f32) and the caller writes C
  // once, rounded. 0: none (the workers share N's column panels). Not in the key: the kernel is
  // the same, only its launch differs.
  int ksplit = 0;
  GemmEpilogue epilogue;  // fused steps before the store (GemmEpilogue); part of the key
  bool prepacked_b = false;  // B comes already packed (coopjit.prepack): only A is packed per call
  // VNNI packing of the panels (plan.pack): 1 = panels in the accumulator type (low-precision
  // inputs converted while packing); 2 = bf16 pairs, 4 = 8-bit quads along K in 32-bit channels,
  // in the input types, for the dot-product instructions. With s8 x s8 the A panels hold A + 128
  // as u8 (vpdpbusd multiplies u8 by s8) and the epilogue subtracts 128 * B's column sums.
  int vnni = 1;
  // AMX (packed panels, vnni 2 or 4): 0 = not used; 1 = the tile instructions (tileloadd,
  // tdpbf16ps / tdpb[su][su]d / tdpfp16ps on 16 x 64-byte tiles, the configuration loaded by the
  // kernel); 2 = the same program with each tile instruction computed by a function that follows
  // its pseudo-code in Intel's SDM (for CPUs without AMX: it checks the packing, the tile shapes
  // and the addressing, not the speed). Tiles: mr x nr = 32 x 32 accumulators (2 x 2 tiles), kb
  // = 64 bytes of K per step; A panels hold mr x kb blocks row-major (a tile row is 64 bytes of
  // K), B panels the usual VNNI rows; s8 x s8 needs no column sums (tdpbssd).
  int amx = 0;
  // How an AMX plan feeds its tiles (amx 1 or 2; part of the key): 0 = each K step's 4
  // tileloadd, then its 4 dot products, B panels in VNNI rows (B's two tiles interleave at a
  // 128-byte stride); 1 = each tile loaded just before its first dot product, A1 before the last
  // use of A0 (LA0 LB0 T00 LB1 LA1 T01 T10 T11: the 4 operand tiles in 4 registers, each
  // reloaded once its last reader has issued, so one step's loads overlap the last step's dot
  // products instead of waiting for all of them); 2 = as 1, with each K step of a B
  // panel stored as its nr / 16 tiles, 1 KiB each and contiguous (16 VNNI rows of 64 bytes).
  int amx_feed = 0;
  // AMX software prefetch (part of the key): 0 = none; 1 = the A panel's lines two K steps
  // ahead into L1 (prefetcht0); 2 = A's and B's; 3 / 4 = as 1, and A's and B's lines 8 / 16 K
  // steps ahead into L2 (prefetcht1: a panel crosses a 4 KiB page every 2 K steps, where the
  // hardware's L2 streamer stops); 5 = A's and B's lines 8 K steps ahead into L2 only. (3-5:
  // 16 workers on the Emerald Rapids host, session 13: bf16 4096^3 / 8192^3 0.77-0.89x of 1, int8
  // 0.92-1.07x.) 6 = as 1, and the panels the blocked nest's next micro kernels read cold,
  // into L2 (prefetcht1) while the block's kernels run: the next column panel's B slice, a
  // part of it in each kernel of the block (B slices are read again from L3 for every block
  // of A), and in the last column panel's kernels the next block's A panel (read from L3 at
  // the block's first column panel).
  int amx_prefetch = 1;
  // AMX plans (part of the key): a full tile of the blocked nest's last K tile leaves its tiles
  // straight for C when alpha is 1 at run time (no fused epilogue, beta, column sums; unit
  // column stride of C): f32 / i32 C by tilestored at C's row stride, bf16 C through one
  // vcvtneps2bf16 a row (AVX512-BF16; the tiles' sums hold no subnormals, so it rounds as the
  // general conversion) instead of the tiles stored to the stack, read into vectors, multiplied
  // by alpha and rounded by integer operations (about 1000 instructions a 32 x 32 bf16 tile, 300
  // for i32, where the tile's K loop at kt 2048 is 256 (int8: 128) dot products). 16 threads on
  // the Emerald Rapids host (session 17), old time / new: bf16 1024^3-8192^3 1.04 / 1.14 / 0.94 /
  // 1.03, int8 1.25 / 1.20 / 1.06 / 0.82 (noise at 8192: the rounds overlap).
  bool amx_store = true;
  // Packed panels demoted to the shared L3 as they are written (CLDEMOTE, one per 64-byte line;
  // CPUs that have it): the other workers then read them from L3 instead of snooping the
  // packer's L2 for lines it holds modified. Part of the key.
  bool demote = false;
  // Debugging (not part of any default): the kernel reads the time-stamp counter at its phases'
  // boundaries into per-worker counters (CycleField); off, the kernel has none of it. Part of the key.
  bool cycles = false;
  // AMX blocked nest: during each tile's K loop, the lines its K tile will write (C's rows at the
  // last K tile, the scratch's partial sums at the others) are prefetched for writing, two a K step
  // (prefetchw), so that the tile's stores do not wait for each line's read from memory (and its
  // page walk). Part of the key.
  bool c_prefetch = false;
  // AMX plans with a row-major A (unit_a), K a multiple of kb and M of mr: the tiles read A
  // where it is (tileloadd with A's row stride; its lines two K steps ahead prefetched) and A is
  // not packed. With one row of workers (grid_m 1) each worker packs only the B panels it reads,
  // so no worker reads lines another core has just written. Part of the key.
  bool direct_a = false;
  // Packed products with few rows (plan.pack, no AMX, data-parallel, one row of workers): no
  // packing phase for B. For each K tile, each worker packs the K-tile slice of each of its
  // column panels into its own slot (in its L2), with s8 x s8's column sums of that slice, just
  // before the tiles of all the rows read it: B is read once from memory and its packed copy never
  // leaves the core (a phase writes all of B's panels and reads them back: 3 passes over B's
  // bytes). Part of the key.
  bool inline_b = false;
  // Packed plans with one row of workers (grid_m 1; one share a worker, not direct_a): each worker
  // packs all of A's row panels it reads (all of them) into its own copy, and reads B's panels it
  // packed itself (its column panels; inline_b or a prepacked B likewise): no worker reads lines
  // another core has just written, and no packing barrier, so the launch is independent (a late
  // worker's share is taken by a thread that is done). A is packed once a worker instead of once.
  // Part of the key (see gemm_plan_blocking.cpp's rule).
  bool own_a = false;
  // The blocked nest's loop order (packed plans, not inline_b; part of the key): false = for each
  // K tile, for each block of mc_tiles row panels, ...: the partial sums of all the worker's
  // tiles (C, or the scratch matrix) leave the core between K tiles; true = for each block of
  // row panels, every K tile in turn: the block's partial sums stay in L2 from one K tile to the
  // next (B's slices are read once per block instead). AMX plans then keep each tile's partial
  // sums as one contiguous 4 KiB block of the scratch (tileloadd / tilestored at a 128-byte
  // stride), not as rows N apart. Not a default: on the 16-core Emerald Rapids host (session 13)
  // it measured 0.80-1.20x the old order (shape to shape and run to run) with K tiles of 512-4096
  // (bf16, int8, f32): benchmarks/recorded/issue14-emr16-session13.txt. With nc_tiles > 0
  // (session 28): blocks of C of mc_tiles x nc_tiles tiles, each through every K tile, and within
  // a K tile each column panel's B slice read by the block's row panels in turn (L1 where kt is
  // short); AMX on that host 0.80-0.93x the default (issue14-emr16-amx-session28.txt).
  bool k_inner = false;
  // The blocked nest's column-panel order (packed plans without inline_b, AMX tiles too except
  // with amx_prefetch 6; with k_inner: the column size of its blocks of C, see there;
  // part of the key): 0 = for each K tile, for each block of mc_tiles row panels, for each of the
  // worker's column panels, the block's row panels (each column panel's K-tile slice of B read
  // from L3 for each block, then from L2); n > 0 = for each K tile, for each block of n of the
  // worker's column panels (their B slices, n x kt x nr, stay in L2), for each of the worker's
  // row panels, the block's column panels (mc_tiles unused): B, the operand a tile reads nr
  // elements of per K step, comes from L2, and A, read mr elements a step and kept in L1 across
  // the block's tiles, is the one that streams from L3. Default 1 on 8+ cores for f32 / f64 where
  // a worker's row panels outgrow half its L2 (see gemm_plan.cpp); a plan that names mc_tiles
  // keeps 0. AMX plans: each tile's K-tile slice of A (mr x kt, 128 KiB at kt 2048 bf16) is
  // read by the block's tiles from L1 / L2, the partial sums continued from the scratch as in
  // the row-block order.
  int nc_tiles = 0;
  // The unpacked blocked nest ("k_outer"): each tile's rows of B are prefetched this many bytes
  // further along (prefetcht0 a 64-byte line; 0: none). Part of the key. Its kt rows of B are
  // kt streams through memory that the hardware prefetchers follow with too few lines in flight
  // for one core's share of the memory bandwidth (see gemm_plan.cpp). The dot walk (matrix-vector
  // products) prefetches its tiles' rows of A the same way (plan_gemv).
  int b_prefetch = 0;
  // Small products (every dimension up to 64): the sizes and element strides are compile-time
  // constants of the code (M, N, K, sa_r, sa_c, sb_r, sb_c, sc_r, sc_c, batch1, batch2, sa_b1,
  // sb_b1, sc_b1, sa_b2, sb_b2, sc_b2 in the kernel's orientation): the K loop unrolls, edge
  // checks fold away, every address is a constant offset from a tile's base. Empty: runtime values.
  std::vector<int64_t> fixed;
  // How workers share the flattened batch x M x N x K tile space (seeds/004): runtime arguments
  // of the code, not part of its key, but for whether any tile can stream (streams()).
  int threads = 1;            // workers (CPU threads), all running at once
  // Packed data-parallel plans (not inline_b): the blocked nest cut into threads x shares
  // shares, handed out by ThreadPool::run_shares after a packing launch: each thread runs its
  // own shares first and takes the next of a slower thread's. 1: one share a worker, behind the
  // packing barrier, in one launch. (The grid gets shares x grid_m rows.) The dot walk of
  // matrix-vector products likewise: threads x shares row blocks (default up to 4 on 8+ cores).
  int shares = 1;
  std::string split = "dp";   // "dp", "sk" (Stream-K) or "sk+dp" (2-tile Stream-K + data-parallel)
  int64_t kt = 256;           // K elements per K tile of the tile space (a multiple of kb)

  /// Whether a launch can have Stream-K tiles (split other than "dp", more than one worker):
  /// only then does the kernel hold the Stream-K walk (its tiles' K loops, the partials' fix-up),
  /// a third of an unpacked kernel's code. Part of the key (".sk").
  bool streams() const { return split != "dp" && threads > 1; }
  /// Everything that changes the generated code, as one string (the code cache key).
  std::string key() const;
  std::string fixed_key() const;
  /// What the vnni field means for this plan, for kernel.config.
  std::string vnni_description() const;
  /// The whole plan, one line.
  std::string str() const;
  /// Field name -> value, for Python's kernel.config.
  std::map<std::string, std::string> fields() const;
  bool operator==(const GemmPlan& o) const { return key() == o.key(); }
};

/// The runtime arguments of a planned GEMM in the kernel's orientation.
struct GemmArgs {
  int64_t M, N, K, sa_r, sa_c, sb_r, sb_c, sc_r, sc_c;
  int64_t batch1, batch2, sa_b1, sb_b1, sc_b1, sa_b2, sb_b2, sc_b2;
  bool swap_ab;  // the kernel's A is the caller's B (layout "col")
  int mr, nr;
  int64_t kt;
  int64_t tiles_mn() const;  // output tiles over all batches
  int64_t tiles_k() const;   // K tiles (at least 1: a K = 0 product still writes C)
  /// The values GemmPlan::fixed holds, in its order.
  std::vector<int64_t> fixed_view() const {
    return {M, N, K, sa_r, sa_c, sb_r, sb_c, sc_r, sc_c, batch1, batch2, sa_b1, sb_b1, sc_b1, sa_b2, sb_b2, sc_b2};
  }
};

/// The Stream-K split of seeds/004 for W workers: how many of the tiles_mn * tiles_k global
/// tiles go to the Stream-K partition (the rest, whole output tiles, are data-parallel).
/// (split "dp+sk", GPU plans only: the last wave's tiles, tiles_mn % workers, streamed.)
int64_t stream_k_tiles(const std::string& split, int64_t tiles_mn, int64_t tiles_k, int64_t workers);

using PlanOverrides = std::map<std::string, int64_t>;

/// Chooses the plan for a spec on the CPU with up to `max_threads` workers; `overrides` fixes
/// fields by name (layout: 0 row, 1 col; mr, nr, kb, kt, threads; split: 0 dp, 1 sk, 2 sk+dp).
/// Throws UserError for an unknown or illegal override.
GemmPlan plan_gemm(const GemmSpec& spec, const CpuTargetInfo& cpu, const PlanOverrides& overrides = {});
/// The dot-product group the CPU offers for a (kernel) A x B -> acc type combination: 2 (bf16
/// pairs), 4 (u8/s8 quads) or 1 (none: inputs are widened to the accumulator type).
int dot_group(ir::ScalarType a, ir::ScalarType b, ir::ScalarType acc, const CpuTargetInfo& cpu);
/// The AMX tile product the CPU offers for a (kernel) A x B -> acc type combination (see
/// GemmPlan::amx): its VNNI group (2 for bf16 / f16 pairs, 4 for 8-bit quads), or 0 (none).
/// `emulated` asks whether the tile program exists at all (plan amx=2).
int amx_group(ir::ScalarType a, ir::ScalarType b, ir::ScalarType acc, const CpuTargetInfo& cpu, bool emulated = false);
/// The AMX instruction of an AMX plan (tdpbf16ps, tdpbusd, ...).
std::string amx_instruction(const GemmPlan& p);
/// The element type of the packed A panels: the accumulator type without VNNI; the input type
/// with it, except u8 for s8 x s8 (A + 128).
ir::ScalarType packed_a_type(const GemmPlan& p);
ir::ScalarType packed_b_type(const GemmPlan& p);
/// s8 x s8 through vpdpbusd: the kernel subtracts 128 * column sums of B (the CS buffer).
bool needs_column_sums(const GemmPlan& p);
/// Bytes of B's packed panels for a K x N B (in the kernel's orientation): ceil(N / nr) panels
/// of Kp x nr elements, Kp = K rounded up to kb; and the whole packed B: the panels, then (s8 x s8)
/// at the next 64-byte boundary, 128 * the column sums of B as ceil(N / nr) * nr int32.
size_t packed_b_panel_bytes(const GemmPlan& p, int64_t K, int64_t N);
size_t packed_b_bytes(const GemmPlan& p, int64_t K, int64_t N);
GemmArgs gemm_args(const GemmSpec& spec, const GemmPlan& plan);

}  // namespace coopjit
