// The SIMD lowering (simd_lower.h): values, structured control flow, scalars and the op dispatch.
#include "lower/simd_lowering.h"

#include "lower/ir_to_llvm.h"
#include "target/cpu_info.h"

namespace coopjit {

std::unique_ptr<llvm::Module> SimdLowering::run() {
  auto* ptr = llvm::PointerType::getUnqual(ctx_);
  auto* fty = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), {ptr, ptr, ptr}, false);
  fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, f_.name, mod_.get());
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry);
  reject_i1_in_memory(f_, "the CPU");
  unpack_params();
  if (amx_) find_tile_loads();
  block(f_.body);
  // Gives the tile state back (the next kernel loads its configuration again): a thread that
  // keeps it makes every context switch save 8 KiB of tile data.
  if (amx_ == 1) b_.CreateCall(llvm::Intrinsic::getOrInsertDeclaration(mod_.get(), llvm::Intrinsic::x86_tilerelease));
  b_.CreateRetVoid();
  return std::move(mod_);
}

llvm::Type* SimdLowering::scalar_ty(ScalarType t) {
  switch (t) {
    case ScalarType::i1: return b_.getInt1Ty();
    case ScalarType::i8: case ScalarType::u8: case ScalarType::f8_e4m3: case ScalarType::f8_e5m2:
      return b_.getInt8Ty();
    case ScalarType::i16: case ScalarType::u16: return b_.getInt16Ty();
    case ScalarType::i32: case ScalarType::u32: return b_.getInt32Ty();
    case ScalarType::i64: case ScalarType::u64: case ScalarType::index: return b_.getInt64Ty();
    case ScalarType::f16: return b_.getHalfTy();
    case ScalarType::bf16: return b_.getBFloatTy();
    case ScalarType::f32: return b_.getFloatTy();
    case ScalarType::f64: return b_.getDoubleTy();
  }
  throw InternalError("unknown scalar type");
}

size_t SimdLowering::parts(const Type& t) const {
  if (t.is_tensor_layout() || t.is_tensor_view()) return tensor_parts(t);
  if (t.is_vector()) return static_cast<size_t>(t.cols);  // per-thread vectors: one scalar per component
  return vector_layout(t) ? static_cast<size_t>(t.rows * chunks(t)) : static_cast<size_t>(t.rows * t.cols);
}

std::vector<llvm::Value*> SimdLowering::flat(const Value* v) {
  if (v->type.is_aggregate()) return mat(v);
  return {scalar(v)};
}

llvm::Value* SimdLowering::scalar(const Value* v) {
  auto it = scalars_.find(v);
  COOPJIT_INTERNAL_ASSERT(it != scalars_.end(), "scalar value not lowered");
  return it->second;
}

const std::vector<llvm::Value*>& SimdLowering::mat(const Value* v) {
  auto it = mats_.find(v);
  if (it == mats_.end()) {
    if (tiles_.count(v)) return rows_of_tiles(v);
    auto m = mems_.find(v);
    COOPJIT_INTERNAL_ASSERT(m != mems_.end(), "matrix value not lowered");
    const Type& t = v->type;
    std::vector<llvm::Value*> vecs;
    for (size_t k = 0; k < static_cast<size_t>(t.rows * chunks(t)); ++k)
      vecs.push_back(b_.CreateLoad(vec_ty(t.scalar), b_.CreateConstInBoundsGEP2_64(slots_ty(t), m->second, 0, k)));
    it = mats_.emplace(v, from_vectors(t, vecs)).first;
  }
  return it->second;
}

void SimdLowering::bind(const std::vector<Value*>& vs, const std::vector<llvm::Value*>& flat) {
  size_t pos = 0;
  for (const Value* v : vs) {
    if (v->type.is_aggregate()) {
      mats_[v] = std::vector<llvm::Value*>(flat.begin() + pos, flat.begin() + pos + parts(v->type));
      pos += parts(v->type);
    } else {
      scalars_[v] = flat[pos++];
    }
  }
  COOPJIT_INTERNAL_ASSERT(pos == flat.size());
}

