// The multi-stage tensor-core pipeline of the SIMT lowering (NVIDIA, sm_80 and newer): a K loop
// of the GEMM recipes,
//   for k in [lo, hi) step kb  {mma_pipeline = stages, sg_m = subgroups along M}
//     a = coopmatrix.load A (mr x kb, rows m0.., columns k..)     unit row or column stride
//     b = coopmatrix.load B (kb x nr, rows k.., columns n0..)     unit row or column stride
//     acc = mul_add(a, b, acc)
// is lowered for the whole work-group at once: the loop's attribute promises that every subgroup
// of the work-group runs it with the same bounds, subgroup s's A rows being the work-group's
// rows (s % sg_m) mr.. and its B columns (s / sg_m) nr.. (the recipes' tile walk). Then
//   - the work-group's A (sg_m mr x kb) and B (kb x sg_n nr) panels of each K step are copied
//     global -> shared memory by all its work-items with cp.async (16 bytes each), `stages`
//     steps in flight (commit / wait groups; a barrier before a slot is refilled);
//   - shared memory rows are 16-byte chunks placed by an XOR swizzle, so the 8 row addresses of
//     one ldmatrix fall in 8 different bank groups (below);
//   - each warp reads its fragments with ldmatrix.x4 (.trans where the panel's contiguous
//     dimension is not the fragment's) and runs mma.sync m16n8k16 on accumulators held in the
//     instruction's C fragments across the loop; they move into the coopmatrix layout once, after it.
// Loads that are `checked` zero-fill outside the matrix, at 16-byte granularity: the attribute
// also promises 16-byte aligned bases, non-unit strides that are multiples of 8 elements and
// contiguous extents that are multiples of 8 (gpu_plan_kernel.cpp plans it only then; the host checks
// the pointers). A loop that does not match falls back to the ordinary lowering (same result).
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "lower/ir_to_llvm.h"
#include "lower/simt_lowering.h"

