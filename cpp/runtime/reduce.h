// Reductions on the CPU: plan, fetch (or build) the code, run on the worker pool. No LLVM here.
#pragma once

#include "spec/reduce_spec.h"

namespace coopjit {

/// Runs the reduction `spec` from x (element [0, 0] of X) into y.
void run_reduce(const ReduceSpec& spec, const void* x, void* y, int threads_override = 0);

/// The kernel IR of the reduction `spec` (for tests and kernel.source).
std::string reduce_ir(const ReduceSpec& spec);

}  // namespace coopjit
