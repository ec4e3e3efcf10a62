// GEMM from spec to result: plan, fetch (or build) the code, launch. No LLVM types here.
#pragma once

#include <memory>

#include "plan/gemm_plan.h"
#include "runtime/kernel.h"
#include "spec/gemm_spec.h"
#include "target/cpu_info.h"

namespace coopjit {

struct GemmKernel {
  GemmSpec spec;
  GemmPlan plan;
  std::shared_ptr<const CompiledKernel> code;
};

/// The host CPU as the planner sees it (vector width, registers, dot instructions, pool size).
CpuTargetInfo host_target();

/// The planner's view of any CPU (LLVM's description of it, cpu_info_for) with `threads`
/// workers; `amx_usable`: the process may use the AMX tiles the CPU has.
CpuTargetInfo target_info(const CpuInfo& cpu, int threads, bool amx_usable);

/// Code for another x86 CPU, not linked: the plan coopjit makes for `spec` on `cpu` and the
/// kernel's optimized LLVM IR and assembly.
struct CrossCompiled {
  GemmPlan plan;
  std::string ir, llvm_ir, assembly;
};
// code=false: the plan and the kernel IR only (llvm_ir and assembly left empty): what a planner
// question costs, without LLVM's optimization and code generation.
CrossCompiled cross_compile_gemm(const GemmSpec& spec, const std::string& cpu, int threads,
                                 const PlanOverrides& overrides = {}, bool code = true);

/// Plans `spec` for the host CPU and returns the compiled kernel (from the cache when it exists).
GemmKernel gemm_kernel(const GemmSpec& spec, const PlanOverrides& overrides = {});

/// gemm_kernel(spec, overrides) memoized on what the plan depends on (dtype, sizes, which strides
/// are 1, beta, the pool size; every stride and the overrides when there are any): the per-call
/// path. Without overrides the tuned-plan table's plan (gemm_kernel_tuned).
const GemmKernel& gemm_kernel_cached(const GemmSpec& spec, const PlanOverrides& overrides = {});
// Later gemm_kernel_cached calls plan and fetch their kernels again (coopjit.cache.clear(memory=True));
// kernels handed out before stay valid (other threads may be running them).
void gemm_memo_forget();

/// Runs `k` on operands whose shapes and strides are `spec`'s (which may differ from k.spec
/// only in values that do not change the code: the caller checks that with the plan key).
/// a, b, c point at element [0, 0] of op(A), op(B) and C. Does not touch Python.
/// `prepacked_b`: B's panels made by coopjit.prepack when the plan says prepacked_b.
/// `epilogue`: the operands of the plan's fused epilogue (required when it has one; the residual
/// has C's element strides).
/// `scaled_once` (gemm's calls; null: not checked): the kernels scale each part of a split K by
/// alpha and add beta * C first, so a float product with a finite |alpha| > 1 or |beta| > 1 could
/// overflow a part where alpha * (the sum) + beta * C does not. Where the plan splits K, such a
/// call's C is checked after the product; if it holds a value that is not finite, C's values
/// before the call are put back and *scaled_once is set: the caller computes the sum with alpha 1
/// and applies alpha and beta once (coopjit._gemm._alpha_once).
void run_gemm(const GemmKernel& k, const GemmSpec& spec, const void* a, const void* b, void* c,
              double alpha, double beta, const void* prepacked_b = nullptr, const EpilogueArgs* epilogue = nullptr,
              bool* scaled_once = nullptr);

/// plan.cycles (debugging): what the calls of such plans added since the last reset: for each
/// worker index a kernel call had (a share's index in a launch of shares), kCycleFields counters
/// (CycleField, gemm_plan.h: time-stamp counter ticks and counts), and the ticks and number of
/// whole run_gemm calls. Calls of such plans run one at a time.
struct GemmCycles {
  std::vector<int64_t> counters;  // slots x kCycleFields
  int64_t slots = 0, call_ticks = 0, calls = 0;
};
GemmCycles gemm_cycles(bool reset);
/// The time-stamp counter (rdtsc) the kernels of plan.cycles read.
int64_t read_tsc();

}  // namespace coopjit
