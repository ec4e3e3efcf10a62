// Checks a kernel IR function against the type and shape rules of its operations; a violation
// throws VerifyError naming the operation (quoted with the IR printer), the types and the rule.
#pragma once

#include "ir/ir.h"

namespace coopjit::ir {

void verify(const Function& f);

// Size limits of operations on matrices in registers (verifier.cpp says why); the GPU planner
// refuses tiles past them before any code is generated (check_gpu_tile).
inline constexpr int64_t kMaxMulAdds = int64_t(1) << 18;           // M x N x K of one mul_add (2x: 8-bit operands)
inline constexpr int64_t kMaxRegisterElements = int64_t(1) << 14;  // a matrix an operation computes on (2x: 8-bit)

}  // namespace coopjit::ir
