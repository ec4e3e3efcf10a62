// ir::Builder: appends operations to a block of a Function; structured ops take their bodies
// as callbacks, so a recipe reads like the loop nest it builds.
#pragma once

#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace coopjit::ir {

class Builder {
 public:
  explicit Builder(Function& f) : f_(f), block_(&f.body) {}
  Builder(Function& f, Block* b) : f_(f), block_(b) {}

  Function& function() { return f_; }

  // Scalars.
  Value* index(int64_t v, std::string hint = {});
  Value* constant(double v, ScalarType t, std::string hint = {});
  Value* constant_int(int64_t v, ScalarType t, std::string hint = {});  // exact for 64-bit integers
  Value* bin(BinOp op, Value* x, Value* y, std::string hint = {});
  Value* add(Value* x, Value* y, std::string hint = {}) { return bin(BinOp::add, x, y, hint); }
  Value* sub(Value* x, Value* y, std::string hint = {}) { return bin(BinOp::sub, x, y, hint); }
  Value* mul(Value* x, Value* y, std::string hint = {}) { return bin(BinOp::mul, x, y, hint); }
  Value* div(Value* x, Value* y, std::string hint = {}) { return bin(BinOp::div, x, y, hint); }
  Value* rem(Value* x, Value* y, std::string hint = {}) { return bin(BinOp::rem, x, y, hint); }
  Value* min(Value* x, Value* y, std::string hint = {}) { return bin(BinOp::min, x, y, hint); }
  Value* cmp(CmpPred p, Value* x, Value* y, std::string hint = {});
  Value* select(Value* c, Value* x, Value* y, std::string hint = {});
  Value* ptr_offset(Value* ptr, Value* elements, std::string hint = {});
  /// Stream-K flags at device scope: flags[i] = value (i32; 1 when null), a release store; wait
  /// until flags[i] != 0 (acquire; SIMT: the subgroup leaves together), trapping after spin_limit
  /// polls when it is positive.
  Op* flag_set(Value* flags, Value* i, Value* value = nullptr);
  void flag_wait(Value* flags, Value* i, int64_t spin_limit = 0);
  /// ptr[index], unchecked: for decode functions, which the load calls only inside the buffer.
  Value* load_scalar(Value* ptr, Value* index, std::string hint = {});

  /// ptr[index] = value (value of the pointee type): a plain scalar write.
  void store_scalar(Value* ptr, Value* index, Value* value);
  /// HLSL's groupshared T Arr[n]: work-group local memory, one array per work-group.
  Value* groupshared(ScalarType elem, int64_t n, std::string hint = {});
  /// A work-group barrier that orders the work-group's memory accesses (groupshared and buffers).
  void barrier();

  // Structured control flow. The body callback receives a Builder positioned in the body, the
  // induction variable and the loop-carried values, and returns the values to yield.
  using ForBody = std::function<std::vector<Value*>(Builder&, Value* iv, const std::vector<Value*>& iters)>;
  std::vector<Value*> for_(Value* lb, Value* ub, Value* step, const std::vector<Value*>& inits,
                           const ForBody& body, std::string iv_hint = "i");
  using IfBody = std::function<std::vector<Value*>(Builder&)>;
  std::vector<Value*> if_(Value* cond, const std::vector<Type>& result_types, const IfBody& then_body,
                          const IfBody& else_body);

  // Cooperative matrices. Loads and stores address element (i, j) of the matrix at
  // ptr[(row + i) * stride_row + (col + j) * stride_col] within a rows x cols tensor; when
  // `checked`, elements outside it read zero and stores to them are dropped.
  // vnni > 1: the memory is VNNI-packed along K (columns of a matrix_a, rows of a matrix_b): K
  // index k = vnni * q + v of element (x, k) lives at ptr[q * stride_K + x * vnni * stride_X + v],
  // the vnni consecutive K elements of one row (a) or column (b) side by side, as the dot-product
  // instructions (AVX512-BF16, AVX512-VNNI, AMX, DPAS) read them. Unchecked, stride_X == 1.
  struct Access {
    Value* ptr; Value* row; Value* col; Value* stride_row; Value* stride_col; Value* rows; Value* cols;
    int vnni = 1;
  };
  Value* load(Type matrix, const Access& a, bool checked, std::string hint = {});
  Op* store(Value* matrix, const Access& a, bool checked);  // (the store op: for attributes)
  Value* splat(Type matrix, Value* scalar, std::string hint = {});
  Value* mul_add(Value* a, Value* b, Value* c, std::string hint = {});
  Value* scale(Value* m, Value* scalar, std::string hint = {});
  Value* mat_bin(BinOp op, Value* x, Value* y, std::string hint = {});

