// Reductions on a SPIR-V device: plan (gpu_plan.h), build (reduce_recipe_gpu.h), cache and
// launch. X and Y must be device-visible memory.
#pragma once

#include <memory>
#include <string>

#include "runtime/device_program.h"
#include "spec/reduce_spec.h"

namespace coopjit {

/// Runs the reduction `spec` from x (element [0, 0] of X) into y on `device`; returns the
/// program it ran (for kernel.source).
/// The program run_gpu_reduce would run (built or from the cache), not launched: also for named
/// targets ("target:sm_90"), whose code is generated only.
std::shared_ptr<const DeviceProgram> gpu_reduce_program(const std::string& device, const ReduceSpec& spec);

std::shared_ptr<const DeviceProgram> run_gpu_reduce(const std::string& device, const ReduceSpec& spec, const void* x,
                                                    void* y);

}  // namespace coopjit
