// The GEMM recipe: emits the kernel IR of a planned GEMM. One worker's share of the flattened
// batch x M x N x K tile space (seeds/004): its Stream-K range, partial tiles through a
// workspace and flags, then its data-parallel output tiles; each tile a K loop of coopmatrix
// load / mul_add over a register-blocked accumulator, and the alpha/beta epilogue.
#pragma once

#include <memory>

#include "ir/ir.h"
#include "plan/gemm_plan.h"

namespace coopjit {

/// Parameters, in order: A, B, C, WS (workspace: one mr x nr tile per worker), FLAGS (ptr<i32>,
/// two per worker, zero at launch), PA, PB (packed panels when plan.pack) (pointers); M, N, K, sa_r, sa_c, sb_r, sb_c, sc_r, sc_c,
/// batch1, batch2, sa_b1, sb_b1, sc_b1, sa_b2, sb_b2, sc_b2, worker, workers, kt, n_sk, phase, shares (index);
/// alpha, beta (scalars of the element type). All in the kernel's orientation (see gemm_args).
std::unique_ptr<ir::Function> build_gemm(const GemmPlan& plan, const std::string& name);

}  // namespace coopjit
