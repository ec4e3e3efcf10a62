// The Hopper warpgroup pipeline of the SIMT lowering (NVIDIA sm_90a): the K loop of the GEMM
// recipes that simt_mma_pipeline.cpp lowers with mma.sync,
//   for k in [lo, hi) step 64  {mma_pipeline = stages, sg_m = warps along M, wgmma = 1}
//     a = coopmatrix.load A (16 x 64), b = coopmatrix.load B (64 x nr), acc = mul_add(a, b, acc)
// here on wgmma.mma_async. Warp s of the work-group holds rows (s % sg_m) 16.. of the work-group's
// tile and columns (s / sg_m) nr..; four consecutive warps (sg_m a multiple of 4) are one
// warpgroup and hold a 64 x nr block, which one wgmma m64n{nr}k16 per 16 K computes. Its D
// fragment is, on each warp, that of nr / 8 mma.sync m16n8 C fragments side by side (PTX ISA,
// "wgmma D matrix fragment": row 16 (warp % 4) + lane / 4 (+ 8), columns 8 j + 2 (lane % 4) (+ 1)),
// so the accumulators move into the coopmatrix layout as in the mma.sync pipeline.
//   - Each K step's A (sg_m 16 x 64) and B (64 x sg_n nr) panels are copied global -> shared
//     memory by all work-items with cp.async (16-byte chunks, zero fill outside the matrix), in
//     `stages` slots, stages - 1 steps ahead; with attribute tma by the Tensor Memory Accelerator
//     into the same layouts instead, on mbarriers (simt_tma.cpp: its K loop, the rest shared);
//   - the panels are stored in the canonical layouts of wgmma's 128-byte swizzle (PTX ISA, "Shared
//     Memory Matrix Layout"): rows of 128 bytes, 16-byte chunk c of row r at chunk c ^ (r % 8),
//     8 rows a 1024-byte atom (the slots 1024-byte aligned). K-major operands (contiguous along K):
//     a row is one M / N index's 64 K values; matrix descriptor SBO = 1024 (8 rows on), the K
//     step j of 16 at +32 j bytes. M- / N-major operands (contiguous along M / N): a row is one
//     K index's 64 M / N values, atoms of 64 columns 8192 bytes apart (LBO), 8 K rows 1024
//     bytes apart (SBO), the K step j at +2048 j bytes; the instruction's transpose bit set;
//   - a step: wait for this work-item's copies of step i, fence.proxy.async (cp.async writes
//     through the generic proxy; wgmma reads through the async proxy), a barrier, wgmma.fence,
//     4 wgmmas, commit; wgmma.wait_group 1 (step i - 1's wgmmas are done) and a second barrier
//     (in every warpgroup), then the copies of step i + stages - 1 into step i - 1's slot while
//     step i's wgmmas run. (Measured on the H100, bf16 4096^3: 3 stages 276 TFLOP/s, 4 stages
//     470, with the copies stages - 2 steps ahead and one barrier a step.)
// 8-bit operands (s8 / u8 -> s32, m64nNk32; SimtTarget::wgmma_int8) take the same path with K steps
// of 128: a K-major row is again 128 bytes, a wgmma's K again 32 bytes, so every layout, descriptor
// and copy above is the same in bytes. 8-bit wgmma has no transpose: both operands must be K-major
// (the plan copies others K-major first: gpu_plan.h, kmajor).
// The recipe plans it only with 16-byte aligned bases, non-unit strides that are multiples of 8
// elements and contiguous extents that are multiples of 8 (as the mma.sync pipeline).
#include <llvm/IR/InlineAsm.h>

#include "lower/ir_to_llvm.h"
#include "lower/simt_lowering.h"

