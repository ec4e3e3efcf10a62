// The GEMM planner: layout, register tile and vector width from the spec and the CPU.
#include "plan/gemm_plan.h"

#include <algorithm>
#include <climits>

#include "core/error.h"

namespace coopjit {

std::string GemmPlan::key() const {
  return cat("gemm.", ir::name(a_type), "x", ir::name(b_type), "to", ir::name(c_type), ".", ir::name(dtype), ".", layout, ".s", simd_width, ".m", mr, "n", nr, "k", kb,
             unit_a ? ".ua" : "", unit_b ? ".ub" : ".gb", unit_c ? ".uc" : ".gc", accumulate ? ".acc" : "", ".", order,
             pack ? cat(".pack", mc_tiles) : std::string(), grid_m > 0 ? cat(".gm", grid_m) : std::string(),
             prepacked_b ? ".prepackedb" : "",
             vnni > 1 ? cat(".vnni", vnni) : std::string(), amx ? cat(".amx", amx, amx_feed ? cat("f", amx_feed) : std::string(), amx_prefetch != 1 ? cat("p", amx_prefetch) : std::string(), amx_store ? "" : "s0")
                 : std::string(),
             demote ? ".demote" : "", direct_a ? ".directa" : "", inline_b ? ".inlineb" : "", k_inner ? ".kinner" : "", nc_tiles ? cat(".nc", nc_tiles) : std::string(),
             b_prefetch ? cat(".bpf", b_prefetch) : std::string(), fixed_key(),
             epilogue.key());
}

std::string GemmPlan::fixed_key() const {
  if (fixed.empty()) return {};
  std::string s = ".fixed";
  for (int64_t v : fixed) s += cat("_", v);
  return s;
}

std::string GemmPlan::vnni_description() const {
  if (amx)
    return cat(vnni, ": ", vnni == 2 ? "16-bit pairs" : "8-bit quads", " along K in packed panels",
               prepacked_b ? " (B prepacked)" : "", ", AMX ", amx_instruction(*this), " on 16 x 64-byte tiles",
               amx == 2 ? " (emulated: no AMX on this CPU)" : "",
               a_type == ir::ScalarType::bf16 ? " (subnormal bf16 inputs count as zero)" : "");
  if (vnni > 1)
    return cat(vnni, ": ", vnni == 2 ? "bf16 pairs" : "8-bit quads", " along K in packed panels",
               prepacked_b ? " (B prepacked)" : "", ", ", vnni == 2 ? "vdpbf16ps" : "vpdpbusd",
               needs_column_sums(*this) ? " on A + 128 minus 128 x column sums of B" : "",
               vnni == 2 ? " (subnormal bf16 inputs count as zero)" : "");
  if (a_type == dtype && b_type == dtype) return "1: not a low-precision product";
  return pack ? "1: inputs converted to the accumulator type while packing"
              : "1 in memory: pairs/quads interleaved in registers when the CPU has the dot instruction, "
                "else inputs converted on load";
}

std::string GemmPlan::str() const {
  return cat(key(), " threads=", threads, " split=", split, " kt=", kt, shares > 1 ? cat(" shares=", shares) : std::string());
}

std::map<std::string, std::string> GemmPlan::fields() const {
  return {{"dtype", std::string(ir::name(dtype))},
          {"a_type", std::string(ir::name(a_type))},
          {"b_type", std::string(ir::name(b_type))},
          {"c_type", std::string(ir::name(c_type))},
          {"vnni", vnni_description()},
          {"layout", layout},
          {"simd_width", std::to_string(simd_width)},
          {"mr", std::to_string(mr)},
          {"nr", std::to_string(nr)},
          {"kb", std::to_string(kb)},
          {"unit_stride_a", unit_a ? "true" : "false"},
          {"unit_stride_b", unit_b ? "true" : "false"},
          {"unit_stride_c", unit_c ? "true" : "false"},
          {"accumulate", accumulate ? "true" : "false"},
          {"order", order},
          {"pack", pack ? "true" : "false"},
          {"mc_tiles", std::to_string(mc_tiles)},
          {"grid_m", grid_m ? std::to_string(grid_m) : std::string("auto")},
          {"prepacked_b", prepacked_b ? "true" : "false"},
          {"amx", amx == 0 ? "none" : amx == 1 ? "tiles" : "emulated"},
          {"amx_feed", amx == 0 ? std::string("0: no tiles")
                       : cat(amx_feed, amx_feed == 0   ? ": loads, then dot products; B in VNNI rows"
                                       : amx_feed == 1 ? ": loads interleaved with dot products; B in VNNI rows"
                                                       : ": loads interleaved with dot products; B in 1 KiB tiles")},
          {"amx_prefetch", amx == 0 ? std::string("0: no tiles")
                           : cat(amx_prefetch, amx_prefetch == 0   ? ": none"
                                               : amx_prefetch == 1 ? ": A panel lines two K steps ahead"
                                               : amx_prefetch == 2 ? ": A and B panel lines two K steps ahead"
                                               : amx_prefetch == 3 ? ": A panel lines two K steps ahead, A and B 8 steps ahead into L2"
                                               : amx_prefetch == 4 ? ": A panel lines two K steps ahead, A and B 16 steps ahead into L2"
                                               : amx_prefetch == 5 ? ": A and B panel lines 8 K steps ahead into L2"
                                                                   : ": A panel lines two K steps ahead, the next cold panels into L2")},
          {"amx_store", amx_store ? "true" : "false"},
          {"demote", demote ? "true" : "false"},
          {"direct_a", direct_a ? "true" : "false"},
          {"inline_b", inline_b ? "true" : "false"},
          {"k_inner", k_inner ? "true" : "false"},
          {"nc_tiles", std::to_string(nc_tiles)},
          {"b_prefetch", std::to_string(b_prefetch)},
          {"fixed_shape", fixed.empty() ? "false" : "true"},
          {"threads", std::to_string(threads)},
          {"shares", std::to_string(shares)},
          {"split", split},
          {"kt", std::to_string(kt)},
          {"ksplit", std::to_string(ksplit)},
          {"epilogue", epilogue.any() ? epilogue.key().substr(5) : std::string("none")}};
}

int64_t GemmArgs::tiles_mn() const { return batch1 * batch2 * ((M + mr - 1) / mr) * ((N + nr - 1) / nr); }
int64_t GemmArgs::tiles_k() const { return std::max<int64_t>(1, (K + kt - 1) / kt); }

int64_t stream_k_tiles(const std::string& split, int64_t tiles_mn, int64_t tiles_k, int64_t workers) {
  const int64_t total = tiles_mn * tiles_k;
  if (split == "dp" || workers <= 1) return 0;
  if (split == "sk") return total;
  // DP on the full waves, Stream-K over the last wave's tiles (GPU plans: the warp-specialized
  // Hopper kernel's default where it streams, gpu_plan.cpp): the streamed tiles are few, and the
  // panels they share stay in L2.
  if (split == "dp+sk") return tiles_mn % workers * tiles_k;
  // 2-tile Stream-K + DP (seeds/004): N_DP = ((M*N) // WG - 1) * WG * K whole output tiles per
  // worker, the rest (between one and two tiles' worth per worker) streamed; all DP when the
  // tiles divide evenly. With fewer tiles than workers, everything streams.
  if (total % (workers * tiles_k) == 0) return 0;
  const int64_t n_dp = std::max<int64_t>(0, tiles_mn / workers - 1) * workers * tiles_k;
  return total - n_dp;
}

namespace {
int64_t ceil_to(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
}  // namespace

int dot_group(ir::ScalarType a, ir::ScalarType b, ir::ScalarType acc, const CpuTargetInfo& cpu) {
  using ir::ScalarType;
  if (a == ScalarType::bf16 && b == ScalarType::bf16 && acc == ScalarType::f32 && cpu.dot_bf16) return 2;
  auto byte = [](ScalarType t) { return t == ScalarType::i8 || t == ScalarType::u8; };
  if (byte(a) && byte(b) && acc == ScalarType::i32 && cpu.dot_i8 && !(a == ScalarType::u8 && b == ScalarType::u8))
    return 4;
  return 1;
}

int amx_group(ir::ScalarType a, ir::ScalarType b, ir::ScalarType acc, const CpuTargetInfo& cpu, bool emulated) {
  using ir::ScalarType;
  auto byte = [](ScalarType t) { return t == ScalarType::i8 || t == ScalarType::u8; };
  if (a == ScalarType::bf16 && b == ScalarType::bf16 && acc == ScalarType::f32 && (cpu.amx_bf16 || emulated)) return 2;
  if (a == ScalarType::f16 && b == ScalarType::f16 && acc == ScalarType::f32 && (cpu.amx_fp16 || emulated)) return 2;
  if (byte(a) && byte(b) && acc == ScalarType::i32 && (cpu.amx_int8 || emulated)) return 4;
  return 0;
}

std::string amx_instruction(const GemmPlan& p) {
  using ir::ScalarType;
  if (p.a_type == ScalarType::bf16) return "tdpbf16ps";
  if (p.a_type == ScalarType::f16) return "tdpfp16ps";
  return cat("tdpb", p.a_type == ScalarType::u8 ? "u" : "s", p.b_type == ScalarType::u8 ? "u" : "s", "d");
}

ir::ScalarType packed_a_type(const GemmPlan& p) {
  if (p.vnni == 1) return p.dtype;
  return needs_column_sums(p) ? ir::ScalarType::u8 : p.a_type;
}
ir::ScalarType packed_b_type(const GemmPlan& p) { return p.vnni == 1 ? p.dtype : p.b_type; }
bool needs_column_sums(const GemmPlan& p) {
  return p.vnni == 4 && !p.amx && p.a_type == ir::ScalarType::i8 && p.b_type == ir::ScalarType::i8;
}

size_t packed_b_panel_bytes(const GemmPlan& p, int64_t K, int64_t N) {
  const size_t bytes = size_t(ceil_to(K, p.kb)) * size_t(ceil_to(N, p.nr)) * ir::size_in_bytes(packed_b_type(p));
  return (bytes + 63) / 64 * 64;
}

size_t packed_b_bytes(const GemmPlan& p, int64_t K, int64_t N) {
  // Column sums whenever B is s8 in quads: a prepacked B serves s8 and u8 A alike.
  const bool sums = p.vnni == 4 && p.b_type == ir::ScalarType::i8;
  return packed_b_panel_bytes(p, K, N) + (sums ? size_t(ceil_to(N, p.nr)) * 4 : 0);
}

GemmPlan plan_gemm(const GemmSpec& spec, const CpuTargetInfo& cpu, const PlanOverrides& overrides) {
  spec.validate();
  GemmPlan p;
  p.dtype = spec.dtype;
  p.accumulate = spec.accumulate;
  p.epilogue = spec.epilogue;
  const int esize = ir::size_in_bytes(spec.dtype);
  p.simd_width = cpu.vector_bytes / esize;

  // Layout: score each orientation by how many of (B, C) have unit stride along the kernel's N.
  // "col" swaps the roles: the kernel's B is A^T (its N stride is sa_r), its C is C^T (sc_r).
  int row_score = (spec.sb_c == 1) + (spec.sc_c == 1);
  int col_score = (spec.sa_r == 1) + (spec.sc_r == 1);
  p.layout = col_score > row_score ? "col" : "row";
  // A vector times a matrix whose columns are contiguous (C = a B, B's K stride 1): in "col" the
  // kernel's N is 1 and both operands run along K with unit stride (the "dot" walk below).
  if (spec.M == 1 && spec.N > 1 && spec.sb_r == 1 && spec.sa_c == 1 && spec.sb_c != 1) p.layout = "col";
  if (auto it = overrides.find("layout"); it != overrides.end()) {
    if (it->second != 0 && it->second != 1)
      throw UserError(cat("plan override layout=", it->second, " must be 0 (row) or 1 (col)"));
    p.layout = it->second ? "col" : "row";
  }
  bool col = p.layout == "col";
  p.a_type = col ? spec.b_type : spec.a_type;  // the kernel's A is the caller's B^T in "col"
  p.b_type = col ? spec.a_type : spec.b_type;
  p.c_type = spec.c_type;
  int64_t N = col ? spec.M : spec.N, M = col ? spec.N : spec.M;
  p.unit_b = (col ? spec.sa_r : spec.sb_c) == 1;
  const bool a_unit = (col ? spec.sb_r : spec.sa_c) == 1;
  // The bytes between the kernel's rows of A (along M) and of B (along K).
  const int64_t a_row_bytes = (col ? spec.sb_c : spec.sa_r) * int64_t(ir::size_in_bytes(p.a_type));
  const int64_t b_row_bytes = (col ? spec.sa_c : spec.sb_r) * int64_t(ir::size_in_bytes(p.b_type));
  p.unit_c = (col ? spec.sc_r : spec.sc_c) == 1;

  // Register tile: mr x (nr / S) accumulators, the nr / S vectors of B and one broadcast of A
  // must fit the register file. Four vectors of B per k (nr = 64 f32 lanes) and mr = 6 rows: one
  // broadcast of A feeds four FMAs. Measured on Zen 5 (2 cores, 1024^3, one thread, f32 / bf16 /
  // int8): 6 x 64 runs at 89% / 79% / 75% of peak where 14 x 32 (one broadcast per two FMAs, every
  // register in use) runs at 73% / 54% / 57%: broadcasts take FP pipe slots there, and a full
  // register file leaves the scheduler nothing to rename. About 3/4 of the registers hold
  // accumulators.
  const int regs = cpu.vector_registers;
  const int64_t nvec_n = ceil_to(N, p.simd_width) / p.simd_width;  // vectors N needs
  int nvec = static_cast<int>(std::min<int64_t>(regs >= 32 ? 4 : 2, std::max<int64_t>(1, nvec_n)));
  // Up to a few hundred columns: the width (4, 2 or 1 vectors) that pads N least, the wider on
  // ties (ragged edge tiles take the slower checked path).
  // Where A outgrows half the core's L2, each column tile reads A again from L3, so narrow
  // tiles cost more than their padding saves: of 1 to 3 vectors, the width with the least
  // padded vectors x (1 + 1 / width) (a read of A per tile of width vectors), the wider on ties.
  // (4 vectors, whose unpacked B slice of a K tile outgrows L1, ran slower everywhere here.)
  // Measured on Zen 5, one thread, CPU time per call (us), least padding -> this:
  // 513x129x700 f32 16x16 690-720 -> 8x48 500-525, f64 16x8 1440-1670 -> 8x24 970-990;
  // 2000x200x300 f32 1620 -> 1330, f64 3280 -> 2460; 1000x130x1000 f64 4330 -> 2560;
  // 256x100x2000 f32 700-730 -> 740 (12x32: 650-670), f64 1600 -> 1130-1180.
  const bool a_streams = double(M) * double(spec.K) * ir::size_in_bytes(p.a_type) > 0.5 * double(cpu.l2_bytes);
  if (N <= 256 && a_streams) {
    int best = nvec;
    double best_cost = 1e300;
    for (int cand = std::min(nvec, 3); cand >= 1; --cand) {
      const double cost = double(ceil_to(nvec_n, cand)) * (1.0 + 1.0 / cand);
      if (cost < best_cost) best_cost = cost, best = cand;
    }
    nvec = best;
  } else if (N <= 256) {
    int best = nvec;
    int64_t best_pad = INT64_MAX;
    for (int cand = nvec; cand >= 1; cand /= 2) {
      int64_t pad = ceil_to(nvec_n, cand) - nvec_n;
      if (pad < best_pad) best_pad = pad, best = cand;
    }
    nvec = best;
  }
  p.nr = nvec * p.simd_width;
  // mr: as tall as the accumulator budget allows (each broadcast of A feeds a row's FMAs, so
  // shorter tiles pay more broadcasts per FMA); for matrices up to a few hundred rows, the height
  // in [3/4 max, max] that leaves the least padding (edge tiles take the slower checked path).
  // Measured on Zen 5, one thread, unpacked f32: 128^3 with 4 / 5 / 6 rows 173 / 196 / 192
  // GFLOP/s, 256^3 183 / - / 222.
  int mr = std::max(1, (regs * 3 / 4) / nvec);
  mr = std::min(mr, regs >= 32 ? 16 : 8);
  // A read in place along rows a multiple of 4 KiB apart (K of 1024 f32, 512 f64, ...): the mr
  // rows a tile broadcasts from fall in the same L1 set, and more of them than its ways (8 on
  // Zen 4's 32 KiB L1; 12 on Zen 5 and Golden Cove) evict each other every k step. At most 8
  // rows there, on few cores (the 16-core plans are tuned apart). Zen 4, f32, CPU time, 11 ->
  // 8 rows x 32 lanes: 64x64x8192 one thread 74 -> 107 GFLOP/s (2 threads 71 -> 189, wall, load
  // 2.4); 4096x64x4096 83 -> 100; 256x64x8192 96 -> 106; 128x32x4096 70 -> 87 (12 -> 8 rows).
  if (a_unit && a_row_bytes != 0 && a_row_bytes % 4096 == 0 && cpu.max_threads < 8) mr = std::min(mr, 8);
  // Small products (code for their exact shape, up to 64 in every dimension: see `fix` below) look
  // down to half the height: a whole number of shorter tiles beats a ragged last one there (its
  // rows checked). Measured on the 2-core Zen 4 (session 17), one thread, CPU time of the kernel
  // call alone (blocks of calls, medians of 9): 32x32x32 f32 11 rows (3 tiles, the last of 10) 1.5
  // us, 8 rows 1.25 (NumPy's whole matmul 1.6); 64x64x64 5 rows 5.5-5.6, 4 rows 5.4 (NumPy 5.8).
  const bool small_fixed = std::max({spec.M, spec.N, spec.K}) <= 64;
  if (M <= 256) {
    int best = mr;
    int64_t best_pad = INT64_MAX;
    for (int cand = mr; cand >= std::max(1, small_fixed ? mr / 2 : mr - mr / 4); --cand) {
      int64_t pad = (M + cand - 1) / cand * cand - M;
      if (pad < best_pad) best_pad = pad, best = cand;
    }
    mr = best;
  }
  p.mr = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(mr, M)));
  // K step of one mul_add: HLSL 0035 allows powers of two in [4, 128] for subgroup scope.
  p.kb = 4;
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
  const double flops = 2.0 * spec.M * spec.N * spec.K * spec.batch1 * spec.batch2;
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
  // Packing pays for itself once each panel is reused many times: one batch, big in every
  // dimension (the copies are O(MK + KN) against O(MNK) work).
  p.pack = spec.batch1 * spec.batch2 == 1 && std::min({spec.M, spec.N, spec.K}) >= 256 && flops >= 5.0e7;
  // On many cores the unpacked walk's strided reads of B cost more (every worker's panels come
  // from L3): from 128 rows and columns. Measured on 16 cores, 513x129x700 f32: 598 us
  // unpacked, 333 packed.
  if (cpu.max_threads >= 8 && spec.batch1 * spec.batch2 == 1 && std::min(spec.M, spec.N) >= 128 && spec.K >= 256 &&
      flops >= 5.0e7)
    p.pack = true;
  // Skinny products on many cores (M up to 64 over several row tiles: the unpacked k_outer walk
  // below) whose B rows (or A rows) lie a multiple of 4 KiB apart, 8 KiB or more: that walk's K
  // tile of a column panel (kt rows of 256 bytes) sits at one page offset, in 4 of L1's 64 sets, so
  // every M tile reads it again from L2 (A's K tile likewise, for every column panel). Packing
  // (B by its reader, K tile by K tile: inline_b below) reads each once into contiguous panels.
  // Measured on the 16-core Emerald Rapids host, f32, one thread (CPU time): 64x512x1024 60 -> 118
  // GFLOP/s (64x512x1000, no aliasing: 118 either way), 64x4096x4096 69 -> 96, 64x4096x4000 81 ->
  // 98; 16 workers: 64x4096x4096 3.09 -> 2.45 ms (NumPy 2.60), 16x4096x4096 1.28 -> 1.13 (NumPy
  // 1.28), 64x4096x4000 3.37 -> 2.71 (NumPy 2.27), 64x4096x1024 0.86 / 1.01 -> 0.91 / 0.96 (two
  // runs; NumPy 0.70-0.84).
  {
    auto aliased = [](int64_t bytes) { return bytes >= 8192 && bytes % 4096 == 0; };
    if (cpu.max_threads >= 8 && !overrides.count("order") && spec.batch1 * spec.batch2 == 1 && M <= 64 && M > p.mr &&
        spec.K >= 512 && N * esize >= 8192 && (aliased(b_row_bytes) || aliased(a_row_bytes)) && p.unit_b &&
        flops >= 4.0e6 && amx_group(p.a_type, p.b_type, p.dtype, cpu) == 0 && dot_group(p.a_type, p.b_type, p.dtype, cpu) <= 1)
      p.pack = true;
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
  {
    const bool dots = spec.batch1 * spec.batch2 == 1 && flops >= 2.0e6 &&
                      (dot_group(p.a_type, p.b_type, p.dtype, cpu) > 1 || amx_group(p.a_type, p.b_type, p.dtype, cpu) > 0);
    if (dots && (std::min({spec.M, spec.N, spec.K}) >= 64 ||
                 (!overrides.count("order") && spec.K >= 64 && std::min(spec.M, spec.N) >= 4 &&
                  std::max(spec.M, spec.N) >= 64)))
      p.pack = true;
  }
  // Packed products have hundreds of tiles per worker: the last wave's imbalance is noise, and
  // the cache-blocked nest (data-parallel over column panels) is what they need.
  if (p.pack) p.split = "dp";

  for (const auto& [k, v] : overrides) {
    if (k == "layout") continue;
    if (k == "split") {
      static const char* names[] = {"dp", "sk", "sk+dp"};
      if (v < 0 || v > 2) throw UserError(cat("plan override split=", v, " must be 0 (dp), 1 (sk) or 2 (sk+dp)"));
      p.split = names[v];
      continue;
    }
    if (k == "prepacked_b") {
      if (v != 0 && v != 1) throw UserError(cat("plan override prepacked_b=", v, " must be 0 or 1"));
      p.prepacked_b = v != 0;
      continue;
    }
    if (k == "pack") {
      if (v != 0 && v != 1) throw UserError(cat("plan override pack=", v, " must be 0 or 1"));
      p.pack = v == 1;
      // (a packed plan's split, as the planner's own packed plans take it, unless one is named:
      // on many cores a few-tile product asked to pack had Stream-K, which inline_b refuses)
      if (p.pack && !overrides.count("split")) p.split = "dp";
      continue;
    }
    if (k == "fixed") continue;  // decided at the end
    if (k == "b_prefetch") {
      if (v < 0 || v > 8192 || v % 64 != 0)
        throw UserError(cat("plan override b_prefetch=", v, " must be a multiple of 64 bytes in [0, 8192]"));
      p.b_prefetch = static_cast<int>(v);  // checked once the walk is decided
      continue;
    }
    if (k == "order") {
      if (v < 0 || v > 2) throw UserError(cat("plan override order=", v, " must be 0 (m_inner), 1 (k_outer) or 2 (dot)"));
      if (v == 2) {
        p.order = "dot";
        continue;
      }
      p.order = v ? "k_outer" : "m_inner";
      continue;
    }
    if (k == "vnni") {
      if (v != 1 && v != 2 && v != 4) throw UserError(cat("plan override vnni=", v, " must be 1, 2 or 4"));
      p.vnni = static_cast<int>(v);
      continue;
    }
    if (k == "amx") {
      if (v < 0 || v > 2) throw UserError(cat("plan override amx=", v, " must be 0 (none), 1 (tiles) or 2 (emulated)"));
      continue;  // decided after the packing
    }
    if (k == "amx_feed") {
      if (v < 0 || v > 2)
        throw UserError(cat("plan override amx_feed=", v, " must be 0 (loads first), 1 (interleaved) or 2 (interleaved, ",
                            "B in 1 KiB tiles)"));
      p.amx_feed = static_cast<int>(v);
      continue;
    }
    if (k == "direct_a") {
      if (v != 0 && v != 1) throw UserError(cat("plan override direct_a=", v, " must be 0 or 1"));
      p.direct_a = v != 0;  // checked once the tiles are decided
      continue;
    }
    if (k == "inline_b") {
      if (v != 0 && v != 1) throw UserError(cat("plan override inline_b=", v, " must be 0 or 1"));
      p.inline_b = v != 0;  // checked once the packing and the K tile are decided
      continue;
    }
    if (k == "k_inner") {
      if (v != 0 && v != 1) throw UserError(cat("plan override k_inner=", v, " must be 0 or 1"));
      p.k_inner = v != 0;  // checked once the packing is decided
      continue;
    }
    if (k == "nc_tiles") {
      if (v < 0 || v > 4096) throw UserError(cat("plan override nc_tiles=", v, " is out of range [0, 4096] (0: row blocks of mc_tiles)"));
      p.nc_tiles = static_cast<int>(v);  // checked once the packing is decided
      continue;
    }
    if (k == "demote") {
      if (v != 0 && v != 1) throw UserError(cat("plan override demote=", v, " must be 0 or 1"));
      if (v && !cpu.cldemote) throw UserError("plan demote=1: this CPU has no CLDEMOTE");
      p.demote = v != 0;
      continue;
    }
    if (k == "amx_store") {
      if (v != 0 && v != 1) throw UserError(cat("plan override amx_store=", v, " must be 0 or 1"));
      p.amx_store = v != 0;
      continue;
    }
    if (k == "amx_prefetch") {
      if (v < 0 || v > 6)
        throw UserError(cat("plan override amx_prefetch=", v, " must be 0 (none), 1 (A panels), 2 (A and B panels), 3 / 4 ",
                            "(1 and A and B 8 / 16 steps ahead into L2), 5 (A and B 8 steps ahead into L2) or 6 (1 and ",
                            "the next cold panels into L2)"));
      p.amx_prefetch = static_cast<int>(v);
      continue;
    }
    if (k == "grid_m") {
      if (v < 0 || v > 1024) throw UserError(cat("plan override grid_m=", v, " is out of range [0, 1024] (0: chosen at run time)"));
      p.grid_m = static_cast<int>(v);
      continue;
    }
    if (k == "mc_tiles") {
      if (v < 1 || v > 4096) throw UserError(cat("plan override mc_tiles=", v, " is out of range [1, 4096]"));
      p.mc_tiles = static_cast<int>(v);
      continue;
    }
    if (k == "shares") {
      if (v < 1 || v > 64) throw UserError(cat("plan override shares=", v, " is out of range [1, 64]"));
      p.shares = static_cast<int>(v);
      continue;
    }
    if (k == "threads") {
      if (v < 1 || v > 1024) throw UserError(cat("plan override threads=", v, " is out of range [1, 1024]"));
      p.threads = static_cast<int>(v);
      continue;
    }
    if (k == "ksplit") {
      if (v < 0 || v > 1024) throw UserError(cat("plan override ksplit=", v, " is out of range [0, 1024] (0: none)"));
      p.ksplit = static_cast<int>(v);  // checked once the walk is decided
      continue;
    }
    if (k == "kt") {
      if (v < 1 || v > (int64_t(1) << 30)) throw UserError(cat("plan override kt=", v, " is out of range [1, 2^30]"));
      p.kt = v;
      continue;
    }
    if (k == "mr") p.mr = static_cast<int>(v);
    else if (k == "nr") p.nr = static_cast<int>(v);
    else if (k == "kb") p.kb = static_cast<int>(v);
    else throw UserError(cat("unknown plan override '", k, "' (known: layout, mr, nr, kb, kt, threads, shares, split, pack, prepacked_b, vnni, amx, amx_feed, amx_prefetch, amx_store, demote, direct_a, inline_b, k_inner, nc_tiles, b_prefetch, mc_tiles, fixed, order, grid_m, ksplit)"));
    if (v < 1 || v > 128) throw UserError(cat("plan override ", k, "=", v, " is out of range [1, 128]"));
  }
  if (p.kb < 4 || p.kb > 128 || (p.kb & (p.kb - 1)) != 0)
    throw UserError(cat("plan override kb=", p.kb, " must be a power of two in [4, 128] (the K rule of subgroup ",
                        "scope matrices)"));
  if (p.demote && !p.pack) throw UserError("plan demote=1 needs packed panels (pack=1)");
  if (p.prepacked_b && (!p.pack || p.layout != "row"))
    throw UserError("a prepacked B needs the packed row layout (pack=1, layout='row')");
  if (p.pack && spec.batch1 * spec.batch2 != 1)
    throw UserError(cat("plan pack=1 needs one product, not a batch of ", spec.batch1 * spec.batch2));
  // Only packing reads A by rows (the microkernel broadcasts A's elements either way).
  p.unit_a = p.pack && a_unit;
  // VNNI: packed panels keep low-precision inputs as they are, in the dot instructions' order.
  if (!overrides.count("vnni")) p.vnni = p.pack ? dot_group(p.a_type, p.b_type, p.dtype, cpu) : 1;
  if (p.vnni > 1) {
    // The panels of a dot instruction's group, or of an AMX tile product's (the same VNNI
    // panels): u8 x u8 has no AVX-512 dot instruction but has tdpbuud, so a u8 weight prepacked on
    // an AMX CPU names vnni=4 (checked again below, once the tiles are decided).
    const int g = dot_group(p.a_type, p.b_type, p.dtype, cpu);
    const int tiles = amx_group(p.a_type, p.b_type, p.dtype, cpu, overrides.count("amx") && overrides.at("amx") == 2);
    if (!p.pack || (g != p.vnni && tiles != p.vnni))
      throw UserError(cat("plan vnni=", p.vnni, " needs packed panels (pack=1) and a product the CPU has a dot ",
                          "instruction of that group for (", ir::name(p.a_type), " x ", ir::name(p.b_type), " -> ",
                          ir::name(p.dtype), ": group ", g, ")"));
    if (p.kb % p.vnni != 0) throw UserError(cat("plan kb=", p.kb, " must be a multiple of vnni=", p.vnni));
  }
  // AMX: packed products the CPU has tiles for take them (a tile instruction does 16 x 16 x 64
  // bytes of K: 16 times the work of a 512-bit dot instruction). Register tile 32 x 32 (2 x 2
  // accumulator tiles, 2 A and 2 B tiles: the 8 tile registers), one tile row of K per step.
  {
    auto it = overrides.find("amx");
    const int group = amx_group(p.a_type, p.b_type, p.dtype, cpu);
    if (it != overrides.end()) {
      p.amx = static_cast<int>(it->second);
      if (p.amx == 1 && group == 0)
        throw UserError(cat("plan amx=1: this CPU (or process) has no AMX tiles for ", ir::name(p.a_type), " x ",
                            ir::name(p.b_type), " -> ", ir::name(p.dtype), "; amx=2 runs the same program with ",
                            "emulated tile instructions"));
      if (p.amx == 2 && amx_group(p.a_type, p.b_type, p.dtype, cpu, true) == 0)
        throw UserError(cat("plan amx=2: AMX has no tile product for ", ir::name(p.a_type), " x ", ir::name(p.b_type),
                            " -> ", ir::name(p.dtype), " (bf16 or f16 pairs to f32, 8-bit quads to i32)"));
    } else if (p.pack && group > 0 && cpu.vector_bytes == 64 &&
               (!overrides.count("vnni") || overrides.at("vnni") == group)) {  // (a prepacked B names its vnni)
      p.amx = 1;
    }
    if (p.amx && !p.pack && !overrides.count("pack") && spec.batch1 * spec.batch2 == 1) {
      p.pack = true;  // asked for tiles: they read packed panels
      if (!overrides.count("split")) p.split = "dp";
    }
    if (!p.amx && p.vnni > 1 && dot_group(p.a_type, p.b_type, p.dtype, cpu) != p.vnni)
      throw UserError(cat("plan vnni=", p.vnni, " for ", ir::name(p.a_type), " x ", ir::name(p.b_type), " -> ",
                          ir::name(p.dtype), " needs AMX tiles (the CPU has no dot instruction of that group), but ",
                          "the plan has amx=0"));
    if (p.amx) {
      if (!p.pack) throw UserError(cat("plan amx=", p.amx, " needs packed panels (pack=1)"));
      if (cpu.vector_bytes != 64)
        throw UserError(cat("plan amx=", p.amx, " needs 16-lane (AVX-512) vectors for its epilogue; this target has ",
                            cpu.vector_bytes, "-byte vectors"));
      const int g = amx_group(p.a_type, p.b_type, p.dtype, cpu, true);
      if (overrides.count("vnni") && p.vnni != g)
        throw UserError(cat("plan amx=", p.amx, " needs vnni=", g, ", got vnni=", p.vnni));
      const int kb = 64 / ir::size_in_bytes(p.a_type);
      for (auto [name, want] : {std::pair<const char*, int>{"mr", 32}, {"nr", 32}, {"kb", kb}})
        if (auto o = overrides.find(name); o != overrides.end() && o->second != want)
          throw UserError(cat("plan amx=", p.amx, " uses ", name, "=", want, " (AMX tiles), got ", name, "=", o->second));
      p.vnni = g;
      p.mr = 32;
      p.nr = 32;
      p.kb = kb;
      // bf16 tiles on many cores: each worker on whole column panels (its B slices stay in its
      // L2; A is read by all, from L3) beats the 2-D grid that reads the fewest bytes. Measured on
      // the 16-core Emerald Rapids host, 16 workers, grid_m 1 against the run-time choice (4):
      // 512^3 1.23x, 1024^3 1.15x, 4096^3 1.08x (session 9) and 1.24x (session 8). int8 went
      // both ways (1024^3: 1.10x and 0.86x), so it keeps the run-time choice.
      if (p.a_type == ir::ScalarType::bf16 && cpu.max_threads >= 8 && !overrides.count("grid_m")) p.grid_m = 1;
      p.unit_a = p.pack && a_unit;  // (the tiles may have turned packing on above)
      // Many workers: the tiles read a row-major A where it is, one row of workers, each packing
      // only the B panels it reads: no worker reads panels another core has just written, which
      // cost a 16-worker bf16 512^3 call ~80 us a worker on the 16-core Emerald Rapids host.
      // Measured there (session 10, 16 workers, against packed A): bf16 512^3 171 -> 125 us,
      // 1024^3 712 -> 611, 2048^3 4160 -> 3600; int8 1024^3 419 -> 290, 4096^3 15.2 -> 14.0 ms.
      // Rows of 8 KiB (bf16 K = 4096: 16 tile rows in one L1 set) lost (bf16 4096^3 28.7 -> 36.1
      // ms), as did one worker (no other core's panels to avoid): those keep packing A.
      const int64_t m_k = col ? spec.N : spec.M;
      if (!overrides.count("direct_a") && cpu.max_threads >= 8 && p.unit_a && m_k % p.mr == 0 &&
          spec.K % p.kb == 0 && spec.K * ir::size_in_bytes(p.a_type) <= 4096) {
        p.direct_a = true;
        if (!overrides.count("grid_m")) p.grid_m = 1;
      }
      if (p.direct_a && (!p.unit_a || spec.K % p.kb != 0 || (col ? spec.N : spec.M) % p.mr != 0))
        throw UserError(cat("plan direct_a=1 needs a row-major A (unit K stride in the kernel's orientation), K a ",
                            "multiple of ", p.kb, " and M a multiple of ", p.mr, " (got M=", col ? spec.N : spec.M,
                            ", K=", spec.K, ", unit stride ", p.unit_a ? "yes" : "no", ")"));
    } else if (p.direct_a) {
      throw UserError("plan direct_a=1 is for AMX plans (this plan has amx=0)");
    } else if (p.amx_feed != 0) {
      throw UserError(cat("plan amx_feed=", p.amx_feed, " is for AMX plans (this plan has amx=0)"));
    }
  }
  // The VNNI loads of B keep a kb x nr step in registers (the lowering's limit of 64 vectors).
  if (p.vnni > 1 && !p.amx && int64_t(p.kb) * (p.nr / p.simd_width) > 64)
    throw UserError(cat("plan kb=", p.kb, " with nr=", p.nr, " and vnni=", p.vnni, " needs ", p.kb * (p.nr / p.simd_width),
                        " vectors of B per step; at most 64 (kb <= ", 64 / (p.nr / p.simd_width), ")"));
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
    const int64_t kp = ceil_to(spec.K, p.kb), parts = (kp + cap - 1) / cap;
    p.kt = ceil_to((kp + parts - 1) / parts, p.kb);
  }
  // Row panels per block: the worker's B slices of one K tile stream past each block of A
  // (from L3 once they outgrow L2), so once they pass 4 MiB the blocks grow 6x. Measured on
  // Zen 5, one thread, 4096^3: f32 / bf16 / int8 219 / 410 / 835 GFLOP/s with 8 panels, 229 /
  // 448 / 891 with 48; at 1024 and 2048 the two are within noise.
  // The 2-D grid of the blocked nest (grid_m 0: the kernel's own choice at run time): of the
  // divisors g of the worker count with g <= the row panels, the one whose blocks read the fewest
  // rows of A plus columns of B per worker; the smaller g on ties (2 workers: 1 x 2). Estimated
  // here for mc_tiles.
  // (of W workers: the rows of workers g)
  auto run_time_grid = [&](int64_t W) {
    const int64_t tiles_m = (M + p.mr - 1) / p.mr, tiles_n = (N + p.nr - 1) / p.nr;
    int64_t best = -1, grid = 1;
    for (int64_t g = 1; g <= W; ++g) {
      if (W % g != 0 || tiles_m < g) continue;
      const int64_t cost = (tiles_m + g - 1) / g * p.mr + (tiles_n + W / g - 1) / (W / g) * p.nr;
      if (best < 0 || cost < best) best = cost, grid = g;
    }
    return grid;
  };
  const int grid = p.grid_m != 0 ? p.grid_m : static_cast<int>(run_time_grid(p.threads));
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
      const int64_t slice = int64_t(p.mr) * std::min(p.kt, ceil_to(spec.K, p.kb)) * ir::size_in_bytes(packed_a_type(p));
      p.mc_tiles = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(p.mc_tiles, (int64_t(1) << 20) / slice)));
    }
  }
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
    // Skinny products on many cores (up to 64 rows, the rows of the aliasing rule above): their A
    // slice at inline_b's own K tile (below) is at most 64 KiB, but at the packed K tile f64's 64
    // rows (13 tiles of 5: 65 rows of 8 KiB, 520 KiB) passed the bound above and kept the packing
    // phase. Measured on the 16-core Emerald Rapids host (session 16, medians of rounds through
    // plan=): f64 64x4096x2048 3.66 -> 2.81 ms (NumPy 2.60; the packing launch took 2.4 ms of the
    // 4.6 of a traced call), a second, noisier run 4.71 -> 3.71 (NumPy 4.07).
    // benchmarks/recorded/issue14-emr16-gemv-session16.txt.
    const bool skinny = cpu.max_threads >= 8 && M <= 64;
    if (!overrides.count("inline_b"))
      p.inline_b = p.pack && !p.prepacked_b && (!p.amx || (skinny && p.amx_feed != 2)) && p.split == "dp" && tiles_n >= p.threads &&
                   (a_slice <= 512.0 * 1024 || skinny) && (!overrides.count("grid_m") || p.grid_m == 1) &&
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
        const int64_t kp = ceil_to(spec.K, p.kb), parts = (kp + cap - 1) / cap;
        p.kt = ceil_to((kp + parts - 1) / parts, p.kb);
      }
      if (!overrides.count("mc_tiles")) p.mc_tiles = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(4096, tiles_m)));
    }
  }
  // Skinny products (the kernel's M up to 64 rows, long K, N wide enough to share among the
  // workers): B is the big operand, and each M tile of the tile walk would read its whole K x nr
  // panel again (1 MiB for f32 at K 4096: from L3 or memory). The blocked nest without packing
  // ("k_outer") reads a kt x nr slice of B once for all the M tiles (in L1 / L2), the workers
  // each on their own column panels, and adds the K tiles' partial products into C (an M x nr
  // panel that stays in L1 / L2). Needs one product and C in the accumulator type (no scratch).
  {
    const int64_t tiles_n = (N + p.nr - 1) / p.nr, tiles_m = (M + p.mr - 1) / p.mr;
    if (!overrides.count("order") && !p.pack && spec.batch1 * spec.batch2 == 1 &&
        (p.c_type == p.dtype || p.epilogue.any()) && M <= 64 &&
        spec.K >= 512 && N >= 256 && flops >= 4.0e6)
      p.order = "k_outer";
    if (p.order == "k_outer") {
      if (p.pack) throw UserError("plan order=1 (k_outer) is the unpacked blocked nest: it needs pack=0");
      if (spec.batch1 * spec.batch2 != 1 || (p.c_type != p.dtype && !p.epilogue.any()))
        throw UserError(cat("plan order=1 (k_outer) needs one product (not a batch of ", spec.batch1 * spec.batch2,
                            ") and C in the accumulator type (", ir::name(p.dtype), ", not ", ir::name(p.c_type), ")"));
      if (!overrides.count("split")) p.split = "dp";
      // Workers share the column panels. One row of tiles only streams B: on many cores about
      // 3/4 of them saturate the memory (16 cores, 1x4096x4096 f32: 12 workers 0.79 ms, 16
      // workers 1.19).
      if (!overrides.count("threads")) {
        int64_t t = std::min<int64_t>(p.threads, tiles_n);
        if (tiles_m == 1 && cpu.max_threads >= 8) t = std::min<int64_t>(t, cpu.max_threads * 3 / 4);
        p.threads = static_cast<int>(std::max<int64_t>(1, t));
      }
      // A 16 KiB slice of B per column panel and K tile, reused by every M tile from L1 (with the
      // M x nr panel of C). With one M tile nothing reuses it: K tiles of about 64 KiB of the
      // worker's columns keep its reads of B to a few rows at a time (streams the prefetchers
      // follow) with enough work per tile. Measured on Zen 4, 2 threads: 64x4096x4096 f32 17.8 /
      // 15.1 ms with kt 256 / 64; 1x4096x4096 (1 thread) 5.3 / 4.0 / 3.6 ms with kt 256 / 16 / 4;
      // on 16 cores 1.19 / 0.56 ms with kt 4 / 64.
      // On fewer than 8 cores, 128 KiB: one Zen 5 thread, 1x4096x4096 f32 from memory (CPU time)
      // kt 4 / 8 / 16 at 20.6 / 28.0 / 26.0 GB/s (64 KiB gave kt 4 there).
      if (!overrides.count("kt")) {
        const int64_t cols = (N + p.threads - 1) / p.threads;
        const int64_t span = cpu.max_threads < 8 ? (int64_t(128) << 10) : (int64_t(64) << 10);
        const int64_t cap = tiles_m == 1
                                ? std::max<int64_t>(p.kb, std::min<int64_t>(1024, span / (cols * esize)) / p.kb * p.kb)
                                : std::max<int64_t>(p.kb, (int64_t(16) << 10) / (int64_t(p.nr) * esize) / p.kb * p.kb);
        const int64_t parts = (spec.K + cap - 1) / cap;
        p.kt = ceil_to((spec.K + parts - 1) / parts, p.kb);
      }
      if (!overrides.count("mc_tiles")) p.mc_tiles = static_cast<int>(std::min<int64_t>(4096, tiles_m));
      // One row of C (a vector times a row-major matrix): K split among the workers, each over
      // all of N (GemmPlan::ksplit), instead of the workers sharing N's column panels, where each
      // K tile of a worker's half of B was kt runs of 8 KiB 16 KiB apart (N 4096 f32): the
      // prefetchers restart every two pages. Measured on Zen 5, 2 threads, 1x4096x4096 f32 (the
      // dot walk of 4096x1x4096, which reads its rows whole, at 1.15 ms): see the README.
      // Needs C in the accumulator type f32 / f64 (the partial rows are added in the caller)
      // and no fused epilogue (it applies once, to the whole sum).
      const bool ks_ok = tiles_m == 1 && M == 1 && !p.epilogue.any() && p.c_type == p.dtype &&
                         (p.dtype == ir::ScalarType::f32 || p.dtype == ir::ScalarType::f64);
      if (!overrides.count("ksplit") && ks_ok && p.threads > 1 && cpu.max_threads < 8 &&
          spec.K >= 256 * int64_t(p.threads))
        p.ksplit = p.threads;
      if (p.ksplit > 1) {
        if (!ks_ok)
          throw UserError(cat("plan ksplit=", p.ksplit, " splits K of one row of C (M = 1) among the workers: it needs ",
                              "C in the accumulator type f32 / f64 and no fused epilogue (got M=", M, ", C ",
                              ir::name(p.c_type), ", accumulator ", ir::name(p.dtype), ")"));
        // Each worker's K tiles over all of N: about 128 KiB of B a tile (8 rows of 16 KiB).
        // Measured on Zen 5, one thread, B in L3 (1x512x4096 and 1x2048x1024 f32): kt 4 / 8 / 16 /
        // 32 at 60-69 / 71-75 / 57-64 / 42-51 GB/s (CPU time), the dot walk 56-70.
        if (!overrides.count("kt")) {
          const int64_t cap = std::max<int64_t>(p.kb, std::min<int64_t>(1024, (int64_t(128) << 10) / (N * esize)) / p.kb * p.kb);
          const int64_t part = (spec.K + p.ksplit - 1) / p.ksplit, parts = (part + cap - 1) / cap;
          p.kt = ceil_to((part + parts - 1) / parts, p.kb);
        }
      }
    }
  }
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
  if (p.b_prefetch && p.order != "k_outer")
    throw UserError(cat("plan b_prefetch=", p.b_prefetch, " prefetches B's rows in the unpacked blocked nest (order=1, k_outer); "
                        "the plan's walk is ", p.order));
  if (p.ksplit > 1 && p.order != "k_outer")
    throw UserError(cat("plan ksplit=", p.ksplit, " is a launch of the k_outer walk (order=1); the plan's walk is ", p.order));
  // Matrix-vector products (the kernel's N is 1; A's rows and B's column with unit stride along
  // K): the "dot" walk streams A once, each worker on its own block of rows, at the memory's
  // speed (see the recipe); mr rows x nr lanes along K per tile.
  {
    const bool dot_ok = N == 1 && a_unit && (col ? spec.sa_c : spec.sb_r) == 1 && spec.batch1 * spec.batch2 == 1;
    if (!overrides.count("order") && dot_ok && !p.pack && M >= 8 && spec.K >= 64 &&
        std::max({spec.M, spec.N, spec.K}) > 64)
      p.order = "dot";
    if (p.order == "dot") {
      if (!dot_ok || p.pack)
        throw UserError(cat("plan order=2 (dot) needs one matrix-vector product (N = 1 in the kernel's orientation) ",
                            "with A's rows and B's column of unit stride, unpacked; got M=", M, " N=", N));
      if (!overrides.count("mr")) p.mr = 4;
      if (!overrides.count("nr")) p.nr = 4 * p.simd_width;
      if (!overrides.count("split")) p.split = "dp";
      p.kt = std::max<int64_t>(p.kb, ceil_to(std::max<int64_t>(1, spec.K), p.kb));  // one K tile: no Stream-K here
      if (p.split != "dp") throw UserError("plan order=2 (dot) is data-parallel over rows: it needs split='dp'");
      const int64_t tiles_m = (M + p.mr - 1) / p.mr;
      // About 64 KiB of A per worker at least: smaller shares cost more to hand out than they save.
      // Every core otherwise: each worker streams its rows at about one core's rate while it runs,
      // so the call lasts as long as the slowest worker's share (plus the launch). Measured on the
      // 16-core Emerald Rapids host (session 16; 12 workers, the 3/4 of the cores that an earlier
      // session measured as saturating the memory, against 16; medians of rounds, wall time through
      // plan=; the launch trace's busy medians at 16 workers: 17.6 GB/s a worker, one thread 15.8
      // GB/s): 4096x4096 f32 0.60 -> 0.47 ms (NumPy 0.40), 16384x4096 2.64 -> 2.14 (NumPy 2.32),
      // 2048x2048 0.165 -> 0.084 (NumPy 0.062); a second, noisier run 1.17 -> 0.72, 4.40 -> 3.66,
      // 0.83 -> 0.25. benchmarks/recorded/issue14-emr16-gemv-session16.txt.
      const int64_t bytes = M * spec.K * ir::size_in_bytes(p.a_type);
      if (!overrides.count("threads"))
        p.threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({int64_t(cpu.max_threads), tiles_m, bytes >> 16})));
    }
  }
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
  }
  if (p.shares > 1 && (!p.pack || p.inline_b))
    throw UserError(cat("plan shares=", p.shares, " cuts the packed blocked nest: it needs pack=1 and inline_b=0 (got pack=",
                        p.pack, ", inline_b=", p.inline_b, ")"));
  if (p.k_inner && (!p.pack || p.inline_b))
    throw UserError(cat("plan k_inner=1 orders the packed blocked nest: it needs pack=1 and inline_b=0 (got pack=", p.pack,
                        ", inline_b=", p.inline_b, ")"));
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
  if (!overrides.count("nc_tiles") && !overrides.count("mc_tiles") && cpu.max_threads >= 8 && p.pack && !p.amx &&
      p.vnni == 1 && !p.inline_b && !p.k_inner && p.split == "dp") {
    // The worker's row panels as the kernel chooses its grid (GemmRecipe::blocked): grid_m (times
    // the shares), or run_time_grid of the threads x shares.
    const int64_t tiles_m = (M + p.mr - 1) / p.mr;
    const int64_t W = int64_t(p.threads) * p.shares;
    const int64_t gm = p.grid_m > 0 ? std::min<int64_t>(int64_t(p.grid_m) * p.shares, W) : run_time_grid(W);
    const double rows_a = double((tiles_m + gm - 1) / gm) * p.mr * double(std::min(p.kt, ceil_to(spec.K, p.kb))) *
                          ir::size_in_bytes(p.dtype);
    if (rows_a > 0.5 * double(cpu.l2_bytes)) p.nc_tiles = 1;
  }
  // AMX plans take the same order (each tile's partial sums continued in the tiles from the
  // scratch, as in the row-block order); amx_prefetch 6 fetches the next block of row panels'
  // cold panels, which this order does not have.
  if (p.nc_tiles > 0 && (!p.pack || p.inline_b || p.k_inner || (p.amx && p.amx_prefetch == 6)))
    throw UserError(cat("plan nc_tiles=", p.nc_tiles, " orders the packed blocked nest by column panels: it needs pack=1, ",
                        "inline_b=0, k_inner=0 and no amx_prefetch=6 (got pack=", p.pack, ", inline_b=", p.inline_b,
                        ", k_inner=", p.k_inner, ", amx_prefetch=", p.amx ? p.amx_prefetch : 0, ")"));
  if (p.kt % p.kb != 0)
    throw UserError(cat("plan kt=", p.kt, " must be a multiple of kb=", p.kb, " (whole mul_add steps per K tile)"));
  // Small products get code for their exact shape and strides (see GemmPlan::fixed): the
  // per-product work is a few hundred cycles, and runtime strides cost a third of it in
  // address arithmetic (spilled row pointers). `fixed=0` turns it off.
  bool fix = !p.pack && std::max({spec.M, spec.N, spec.K}) <= 64 && spec.K > 0 && p.ksplit <= 1;
  if (auto it = overrides.find("fixed"); it != overrides.end()) {
    if (it->second != 0 && it->second != 1) throw UserError(cat("plan override fixed=", it->second, " must be 0 or 1"));
    if (it->second == 1 && p.ksplit > 1)
      throw UserError(cat("plan fixed=1 builds K into the code; ksplit=", p.ksplit, " runs it on parts of K"));
    fix = it->second == 1 && !p.pack;
  }
  if (fix) p.fixed = gemm_args(spec, p).fixed_view();
  if (p.nr % p.simd_width != 0)
    throw UserError(cat("plan override nr=", p.nr, " must be a multiple of the vector width ", p.simd_width));
  if (p.mr * (p.nr / p.simd_width) > 4 * regs)
    throw UserError(cat("plan tile mr=", p.mr, " nr=", p.nr, " needs ", p.mr * (p.nr / p.simd_width),
                        " accumulator registers; at most ", 4 * regs, " are allowed"));
  return p;
}

