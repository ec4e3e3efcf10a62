// The one text form of the kernel IR. Tests compare against it, debug dumps print it and the
// verifier quotes it in its messages.
#pragma once

#include <string>

#include "ir/ir.h"

namespace coopjit::ir {

/// The whole function as text.
std::string print(const Function& f);
/// One operation (regions elided as "{...}"), with the value names it has in print(f).
std::string print_op(const Function& f, const Op& op);

}  // namespace coopjit::ir