namespace coopjit {

std::vector<llvm::Value*> SimtTarget::wgmma(llvm::IRBuilder<>&, const std::vector<llvm::Value*>&, llvm::Value*, llvm::Value*,
                                            int, bool, bool, bool) const {
  throw UserError(cat("SIMT lowering for ", name(), ": wgmma (warpgroup matrices) needs an NVIDIA sm_90a target"));
}
std::vector<llvm::Value*> SimtTarget::wgmma_int8(llvm::IRBuilder<>&, const std::vector<llvm::Value*>&, llvm::Value*, llvm::Value*,
                                                 int, bool, bool) const {
  throw UserError(cat("SIMT lowering for ", name(), ": wgmma (warpgroup matrices) needs an NVIDIA sm_90a target"));
}
void SimtTarget::wgmma_fence(llvm::IRBuilder<>&) const {
  throw UserError(cat("SIMT lowering for ", name(), ": wgmma.fence needs an NVIDIA sm_90a target"));
}
void SimtTarget::wgmma_commit(llvm::IRBuilder<>&) const {
  throw UserError(cat("SIMT lowering for ", name(), ": wgmma.commit_group needs an NVIDIA sm_90a target"));
}
void SimtTarget::wgmma_wait(llvm::IRBuilder<>&, int) const {
  throw UserError(cat("SIMT lowering for ", name(), ": wgmma.wait_group needs an NVIDIA sm_90a target"));
}
void SimtTarget::async_proxy_fence(llvm::IRBuilder<>&) const {
  throw UserError(cat("SIMT lowering for ", name(), ": fence.proxy.async needs an NVIDIA sm_90 target"));
}
namespace {
[[noreturn]] void no_tma(const SimtTarget& t, const char* what) {
  throw UserError(cat("SIMT lowering for ", t.name(), ": ", what, " needs an NVIDIA sm_90 target"));
}
}  // namespace
void SimtTarget::mbarrier_init(llvm::IRBuilder<>&, llvm::Value*, int) const { no_tma(*this, "mbarrier.init"); }
void SimtTarget::mbarrier_inval(llvm::IRBuilder<>&, llvm::Value*) const { no_tma(*this, "mbarrier.inval"); }
void SimtTarget::mbarrier_init_fence(llvm::IRBuilder<>&) const { no_tma(*this, "fence.mbarrier_init"); }
void SimtTarget::mbarrier_arrive(llvm::IRBuilder<>&, llvm::Value*) const { no_tma(*this, "mbarrier.arrive"); }
void SimtTarget::mbarrier_arrive_expect_tx(llvm::IRBuilder<>&, llvm::Value*, llvm::Value*) const {
  no_tma(*this, "mbarrier.arrive.expect_tx");
}
llvm::Value* SimtTarget::mbarrier_try_wait(llvm::IRBuilder<>&, llvm::Value*, llvm::Value*) const {
  no_tma(*this, "mbarrier.try_wait");
}
void SimtTarget::tensor_load_2d(llvm::IRBuilder<>&, llvm::Value*, llvm::Value*, llvm::Value*, llvm::Value*, llvm::Value*) const {
  no_tma(*this, "cp.async.bulk.tensor (the Tensor Memory Accelerator)");
}
void SimtTarget::mark_cluster(llvm::Function&, int) const { no_tma(*this, "thread-block clusters"); }
llvm::Value* SimtTarget::cluster_rank(llvm::IRBuilder<>&) const {
  no_tma(*this, "%cluster_ctarank");
  return nullptr;
}
void SimtTarget::cluster_sync(llvm::IRBuilder<>&) const { no_tma(*this, "barrier.cluster"); }
void SimtTarget::mbarrier_arrive_cluster(llvm::IRBuilder<>&, llvm::Value*, llvm::Value*) const {
  no_tma(*this, "mbarrier.arrive.shared::cluster");
}
void SimtTarget::tensor_load_2d_multicast(llvm::IRBuilder<>&, llvm::Value*, llvm::Value*, llvm::Value*, llvm::Value*, llvm::Value*,
                                          llvm::Value*) const {
  no_tma(*this, "cp.async.bulk.tensor .multicast::cluster");
}

bool SimtLowering::wgmma_pipeline(const Op& o) {
  if (!target_.warpgroup_mma() || !target_.async_copies() || S_ != 32) return false;
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
  // 8-bit operands (s8 / u8 -> s32; wgmma m64nNk32): K steps of 128, so that a K-major panel's
  // rows are 128 bytes as the 16-bit ones' are, and the layouts, descriptors and copies below are
  // the same in bytes (a wgmma's K of 32 bytes at +32 j bytes).
  auto byte = [](ScalarType s) { return s == ScalarType::i8 || s == ScalarType::u8; };
  const bool i8 = byte(ta.scalar) && byte(tb.scalar) && tc.scalar == ScalarType::i32;
  if (!i8 && (ta.scalar != tb.scalar || (!bf && ta.scalar != ScalarType::f16) || tc.scalar != ScalarType::f32)) return false;
  const int64_t esz = i8 ? 1 : 2, EPC = 16 / esz;  // bytes an element, elements a 16-byte chunk
  const int64_t MR = tc.rows, NR = tc.cols, KB = ta.cols;
  // N tiles: multiples of 64; with TMA and a K-major B any multiple of 8 up to 256 (wgmma's n: a
  // K-major panel's rows are whole 8-row swizzle atoms; an N-major one's atoms are 64 columns wide).
  const bool tma = o.int_attr("tma", 0) != 0;
  const bool b_k_early = is_index_const(lb.operands[3], 1);
  if (MR != 16 || NR % 8 || NR > 256 || (NR % 64 && !(tma && b_k_early)) || KB * esz != 128 || !is_index_const(o.operands[2], KB))
    return false;
  const int sg_m = static_cast<int>(o.int_attr("sg_m", 1)), stages = static_cast<int>(o.int_attr("mma_pipeline", 0));
  if (sg_m < 4 || sg_m % 4 || sgs_ % sg_m || stages < 2) return false;
  const int sg_n = sgs_ / sg_m, threads = 32 * sgs_;
  const int64_t MT = MR * sg_m, NT = NR * sg_n;
  const bool a_k = is_index_const(la.operands[4], 1), a_m = is_index_const(la.operands[3], 1);
  const bool b_k = is_index_const(lb.operands[3], 1), b_n = is_index_const(lb.operands[4], 1);
  if (!(a_k || a_m) || !(b_k || b_n)) return false;
  if (i8 && !(a_k && b_k)) return false;  // 8-bit wgmma reads K-major operands only
  // Panels: `outer` rows of cpr chunks in global memory (rows along the strided dimension).
  struct Panel {
    int64_t outer, cpr, offset;
    bool k_inner;
  };
  Panel pa{a_k ? MT : KB, (a_k ? KB : MT) / EPC, 0, a_k};
  Panel pb{b_k ? NT : KB, (b_k ? KB : NT) / EPC, MT * KB * esz, b_k};
  for (const Panel* p : {&pa, &pb})
    if (!tma && (p->outer * p->cpr) % threads) return false;  // whole chunks per work-item (cp.async)
  // TMA (attribute tma): tensor maps 0 (A) and 1 (B) after the IR's parameters (and 2, C's, with
  // attribute tma_store: frag_store's TMA stores); K-contiguous
  // panels in boxes of tma_box_* rows, M- / N-contiguous ones in boxes of 64 x KB (one atom column).
  const int64_t box_a = o.int_attr("tma_box_a", 64), box_b = o.int_attr("tma_box_b", 64);
  const size_t maps = o.int_attr("tma_store", 0) ? 3 : 2;
  if (tma && (!target_.async_bulk_copies() || fn_->arg_size() != f_.params.size() + maps || box_a < 64 || box_a > 256 ||
              box_b < 8 || box_b > 256 || box_b % 8 || MT % box_a || NT % box_b || MT % 64 || NT % (b_k ? 8 : 64)))
    return false;
  const int64_t stage_bytes = (MT + NT) * KB * esz;
  const int64_t total = stage_bytes * stages + 1024 + (tma ? 16 * stages : 0);  // + alignment to 1024, the mbarriers
  // Attribute epi_smem: each warp's staging region for the epilogue (frag_store), after the
  // stages and mbarriers, when the kernel's shared memory has room for it.
  // Attribute tma_store: the regions start on a 1024-byte boundary (TMA stores' swizzled boxes).
  const bool tma_store = tma && o.int_attr("tma_store", 0) != 0;
  const int64_t epi_at = stage_bytes * stages + (tma ? 16 * stages : 0), epi_want = o.int_attr("epi_smem", 0);
  const int64_t epi_off = tma_store ? (epi_at + 1023) / 1024 * 1024 : epi_at;
  int64_t epi_bytes = 0;
  if (epi_want > 0 && epi_want % 16 == 0 && stage_memory(total + (epi_off - epi_at) + sgs_ * epi_want, 1024)) epi_bytes = epi_want;
  else if (!stage_memory(total, 1024)) return false;
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* i8t = b_.getInt8Ty();

  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  auto i64v = [&](int64_t v) { return b_.getInt64(v); };
  // The slots start at the first 1024-byte boundary of the stage memory (the swizzle repeats every
  // 1024 bytes and the descriptors' base offset is 0): `base` in the shared window, `pad` bytes on.
  llvm::Value* mem_addr = b_.CreateTrunc(b_.CreatePtrToInt(stage_mem_, i64), i32, "smem_addr");
  llvm::Value* base = b_.CreateAnd(b_.CreateAdd(mem_addr, c32(1023)), c32(~int64_t(1023)), "smem_base");
  llvm::Value* pad = b_.CreateSub(base, mem_addr, "smem_pad");
  auto smem_at = [&](llvm::Value* byte_off) { return b_.CreateGEP(i8t, stage_mem_, {b_.CreateAdd(pad, byte_off)}, "smem"); };
  // Chunk c of row r of a panel: K-major rows are 128 bytes (8 chunks); M- / N-major rows are
  // split into 64-element atoms of KB rows (8192 bytes a column of atoms).
  auto place = [&](const Panel& p, llvm::Value* r, llvm::Value* c) -> llvm::Value* {
    llvm::Value* r7 = b_.CreateAnd(r, c32(7));
    if (p.k_inner) return b_.CreateAdd(b_.CreateMul(r, c32(128)), b_.CreateMul(b_.CreateXor(c, r7), c32(16)));
    llvm::Value* atom = b_.CreateMul(b_.CreateLShr(c, c32(3)), c32(KB * 128));
    return b_.CreateAdd(b_.CreateAdd(atom, b_.CreateMul(r, c32(128))), b_.CreateMul(b_.CreateXor(b_.CreateAnd(c, c32(7)), r7), c32(16)));
  };

  llvm::Value* sg = b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), i32, "sg");
  llvm::Value* ln = lane();
  llvm::Value* tid = b_.CreateAdd(ln, b_.CreateMul(sg, c32(32)), "tid");
  llvm::Value* wm = b_.CreateURem(sg, c32(sg_m), "wm");
  llvm::Value* wn = b_.CreateUDiv(sg, c32(sg_m), "wn");
  llvm::Value* m_wg = b_.CreateSub(scalar(la.operands[1]), b_.CreateMul(b_.CreateZExt(wm, i64), i64v(MR)), "m_wg");
  llvm::Value* n_wg = b_.CreateSub(scalar(lb.operands[2]), b_.CreateMul(b_.CreateZExt(wn, i64), i64v(NR)), "n_wg");
  const bool a_checked = la.int_attr("checked", 0) != 0, b_checked = lb.int_attr("checked", 0) != 0;
  llvm::Value *A = scalar(la.operands[0]), *Bp = scalar(lb.operands[0]);
  llvm::Value* sa = scalar(la.operands[a_k ? 3 : 4]);  // the strided dimension's stride
  llvm::Value* sb = scalar(lb.operands[b_k ? 4 : 3]);
  llvm::Value *M = scalar(la.operands[5]), *Ka = scalar(la.operands[6]), *Kb = scalar(lb.operands[5]), *N = scalar(lb.operands[6]);
  llvm::Value *lo = scalar(o.operands[0]), *hi = scalar(o.operands[1]);
  llvm::Value* nk = b_.CreateSelect(b_.CreateICmpSLT(lo, hi), b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(hi, lo), i64v(KB - 1)), i64v(KB)),
                                    i64v(0), "nk");

  // Starts the copies of K step t (i64) into slot `slot` (i32).
  auto issue = [&](llvm::Value* t, llvm::Value* slot) {
    llvm::Value* k0 = b_.CreateAdd(lo, b_.CreateMul(t, i64v(KB)), "k0");
    llvm::Value* stage = b_.CreateMul(slot, c32(stage_bytes));
    struct Src { const Panel& p; llvm::Value *base, *stride, *origin, *outer_lim, *inner_lim; bool checked; };
    const Src srcs[2] = {{pa, A, sa, m_wg, a_k ? M : Ka, a_k ? Ka : M, a_checked},
                         {pb, Bp, sb, n_wg, b_k ? N : Kb, b_k ? Kb : N, b_checked}};
    for (const Src& s : srcs) {
      const Panel& p = s.p;
      for (int64_t it = 0; it < p.outer * p.cpr / threads; ++it) {
        llvm::Value* q = b_.CreateAdd(tid, c32(it * threads));
        llvm::Value* r = b_.CreateUDiv(q, c32(p.cpr));
        llvm::Value* c = b_.CreateURem(q, c32(p.cpr));
        llvm::Value* r64 = b_.CreateZExt(r, i64);
        llvm::Value* c64 = b_.CreateMul(b_.CreateZExt(c, i64), i64v(EPC));
        llvm::Value* outer = b_.CreateAdd(p.k_inner ? s.origin : k0, r64);
        llvm::Value* inner = b_.CreateAdd(p.k_inner ? k0 : s.origin, c64);
        llvm::Value* elem = b_.CreateAdd(b_.CreateMul(outer, s.stride), inner);
        llvm::Value* src = b_.CreateGEP(i8t, s.base, {b_.CreateMul(elem, i64v(esz))});
        llvm::Value* valid = b_.getTrue();
        if (s.checked) {
          valid = b_.CreateAnd(b_.CreateICmpSLT(outer, s.outer_lim), b_.CreateICmpSLT(inner, s.inner_lim));
          src = b_.CreateSelect(valid, src, s.base);
        }
        target_.async_copy16(b_, smem_at(b_.CreateAdd(b_.CreateAdd(stage, c32(p.offset)), place(p, r, c))), src, valid);
      }
    }
  };

  // The accumulators: D[ni 4 + i] is c_i of the m16n8 block ni (element (g + 8 (i / 2),
  // ni 8 + 2 t + i % 2) on lane 4 g + t), which is also the order of wgmma's D registers.
  const LaneMap Lc = lanes_of(tc);
  const int64_t NT8 = NR / 8;
  std::vector<llvm::Value*> D;
  Frag init_shape;  // an initial value loaded from memory (Stream-K's partial tiles): at the fragment's positions
  init_shape.type = o.operands[3]->type;
  init_shape.d.resize(static_cast<size_t>(NT8 * 4));
  if (auto x = o.operands[3]->def && o.operands[3]->def->kind == OpKind::mat_load ? frag_like(o.operands[3], init_shape) : std::nullopt) {
    D = *x;
  } else {
    const auto& C = mat(o.operands[3]);
    bool uniform = !C.empty() && llvm::isa<llvm::Constant>(C[0]);
    for (llvm::Value* v : C) uniform = uniform && v == C[0];
    for (int64_t ni = 0; ni < NT8; ++ni)
      for (int i = 0; i < 4; ++i) {
        if (uniform) {
          D.push_back(C[0]);
          continue;
        }
        std::vector<int> src(S_), slot(S_);
        for (int p = 0; p < S_; ++p) {
          auto [q, n] = Lc.owner(p / 4 + 8 * (i / 2), ni * 8 + 2 * (p % 4) + i % 2);
          src[p] = static_cast<int>(q), slot[p] = static_cast<int>(n);
        }
        D.push_back(gather(C, src, slot));
      }
  }

  // Matrix descriptors (PTX ISA, "Matrix Descriptor Format"): start address >> 4 (bits 0-13),
  // LBO >> 4 (16-29), SBO >> 4 (32-45), base offset 0, swizzle mode 1 = 128 bytes (62-63).
  auto desc = [&](llvm::Value* addr, int64_t lbo, int64_t sbo) {
    llvm::Value* a = b_.CreateZExt(b_.CreateAnd(b_.CreateLShr(addr, c32(4)), c32(0x3FFF)), i64);
    const uint64_t fixed = (uint64_t((lbo >> 4) & 0x3FFF) << 16) | (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
    return b_.CreateOr(a, b_.getInt64(fixed));
  };
  llvm::Value* wg_row = b_.CreateMul(b_.CreateUDiv(wm, c32(4)), c32(64));  // the warpgroup's first row
  llvm::Value* wg_col = b_.CreateMul(wn, c32(NR));                          // and column
  // The panel's address of K step j (16 K) for the warpgroup's rows / columns starting at `first`.
  auto operand_addr = [&](llvm::Value* panel, const Panel& p, llvm::Value* first, int64_t j) {
    if (p.k_inner) return b_.CreateAdd(panel, b_.CreateAdd(b_.CreateMul(first, c32(128)), c32(32 * j)));
    return b_.CreateAdd(panel, b_.CreateAdd(b_.CreateMul(b_.CreateLShr(first, c32(6)), c32(KB * 128)), c32(2048 * j)));
  };

  // One K step's wgmmas on the panels of the stage at `stage`.
  auto multiply = [&](llvm::Value* stage, std::vector<llvm::Value*> out) {
    llvm::Value* a_panel = stage;
    llvm::Value* b_panel = b_.CreateAdd(stage, c32(pb.offset));
    target_.wgmma_fence(b_);
    for (int64_t j = 0; j < KB * esz / 32; ++j) {  // one wgmma per 32 bytes of K
      llvm::Value* da = desc(operand_addr(a_panel, pa, wg_row, j), pa.k_inner ? 16 : KB * 128, 1024);
      llvm::Value* db = desc(operand_addr(b_panel, pb, wg_col, j), pb.k_inner ? 16 : KB * 128, 1024);
      out = i8 ? target_.wgmma_int8(b_, out, da, db, static_cast<int>(NR), ta.scalar == ScalarType::i8, tb.scalar == ScalarType::i8)
               : target_.wgmma(b_, out, da, db, static_cast<int>(NR), bf, !pa.k_inner, !pb.k_inner);
    }
    target_.wgmma_commit(b_);
    return out;
  };
  if (tma && o.int_attr("persistent", 0)) {  // warp specialized, one tile of a persistent walk (simt_tma_ws.cpp)
    D = ws_tma_loop(D, multiply, TmaLoop{lo, m_wg, n_wg, nk, base, tid, stage_bytes, stages, MT, NT, KB, pb.offset, box_a, box_b,
                                         pa.k_inner, pb.k_inner},
                    hi, M, N, o.int_attr("group_m", 0), o.int_attr("stream_k_kt", 0), o.int_attr("stream_k_down", 0) != 0,
                    o.int_attr("stream_k_prefetch", 0), o.int_attr("stream_k_stage_read", 0), o.int_attr("stream_k_stage_store", 0),
                    o.int_attr("stream_k_stage_store_groups", 1));
  } else if (tma) {
    D = tma_loop(D, multiply, TmaLoop{lo, m_wg, n_wg, nk, base, tid, stage_bytes, stages, MT, NT, KB, pb.offset, box_a, box_b,
                                      pa.k_inner, pb.k_inner});
  } else {
    // Prologue: the slots may still be read by a previous loop's last steps.
    target_.barrier(b_);
    for (int s = 0; s + 1 < stages; ++s) {
      emit_if(b_, fn_, b_.CreateICmpSLT(i64v(s), nk), [&] {
        issue(i64v(s), c32(s));
        return std::vector<llvm::Value*>{};
      }, [&] { return std::vector<llvm::Value*>{}; });
      target_.async_commit(b_);
    }
    D = emit_for(b_, fn_, i64v(0), nk, i64v(1), D, [&](llvm::Value* i, const std::vector<llvm::Value*>& acc) {
      target_.async_wait(b_, stages - 2);  // this work-item's copies of step i have landed ...
      target_.async_proxy_fence(b_);       // ... are visible to the tensor cores ...
      target_.barrier(b_);                 // ... everyone's
      llvm::Value* stage = b_.CreateAdd(base, b_.CreateMul(b_.CreateTrunc(b_.CreateURem(i, i64v(stages)), i32), c32(stage_bytes)));
      std::vector<llvm::Value*> out = multiply(stage, acc);
      // Step i - 1's wgmmas done in this warpgroup, then in every warpgroup (the barrier): its slot
      // takes step i + stages - 1 while step i's wgmmas run.
      target_.wgmma_wait(b_, 1);
      target_.barrier(b_);
      llvm::Value* next = b_.CreateAdd(i, i64v(stages - 1));
      emit_if(b_, fn_, b_.CreateICmpSLT(next, nk), [&] {
        issue(next, b_.CreateTrunc(b_.CreateURem(next, i64v(stages)), i32));
        return std::vector<llvm::Value*>{};
      }, [&] { return std::vector<llvm::Value*>{}; });
      target_.async_commit(b_);
      return out;
    });
    target_.wgmma_wait(b_, 0);
    target_.async_wait(b_, 0);
  }
  // The accumulators are read only after the wait: each passes through an empty asm statement
  // with side effects, which the compiler keeps after wgmma.wait_group.
  {
    llvm::Type* dt = i8 ? b_.getInt32Ty() : b_.getFloatTy();
    auto* fty = llvm::FunctionType::get(dt, {dt}, false);
    auto* keep = llvm::InlineAsm::get(fty, "", i8 ? "=r,0" : "=f,0", /*hasSideEffects=*/true);
    for (llvm::Value*& v : D) v = b_.CreateCall(fty, keep, {v});
  }

  // The accumulators stay in D's order (Frag; mat() gathers them into the layout where needed).
  // Without staging, gathered here as before (once, rather than in each branch of the epilogue).
  COOPJIT_INTERNAL_ASSERT(o.results.size() == 1);
  Frag fr{D, tc, pad, epi_off, epi_bytes,
          tma_store && epi_bytes >= 2048 && epi_bytes % 1024 == 0 ? static_cast<int>(o.int_attr("tma_store", 0)) : 0, {}};
  if (epi_bytes) frags_[o.results[0]] = fr;
  else bind(o.results, frag_layout(fr));
  return true;
}