GemmArgs gemm_args(const GemmSpec& s, const GemmPlan& p) {
  GemmArgs a{};
  a.mr = p.mr;
  a.nr = p.nr;
  a.kt = p.kt;
  a.K = s.K;
  a.batch1 = s.batch1;
  a.batch2 = s.batch2;
  a.sc_b1 = s.sc_b1;
  a.sc_b2 = s.sc_b2;
  if (p.layout == "col") {
    // C^T (N x M) = B^T (N x K) A^T (K x M).
    a.swap_ab = true;
    a.M = s.N; a.N = s.M;
    a.sa_r = s.sb_c; a.sa_c = s.sb_r;
    a.sb_r = s.sa_c; a.sb_c = s.sa_r;
    a.sc_r = s.sc_c; a.sc_c = s.sc_r;
    a.sa_b1 = s.sb_b1; a.sa_b2 = s.sb_b2;
    a.sb_b1 = s.sa_b1; a.sb_b2 = s.sa_b2;
  } else {
    a.swap_ab = false;
    a.M = s.M; a.N = s.N;
    a.sa_r = s.sa_r; a.sa_c = s.sa_c;
    a.sb_r = s.sb_r; a.sb_c = s.sb_c;
    a.sc_r = s.sc_r; a.sc_c = s.sc_c;
    a.sa_b1 = s.sa_b1; a.sa_b2 = s.sa_b2;
    a.sb_b1 = s.sb_b1; a.sb_b2 = s.sb_b2;
  }
  return a;
}

}  // namespace coopjit
