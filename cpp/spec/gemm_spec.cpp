// Validation and printing of GemmSpec.
#include "spec/gemm_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace coopjit {

void GemmSpec::set_types(ir::ScalarType a, ir::ScalarType b, ir::ScalarType c) {
  using ir::ScalarType;
  auto int8 = [](ScalarType t) { return t == ScalarType::i8 || t == ScalarType::u8; };
  auto low = [](ScalarType t) {
    return t == ScalarType::f16 || t == ScalarType::bf16 || t == ScalarType::f8_e4m3 || t == ScalarType::f8_e5m2;
  };
  const char* supported =
      " (supported: f32 x f32, f64 x f64, f16/bf16/f8_e4m3/f8_e5m2 pairs accumulating in f32, i8/u8 pairs in i32)";
  if (int8(a) && int8(b)) dtype = ScalarType::i32;
  else if (a == b && (a == ScalarType::f32 || a == ScalarType::f64)) dtype = a;
  else if (a == b && low(a)) dtype = ScalarType::f32;
  else throw UserTypeError(cat("gemm: unsupported operand types ", ir::name(a), " x ", ir::name(b), supported));
  if (c != dtype && !(c == a && low(a)))
    throw UserTypeError(cat("gemm: the output type ", ir::name(c), " does not go with ", ir::name(a), " x ", ir::name(b),
                            " (use ", ir::name(dtype), low(a) ? std::string(" or ") + std::string(ir::name(a)) : "", ")"));
  a_type = a;
  b_type = b;
  c_type = c;
}

void GemmSpec::set_types_with_epilogue(ir::ScalarType a, ir::ScalarType b, ir::ScalarType c) {
  using ir::ScalarType;
  GemmSpec probe;
  probe.set_types(a, b, (a == ScalarType::i8 || a == ScalarType::u8) ? ScalarType::i32 : a == ScalarType::f64 ? a : ScalarType::f32);
  const bool ok = c == ScalarType::f32 || c == ScalarType::bf16 || c == ScalarType::f16 ||
                  (c == ScalarType::f64 && probe.dtype == ScalarType::f64);
  if (!ok)
    throw UserTypeError(cat("gemm: an epilogue writes a float output; ", ir::name(c), " does not go with ", ir::name(a),
                            " x ", ir::name(b), " (use float32, bfloat16 or float16",
                            probe.dtype == ScalarType::f64 ? ", or float64" : "", ")"));
  dtype = probe.dtype;
  a_type = a;
  b_type = b;
  c_type = c;
  epilogue.type = dtype == ScalarType::f64 ? ScalarType::f64 : ScalarType::f32;
}

std::string GemmEpilogue::key() const {
  if (!any()) return {};
  return cat(".epi_", ir::name(type), scale ? "_s" : "", row_scale ? "_rs" : "", bias == 1 ? "_bn" : bias == 2 ? "_bm" : "",
             activation.empty() ? "" : "_" + activation, residual ? "_res" : "", fn ? "_fn" + fn_key : "");
}

void GemmSpec::validate() const {
  if (M < 0 || N < 0 || K < 0 || batch1 < 0 || batch2 < 0)
    throw UserError(cat("gemm: negative size M=", M, " N=", N, " K=", K, " batch=", batch1, "x", batch2));
  if (device != "cpu") throw UserError(cat("gemm: unknown device '", device, "' (available: cpu)"));
  // Sizes no memory holds: the planner's tile counts and byte offsets are int64 products of
  // these, which overflowed (undefined behaviour) for compile_gemm(2**40, 2**40, 2**40) or
  // (2**62 - 1, ...) (session 20's audit, under UBSan). An operand of at most 2^50 elements and
  // strides that span at most 2^57 bytes (x86-64's largest address space) keep them in range.
  const int64_t batch = batch1 * batch2;
  auto elements = [&](const char* name, int64_t rows, int64_t cols) {
    int64_t n = 0;
    if (__builtin_mul_overflow(batch, rows, &n) || __builtin_mul_overflow(n, cols, &n) || n > (int64_t(1) << 50))
      throw UserError(cat("gemm: ", name, " of ", batch != 1 ? cat(batch, " x ") : std::string(), rows, " x ", cols,
                          " elements is more than 2^50 (M=", M, " N=", N, " K=", K, ")"));
  };
  elements("A", M, K);
  elements("B", K, N);
  elements("C", M, N);
  auto span = [&](const char* name, int64_t stride, int64_t extent) {
    int64_t bytes = 0;
    const int64_t mag = stride < 0 ? (stride == INT64_MIN ? INT64_MAX : -stride) : stride;
    if (__builtin_mul_overflow(mag, std::max<int64_t>(extent, 1), &bytes) || __builtin_mul_overflow(bytes, 8, &bytes) ||
        bytes > (int64_t(1) << 57))
      throw UserError(
          cat("gemm: ", name, " stride ", stride, " over ", extent, " elements spans more than 2^57 bytes"));
  };
  span("A's row", sa_r, M); span("A's column", sa_c, K);
  span("B's row", sb_r, K); span("B's column", sb_c, N);
  span("C's row", sc_r, M); span("C's column", sc_c, N);
  span("A's batch", sa_b1, batch1); span("B's batch", sb_b1, batch1); span("C's batch", sc_b1, batch1);
  span("A's batch", sa_b2, batch2); span("B's batch", sb_b2, batch2); span("C's batch", sc_b2, batch2);
}

std::string GemmSpec::str() const {
  return cat("gemm ", ir::name(a_type), " x ", ir::name(b_type), " -> ", ir::name(c_type), " (acc ", ir::name(dtype),
             ") M=", M, " N=", N, " K=", K, " A strides (", sa_r, ", ", sa_c,
             ") B strides (", sb_r, ", ", sb_c, ") C strides (", sc_r, ", ", sc_c, ")",
             batch1 * batch2 != 1 ? cat(" batch ", batch1, "x", batch2) : std::string(),
             accumulate ? " beta!=0" : "", " on ", device);
}

int64_t integer_scalar(double v, const char* name) {
  // The doubles exactly representable and inside int64's range: [-2^63, 2^63).
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0) || v != std::trunc(v))
    throw UserError(cat(name, "=", v, " must be an integer (within the int64 range) for an integer product"));
  return static_cast<int64_t>(v);
}

}  // namespace coopjit
