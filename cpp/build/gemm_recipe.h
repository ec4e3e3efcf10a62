// The GEMM recipe: emits the kernel IR of a planned GEMM with coopmatrix operations (load,
// mul_add, store) inside loops over the flattened tile space and over K.
#pragma once

#include <memory>

#include "ir/ir.h"
#include "plan/gemm_plan.h"

namespace coopjit {

/// Parameters, in order: A, B, C (pointers); M, N, K, sa_r, sa_c, sb_r, sb_c, sc_r, sc_c,
/// tile_begin, tile_end (index); alpha, beta (scalars of the element type). All in the kernel's
/// orientation (see gemm_args).
std::unique_ptr<ir::Function> build_gemm(const GemmPlan& plan, const std::string& name);

}  // namespace coopjit
