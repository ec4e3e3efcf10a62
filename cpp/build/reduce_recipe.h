// The reduction recipe: a worker's share of the row, column or 2x2 tiles of X, accumulated in
// coopmatrix tiles with element-wise combines, finished by coopmatrix.reduce and stored to Y.
#pragma once

#include <memory>
#include <string>

#include "ir/ir.h"
#include "spec/reduce_spec.h"

namespace coopjit {

/// Parameters: X, Y (pointers); rows, cols, sx_r, sx_c, sy_r, sy_c, worker, workers (index).
std::unique_ptr<ir::Function> build_reduce(const ReduceSpec& spec, const ReducePlan& plan, const std::string& name);

}  // namespace coopjit