llvm::Value* SimtLowering::frag_at(const Frag& f, size_t q) {
  llvm::Value* v = f.d.at(q);
  for (const auto& step : f.pending) v = step(v, q);
  return v;
}

std::vector<llvm::Value*> SimtLowering::frag_values(const Frag& f) {
  if (f.pending.empty()) return f.d;
  std::vector<llvm::Value*> out(f.d.size());
  for (size_t q = 0; q < out.size(); ++q) out[q] = frag_at(f, q);
  return out;
}

// A fused epilogue's activation (or the user's function) on each component where it is: the
// region with the element's row and column in the 16 x NR tile (D[ni 4 + i] of lane 4 g + t:
// (g + 8 (i / 2), 8 ni + 2 t + i % 2)). Gathering the fragment into the coopmatrix layout first
// (mat()) cost 1024 shuffles a tile's epilogue and kept both copies live (ptxas: ~3 KB of spill
// stores a thread in the Hopper kernel's bias + GELU epilogue, session 20).
std::optional<std::function<llvm::Value*(llvm::Value*, size_t)>> SimtLowering::per_element_step(const Op& o, const Frag& f,
                                                                                                  int depth) {
  std::vector<std::vector<llvm::Value*>> mats(o.operands.size());
  std::vector<llvm::Value*> scalars(o.operands.size(), nullptr);
  for (size_t e = 1; e < o.operands.size(); ++e) {
    if (!o.operands[e]->type.is_matrix()) {
      scalars[e] = scalar(o.operands[e]);
      continue;
    }
    auto x = frag_like(o.operands[e], f, depth + 1);
    if (!x) return std::nullopt;
    mats[e] = *x;
  }
  const Op* op = &o;
  return [this, op, mats, scalars](llvm::Value* v, size_t q) {
    llvm::Type* i64 = b_.getInt64Ty();
    llvm::Value* g = b_.CreateZExt(b_.CreateLShr(lane(), b_.getInt32(2)), i64);
    llvm::Value* t2 = b_.CreateZExt(b_.CreateMul(b_.CreateAnd(lane(), b_.getInt32(3)), b_.getInt32(2)), i64);
    const int64_t ni = static_cast<int64_t>(q / 4), i = static_cast<int64_t>(q % 4);
    std::vector<llvm::Value*> args{b_.CreateAdd(g, b_.getInt64(8 * (i / 2))), b_.CreateAdd(t2, b_.getInt64(8 * ni + i % 2)), v};
    for (size_t e = 1; e < op->operands.size(); ++e) args.push_back(scalars[e] ? scalars[e] : mats[e][q]);
    return lower_region(*op->regions[0], args);
  };
}

