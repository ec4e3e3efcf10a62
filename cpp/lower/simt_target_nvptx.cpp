// The NVPTX target of the SIMT lowering (simt_target.h): a subgroup is a warp of 32 lanes; ids
// from PTX's special registers (llvm.nvvm.read.ptx.sreg.*), moves between lanes with shfl.sync
// over the full warp, bar.sync for work-group (CTA) barriers, .shared memory in address space 3.
// Kernels use the ptx_kernel calling convention with the required CTA size (nvvm.reqntid, which
// the backend writes as .reqntid). exp / log / tanh on f32 are written here from the hardware's
// ex2.approx / lg2.approx (2 ulp) with a correction step, since no libdevice is linked.
#include "lower/simt_target.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "core/error.h"
#include "lower/vector_math.h"

namespace coopjit {
namespace {

class NvptxSimtTarget : public SimtTarget {
 public:
  explicit NvptxSimtTarget(std::string sm) : sm_(std::move(sm)) {}
  std::string name() const override { return "nvptx64:" + sm_; }
  std::string triple() const override { return "nvptx64-nvidia-cuda"; }
  bool subgroup_ok(int S) const override { return S == 32; }
  unsigned constant_addrspace() const override { return 4; }
  bool tensor_cores() const override { return true; }
  // red.global.add.f32 / .f64 (sm_60 and newer; the target is sm_80 or newer).
  bool float_atomic_add(ir::ScalarType t) const override { return t == ir::ScalarType::f32 || t == ir::ScalarType::f64; }

  void mark_kernel(llvm::Function& f, int subgroup_size, int work_group_size) const override {
    if (subgroup_size != 32)
      throw UserError(cat("SIMT lowering for NVIDIA GPUs: subgroup_size ", subgroup_size, " must be 32 (a warp)"));
    f.setCallingConv(llvm::CallingConv::PTX_Kernel);
    f.addFnAttr("nvvm.reqntid", std::to_string(work_group_size));
  }

  static llvm::Value* call(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id, const std::vector<llvm::Value*>& args) {
    return b.CreateIntrinsic(id, llvm::ArrayRef<llvm::Type*>(), llvm::ArrayRef<llvm::Value*>(args));
  }
  llvm::Value* sreg(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id) const { return call(b, id, {}); }

  llvm::Value* lane_id(llvm::IRBuilder<>& b) const override {
    return sreg(b, llvm::Intrinsic::nvvm_read_ptx_sreg_laneid);
  }

  llvm::Value* work_id(llvm::IRBuilder<>& b, ir::WorkId which, int dim) const override {
    using llvm::Intrinsic::ID;
    auto i64 = [&](llvm::Value* v) { return b.CreateZExt(v, b.getInt64Ty()); };
    auto pick = [&](ID x, ID y, ID z) { return dim == 0 ? x : dim == 1 ? y : z; };
    switch (which) {
      case ir::WorkId::lane: return i64(lane_id(b));
      // Work-groups are one-dimensional (simt_lower.h): the warp is tid.x / 32.
      case ir::WorkId::subgroup: return i64(b.CreateLShr(sreg(b, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), b.getInt32(5)));
      case ir::WorkId::subgroups: return i64(b.CreateLShr(sreg(b, llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x), b.getInt32(5)));
      case ir::WorkId::group:
        return i64(sreg(b, pick(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z)));
      case ir::WorkId::groups:
        return i64(sreg(b, pick(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x, llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y,
                                llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_z)));
    }
    throw InternalError("unknown work id");
  }