std::vector<llvm::Value*> SimdLowering::flat_all(const std::vector<Value*>& vs, size_t from) {
  std::vector<llvm::Value*> out;
  for (size_t i = from; i < vs.size(); ++i) {
    auto p = flat(vs[i]);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

bool SimdLowering::is_const(const Value* v, int64_t c) {
  if (!v->def || v->def->kind != OpKind::constant) return false;
  auto* i = std::get_if<int64_t>(&v->def->attrs.at("value"));
  return i && *i == c;
}

int64_t SimdLowering::const_value(const Value* v) {
  if (!v->def || v->def->kind != OpKind::constant) return 0;
  auto* i = std::get_if<int64_t>(&v->def->attrs.at("value"));
  return i ? *i : 0;
}

void SimdLowering::unpack_params() {
  llvm::Value* slots[3] = {fn_->getArg(0), fn_->getArg(1), fn_->getArg(2)};
  int next[3] = {0, 0, 0};
  for (const Value* p : f_.params) {
    int k = p->type.is_pointer() ? 0 : is_float(p->type.scalar) ? 2 : 1;
    llvm::Type* slot_ty = k == 0 ? static_cast<llvm::Type*>(b_.getPtrTy())
                                 : k == 1 ? static_cast<llvm::Type*>(b_.getInt64Ty()) : b_.getDoubleTy();
    llvm::Value* addr = b_.CreateConstInBoundsGEP1_64(slot_ty, slots[k], next[k]++);
    llvm::Value* v = b_.CreateLoad(slot_ty, addr, p->hint);
    if (k == 1 && !p->type.is_index()) v = b_.CreateTrunc(v, scalar_ty(p->type.scalar));
    if (k == 2 && p->type.scalar != ScalarType::f64) v = b_.CreateFPTrunc(v, scalar_ty(p->type.scalar));
    scalars_[p] = v;
  }
  grid_ints_ = slots[1];
  grid_base_ = next[1];
}

std::vector<llvm::Value*> SimdLowering::block(const Block& blk) {
  const std::vector<bool>* tiles = yield_tiles_;  // set by the for loop that owns this block
  yield_tiles_ = nullptr;
  for (const auto& op : blk.ops) {
    if (op->kind == OpKind::yield) {
      if (!tiles) return flat_all(op->operands);
      std::vector<llvm::Value*> out;
      for (size_t i = 0; i < op->operands.size(); ++i) {
        auto p = (*tiles)[i] ? tiles_of(op->operands[i]) : flat(op->operands[i]);
        out.insert(out.end(), p.begin(), p.end());
      }
      return out;
    }
    this->op(*op);
  }
  return {};
}

void SimdLowering::for_loop(const Op& o) {
  // Values the loop carries in AMX tiles (an accumulator of tile mul_adds): tiles in the phis,
  // rows everywhere else (see simd_lowering.h).
  const Block& region = *o.regions[0];
  const std::vector<bool> tiles = tile_carried(o);
  std::vector<llvm::Value*> init;
  std::vector<size_t> count;  // LLVM values per carried value
  for (size_t i = 3; i < o.operands.size(); ++i) {
    auto p = tiles[i - 3] ? tiles_of(o.operands[i]) : flat(o.operands[i]);
    init.insert(init.end(), p.begin(), p.end());
    count.push_back(p.size());
  }
  auto bind_carried = [&](const std::vector<Value*>& vs, const std::vector<llvm::Value*>& flat) {
    size_t pos = 0;
    for (size_t i = 0; i < vs.size(); ++i) {
      std::vector<llvm::Value*> part(flat.begin() + pos, flat.begin() + pos + count[i]);
      pos += count[i];
      if (tiles[i]) tiles_[vs[i]] = part;
      else bind({vs[i]}, part);
    }
  };
  std::vector<llvm::Value*> after = emit_for(
      b_, fn_, scalar(o.operands[0]), scalar(o.operands[1]), scalar(o.operands[2]), init,
      [&](llvm::Value* iv, const std::vector<llvm::Value*>& carried) {
        scalars_[region.args[0]] = iv;
        bind_carried(std::vector<Value*>(region.args.begin() + 1, region.args.end()), carried);
        yield_tiles_ = &tiles;
        return block(region);
      });
  bind_carried(o.results, after);
}

void SimdLowering::if_op(const Op& o) {
  bind(o.results, emit_if(b_, fn_, scalar(o.operands[0]), [&] { return block(*o.regions[0]); },
                          [&] { return block(*o.regions[1]); }));
}

llvm::Value* SimdLowering::scalar_bin(BinOp op, ScalarType t, llvm::Value* x, llvm::Value* y) {
  if (t == ScalarType::f8_e4m3 || t == ScalarType::f8_e5m2) {
    // Held as bits (i8): compute in f32 and round back, as the SIMT lowering does.
    llvm::Value* r = scalar_bin(op, ScalarType::f32, convert_value(x, t, ScalarType::f32), convert_value(y, t, ScalarType::f32));
    return convert_value(r, ScalarType::f32, t);
  }
  if (llvm::Value* r = emit_binary(b_, op, t, x, y)) return r;
  // IEEE minimum / maximum (NaN propagates, -0 < +0). LLVM expands them to four or five
  // instructions per vector (a max, a NaN test, a sign test, blends): a max reduction was
  // compute-bound at 80% of the copy bandwidth. AVX512DQ's vrangeps / vrangepd with imm
  // 0b01_0x (min or max, the sign from the comparison) orders -0 below +0 in one instruction
  // but does not propagate NaN: where the inputs are unordered the result is x + y (a NaN), a
  // masked add.
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
  if (vt && vt->getPrimitiveSizeInBits() == 512 && cpu_.has("avx512dq") &&
      (t == ScalarType::f32 || t == ScalarType::f64)) {
    const auto id = t == ScalarType::f32 ? llvm::Intrinsic::x86_avx512_mask_range_ps_512
                                         : llvm::Intrinsic::x86_avx512_mask_range_pd_512;
    llvm::Value* all = t == ScalarType::f32 ? static_cast<llvm::Value*>(b_.getInt16(-1)) : b_.getInt8(-1);
    llvm::Value* r = b_.CreateIntrinsic(id, {}, {x, y, b_.getInt32(op == BinOp::max ? 0b0101 : 0b0100),
                                                 llvm::PoisonValue::get(vt), all, b_.getInt32(4)});
    return b_.CreateSelect(b_.CreateFCmpUNO(x, y), b_.CreateFAdd(x, y), r);
  }
  return b_.CreateBinaryIntrinsic(op == BinOp::max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, x, y);
}

llvm::Value* SimdLowering::scalar_cmp(CmpPred p, ScalarType t, llvm::Value* x, llvm::Value* y) {
  if (t == ScalarType::f8_e4m3 || t == ScalarType::f8_e5m2)
    return scalar_cmp(p, ScalarType::f32, convert_value(x, t, ScalarType::f32), convert_value(y, t, ScalarType::f32));
  const llvm::CmpInst::Predicate pred = llvm_predicate(p, t);
  return is_float(t) ? b_.CreateFCmp(pred, x, y) : b_.CreateICmp(pred, x, y);
}

llvm::Value* SimdLowering::lanes() {
  std::vector<llvm::Constant*> l;
  for (int i = 0; i < S_; ++i) l.push_back(b_.getInt64(i));
  return llvm::ConstantVector::get(l);
}

llvm::Value* SimdLowering::lane_mask(int n) {
  std::vector<llvm::Constant*> l;
  for (int i = 0; i < S_; ++i) l.push_back(b_.getInt1(i < n));
  return llvm::ConstantVector::get(l);
}

std::vector<llvm::Value*> SimdLowering::as_vectors(const Type& t, const std::vector<llvm::Value*>& p) {
  if (vector_layout(t)) return p;
  std::vector<llvm::Value*> out;
  for (int64_t i = 0; i < t.rows; ++i)
    for (int j = 0; j < chunks(t); ++j) {
      llvm::Value* v = llvm::Constant::getNullValue(vec_ty(t.scalar));
      for (int l = 0; l < S_ && j * S_ + l < t.cols; ++l) v = b_.CreateInsertElement(v, p[i * t.cols + j * S_ + l], l);
      out.push_back(v);
    }
  return out;
}

std::vector<llvm::Value*> SimdLowering::from_vectors(const Type& t, const std::vector<llvm::Value*>& v) {
  if (vector_layout(t)) return v;
  std::vector<llvm::Value*> out;
  for (int64_t i = 0; i < t.rows; ++i)
    for (int64_t k = 0; k < t.cols; ++k) out.push_back(b_.CreateExtractElement(v[i * chunks(t) + k / S_], k % S_));
  return out;
}

void SimdLowering::op(const Op& o) {
  switch (o.kind) {
    case OpKind::constant: {
      const Type& t = o.result()->type;
      const Attr& v = o.attrs.at("value");
      if (t.scalar == ScalarType::f8_e4m3 || t.scalar == ScalarType::f8_e5m2)  // the bits, rounded once from f64
        scalars_[o.result()] = convert_value(llvm::ConstantFP::get(b_.getDoubleTy(), o.float_attr("value")),
                                             ScalarType::f64, t.scalar);
      else if (is_float(t.scalar))
        scalars_[o.result()] = llvm::ConstantFP::get(scalar_ty(t.scalar), o.float_attr("value"));
      else
        scalars_[o.result()] = llvm::ConstantInt::get(scalar_ty(t.scalar), std::get<int64_t>(v), true);
      return;
    }
    case OpKind::binary:
      scalars_[o.result()] = scalar_bin(static_cast<BinOp>(o.sub), o.operands[0]->type.scalar,
                                        lanev(scalar(o.operands[0])), lanev(scalar(o.operands[1])));
      return;
    case OpKind::cmp:
      scalars_[o.result()] = scalar_cmp(static_cast<CmpPred>(o.sub), o.operands[0]->type.scalar,
                                        lanev(scalar(o.operands[0])), lanev(scalar(o.operands[1])));
      return;
    case OpKind::select:
      scalars_[o.result()] = b_.CreateSelect(lanev(scalar(o.operands[0])), lanev(scalar(o.operands[1])),
                                             lanev(scalar(o.operands[2])));
      return;
    case OpKind::ptr_offset:
      scalars_[o.result()] = b_.CreateGEP(scalar_ty(o.result()->type.scalar), scalar(o.operands[0]),
                                          scalar(o.operands[1]));
      return;
    case OpKind::flag_set: {
      llvm::Value* p = b_.CreateGEP(b_.getInt32Ty(), scalar(o.operands[0]), scalar(o.operands[1]));
      llvm::Value* v = o.operands.size() > 2 ? scalar(o.operands[2]) : b_.getInt32(1);
      b_.CreateAlignedStore(v, p, llvm::Align(4))->setAtomic(llvm::AtomicOrdering::Release);
      return;
    }
    case OpKind::flag_wait: {
      llvm::Value* p = b_.CreateGEP(b_.getInt32Ty(), scalar(o.operands[0]), scalar(o.operands[1]));
      auto* spin = llvm::BasicBlock::Create(ctx_, "flag.spin", fn_);
      auto* done = llvm::BasicBlock::Create(ctx_, "flag.done", fn_);
      b_.CreateBr(spin);
      b_.SetInsertPoint(spin);
      auto* v = b_.CreateAlignedLoad(b_.getInt32Ty(), p, llvm::Align(4));
      v->setAtomic(llvm::AtomicOrdering::Acquire);
      llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "flag.pause", fn_);
      b_.CreateCondBr(b_.CreateICmpNE(v, b_.getInt32(0)), done, body);
      b_.SetInsertPoint(body);
      // The x86 spin-wait hint (this lowering targets x86 CPUs), then give the core away: with
      // more runnable threads than cores, the worker being waited for may need this one.
      b_.CreateCall(llvm::Intrinsic::getOrInsertDeclaration(mod_.get(), llvm::Intrinsic::x86_sse2_pause));
      b_.CreateCall(mod_->getOrInsertFunction("sched_yield", llvm::FunctionType::get(b_.getInt32Ty(), false)));
      b_.CreateBr(spin);
      b_.SetInsertPoint(done);
      return;
    }
    case OpKind::load: {
      llvm::Type* et = scalar_ty(o.result()->type.scalar);
      llvm::Value* p = b_.CreateGEP(et, scalar(o.operands[0]), lanev(scalar(o.operands[1])));
      if (lane_mask_)  // one element per active lane
        scalars_[o.result()] = b_.CreateMaskedGather(llvm::FixedVectorType::get(et, S_), p,
                                                     align(o.result()->type.scalar), lane_mask_,
                                                     llvm::Constant::getNullValue(llvm::FixedVectorType::get(et, S_)));
      else
        scalars_[o.result()] = b_.CreateAlignedLoad(et, p, align(o.result()->type.scalar));
      return;
    }
    case OpKind::for_: for_loop(o); return;
    case OpKind::if_: if_op(o); return;
    case OpKind::yield: throw InternalError("yield outside a region");
    case OpKind::shared_alloc: shared_alloc(o); return;
    case OpKind::barrier: return;  // a work-group is this one invocation
    case OpKind::store: {
      const ScalarType t = o.operands[2]->type.scalar;
      COOPJIT_INTERNAL_ASSERT(!lane_mask_, "a store in a per-lane region");
      b_.CreateAlignedStore(scalar(o.operands[2]), b_.CreateGEP(scalar_ty(t), scalar(o.operands[0]), scalar(o.operands[1])),
                            align(t));
      return;
    }
    case OpKind::mat_load:
      if (converting_shared_access(o)) return;
      if (is_tile_load(o)) {
        if (!defer_tiles(o)) load_tiles(o);
        return;
      }
      COOPJIT_INTERNAL_ASSERT(!o.int_attr("tile_cols"), "a load of B panels in 1 KiB tiles that is not a tile load");
      load(o);
      return;
    case OpKind::mat_store:
      if (converting_shared_access(o)) return;
      if (!store_tiles(o)) store(o);
      if (int64_t bytes = o.int_attr("demote")) demote_lines(o, bytes);
      return;
    case OpKind::mat_splat:
      if (splat_tiles(o)) return;
      mats_[o.result()] = splat(o);
      return;
    case OpKind::mat_mul_add:
      if (tile_mul_add(o)) return mul_add_tiles(o);
      mats_[o.result()] = mul_add(o);
      return;
    case OpKind::mat_scale: case OpKind::mat_binary: mats_[o.result()] = elementwise(o); return;
    case OpKind::unary:
      scalars_[o.result()] = unary_value(static_cast<UnOp>(o.sub), o.result()->type.scalar, lanev(scalar(o.operands[0])));
      return;
    case OpKind::convert:
      scalars_[o.result()] = convert_value(lanev(scalar(o.operands[0])), o.operands[0]->type.scalar,
                                           o.result()->type.scalar);
      return;
    case OpKind::mat_reduce: case OpKind::mat_per_element: case OpKind::mat_convert: case OpKind::mat_transpose:
    case OpKind::mat_length: case OpKind::mat_get: case OpKind::mat_set: case OpKind::mat_coord:
    case OpKind::mat_sum_accumulate: case OpKind::mat_outer_product: case OpKind::mat_accumulate:
    case OpKind::vec_matrix_mul: case OpKind::vec_load: case OpKind::vec_store:
      matrix_op(o);
      return;
    case OpKind::prefetch: {
      const ScalarType t = o.operands[0]->type.scalar;
      COOPJIT_INTERNAL_ASSERT(!lane_mask_, "a prefetch in a per-lane region");
      b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                         {b_.CreateGEP(scalar_ty(t), scalar(o.operands[0]), scalar(o.operands[1])),
                          b_.getInt32(int32_t(o.int_attr("write", 0))), b_.getInt32(int32_t(o.int_attr("locality", 3))),
                          b_.getInt32(1)});
      return;
    }
    case OpKind::cycles: {
      // lfence before and after rdtsc (session 28): the stamp waits for every earlier instruction
      // (the tile dot products of a K loop included) to complete, and no later one starts before
      // it, so a phase's work is not counted in the next phase.
      b_.CreateIntrinsic(llvm::Intrinsic::x86_sse2_lfence, llvm::ArrayRef<llvm::Type*>{}, llvm::ArrayRef<llvm::Value*>{});
      scalars_[o.result()] =
          b_.CreateIntrinsic(llvm::Intrinsic::readcyclecounter, llvm::ArrayRef<llvm::Type*>{}, llvm::ArrayRef<llvm::Value*>{});
      b_.CreateIntrinsic(llvm::Intrinsic::x86_sse2_lfence, llvm::ArrayRef<llvm::Type*>{}, llvm::ArrayRef<llvm::Value*>{});
      return;
    }
    case OpKind::work_id: {
      // On the CPU a work-group is one subgroup, one invocation that holds all its lanes in
      // vectors; the pool's workers run the work-groups of the launch grid (one dimension, as on
      // devices), whose id and count the runtime passes after the parameters (run_custom).
      const int64_t dim = o.int_attr("dim", 0);
      auto hidden = [&](int k, const char* n) -> llvm::Value* {
        return b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), grid_ints_, grid_base_ + k), n);
      };
      switch (static_cast<WorkId>(o.sub)) {
        case WorkId::lane:
          throw UserError(cat(mnemonic(o), ": on the CPU a subgroup is one invocation holding all its lanes in vectors, "
                              "so there is no lane id; work on matrices (or compile for a device)"));
        case WorkId::subgroup: scalars_[o.result()] = b_.getInt64(0); return;
        case WorkId::subgroups: scalars_[o.result()] = b_.getInt64(1); return;
        case WorkId::group: scalars_[o.result()] = dim == 0 ? hidden(0, "group") : b_.getInt64(0); return;
        case WorkId::groups: scalars_[o.result()] = dim == 0 ? hidden(1, "groups") : b_.getInt64(1); return;
      }
      throw InternalError("unknown work id");
    }
    case OpKind::tensor_layout: case OpKind::tensor_view: mats_[o.result()] = flat_all(o.operands); return;
    case OpKind::mat_load_tensor: tensor_access(o); return;
    case OpKind::mat_store_tensor: tensor_access(o); return;
  }
  throw InternalError(cat("the SIMD lowering does not handle ", mnemonic(o)));
}

llvm::Value* SimdLowering::lanev(llvm::Value* x) {
  if (!lane_mask_ || x->getType()->isVectorTy()) return x;
  return b_.CreateVectorSplat(S_, x);
}

std::unique_ptr<llvm::Module> lower_simd(const ir::Function& f, llvm::LLVMContext& ctx, const CpuInfo& cpu) {
  return SimdLowering(f, ctx, cpu).run();
}

}  // namespace coopjit
