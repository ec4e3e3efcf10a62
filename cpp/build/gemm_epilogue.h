// The fused GEMM epilogue (GemmEpilogue, gemm_spec.h) as kernel IR, shared by the CPU recipe
// (gemm_recipe.cpp) and the device recipe (gemm_recipe_gpu.cpp): the steps applied to one output
// tile before its store.
#pragma once

#include <functional>

#include "ir/builder.h"
#include "spec/gemm_spec.h"

namespace coopjit {

/// What the steps read: the kernel's parameters (the vectors and the residual, in the epilogue's
/// type; null where a step is absent), its M and N, and whether the kernel computes C^T ("col":
/// the caller's columns are the kernel's rows).
struct EpilogueOperands {
  ir::Value *scale = nullptr, *row_scale = nullptr, *bias = nullptr, *residual = nullptr;
  ir::Value *M = nullptr, *N = nullptr;
  bool col = false;
};

/// Adds the epilogue's parameters to `f` (after the ones already there): SCALE, ROW_SCALE, BIAS,
/// RESIDUAL, pointers to the epilogue's type.
EpilogueOperands add_epilogue_params(ir::Function& f, const GemmEpilogue& e);

/// The steps on a rows x cols tile `y` (alpha * acc, in the accumulator's type) whose corner is
/// (m0, n0) in the kernel's orientation: converted to the epilogue's type, scaled, `beta_c` (adds
/// beta * C, or returns its argument), the bias, the activation, the residual (read through
/// `residual_at`, C's access with the residual's base), the user's function. Returns the tile in
/// the epilogue's type; the caller converts it to C's type and stores it.
using BetaC = std::function<ir::Value*(ir::Builder&, ir::Value*, const ir::Type&)>;
ir::Value* apply_epilogue(ir::Builder& x, const GemmEpilogue& e, const EpilogueOperands& ops, ir::Value* y,
                          ir::Value* m0, ir::Value* n0, int rows, int cols, bool checked, const BetaC& beta_c,
                          const ir::Builder::Access* residual_at);

}  // namespace coopjit
