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

#include <algorithm>
#include <utility>

#include "lower/ir_to_llvm.h"
#include "lower/simt_lowering.h"

namespace coopjit {

namespace {
// The named barrier at which an epi_alias kernel's consumer warps meet before the epilogue's
// staging (the warpgroups' own barriers in frag_store are 1 + warpgroup, at most 1 + 2).
constexpr int kEpiAliasBarrier = 8;
}  // namespace

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
  // Wider (up to 512; TMA plans of the warp-specialized kernel, whose setmaxnreg gives the two
  // consumer warpgroups the registers): two wgmmas a K slice, on the columns [0, n1) and [n1, NR)
  // (n1 NR / 2 rounded up to 8 where B is K-major, to 64 where its atoms are 64 columns wide),
  // whose D fragments side by side are the fragment of the whole 64 x NR block.
  const bool tma = o.int_attr("tma", 0) != 0;
  const bool b_k_early = is_index_const(lb.operands[3], 1);
  const bool wide = NR > 256 && tma && o.int_attr("persistent", 0);
  if (MR != 16 || NR % 8 || NR > (wide ? 512 : 256) || (NR % 64 && !(tma && b_k_early)) || KB * esz != 128 ||
      !is_index_const(o.operands[2], KB))
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
  // (sk_pair: 32 bytes after the stage barriers, the pair's ready barrier, mailbox and data barrier, simt_tma_ws.cpp)
  const int64_t pair_bytes = o.int_attr("stream_k_pair", 0) ? 32 : 0;
  const int64_t total = stage_bytes * stages + 1024 + (tma ? 16 * stages : 0) + pair_bytes;  // + alignment to 1024, the mbarriers
  // Attribute epi_smem: each warp's staging region for the epilogue (frag_store), after the
  // stages and mbarriers, when the kernel's shared memory has room for it.
  // Attribute tma_store: the regions start on a 1024-byte boundary (TMA stores' swizzled boxes).
  // Attribute epi_alias (the warp-specialized kernel of one tile a block, no Stream-K part): the
  // regions in the stage slots from their first byte, after the consumers' barrier below.
  const bool tma_store = tma && o.int_attr("tma_store", 0) != 0;
  const bool alias = tma && o.int_attr("persistent", 0) && o.int_attr("epi_alias", 0) && !o.int_attr("stream_k_kt", 0) && !pair_bytes;
  const int64_t epi_at = alias ? 0 : stage_bytes * stages + (tma ? 16 * stages : 0) + pair_bytes, epi_want = o.int_attr("epi_smem", 0);
  const int64_t epi_off = tma_store ? (epi_at + 1023) / 1024 * 1024 : epi_at;
  int64_t epi_bytes = 0;
  if (epi_want > 0 && epi_want % 16 == 0 &&
      (alias ? sgs_ * epi_want <= stage_bytes * stages && stage_memory(total, 1024)
             : stage_memory(total + (epi_off - epi_at) + sgs_ * epi_want, 1024)))
    epi_bytes = epi_want;
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
    const CpPanel srcs[2] = {{pa.outer, pa.cpr, pa.k_inner, A, sa, m_wg, a_k ? M : Ka, a_k ? Ka : M, a_checked},
                             {pb.outer, pb.cpr, pb.k_inner, Bp, sb, n_wg, b_k ? N : Kb, b_k ? Kb : N, b_checked}};
    for (const Panel* p : {&pa, &pb})
      cp_async_panel(srcs[p == &pb], k0, tid, threads, EPC, esz, [&](llvm::Value* r, llvm::Value* c) {
        return smem_at(b_.CreateAdd(b_.CreateAdd(stage, c32(p->offset)), place(*p, r, c)));
      });
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

  // The wgmmas' column pieces of the warpgroup's NR columns: one, or two past wgmma's n of 256.
  std::vector<std::pair<int64_t, int64_t>> pieces{{0, NR}};  // (first column, columns)
  if (NR > 256) {
    const int64_t unit = pb.k_inner ? 8 : 64, n1 = (NR / 2 + unit - 1) / unit * unit;
    if (n1 > 256 || NR - n1 > 256 || (NR - n1) % 8) return false;
    pieces = {{0, n1}, {n1, NR - n1}};
  }
  // One K step's wgmmas on the panels of the stage at `stage`.
  auto multiply = [&](llvm::Value* stage, std::vector<llvm::Value*> out) {
    llvm::Value* a_panel = stage;
    llvm::Value* b_panel = b_.CreateAdd(stage, c32(pb.offset));
    target_.wgmma_fence(b_);
    for (int64_t j = 0; j < KB * esz / 32; ++j) {  // one wgmma per 32 bytes of K (and column piece)
      llvm::Value* da = desc(operand_addr(a_panel, pa, wg_row, j), pa.k_inner ? 16 : KB * 128, 1024);
      for (const auto& [n0, nw] : pieces) {
        llvm::Value* col = n0 ? b_.CreateAdd(wg_col, c32(n0)) : wg_col;
        llvm::Value* db = desc(operand_addr(b_panel, pb, col, j), pb.k_inner ? 16 : KB * 128, 1024);
        // the piece's accumulators: D[ni 4 + i] of its m16n8 blocks ni in [n0 / 8, (n0 + nw) / 8)
        const auto first = out.begin() + n0 / 2, last = first + nw / 2;
        std::vector<llvm::Value*> part(first, last);
        part = i8 ? target_.wgmma_int8(b_, part, da, db, static_cast<int>(nw), ta.scalar == ScalarType::i8, tb.scalar == ScalarType::i8)
                  : target_.wgmma(b_, part, da, db, static_cast<int>(nw), bf, !pa.k_inner, !pb.k_inner);
        std::copy(part.begin(), part.end(), out.begin() + n0 / 2);
      }
    }
    target_.wgmma_commit(b_);
    return out;
  };
  if (tma && o.int_attr("persistent", 0)) {  // warp specialized, one tile of a persistent walk (simt_tma_ws.cpp)
    D = ws_tma_loop(D, multiply, TmaLoop{lo, m_wg, n_wg, nk, base, tid, stage_bytes, stages, MT, NT, KB, pb.offset, box_a, box_b,
                                         pa.k_inner, pb.k_inner},
                    hi, M, N, o.int_attr("group_m", 0), o.int_attr("stream_k_kt", 0), o.int_attr("stream_k_down", 0) != 0,
                    o.int_attr("stream_k_prefetch", 0), o.int_attr("stream_k_stage_read", 0), o.int_attr("stream_k_stage_store", 0),
                    o.int_attr("stream_k_stage_store_groups", 1), o.int_attr("stream_k_pair", 0) != 0);
    if (alias && epi_bytes) {
      // The staging is about to overwrite stage slots that another consumer warpgroup's last
      // wgmmas may still read (B's panel is every warpgroup's): each warp's own wgmmas have
      // retired (wait_group 0 in ws_tma_loop), every copy of the tile has landed (each step's full
      // barrier was waited for) and the producer issues none after them; the consumer warps meet
      // at named barrier kEpiAliasBarrier (the warpgroups' own are 1 + warpgroup) before any region
      // is written. The fence orders this thread's generic-proxy writes after the async proxy's.
      auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
      b_.CreateCall(fty, llvm::InlineAsm::get(fty, "fence.proxy.async.shared::cta;", "~{memory}", /*hasSideEffects=*/true));
      b_.CreateCall(fty, llvm::InlineAsm::get(fty, cat("bar.sync ", kEpiAliasBarrier, ", ", 32 * sgs_, ";"), "~{memory}", /*hasSideEffects=*/true));
    }
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

}  // namespace coopjit