  // shfl.sync moves 32 bits: narrower values travel zero-extended, 64-bit ones as two halves.
  template <class F>
  llvm::Value* by_words(llvm::IRBuilder<>& b, llvm::Value* x, const F& move32) const {
    llvm::Type* t = x->getType();
    const unsigned bits = t->getPrimitiveSizeInBits();
    if (bits == 0 || bits > 64) throw InternalError("shuffle of an unsupported type");
    llvm::Value* v = t->isIntegerTy() ? x : b.CreateBitCast(x, b.getIntNTy(bits));
    llvm::Value* r;
    if (bits == 64) {
      llvm::Value* lo = move32(b.CreateTrunc(v, b.getInt32Ty()));
      llvm::Value* hi = move32(b.CreateTrunc(b.CreateLShr(v, 32), b.getInt32Ty()));
      r = b.CreateOr(b.CreateZExt(lo, b.getInt64Ty()), b.CreateShl(b.CreateZExt(hi, b.getInt64Ty()), 32));
    } else if (bits == 32) {
      r = move32(v);
    } else {
      r = b.CreateTrunc(move32(b.CreateZExt(v, b.getInt32Ty())), v->getType());
    }
    return t->isIntegerTy() ? r : b.CreateBitCast(r, t);
  }

  llvm::Value* shuffle(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* src_lane) const override {
    return by_words(b, x, [&](llvm::Value* w) {
      return call(b, llvm::Intrinsic::nvvm_shfl_sync_idx_i32, {b.getInt32(-1), w, src_lane, b.getInt32(31)});
    });
  }

  llvm::Value* shuffle_xor(llvm::IRBuilder<>& b, llvm::Value* x, int mask) const override {
    return by_words(b, x, [&](llvm::Value* w) {
      return call(b, llvm::Intrinsic::nvvm_shfl_sync_bfly_i32,
                  {b.getInt32(-1), w, b.getInt32(mask), b.getInt32(31)});
    });
  }

  llvm::Value* broadcast(llvm::IRBuilder<>& b, llvm::Value* x, int src_lane) const override {
    return shuffle(b, x, b.getInt32(src_lane));
  }

  void barrier(llvm::IRBuilder<>& b) const override {
    call(b, llvm::Intrinsic::nvvm_barrier_cta_sync_aligned_all, {b.getInt32(0)});
  }

