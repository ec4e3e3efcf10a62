// The GEMM planner's override phase: each plan field the caller names, checked for range and
// put in place of the default the phases before chose (the phases after check it against the rest).
#include "plan/gemm_plan_internal.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "core/error.h"

namespace coopjit {

void apply_overrides(GemmPlan& p, const PlanContext& c) {
  const GemmSpec& spec = c.spec;
  const CpuTargetInfo& cpu = c.cpu;
  const PlanOverrides& overrides = c.overrides;
  // The fields that are 0 or 1, and the counts in a range [lo, hi] (with what the message adds
  // about them), each checked against the rest by the phases after this one (direct_a once the
  // tiles are decided; inline_b once the packing and the K tile are; own_a once the packing, the
  // grid and the shares are; k_inner and nc_tiles once the packing is; ksplit once the walk is).
  static const std::pair<const char*, bool GemmPlan::*> flags[] = {
      {"prepacked_b", &GemmPlan::prepacked_b}, {"direct_a", &GemmPlan::direct_a}, {"inline_b", &GemmPlan::inline_b},
      {"own_a", &GemmPlan::own_a},             {"k_inner", &GemmPlan::k_inner},   {"demote", &GemmPlan::demote},
      {"c_prefetch", &GemmPlan::c_prefetch},   {"cycles", &GemmPlan::cycles},     {"amx_store", &GemmPlan::amx_store}};
  struct Count {
    const char* name;
    int GemmPlan::*field;
    int64_t lo, hi;
    const char* note;
  };
  static const Count counts[] = {{"nc_tiles", &GemmPlan::nc_tiles, 0, 4096, " (0: row blocks of mc_tiles)"},
                                 {"grid_m", &GemmPlan::grid_m, 0, 1024, " (0: chosen at run time)"},
                                 {"mc_tiles", &GemmPlan::mc_tiles, 1, 4096, ""},
                                 {"shares", &GemmPlan::shares, 1, 64, ""},
                                 {"threads", &GemmPlan::threads, 1, 1024, ""},
                                 {"ksplit", &GemmPlan::ksplit, 0, 1024, " (0: none)"}};
  for (const auto& [k, v] : overrides) {
    if (k == "layout" || k == "simd_width") continue;  // (decided with the orientation: plan_orientation)
    const std::string& key = k;  // (a lambda of C++17 does not capture a structured binding)
    const auto flag = std::find_if(std::begin(flags), std::end(flags), [&](const auto& f) { return key == f.first; });
    if (flag != std::end(flags)) {
      if (v != 0 && v != 1) throw UserError(cat("plan override ", k, "=", v, " must be 0 or 1"));
      if (k == "demote" && v && !cpu.cldemote) throw UserError("plan demote=1: this CPU has no CLDEMOTE");
      p.*(flag->second) = v != 0;
      continue;
    }
    const auto count = std::find_if(std::begin(counts), std::end(counts), [&](const Count& n) { return key == n.name; });
    if (count != std::end(counts)) {
      if (v < count->lo || v > count->hi)
        throw UserError(cat("plan override ", k, "=", v, " is out of range [", count->lo, ", ", count->hi, "]", count->note));
      p.*(count->field) = static_cast<int>(v);
      continue;
    }
    if (k == "split") {
      static const char* names[] = {"dp", "sk", "sk+dp"};
      if (v < 0 || v > 2) throw UserError(cat("plan override split=", v, " must be 0 (dp), 1 (sk) or 2 (sk+dp)"));
      p.split = names[v];
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
    if (k == "amx_prefetch") {
      if (v < 0 || v > 6)
        throw UserError(cat("plan override amx_prefetch=", v, " must be 0 (none), 1 (A panels), 2 (A and B panels), 3 / 4 ",
                            "(1 and A and B 8 / 16 steps ahead into L2), 5 (A and B 8 steps ahead into L2) or 6 (1 and ",
                            "the next cold panels into L2)"));
      p.amx_prefetch = static_cast<int>(v);
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
    else throw UserError(cat("unknown plan override '", k, "' (known: layout, simd_width, mr, nr, kb, kt, threads, shares, split, pack, prepacked_b, vnni, amx, amx_feed, amx_prefetch, amx_store, demote, cycles, c_prefetch, direct_a, inline_b, own_a, k_inner, nc_tiles, b_prefetch, mc_tiles, fixed, order, grid_m, ksplit)"));
    if (v < 1 || v > 128) throw UserError(cat("plan override ", k, "=", v, " is out of range [1, 128]"));
  }
  // A forced nr without mr (a prepacked B's panel width, or plan={'nr': ...}): the height the
  // planner took for its own width kept the register budget of that width, not of this one
  // (f32 N = 130 prepacked: mr 16 for one vector, with the panels' 3: 48 accumulators, past the
  // registers). As plan_register_tile does: at most 3/4 of the registers hold accumulators.
  // Measured (Zen 5, one thread's CPU time, prepacked, medians of 9 alternating rounds), 16 -> 8
  // rows: f32 64x257x130 55 -> 36 us, 301x257x130 208 -> 122 us, f64 64x257x130 102 -> 59 us.
  if (overrides.count("nr") && !overrides.count("mr") && p.nr >= p.simd_width && p.nr % p.simd_width == 0)
    p.mr = std::min(p.mr, std::max(1, (cpu.vector_registers * 3 / 4) / (p.nr / p.simd_width)));
  if (p.kb < 4 || p.kb > 128 || (p.kb & (p.kb - 1)) != 0)
    throw UserError(cat("plan override kb=", p.kb, " must be a power of two in [4, 128] (the K rule of subgroup ",
                        "scope matrices)"));
  if (p.demote && !p.pack) throw UserError("plan demote=1 needs packed panels (pack=1)");
  if (p.cycles && !p.pack) throw UserError("plan cycles=1 needs packed panels (pack=1)");
  if (p.prepacked_b && (!p.pack || p.layout != "row"))
    throw UserError("a prepacked B needs the packed row layout (pack=1, layout='row')");
  if (p.pack && spec.batch1 * spec.batch2 != 1)
    throw UserError(cat("plan pack=1 needs one product, not a batch of ", spec.batch1 * spec.batch2));
}

}  // namespace coopjit
