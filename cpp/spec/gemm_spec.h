// GemmSpec: what a GEMM call asks for, C = alpha * op(A) @ op(B) + beta * C, with the shapes,
// the element type and the element strides of the operands exactly as the caller passed them.
#pragma once

#include <cstdint>
#include <string>

#include "ir/types.h"

namespace coopjit {

struct GemmSpec {
  ir::ScalarType dtype = ir::ScalarType::f32;  // the accumulator's (compute) type
  // Element types of A, B and C: one float type throughout, or low-precision A and B (f16, bf16,
  // f8_e4m3, f8_e5m2 -> f32; i8/u8 -> i32) with C of the input or the accumulator type.
  ir::ScalarType a_type = ir::ScalarType::f32, b_type = ir::ScalarType::f32, c_type = ir::ScalarType::f32;
  /// Sets a/b/c types and the accumulator type; throws UserTypeError for an unsupported combination.
  void set_types(ir::ScalarType a, ir::ScalarType b, ir::ScalarType c);
  int64_t M = 0, N = 0, K = 0;
  // Element strides (may be negative or zero) of op(A) (M x K), op(B) (K x N) and C (M x N).
  int64_t sa_r = 0, sa_c = 0, sb_r = 0, sb_c = 0, sc_r = 0, sc_c = 0;
  // Batched GEMM: batch1 x batch2 independent products; the element strides between them
  // (0 where an operand is broadcast). One launch computes them all.
  int64_t batch1 = 1, batch2 = 1;
  int64_t sa_b1 = 0, sb_b1 = 0, sc_b1 = 0, sa_b2 = 0, sb_b2 = 0, sc_b2 = 0;
  bool accumulate = false;  // beta != 0: C is read and scaled by beta
  std::string device = "cpu";

  /// Throws UserError naming the values if a size is negative or the dtype unsupported.
  void validate() const;
  std::string str() const;
};

/// alpha or beta of an integer product as the integer it must be (a UserError otherwise). Float
/// products pass their scalars as doubles and never convert them: a NaN or huge alpha converted
/// to int64 is undefined behaviour (found by make sanitize).
int64_t integer_scalar(double v, const char* name);

}  // namespace coopjit
