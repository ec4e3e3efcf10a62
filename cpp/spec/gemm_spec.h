// GemmSpec: what a GEMM call asks for, C = alpha * op(A) @ op(B) + beta * C, with the shapes,
// the element type and the element strides of the operands exactly as the caller passed them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ir/types.h"

namespace coopjit {

namespace ir {
struct Value;
class Builder;
}  // namespace ir

/// A fused epilogue (matmul's bias= / activation= / residual= / scale= / row_scale= / epilogue=
/// / out_dtype=): steps applied to each output tile once, by its owner, just before its one
/// store, in cuBLASLt's and oneDNN's order:
///   y = alpha * acc * scale[n] * row_scale[m] (+ beta * C) + bias;  y = activation(y);
///   y = y + residual[m, n];  y = fn(m, n, y);  C = y converted to C's type.
/// m and n are the caller's row and column (whatever orientation the kernel computes in). The
/// vectors and the residual hold `type`: the float accumulator (f32 / f64), f32 for 8-bit integer
/// products (the W8A8 case: int32 sums scaled into floats).
struct GemmEpilogue {
  bool scale = false;      // a vector of N multiplies column n
  bool row_scale = false;  // a vector of M multiplies row m
  int bias = 0;            // 0: none; 1: a vector of N (per column); 2: a vector of M (per row)
  std::string activation;  // "", relu, gelu, gelu_tanh, silu, sigmoid, tanh
  bool residual = false;   // an M x N matrix (batched like C) added after the activation
  // A user's per-element function (KernelBuilder.per_element's signature) and a key of its IR.
  using ElementFn = std::function<ir::Value*(ir::Builder&, ir::Value* row, ir::Value* col, ir::Value* value)>;
  ElementFn fn;
  std::string fn_key;
  ir::ScalarType type = ir::ScalarType::f32;

  bool any() const { return scale || row_scale || bias || !activation.empty() || residual || bool(fn); }
  /// What changes the code, for the plan's key ("" without an epilogue).
  std::string key() const;
};

/// The epilogue's operands at run time: element pointers, null where a step is absent (the
/// vectors contiguous, the residual with C's element strides).
struct EpilogueArgs {
  const void* scale = nullptr;
  const void* row_scale = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
};


struct GemmSpec {
  ir::ScalarType dtype = ir::ScalarType::f32;  // the accumulator's (compute) type
  // Element types of A, B and C: one float type throughout, or low-precision A and B (f16, bf16,
  // f8_e4m3, f8_e5m2 -> f32; i8/u8 -> i32) with C of the input or the accumulator type.
  ir::ScalarType a_type = ir::ScalarType::f32, b_type = ir::ScalarType::f32, c_type = ir::ScalarType::f32;
  /// Sets a/b/c types and the accumulator type; throws UserTypeError for an unsupported combination.
  void set_types(ir::ScalarType a, ir::ScalarType b, ir::ScalarType c);
  /// With an epilogue C may be any float type (f32, f64, bf16, f16) the epilogue converts to.
  void set_types_with_epilogue(ir::ScalarType a, ir::ScalarType b, ir::ScalarType c);
  int64_t M = 0, N = 0, K = 0;
  // Element strides (may be negative or zero) of op(A) (M x K), op(B) (K x N) and C (M x N).
  int64_t sa_r = 0, sa_c = 0, sb_r = 0, sb_c = 0, sc_r = 0, sc_c = 0;
  // Batched GEMM: batch1 x batch2 independent products; the element strides between them
  // (0 where an operand is broadcast). One launch computes them all.
  int64_t batch1 = 1, batch2 = 1;
  int64_t sa_b1 = 0, sb_b1 = 0, sc_b1 = 0, sa_b2 = 0, sb_b2 = 0, sc_b2 = 0;
  bool accumulate = false;  // beta != 0: C is read and scaled by beta
  std::string device = "cpu";
  GemmEpilogue epilogue;

  /// Throws UserError naming the values if a size is negative or the dtype unsupported.
  void validate() const;
  std::string str() const;
};

/// alpha or beta of an integer product as the integer it must be (a UserError otherwise). Float
/// products pass their scalars as doubles and never convert them: a NaN or huge alpha converted
/// to int64 is undefined behaviour (found by make sanitize).
int64_t integer_scalar(double v, const char* name);

}  // namespace coopjit
