// fp8 <-> f32 conversions as LLVM IR, on scalars or vectors, shared by the SIMD (CPU) and SIMT
// (SPIR-V) lowerings. fp8 bits -> f32: e5m2 is the top byte of an IEEE half; e4m3fn has bias 7,
// no infinities and S.1111.111 as NaN. f32 -> fp8 bits, rounding to nearest even: e4m3fn
// overflows (and inf) to NaN 0x7F like ml_dtypes' float8_e4m3fn; e5m2 overflows to infinity 0x7C,
// NaN is 0x7E.
#pragma once

#include <functional>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>

#include "ir/types.h"

namespace coopjit {

/// Rounds float values to the nearest integer, ties to even (an intrinsic on the CPU, an
/// OpenCL builtin in SPIR-V).
using RoundEven = std::function<llvm::Value*(llvm::Value*)>;

/// c, or c splat to the lane count of `like` when `like` is a vector.
inline llvm::Value* splat_like(llvm::IRBuilder<>&, llvm::Value* like, llvm::Constant* c) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like->getType()))
    return llvm::ConstantVector::getSplat(vt->getElementCount(), c);
  return c;
}
/// elem, or a vector of elem with the lane count of `like`.
inline llvm::Type* like_type(llvm::Value* like, llvm::Type* elem) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like->getType())) return llvm::FixedVectorType::get(elem, vt->getNumElements());
  return elem;
}

llvm::Value* fp8_to_f32(llvm::IRBuilder<>& b, llvm::Value* bits, ir::ScalarType from);
llvm::Value* f32_to_fp8(llvm::IRBuilder<>& b, llvm::Value* x, ir::ScalarType to, const RoundEven& round_even);

}  // namespace coopjit
