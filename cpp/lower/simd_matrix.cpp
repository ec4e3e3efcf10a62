// The SIMD lowering of matrix arithmetic: splat, mul_add, element-wise operations.
#include "lower/simd_lowering.h"

namespace coopjit {

std::vector<llvm::Value*> SimdLowering::splat(const Op& o) {
  const Type& t = o.result()->type;
  llvm::Value* s = scalar(o.operands[0]);
  if (!vector_layout(t)) return std::vector<llvm::Value*>(parts(t), s);
  std::vector<llvm::Value*> out;
  llvm::Value* full = b_.CreateVectorSplat(S_, s);
  llvm::Value* zero = llvm::Constant::getNullValue(full->getType());
  for (int64_t i = 0; i < t.rows; ++i)
    for (int j = 0; j < chunks(t); ++j) {
      int valid = static_cast<int>(std::min<int64_t>(S_, t.cols - int64_t(j) * S_));
      // Padding lanes hold zero, as the layout defines.
      out.push_back(valid < S_ ? b_.CreateSelect(lane_mask(valid), full, zero) : full);
    }
  return out;
}

llvm::Value* SimdLowering::fma(ScalarType t, llvm::Value* x, llvm::Value* y, llvm::Value* acc) {
  if (is_float(t)) return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, acc});
  return b_.CreateAdd(b_.CreateMul(x, y), acc);
}

std::vector<llvm::Value*> SimdLowering::mul_add(const Op& o) {
  const Type &ta = o.operands[0]->type, &tc = o.operands[2]->type;
  const auto& a = mat(o.operands[0]);
  const auto& bv = mat(o.operands[1]);
  std::vector<llvm::Value*> c = mat(o.operands[2]);
  const int nch = chunks(tc);
  for (int64_t k = 0; k < ta.cols; ++k)
    for (int64_t i = 0; i < tc.rows; ++i) {
      llvm::Value* bc = b_.CreateVectorSplat(S_, a[i * ta.cols + k]);
      for (int j = 0; j < nch; ++j) c[i * nch + j] = fma(tc.scalar, bc, bv[k * nch + j], c[i * nch + j]);
    }
  return c;
}

std::vector<llvm::Value*> SimdLowering::elementwise(const Op& o) {
  const Type& t = o.result()->type;
  const auto& x = mat(o.operands[0]);
  std::vector<llvm::Value*> out;
  if (o.kind == OpKind::mat_scale) {
    llvm::Value* s = scalar(o.operands[1]);
    if (vector_layout(t)) s = b_.CreateVectorSplat(S_, s);
    for (llvm::Value* v : x) out.push_back(scalar_bin(BinOp::mul, t.scalar, v, s));
    return out;
  }
  const auto& y = mat(o.operands[1]);
  for (size_t i = 0; i < x.size(); ++i) out.push_back(scalar_bin(static_cast<BinOp>(o.sub), t.scalar, x[i], y[i]));
  return out;
}

}  // namespace coopjit
