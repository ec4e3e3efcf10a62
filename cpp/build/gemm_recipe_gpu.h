// The GEMM recipe for SPIR-V devices: one work-group computes one macro tile of the flattened
// batch x M x N tile space (its index from the work-group id), each of its sg_m x sg_n subgroups
// an mr x nr accumulator coopmatrix over the whole K range (data-parallel: no Stream-K), then
// the alpha / beta epilogue.
#pragma once

#include <memory>
#include <string>

#include "ir/ir.h"
#include "plan/gpu_plan.h"

namespace coopjit {

/// Parameters, in order: A, B, C (pointers); M, N, K, sa_r, sa_c, sb_r, sb_c, sc_r, sc_c,
/// batch1, batch2, sa_b1, sb_b1, sc_b1, sa_b2, sb_b2, sc_b2 (index); alpha, beta (scalars of the
/// accumulator type). All in the kernel's orientation (gemm_args of plan.as_cpu_plan()).
/// Launch: batch1 * batch2 * ceil(M / (mr sg_m)) * ceil(N / (nr sg_n)) work-groups.
std::unique_ptr<ir::Function> build_gemm_gpu(const GpuGemmPlan& plan, const std::string& name);

}  // namespace coopjit
