// Checks a kernel IR function against the type and shape rules of its operations; a violation
// throws VerifyError naming the operation (quoted with the IR printer), the types and the rule.
#pragma once

#include "ir/ir.h"

namespace coopjit::ir {

void verify(const Function& f);

}  // namespace coopjit::ir
