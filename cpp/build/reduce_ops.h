// What a reduction op (sum, prod, min, max) means in the kernel IR: its combine and its identity.
// Shared by the CPU and the SPIR-V reduction recipes.
#pragma once

#include <string>

#include "ir/builder.h"

namespace coopjit {

/// The element-wise combine of `op`: add, mul, min, max.
ir::BinOp reduce_combine(const std::string& op);
/// The identity of `op` in type t, as a constant: 0, 1, +inf / the type's maximum (min),
/// -inf / the type's minimum (max).
ir::Value* reduce_identity(ir::Builder& b, const std::string& op, ir::ScalarType t);

}  // namespace coopjit
