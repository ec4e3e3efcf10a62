// HLSL's groupshared arrays in the SIMT lowering: groupshared.alloc is an array in work-group
// shared memory (SPIR-V Workgroup, PTX .shared; from the same budget as the workgroup-scope
// matrices' buffers), and a subgroup-scope matrix load, store or accumulate that addresses one
// goes lane by lane as the seeds' SIMT pseudo-code (simt_memory.cpp's per-lane path), each
// element converted between the array's element type and the matrix's component type (HLSL
// 0035: "a data conversion is applied"; convert_value, the conversion coopmatrix.convert uses).
// No block I/O here: SPV_INTEL_subgroups' block reads and writes take global memory. Workgroup-
// scope matrices reach these arrays through simt_workgroup.cpp, which converts the same way.
#include "lower/simt_lowering.h"

namespace coopjit {

void SimtLowering::shared_alloc(const Op& o) {
  const Type& t = o.result()->type;
  const int64_t bytes = (t.cols * size_in_bytes(t.scalar) + 15) / 16 * 16;
  if (wg_bytes_ + bytes > kWorkgroupBytes)
    throw UserError(cat("SIMT lowering: the groupshared arrays and workgroup-scope matrices of kernel ", f_.name,
                        " need more than ", kWorkgroupBytes, " bytes of work-group shared memory (", wg_bytes_ + bytes,
                        " with ", t.str(), ")"));
  wg_bytes_ += bytes;
  auto* ty = llvm::ArrayType::get(scalar_ty(t.scalar), static_cast<uint64_t>(t.cols));
  auto* g = new llvm::GlobalVariable(*mod_, ty, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(ty),
                                     "groupshared", nullptr, llvm::GlobalValue::NotThreadLocal, target_.shared_addrspace());
  g->setAlignment(llvm::Align(16));
  scalars_[o.result()] = g;
}

void SimtLowering::shared_access(const Op& o) {
  const bool load = o.kind == OpKind::mat_load;
  const Type& t = load ? o.result()->type : o.operands[0]->type;
  const ScalarType st = o.operands[load ? 0 : 1]->type.scalar;
  llvm::Type* sty = scalar_ty(st);
  const Access a = access(o, load ? 0 : 1);
  const bool checked = o.int_attr("checked");
  const LaneMap m = lanes_of(t);
  std::vector<llvm::Value*> vals = load ? std::vector<llvm::Value*>{} : mat(o.operands[0]);
  std::vector<llvm::Value*> out;
  for (int64_t n = 0; n < m.comps(); ++n) {
    llvm::Value* ok = inside(m, n);
    llvm::Value* row = b_.CreateAdd(a.row, row_of(m, n));
    llvm::Value* col = b_.CreateAdd(a.col, col_of(m, n));
    if (checked) ok = b_.CreateAnd(ok, b_.CreateAnd(b_.CreateICmpULT(row, a.rows), b_.CreateICmpULT(col, a.cols)));
    llvm::Value* ptr = b_.CreateGEP(sty, a.ptr, b_.CreateAdd(b_.CreateMul(row, a.sr), b_.CreateMul(col, a.sc)));
    if (load) {
      // Padding and elements outside the bounds read zero (zero converts to zero).
      out.push_back(convert_value(guarded_load(ok, sty, ptr, align(st)), st, t.scalar));
    } else {
      llvm::Value* v = convert_value(vals[static_cast<size_t>(n)], t.scalar, st);
      guarded(ok, [&] { b_.CreateAlignedStore(v, ptr, align(st)); });
    }
  }
  if (load) mats_[o.result()] = out;
}

}  // namespace coopjit