namespace coopjit {

void SimtTarget::async_copy16(llvm::IRBuilder<>&, llvm::Value*, llvm::Value*, llvm::Value*) const {
  throw UserError(cat("SIMT lowering for ", name(), ": asynchronous copies to shared memory (cp.async) are NVIDIA-only"));
}
void SimtTarget::async_copy4(llvm::IRBuilder<>&, llvm::Value*, llvm::Value*, llvm::Value*) const {
  throw UserError(cat("SIMT lowering for ", name(), ": asynchronous copies to shared memory (cp.async) are NVIDIA-only"));
}
void SimtTarget::async_commit(llvm::IRBuilder<>&) const {
  throw UserError(cat("SIMT lowering for ", name(), ": asynchronous copy groups (cp.async) are NVIDIA-only"));
}
void SimtTarget::async_wait(llvm::IRBuilder<>&, int) const {
  throw UserError(cat("SIMT lowering for ", name(), ": asynchronous copy groups (cp.async) are NVIDIA-only"));
}
std::vector<llvm::Value*> SimtTarget::load_matrix_x4(llvm::IRBuilder<>&, llvm::Value*, bool) const {
  throw UserError(cat("SIMT lowering for ", name(), ": warp matrix loads (ldmatrix) are NVIDIA-only"));
}

namespace {

// One operand's panel in shared memory: `outer` rows of `inner` contiguous elements (16-byte
// chunks, cpr of them a row), the rows along the global matrix's strided dimension.
struct Panel {
  int64_t outer = 0, inner = 0, cpr = 0, offset = 0;  // offset: bytes from the stage's start
  bool k_inner = false;                                // the contiguous dimension is K
  bool swizzle = true;  // chunks placed by the XOR swizzle (below); false: row-major chunks
  int64_t pitch = 0;     // chunks a row in shared memory (row-major panels; cpr plus padding)
  bool trans = false;    // a K-contiguous f32 panel stored [k][m] / [k][n] (below)
};

}  // namespace

void SimtLowering::cp_async_panel(const CpPanel& p, llvm::Value* k0, llvm::Value* tid, int64_t threads, int64_t EPC,
                                  int64_t esz, const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& dst) {
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  auto i64v = [&](int64_t v) { return b_.getInt64(v); };
  for (int64_t it = 0; it < p.outer * p.cpr / threads; ++it) {
    llvm::Value* q = b_.CreateAdd(tid, c32(it * threads));
    llvm::Value* r = b_.CreateUDiv(q, c32(p.cpr));
    llvm::Value* c = b_.CreateURem(q, c32(p.cpr));
    llvm::Value* r64 = b_.CreateZExt(r, b_.getInt64Ty());
    llvm::Value* c64 = b_.CreateMul(b_.CreateZExt(c, b_.getInt64Ty()), i64v(EPC));
    // Global (outer, inner) of the chunk: the tile's corner along M / N, k0 along K.
    llvm::Value* outer = b_.CreateAdd(p.k_inner ? p.origin : k0, r64);
    llvm::Value* inner = b_.CreateAdd(p.k_inner ? k0 : p.origin, c64);
    llvm::Value* elem = b_.CreateAdd(b_.CreateMul(outer, p.stride), inner);
    llvm::Value* src = b_.CreateGEP(b_.getInt8Ty(), p.base, {b_.CreateMul(elem, i64v(esz))});
    llvm::Value* valid = b_.getTrue();
    if (p.checked) {
      valid = b_.CreateAnd(b_.CreateICmpSLT(outer, p.outer_lim), b_.CreateICmpSLT(inner, p.inner_lim));
      src = b_.CreateSelect(valid, src, p.base);
    }
    llvm::Value* to = dst(r, c);
    target_.async_copy16(b_, to, src, valid);
  }
}

bool SimtLowering::stage_memory(int64_t total, unsigned align) {
  const auto dyn_it = f_.attrs.find("dynamic_shared");
  const int64_t dyn = dyn_it == f_.attrs.end() ? 0 : std::get<int64_t>(dyn_it->second);
  if (total > std::max<int64_t>(dyn, 48 * 1024)) return false;
  llvm::Type* i8t = b_.getInt8Ty();
  if (!stage_mem_ && dyn) {
    auto* ty = llvm::ArrayType::get(i8t, 0);
    stage_mem_ = new llvm::GlobalVariable(*mod_, ty, false, llvm::GlobalValue::ExternalLinkage, nullptr,
                                          "coopjit_dynamic_shared", nullptr, llvm::GlobalValue::NotThreadLocal,
                                          target_.shared_addrspace());
    stage_mem_->setAlignment(llvm::Align(align));
  } else if (!stage_mem_) {
    auto* ty = llvm::ArrayType::get(i8t, static_cast<uint64_t>(total));
    stage_mem_ = new llvm::GlobalVariable(*mod_, ty, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(ty),
                                          "mma_stages", nullptr, llvm::GlobalValue::NotThreadLocal,
                                          target_.shared_addrspace());
    stage_mem_->setAlignment(llvm::Align(align));
  } else if (!dyn && static_cast<int64_t>(stage_mem_->getValueType()->getArrayNumElements()) < total) {
    return false;
  }
  return true;
}

bool SimtLowering::mma_pipeline(const Op& o) {
  if (o.int_attr("wgmma", 0)) {  // the plan asked for Hopper's warpgroup pipeline (simt_wgmma.cpp)
    if (!wgmma_pipeline(o))
      throw InternalError(cat("SIMT lowering for ", target_.name(), ": the K loop planned for wgmma does not match its pipeline"));
    return true;
  }
  if (!target_.async_copies() || S_ != 32) return false;
  const Block& body = *o.regions[0];
  if (o.operands.size() != 4 || body.args.size() != 2 || body.ops.size() != 4) return false;
  const Op &la = *body.ops[0], &lb = *body.ops[1], &ma = *body.ops[2], &yo = *body.ops[3];
  if (la.kind != OpKind::mat_load || lb.kind != OpKind::mat_load || ma.kind != OpKind::mat_mul_add ||
      yo.kind != OpKind::yield)
    return false;
  if (ma.operands[0] != la.result() || ma.operands[1] != lb.result() || ma.operands[2] != body.args[1] ||
      yo.operands.size() != 1 || yo.operands[0] != ma.result())
    return false;
  if (la.operands[2] != body.args[0] || lb.operands[1] != body.args[0]) return false;
  for (const Op* l : {&la, &lb})
    for (size_t i = 0; i < l->operands.size(); ++i)
      if (l->operands[i] != body.args[0] && !scalars_.count(l->operands[i])) return false;  // loop-invariant
  const Type &ta = la.result()->type, &tb = lb.result()->type, &tc = ma.result()->type;
  const bool bf = ta.scalar == ScalarType::bf16;
  const bool i8 = (ta.scalar == ScalarType::i8 || ta.scalar == ScalarType::u8) &&
                  (tb.scalar == ScalarType::i8 || tb.scalar == ScalarType::u8) && tc.scalar == ScalarType::i32;
  // f32 / f64: the same staging, then FMAs on CUDA cores from shared memory (below).
  const bool fma = ta.scalar == tb.scalar && ta.scalar == tc.scalar && (tc.scalar == ScalarType::f32 || tc.scalar == ScalarType::f64);
  if (!i8 && !fma && (ta.scalar != tb.scalar || (!bf && ta.scalar != ScalarType::f16) || tc.scalar != ScalarType::f32)) return false;
  // 16-bit inputs: m16n8k16; 8-bit: m16n8k32, whose fragments are those of k16 in bytes.
  const int64_t esz = size_in_bytes(ta.scalar), kstep = fma ? 1 : 32 / esz;
  const int64_t MR = tc.rows, NR = tc.cols, KB = ta.cols;
  if (MR % 16 || NR % 16 || KB % kstep || !is_index_const(o.operands[2], KB)) return false;
  // FMA mode: lane p holds rows (p % 8) VW + v + h 8 VW and columns (p / 8) VW + v + h 4 VW of
  // the warp tile (VW: elements a 16-byte vector), so that its A and B values of one k are
  // whole 16-byte chunks of a panel contiguous along M / N.
  const int64_t VW = 16 / esz, TM = MR / 8, TN = NR / 4;
  if (fma && (TM % VW || TN % VW)) return false;
  if (!fma && !mma_mode_) return false;  // tensor cores only where the plan asks
  const int sg_m = static_cast<int>(o.int_attr("sg_m", 1)), stages = static_cast<int>(o.int_attr("mma_pipeline", 0));
  if (sg_m < 1 || sgs_ % sg_m || stages < 2) return false;
  const int sg_n = sgs_ / sg_m, threads = 32 * sgs_;
  const int64_t MT = MR * sg_m, NT = NR * sg_n, EPC = 16 / esz;  // elements a 16-byte chunk
  const bool a_k = is_index_const(la.operands[4], 1), a_m = is_index_const(la.operands[3], 1);
  const bool b_k = is_index_const(lb.operands[3], 1), b_n = is_index_const(lb.operands[4], 1);
  if (!(a_k || a_m) || !(b_k || b_n)) return false;
  if (i8 && !(a_k && b_k)) return false;  // ldmatrix.trans moves 16-bit elements
  Panel pa, pb;
  pa.k_inner = a_k, pa.outer = a_k ? MT : KB, pa.inner = a_k ? KB : MT;
  pb.k_inner = b_k, pb.outer = b_k ? NT : KB, pb.inner = b_k ? KB : NT;
  for (Panel* p : {&pa, &pb}) {
    p->cpr = p->inner / EPC;
    if ((p->outer * p->cpr) % threads) return false;  // whole chunks per work-item
  }
  // FMA mode reads a panel contiguous along M / N as whole chunks of one row (k) at a time: the
  // lanes of a warp read 8 (A) or 4 (B) consecutive chunks, conflict-free without the swizzle,
  // which is kept only for ldmatrix and for K-contiguous panels read an element a row. Row-major
  // chunks make every read of a K step the stage's base plus a constant (an immediate offset in
  // SASS): the swizzle's XOR cost an integer instruction or two a load, ~30% of the loop's issue
  // slots next to its FFMAs (H200, f32 4096^3: 1024 FFMA and ~440 other instructions a step).
  for (Panel* p : {&pa, &pb}) p->swizzle = !(fma && !p->k_inner);
  // A K-contiguous f32 operand in FMA mode (B: the row-major A of a column-layout product, the
  // common case; A as well: a @ b.T) is stored transposed, [k][m] / [k][n] (16-byte global loads
  // stored from registers, reg_staged below; 4-byte cp.async where chunks are not whole a thread):
  // every K step's values are then VW-wide reads of one row, so a K step's fragments are 6 loads
  // (f32, 8 x 16 a lane) and the next step's are read while this one's FMAs run. Rows padded by
  // one chunk: the copies of a warp (8 K steps of 4 columns) land in 32 distinct banks.
  for (Panel* p : {&pa, &pb}) p->pitch = p->cpr;
  for (Panel* p : {&pa, &pb}) {
    const int64_t cols = p == &pa ? MT : NT;
    if (fma && p->k_inner && esz == 4 && (KB * cols) % threads == 0 && cols % 32 == 0) {
      p->trans = true, p->swizzle = false, p->k_inner = false;
      p->outer = KB, p->inner = cols, p->cpr = cols / EPC, p->pitch = p->cpr + 1;
    }
  }
  pb.offset = pa.outer * pa.pitch * 16;
  const int64_t stage_bytes = pb.offset + pb.outer * pb.pitch * 16, total = stage_bytes * stages;
  if (!stage_memory(total, 128)) return false;
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* i8t = b_.getInt8Ty();

  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  auto i64v = [&](int64_t v) { return b_.getInt64(v); };
  // The swizzle: chunk c of row r of a panel of cpr chunks a row. Rows of 8 or more chunks: c ^ (r % 8)
  // inside each group of 8; shorter rows: the same on the panel seen as 128-byte lines. Eight
  // consecutive rows at one chunk (one ldmatrix matrix) then hit 8 distinct 16-byte bank groups.
  auto swz = [&](llvm::Value* r, llvm::Value* c, const Panel& p) -> llvm::Value* {
    const int64_t cpr = p.cpr;
    if (!p.swizzle) return b_.CreateAdd(b_.CreateMul(r, c32(p.pitch)), c);
    if (cpr >= 8) return b_.CreateAdd(b_.CreateMul(r, c32(cpr)), b_.CreateXor(c, b_.CreateAnd(r, c32(7))));
    llvm::Value* L = b_.CreateAdd(b_.CreateMul(r, c32(cpr)), c);
    return b_.CreateOr(b_.CreateAnd(L, c32(~int64_t(7))),
                       b_.CreateXor(b_.CreateAnd(L, c32(7)), b_.CreateAnd(b_.CreateLShr(L, c32(3)), c32(7))));
  };
  auto smem_at = [&](llvm::Value* byte_off) {
    return b_.CreateGEP(i8t, stage_mem_, {byte_off}, "smem");
  };

  llvm::Value* sg = b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), i32, "sg");
  llvm::Value* ln = lane();
  llvm::Value* tid = b_.CreateAdd(ln, b_.CreateMul(sg, c32(32)), "tid");
  llvm::Value* wm = b_.CreateURem(sg, c32(sg_m), "wm");
  llvm::Value* wn = b_.CreateUDiv(sg, c32(sg_m), "wn");
  // The work-group's corner, bounds, bases and strides (i64).
  llvm::Value* m_wg = b_.CreateSub(scalar(la.operands[1]), b_.CreateMul(b_.CreateZExt(wm, b_.getInt64Ty()), i64v(MR)), "m_wg");
  llvm::Value* n_wg = b_.CreateSub(scalar(lb.operands[2]), b_.CreateMul(b_.CreateZExt(wn, b_.getInt64Ty()), i64v(NR)), "n_wg");
  const bool a_checked = la.int_attr("checked", 0) != 0, b_checked = lb.int_attr("checked", 0) != 0;
  llvm::Value *A = scalar(la.operands[0]), *Bp = scalar(lb.operands[0]);
  llvm::Value* sa = scalar(la.operands[a_k ? 3 : 4]);  // A's strided dimension's stride
  llvm::Value* sb = scalar(lb.operands[b_k ? 4 : 3]);
  llvm::Value *M = scalar(la.operands[5]), *Ka = scalar(la.operands[6]), *Kb = scalar(lb.operands[5]), *N = scalar(lb.operands[6]);
  llvm::Value *lo = scalar(o.operands[0]), *hi = scalar(o.operands[1]);
  llvm::Value* nk = b_.CreateSelect(b_.CreateICmpSLT(lo, hi), b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(hi, lo), i64v(KB - 1)), i64v(KB)),
                                    i64v(0), "nk");

  // A transposed panel whose 16-byte chunks along K are whole (K-contiguous f32: 4 K steps of a
  // column) is staged through registers instead of 4-byte cp.async: each work-item loads whole
  // chunks of step t + 1 (ld.global.v4) at the top of iteration t and stores them transposed (4
  // st.shared.f32) into step t + 1's slot after step t's FMAs. That slot was last read at step
  // t + 1 - stages, which every warp finished before iteration t's barrier (stages >= 2); the next
  // iteration's barrier publishes the stores. Chunk q = tid + it threads: K chunk q % (KB / VW)
  // of column q / (KB / VW); a warp's 4 stores of one K step land in 32 banks (rows padded by one
  // chunk: K chunks 0 and 1 of 16 columns are 16 banks apart).
  // Each panel's source: A: outer m (inner k) or outer k (inner m); B: outer n (inner k) or outer
  // k (inner n). A transposed panel's outer_lim is its columns' bound, inner_lim K's.
  const CpPanel srcs[2] = {{pa.outer, pa.cpr, pa.k_inner, A, sa, m_wg, a_k ? M : Ka, a_k ? Ka : M, a_checked},
                           {pb.outer, pb.cpr, pb.k_inner, Bp, sb, n_wg, b_k ? N : Kb, b_k ? Kb : N, b_checked}};
  auto reg_staged = [&](const Panel& p) { return p.trans && KB % VW == 0 && ((KB / VW) * p.inner) % threads == 0; };
  const bool any_reg = reg_staged(pa) || reg_staged(pb);
  auto stage_load = [&](llvm::Value* t) {
    llvm::Value* k0 = b_.CreateAdd(lo, b_.CreateMul(t, i64v(KB)), "k0");
    std::vector<llvm::Value*> vals;
    for (const Panel* p : {&pa, &pb}) {
      if (!reg_staged(*p)) continue;
      const CpPanel& src_p = srcs[p == &pb];
      llvm::Value *base = src_p.base, *stride = src_p.stride, *origin = src_p.origin;
      llvm::Value *col_lim = src_p.outer_lim, *k_lim = src_p.inner_lim;
      const bool checked = src_p.checked;
      auto* vt = llvm::FixedVectorType::get(b_.getFloatTy(), 4);
      for (int64_t it = 0; it < (KB / VW) * p->inner / threads; ++it) {
        llvm::Value* q = b_.CreateAdd(tid, c32(it * threads));
        llvm::Value* kc = b_.CreateURem(q, c32(KB / VW));
        llvm::Value* cc = b_.CreateUDiv(q, c32(KB / VW));
        llvm::Value* col = b_.CreateAdd(origin, b_.CreateZExt(cc, b_.getInt64Ty()));
        llvm::Value* kg = b_.CreateAdd(k0, b_.CreateZExt(b_.CreateMul(kc, c32(VW)), b_.getInt64Ty()));
        llvm::Value* src = b_.CreateGEP(i8t, base, {b_.CreateMul(b_.CreateAdd(b_.CreateMul(col, stride), kg), i64v(esz))});
        llvm::Value* valid = nullptr;
        if (checked) {  // whole chunks (K a multiple of VW: gpu_plan_kernel.cpp)
          valid = b_.CreateAnd(b_.CreateICmpSLT(col, col_lim), b_.CreateICmpSLT(kg, k_lim));
          src = b_.CreateSelect(valid, src, base);
        }
        llvm::Value* gp = b_.CreateAddrSpaceCast(src, llvm::PointerType::get(b_.getContext(), 1));
        llvm::Value* v = b_.CreateAlignedLoad(vt, gp, llvm::Align(16));
        if (valid) v = b_.CreateSelect(valid, v, llvm::Constant::getNullValue(vt));
        vals.push_back(v);
      }
    }
    return vals;
  };
  auto stage_store = [&](llvm::Value* slot, const std::vector<llvm::Value*>& vals) {
    llvm::Value* stage = b_.CreateMul(slot, c32(stage_bytes));
    size_t n = 0;
    for (const Panel* p : {&pa, &pb}) {
      if (!reg_staged(*p)) continue;
      for (int64_t it = 0; it < (KB / VW) * p->inner / threads; ++it) {
        llvm::Value* q = b_.CreateAdd(tid, c32(it * threads));
        llvm::Value* kc = b_.CreateURem(q, c32(KB / VW));
        llvm::Value* cc = b_.CreateUDiv(q, c32(KB / VW));
        llvm::Value* first = b_.CreateAdd(b_.CreateAdd(stage, c32(p->offset)),
                                          b_.CreateMul(b_.CreateAdd(b_.CreateMul(kc, c32(VW * p->pitch * EPC)), cc), c32(esz)));
        llvm::Value* v = vals[n++];
        for (int64_t j = 0; j < VW; ++j)
          b_.CreateAlignedStore(b_.CreateExtractElement(v, static_cast<uint64_t>(j)),
                                smem_at(b_.CreateAdd(first, c32(j * p->pitch * EPC * esz))), llvm::Align(esz));
      }
    }
  };

  // Starts the copies of K step t (i64) into stage slot `slot` (i32).
  auto issue = [&](llvm::Value* t, llvm::Value* slot) {
    llvm::Value* k0 = b_.CreateAdd(lo, b_.CreateMul(t, i64v(KB)), "k0");
    llvm::Value* stage = b_.CreateMul(slot, c32(stage_bytes));
    for (const Panel* p : {&pa, &pb}) {
      if (reg_staged(*p)) continue;  // through registers (stage_load / stage_store)
      if (p->trans) {  // element e = tid + it threads: K step e % KB of column e / KB, to [k][column]
        const CpPanel& src_p = srcs[p == &pb];  // (outer_lim: the columns' bound, inner_lim: K's)
        for (int64_t it = 0; it < KB * p->inner / threads; ++it) {
          llvm::Value* e = b_.CreateAdd(tid, c32(it * threads));
          llvm::Value* kk = b_.CreateURem(e, c32(KB));
          llvm::Value* cc = b_.CreateUDiv(e, c32(KB));
          llvm::Value* col = b_.CreateAdd(src_p.origin, b_.CreateZExt(cc, b_.getInt64Ty()));
          llvm::Value* kg = b_.CreateAdd(k0, b_.CreateZExt(kk, b_.getInt64Ty()));
          llvm::Value* src = b_.CreateGEP(i8t, src_p.base, {b_.CreateMul(b_.CreateAdd(b_.CreateMul(col, src_p.stride), kg), i64v(esz))});
          llvm::Value* valid = b_.getTrue();
          if (src_p.checked) {
            valid = b_.CreateAnd(b_.CreateICmpSLT(col, src_p.outer_lim), b_.CreateICmpSLT(kg, src_p.inner_lim));
            src = b_.CreateSelect(valid, src, src_p.base);
          }
          llvm::Value* to = smem_at(b_.CreateAdd(b_.CreateAdd(stage, c32(p->offset)),
                                                 b_.CreateMul(b_.CreateAdd(b_.CreateMul(kk, c32(p->pitch * EPC)), cc), c32(esz))));
          target_.async_copy4(b_, to, src, valid);
        }
        continue;
      }
      cp_async_panel(srcs[p == &pb], k0, tid, threads, EPC, esz, [&](llvm::Value* r, llvm::Value* c) {
        return smem_at(b_.CreateAdd(b_.CreateAdd(stage, c32(p->offset)), b_.CreateMul(swz(r, c, *p), c32(16))));
      });
    }
  };

  // The accumulator in C fragments: tile (mi, ni)'s c_i at D[(mi NT8 + ni) 4 + i], element
  // (mi 16 + g + 8 (i / 2), ni 8 + 2 t + i % 2) on lane 4 g + t. FMA mode: D[i TN + j] is row
  // i of the lane's rows, column j of its columns.
  const LaneMap Lc = lanes_of(tc);
  const int64_t MT16 = MR / 16, NT8 = NR / 8;
  std::vector<llvm::Value*> D;
  // Element (row, col) of the warp tile: on which lane, in which slot of D.
  auto frag_owner = [&](int64_t r, int64_t c) -> std::pair<int, int> {
    if (fma)
      return {static_cast<int>((r % (8 * VW)) / VW + 8 * ((c % (4 * VW)) / VW)),
              static_cast<int>(((r / (8 * VW)) * VW + r % VW) * TN + (c / (4 * VW)) * VW + c % VW)};
    return {static_cast<int>(4 * (r % 8) + (c % 8) / 2), static_cast<int>(((r / 16) * NT8 + c / 8) * 4 + 2 * ((r % 16) / 8) + c % 2)};
  };
  const int64_t slots = fma ? TM * TN : MT16 * NT8 * 4;
  if (fma) {
    const auto& C = mat(o.operands[3]);
    bool uniform = !C.empty() && llvm::isa<llvm::Constant>(C[0]);
    for (llvm::Value* v : C) uniform = uniform && v == C[0];
    std::vector<std::vector<int>> src(slots, std::vector<int>(S_)), slot(slots, std::vector<int>(S_));
    for (int64_t r = 0; r < MR; ++r)
      for (int64_t c = 0; c < NR; ++c) {
        auto [p, n] = frag_owner(r, c);
        auto [q, m] = Lc.owner(r, c);
        src[n][p] = static_cast<int>(q), slot[n][p] = static_cast<int>(m);
      }
    for (int64_t n = 0; n < slots; ++n) D.push_back(uniform ? C[0] : gather(C, src[n], slot[n]));
  } else {
    const auto& C = mat(o.operands[3]);
    bool uniform = !C.empty() && llvm::isa<llvm::Constant>(C[0]);
    for (llvm::Value* v : C) uniform = uniform && v == C[0];
    for (int64_t mi = 0; mi < MT16; ++mi)
      for (int64_t ni = 0; ni < NT8; ++ni)
        for (int i = 0; i < 4; ++i) {
          if (uniform) {
            D.push_back(C[0]);
            continue;
          }
          std::vector<int> src(S_), slot(S_);
          for (int p = 0; p < S_; ++p) {
            auto [q, n] = Lc.owner(mi * 16 + p / 4 + 8 * (i / 2), ni * 8 + 2 * (p % 4) + i % 2);
            src[p] = static_cast<int>(q), slot[p] = static_cast<int>(n);
          }
          D.push_back(gather(C, src, slot));
        }
  }

  // Lane parts of the ldmatrix row addresses.
  llvm::Value* l7 = b_.CreateAnd(ln, c32(7));
  llvm::Value* l8 = b_.CreateAnd(b_.CreateLShr(ln, c32(3)), c32(1));
  llvm::Value* l16 = b_.CreateLShr(ln, c32(4));
  llvm::Value* wm_rows = b_.CreateMul(wm, c32(MR));
  llvm::Value* wn_cols = b_.CreateMul(wn, c32(NR));
  const bool sa8 = ta.scalar == ScalarType::i8, sb8 = tb.scalar == ScalarType::i8;
  const llvm::Intrinsic::ID mma_id =
      i8   ? (sa8 ? (sb8 ? llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_s8 : llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_s8_u8)
                  : (sb8 ? llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_u8_s8 : llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_u8))
      : bf ? llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16
           : llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32;
  auto operand = [&](llvm::Value* w) {
    return bf || i8 ? w : b_.CreateBitCast(w, llvm::FixedVectorType::get(b_.getHalfTy(), 2));
  };

  // Prologue: the slots may still be read by a previous loop's last steps.
  target_.barrier(b_);
  for (int s = 0; s + 1 < stages; ++s) {
    emit_if(b_, fn_, b_.CreateICmpSLT(i64v(s), nk), [&] {
      issue(i64v(s), c32(s));
      return std::vector<llvm::Value*>{};
    }, [&] { return std::vector<llvm::Value*>{}; });
    target_.async_commit(b_);
  }
  if (any_reg)  // step 0 of the register-staged panels (published by the loop's first barrier)
    emit_if(b_, fn_, b_.CreateICmpSLT(i64v(0), nk), [&] {
      stage_store(c32(0), stage_load(i64v(0)));
      return std::vector<llvm::Value*>{};
    }, [&] { return std::vector<llvm::Value*>{}; });
  D = emit_for(b_, fn_, i64v(0), nk, i64v(1), D, [&](llvm::Value* i, const std::vector<llvm::Value*>& acc) {
    target_.async_wait(b_, stages - 2);  // step i has landed (this work-item's copies) ...
    target_.barrier(b_);                 // ... everyone's; and step i - 1's slot is free
    llvm::Value* next = b_.CreateAdd(i, i64v(stages - 1));
    emit_if(b_, fn_, b_.CreateICmpSLT(next, nk), [&] {
      issue(next, b_.CreateTrunc(b_.CreateURem(next, i64v(stages)), i32));
      return std::vector<llvm::Value*>{};
    }, [&] { return std::vector<llvm::Value*>{}; });
    target_.async_commit(b_);
    // Step i + 1 of the register-staged panels: loaded now, stored after this step's FMAs. In the
    // last iteration step nk - 1 again, into slot nk % stages, which no one reads any more (its
    // last reader, step nk - stages, is behind this iteration's barrier): no branch, no phis.
    llvm::Value* i1 = any_reg ? b_.CreateAdd(i, i64v(1)) : nullptr;
    std::vector<llvm::Value*> staged;
    if (any_reg) staged = stage_load(b_.CreateSelect(b_.CreateICmpSLT(i1, nk), i1, i));
    llvm::Value* stage = b_.CreateMul(b_.CreateTrunc(b_.CreateURem(i, i64v(stages)), i32), c32(stage_bytes));
    llvm::Value* a_base = stage;
    llvm::Value* b_base = b_.CreateAdd(stage, c32(pb.offset));
    std::vector<llvm::Value*> out(acc);
    if (fma) {
      // Element (outer, inner) of a panel: its chunk's swizzled place, the element inside it.
      llvm::Type* et = scalar_ty(tc.scalar);
      auto* vt = llvm::FixedVectorType::get(et, static_cast<unsigned>(VW));
      auto elems = [&](const Panel& p, llvm::Value* base, llvm::Value* outer, llvm::Value* inner, bool vec) {
        llvm::Value* off = b_.CreateAdd(b_.CreateMul(swz(outer, b_.CreateLShr(inner, c32(__builtin_ctzll(VW))), p), c32(16)),
                                        b_.CreateMul(b_.CreateAnd(inner, c32(VW - 1)), c32(esz)));
        llvm::Value* ptr = smem_at(b_.CreateAdd(base, off));
        std::vector<llvm::Value*> r;
        if (vec) {
          llvm::Value* v = b_.CreateAlignedLoad(vt, ptr, llvm::Align(16));
          for (int64_t e = 0; e < VW; ++e) r.push_back(b_.CreateExtractElement(v, static_cast<uint64_t>(e)));
        } else {
          r.push_back(b_.CreateAlignedLoad(et, ptr, llvm::Align(esz)));
        }
        return r;
      };
      llvm::Value* lr = b_.CreateMul(b_.CreateAnd(ln, c32(7)), c32(VW));   // the lane's first row in a group of 8 VW
      llvm::Value* lc = b_.CreateMul(b_.CreateLShr(ln, c32(3)), c32(VW));  // its first column in a group of 4 VW
      // A row-major panel contiguous along M / N (no swizzle): the lane's vector of row k, group h
      // is at the stage's base plus the lane's offset (once an iteration) plus a constant, so the
      // constant stays an immediate of the load (not a register a load hoisted out of the loop).
      auto plain_vec = [&](const Panel& p, llvm::Value* base, llvm::Value* first, int64_t k, int64_t inner_const) {
        llvm::Value* lane_base = smem_at(b_.CreateAdd(base, b_.CreateMul(first, c32(esz))));
        llvm::Value* ptr = b_.CreateConstGEP1_64(i8t, lane_base, static_cast<uint64_t>(k * p.pitch * 16 + inner_const * esz));
        llvm::Value* v = b_.CreateAlignedLoad(vt, ptr, llvm::Align(16));
        std::vector<llvm::Value*> r;
        for (int64_t e = 0; e < VW; ++e) r.push_back(b_.CreateExtractElement(v, static_cast<uint64_t>(e)));
        return r;
      };
      llvm::Value* a_first = b_.CreateAdd(wm_rows, lr);
      llvm::Value* b_first = b_.CreateAdd(wn_cols, lc);
      // The fragments of K step k: A's TM and B's TN values of the lane.
      auto fragments = [&](int64_t k) {
        std::vector<llvm::Value*> av, bv;
        for (int64_t h = 0; h < TM / VW; ++h) {
          llvm::Value* m = b_.CreateAdd(wm_rows, b_.CreateAdd(lr, c32(h * 8 * VW)));
          if (!pa.k_inner && !pa.swizzle) {
            auto v = plain_vec(pa, a_base, a_first, k, h * 8 * VW);
            av.insert(av.end(), v.begin(), v.end());
          } else if (!pa.k_inner) {  // [k][m]: one vector
            auto v = elems(pa, a_base, c32(k), m, true);
            av.insert(av.end(), v.begin(), v.end());
          } else {
            for (int64_t e = 0; e < VW; ++e) av.push_back(elems(pa, a_base, b_.CreateAdd(m, c32(e)), c32(k), false)[0]);
          }
        }
        for (int64_t h = 0; h < TN / VW; ++h) {
          llvm::Value* n = b_.CreateAdd(wn_cols, b_.CreateAdd(lc, c32(h * 4 * VW)));
          if (!pb.k_inner && !pb.swizzle) {
            auto v = plain_vec(pb, b_base, b_first, k, h * 4 * VW);
            bv.insert(bv.end(), v.begin(), v.end());
          } else if (!pb.k_inner) {  // [k][n]
            auto v = elems(pb, b_base, c32(k), n, true);
            bv.insert(bv.end(), v.begin(), v.end());
          } else {
            for (int64_t e = 0; e < VW; ++e) bv.push_back(elems(pb, b_base, b_.CreateAdd(n, c32(e)), c32(k), false)[0]);
          }
        }
        return std::make_pair(av, bv);
      };
      // Step k + 1's fragments are read before step k's FMAs (registers for two steps' fragments).
      auto cur = fragments(0);
      for (int64_t k = 0; k < KB; ++k) {
        decltype(cur) next;
        if (k + 1 < KB) next = fragments(k + 1);
        const auto& [av, bv] = cur;
        for (int64_t i = 0; i < TM; ++i)
          for (int64_t j = 0; j < TN; ++j)
            out[i * TN + j] = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {et}, {av[i], bv[j], out[i * TN + j]});
        cur = std::move(next);
      }
      if (any_reg) stage_store(b_.CreateTrunc(b_.CreateURem(i1, i64v(stages)), i32), staged);
      return out;
    }
    // The fragments of every K step of the stage first (ldmatrix in flight together), then the mmas.
    // (Measured on the H100, bf16 4096^3 / 8192^3: 346 / 367 TFLOP/s with each K step's fragments
    // right before its mmas, 328-344 / 368-370 this way: the same within the spread.)
    std::vector<std::vector<std::vector<llvm::Value*>>> afs, bfs;
    auto run_mmas = [&](int64_t kk) {
      const auto &af = afs[kk], &bfr = bfs[kk];
      for (int64_t mi = 0; mi < MT16; ++mi)
        for (int64_t ni = 0; ni < NT8; ++ni) {
          std::vector<llvm::Value*> args;
          for (llvm::Value* w : af[mi]) args.push_back(operand(w));
          for (llvm::Value* w : bfr[ni]) args.push_back(operand(w));
          for (int i = 0; i < 4; ++i) args.push_back(out[(mi * NT8 + ni) * 4 + i]);
          llvm::Value* res = b_.CreateIntrinsic(mma_id, llvm::ArrayRef<llvm::Type*>(), llvm::ArrayRef<llvm::Value*>(args));
          for (int i = 0; i < 4; ++i) out[(mi * NT8 + ni) * 4 + i] = b_.CreateExtractValue(res, {static_cast<unsigned>(i)});
        }
    };
    for (int64_t kk = 0; kk < KB / kstep; ++kk) {  // one mma K step
      std::vector<std::vector<llvm::Value*>> af(MT16), bfr(NT8);
      for (int64_t mi = 0; mi < MT16; ++mi) {
        llvm::Value *r, *c;
        if (pa.k_inner) {  // [m][k]: rows m, chunk along k
          r = b_.CreateAdd(b_.CreateAdd(wm_rows, c32(mi * 16)), b_.CreateAdd(l7, b_.CreateShl(l8, 3)));
          c = b_.CreateAdd(c32(kk * 2), l16);
        } else {  // [k][m], transposed
          r = b_.CreateAdd(c32(kk * 16), b_.CreateAdd(l7, b_.CreateShl(l16, 3)));
          c = b_.CreateAdd(b_.CreateLShr(b_.CreateAdd(wm_rows, c32(mi * 16)), c32(3)), l8);
        }
        af[mi] = target_.load_matrix_x4(b_, smem_at(b_.CreateAdd(a_base, b_.CreateMul(swz(r, c, pa), c32(16)))), !pa.k_inner);
      }
      for (int64_t nj = 0; nj < NR / 16; ++nj) {
        llvm::Value *r, *c;
        if (pb.k_inner) {  // [n][k]
          r = b_.CreateAdd(b_.CreateAdd(wn_cols, c32(nj * 16)), b_.CreateAdd(l7, b_.CreateShl(l16, 3)));
          c = b_.CreateAdd(c32(kk * 2), l8);
        } else {  // [k][n], transposed
          r = b_.CreateAdd(c32(kk * 16), b_.CreateAdd(l7, b_.CreateShl(l8, 3)));
          c = b_.CreateAdd(b_.CreateLShr(b_.CreateAdd(wn_cols, c32(nj * 16)), c32(3)), l16);
        }
        auto w = target_.load_matrix_x4(b_, smem_at(b_.CreateAdd(b_base, b_.CreateMul(swz(r, c, pb), c32(16)))), !pb.k_inner);
        bfr[2 * nj] = {w[0], w[1]};
        bfr[2 * nj + 1] = {w[2], w[3]};
      }
      afs.push_back(af), bfs.push_back(bfr);
    }
    for (int64_t kk = 0; kk < KB / kstep; ++kk) run_mmas(kk);
    return out;
  });
  target_.async_wait(b_, 0);

  // Back into the accumulator's layout (as simt_mma.cpp): element (row, col) is c_i of tile
  // (row / 16, col / 8) on lane 4 (row % 8) + (col % 8) / 2, i = 2 ((row % 16) / 8) + col % 2.
  bind(o.results, gather_from(D, Lc, tc.scalar, frag_owner));
  return true;
}

}  // namespace coopjit