std::vector<llvm::Value*> SimtLowering::frag_layout(const Frag& f) {
  // D[ni 4 + i] is c_i of the m16n8 block ni: element (g + 8 (i / 2), ni 8 + 2 t + i % 2) on lane 4 g + t.
  auto frag_owner = [](int64_t r, int64_t c) -> std::pair<int, int> {
    return {static_cast<int>(4 * (r % 8) + (c % 8) / 2), static_cast<int>((c / 8) * 4 + 2 * (r / 8) + c % 2)};
  };
  const LaneMap Lc = lanes_of(f.type);
  const std::vector<llvm::Value*> d = frag_values(f);
  std::vector<llvm::Value*> C(static_cast<size_t>(Lc.comps()));
  for (int64_t n = 0; n < Lc.comps(); ++n) {
    if (Lc.inside(n) == 0) {
      C[n] = zero(f.type.scalar);
      continue;
    }
    std::vector<int> src(S_, -1), slot(S_, -1);
    for (int p = 0; p < S_; ++p) {
      auto [r, c] = Lc.at(p, n);
      if (r < 0) continue;
      std::tie(src[p], slot[p]) = frag_owner(r, c);
    }
    C[n] = gather(d, src, slot);
  }
  return C;
}

// frag_native accesses (frag_like, frag_store): an unchecked 16 x NR fragment, NR / 2 components a
// lane in whole 16-byte groups.
static bool native_shape(const Op& o, const Type& t, size_t components) {
  return !o.int_attr("checked") && t.rows == 16 && components % 4 == 0 && static_cast<int64_t>(components) == t.cols / 2;
}

