// The SIMT lowering (simt_lower.h): the kernel and its parameters, values, structured control
// flow, scalars and the op dispatch.
#include "lower/ir_to_llvm.h"
#include "lower/simt_lowering.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Intrinsics.h>

#include "layout/coopmatrix_layout.h"
#include "target/spirv_target.h"

namespace coopjit {

SimtShape simt_shape(const Function& f) {
  SimtShape s;
  auto it = f.attrs.find("subgroup_size");
  COOPJIT_INTERNAL_ASSERT(it != f.attrs.end(), "the function needs a subgroup_size");
  s.subgroup_size = static_cast<int>(std::get<int64_t>(it->second));
  int sgs = 1;
  if (auto g = f.attrs.find("subgroups_per_group"); g != f.attrs.end()) sgs = static_cast<int>(std::get<int64_t>(g->second));
  // producer_warps (the warp-specialized wgmma kernel, simt_tma_ws.cpp): warps after the IR's
  // subgroups, which the lowering gives work of its own.
  int producers = 0;
  if (auto g = f.attrs.find("producer_warps"); g != f.attrs.end()) producers = static_cast<int>(std::get<int64_t>(g->second));
  s.work_group_size = s.subgroup_size * (sgs + producers);
  return s;
}

SimtLowering::SimtLowering(const Function& f, llvm::LLVMContext& ctx, const SimtTarget& target)
    : f_(f), target_(target), ctx_(ctx), mod_(std::make_unique<llvm::Module>(f.name, ctx)), b_(ctx) {
  SimtShape s = simt_shape(f);
  S_ = s.subgroup_size;
  if (auto g = f.attrs.find("producer_warps"); g != f.attrs.end()) producer_warps_ = static_cast<int>(std::get<int64_t>(g->second));
  sgs_ = s.work_group_size / s.subgroup_size - producer_warps_;
  if (producer_warps_ != 0 && producer_warps_ != 1 && producer_warps_ != 4)
    throw UserError(cat("SIMT lowering: function attribute producer_warps=", producer_warps_, " must be 0, 1 or 4"));
  if (auto g = f.attrs.find("cluster"); g != f.attrs.end()) cluster_ = static_cast<int>(std::get<int64_t>(g->second));
  if (cluster_ != 0 && (cluster_ != 2 || !producer_warps_))
    throw UserError(cat("SIMT lowering: function attribute cluster=", cluster_, " must be 0, or 2 on a kernel with producer warps"));
  if (auto g = f.attrs.find("sk_pair"); g != f.attrs.end()) sk_pair_ = std::get<int64_t>(g->second) != 0;
  if (sk_pair_ && (cluster_ || producer_warps_ == 0))
    throw UserError("SIMT lowering: function attribute sk_pair needs producer warps and no attribute cluster (the pair is a cluster of its own)");
  auto mode = [&](const char* key) {
    auto it = f.attrs.find(key);
    const int64_t v = it == f.attrs.end() ? 0 : std::get<int64_t>(it->second);
    if (v < 0 || v > 2) throw UserError(cat("SIMT lowering: function attribute ", key, "=", v, " must be 0, 1 or 2"));
    return static_cast<int>(v);
  };
  dpas_mode_ = mode("dpas");
  block2d_mode_ = mode("block2d");
  mma_mode_ = mode("mma");
  if (S_ < 1 || S_ > 64 || (S_ & (S_ - 1)))
    throw UserError(cat("SIMT lowering: subgroup_size ", S_, " must be a power of two in [1, 64]"));
  if (!target_.subgroup_ok(S_))
    throw UserError(cat("SIMT lowering for ", target_.name(), ": subgroup_size ", S_, " is not one the target runs (NVIDIA: 32)"));
  if (mma_mode_ && !target_.tensor_cores())
    throw UserError(cat("SIMT lowering for ", target_.name(), ": mma (mma.sync) is an NVIDIA tensor-core operation"));
  if ((dpas_mode_ || block2d_mode_) && !target_.intel_subgroups())
    throw UserError(cat("SIMT lowering for ", target_.name(), ": dpas / block2d are Intel GPU operations"));
}

std::unique_ptr<llvm::Module> SimtLowering::run() {
  mod_->setTargetTriple(llvm::Triple(target_.triple()));
  reject_i1_in_memory(f_, "GPU devices");
  std::vector<llvm::Type*> params;
  for (const Value* p : f_.params) params.push_back(param_ty(p->type));
  // Function attribute tensor_maps = n: n CUDA tensor maps (128 bytes, 64-byte aligned) after the
  // IR's parameters, passed by value and read in place (nvvm.grid_constant): the TMA copies of
  // the wgmma pipeline (simt_wgmma.cpp) name them by their generic address.
  const auto tm_it = f_.attrs.find("tensor_maps");
  const int64_t tensor_maps = tm_it == f_.attrs.end() ? 0 : std::get<int64_t>(tm_it->second);
  if (tensor_maps && !target_.async_bulk_copies())
    throw UserError(cat("SIMT lowering for ", target_.name(), ": tensor maps (the Tensor Memory Accelerator) need an NVIDIA sm_90 target"));
  for (int64_t i = 0; i < tensor_maps; ++i) params.push_back(llvm::PointerType::get(ctx_, 0));
  auto* fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, f_.name, mod_.get());
  for (int64_t i = 0; i < tensor_maps; ++i) {
    const unsigned n = static_cast<unsigned>(f_.params.size() + i);
    auto* map_ty = llvm::ArrayType::get(b_.getInt8Ty(), 128);
    fn_->addParamAttr(n, llvm::Attribute::getWithByValType(ctx_, map_ty));
    fn_->addParamAttr(n, llvm::Attribute::getWithAlignment(ctx_, llvm::Align(64)));
    fn_->addParamAttr(n, llvm::Attribute::get(ctx_, "nvvm.grid_constant"));
    fn_->getArg(n)->setName(cat("tensor_map", i));
  }
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  fn_->addFnAttr(llvm::Attribute::Convergent);
  target_.mark_kernel(*fn_, S_, S_ * (sgs_ + producer_warps_));
  if (cluster_) target_.mark_cluster(*fn_, cluster_);
  if (sk_pair_) target_.mark_cluster(*fn_, 2);  // sk_pair: pairs of blocks, no multicast (simt_tma_ws.cpp)
  auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry);
  lane_ = target_.lane_id(b_);
  lane64_ = b_.CreateZExt(lane_, b_.getInt64Ty(), "lane");
  wg_setup();
  for (size_t i = 0; i < f_.params.size(); ++i) {
    const Value* p = f_.params[i];
    llvm::Value* a = fn_->getArg(static_cast<unsigned>(i));
    a->setName(p->hint);
    if (p->type.is_scalar() && (p->type.scalar == ScalarType::f16 || p->type.scalar == ScalarType::bf16))
      a = convert_value(a, ScalarType::f32, p->type.scalar);
    scalars_[p] = a;
  }
  if (producer_warps_) ws_begin();  // the producer warps' own code (simt_tma_ws.cpp)
  block(f_.body);
  if (!native_loads_.empty()) throw InternalError("a frag_native load not read as a wgmma fragment (simt_wgmma.cpp)");
  if (tma_stores_) {  // the TMA stores' reads of the staging done before the block's shared memory goes (simt_wgmma.cpp)
    auto* wty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
    b_.CreateCall(wty, llvm::InlineAsm::get(wty, "cp.async.bulk.wait_group.read 0;", "~{memory}", /*hasSideEffects=*/true));
  }
  b_.CreateRetVoid();
  if (producer_warps_) ws_end();
  return std::move(mod_);
}

