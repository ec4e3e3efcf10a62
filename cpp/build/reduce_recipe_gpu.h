// The reduction recipe for SPIR-V devices: the CPU recipe's row, column and 2x2 forms with one
// worker per subgroup (worker = work-group id x subgroups per group + subgroup id), each
// accumulating coopmatrix tiles element-wise, finishing with coopmatrix.reduce and storing.
#pragma once

#include <memory>
#include <string>

#include "ir/ir.h"
#include "plan/gpu_plan.h"
#include "spec/reduce_spec.h"

namespace coopjit {

/// Parameters: X, Y (pointers); rows, cols, sx_r, sx_c, sy_r, sy_c (index). Launch: enough
/// work-groups for the tiles (gpu_reduce_groups).
std::unique_ptr<ir::Function> build_reduce_gpu(const ReduceSpec& spec, const GpuReducePlan& plan, const std::string& name);

/// The number of tiles of `spec` (one subgroup each) and the work-groups that cover them.
int64_t gpu_reduce_tiles(const ReduceSpec& spec, const GpuReducePlan& plan);
int64_t gpu_reduce_groups(const ReduceSpec& spec, const GpuReducePlan& plan);

}  // namespace coopjit
