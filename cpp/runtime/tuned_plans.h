// Tuned plans: for a GEMM problem signature (what the plan depends on), the plan overrides the
// autotuner found best. Python fills the table from the tuning database; calls without an
// explicit plan use it (gemm_kernel_tuned). No LLVM types here.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "plan/gemm_plan.h"
#include "runtime/gemm.h"
#include "spec/gemm_spec.h"

namespace coopjit {

/// Everything plan_gemm looks at: the element types, M x N x K, batch count, which strides are
/// 1, beta, and the worker pool's size; e.g. "gemm f32 1024x1024x1024 batch 1 unit b_c,c_c pool 2"
/// ("gemm bf16xbf16->f32 ..." when the types differ).
std::string gemm_signature(const GemmSpec& s);

/// Sets (or, with empty overrides, removes) the tuned plan of a signature.
void set_tuned_plan(const std::string& signature, const PlanOverrides& overrides);
std::map<std::string, PlanOverrides> tuned_plans();
void clear_tuned_plans();
/// Changes whenever the table does (part of the plan memo's key).
int64_t tuned_generation();

/// gemm_kernel(spec) with the tuned plan of its signature when there is one (and it is still a
/// legal plan: otherwise the default); `used` receives the overrides applied.
GemmKernel gemm_kernel_tuned(const GemmSpec& spec, PlanOverrides* used = nullptr);

}  // namespace coopjit