// ---- types -------------------------------------------------------------------------------------
llvm::Type* SimtLowering::scalar_ty(ScalarType t) {
  switch (t) {
    case ScalarType::i1: return b_.getInt1Ty();
    case ScalarType::i8: case ScalarType::u8: case ScalarType::f8_e4m3: case ScalarType::f8_e5m2:
      return b_.getInt8Ty();
    case ScalarType::i16: case ScalarType::u16: return b_.getInt16Ty();
    case ScalarType::bf16: return b_.getInt16Ty();  // the bits (SPV_INTEL_bfloat16_conversion converts)
    case ScalarType::i32: case ScalarType::u32: return b_.getInt32Ty();
    case ScalarType::i64: case ScalarType::u64: case ScalarType::index: return b_.getInt64Ty();
    case ScalarType::f16: return b_.getHalfTy();
    case ScalarType::f32: return b_.getFloatTy();
    case ScalarType::f64: return b_.getDoubleTy();
  }
  throw InternalError("unknown scalar type");
}

llvm::Type* SimtLowering::param_ty(const Type& t) {
  if (t.is_pointer()) return global_ptr();
  if (!t.is_scalar()) throw UserError(cat("SIMT lowering: a kernel parameter of type ", t.str(), " is not supported"));
  if (t.scalar == ScalarType::f16 || t.scalar == ScalarType::bf16) return b_.getFloatTy();
  if (t.scalar == ScalarType::i1) return b_.getInt8Ty();
  return scalar_ty(t.scalar);
}

