// The kernel IR: values, operations with nested regions (for, if), blocks and functions.
// A program is built with ir::Builder (builder.h), printed by ir::print (printer.h), checked by
// ir::verify (verifier.h) and lowered to LLVM IR by the lowerings in cpp/lower/.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ir/types.h"

namespace coopjit::ir {

struct Op;
struct Block;

/// An SSA value: a function parameter, a block argument or an operation result.
struct Value {
  int id = 0;
  Type type;
  std::string hint;  // preferred printed name (without %), may be empty
  Op* def = nullptr; // defining operation, null for parameters and block arguments
};

enum class OpKind : uint8_t {
  // scalar arithmetic on index, integer and float scalars
  constant,   // attr value (int or float) -> scalar
  binary,     // sub = BinOp; (x, y) -> same type; attr recip_approx on an f32 div: y is in [1, inf] (or NaN),
              // a target may take x times its approximate reciprocal of y (NVPTX rcp.approx, 1 ulp)
  cmp,        // sub = CmpPred; (x, y) -> i1
  select,     // (i1, x, y) -> type of x
  unary,      // sub = UnOp; (x) -> same type; attr erf_absolute on an f32 erf: the caller adds it to 1
              // (GELU), a target may keep only the absolute error (NVPTX: 1 - erfc, no series near 0)
  convert,    // (x) -> the result's scalar type (round to nearest even, saturating to integers)
  load,       // (ptr, index) -> element: a scalar read of ptr[index] (decode functions)
  ptr_offset, // (ptr, index) -> ptr + index elements
  flag_set,   // (ptr<i32>, index[, value i32]): ptr[index] = value (1 when absent), a release store at
              // device scope (Stream-K partial tile ready; 0 re-arms the flag)
  flag_wait,  // (ptr<i32>, index): spin until ptr[index] != 0, an acquire load at device scope; on SIMT
              // targets the subgroup leaves together; attr spin_limit (polls, 0 none): past it, trap
  // structured control flow
  for_,       // (lb, ub, step, init...) region{iv, iter...; yield next...} -> iter results
  if_,        // (cond) region then, region else (each ends in yield) -> results
  yield,      // terminator of a region: (values...)
  // cooperative matrices
  mat_load,     // (ptr, row, col, stride_row, stride_col, rows, cols[, far_bytes: attr prefetch_far]) attr checked -> matrix
  mat_store,    // (matrix, ptr, row, col, stride_row, stride_col, rows, cols) attr checked
  mat_splat,    // (scalar) -> matrix
  mat_mul_add,  // (a MxK, b KxN, c MxN) -> MxN acc
  mat_scale,    // (matrix, scalar) -> matrix: every element times the scalar
  mat_binary,   // sub = BinOp (add, sub, mul, div, min, max); (matrix, matrix) -> matrix
  mat_reduce,      // sub = ReduceMode; attr combine (add, mul, min, max) or a region (x, y) -> z
  mat_per_element, // (matrix, extra matrices and scalars...) region (row, col, value, extras...) -> value
  mat_convert,     // (matrix) -> matrix of another component type and/or use; sub 1: HLSL Cast
  mat_transpose,   // (acc MxN) -> b NxM
  mat_length,      // (matrix) -> index: elements this invocation holds
  mat_get,         // (matrix, index) -> element
  mat_set,         // (matrix, index, element) -> matrix
  mat_coord,       // (matrix, index) -> (row, col)
  mat_sum_accumulate,  // (a, b, acc) -> acc + a + b (one shape)
  mat_outer_product,   // (vector<M>, vector<N>) -> acc M x N
  mat_accumulate,  // (acc, ptr, row, col, stride_row, stride_col, rows, cols): atomic add into memory
  vec_matrix_mul,  // (vector<M>, b M x K thread scope[, bias vector<K>]) -> vector<K>
  vec_load,        // (ptr, offset, stride) -> vector<T, n>
  vec_store,       // (vector, ptr, offset, stride)
  // tensor addressing (SPV_NV_cooperative_matrix2)
  tensor_layout,     // (block[r], dim[r], stride[r], offset[r], span[r], clamp_value f64) -> tensorlayout
  tensor_view,       // (dims[r], strides[r] when it has dims, clip row off, row span, col off, col span)
  mat_load_tensor,   // (ptr, object, layout, extent[, view]) -> matrix like object; an optional
                     // region, the decode function, gets (index, blockCoord[r], coordInBlock[r])
                     // and yields the element
  mat_store_tensor,  // (matrix, ptr, layout, extent[, view])
  // work-group local memory (HLSL groupshared)
  shared_alloc,      // () -> groupshared<T, n>: an array of n T, one per work-group, uninitialized
  store,             // (ptr, index, value): ptr[index] = value, a scalar write
  barrier,           // a work-group barrier ordering the work-group's memory accesses (HLSL
                     // GroupMemoryBarrierWithGroupSync)
  // work-item identity (SIMT targets; the SIMD lowering of one worker per call has none)
  work_id,           // sub = WorkId; attr dim for group / groups -> index
  // debugging (CPU plans only)
  cycles,            // () -> index: the core's time-stamp counter (rdtsc); the SIMD lowering only (plan cycles)
  prefetch,          // (ptr, index): a hint that ptr[index]'s line will be used; attr write (0 / 1: to be written),
                     // locality (0-3, as llvm.prefetch's); never faults; SIMT lowerings drop it
};

/// Which id a work_id op reads: the invocation's lane in its subgroup (HLSL WaveGetLaneIndex),
/// its subgroup in the work-group, the subgroups per work-group, the work-group id along a
/// dimension, the number of work-groups along it.
enum class WorkId : uint8_t { lane, subgroup, subgroups, group, groups };

enum class BinOp : uint8_t { add, sub, mul, div, rem, min, max, and_, or_ };
enum class UnOp : uint8_t { neg, abs, exp, log, tanh, sqrt, erf };
/// SPV_NV_cooperative_matrix2 Cooperative Matrix Reduce Mode: Row, Column, both, 2x2.
enum class ReduceMode : uint8_t { row = 1, column = 2, both = 3, quad = 4 };
enum class CmpPred : uint8_t { lt, le, gt, ge, eq, ne };

const char* name(BinOp b);
const char* name(CmpPred p);
const char* name(UnOp u);
const char* name(ReduceMode r);
const char* name(WorkId w);
/// The printed mnemonic of an operation: "add", "for", "coopmatrix.load", ...
std::string mnemonic(const Op& op);

using Attr = std::variant<int64_t, double, std::string>;

struct Block {
  std::vector<Value*> args;
  std::vector<std::unique_ptr<Op>> ops;
  Op* parent = nullptr;  // the op owning this region; null for a function body
};

struct Op {
  OpKind kind;
  int sub = 0;  // BinOp or CmpPred where the kind has one
  std::vector<Value*> operands;
  std::vector<Value*> results;
  std::vector<std::unique_ptr<Block>> regions;
  std::map<std::string, Attr> attrs;

  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  int64_t int_attr(const std::string& k, int64_t dflt = 0) const;
  double float_attr(const std::string& k) const;
  Value* result() const { return results.at(0); }
};

/// A kernel: parameters, attributes (for example subgroup_size) and a body block.
struct Function {
  std::string name;
  std::vector<Value*> params;
  std::map<std::string, Attr> attrs;
  Block body;

  /// Creates a value owned by this function.
  Value* new_value(Type t, std::string hint = {});
  Value* add_param(Type t, std::string name);

 private:
  std::vector<std::unique_ptr<Value>> values_;
};

}  // namespace coopjit::ir
