// Vectorizing transcendental functions (vector_math.h).
#include "lower/vector_math.h"

#include <llvm/IR/Module.h>

namespace coopjit::lower {

namespace {
llvm::Value* c(llvm::Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }
llvm::Value* fma(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y, llvm::Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {x, y, z});
}
llvm::Value* fabs(llvm::IRBuilder<>& b, llvm::Value* x) { return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }
// Horner: k[0] x^(n-1) + ... + k[n-1].
llvm::Value* poly(llvm::IRBuilder<>& b, llvm::Value* x, const double* k, int n) {
  llvm::Value* p = c(x, k[0]);
  for (int i = 1; i < n; ++i) p = fma(b, p, x, c(x, k[i]));
  return p;
}
}  // namespace

llvm::Value* exp_f32(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Type* it = ft->isVectorTy() ? llvm::VectorType::get(b.getInt32Ty(), llvm::cast<llvm::VectorType>(ft)->getElementCount())
                                    : static_cast<llvm::Type*>(b.getInt32Ty());
  const double kHi = 88.72283935546875, kLo = -87.33654022216797;  // e^kHi < FLT_MAX, e^kLo >= FLT_MIN
  llvm::Value* xc = b.CreateMinNum(b.CreateMaxNum(x, c(x, kLo)), c(x, kHi));
  // n = round(x / ln2), r = x - n ln2 (ln2 in two parts: n * ln2_hi is exact for |n| < 2^9).
  llvm::Value* n = b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b.CreateFMul(xc, c(x, 1.4426950408889634)));
  llvm::Value* r = fma(b, n, c(x, -0.693145751953125), xc);
  r = fma(b, n, c(x, -1.4286068202862268e-06), r);
  // e^r on |r| <= 0.3466: Taylor to r^7 (truncation below 6e-9 relative).
  const double k[] = {1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0};
  llvm::Value* p = poly(b, r, k, 8);
  // 2^n from the exponent bits (n in [-126, 128]: 2^128 is split as 2^127 * 2).
  llvm::Value* ni = b.CreateFPToSI(n, it);
  llvm::Value* big = b.CreateICmpSGT(ni, llvm::ConstantInt::get(it, 127));
  llvm::Value* n1 = b.CreateSelect(big, llvm::ConstantInt::get(it, 127), ni);
  llvm::Value* s = b.CreateBitCast(b.CreateShl(b.CreateAdd(n1, llvm::ConstantInt::get(it, 127)), 23), ft);
  llvm::Value* y = b.CreateFMul(p, s);
  y = b.CreateSelect(big, b.CreateFMul(y, c(x, 2.0)), y);
  y = b.CreateSelect(b.CreateFCmpOGT(x, c(x, kHi)), llvm::ConstantFP::getInfinity(ft), y);
  y = b.CreateSelect(b.CreateFCmpOLT(x, c(x, kLo)), c(x, 0.0), y);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

llvm::Value* tanh_f32(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* ax = fabs(b, x);
  llvm::Value* big = b.CreateFSub(c(x, 1.0), b.CreateFDiv(c(x, 2.0), b.CreateFAdd(exp_f32(b, b.CreateFMul(ax, c(x, 2.0))), c(x, 1.0))));
  big = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, big, x);
  llvm::Value* x2 = b.CreateFMul(x, x);
  // tanh x = x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 - 1382x^11/155925 + ...
  const double t[] = {-1382.0 / 155925, 62.0 / 2835, -17.0 / 315, 2.0 / 15, -1.0 / 3};
  llvm::Value* p = poly(b, x2, t, 5);
  llvm::Value* small = fma(b, b.CreateFMul(p, x2), x, x);
  return b.CreateSelect(b.CreateFCmpOLT(ax, c(x, 0.3)), small, big);
}

llvm::Value* erfc_abs_f32(llvm::IRBuilder<>& b, llvm::Value* x, const ExpFn& exp, const ExpFn& recip) {
  llvm::Value* z = fabs(b, x);
  llvm::Value* d = fma(b, z, c(x, 0.5), c(x, 1.0));
  llvm::Value* t = recip ? recip(b, d) : b.CreateFDiv(c(x, 1.0), d);
  const double k[] = {0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
                      -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223};
  llvm::Value* e = fma(b, b.CreateFNeg(z), z, poly(b, t, k, 10));
  return b.CreateFMul(t, exp ? exp(b, e) : exp_f32(b, e));
}

llvm::Value* erf_f32(llvm::IRBuilder<>& b, llvm::Value* x, const ExpFn& exp, const ExpFn& recip, bool absolute) {
  llvm::Value* r = b.CreateFSub(c(x, 1.0), erfc_abs_f32(b, x, exp, recip));
  r = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
  if (absolute) return r;  // 1 - erfc: absolute error ~1.2e-7, NaN in gives NaN (fabs, fma, exp keep it)
  // Below |x| = 0.5 the Taylor series keeps the relative error (1 - erfc loses it near 0):
  // erf x = 2 / sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)), to n = 7 (truncation below 2e-11).
  const double k[] = {-1.0 / 75600, 1.0 / 9360, -1.0 / 1320, 1.0 / 216, -1.0 / 42, 1.0 / 10, -1.0 / 3, 1.0};
  llvm::Value* small = b.CreateFMul(b.CreateFMul(poly(b, b.CreateFMul(x, x), k, 8), x), c(x, 1.1283791670955126));
  r = b.CreateSelect(b.CreateFCmpOLT(fabs(b, x), c(x, 0.5)), small, r);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

llvm::Value* erf_f64_libm(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Module* m = b.GetInsertBlock()->getModule();
  llvm::FunctionCallee erf = m->getOrInsertFunction("erf", llvm::FunctionType::get(b.getDoubleTy(), {b.getDoubleTy()}, false));
  if (!x->getType()->isVectorTy()) return b.CreateCall(erf, {x});
  const unsigned n = llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements();
  llvm::Value* out = llvm::PoisonValue::get(x->getType());
  for (unsigned i = 0; i < n; ++i)
    out = b.CreateInsertElement(out, b.CreateCall(erf, {b.CreateExtractElement(x, i)}), i);
  return out;
}

}  // namespace coopjit::lower
