// Tensor layout / view addressing (tensor_addressing.h), following the pseudo-code of
// SPV_NV_cooperative_matrix2 "Tensor Layout and View" step by step. Arithmetic is in 64 bits;
// divisors are kept >= 1 so that no input can make the generated code trap.
#include "lower/tensor_addressing.h"

#include "core/error.h"

namespace coopjit {
namespace {

struct Emitter {
  llvm::IRBuilder<>& b;
  int S;

  // S == 0: scalars (the SIMT lowering, one element per work-item); else vectors of S lanes.
  llvm::Value* splat(llvm::Value* x) { return S == 0 || x->getType()->isVectorTy() ? x : b.CreateVectorSplat(S, x); }
  llvm::Value* c(int64_t x) { return S == 0 ? b.getInt64(x) : b.CreateVectorSplat(S, b.getInt64(x)); }
  llvm::Value* at_least_1(llvm::Value* x) { return b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, splat(x), c(1)); }
  // Remainder as OpSMod: the sign of the divisor (y >= 1 here), so the result is in [0, y).
  llvm::Value* smod(llvm::Value* x, llvm::Value* y) {
    llvm::Value* r = b.CreateSRem(x, y);
    return b.CreateSelect(b.CreateICmpSLT(r, c(0)), b.CreateAdd(r, y), r);
  }
};

}  // namespace

size_t tensor_parts(const ir::Type& t) {
  if (t.is_tensor_layout()) return static_cast<size_t>(5 * t.rank + 1);
  COOPJIT_INTERNAL_ASSERT(t.is_tensor_view());
  return static_cast<size_t>((t.has_dims ? 2 * t.rank : 0) + 4);
}

LayoutParts layout_parts(const ir::Type& t, const std::vector<llvm::Value*>& p) {
  COOPJIT_INTERNAL_ASSERT(t.is_tensor_layout() && p.size() == tensor_parts(t));
  LayoutParts l;
  l.rank = t.rank;
  l.clamp = t.clamp;
  for (int d = 0; d < l.rank; ++d) {
    l.block[d] = p[d];
    l.dim[d] = p[l.rank + d];
    l.stride[d] = p[2 * l.rank + d];
    l.offset[d] = p[3 * l.rank + d];
    l.span[d] = p[4 * l.rank + d];
  }
  l.clamp_value = p[5 * l.rank];
  return l;
}

ViewParts view_parts(const ir::Type& t, const std::vector<llvm::Value*>& p) {
  COOPJIT_INTERNAL_ASSERT(t.is_tensor_view() && p.size() == tensor_parts(t));
  ViewParts w;
  w.rank = t.rank;
  w.has_dims = t.has_dims;
  w.perm = t.perm;
  size_t at = 0;
  if (w.has_dims) {
    for (int d = 0; d < w.rank; ++d) w.dims[d] = p[d];
    for (int d = 0; d < w.rank; ++d) w.strides[d] = p[w.rank + d];
    at = 2 * w.rank;
  }
  for (int k = 0; k < 4; ++k) w.clip[k] = p[at + k];
  return w;
}

