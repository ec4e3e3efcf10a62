// GemmPlan's text forms (key, str, fields), the helpers shared with the kernel builders, and
// plan_gemm: the planner, as the list of its phases (gemm_plan_internal.h; one file each group).
#include "plan/gemm_plan.h"

#include <algorithm>

#include "core/error.h"
#include "plan/gemm_plan_internal.h"

namespace coopjit {

std::string GemmPlan::key() const {
  return cat("gemm.", ir::name(a_type), "x", ir::name(b_type), "to", ir::name(c_type), ".", ir::name(dtype), ".", layout, ".s", simd_width, ".m", mr, "n", nr, "k", kb,
             unit_a ? ".ua" : "", unit_b ? ".ub" : ".gb", unit_c ? ".uc" : ".gc", accumulate ? ".acc" : "", ".", order,
             pack ? cat(".pack", mc_tiles) : std::string(), grid_m > 0 ? cat(".gm", grid_m) : std::string(),
             prepacked_b ? ".prepackedb" : "",
             vnni > 1 ? cat(".vnni", vnni) : std::string(), amx ? cat(".amx", amx, amx_feed ? cat("f", amx_feed) : std::string(), amx_prefetch != 1 ? cat("p", amx_prefetch) : std::string(), amx_store ? "" : "s0")
                 : std::string(),
             demote ? ".demote" : "", direct_a ? ".directa" : "", inline_b ? ".inlineb" : "", own_a ? ".owna" : "", k_inner ? ".kinner" : "", nc_tiles ? cat(".nc", nc_tiles) : std::string(),
             b_prefetch ? cat(".bpf", b_prefetch) : std::string(), cycles ? ".cycles" : "", c_prefetch ? ".cpf" : "",
             streams() ? ".sk" : "", fixed_key(),
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
          {"cycles", cycles ? "true" : "false"},
          {"c_prefetch", c_prefetch ? "true" : "false"},
          {"direct_a", direct_a ? "true" : "false"},
          {"inline_b", inline_b ? "true" : "false"},
          {"own_a", own_a ? "true" : "false"},
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
  // Hopper kernel's default where it streams, gpu_plan_split.cpp): the streamed tiles are few, and the
  // panels they share stay in L2.
  if (split == "dp+sk") return tiles_mn % workers * tiles_k;
  // 2-tile Stream-K + DP (seeds/004): N_DP = ((M*N) // WG - 1) * WG * K whole output tiles per
  // worker, the rest (between one and two tiles' worth per worker) streamed; all DP when the
  // tiles divide evenly. With fewer tiles than workers, everything streams.
  if (total % (workers * tiles_k) == 0) return 0;
  const int64_t n_dp = std::max<int64_t>(0, tiles_mn / workers - 1) * workers * tiles_k;
  return total - n_dp;
}

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

// The planner: its phases in order (gemm_plan_internal.h), each on the plan the earlier ones left.
GemmPlan plan_gemm(const GemmSpec& spec, const CpuTargetInfo& cpu, const PlanOverrides& overrides) {
  spec.validate();
  GemmPlan p;
  const PlanContext c = plan_orientation(spec, cpu, overrides, p);  // layout, types, unit strides
  plan_register_tile(p, c);   // mr x nr, kb
  plan_workers(p, c);         // threads, split (DP / Stream-K), the default K tile
  plan_packing(p, c);         // pack
  apply_overrides(p, c);      // the caller's fields in place of the defaults so far
  plan_instructions(p, c);    // vnni, amx (and the tile, packing and direct_a they need)
  plan_packed_blocks(p, c);   // the packed nest's kt and mc_tiles
  plan_inline_b(p, c);        // B packed by its reader
  plan_skinny_walk(p, c);     // the unpacked blocked nest (k_outer), ksplit
  plan_ksplit_tile_walk(p, c);  // ksplit of the unpacked tile walk (m_inner)
  plan_b_prefetch(p, c);      // B's rows prefetched in that nest
  plan_gemv(p, c);            // the dot walk of matrix-vector products
  plan_wave_tile(p, c);       // mr of a data-parallel tile walk of few tiles on many cores
  plan_shares(p, c);          // shares a worker of the packed nest
  plan_column_blocks(p, c);   // nc_tiles
  plan_own_a(p, c);           // each worker's own copy of A, no packing barrier
  plan_fixed_shape(p, c);     // code for one exact shape
  check_register_tile(p, c);  // the tile fits the register file
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
