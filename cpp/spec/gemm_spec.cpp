// Validation and printing of GemmSpec.
#include "spec/gemm_spec.h"

#include "core/error.h"

namespace coopjit {

void GemmSpec::validate() const {
  if (dtype != ir::ScalarType::f32 && dtype != ir::ScalarType::f64)
    throw UserTypeError(cat("gemm: unsupported dtype ", ir::name(dtype), " (supported: f32, f64)"));
  if (M < 0 || N < 0 || K < 0 || batch1 < 0 || batch2 < 0)
    throw UserError(cat("gemm: negative size M=", M, " N=", N, " K=", K, " batch=", batch1, "x", batch2));
  if (device != "cpu") throw UserError(cat("gemm: unknown device '", device, "' (available: cpu)"));
}

std::string GemmSpec::str() const {
  return cat("gemm ", ir::name(dtype), " M=", M, " N=", N, " K=", K, " A strides (", sa_r, ", ", sa_c,
             ") B strides (", sb_r, ", ", sb_c, ") C strides (", sc_r, ", ", sc_c, ")",
             batch1 * batch2 != 1 ? cat(" batch ", batch1, "x", batch2) : std::string(),
             accumulate ? " beta!=0" : "", " on ", device);
}

}  // namespace coopjit