std::optional<std::vector<llvm::Value*>> SimtLowering::frag_like(const Value* v, const Frag& f, int depth) {
  if (auto it = frags_.find(v); it != frags_.end()) return frag_values(it->second);
  const Type& t = v->type;
  if (!v->def || depth > 4 || !t.is_matrix() || t.scope != f.type.scope || t.rows != f.type.rows || t.cols != f.type.cols) return std::nullopt;
  const Op& o = *v->def;
  switch (o.kind) {
    case OpKind::mat_scale: {
      auto x = frag_like(o.operands[0], f, depth + 1);
      if (!x) return std::nullopt;
      llvm::Value* s = scalar(o.operands[1]);
      for (llvm::Value*& e : *x) e = scalar_bin(BinOp::mul, t.scalar, e, s);
      return x;
    }
    case OpKind::mat_convert: {
      const Type& m = o.operands[0]->type;
      if (m.use != t.use) return std::nullopt;
      auto x = frag_like(o.operands[0], f, depth + 1);
      if (!x) return std::nullopt;
      for (llvm::Value*& e : *x) e = convert_value(e, m.scalar, t.scalar);
      return x;
    }
    case OpKind::mat_per_element: {
      auto x = frag_like(o.operands[0], f, depth + 1);
      auto step = x ? per_element_step(o, f, depth) : std::nullopt;
      if (!step) return std::nullopt;
      for (size_t q = 0; q < x->size(); ++q) (*x)[q] = (*step)((*x)[q], q);
      return x;
    }
    case OpKind::mat_load: {  // C's old values for beta: each lane loads the elements it holds
      if (o.operands[0]->type.is_groupshared() || o.int_attr("vnni", 1) != 1) return std::nullopt;
      if (auto le = load_epoch_.find(v); le == load_epoch_.end() || le->second != mem_epoch_) return std::nullopt;  // a store since
      const Access a = access(o, 0);
      if (o.int_attr("frag_native", 0)) {  // what frag_store wrote in the fragment's own order
        if (!native_shape(o, t, f.d.size())) return std::nullopt;
        native_loads_.erase(v);
        if (o.int_attr("stage_read", 0)) return ws_stage_read(a, t, f.d.size());  // through the stage slots (simt_tma_ws.cpp)
        std::vector<llvm::Value*> out(f.d.size());
        for (size_t q = 0; q < f.d.size() / 4; ++q) {
          llvm::Value* x = b_.CreateAlignedLoad(llvm::FixedVectorType::get(scalar_ty(t.scalar), 4), native_at(a, t, q), llvm::Align(16));
          for (int i = 0; i < 4; ++i) out[q * 4 + i] = b_.CreateExtractElement(x, uint64_t(i));
        }
        return out;
      }
      const bool checked = o.int_attr("checked") != 0;
      llvm::Type* et = scalar_ty(t.scalar);
      std::vector<llvm::Value*> out(f.d.size());
      llvm::Value* g = b_.CreateZExt(b_.CreateLShr(lane(), b_.getInt32(2)), b_.getInt64Ty());
      llvm::Value* tq2 = b_.CreateZExt(b_.CreateMul(b_.CreateAnd(lane(), b_.getInt32(3)), b_.getInt32(2)), b_.getInt64Ty());
      for (int h = 0; h < 2; ++h) {
        llvm::Value* row = b_.CreateAdd(a.row, b_.CreateAdd(g, b_.getInt64(8 * h)));
        llvm::Value* row_ok = checked ? b_.CreateICmpULT(row, a.rows) : b_.getTrue();
        llvm::Value* row_at = b_.CreateMul(row, a.sr);
        for (int64_t ni = 0; ni < t.cols / 8; ++ni)
          for (int j = 0; j < 2; ++j) {
            llvm::Value* col = b_.CreateAdd(a.col, b_.CreateAdd(tq2, b_.getInt64(8 * ni + j)));
            llvm::Value* ok = checked ? b_.CreateAnd(row_ok, b_.CreateICmpULT(col, a.cols)) : b_.getTrue();
            llvm::Value* ptr = b_.CreateGEP(et, a.ptr, b_.CreateAdd(row_at, b_.CreateMul(col, a.sc)));
            out[ni * 4 + 2 * h + j] = guarded_load(ok, et, ptr, align(t.scalar));
          }
      }
      return out;
    }
    default:
      return std::nullopt;
  }
}

bool SimtLowering::frag_op(const Op& o) {
  if (o.operands.empty()) return false;
  auto it = frags_.find(o.operands[0]);
  if (o.kind == OpKind::mat_binary && it == frags_.end()) it = frags_.find(o.operands[1]);
  if (it == frags_.end()) return false;
  const Frag& f = it->second;
  using Step = std::function<llvm::Value*(llvm::Value*, size_t)>;
  // From a per-element function on, the steps wait in Frag::pending for the store (frag_at).
  auto defer = [&](const Step& step) {
    Frag r = f;
    r.type = o.result()->type;
    r.pending.push_back(step);
    frags_[o.result()] = std::move(r);
    return true;
  };
  switch (o.kind) {
    case OpKind::mat_scale: case OpKind::mat_convert: case OpKind::mat_per_element: {  // alpha, the output type, an activation
      if (o.kind == OpKind::mat_per_element) {
        auto step = per_element_step(o, f, 0);
        return step && defer(*step);
      }
      if (!f.pending.empty()) {
        const ScalarType from = o.operands[0]->type.scalar, to = o.result()->type.scalar;
        if (o.kind == OpKind::mat_scale) {
          llvm::Value* s = scalar(o.operands[1]);
          return defer([this, s, to](llvm::Value* v, size_t) { return scalar_bin(BinOp::mul, to, v, s); });
        }
        if (o.operands[0]->type.use != o.result()->type.use) return false;
        return defer([this, from, to](llvm::Value* v, size_t) { return convert_value(v, from, to); });
      }
      auto x = frag_like(o.result(), f);  // (its definition: this op)
      if (!x) return false;
      Frag r = f;
      r.type = o.result()->type;
      r.d = *x;
      frags_[o.result()] = r;
      return true;
    }
    case OpKind::mat_binary: {  // + beta C: C's old values loaded at the fragment's positions
      const bool first = frags_.count(o.operands[0]) != 0;  // the fragment is the left operand
      if (!f.pending.empty() && !frags_.count(o.operands[first ? 1 : 0])) {  // a residual after an activation
        auto y = frag_like(o.operands[first ? 1 : 0], f);
        if (!y) return false;
        const BinOp op = static_cast<BinOp>(o.sub);
        const ScalarType T = o.result()->type.scalar;
        return defer([this, op, T, first, ys = *y](llvm::Value* v, size_t q) {
          return first ? scalar_bin(op, T, v, ys[q]) : scalar_bin(op, T, ys[q], v);
        });
      }
      auto x = frag_like(o.operands[0], f), y = x ? frag_like(o.operands[1], f) : std::nullopt;
      if (!x || !y) return false;
      Frag r = f;
      r.type = o.result()->type;
      for (size_t i = 0; i < r.d.size(); ++i) r.d[i] = scalar_bin(static_cast<BinOp>(o.sub), r.type.scalar, (*x)[i], (*y)[i]);
      frags_[o.result()] = r;
      return true;
    }
    case OpKind::mat_store:
      if (o.operands[1]->type.is_groupshared()) return false;
      return frag_store(f, o);
    default:
      return false;
  }
}

// stmatrix (sm_90) of the 16-bit fragment's columns ni and ni + 1 at shared address `addr` (i32):
// four 8 x 8 blocks, (ni, 0), (ni, 1), (ni + 1, 0), (ni + 1, 1), a lane's pair of elements a block,
// lane 8 i + j naming row j of block i (`trans`: the blocks transposed, row j is then column j).
void SimtLowering::stmatrix_x4(llvm::Value* addr, bool trans, const std::vector<llvm::Value*>& d, int64_t ni) {
  llvm::Type* i32 = b_.getInt32Ty();
  auto packed = [&](int64_t n, int h) {
    llvm::Value* lo = d.at(n * 4 + 2 * h);
    llvm::Value* v = b_.CreateInsertElement(llvm::PoisonValue::get(llvm::FixedVectorType::get(lo->getType(), 2)), lo, uint64_t(0));
    return b_.CreateBitCast(b_.CreateInsertElement(v, d.at(n * 4 + 2 * h + 1), uint64_t(1)), i32);
  };
  auto* ty = llvm::FunctionType::get(b_.getVoidTy(), {i32, i32, i32, i32, i32}, false);
  auto* stm = llvm::InlineAsm::get(ty, cat("stmatrix.sync.aligned.m8n8.x4", trans ? ".trans" : "", ".shared.b16 [$0], {$1, $2, $3, $4};"),
                                   "r,r,r,r,r,~{memory}", /*hasSideEffects=*/true);
  b_.CreateCall(ty, stm, {addr, packed(ni, 0), packed(ni, 1), packed(ni + 1, 0), packed(ni + 1, 1)});
}

// A fragment in its own order (attribute frag_native: Stream-K's partial tiles, written and read
// only by the same warp position of this kernel): the warp's 16 x NR elements at ptr + row NR +
// col sc, D[4 q .. 4 q + 3] of lane l in 16 bytes at element 4 (32 q + l), so that each of a
// lane's NR / 8 vector accesses covers 512 contiguous bytes of the warp (the strided form costs
// a 4-byte access an element: ncu, session 17).
llvm::Value* SimtLowering::native_at(const Access& a, const Type& t, size_t q) {
  llvm::Type* et = scalar_ty(t.scalar);
  llvm::Value* base = b_.CreateAdd(b_.CreateMul(a.row, b_.getInt64(t.cols)), b_.CreateMul(a.col, a.sc));
  llvm::Value* l = b_.CreateZExt(lane(), b_.getInt64Ty());
  llvm::Value* at = b_.CreateAdd(base, b_.CreateMul(b_.CreateAdd(l, b_.getInt64(static_cast<int64_t>(32 * q))), b_.getInt64(4)));
  return b_.CreateGEP(et, a.ptr, at);
}

