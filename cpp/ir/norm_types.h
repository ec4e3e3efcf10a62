// HLSL 0035's SNorm / UNorm float components (SNormF16 .. UNormF64), lowered to their float type:
// every operation that produces a matrix of such a type is followed by a clamp of its elements into
// [-1, 1] (SNorm) or [0, 1] (UNorm), NaN to 0, so the lowerings never see the norm types.
#pragma once

#include <memory>

#include "ir/ir.h"

namespace coopjit::ir {

/// A copy of `f` with its SNorm / UNorm matrices as plain float matrices, clamped where produced;
/// null when `f` has none (use `f` as it is). UserError for a norm matrix at thread scope (the
/// clamp is a per-element operation, which thread-scope matrices do not have).
std::unique_ptr<Function> lower_norm_types(const Function& f);

}  // namespace coopjit::ir
