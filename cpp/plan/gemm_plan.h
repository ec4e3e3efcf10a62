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
};

struct GemmPlan {
  ir::ScalarType dtype = ir::ScalarType::f32;  // accumulator
  ir::ScalarType a_type = ir::ScalarType::f32, b_type = ir::ScalarType::f32, c_type = ir::ScalarType::f32;  // kernel's
  // Layout: "row" computes C = A B as given; "col" computes C^T = B^T A^T, so that the kernel's
  // fast (vector) dimension is the one with unit stride in memory.
  std::string layout = "row";
  int simd_width = 16;  // lanes of one vector register: the subgroup size of the CPU lowering
  int mr = 8, nr = 32;  // register tile: an mr x nr accumulator coopmatrix
  int kb = 4;           // K step of one mul_add (A is mr x kb, B is kb x nr)
  bool unit_b = true;   // B's column stride is 1 in the kernel's orientation (vector loads)
  bool unit_c = true;   // C's column stride is 1 in the kernel's orientation (vector stores)
  bool accumulate = false;
  std::string order = "m_inner";  // tile walk: consecutive tiles share a B panel
  bool pack = false;  // copy A and B into contiguous tile panels (in the accumulator type) first
  int mc_tiles = 8;   // row panels per block of the packed, cache-blocked loop nest
  bool prepacked_b = false;  // B comes already packed (coopjit.prepack): only A is packed per call
  // How workers share the flattened batch x M x N x K tile space (seeds/004): these are runtime
  // arguments of the same code, not part of its key.
  int threads = 1;            // workers (CPU threads), all running at once
  std::string split = "dp";   // "dp", "sk" (Stream-K) or "sk+dp" (2-tile Stream-K + data-parallel)
  int64_t kt = 256;           // K elements per K tile of the tile space (a multiple of kb)

  /// Everything that changes the generated code, as one string (the code cache key).
  std::string key() const;
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
};

/// The Stream-K split of seeds/004 for W workers: how many of the tiles_mn * tiles_k global
/// tiles go to the Stream-K partition (the rest, whole output tiles, are data-parallel).
int64_t stream_k_tiles(const std::string& split, int64_t tiles_mn, int64_t tiles_k, int64_t workers);

using PlanOverrides = std::map<std::string, int64_t>;

/// Chooses the plan for a spec on the CPU with up to `max_threads` workers; `overrides` fixes
/// fields by name (layout: 0 row, 1 col; mr, nr, kb, kt, threads; split: 0 dp, 1 sk, 2 sk+dp).
/// Throws UserError for an unknown or illegal override.
GemmPlan plan_gemm(const GemmSpec& spec, const CpuTargetInfo& cpu, const PlanOverrides& overrides = {});
GemmArgs gemm_args(const GemmSpec& spec, const GemmPlan& plan);

}  // namespace coopjit