TensorElement tensor_element(llvm::IRBuilder<>& b, int S, const LayoutParts& t, const ViewParts* v,
                             llvm::Value* row, llvm::Value* col, int64_t N, bool store) {
  Emitter e{b, S};
  TensorElement out{};
  llvm::Value* all = S == 0 ? b.getTrue() : llvm::ConstantInt::getTrue(llvm::FixedVectorType::get(b.getInt1Ty(), S));
  out.in_clip = all;
  llvm::Value* index;
  if (v) {
    // matrixCoordToLinear with a view: skip elements outside the clip region.
    llvm::Value *ro = e.splat(v->clip[0]), *rs = e.splat(v->clip[1]);
    llvm::Value *co = e.splat(v->clip[2]), *cs = e.splat(v->clip[3]);
    out.in_clip = b.CreateAnd(b.CreateAnd(b.CreateICmpSGE(row, ro), b.CreateICmpSLT(row, b.CreateAdd(ro, rs))),
                              b.CreateAnd(b.CreateICmpSGE(col, co), b.CreateICmpSLT(col, b.CreateAdd(co, cs))));
    llvm::Value* width = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, e.c(N), cs);
    index = b.CreateAdd(b.CreateMul(b.CreateSub(row, ro), width), b.CreateSub(col, co));
    // linearToViewCoord: the view dimensions (or the layout's spans), innermost first, visited
    // through the permutation.
    std::array<llvm::Value*, 5> dims{}, coord{}, stride{};
    for (int d = 0; d < v->rank; ++d) dims[d] = e.at_least_1(v->has_dims ? v->dims[d] : t.span[d]);
    for (int d = v->rank - 1; d >= 0; --d) {
      int i = v->perm[d];
      coord[i] = b.CreateURem(index, dims[i]);
      index = b.CreateUDiv(index, dims[i]);
    }
    // viewCoordToLinear: the view strides, or the row-major strides of the spans.
    if (v->has_dims) {
      for (int d = 0; d < v->rank; ++d) stride[d] = e.splat(v->strides[d]);
    } else {
      stride[v->rank - 1] = e.c(1);
      for (int d = v->rank - 2; d >= 0; --d) stride[d] = b.CreateMul(stride[d + 1], e.splat(t.span[d + 1]));
    }
    index = e.c(0);
    for (int d = v->rank - 1; d >= 0; --d) index = b.CreateAdd(index, b.CreateMul(coord[d], stride[d]));
  } else {
    index = b.CreateAdd(b.CreateMul(row, e.c(N)), col);  // matrixCoordToLinear: row-major
  }

  // linearToSpanCoord.
  std::array<llvm::Value*, 5> span_coord{};
  for (int d = t.rank - 1; d >= 0; --d) {
    llvm::Value* span = e.at_least_1(t.span[d]);
    span_coord[d] = b.CreateURem(index, span);
    index = b.CreateUDiv(index, span);
  }

  // spanCoordToTensorCoord: offset, clamp, split into block and position in block.
  ir::ClampMode mode = t.clamp;
  if (store && mode != ir::ClampMode::undefined) mode = ir::ClampMode::constant;  // stores discard
  out.discard = llvm::Constant::getNullValue(all->getType());
  llvm::Value* linear = e.c(0);
  for (int d = 0; d < t.rank; ++d) {
    llvm::Value* D = e.at_least_1(t.dim[d]);
    llvm::Value* cc = b.CreateAdd(span_coord[d], e.splat(t.offset[d]));
    llvm::Value* oob = b.CreateOr(b.CreateICmpSLT(cc, e.c(0)), b.CreateICmpSGE(cc, D));
    switch (mode) {
      case ir::ClampMode::undefined:
        break;  // undefined behaviour in the document; the caller keeps accesses inside the buffer
      case ir::ClampMode::constant:
        out.discard = b.CreateOr(out.discard, oob);
        break;
      case ir::ClampMode::clamp_to_edge:
        cc = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, cc, e.c(0)),
                                     b.CreateSub(D, e.c(1)));
        break;
      case ir::ClampMode::repeat:
        cc = e.smod(cc, D);
        break;
      case ir::ClampMode::mirror_repeat: {
        // The document compares against the loop index `dim`; the layout dimension D is meant:
        // c = c smod (2D - 2); c = c >= D ? 2D - 2 - c : c. With D == 1 every coordinate is 0.
        llvm::Value* period = b.CreateSub(b.CreateMul(D, e.c(2)), e.c(2));
        llvm::Value* m = e.smod(cc, e.at_least_1(period));
        llvm::Value* mirrored = b.CreateSelect(b.CreateICmpSGE(m, D), b.CreateSub(period, m), m);
        cc = b.CreateSelect(b.CreateICmpEQ(D, e.c(1)), e.c(0), mirrored);
        break;
      }
    }
    llvm::Value* block = e.at_least_1(t.block[d]);
    out.coord_in_block.push_back(b.CreateSRem(cc, block));
    out.block_coord.push_back(b.CreateSDiv(cc, block));
    // tensorCoordToLinear: the block coordinates times the strides.
    linear = b.CreateAdd(linear, b.CreateMul(out.block_coord.back(), e.splat(t.stride[d])));
  }
  out.index = linear;
  return out;
}

}  // namespace coopjit
