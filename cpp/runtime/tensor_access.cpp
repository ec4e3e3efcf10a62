// Tensor-access kernels on the CPU (tensor_access.h).
#include "runtime/tensor_access.h"

#include "build/tensor_recipe.h"
#include "core/error.h"
#include "target/cpu_info.h"

namespace coopjit {

std::shared_ptr<const CompiledKernel> tensor_access_kernel(const TensorAccessSpec& spec) {
  spec.validate();
  const int simd = host_cpu().vector_bytes / ir::size_in_bytes(spec.dtype);
  return cached_kernel(spec.key() + cat(".s", simd), [&](const std::string& symbol) {
    return build_tensor_access(spec, simd, symbol);
  });
}

void run_tensor_access(const CompiledKernel& k, void* buf, void* mat, const std::vector<int64_t>& ints,
                       double clamp_value) {
  void* ptrs[2] = {buf, mat};
  k.entry(ptrs, ints.data(), &clamp_value);
}

}  // namespace coopjit
