// The address calculation of SPV_NV_cooperative_matrix2 loads and stores through a tensor layout
// and an optional tensor view (matrixCoordToTensorElement[WithView]), emitted as LLVM IR on
// vectors of lanes, one matrix element per lane (the SIMD lowering), or on scalars, one element
// per work-item (lanes == 0: the SIMT lowering). Both lowerings take a layout's and a view's
// runtime fields from the same flat list (layout_parts / view_parts).
#pragma once

#include <array>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "ir/types.h"

namespace coopjit {

/// The runtime fields of a tensor layout (scalar i64 values, clamp value as double).
struct LayoutParts {
  int rank = 0;
  ir::ClampMode clamp = ir::ClampMode::undefined;
  std::array<llvm::Value*, 5> block{}, dim{}, stride{}, offset{}, span{};
  llvm::Value* clamp_value = nullptr;
};

/// The runtime fields of a tensor view; dims/strides only when has_dims.
struct ViewParts {
  int rank = 0;
  bool has_dims = false;
  std::array<int8_t, 5> perm{};
  std::array<llvm::Value*, 5> dims{}, strides{};
  std::array<llvm::Value*, 4> clip{};  // row offset, row span, col offset, col span
};

/// The fields of a tensor layout / view value of type t from its flat list of runtime values
/// (block[r], dim[r], stride[r], offset[r], span[r], clamp value; view: dims[v], strides[v] when
/// it has dims, then clip[4]), the operands of coopmatrix.tensor_layout / tensor_view in order.
LayoutParts layout_parts(const ir::Type& t, const std::vector<llvm::Value*>& p);
ViewParts view_parts(const ir::Type& t, const std::vector<llvm::Value*>& p);
/// How many runtime values a tensor layout / view of type t has.
size_t tensor_parts(const ir::Type& t);

/// Per lane (vectors of S lanes; scalars when lanes == 0).
struct TensorElement {
  llvm::Value* index;    // <S x i64>: element index into the buffer
  llvm::Value* in_clip;  // <S x i1>: false where the view's clip skips the element
  llvm::Value* discard;  // <S x i1>: out of range under Constant (load: clamp value; store: dropped)
  std::vector<llvm::Value*> block_coord, coord_in_block;  // for the decode hook
};

/// Element (row[l], col[l]) of a matrix with N columns, for each lane l. `store` selects the
/// store rule (every clamp mode but Undefined discards out-of-range elements). row and col are
/// <lanes x i64>, or i64 when lanes == 0.
TensorElement tensor_element(llvm::IRBuilder<>& b, int lanes, const LayoutParts& t, const ViewParts* v,
                             llvm::Value* row, llvm::Value* col, int64_t N, bool store);

}  // namespace coopjit