LaneMap SimtLowering::lanes_of(const Type& t) {
  auto it = lane_maps_.find(t.str());
  if (it == lane_maps_.end()) it = lane_maps_.emplace(t.str(), LaneMap::of(t, S_)).first;
  return it->second;
}

// Thread-scope matrices (each work-item its own copy, all rows * cols elements row-major) come
// only from and go only to the operations the verifier allows them: load, accumulate,
// outer_product and vector x matrix.
void SimtLowering::require_subgroup(const Op& o, const Type& t) {
  if (t.is_matrix() && t.scope != Scope::subgroup && t.scope != Scope::thread && !is_workgroup_matrix(t))
    throw UserError(cat("SIMT lowering: ", mnemonic(o), " on ", t.str(),
                        ": only subgroup-, thread- and workgroup-scope matrices are supported on GPUs so far"));
}

// ---- values ------------------------------------------------------------------------------------
llvm::Value* SimtLowering::scalar(const Value* v) {
  auto it = scalars_.find(v);
  COOPJIT_INTERNAL_ASSERT(it != scalars_.end(), "scalar value not lowered");
  return it->second;
}

const std::vector<llvm::Value*>& SimtLowering::mat(const Value* v) {
  if (auto fr = frags_.find(v); fr != frags_.end()) {  // gathered into the layout where it is used
    const auto key = std::make_pair(v, b_.GetInsertBlock());
    auto at = frag_view_at_.find(key);
    if (at == frag_view_at_.end()) {
      frag_views_.push_back(frag_layout(fr->second));
      at = frag_view_at_.emplace(key, frag_views_.size() - 1).first;
    }
    return frag_views_[at->second];
  }
  auto it = mats_.find(v);
  COOPJIT_INTERNAL_ASSERT(it != mats_.end(), "matrix value not lowered");
  return it->second;
}

size_t SimtLowering::parts(const Type& t) {
  if (is_workgroup_matrix(t)) return 1;  // its buffer in shared memory (simt_workgroup.cpp)
  if (t.is_tensor_layout() || t.is_tensor_view()) return tensor_parts(t);
  if (t.is_matrix()) return t.scope == Scope::thread ? static_cast<size_t>(t.rows * t.cols) : static_cast<size_t>(lanes_of(t).comps());
  if (t.is_vector()) return static_cast<size_t>(t.cols);
  throw UserError(cat("SIMT lowering: values of type ", t.str(), " are not supported"));
}

std::vector<llvm::Value*> SimtLowering::flat(const Value* v) {
  if (v->type.is_aggregate()) return mat(v);
  return {scalar(v)};
}

