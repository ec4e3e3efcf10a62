// What a reduction op (sum, prod, min, max) means in the kernel IR: its combine and its identity.
// Shared by the CPU and the SPIR-V reduction recipes.
#pragma once

#include <string>

#include "ir/builder.h"
#include "spec/reduce_spec.h"

namespace coopjit {

/// The element-wise combine of `op`: add, mul, min, max.
ir::BinOp reduce_combine(const std::string& op);
/// The identity of `op` in type t, as a constant: 0, 1, +inf / the type's maximum (min),
/// -inf / the type's minimum (max).
ir::Value* reduce_identity(ir::Builder& b, const std::string& op, ir::ScalarType t);

/// The accumulation pass of the row and column reductions (CPU and SPIR-V recipes alike): an
/// R x CW accumulator (op)= the tiles of X along a row of tiles (row_form) or a column of tiles
/// at `fixed`, then the tail tile, its elements past the edge replaced by the identity.
struct ReduceTilePass {
  const ReduceSpec& s;
  ir::Value *X, *rows, *cols, *sx_r, *sx_c;  // X and its shape and element strides
  ir::Value *TR, *TC, *zero, *id;            // tile rows and columns as index values, 0, identity
  int R, CW;                                 // tile rows and columns
  ir::BinOp comb;
  int prefetch = 0;                          // row form: the main tiles' lines this many bytes on to L1
  int sum_block = 0, sum_levels = 0;         // row form, float sums: ReducePlan's levels of partial sums

  ir::Type in_t() const { return ir::Type::matrix(s.in, R, CW, ir::Use::acc, ir::Scope::subgroup); }
  ir::Type acc_t() const { return ir::Type::matrix(s.acc, R, CW, ir::Use::acc, ir::Scope::subgroup); }
  /// A tile in the input type, widened to the accumulator type.
  ir::Value* widen(ir::Builder& x, ir::Value* m) const { return s.in == s.acc ? m : x.convert_matrix(m, acc_t()); }
  /// `checked` when the tiles cross the other dimension's edge. `start` (row form, a runtime
  /// index below the row's length, or null for 0): the full tiles start there (a 64-byte
  /// boundary of the row), the elements before it taken from one masked tile at column 0.
  /// `past_end` (row form, unchecked tiles; an i1 or null): when true, every row of the tile is
  /// followed by memory that may be read (a next row within a page), and the tail tile is read
  /// whole, its elements past the row's end replaced by the identity, instead of masked.
  ir::Value* accumulate(ir::Builder& x, bool row_form, ir::Value* fixed, bool checked, ir::Value* start = nullptr,
                        ir::Value* past_end = nullptr) const;
};

}  // namespace coopjit