// The epilogue's store of a warp's whole 16 x NR tile (unchecked; C with a unit stride along its
// rows or its columns, the other stride, the base and the tile's offset along the unit-stride
// dimension multiples of 16 bytes: one uniform test) through the warp's own region of shared
// memory (Frag::epi_bytes; no other warp touches it), P columns at a time (then 32, 16 or 8 for
// what is left of an N tile that is not a multiple of P: 136 = 64 + 64 + 8):
//   - each lane writes its D components: with unit-stride columns as pairs (2 consecutive columns
//     of a row, rows of P elements padded by 16 / 32 bytes so that the 32 lanes' pairs fall in
//     distinct banks), with unit-stride rows element by element into columns of 16 rows padded
//     to 48 / 80 bytes (the same, for the lanes' columns 2 t, 2 t + 1); 16-bit C with stmatrix
//     (.trans for unit-stride rows), four 8 x 8 blocks a call, on the same padded rows / columns;
//   - bar.warp.sync; then the 32 lanes read consecutive 16-byte chunks of the region and store
//     them to C, consecutive lanes on consecutive chunks (a row's P elements, or a column's 16
//     rows: whole 32-byte sectors); bar.warp.sync before the region takes the next P columns.
// Edge tiles (checked) and C the test refuses: each lane stores its own components where they
// go, one element a store. (Before: a gather of each component into the coopmatrix layout,
// shuffles and selects, and one 2- or 4-byte store per component: on the H100, one wave of
// 128 x 256 tiles at K = 64 ran ~2400 instructions a warp and spilled.)
bool SimtLowering::frag_store(const Frag& f, const Op& o) {
  const Type& t = o.operands[0]->type;
  const int64_t esz = size_in_bytes(t.scalar), NR = t.cols;
  if (o.int_attr("frag_native", 0)) {
    if (!native_shape(o, t, f.d.size())) return false;
    const Access a = access(o, 1);
    if (o.int_attr("stage_store", 0)) {  // through the stage slots, stored by the producer (simt_tma_ws.cpp)
      ws_stage_store(a, t, f.d);
      return true;
    }
    for (size_t q = 0; q < f.d.size() / 4; ++q) {
      llvm::Value* x = llvm::PoisonValue::get(llvm::FixedVectorType::get(scalar_ty(t.scalar), 4));
      for (int i = 0; i < 4; ++i) x = b_.CreateInsertElement(x, frag_at(f, q * 4 + i), uint64_t(i));
      b_.CreateAlignedStore(x, native_at(a, t, q), llvm::Align(16));
    }
    return true;
  }
  if (!f.epi_bytes || t.rows != 16 || NR % 8 || static_cast<int64_t>(f.d.size()) != NR / 2) return false;
  const Access a = access(o, 1);
  llvm::Type* et = scalar_ty(t.scalar);
  // Each lane's own components where they go, one element a store, inside rows x cols when
  // checked: the edge tiles and C that the staging does not take (no gather, no shuffles).
  auto direct = [&](bool checked) {
    llvm::Value* g = b_.CreateZExt(b_.CreateLShr(lane(), b_.getInt32(2)), b_.getInt64Ty());
    llvm::Value* tq2 = b_.CreateZExt(b_.CreateMul(b_.CreateAnd(lane(), b_.getInt32(3)), b_.getInt32(2)), b_.getInt64Ty());
    for (int h = 0; h < 2; ++h) {
      llvm::Value* row = b_.CreateAdd(a.row, b_.CreateAdd(g, b_.getInt64(8 * h)));
      llvm::Value* row_ok = checked ? b_.CreateICmpULT(row, a.rows) : b_.getTrue();
      llvm::Value* row_at = b_.CreateMul(row, a.sr);
      for (int64_t ni = 0; ni < NR / 8; ++ni)
        for (int j = 0; j < 2; ++j) {
          llvm::Value* col = b_.CreateAdd(a.col, b_.CreateAdd(tq2, b_.getInt64(8 * ni + j)));
          llvm::Value* ok = checked ? b_.CreateAnd(row_ok, b_.CreateICmpULT(col, a.cols)) : b_.getTrue();
          guarded(ok, [&] {
            llvm::Value* ptr = b_.CreateGEP(et, a.ptr, b_.CreateAdd(row_at, b_.CreateMul(col, a.sc)));
            b_.CreateAlignedStore(frag_at(f, ni * 4 + 2 * h + j), ptr, align(t.scalar));
          });
        }
    }
  };
  // C's columns contiguous (by_row; a column stride that is not the constant 1 is tested at run
  // time with the alignment) or its rows (by_col: the row stride the constant 1).
  const bool by_col = is_index_const(a.sr_ir, 1) && !is_index_const(a.sc_ir, 1);
  const bool by_row = !by_col;
  if (o.int_attr("tma_store", 0) && f.tma_store && (esz == 2 || esz == 4) && fn_->arg_size() == f_.params.size() + 3 &&
      NR % (128 / esz) == 0) {
    tma_store(f, o, a, by_col);
    return true;
  }
  const int64_t row_pad = esz == 4 ? 32 : 16, col_pitch = esz == 2 ? 48 : 80;
  auto region = [&](int64_t P) { return by_row ? 16 * (P * esz + row_pad) : P * col_pitch; };
  // P: the widest piece (64, 32 or 16 columns) whose region fits; NR in pieces of P, then what
  // is left in pieces of 32, 16 and 8 columns (N tiles of any multiple of 8: 136 = 64 + 64 + 8;
  // an 8-column piece of 16-bit C is 16 chunks, half the lanes' reads).
  int64_t P = 0;
  if ((esz == 2 || esz == 4) && !o.int_attr("checked"))
    for (int64_t c : {64, 32, 16})
      if (c <= NR && (c * esz) % 32 == 0 && region(c) <= f.epi_bytes) {
        P = c;
        break;
      }
  std::vector<std::pair<int64_t, int64_t>> pieces;  // (first column, columns)
  for (int64_t c0 = 0; P && c0 < NR;) {
    int64_t w = P;
    while (w > NR - c0) w /= 2;
    pieces.emplace_back(c0, w);
    c0 += w;
  }
  if (!P) {
    direct(o.int_attr("checked") != 0);
    return true;
  }
  const int64_t pitch = by_row ? P * esz + row_pad : col_pitch;  // bytes a row (by_row) or a column
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* i8t = b_.getInt8Ty();
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  auto i64v = [&](int64_t v) { return b_.getInt64(v); };
  llvm::Value* stride = by_row ? a.sr : a.sc;  // the other dimension's, in elements
  llvm::Value* unit_off = by_row ? a.col : a.row;
  llvm::Value* bits = b_.CreateOr(b_.CreatePtrToInt(a.ptr, i64), b_.CreateMul(b_.CreateOr(stride, unit_off), i64v(esz)));
  llvm::Value* ok = b_.CreateICmpEQ(b_.CreateAnd(bits, i64v(15)), i64v(0), "epi_aligned");
  if (by_row && !is_index_const(a.sc_ir, 1)) ok = b_.CreateAnd(ok, b_.CreateICmpEQ(a.sc, i64v(1)), "epi_unit");
  auto warp_sync = [&] {
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
    b_.CreateCall(fty, llvm::InlineAsm::get(fty, "bar.warp.sync -1;", "~{memory}", /*hasSideEffects=*/true));
  };
  either_path(ok, [&] {
    if (f.tma_store) {  // a TMA store of C may still be reading the region (tma_store below)
      auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
      b_.CreateCall(fty, llvm::InlineAsm::get(fty, "cp.async.bulk.wait_group.read 0;", "~{memory}", /*hasSideEffects=*/true));
      if (f.tma_store == 2) {  // (boxes of a warpgroup: its first warp's store may be reading this warp's region)
        llvm::Value* w = b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), b_.getInt32Ty());
        auto* bty = llvm::FunctionType::get(b_.getVoidTy(), {b_.getInt32Ty()}, false);
        b_.CreateCall(bty, llvm::InlineAsm::get(bty, "bar.sync $0, 128;", "r,~{memory}", /*hasSideEffects=*/true),
                      {b_.CreateAdd(b_.CreateLShr(w, b_.getInt32(2)), b_.getInt32(1))});
      }
      warp_sync();
    }
    llvm::Value* sg = b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), i32);
    llvm::Value* region_at = b_.CreateAdd(b_.CreateAdd(f.pad, c32(f.epi_off)), b_.CreateMul(sg, c32(f.epi_bytes)), "epi_region");
    auto smem = [&](llvm::Value* off) { return b_.CreateGEP(i8t, stage_mem_, {b_.CreateAdd(region_at, off)}); };
    llvm::Value* g = b_.CreateLShr(lane(), c32(2));
    llvm::Value* tq = b_.CreateAnd(lane(), c32(3));
    auto* pair_ty = llvm::FixedVectorType::get(et, 2);
    auto* chunk_ty = llvm::FixedVectorType::get(i32, 4);
    // 16-bit C: stmatrix (sm_90) writes four 8 x 8 blocks of the fragment a call, lane 8 i + j
    // naming row j of block i (transposed for unit-stride rows: row j is then column j).
    llvm::Value* region_addr = esz == 2 ? b_.CreateAdd(b_.CreateTrunc(b_.CreatePtrToInt(stage_mem_, i64), i32), region_at) : nullptr;
    llvm::Value* blk = b_.CreateLShr(lane(), c32(3));  // this lane's block of four, and row in it
    llvm::Value* blk_row = b_.CreateAnd(lane(), c32(7));
    llvm::Value* blk_h = b_.CreateAnd(blk, c32(1));     // blocks (ni, h): 0 (2 jj, 0), 1 (2 jj, 1), 2 (2 jj + 1, 0), 3 (2 jj + 1, 1)
    llvm::Value* blk_n = b_.CreateLShr(blk, c32(1));
    std::vector<llvm::Value*> d(f.d.size());
    for (const auto& piece : pieces) {
      const int64_t c0 = piece.first, w = piece.second;  // (not a structured binding: a lambda below captures them)
      for (int64_t q = c0 / 2; q < (c0 + w) / 2; ++q) d[q] = frag_at(f, q);  // the piece's components (pending steps here)
      // 16-bit C: stmatrix for each pair of 8-column blocks, the pair path below for an odd last one
      const int64_t paired = esz == 2 ? w / 16 * 2 : 0;
      for (int64_t nl = 0; nl < paired; nl += 2) {
        const int64_t ni = c0 / 8 + nl;
        // this lane's row: block (nl + blk_n, blk_h), row blk_row
        llvm::Value* cols = b_.CreateAdd(c32(8 * nl), b_.CreateMul(blk_n, c32(8)));  // the block's first column in the piece
        llvm::Value* rows = b_.CreateMul(blk_h, c32(8));                              // and first row
        llvm::Value* off = by_row ? b_.CreateAdd(b_.CreateMul(b_.CreateAdd(rows, blk_row), c32(pitch)), b_.CreateMul(cols, c32(2)))
                                  : b_.CreateAdd(b_.CreateMul(b_.CreateAdd(cols, blk_row), c32(pitch)), b_.CreateMul(rows, c32(2)));
        stmatrix_x4(b_.CreateAdd(region_addr, off), !by_row, d, ni);
      }
      for (int64_t nl = paired; nl < w / 8; ++nl) {
        const int64_t ni = c0 / 8 + nl;
        llvm::Value* col = b_.CreateAdd(c32(8 * nl), b_.CreateMul(tq, c32(2)));  // the pair's first column in the piece
        for (int h = 0; h < 2; ++h) {
          llvm::Value* row = b_.CreateAdd(g, c32(8 * h));
          llvm::Value *v0 = d.at(ni * 4 + 2 * h), *v1 = d.at(ni * 4 + 2 * h + 1);
          if (by_row) {
            llvm::Value* pair = b_.CreateInsertElement(b_.CreateInsertElement(llvm::PoisonValue::get(pair_ty), v0, uint64_t(0)), v1, uint64_t(1));
            llvm::Value* off = b_.CreateAdd(b_.CreateMul(row, c32(pitch)), b_.CreateMul(col, c32(esz)));
            b_.CreateAlignedStore(pair, smem(off), llvm::Align(2 * esz));
          } else {
            llvm::Value* off = b_.CreateAdd(b_.CreateMul(col, c32(pitch)), b_.CreateMul(row, c32(esz)));
            b_.CreateAlignedStore(v0, smem(off), llvm::Align(esz));
            b_.CreateAlignedStore(v1, smem(b_.CreateAdd(off, c32(pitch))), llvm::Align(esz));
          }
        }
      }
      warp_sync();
      const int64_t per = by_row ? w * esz / 16 : esz;  // chunks a row (by_row) or a column
      const int64_t chunks = w * esz;                    // the piece's 16-byte chunks (16 rows of w elements)
      for (int64_t it = 0; it * 32 < chunks; ++it) {
        llvm::Value* q = b_.CreateAdd(c32(it * 32), lane());
        auto copy = [&] {
          llvm::Value* major = b_.CreateUDiv(q, c32(per));  // the row (by_row) or the column in the piece
          llvm::Value* minor = b_.CreateURem(q, c32(per));  // the chunk along it
          llvm::Value* v = b_.CreateAlignedLoad(chunk_ty, smem(b_.CreateAdd(b_.CreateMul(major, c32(pitch)), b_.CreateMul(minor, c32(16)))),
                                                llvm::Align(16));
          llvm::Value* maj64 = b_.CreateZExt(major, i64);
          llvm::Value* min64 = b_.CreateMul(b_.CreateZExt(minor, i64), i64v(16 / esz));
          llvm::Value* elem = by_row ? b_.CreateAdd(b_.CreateMul(b_.CreateAdd(a.row, maj64), a.sr), b_.CreateAdd(a.col, b_.CreateAdd(i64v(c0), min64)))
                                     : b_.CreateAdd(b_.CreateAdd(a.row, min64), b_.CreateMul(b_.CreateAdd(a.col, b_.CreateAdd(i64v(c0), maj64)), a.sc));
          b_.CreateAlignedStore(v, b_.CreateGEP(i8t, a.ptr, {b_.CreateMul(elem, i64v(esz))}), llvm::Align(16));
        };
        if ((it + 1) * 32 <= chunks) copy();
        else guarded(b_.CreateICmpULT(q, c32(chunks)), copy);  // (an 8-column piece of 16-bit C: 16 chunks)
      }
      warp_sync();
    }
    return std::vector<llvm::Value*>{};
  }, [&] {
    direct(false);
    return std::vector<llvm::Value*>{};
  }, "epi");
  return true;
}