std::vector<llvm::Value*> SimtLowering::flat_all(const std::vector<Value*>& vs, size_t from) {
  std::vector<llvm::Value*> out;
  for (size_t i = from; i < vs.size(); ++i) {
    auto p = flat(vs[i]);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

void SimtLowering::bind(const std::vector<Value*>& vs, const std::vector<llvm::Value*>& flat) {
  size_t pos = 0;
  for (const Value* v : vs) {
    if (v->type.is_aggregate()) {
      const size_t n = parts(v->type);
      mats_[v] = std::vector<llvm::Value*>(flat.begin() + pos, flat.begin() + pos + n);
      pos += n;
    } else {
      scalars_[v] = flat[pos++];
    }
  }
  COOPJIT_INTERNAL_ASSERT(pos == flat.size());
}

// ---- control flow --------------------------------------------------------------------------------
std::vector<llvm::Value*> SimtLowering::block(const Block& blk) {
  for (const auto& op : blk.ops) {
    if (op->kind == OpKind::yield) return flat_all(op->operands);
    this->op(*op);
  }
  return {};
}

void SimtLowering::for_loop(const Op& o) {
  if (o.attrs.count("mma_pipeline") && mma_pipeline(o)) return;  // simt_mma_pipeline.cpp
  const Block& region = *o.regions[0];
  // Workgroup-scope matrices are carried in buffers of their own (simt_workgroup.cpp).
  std::vector<llvm::Value*> carriers;
  std::vector<llvm::Value*> init = flat_all(o.operands, 3);
  if (wg_tid_) init = wg_carry(o.results, init, carriers);
  bind(o.results, emit_for(b_, fn_, scalar(o.operands[0]), scalar(o.operands[1]), scalar(o.operands[2]),
                           init, [&](llvm::Value* iv, const std::vector<llvm::Value*>& carried) {
                             scalars_[region.args[0]] = iv;
                             bind(std::vector<Value*>(region.args.begin() + 1, region.args.end()), carried);
                             std::vector<llvm::Value*> next = block(region);
                             return wg_tid_ ? wg_carry(o.results, next, carriers) : next;
                           }));
}

void SimtLowering::if_op(const Op& o) {
  std::vector<llvm::Value*> carriers;
  auto arm = [&](const Block& region) {
    std::vector<llvm::Value*> out = block(region);
    return wg_tid_ ? wg_carry(o.results, out, carriers) : out;
  };
  bind(o.results, emit_if(b_, fn_, scalar(o.operands[0]), [&] { return arm(*o.regions[0]); },
                          [&] { return arm(*o.regions[1]); }));
}

llvm::Value* SimtLowering::lower_region(const Block& region, const std::vector<llvm::Value*>& args) {
  for (size_t i = 0; i < args.size(); ++i) scalars_[region.args[i]] = args[i];
  return block(region)[0];
}

// ---- built-ins and scalars -------------------------------------------------------------------------
llvm::Value* SimtLowering::builtin(const std::string& name, llvm::Type* ret, const std::vector<llvm::Value*>& args,
                                   bool convergent) {
  COOPJIT_INTERNAL_ASSERT(target_.intel_subgroups(), "a SPIR-V built-in (", name, ") on ", target_.name());
  return spirv_builtin(b_, name, ret, args, convergent);
}

llvm::Value* SimtLowering::work_id(const Op& o) {
  const auto which = static_cast<WorkId>(o.sub);
  if (which == WorkId::lane) return lane64_;
  return target_.work_id(b_, which, static_cast<int>(o.int_attr("dim", 0)));
}

// The flags' defaults (simt_target.h): LLVM's atomics; no trap.
void SimtTarget::flag_store_release(llvm::IRBuilder<>& b, llvm::Value* p, llvm::Value* v) const {
  b.CreateAtomicRMW(llvm::AtomicRMWInst::Xchg, p, v, llvm::Align(4), llvm::AtomicOrdering::Release);
}
llvm::Value* SimtTarget::flag_load_acquire(llvm::IRBuilder<>& b, llvm::Value* p) const {
  return b.CreateAtomicRMW(llvm::AtomicRMWInst::Or, p, b.getInt32(0), llvm::Align(4), llvm::AtomicOrdering::Acquire);
}
void SimtTarget::prefetch_l2_bulk(llvm::IRBuilder<>&, llvm::Value*, llvm::Value*) const {
  throw InternalError(cat("cp.async.bulk.prefetch.L2 (sk_prefetch) on ", name()));
}
llvm::Value* SimtTarget::trace_clock(llvm::IRBuilder<>&, bool) const {
  throw UserError(cat("flag.set's trace (sk_trace) on ", name(), ": the target has no clock to read"));
}
void SimtTarget::trap(llvm::IRBuilder<>&) const {
  throw UserError(cat("flag.wait with a spin_limit on ", name(), ": the target has no trap to end a stuck kernel (use spin_limit 0)"));
}

// Stream-K flags in global memory at device scope, through the target (simt_target.h): every
// work-item sets the flag with a release exchange (so that an acquire of the last value sees the
// whole subgroup's writes), or spins on acquire loads until it reads non-zero, then the subgroup
// synchronizes (so that a flag.set of 0 after the wait cannot hide the flag from a work-item still
// polling). spin_limit > 0: the target's trap after that many polls (a launch error, not a hang).
void SimtLowering::flag_op(const Op& o) {
  llvm::Value* p = b_.CreateGEP(b_.getInt32Ty(), scalar(o.operands[0]), scalar(o.operands[1]));
  if (o.kind == OpKind::flag_set && o.int_attr("trace", 0)) {
    // Debug (sk_trace): a plain volatile store, no release (nothing waits for it): the given value
    // (trace 1), this SM's clock (2) or the device's nanosecond timer (3), low 32 bits.
    const int64_t tr = o.int_attr("trace", 0);
    llvm::Value* v = tr == 1 ? scalar(o.operands.at(2)) : target_.trace_clock(b_, tr == 3);
    b_.CreateAlignedStore(v, p, llvm::Align(4), /*isVolatile=*/true);
    return;
  }
  if (o.kind == OpKind::flag_set && o.int_attr("one_lane", 0)) {
    // (attribute one_lane: Stream-K's sk_flags plans with sk_one_release) the subgroup synchronizes
    // (ordering its work-items' earlier writes before what follows, for them all), then work-item 0
    // alone sets the flag with its release, cumulative over what the barrier ordered: one atomic a
    // subgroup where every work-item's exchange queued 32 on one address.
    // (predicated, no branch: a branch here cost ptxas 560-1,970 bytes of spills with f32 C)
    target_.subgroup_sync(b_);
    target_.flag_store_release_first(b_, p, o.operands.size() > 2 ? scalar(o.operands[2]) : b_.getInt32(1), lane());
    return;
  }
  if (o.kind == OpKind::flag_set) {
    target_.flag_store_release(b_, p, o.operands.size() > 2 ? scalar(o.operands[2]) : b_.getInt32(1));
    return;
  }
  const int64_t limit = o.int_attr("spin_limit", 0);
  llvm::BasicBlock* entry = b_.GetInsertBlock();
  auto* spin = llvm::BasicBlock::Create(ctx_, "flag.spin", fn_);
  auto* again = llvm::BasicBlock::Create(ctx_, "flag.again", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "flag.done", fn_);
  b_.CreateBr(spin);
  b_.SetInsertPoint(spin);
  llvm::PHINode* polls = b_.CreatePHI(b_.getInt64Ty(), 2, "polls");
  polls->addIncoming(b_.getInt64(0), entry);
  llvm::Value* v = target_.flag_load_acquire(b_, p);
  b_.CreateCondBr(b_.CreateICmpNE(v, b_.getInt32(0)), done, again);
  b_.SetInsertPoint(again);
  llvm::Value* next = b_.CreateAdd(polls, b_.getInt64(1));
  if (limit > 0) {
    auto* stuck = llvm::BasicBlock::Create(ctx_, "flag.stuck", fn_);
    auto* pause = llvm::BasicBlock::Create(ctx_, "flag.pause", fn_);
    b_.CreateCondBr(b_.CreateICmpUGE(next, b_.getInt64(static_cast<uint64_t>(limit))), stuck, pause);
    b_.SetInsertPoint(stuck);
    target_.trap(b_);
    b_.CreateUnreachable();
    b_.SetInsertPoint(pause);
  }
  target_.spin_pause(b_);
  polls->addIncoming(next, b_.GetInsertBlock());
  b_.CreateBr(spin);
  b_.SetInsertPoint(done);
  target_.subgroup_sync(b_);
}

// ---- dispatch ------------------------------------------------------------------------------------
void SimtLowering::op(const Op& o) {
  switch (o.kind) {  // what may have changed memory since a load (frag_like issues loads again)
    case OpKind::mat_store: case OpKind::mat_accumulate: case OpKind::vec_store: case OpKind::mat_store_tensor:
    case OpKind::store: case OpKind::flag_set: case OpKind::flag_wait: case OpKind::barrier:
      ++mem_epoch_;
      break;
    case OpKind::mat_load: load_epoch_[o.result()] = mem_epoch_; break;
    default: break;
  }
  for (const Value* v : o.operands) require_subgroup(o, v->type);
  for (const Value* v : o.results) require_subgroup(o, v->type);
  if (wg_tid_ && o.kind != OpKind::for_ && o.kind != OpKind::if_ && o.kind != OpKind::yield) {
    bool wg = false;
    for (const Value* v : o.operands) wg = wg || is_workgroup_matrix(v->type);
    for (const Value* v : o.results) wg = wg || is_workgroup_matrix(v->type);
    if (wg) return workgroup_op(o);  // simt_workgroup.cpp
  }
  switch (o.kind) {
    case OpKind::constant: {
      const Type& t = o.result()->type;
      if (t.scalar == ScalarType::f32 || t.scalar == ScalarType::f64)
        scalars_[o.result()] = llvm::ConstantFP::get(scalar_ty(t.scalar), o.float_attr("value"));
      else if (is_float(t.scalar))  // f16, bf16 and fp8 from f32 (rounded as conversions round)
        scalars_[o.result()] = convert_value(llvm::ConstantFP::get(b_.getFloatTy(), o.float_attr("value")), ScalarType::f32, t.scalar);
      else
        scalars_[o.result()] = llvm::ConstantInt::get(scalar_ty(t.scalar), std::get<int64_t>(o.attrs.at("value")), true);
      return;
    }
    case OpKind::binary:
      if (static_cast<BinOp>(o.sub) == BinOp::div && o.result()->type.scalar == ScalarType::f32 && o.int_attr("recip_approx", 0))
        if (llvm::Value* r = target_.recip_approx(b_, scalar(o.operands[1]))) {  // sigmoid / silu's 1 + e^-v (gemm_epilogue.cpp)
          scalars_[o.result()] = b_.CreateFMul(scalar(o.operands[0]), r);
          return;
        }
      scalars_[o.result()] = scalar_bin(static_cast<BinOp>(o.sub), o.operands[0]->type.scalar, scalar(o.operands[0]),
                                        scalar(o.operands[1]));
      return;
    case OpKind::cmp:
      scalars_[o.result()] = scalar_cmp(static_cast<CmpPred>(o.sub), o.operands[0]->type.scalar, scalar(o.operands[0]),
                                        scalar(o.operands[1]));
      return;
    case OpKind::select:
      scalars_[o.result()] = b_.CreateSelect(scalar(o.operands[0]), scalar(o.operands[1]), scalar(o.operands[2]));
      return;
    case OpKind::unary:
      if (static_cast<UnOp>(o.sub) == UnOp::erf && o.result()->type.scalar == ScalarType::f32 && o.int_attr("erf_absolute", 0))
        if (llvm::Value* r = target_.erf_absolute(b_, scalar(o.operands[0]))) {  // GELU's 1 + erf (gemm_epilogue.cpp)
          scalars_[o.result()] = r;
          return;
        }
      scalars_[o.result()] = unary_value(static_cast<UnOp>(o.sub), o.result()->type.scalar, scalar(o.operands[0]));
      return;
    case OpKind::convert:
      scalars_[o.result()] = convert_value(scalar(o.operands[0]), o.operands[0]->type.scalar, o.result()->type.scalar);
      return;
    case OpKind::ptr_offset:
      scalars_[o.result()] = b_.CreateGEP(scalar_ty(o.result()->type.scalar), scalar(o.operands[0]), scalar(o.operands[1]));
      return;
    case OpKind::load: {
      const ScalarType t = o.result()->type.scalar;
      llvm::Value* p = b_.CreateGEP(scalar_ty(t), scalar(o.operands[0]), scalar(o.operands[1]));
      scalars_[o.result()] = b_.CreateAlignedLoad(scalar_ty(t), p, align(t));
      return;
    }
    case OpKind::flag_set: case OpKind::flag_wait: flag_op(o); return;
    case OpKind::work_id: scalars_[o.result()] = work_id(o); return;
    case OpKind::cycles: throw UserError("cycles (a CPU's time-stamp counter, plan cycles) has no device lowering");
    case OpKind::prefetch: return;  // (a hint)
    case OpKind::for_: for_loop(o); return;
    case OpKind::if_: if_op(o); return;
    case OpKind::yield: throw InternalError("yield outside a region");
    case OpKind::shared_alloc: shared_alloc(o); return;
    case OpKind::barrier: target_.group_barrier(b_); return;
    case OpKind::store: {
      const ScalarType t = o.operands[2]->type.scalar;
      b_.CreateAlignedStore(scalar(o.operands[2]), b_.CreateGEP(scalar_ty(t), scalar(o.operands[0]), scalar(o.operands[1])),
                            align(t));
      return;
    }
    case OpKind::mat_load: case OpKind::mat_store:
      if (o.kind == OpKind::mat_store && frag_op(o)) return;
      if (o.int_attr("frag_native", 0)) {  // a wgmma fragment's own order (simt_wgmma.cpp): only a fragment's store / add
        if (o.kind == OpKind::mat_store) throw InternalError(cat("a frag_native store of a value that is not a wgmma fragment: ", mnemonic(o)));
        native_loads_.insert(o.result());
        return;
      }
      if (o.operands[o.kind == OpKind::mat_load ? 0 : 1]->type.is_groupshared()) return shared_access(o);
      // VNNI-packed memory (builder.h) is the CPU recipes' panel format; device recipes keep
      // plain strided matrices (their VNNI is in registers: simt_dpas.cpp).
      if (o.int_attr("vnni", 1) != 1)
        throw InternalError(cat("the SIMT lowering does not take vnni-packed memory: ", mnemonic(o)));
      if (o.kind == OpKind::mat_load) load(o); else store(o);
      return;
    case OpKind::mat_accumulate: accumulate(o); return;
    case OpKind::vec_load: case OpKind::vec_store: vector_access(o); return;
    case OpKind::mat_splat: mats_[o.result()] = splat(o); return;
    case OpKind::mat_mul_add: mats_[o.result()] = mul_add(o); return;
    case OpKind::mat_scale: case OpKind::mat_binary:
      if (frag_op(o)) return;
      mats_[o.result()] = elementwise(o);
      return;
    case OpKind::mat_per_element:
      if (frag_op(o)) return;
      mats_[o.result()] = per_element(o);
      return;
    case OpKind::mat_reduce: mats_[o.result()] = reduce(o); return;
    case OpKind::mat_convert: case OpKind::mat_transpose: case OpKind::mat_length: case OpKind::mat_get:
    case OpKind::mat_set: case OpKind::mat_coord: case OpKind::mat_sum_accumulate: case OpKind::mat_outer_product:
    case OpKind::vec_matrix_mul:
      matrix_op(o);
      return;
    case OpKind::tensor_layout: case OpKind::tensor_view: mats_[o.result()] = flat_all(o.operands); return;
    case OpKind::mat_load_tensor: case OpKind::mat_store_tensor: tensor_access(o); return;
  }
  throw UserError(cat("the SIMT lowering (SPIR-V devices) does not support ", mnemonic(o), " yet"));
}

std::unique_ptr<llvm::Module> lower_simt(const ir::Function& f, llvm::LLVMContext& ctx, const std::string& target) {
  auto t = simt_target(target);
  return SimtLowering(f, ctx, *t).run();
}

}  // namespace coopjit