  // Tensor addressing. A layout holds, per dimension (0 outermost), the block size, the
  // dimension, the stride, the offset and the span; a view its own dimensions and strides (when
  // has_dims), a permutation and a clip region (row offset, row span, col offset, col span).
  struct LayoutFields {
    std::vector<Value*> block, dim, stride, offset, span;
    Value* clamp_value;  // f64
  };
  Value* tensor_layout(ClampMode clamp, const LayoutFields& f, std::string hint = {});
  Value* tensor_view(int rank, const std::array<int8_t, 5>& perm, const std::vector<Value*>& dims,
                     const std::vector<Value*>& strides, const std::array<Value*, 4>& clip, std::string hint = {});
  /// Loads through a layout (and view, may be null) from ptr[0, extent); elements the load skips
  /// keep object's values.
  Value* load_tensor(Value* ptr, Value* object, Value* layout, Value* view, Value* extent, std::string hint = {});
  /// The same with a decode function (SPV_NV_cooperative_matrix2 DecodeFunc): instead of reading
  /// ptr[index], each element is what `decode` computes from index (the element index the
  /// layout gives), blockCoord and coordInBlock.
  using DecodeBody = std::function<Value*(Builder&, Value* index, const std::vector<Value*>& block_coord,
                                          const std::vector<Value*>& coord_in_block)>;
  Value* load_tensor(Value* ptr, Value* object, Value* layout, Value* view, Value* extent, const DecodeBody& decode,
                     std::string hint = {});
  void store_tensor(Value* matrix, Value* ptr, Value* layout, Value* view, Value* extent);

  // Scalar math.
  Value* unary(UnOp op, Value* x, std::string hint = {});
  Value* convert(Value* x, ScalarType to, std::string hint = {});

  // The operation set of SPV_NV_cooperative_matrix2 and HLSL 0035.
  using Combine = std::function<Value*(Builder&, Value* x, Value* y)>;
  Value* reduce(Value* m, ReduceMode mode, Type result, BinOp combine, std::string hint = {});
  Value* reduce(Value* m, ReduceMode mode, Type result, const Combine& combine, std::string hint = {});
  using PerElement = std::function<Value*(Builder&, Value* row, Value* col, Value* value,
                                          const std::vector<Value*>& extras)>;
  Value* per_element(Value* m, const std::vector<Value*>& extras, const PerElement& body, std::string hint = {});
  /// Component type and/or use change (SPV convert); cast=true for HLSL Matrix::Cast.
  Value* convert_matrix(Value* m, Type result, bool cast = false, std::string hint = {});
  Value* transpose(Value* m, std::string hint = {});
  Value* length(Value* m, std::string hint = {});
  Value* get(Value* m, Value* i, std::string hint = {});
  Value* set(Value* m, Value* i, Value* v, std::string hint = {});
  std::pair<Value*, Value*> get_coordinate(Value* m, Value* i);
  Value* sum_accumulate(Value* a, Value* b, Value* c, std::string hint = {});
  Value* outer_product(Value* va, Value* vb, Type result, std::string hint = {});
  void accumulate(Value* m, const Access& a);
  Value* vector_multiply(Value* v, Value* bm, Value* bias, Type result, std::string hint = {});
  Value* vector_load(Type vec, Value* ptr, Value* offset, Value* stride, std::string hint = {});
  void vector_store(Value* v, Value* ptr, Value* offset, Value* stride);

  /// A work-item id (SIMT targets): lane, subgroup, subgroups; group / groups along `dim`.
  Value* work_id(WorkId w, int dim = 0, std::string hint = {});
  /// The core's time-stamp counter (debugging; the SIMD lowering only).
  Value* cycles(std::string hint = {});
  /// A hint: ptr[index]'s line will be read (or written), into the cache level of `locality` (3: L1).
  void prefetch(Value* ptr, Value* index, bool write, int locality = 3);

  /// Appends an operation with the given operands and result types; returns it.
  Op* append(OpKind kind, std::vector<Value*> operands, const std::vector<Type>& results,
             std::vector<std::string> hints = {});

  /// Appends copies of the operations of `src` (of another function, or this one), regions and
  /// all. `map` takes each value `src` uses from outside it to the value the copy uses; the
  /// copies' results are added to it.
  void clone(const Block& src, std::map<const Value*, Value*>& map);

 private:
  void yield(const std::vector<Value*>& values);
  Function& f_;
  Block* block_;
};

}  // namespace coopjit::ir