  // e^x for f32: 2^(x log2 e) with the product's rounding error carried (x * log2e exactly as
  // hi + lo), so the result is within a few ulp of ex2.approx's own error.
  llvm::Value* exp32(llvm::IRBuilder<>& b, llvm::Value* x) const {
    llvm::Type* f = b.getFloatTy();
    const double L = 1.4426950408889634;
    llvm::Value* Lhi = llvm::ConstantFP::get(f, static_cast<float>(L));
    llvm::Value* Llo = llvm::ConstantFP::get(f, static_cast<float>(L - static_cast<float>(L)));
    llvm::Value* hi = b.CreateFMul(x, Lhi);
    llvm::Value* lo = b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {x, Lhi, b.CreateFNeg(hi)});
    lo = b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {x, Llo, lo});
    llvm::Value* e = b.CreateIntrinsic(llvm::Intrinsic::exp2, {f}, {hi});  // ex2.approx.f32
    // e * 2^lo ~ e * (1 + lo ln 2); where e is 0 or inf the correction changes nothing.
    llvm::Value* corr = b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {lo, llvm::ConstantFP::get(f, 0.6931471805599453), llvm::ConstantFP::get(f, 1.0)});
    llvm::Value* r = b.CreateFMul(e, corr);
    return b.CreateSelect(b.CreateFCmpUNO(hi, hi), x, b.CreateSelect(b.CreateFCmpOEQ(hi, llvm::ConstantFP::getInfinity(f, true)),
                                                                     llvm::ConstantFP::get(f, 0.0), r));
  }

  // log x for f32: lg2.approx, then one Newton step y + x e^-y - 1 where y is finite.
  llvm::Value* log32(llvm::IRBuilder<>& b, llvm::Value* x) const {
    llvm::Type* f = b.getFloatTy();
    llvm::Value* y0 = b.CreateFMul(call(b, llvm::Intrinsic::nvvm_lg2_approx_f, {x}),
                                   llvm::ConstantFP::get(f, 0.6931471805599453));
    llvm::Value* t = b.CreateFMul(x, exp32(b, b.CreateFNeg(y0)));
    llvm::Value* y1 = b.CreateFAdd(y0, b.CreateFSub(t, llvm::ConstantFP::get(f, 1.0)));
    llvm::Value* finite = b.CreateFCmpOLT(b.CreateIntrinsic(llvm::Intrinsic::fabs, {f}, {y0}), llvm::ConstantFP::getInfinity(f));
    return b.CreateSelect(finite, y1, y0);
  }

  // 1 / x within 1 ulp (rcp.approx.ftz.f32: one MUFU.RCP). An f32 fdiv is IEEE's div.rn, whose
  // SASS calls a slow path under a branch: per element of an epilogue that is a convergence region
  // each, which serializes the elements' math (H100, bf16 4096^3 + bias + GELU: 0.455 ms, 0.356 with
  // this; the plain product 0.177).
  static llvm::Value* recip32(llvm::IRBuilder<>& b, llvm::Value* x) {
    return call(b, llvm::Intrinsic::nvvm_rcp_approx_ftz_f, {x});
  }

  // tanh x for f32: an odd Taylor polynomial below |x| = 0.3 (terms to x^11: error < 1e-9),
  // else sign(x) (1 - 2 / (e^2|x| + 1)), the reciprocal approximate (recip32: e^2|x| + 1 is in
  // [1.8, inf], never subnormal; inf gives 0, so 1).
  llvm::Value* tanh32(llvm::IRBuilder<>& b, llvm::Value* x) const {
    llvm::Type* f = b.getFloatTy();
    auto c = [&](double v) { return llvm::ConstantFP::get(f, v); };
    llvm::Value* ax = b.CreateIntrinsic(llvm::Intrinsic::fabs, {f}, {x});
    llvm::Value* big = b.CreateFSub(c(1.0), b.CreateFMul(c(2.0), recip32(b, b.CreateFAdd(exp32(b, b.CreateFMul(ax, c(2.0))), c(1.0)))));
    big = b.CreateIntrinsic(llvm::Intrinsic::copysign, {f}, {big, x});
    llvm::Value* x2 = b.CreateFMul(x, x);
    const double k[] = {-1382.0 / 155925, 62.0 / 2835, -17.0 / 315, 2.0 / 15, -1.0 / 3};
    llvm::Value* p = c(k[0]);
    for (int i = 1; i < 5; ++i) p = b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {p, x2, c(k[i])});
    llvm::Value* small = b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {b.CreateFMul(p, x2), x, x});
    return b.CreateSelect(b.CreateFCmpOLT(ax, c(0.3)), small, big);
  }

  llvm::Value* math(llvm::IRBuilder<>& b, ir::UnOp u, ir::ScalarType t, llvm::Value* x) const override {
    llvm::Type* ty = x->getType();
    if (u == ir::UnOp::abs) return b.CreateIntrinsic(llvm::Intrinsic::fabs, {ty}, {x});
    if (u == ir::UnOp::sqrt && t != ir::ScalarType::f16) return b.CreateIntrinsic(llvm::Intrinsic::sqrt, {ty}, {x});
    if (t == ir::ScalarType::f16) return b.CreateFPTrunc(math(b, u, ir::ScalarType::f32, b.CreateFPExt(x, b.getFloatTy())), ty);
    if (t == ir::ScalarType::f64)
      throw UserError(cat("SIMT lowering for NVIDIA GPUs: ", ir::name(u),
                          " of f64 is not implemented yet (no libdevice); f32 is"));
    if (u == ir::UnOp::exp) return exp32(b, x);
    if (u == ir::UnOp::log) return log32(b, x);
    if (u == ir::UnOp::tanh) return tanh32(b, x);
    if (u == ir::UnOp::erf)  // with the hardware's ex2 (exp32) and rcp (recip32): fewer instructions, no branches
      return lower::erf_f32(b, x, [this](llvm::IRBuilder<>& q, llvm::Value* v) { return exp32(q, v); }, recip32);
    throw InternalError("unknown unary math function");
  }

  llvm::Value* recip_approx(llvm::IRBuilder<>& b, llvm::Value* x) const override { return recip32(b, x); }
  llvm::Value* erf_absolute(llvm::IRBuilder<>& b, llvm::Value* x) const override {
    return lower::erf_f32(b, x, [this](llvm::IRBuilder<>& q, llvm::Value* v) { return exp32(q, v); }, recip32, true);
  }

  llvm::Value* round_even(llvm::IRBuilder<>& b, llvm::Value* x) const override {
    return b.CreateIntrinsic(llvm::Intrinsic::roundeven, {x->getType()}, {x});  // cvt.rni
  }

  llvm::Value* f32_to_bf16(llvm::IRBuilder<>& b, llvm::Value* x) const override {
    return b.CreateBitCast(b.CreateFPTrunc(x, b.getBFloatTy()), b.getInt16Ty());  // cvt.rn.bf16.f32 (sm_80)
  }

  // cp.async.cg (L2 only: the block's warps share the tile through shared memory) with a source
  // size of 16 or 0 bytes (0: zero fill), commit_group / wait_group, ldmatrix.x4 (sm_80).
  bool async_copies() const override { return true; }
  void async_copy16(llvm::IRBuilder<>& b, llvm::Value* dst, llvm::Value* src, llvm::Value* valid) const override {
    llvm::Value* size = b.CreateSelect(valid, b.getInt32(16), b.getInt32(0));
    call(b, llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s, {dst, src, size});
  }
  void async_copy4(llvm::IRBuilder<>& b, llvm::Value* dst, llvm::Value* src, llvm::Value* valid) const override {
    llvm::Value* size = b.CreateSelect(valid, b.getInt32(4), b.getInt32(0));
    call(b, llvm::Intrinsic::nvvm_cp_async_ca_shared_global_4_s, {dst, src, size});
  }
  void async_commit(llvm::IRBuilder<>& b) const override { call(b, llvm::Intrinsic::nvvm_cp_async_commit_group, {}); }
  void async_wait(llvm::IRBuilder<>& b, int pending) const override {
    call(b, llvm::Intrinsic::nvvm_cp_async_wait_group, {b.getInt32(pending)});
  }
  std::vector<llvm::Value*> load_matrix_x4(llvm::IRBuilder<>& b, llvm::Value* row, bool trans) const override {
    const llvm::Intrinsic::ID id = trans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_trans_b16
                                         : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_b16;
    llvm::Value* r = llvm::Intrinsic::isOverloaded(id)
                         ? b.CreateIntrinsic(id, {row->getType()}, {row})
                         : b.CreateIntrinsic(id, llvm::ArrayRef<llvm::Type*>(), llvm::ArrayRef<llvm::Value*>{row});
    std::vector<llvm::Value*> words;
    for (unsigned j = 0; j < 4; ++j) words.push_back(b.CreateExtractValue(r, {j}));
    return words;
  }

  // Hopper (sm_90a): wgmma through inline PTX (LLVM has no wgmma.mma_async intrinsic), its
  // fences through LLVM's intrinsics.
  bool warpgroup_mma() const override { return sm_.size() > 5 && sm_.back() == 'a' && std::stoi(sm_.substr(3)) >= 90; }
  std::vector<llvm::Value*> wgmma(llvm::IRBuilder<>& b, const std::vector<llvm::Value*>& d, llvm::Value* desc_a,
                                  llvm::Value* desc_b, int n, bool bf16, bool trans_a, bool trans_b) const override {
    const int nd = n / 2;
    if (!warpgroup_mma() || n < 8 || n > 256 || n % 8 || static_cast<int>(d.size()) != nd)
      throw InternalError(cat("wgmma m64n", n, "k16 with ", d.size(), " accumulators on ", sm_));
    // scale-d is 1 (D += A B), then the scale and transpose immediates.
    return wgmma_asm(b, d, desc_a, desc_b, cat("m64n", n, "k16.f32.", bf16 ? "bf16.bf16" : "f16.f16"),
                     cat(", 1, 1, ", trans_a ? 1 : 0, ", ", trans_b ? 1 : 0), b.getFloatTy(), "f");
  }
  std::vector<llvm::Value*> wgmma_int8(llvm::IRBuilder<>& b, const std::vector<llvm::Value*>& d, llvm::Value* desc_a,
                                       llvm::Value* desc_b, int n, bool a_signed, bool b_signed) const override {
    const int nd = n / 2;
    if (!warpgroup_mma() || n < 8 || n > 256 || n % 8 || static_cast<int>(d.size()) != nd)
      throw InternalError(cat("wgmma m64n", n, "k32 (8-bit) with ", d.size(), " accumulators on ", sm_));
    // No scale or transpose immediates: 8-bit operands are K-major.
    return wgmma_asm(b, d, desc_a, desc_b, cat("m64n", n, "k32.s32.", a_signed ? "s8" : "u8", ".", b_signed ? "s8" : "u8"), "",
                     b.getInt32Ty(), "r");
  }
  void wgmma_fence(llvm::IRBuilder<>& b) const override { call(b, llvm::Intrinsic::nvvm_wgmma_fence_sync_aligned, {}); }
  void wgmma_commit(llvm::IRBuilder<>& b) const override { call(b, llvm::Intrinsic::nvvm_wgmma_commit_group_sync_aligned, {}); }
  void wgmma_wait(llvm::IRBuilder<>& b, int pending) const override {
    call(b, llvm::Intrinsic::nvvm_wgmma_wait_group_sync_aligned, {b.getInt64(pending)});
  }
  void async_proxy_fence(llvm::IRBuilder<>& b) const override { call(b, llvm::Intrinsic::nvvm_fence_proxy_async_shared_cta, {}); }

  // The Tensor Memory Accelerator and mbarriers (sm_90): inline PTX on shared-window addresses.
  bool async_bulk_copies() const override { return std::stoi(sm_.substr(3)) >= 90; }
  static llvm::CallInst* ptx(llvm::IRBuilder<>& b, llvm::Type* ret, const std::string& text, const std::string& cons,
                             const std::vector<llvm::Value*>& args) {
    std::vector<llvm::Type*> tys;
    for (llvm::Value* a : args) tys.push_back(a->getType());
    auto* fty = llvm::FunctionType::get(ret, tys, false);
    llvm::CallInst* r = b.CreateCall(fty, llvm::InlineAsm::get(fty, text, cons, /*hasSideEffects=*/true), args);
    return r;
  }
  // Flags (simt_target.h) at .gpu scope, sm_70 and newer: atom.release.gpu.exch, ld.acquire.gpu
  // (PTX ISA memory consistency model: release / acquire patterns, read-modify-writes in
  // observation order), a nanosleep between polls, bar.warp.sync, trap.
  static std::string space(llvm::Value* p) { return p->getType()->getPointerAddressSpace() == 1 ? ".global" : ""; }
  void flag_store_release(llvm::IRBuilder<>& b, llvm::Value* p, llvm::Value* v) const override {
    ptx(b, b.getInt32Ty(), cat("atom.release.gpu", space(p), ".exch.b32 $0, [$1], $2;"), "=r,l,r,~{memory}",
        {b.CreatePtrToInt(p, b.getInt64Ty()), v});
  }
  void flag_store_release_first(llvm::IRBuilder<>& b, llvm::Value* p, llvm::Value* v, llvm::Value* lane) const override {
    ptx(b, b.getVoidTy(),
        cat("{\n.reg .pred first;\n.reg .b32 old;\nsetp.eq.u32 first, $2, 0;\n@first atom.release.gpu", space(p),
            ".exch.b32 old, [$0], $1;\n}"),
        "l,r,r,~{memory}", {b.CreatePtrToInt(p, b.getInt64Ty()), v, lane});
  }
  llvm::Value* flag_load_acquire(llvm::IRBuilder<>& b, llvm::Value* p) const override {
    return ptx(b, b.getInt32Ty(), cat("ld.acquire.gpu", space(p), ".b32 $0, [$1];"), "=r,l,~{memory}", {b.CreatePtrToInt(p, b.getInt64Ty())});
  }
  void spin_pause(llvm::IRBuilder<>& b) const override { ptx(b, b.getVoidTy(), "nanosleep.u32 32;", "~{memory}", {}); }
  void subgroup_sync(llvm::IRBuilder<>& b) const override { ptx(b, b.getVoidTy(), "bar.warp.sync -1;", "~{memory}", {}); }
  void trap(llvm::IRBuilder<>& b) const override { ptx(b, b.getVoidTy(), "trap;", "~{memory}", {}); }
  void prefetch_l2_bulk(llvm::IRBuilder<>& b, llvm::Value* addr, llvm::Value* bytes) const override {
    ptx(b, b.getVoidTy(), "cp.async.bulk.prefetch.L2.global [$0], $1;", "l,r,~{memory}", {addr, bytes});
  }
  llvm::Value* trace_clock(llvm::IRBuilder<>& b, bool global) const override {
    return ptx(b, b.getInt32Ty(), global ? "mov.u32 $0, %globaltimer_lo;" : "mov.u32 $0, %clock;", "=r,~{memory}", {});
  }

  void mbarrier_init(llvm::IRBuilder<>& b, llvm::Value* bar, int count) const override {
    ptx(b, b.getVoidTy(), "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", {bar, b.getInt32(static_cast<uint32_t>(count))});
  }
  void mbarrier_inval(llvm::IRBuilder<>& b, llvm::Value* bar) const override {
    ptx(b, b.getVoidTy(), "mbarrier.inval.shared::cta.b64 [$0];", "r,~{memory}", {bar});
  }
  void mbarrier_init_fence(llvm::IRBuilder<>& b) const override {
    ptx(b, b.getVoidTy(), "fence.mbarrier_init.release.cluster;", "~{memory}", {});
  }
  void mbarrier_arrive(llvm::IRBuilder<>& b, llvm::Value* bar) const override {
    ptx(b, b.getVoidTy(), "{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [$0];\n}", "r,~{memory}", {bar});
  }
  void mbarrier_arrive_expect_tx(llvm::IRBuilder<>& b, llvm::Value* bar, llvm::Value* bytes) const override {
    ptx(b, b.getVoidTy(), "{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [$0], $1;\n}", "r,r,~{memory}",
        {bar, bytes});
  }
  llvm::Value* mbarrier_try_wait(llvm::IRBuilder<>& b, llvm::Value* bar, llvm::Value* parity) const override {
    llvm::Value* r = ptx(b, b.getInt32Ty(),
                         "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;\nselp.b32 $0, 1, 0, p;\n}",
                         "=r,r,r,~{memory}", {bar, parity});
    return b.CreateICmpNE(r, b.getInt32(0));
  }
  void tensor_load_2d(llvm::IRBuilder<>& b, llvm::Value* dst, llvm::Value* map, llvm::Value* x, llvm::Value* y,
                      llvm::Value* bar) const override {
    llvm::Value* addr = b.CreatePtrToInt(map, b.getInt64Ty());
    ptx(b, b.getVoidTy(),
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];",
        "r,l,r,r,r,~{memory}", {dst, addr, x, y, bar});
  }
  // Clusters (PTX ISA 8.0, sm_90): the backend writes nvvm.cluster_dim as .explicitcluster and
  // .reqnctapercluster, which a plain launch honours (the grid a multiple of the cluster).
  void mark_cluster(llvm::Function& f, int ctas) const override { f.addFnAttr("nvvm.cluster_dim", cat(ctas, ",1,1")); }
  llvm::Value* cluster_rank(llvm::IRBuilder<>& b) const override {
    return ptx(b, b.getInt32Ty(), "mov.u32 $0, %cluster_ctarank;", "=r", {});
  }
  void cluster_sync(llvm::IRBuilder<>& b) const override {
    ptx(b, b.getVoidTy(), "barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;", "~{memory}", {});
  }
  // (the default semantics, release at CTA scope: the arrival only orders this warp's finished
  // reads of the slot, done by wgmma, before the producer's next copy; .release.cluster ran the
  // kernels at 0.46x on the H100, a cluster-scope fence a step and warp)
  void mbarrier_arrive_cluster(llvm::IRBuilder<>& b, llvm::Value* bar, llvm::Value* rank) const override {
    ptx(b, b.getVoidTy(), "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, $0, $1;\nmbarrier.arrive.shared::cluster.b64 _, [ra];\n}",
        "r,r,~{memory}", {bar, rank});
  }
  void tensor_load_2d_multicast(llvm::IRBuilder<>& b, llvm::Value* dst, llvm::Value* map, llvm::Value* x, llvm::Value* y,
                                llvm::Value* bar, llvm::Value* mask) const override {
    llvm::Value* addr = b.CreatePtrToInt(map, b.getInt64Ty());
    ptx(b, b.getVoidTy(),
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [$0], [$1, {$2, $3}], [$4], $5;",
        "r,l,r,r,r,h,~{memory}", {dst, addr, x, y, bar, mask});
  }

 private:
  // wgmma.mma_async.sync.aligned.<shape> {D}, desc-a, desc-b, p<immediates>; as inline PTX: D's
  // registers (type acc, constraint reg) are tied to the inputs, p is scale-d (1: D += A B).
  static std::vector<llvm::Value*> wgmma_asm(llvm::IRBuilder<>& b, const std::vector<llvm::Value*>& d, llvm::Value* desc_a,
                                             llvm::Value* desc_b, const std::string& shape, const std::string& immediates,
                                             llvm::Type* acc, const char* reg) {
    const int nd = static_cast<int>(d.size());
    std::string text = cat("{\n.reg .pred p;\nsetp.ne.b32 p, $", 2 * nd + 2, ", 0;\nwgmma.mma_async.sync.aligned.", shape, " {");
    std::string cons;
    for (int i = 0; i < nd; ++i) text += cat(i ? ", $" : "$", i), cons += cat(i ? "," : "", "=", reg);
    text += cat("}, $", 2 * nd, ", $", 2 * nd + 1, ", p", immediates, ";\n}");
    for (int i = 0; i < nd; ++i) cons += cat(",", i);
    cons += ",l,l,r";
    std::vector<llvm::Type*> outs(static_cast<size_t>(nd), acc), ins(outs);
    ins.push_back(b.getInt64Ty()), ins.push_back(b.getInt64Ty()), ins.push_back(b.getInt32Ty());
    auto* fty = llvm::FunctionType::get(llvm::StructType::get(b.getContext(), outs), ins, false);
    auto* asm_fn = llvm::InlineAsm::get(fty, text, cons, /*hasSideEffects=*/true);
    std::vector<llvm::Value*> args(d);
    args.push_back(desc_a), args.push_back(desc_b), args.push_back(b.getInt32(1));
    llvm::CallInst* r = b.CreateCall(fty, asm_fn, args);
    r->addFnAttr(llvm::Attribute::Convergent);
    std::vector<llvm::Value*> out;
    for (unsigned i = 0; i < static_cast<unsigned>(nd); ++i) out.push_back(b.CreateExtractValue(r, {i}));
    return out;
  }
  std::string sm_;
};

}  // namespace

std::unique_ptr<SimtTarget> nvptx_simt_target(const std::string& sm) {
  bool ok = sm.size() >= 5 && sm.compare(0, 3, "sm_") == 0 && sm.find_first_not_of("0123456789a", 3) == std::string::npos;
  if (!ok || std::stoi(sm.substr(3)) < 80)
    throw UserError(cat("NVIDIA target '", sm, "': coopjit generates code for sm_80 and newer (sm_80, sm_86, sm_89, sm_90, ...)"));
  return std::make_unique<NvptxSimtTarget>(sm);
}

}  // namespace coopjit