// The epilogue's store of a warp's 16 x NR tile by the Tensor Memory Accelerator (loop and store
// attribute tma_store; the host passes C's tensor map after A's and B's: dims (N, M) with unit-
// stride columns, (M, N) with unit-stride rows, boxes of 16 x P or P x 16, P = 128 / element bytes):
// P columns at a time, each a box of 2048 bytes in one of the warp's one or two buffers (Frag:
// the regions 1024-byte aligned), laid out as the copy engine reads it: lines of the box's inner
// dimension (a row of P elements, 128 bytes, or a column of 16 rows, 32 / 64 bytes) one after
// another, swizzled as the map says (16-byte chunk c of line l at c ^ (l' % W / 16), l' counting
// 128-byte lines: CU_TENSOR_MAP_SWIZZLE_128B / 64B / 32B for W = 128 / 64 / 32), which keeps the
// lanes' writes in distinct banks:
//   - wait until this warp's store of the box that last used the buffer has read it
//     (cp.async.bulk.wait_group.read: one group at most in flight with two buffers), bar.warp.sync;
//   - each lane writes its D components (16-bit C: stmatrix, .trans with unit-stride rows; else
//     pairs / elements), fence.proxy.async.shared::cta (generic-proxy writes, async-proxy reads),
//     bar.warp.sync;
//   - lane 0 issues cp.async.bulk.tensor.2d.global.shared::cta.bulk_group and commits it.
// The last box's store stays in flight: the next tile's epilogue (or the kernel's end, simt_lower.cpp)
// waits for it, so it runs under the next tile's K loop. Out-of-range rows and columns (edge tiles)
// are clipped by the copy engine: no checked path.
// tma_store 2, 16-bit C with contiguous rows (by_col) and regions of 4096 bytes: boxes of a
// warpgroup's 64 rows (lines of 128 bytes, swizzle 128) in the four warps' regions, which are
// consecutive (8 KiB a buffer, two buffers), warp w's rows at bytes 32 w.. of each line; the four
// warps meet at the warpgroup's named barrier (bar.sync 1 + warpgroup, 128) where a warp would
// bar.warp.sync, and lane 0 of its first warp waits, issues and commits.
void SimtLowering::tma_store(const Frag& f, const Op& o, const Access& a, bool by_col) {
  const Type& t = o.operands[0]->type;
  const int64_t esz = size_in_bytes(t.scalar), NR = t.cols, P = 128 / esz;
  const bool wg = o.int_attr("tma_store", 0) == 2 && by_col && esz == 2 && f.epi_bytes >= 4096;
  const int64_t W = wg ? 128 : by_col ? 16 * esz : 128;  // bytes a line of the box
  const int64_t box = wg ? 8192 : 2048;
  const int64_t pieces = NR / P, bufs = f.epi_bytes >= 4096 && pieces % 2 == 0 ? 2 : 1;
  tma_stores_ = true;
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* i8t = b_.getInt8Ty();
  llvm::Type* et = scalar_ty(t.scalar);
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  auto asm0 = [&](const std::string& text) {
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
    b_.CreateCall(fty, llvm::InlineAsm::get(fty, text, "~{memory}", /*hasSideEffects=*/true));
  };
  auto swz = [&](llvm::Value* off) {  // the map's swizzle of a byte offset in a 1024-byte aligned box
    return b_.CreateXor(off, b_.CreateShl(b_.CreateAnd(b_.CreateLShr(off, c32(7)), c32(W / 16 - 1)), c32(4)));
  };
  llvm::Value* sg = b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), i32);
  llvm::Value* wq = b_.CreateAnd(sg, c32(3));  // the warp in its warpgroup
  // (wg: the warpgroup's first warp's region)
  llvm::Value* region_at = b_.CreateAdd(b_.CreateAdd(f.pad, c32(f.epi_off)), b_.CreateMul(wg ? b_.CreateSub(sg, wq) : sg, c32(f.epi_bytes)),
                                        "epi_region");
  llvm::Value* mem_addr = b_.CreateTrunc(b_.CreatePtrToInt(stage_mem_, i64), i32);
  llvm::Value* in_line = wg ? b_.CreateMul(wq, c32(32)) : c32(0);  // wg: this warp's rows in a line
  auto sync = [&] {
    if (!wg) {
      asm0("bar.warp.sync -1;");
      return;
    }
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {i32}, false);
    b_.CreateCall(fty, llvm::InlineAsm::get(fty, "bar.sync $0, 128;", "r,~{memory}", /*hasSideEffects=*/true),
                  {b_.CreateAdd(b_.CreateLShr(sg, c32(2)), c32(1))});
  };
  llvm::Value* g = b_.CreateLShr(lane(), c32(2));
  llvm::Value* tq = b_.CreateAnd(lane(), c32(3));
  llvm::Value* blk = b_.CreateLShr(lane(), c32(3));  // stmatrix: this lane's block of four, and row in it
  llvm::Value* blk_row = b_.CreateAnd(lane(), c32(7));
  llvm::Value* blk_h = b_.CreateAnd(blk, c32(1));
  llvm::Value* blk_n = b_.CreateLShr(blk, c32(1));
  auto* pair_ty = llvm::FixedVectorType::get(et, 2);
  auto* st_ty = llvm::FunctionType::get(b_.getVoidTy(), {i64, i32, i32, i32}, false);
  auto* st = llvm::InlineAsm::get(st_ty, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];",
                                  "l,r,r,r,~{memory}", /*hasSideEffects=*/true);
  llvm::Value* map = b_.CreatePtrToInt(fn_->getArg(static_cast<unsigned>(f_.params.size() + 2)), i64);
  llvm::Value* row0 = b_.CreateTrunc(a.row, i32, "tma_row");
  if (wg) row0 = b_.CreateSub(row0, b_.CreateMul(wq, c32(16)));  // the warpgroup's first row
  llvm::Value* col0 = b_.CreateTrunc(a.col, i32, "tma_col");
  std::vector<llvm::Value*> d(f.d.size());
  for (int64_t p = 0; p < pieces; ++p) {
    // the piece's components (a fused epilogue's pending steps: computed while the buffer's last box is read)
    for (int64_t q = p * P / 2; q < (p + 1) * P / 2; ++q) d[q] = frag_at(f, q);
    llvm::Value* buf = b_.CreateAdd(region_at, c32((p % bufs) * box), "tma_buf");  // bytes after stage_mem_'s start
    asm0(cat("cp.async.bulk.wait_group.read ", bufs - 1, ";"));  // the buffer's previous box read (lane 0's groups)
    sync();
    if (esz == 2) {
      for (int64_t nl = 0; nl < P / 8; nl += 2) {
        const int64_t ni = p * P / 8 + nl;
        llvm::Value* cols = b_.CreateAdd(c32(8 * nl), b_.CreateMul(blk_n, c32(8)));  // the block's first column in the piece
        llvm::Value* rows = b_.CreateMul(blk_h, c32(8));                              // and first row
        llvm::Value* off = by_col ? b_.CreateAdd(b_.CreateMul(b_.CreateAdd(cols, blk_row), c32(W)), b_.CreateAdd(in_line, b_.CreateMul(rows, c32(2))))
                                  : b_.CreateAdd(b_.CreateMul(b_.CreateAdd(rows, blk_row), c32(W)), b_.CreateMul(cols, c32(2)));
        stmatrix_x4(b_.CreateAdd(b_.CreateAdd(mem_addr, buf), swz(off)), by_col, d, ni);
      }
    } else {
      for (int64_t nl = 0; nl < P / 8; ++nl) {
        const int64_t ni = p * P / 8 + nl;
        llvm::Value* col = b_.CreateAdd(c32(8 * nl), b_.CreateMul(tq, c32(2)));  // the pair's first column in the piece
        for (int h = 0; h < 2; ++h) {
          llvm::Value* row = b_.CreateAdd(g, c32(8 * h));
          llvm::Value *v0 = d.at(ni * 4 + 2 * h), *v1 = d.at(ni * 4 + 2 * h + 1);
          auto at = [&](llvm::Value* off) { return b_.CreateGEP(i8t, stage_mem_, {b_.CreateAdd(buf, swz(off))}); };
          if (!by_col) {
            llvm::Value* pair = b_.CreateInsertElement(b_.CreateInsertElement(llvm::PoisonValue::get(pair_ty), v0, uint64_t(0)), v1, uint64_t(1));
            b_.CreateAlignedStore(pair, at(b_.CreateAdd(b_.CreateMul(row, c32(W)), b_.CreateMul(col, c32(esz)))), llvm::Align(2 * esz));
          } else {
            llvm::Value* off = b_.CreateAdd(b_.CreateMul(col, c32(W)), b_.CreateMul(row, c32(esz)));
            b_.CreateAlignedStore(v0, at(off), llvm::Align(esz));
            b_.CreateAlignedStore(v1, at(b_.CreateAdd(off, c32(W))), llvm::Align(esz));
          }
        }
      }
    }
    target_.async_proxy_fence(b_);  // the writes visible to the copy engine
    sync();
    llvm::Value* along = b_.CreateAdd(col0, c32(p * P));
    llvm::Value* issuer = b_.CreateICmpEQ(lane(), c32(0));
    if (wg) issuer = b_.CreateAnd(issuer, b_.CreateICmpEQ(wq, c32(0)));
    emit_if(b_, fn_, issuer, [&] {
      b_.CreateCall(st_ty, st, {map, by_col ? row0 : along, by_col ? along : row0, b_.CreateAdd(mem_addr, buf)});
      asm0("cp.async.bulk.commit_group;");
      return std::vector<llvm::Value*>{};
    }, [] { return std::vector<llvm::Value*>{}; });
  }
}

}  // namespace coopjit
