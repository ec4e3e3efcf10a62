// The GEMM recipe for SPIR-V devices: one work-group computes one macro tile of the flattened
// batch x M x N tile space (its index from the work-group id), each of its sg_m x sg_n subgroups
// an mr x nr accumulator coopmatrix, then the alpha / beta epilogue. Data-parallel plans give
// each work-group a whole tile; Stream-K plans (split sk, sk+dp; seeds/004) give the first
// `workers` work-groups equal shares of the (tile, K tile) iterations of the first output tiles,
// partial tiles through a workspace, and a second kernel (the fix-up) adds those in a fixed order.
#pragma once

#include <memory>
#include <string>

#include "ir/ir.h"
#include "plan/gpu_plan.h"

namespace coopjit {

enum class GpuGemmPart { main, fixup };

/// Parameters, in order: A, B, C (pointers); M, N, K, sa_r, sa_c, sb_r, sb_c, sc_r, sc_c,
/// batch1, batch2, sa_b1, sb_b1, sc_b1, sa_b2, sb_b2, sc_b2 (index); alpha, beta (scalars of the
/// accumulator type); for Stream-K plans also WS (pointer to the accumulator type: 2 workers
/// macro tiles), workers, sk_iters, tiles_k (index). All in the kernel's orientation (gemm_args of
/// plan.as_cpu_plan()). Launch: data-parallel, one work-group per macro tile (batch1 * batch2 *
/// ceil(M / (mr sg_m)) * ceil(N / (nr sg_n))); Stream-K, main: workers + the data-parallel tiles,
/// then fixup: sk_iters / tiles_k work-groups, with the same arguments.
std::unique_ptr<ir::Function> build_gemm_gpu(const GpuGemmPlan& plan, const std::string& name,
                                             GpuGemmPart part = GpuGemmPart::main);

}  // namespace coopjit
