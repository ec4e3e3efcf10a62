// The fp8 (e4m3fn, e5m2) conversions of the SIMD and SIMT lowerings (fp8_convert.h).
#include "lower/fp8_convert.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>

namespace coopjit {

llvm::Value* fp8_to_f32(llvm::IRBuilder<>& b_, llvm::Value* bits, ir::ScalarType from) {
  using ir::ScalarType;
  auto c32 = [&](uint32_t v) { return splat_like(b_, bits, b_.getInt32(v)); };
  llvm::Value* b = b_.CreateZExt(bits, like_type(bits, b_.getInt32Ty()));
  if (from == ScalarType::f8_e5m2) {  // the top byte of an IEEE half
    llvm::Value* h = b_.CreateBitCast(b_.CreateTrunc(b_.CreateShl(b, c32(8)), like_type(bits, b_.getInt16Ty())),
                                      like_type(bits, b_.getHalfTy()));
    return b_.CreateFPExt(h, like_type(bits, b_.getFloatTy()));
  }
  // e4m3fn: bias 7, no infinities, S.1111.111 is NaN.
  llvm::Value* sign = b_.CreateShl(b_.CreateAnd(b, c32(0x80)), c32(24));
  llvm::Value* e = b_.CreateAnd(b_.CreateLShr(b, c32(3)), c32(0xF));
  llvm::Value* m = b_.CreateAnd(b, c32(7));
  llvm::Value* normal = b_.CreateOr(sign, b_.CreateOr(b_.CreateShl(b_.CreateAdd(e, c32(120)), c32(23)),
                                                      b_.CreateShl(m, c32(20))));
  llvm::Type* fty = like_type(bits, b_.getFloatTy());
  llvm::Value* sub = b_.CreateFMul(b_.CreateUIToFP(m, fty), splat_like(b_, bits, llvm::ConstantFP::get(b_.getFloatTy(), 1.0 / 512)));
  sub = b_.CreateOr(b_.CreateBitCast(sub, like_type(bits, b_.getInt32Ty())), sign);
  llvm::Value* nan = b_.CreateOr(sign, c32(0x7FC00000));
  llvm::Value* r = b_.CreateSelect(b_.CreateICmpEQ(e, c32(0)), sub, normal);
  r = b_.CreateSelect(b_.CreateAnd(b_.CreateICmpEQ(e, c32(15)), b_.CreateICmpEQ(m, c32(7))), nan, r);
  return b_.CreateBitCast(r, fty);
}

llvm::Value* f32_to_fp8(llvm::IRBuilder<>& b_, llvm::Value* x, ir::ScalarType to, const RoundEven& round_even) {
  using ir::ScalarType;
  auto c32 = [&](uint32_t v) { return splat_like(b_, x, b_.getInt32(v)); };
  auto cf = [&](double v) { return splat_like(b_, x, llvm::ConstantFP::get(b_.getFloatTy(), v)); };
  llvm::Type* ity = like_type(x, b_.getInt32Ty());
  llvm::Value* bits = b_.CreateBitCast(x, ity);
  llvm::Value* sign = b_.CreateAnd(b_.CreateLShr(bits, c32(24)), c32(0x80));
  llvm::Value* a = b_.CreateAnd(bits, c32(0x7FFFFFFF));
  llvm::Value* fa = b_.CreateBitCast(a, x->getType());
  llvm::Value* is_nan = b_.CreateICmpUGT(a, c32(0x7F800000));
  const bool e4 = to == ScalarType::f8_e4m3;
  // Subnormals: multiples of 2^-9 (e4m3) or 2^-16 (e5m2), rounded to nearest even.
  llvm::Value* q = b_.CreateFPToUI(round_even(b_.CreateFMul(fa, cf(e4 ? 512.0 : 65536.0))), ity);
  llvm::Value* is_sub = b_.CreateFCmpOLT(fa, cf(e4 ? 1.0 / 64 : 1.0 / 16384));
  // Normals: round the f32 mantissa to 3 (e4m3) or 2 (e5m2) bits, nearest even, then rebias.
  const uint32_t drop = e4 ? 20 : 21;
  llvm::Value* r = b_.CreateAdd(a, b_.CreateAdd(c32((1u << (drop - 1)) - 1), b_.CreateAnd(b_.CreateLShr(a, c32(drop)), c32(1))));
  llvm::Value* E = b_.CreateSub(b_.CreateLShr(r, c32(23)), c32(e4 ? 120 : 112));
  llvm::Value* mant = b_.CreateAnd(b_.CreateLShr(r, c32(drop)), c32(e4 ? 7 : 3));
  llvm::Value* code = b_.CreateOr(b_.CreateShl(E, c32(e4 ? 3 : 2)), mant);
  llvm::Value* out;
  if (e4) {  // no infinity: overflow (and inf) become NaN 0x7F, like ml_dtypes' float8_e4m3fn
    llvm::Value* over = b_.CreateICmpUGT(code, c32(0x7E));
    out = b_.CreateSelect(is_nan, c32(0x7F), b_.CreateSelect(is_sub, q, b_.CreateSelect(over, c32(0x7F), code)));
  } else {   // IEEE-like: overflow to infinity 0x7C, NaN 0x7E
    llvm::Value* over = b_.CreateICmpUGE(E, c32(31));
    out = b_.CreateSelect(is_nan, c32(0x7E), b_.CreateSelect(is_sub, q, b_.CreateSelect(over, c32(0x7C), code)));
  }
  return b_.CreateTrunc(b_.CreateOr(out, sign), like_type(x, b_.getInt8Ty()));
}

}  // namespace coopjit
