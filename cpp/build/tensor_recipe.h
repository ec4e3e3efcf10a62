// The tensor-access recipe: a kernel that moves one coopmatrix between a plain strided matrix
// and a buffer addressed through a tensor layout (and view): load_tensor or store_tensor.
#pragma once

#include <memory>
#include <string>

#include "ir/ir.h"
#include "spec/tensor_spec.h"

namespace coopjit {

/// Parameters, in order: buf, mat (pointers); extent, mat_row_stride, mat_col_stride; the
/// layout's block[r], dims[r], strides[r], offsets[r], spans[r]; clamp_value (f64); the view's
/// dims[v] and strides[v] (when it has dims) and clip[4] (when there is a view). With subgroups > 1
/// (devices) the matrix is workgroup-scope, spread over that many subgroups of simd_width.
std::unique_ptr<ir::Function> build_tensor_access(const TensorAccessSpec& spec, int simd_width,
                                                  const std::string& name, int subgroups = 1);

}  // namespace coopjit
