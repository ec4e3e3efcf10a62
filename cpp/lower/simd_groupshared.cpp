// The SIMD lowering of HLSL's groupshared arrays (work-group local memory). On the CPU a
// work-group is one invocation, so its groupshared array is an array on that invocation's stack
// and a work-group barrier has nothing to wait for. Matrix loads and stores that convert between
// the array's element type and the matrix's component type (HLSL 0035: "a data conversion is
// applied") go element by element through convert_value, the conversion coopmatrix.convert uses;
// the others take the ordinary load and store paths.
#include "lower/simd_lowering.h"

namespace coopjit {

void SimdLowering::shared_alloc(const Op& o) {
  const Type& t = o.result()->type;
  llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  auto* a = eb.CreateAlloca(llvm::ArrayType::get(scalar_ty(t.scalar), static_cast<uint64_t>(t.cols)), nullptr, "groupshared");
  a->setAlignment(llvm::Align(16));
  scalars_[o.result()] = a;
}

bool SimdLowering::converting_shared_access(const Op& o) {
  if (o.kind != OpKind::mat_load && o.kind != OpKind::mat_store) return false;
  const bool load = o.kind == OpKind::mat_load;
  const Type& p = o.operands[load ? 0 : 1]->type;
  const Type& m = load ? o.result()->type : o.operands[0]->type;
  if (!p.is_groupshared() || p.scalar == m.scalar) return false;
  const ScalarType st = p.scalar;
  llvm::Type* sty = scalar_ty(st);
  const Addr a = addr(o, load ? 0 : 1);
  const bool checked = o.int_attr("checked");
  std::vector<llvm::Value*> vals = load ? std::vector<llvm::Value*>{} : elems(o.operands[0]);
  std::vector<llvm::Value*> out;
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t k = 0; k < m.cols; ++k) {
      llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(i));
      llvm::Value* c = b_.CreateAdd(a.col, b_.getInt64(k));
      llvm::Value* ptr = b_.CreateGEP(sty, a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), b_.CreateMul(c, a.sc)));
      if (load) {
        if (checked) ptr = b_.CreateSelect(in_bounds(r, c, a), ptr, zero_global(st));
        out.push_back(convert_value(b_.CreateAlignedLoad(sty, ptr, align(st)), st, m.scalar));
        continue;
      }
      llvm::Value* v = convert_value(vals[static_cast<size_t>(i * m.cols + k)], m.scalar, st);
      if (!checked) {
        b_.CreateAlignedStore(v, ptr, align(st));
        continue;
      }
      auto* yes = llvm::BasicBlock::Create(ctx_, "shared.in", fn_);
      auto* cont = llvm::BasicBlock::Create(ctx_, "shared.cont", fn_);
      b_.CreateCondBr(in_bounds(r, c, a), yes, cont);
      b_.SetInsertPoint(yes);
      b_.CreateAlignedStore(v, ptr, align(st));
      b_.CreateBr(cont);
      b_.SetInsertPoint(cont);
    }
  if (load) mats_[o.result()] = from_elems(m, out);
  return true;
}

}  // namespace coopjit
