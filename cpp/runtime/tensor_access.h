// Running a tensor-access kernel (load_matrix / store_matrix). No LLVM types here.
#pragma once

#include <memory>
#include <vector>

#include "runtime/kernel.h"
#include "spec/tensor_spec.h"

namespace coopjit {

std::shared_ptr<const CompiledKernel> tensor_access_kernel(const TensorAccessSpec& spec);

/// ints: extent, mat strides, then the layout and view fields in build_tensor_access's order.
void run_tensor_access(const CompiledKernel& k, void* buf, void* mat, const std::vector<int64_t>& ints,
                       double clamp_value);

}  // namespace coopjit
