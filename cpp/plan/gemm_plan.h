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
};

struct GemmPlan {
  ir::ScalarType dtype = ir::ScalarType::f32;
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

  /// Everything that changes the generated code, as one string (the code cache key).
  std::string key() const;
  std::string str() const { return key(); }
  /// Field name -> value, for Python's kernel.config.
  std::map<std::string, std::string> fields() const;
  bool operator==(const GemmPlan& o) const { return key() == o.key(); }
};

/// The runtime arguments of a planned GEMM in the kernel's orientation.
struct GemmArgs {
  int64_t M, N, K, sa_r, sa_c, sb_r, sb_c, sc_r, sc_c;
  bool swap_ab;  // the kernel's A is the caller's B (layout "col")
  int64_t tiles() const;
  int mr, nr;
};

using PlanOverrides = std::map<std::string, int64_t>;

/// Chooses the plan for a spec on the CPU; `overrides` fixes fields by name (layout: 0 row,
/// 1 col; mr, nr, kb). Throws UserError for an unknown or illegal override.
GemmPlan plan_gemm(const GemmSpec& spec, const CpuTargetInfo& cpu, const PlanOverrides& overrides = {});
GemmArgs gemm_args(const GemmSpec& spec, const GemmPlan& plan);

}  // namespace coopjit
