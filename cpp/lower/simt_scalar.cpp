// The SIMT lowering of scalar arithmetic: binary operations, comparisons, math functions and
// conversions between component types. bf16 and the fp8 formats are held as their bits: bf16
// converts through SPV_INTEL_bfloat16_conversion, fp8 (e4m3fn, e5m2) by bit manipulation with
// round to nearest even and the formats' saturation and NaN rules (as the SIMD lowering does).
#include <llvm/IR/Intrinsics.h>

#include "lower/ir_to_llvm.h"
#include "lower/simt_lowering.h"

#include "lower/fp8_convert.h"

namespace coopjit {

llvm::Value* SimtLowering::scalar_bin(BinOp op, ScalarType t, llvm::Value* x, llvm::Value* y) {
  if (t == ScalarType::bf16 || t == ScalarType::f8_e4m3 || t == ScalarType::f8_e5m2) {
    // Held as bits: compute in f32 and round back.
    llvm::Value* r = scalar_bin(op, ScalarType::f32, convert_value(x, t, ScalarType::f32), convert_value(y, t, ScalarType::f32));
    return convert_value(r, ScalarType::f32, t);
  }
  if (llvm::Value* r = emit_binary(b_, op, t, x, y)) return r;
  // Float min / max, NaN-propagating, like llvm.minimum / numpy.minimum.
  llvm::Value* pick = op == BinOp::min ? b_.CreateFCmpOLT(x, y) : b_.CreateFCmpOGT(x, y);
  llvm::Value* r = b_.CreateSelect(pick, x, y);
  r = b_.CreateSelect(b_.CreateFCmpUNO(y, y), y, r);
  return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, r);
}

llvm::Value* SimtLowering::scalar_cmp(CmpPred p, ScalarType t, llvm::Value* x, llvm::Value* y) {
  if (t == ScalarType::bf16 || t == ScalarType::f8_e4m3 || t == ScalarType::f8_e5m2)
    return scalar_cmp(p, ScalarType::f32, convert_value(x, t, ScalarType::f32), convert_value(y, t, ScalarType::f32));
  const llvm::CmpInst::Predicate pred = llvm_predicate(p, t);
  return is_float(t) ? b_.CreateFCmp(pred, x, y) : b_.CreateICmp(pred, x, y);
}

llvm::Value* SimtLowering::unary_value(UnOp u, ScalarType t, llvm::Value* x) {
  if (t == ScalarType::bf16 || t == ScalarType::f8_e4m3 || t == ScalarType::f8_e5m2)
    return convert_value(unary_value(u, ScalarType::f32, convert_value(x, t, ScalarType::f32)), ScalarType::f32, t);
  if (!is_float(t)) {
    if (u == UnOp::neg) return b_.CreateNeg(x);
    if (u == UnOp::abs) {
      if (!is_signed(t)) return x;
      return b_.CreateSelect(b_.CreateICmpSLT(x, llvm::Constant::getNullValue(x->getType())), b_.CreateNeg(x), x);
    }
    throw InternalError("integer unary op");
  }
  if (u == UnOp::neg) return b_.CreateFNeg(x);
  return target_.math(b_, u, t, x);  // OpenCL built-ins on SPIR-V, written out on NVPTX
}

llvm::Value* SimtLowering::fp8_to_f32(llvm::Value* bits, ScalarType from) { return coopjit::fp8_to_f32(b_, bits, from); }

llvm::Value* SimtLowering::f32_to_fp8(llvm::Value* x, ScalarType to) {
  return coopjit::f32_to_fp8(b_, x, to, [&](llvm::Value* v) { return target_.round_even(b_, v); });
}

llvm::Value* SimtLowering::convert_value(llvm::Value* x, ScalarType from, ScalarType to) {
  if (from == to) return x;
  auto fp8 = [](ScalarType t) { return t == ScalarType::f8_e4m3 || t == ScalarType::f8_e5m2; };
  if (fp8(from)) return convert_value(fp8_to_f32(x, from), ScalarType::f32, to);
  if (fp8(to)) return f32_to_fp8(convert_value(x, from, ScalarType::f32), to);
  if (from == ScalarType::bf16) {  // exact: the bits are the top half of an f32's
    llvm::Value* f = b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(x, b_.getInt32Ty()), b_.getInt32(16)), b_.getFloatTy());
    return convert_value(f, ScalarType::f32, to);
  }
  if (to == ScalarType::bf16)  // rounded to nearest even (SPV_INTEL_bfloat16_conversion; cvt.rn.bf16.f32)
    return target_.f32_to_bf16(b_, convert_value(x, from, ScalarType::f32));
  llvm::Type* target = scalar_ty(to);
  if (is_float(from) && is_float(to)) {
    unsigned fb = x->getType()->getScalarSizeInBits(), tb = target->getScalarSizeInBits();
    return tb > fb ? b_.CreateFPExt(x, target) : b_.CreateFPTrunc(x, target);
  }
  if (is_float(from))  // to an integer: saturating, NaN -> 0
    return b_.CreateIntrinsic(is_signed(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat,
                              {target, x->getType()}, {x});
  if (is_float(to)) return is_signed(from) ? b_.CreateSIToFP(x, target) : b_.CreateUIToFP(x, target);
  if (to == ScalarType::i1) return b_.CreateICmpNE(x, llvm::Constant::getNullValue(x->getType()));
  return b_.CreateIntCast(x, target, from != ScalarType::i1 && is_signed(from));
}

}  // namespace coopjit
