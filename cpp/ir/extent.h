// The memory a kernel can touch: for each pointer parameter, the range of element offsets its
// loads and stores reach (and whether it is written), derived from the IR by interval arithmetic
// over the index values: positions, strides, matrix shapes, checked accesses' bounds, loop ranges,
// work-item ids. A kernel's callers compare it with the arrays they are given, once per call
// (no per-element cost).
//
// An access is derivable when its extent is a function of constants, scalar parameters, loop
// counters and work-item ids. An unchecked access at a position that depends on data (an element
// of a matrix, a loop-carried index, a float) is not; a checked access is, whatever its position,
// when its bounds are (only elements inside the bounds are touched). analyze() refuses a kernel
// with an access that is not derivable, naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace coopjit::ir {

/// The elements one pointer parameter's accesses reach: offsets [lo, hi] from the pointer.
struct ParamExtent {
  bool read = false, written = false;  // some access reads / writes it
  bool touched = false;                // some element is reached (false: no access, or every one empty)
  bool bounded = true;                 // [lo, hi] is known (false: see `why`)
  int64_t lo = 0, hi = -1;
  int64_t row_stride = 0;              // the row stride every 2-D access shares (0: none or mixed)
  std::string why;                     // the access that could not be bounded
};

/// What the extents depend on at a call: the scalar arguments (integer and index parameters, in
/// parameter order; entries for other parameters are ignored) and the launch shape.
struct ExtentEnv {
  const std::vector<int64_t>* ints = nullptr;  // null: unknown (compile time)
  int64_t groups = -1;                         // work-groups along dimension 0; -1: unknown
  int64_t subgroup_size = 1, work_group_size = 1;
};

/// The extents of `f`'s pointer parameters (indexed like f.params; non-pointers stay empty),
/// looking only at the first `top_ops` operations of the body (all when negative). Throws
/// UserError naming an access whose extent cannot be derived from the IR, and a loop that may
/// run with a step below 1 (it would never end: loops run while iv < ub). `call_dependent`, when
/// given, is set when a loop's step is known only at the call (then evaluate again per call).
std::vector<ParamExtent> analyze_extents(const Function& f, const ExtentEnv& env, int64_t top_ops = -1,
                                         bool* call_dependent = nullptr);

/// True when the extents depend on the scalar arguments or the launch shape (then they are
/// evaluated at each call), false when analyze_extents at compile time gave them all.
bool extents_depend_on_call(const std::vector<ParamExtent>& compile_time);

}  // namespace coopjit::ir
