// GEMM on a SPIR-V device: plan (gpu_plan.h), build (gemm_recipe_gpu.h) and cache the program
// (device_program.h), launch it over the macro tiles (Stream-K: the workers and data-parallel
// tiles, then the fix-up over a workspace in shared memory). The operands must be device-visible
// memory (coopjit.empty / shared allocations); the Python layer copies host arrays there.
#pragma once

#include <memory>
#include <string>

#include "plan/gpu_plan.h"
#include "runtime/device_program.h"
#include "spec/gemm_spec.h"

namespace coopjit {

struct GpuGemmKernel {
  GemmSpec spec;
  GpuGemmPlan plan;
  PlanOverrides overrides;
  std::string device;
  std::shared_ptr<const DeviceProgram> code;
  std::shared_ptr<const DeviceProgram> fixup;  // Stream-K plans: adds the partial tiles
};

/// Plans `spec` for `device` and returns its compiled kernel (from the cache when it exists).
GpuGemmKernel gpu_gemm_kernel(const GemmSpec& spec, const std::string& device, const PlanOverrides& overrides = {});

/// Runs `k` on operands with `spec`'s shapes and strides (the caller checked that they need the
/// same plan); a, b, c point at element [0, 0] of op(A), op(B) and C in device-visible memory.
/// `epilogue`: the device addresses of the fused epilogue's operands (required when the plan has one).
void run_gpu_gemm(const GpuGemmKernel& k, const GemmSpec& spec, const void* a, const void* b, void* c, double alpha,
                  double beta, const EpilogueArgs* epilogue = nullptr);

}  // namespace coopjit
