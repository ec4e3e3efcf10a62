// The SIMD lowering (simd_lower.h).
#include "lower/simd_lower.h"

#include <functional>
#include <unordered_map>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include "core/error.h"
#include "lower/tensor_addressing.h"

namespace coopjit {
namespace {

using namespace ir;

class SimdLowering {
 public:
  SimdLowering(const Function& f, llvm::LLVMContext& ctx)
      : f_(f), ctx_(ctx), mod_(std::make_unique<llvm::Module>(f.name, ctx)), b_(ctx) {
    auto it = f.attrs.find("subgroup_size");
    COOPJIT_INTERNAL_ASSERT(it != f.attrs.end(), "the function needs a subgroup_size");
    S_ = static_cast<int>(std::get<int64_t>(it->second));
  }

  std::unique_ptr<llvm::Module> run() {
    auto* ptr = llvm::PointerType::getUnqual(ctx_);
    auto* fty = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), {ptr, ptr, ptr}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, f_.name, mod_.get());
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry);
    unpack_params();
    block(f_.body);
    b_.CreateRetVoid();
    return std::move(mod_);
  }

 private:
  // ---- types -------------------------------------------------------------------------------
  llvm::Type* scalar_ty(ScalarType t) {
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
  llvm::FixedVectorType* vec_ty(ScalarType t) { return llvm::FixedVectorType::get(scalar_ty(t), S_); }
  static bool vector_layout(const Type& t) { return t.use != Use::a; }
  int chunks(const Type& t) const { return static_cast<int>((t.cols + S_ - 1) / S_); }
  // The number of LLVM values an aggregate IR value is held in.
  size_t parts(const Type& t) const {
    if (t.is_tensor_layout()) return static_cast<size_t>(5 * t.rank + 1);
    if (t.is_tensor_view()) return static_cast<size_t>((t.has_dims ? 2 * t.rank : 0) + 4);
    return vector_layout(t) ? static_cast<size_t>(t.rows * chunks(t)) : static_cast<size_t>(t.rows * t.cols);
  }
  llvm::Align align(ScalarType t) { return llvm::Align(size_in_bytes(t)); }

  // ---- values ------------------------------------------------------------------------------
  std::vector<llvm::Value*> flat(const Value* v) {
    if (v->type.is_aggregate()) return mat(v);
    return {scalar(v)};
  }
  llvm::Value* scalar(const Value* v) {
    auto it = scalars_.find(v);
    COOPJIT_INTERNAL_ASSERT(it != scalars_.end(), "scalar value not lowered");
    return it->second;
  }
  const std::vector<llvm::Value*>& mat(const Value* v) {
    auto it = mats_.find(v);
    if (it == mats_.end()) {
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
  // Binds the values `vs` to the ir values, consuming parts from `flat` in order.
  void bind(const std::vector<Value*>& vs, const std::vector<llvm::Value*>& flat) {
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
  std::vector<llvm::Value*> flat_all(const std::vector<Value*>& vs, size_t from = 0) {
    std::vector<llvm::Value*> out;
    for (size_t i = from; i < vs.size(); ++i) {
      auto p = flat(vs[i]);
      out.insert(out.end(), p.begin(), p.end());
    }
    return out;
  }
  static bool is_const(const Value* v, int64_t c) {
    if (!v->def || v->def->kind != OpKind::constant) return false;
    auto* i = std::get_if<int64_t>(&v->def->attrs.at("value"));
    return i && *i == c;
  }

  void unpack_params() {
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
  }

  // ---- blocks and control flow -----------------------------------------------------------------
  // Lowers the ops of a block; returns the flattened operands of its yield (if any).
  std::vector<llvm::Value*> block(const Block& blk) {
    for (const auto& op : blk.ops) {
      if (op->kind == OpKind::yield) return flat_all(op->operands);
      this->op(*op);
    }
    return {};
  }

  void for_loop(const Op& o) {
    llvm::Value* lb = scalar(o.operands[0]);
    llvm::Value* ub = scalar(o.operands[1]);
    llvm::Value* step = scalar(o.operands[2]);
    std::vector<llvm::Value*> init = flat_all(o.operands, 3);
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "for.header", fn_);
    auto* body = llvm::BasicBlock::Create(ctx_, "for.body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "for.exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, "iv");
    iv->addIncoming(lb, pre);
    std::vector<llvm::PHINode*> phis;
    for (llvm::Value* v : init) {
      phis.push_back(b_.CreatePHI(v->getType(), 2));
      phis.back()->addIncoming(v, pre);
    }
    b_.CreateCondBr(b_.CreateICmpSLT(iv, ub), body, exit);
    b_.SetInsertPoint(body);
    const Block& region = *o.regions[0];
    scalars_[region.args[0]] = iv;
    bind(std::vector<Value*>(region.args.begin() + 1, region.args.end()),
         std::vector<llvm::Value*>(phis.begin(), phis.end()));
    std::vector<llvm::Value*> next = block(region);
    llvm::Value* iv_next = b_.CreateAdd(iv, step, "iv.next", /*HasNUW=*/false, /*HasNSW=*/true);
    llvm::BasicBlock* latch = b_.GetInsertBlock();
    iv->addIncoming(iv_next, latch);
    for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], latch);
    b_.CreateBr(header);
    b_.SetInsertPoint(exit);
    bind(o.results, std::vector<llvm::Value*>(phis.begin(), phis.end()));
  }

  void if_op(const Op& o) {
    auto* then_bb = llvm::BasicBlock::Create(ctx_, "if.then", fn_);
    auto* else_bb = llvm::BasicBlock::Create(ctx_, "if.else", fn_);
    auto* merge = llvm::BasicBlock::Create(ctx_, "if.end", fn_);
    b_.CreateCondBr(scalar(o.operands[0]), then_bb, else_bb);
    std::vector<std::pair<llvm::BasicBlock*, std::vector<llvm::Value*>>> arms;
    for (int r = 0; r < 2; ++r) {
      b_.SetInsertPoint(r == 0 ? then_bb : else_bb);
      auto vals = block(*o.regions[r]);
      arms.emplace_back(b_.GetInsertBlock(), vals);
      b_.CreateBr(merge);
    }
    b_.SetInsertPoint(merge);
    std::vector<llvm::Value*> res;
    for (size_t i = 0; i < arms[0].second.size(); ++i) {
      auto* phi = b_.CreatePHI(arms[0].second[i]->getType(), 2);
      for (auto& [bb, vals] : arms) phi->addIncoming(vals[i], bb);
      res.push_back(phi);
    }
    bind(o.results, res);
  }

  // ---- scalars -----------------------------------------------------------------------------------
  llvm::Value* scalar_bin(BinOp op, ScalarType t, llvm::Value* x, llvm::Value* y) {
    if (is_float(t)) {
      switch (op) {
        case BinOp::add: return b_.CreateFAdd(x, y);
        case BinOp::sub: return b_.CreateFSub(x, y);
        case BinOp::mul: return b_.CreateFMul(x, y);
        case BinOp::div: return b_.CreateFDiv(x, y);
        case BinOp::min: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, x, y);
        case BinOp::max: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, x, y);
        default: break;
      }
      throw InternalError(cat("binary op ", name(op), " on floats"));
    }
    bool s = is_signed(t);
    switch (op) {
      case BinOp::add: return b_.CreateAdd(x, y);
      case BinOp::sub: return b_.CreateSub(x, y);
      case BinOp::mul: return b_.CreateMul(x, y);
      case BinOp::div: return s ? b_.CreateSDiv(x, y) : b_.CreateUDiv(x, y);
      case BinOp::rem: return s ? b_.CreateSRem(x, y) : b_.CreateURem(x, y);
      case BinOp::min: return b_.CreateBinaryIntrinsic(s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, x, y);
      case BinOp::max: return b_.CreateBinaryIntrinsic(s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, x, y);
      case BinOp::and_: return b_.CreateAnd(x, y);
      case BinOp::or_: return b_.CreateOr(x, y);
    }
    throw InternalError("unknown binary op");
  }

  llvm::Value* scalar_cmp(CmpPred p, ScalarType t, llvm::Value* x, llvm::Value* y) {
    if (is_float(t)) {
      static const llvm::CmpInst::Predicate fp[] = {llvm::CmpInst::FCMP_OLT, llvm::CmpInst::FCMP_OLE,
                                                    llvm::CmpInst::FCMP_OGT, llvm::CmpInst::FCMP_OGE,
                                                    llvm::CmpInst::FCMP_OEQ, llvm::CmpInst::FCMP_UNE};
      return b_.CreateFCmp(fp[static_cast<int>(p)], x, y);
    }
    bool s = is_signed(t);
    static const llvm::CmpInst::Predicate sp[] = {llvm::CmpInst::ICMP_SLT, llvm::CmpInst::ICMP_SLE,
                                                  llvm::CmpInst::ICMP_SGT, llvm::CmpInst::ICMP_SGE,
                                                  llvm::CmpInst::ICMP_EQ, llvm::CmpInst::ICMP_NE};
    static const llvm::CmpInst::Predicate up[] = {llvm::CmpInst::ICMP_ULT, llvm::CmpInst::ICMP_ULE,
                                                  llvm::CmpInst::ICMP_UGT, llvm::CmpInst::ICMP_UGE,
                                                  llvm::CmpInst::ICMP_EQ, llvm::CmpInst::ICMP_NE};
    return b_.CreateICmp((s ? sp : up)[static_cast<int>(p)], x, y);
  }

  // ---- matrices ----------------------------------------------------------------------------------
  llvm::Value* lanes() {
    std::vector<llvm::Constant*> l;
    for (int i = 0; i < S_; ++i) l.push_back(b_.getInt64(i));
    return llvm::ConstantVector::get(l);
  }
  // Lanes [0, n) set: the in-matrix lanes of a chunk.
  llvm::Value* lane_mask(int n) {
    std::vector<llvm::Constant*> l;
    for (int i = 0; i < S_; ++i) l.push_back(b_.getInt1(i < n));
    return llvm::ConstantVector::get(l);
  }
  llvm::GlobalVariable* zero_global(ScalarType t) {
    auto* ty = scalar_ty(t);
    std::string n = cat("coopjit.zero.", name(t));
    if (auto* g = mod_->getGlobalVariable(n, true)) return g;
    return new llvm::GlobalVariable(*mod_, ty, true, llvm::GlobalValue::InternalLinkage,
                                    llvm::Constant::getNullValue(ty), n);
  }

  struct Addr {
    llvm::Value *ptr, *row, *col, *sr, *sc, *rows, *cols;
    bool unit_col;
  };
  Addr addr(const Op& o, size_t base) {
    const auto& v = o.operands;
    return {scalar(v[base]), scalar(v[base + 1]), scalar(v[base + 2]), scalar(v[base + 3]),
            scalar(v[base + 4]), scalar(v[base + 5]), scalar(v[base + 6]), is_const(v[base + 4], 1)};
  }

  // For chunk j of row i of a vector-layout matrix: the first element's address, the vector of
  // lane addresses (strided access only) and the mask (null when every lane is accessed).
  struct Chunk {
    llvm::Value* base;
    llvm::Value* ptrs;
    llvm::Value* mask;
  };
  Chunk chunk(const Type& t, const Addr& a, llvm::Value* i, int j, bool checked) {
    llvm::Type* et = scalar_ty(t.scalar);
    llvm::Value* r = b_.CreateAdd(a.row, i);
    llvm::Value* c0 = b_.CreateAdd(a.col, b_.getInt64(int64_t(j) * S_));
    llvm::Value* off = b_.CreateAdd(b_.CreateMul(r, a.sr), b_.CreateMul(c0, a.sc));
    Chunk ch{b_.CreateGEP(et, a.ptr, off), nullptr, nullptr};
    int valid = static_cast<int>(std::min<int64_t>(S_, t.cols - int64_t(j) * S_));
    if (!a.unit_col)
      ch.ptrs = b_.CreateGEP(et, ch.base, b_.CreateMul(lanes(), b_.CreateVectorSplat(S_, a.sc)));
    if (checked) {
      llvm::Value* in_cols = b_.CreateICmpSLT(b_.CreateAdd(b_.CreateVectorSplat(S_, c0), lanes()),
                                              b_.CreateVectorSplat(S_, a.cols));
      llvm::Value* m = b_.CreateAnd(in_cols, lane_mask(valid));
      llvm::Value* row_ok = b_.CreateICmpSLT(r, a.rows);
      ch.mask = b_.CreateSelect(row_ok, m, llvm::Constant::getNullValue(m->getType()));
    } else if (valid < S_) {
      ch.mask = lane_mask(valid);
    }
    return ch;
  }

  llvm::Value* load_chunk(const Type& t, const Addr& a, llvm::Value* i, int j, bool checked) {
    auto* vt = vec_ty(t.scalar);
    llvm::Value* zero = llvm::Constant::getNullValue(vt);
    Chunk ch = chunk(t, a, i, j, checked);
    if (!a.unit_col) return b_.CreateMaskedGather(vt, ch.ptrs, align(t.scalar), ch.mask, zero);
    if (ch.mask) return b_.CreateMaskedLoad(vt, ch.base, align(t.scalar), ch.mask, zero);
    return b_.CreateAlignedLoad(vt, ch.base, align(t.scalar));
  }
  void store_chunk(const Type& t, const Addr& a, llvm::Value* i, int j, bool checked, llvm::Value* v) {
    Chunk ch = chunk(t, a, i, j, checked);
    if (!a.unit_col) b_.CreateMaskedScatter(v, ch.ptrs, align(t.scalar), ch.mask);
    else if (ch.mask) b_.CreateMaskedStore(v, ch.base, align(t.scalar), ch.mask);
    else b_.CreateAlignedStore(v, ch.base, align(t.scalar));
  }

  void load(const Op& o) {
    const Type& t = o.result()->type;
    Addr a = addr(o, 0);
    bool checked = o.int_attr("checked");
    llvm::Type* et = scalar_ty(t.scalar);
    std::vector<llvm::Value*> out;
    if (in_memory(t)) {
      llvm::Value* slots = new_slots(t);
      row_loop(t.rows, [&](llvm::Value* i) {
        for (int j = 0; j < chunks(t); ++j) b_.CreateStore(load_chunk(t, a, i, j, checked), slot(t, slots, i, j));
      });
      mems_[o.result()] = slots;
      return;
    }
    if (vector_layout(t)) {
      for (int64_t i = 0; i < t.rows; ++i)
        for (int j = 0; j < chunks(t); ++j) out.push_back(load_chunk(t, a, b_.getInt64(i), j, checked));
      mats_[o.result()] = out;
      return;
    }
    for (int64_t i = 0; i < t.rows; ++i)
      for (int64_t k = 0; k < t.cols; ++k) {
        llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(i));
        llvm::Value* c = b_.CreateAdd(a.col, b_.getInt64(k));
        llvm::Value* p = b_.CreateGEP(et, a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), b_.CreateMul(c, a.sc)));
        if (checked) {
          llvm::Value* inb = b_.CreateAnd(b_.CreateICmpSLT(r, a.rows), b_.CreateICmpSLT(c, a.cols));
          p = b_.CreateSelect(inb, p, zero_global(t.scalar));
        }
        out.push_back(b_.CreateAlignedLoad(et, p, align(t.scalar)));
      }
    mats_[o.result()] = out;
  }

  void store(const Op& o) {
    const Type& t = o.operands[0]->type;
    Addr a = addr(o, 1);
    bool checked = o.int_attr("checked");
    llvm::Type* et = scalar_ty(t.scalar);
    if (in_memory(t)) {
      llvm::Value* slots = mem_of(o.operands[0]);
      row_loop(t.rows, [&](llvm::Value* i) {
        for (int j = 0; j < chunks(t); ++j)
          store_chunk(t, a, i, j, checked, b_.CreateLoad(vec_ty(t.scalar), slot(t, slots, i, j)));
      });
      return;
    }
    const auto& vals = mat(o.operands[0]);
    size_t idx = 0;
    if (vector_layout(t)) {
      for (int64_t i = 0; i < t.rows; ++i)
        for (int j = 0; j < chunks(t); ++j) store_chunk(t, a, b_.getInt64(i), j, checked, vals[idx++]);
      return;
    }
    for (int64_t i = 0; i < t.rows; ++i)
      for (int64_t k = 0; k < t.cols; ++k) {
        llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(i));
        llvm::Value* c = b_.CreateAdd(a.col, b_.getInt64(k));
        llvm::Value* p = b_.CreateGEP(et, a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), b_.CreateMul(c, a.sc)));
        llvm::Value* v = vals[idx++];
        if (!checked) {
          b_.CreateAlignedStore(v, p, align(t.scalar));
          continue;
        }
        llvm::Value* inb = b_.CreateAnd(b_.CreateICmpSLT(r, a.rows), b_.CreateICmpSLT(c, a.cols));
        auto* st = llvm::BasicBlock::Create(ctx_, "store.in", fn_);
        auto* cont = llvm::BasicBlock::Create(ctx_, "store.cont", fn_);
        b_.CreateCondBr(inb, st, cont);
        b_.SetInsertPoint(st);
        b_.CreateAlignedStore(v, p, align(t.scalar));
        b_.CreateBr(cont);
        b_.SetInsertPoint(cont);
      }
  }

  // ---- matrices held in memory -----------------------------------------------------------------
  // A matrix of more than kMemoryParts vectors lives in a stack slot, and the operations that
  // support it (load, store, load_tensor, store_tensor) walk it with a runtime loop over rows:
  // as SSA values, thousands of vectors and their memory operations in one block make LLVM's
  // compile time grow quadratically. Other operations read it back into values (mat()).
  static constexpr size_t kMemoryParts = 64;
  bool in_memory(const Type& t) const { return vector_layout(t) && parts(t) > kMemoryParts; }
  llvm::ArrayType* slots_ty(const Type& t) {
    return llvm::ArrayType::get(vec_ty(t.scalar), static_cast<uint64_t>(t.rows * chunks(t)));
  }
  llvm::Value* new_slots(const Type& t) {
    llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    return eb.CreateAlloca(slots_ty(t), nullptr, "matrix.slots");
  }
  llvm::Value* slot(const Type& t, llvm::Value* slots, llvm::Value* i, int j) {
    llvm::Value* k = b_.CreateAdd(b_.CreateMul(i, b_.getInt64(chunks(t))), b_.getInt64(j));
    return b_.CreateInBoundsGEP(slots_ty(t), slots, {b_.getInt64(0), k});
  }
  // The stack slot holding v (stored there from its values when it has none yet).
  llvm::Value* mem_of(const Value* v) {
    if (auto it = mems_.find(v); it != mems_.end()) return it->second;
    const Type& t = v->type;
    llvm::Value* slots = new_slots(t);
    std::vector<llvm::Value*> vecs = as_vectors(t, mat(v));
    for (size_t k = 0; k < vecs.size(); ++k) b_.CreateStore(vecs[k], b_.CreateConstInBoundsGEP2_64(slots_ty(t), slots, 0, k));
    mems_[v] = slots;
    return slots;
  }
  void copy_slots(const Type& t, llvm::Value* dst, llvm::Value* src) {
    const llvm::DataLayout& dl = mod_->getDataLayout();
    uint64_t bytes = dl.getTypeAllocSize(slots_ty(t));
    b_.CreateMemCpy(dst, llvm::MaybeAlign(64), src, llvm::MaybeAlign(64), bytes);
  }
  // for (i = 0; i < rows; ++i) body(i), kept a loop (unrolling a long body multiplies compile time).
  void row_loop(int64_t rows, const std::function<void(llvm::Value*)>& body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* bb = llvm::BasicBlock::Create(ctx_, "rows", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "rows.done", fn_);
    b_.CreateBr(bb);
    b_.SetInsertPoint(bb);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, "row");
    i->addIncoming(b_.getInt64(0), pre);
    body(i);
    llvm::Value* next = b_.CreateAdd(i, b_.getInt64(1));
    i->addIncoming(next, b_.GetInsertBlock());
    llvm::BranchInst* back = b_.CreateCondBr(b_.CreateICmpSLT(next, b_.getInt64(rows)), bb, exit);
    llvm::MDNode* self = llvm::MDNode::getTemporary(ctx_, {}).release();
    llvm::MDNode* disable = llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")});
    llvm::MDNode* loop_id = llvm::MDNode::get(ctx_, {self, disable});
    loop_id->replaceOperandWith(0, loop_id);
    llvm::MDNode::deleteTemporary(self);
    back->setMetadata(llvm::LLVMContext::MD_loop, loop_id);
    b_.SetInsertPoint(exit);
  }

  std::vector<llvm::Value*> splat(const Op& o) {
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

  llvm::Value* fma(ScalarType t, llvm::Value* x, llvm::Value* y, llvm::Value* acc) {
    if (is_float(t)) return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, acc});
    return b_.CreateAdd(b_.CreateMul(x, y), acc);
  }

  std::vector<llvm::Value*> mul_add(const Op& o) {
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

  std::vector<llvm::Value*> elementwise(const Op& o) {
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

  // ---- tensor addressing -------------------------------------------------------------------------
  // A matrix as rows of S-lane vectors, whatever its use (use a is held as scalars).
  std::vector<llvm::Value*> as_vectors(const Type& t, const std::vector<llvm::Value*>& p) {
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
  std::vector<llvm::Value*> from_vectors(const Type& t, const std::vector<llvm::Value*>& v) {
    if (vector_layout(t)) return v;
    std::vector<llvm::Value*> out;
    for (int64_t i = 0; i < t.rows; ++i)
      for (int64_t k = 0; k < t.cols; ++k) out.push_back(b_.CreateExtractElement(v[i * chunks(t) + k / S_], k % S_));
    return out;
  }

  LayoutParts layout_parts(const Value* v) {
    const auto& p = mat(v);
    LayoutParts l;
    l.rank = v->type.rank;
    l.clamp = v->type.clamp;
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
  ViewParts view_parts(const Value* v) {
    const auto& p = mat(v);
    ViewParts w;
    w.rank = v->type.rank;
    w.has_dims = v->type.has_dims;
    w.perm = v->type.perm;
    size_t at = 0;
    if (w.has_dims) {
      for (int d = 0; d < w.rank; ++d) w.dims[d] = p[d];
      for (int d = 0; d < w.rank; ++d) w.strides[d] = p[w.rank + d];
      at = 2 * w.rank;
    }
    for (int k = 0; k < 4; ++k) w.clip[k] = p[at + k];
    return w;
  }
  llvm::Value* convert_clamp_value(llvm::Value* d, ScalarType t) {
    llvm::Type* ty = scalar_ty(t);
    if (t == ScalarType::f64) return d;
    if (t == ScalarType::f32) return b_.CreateFPTrunc(d, ty);
    if (t == ScalarType::f16 || t == ScalarType::bf16)  // via f32: no libcall for double -> half
      return b_.CreateFPTrunc(b_.CreateFPTrunc(d, b_.getFloatTy()), ty);
    if (is_float(t)) return b_.CreateFPToUI(d, ty);  // fp8: the caller passes the raw bits (0..255)
    return is_signed(t) ? b_.CreateFPToSI(d, ty) : b_.CreateFPToUI(d, ty);
  }

  // coopmatrix.load_tensor / store_tensor: a runtime loop over the matrix rows (the address
  // calculation is long: unrolling it over every row would bloat the code), the row's chunks
  // unrolled, the matrix kept in a stack slot in between.
  void tensor_access(const Op& o) {
    const bool load = o.kind == OpKind::mat_load_tensor;
    const Value* m = o.operands[load ? 1 : 0];
    const Type& t = m->type;
    llvm::Value* ptr = scalar(o.operands[load ? 0 : 1]);
    LayoutParts lay = layout_parts(o.operands[2]);
    llvm::Value* extent = scalar(o.operands[3]);
    ViewParts view;
    const bool has_view = o.operands.size() > 4;
    if (has_view) view = view_parts(o.operands[4]);
    auto* vt = vec_ty(t.scalar);
    llvm::Value* slots = mem_of(m);
    if (load) {  // the result starts as a copy of the object: skipped elements keep its values
      llvm::Value* result = new_slots(t);
      copy_slots(t, result, slots);
      slots = result;
    }
    llvm::Value* clampv = load ? b_.CreateVectorSplat(S_, convert_clamp_value(lay.clamp_value, t.scalar)) : nullptr;
    llvm::Value* extent_v = b_.CreateVectorSplat(S_, extent);
    row_loop(t.rows, [&](llvm::Value* i) {
      llvm::Value* row = b_.CreateVectorSplat(S_, i);
      for (int j = 0; j < chunks(t); ++j) {
        llvm::Value* col = b_.CreateAdd(b_.CreateVectorSplat(S_, b_.getInt64(int64_t(j) * S_)), lanes());
        int valid = static_cast<int>(std::min<int64_t>(S_, t.cols - int64_t(j) * S_));
        TensorElement el = tensor_element(b_, S_, lay, has_view ? &view : nullptr, row, col, t.cols, !load);
        // Whatever the layout says, nothing outside ptr[0, extent) is touched.
        llvm::Value* in_buf = b_.CreateAnd(b_.CreateICmpSGE(el.index, llvm::Constant::getNullValue(el.index->getType())),
                                           b_.CreateICmpSLT(el.index, extent_v));
        llvm::Value* mask = b_.CreateAnd(b_.CreateAnd(lane_mask(valid), el.in_clip),
                                         b_.CreateAnd(b_.CreateNot(el.discard), in_buf));
        llvm::Value* ptrs = b_.CreateGEP(scalar_ty(t.scalar), ptr, el.index);
        llvm::Value* at = slot(t, slots, i, j);
        llvm::Value* old = b_.CreateLoad(vt, at);
        if (load) {
          llvm::Value* got;
          if (o.regions.empty()) {
            got = b_.CreateMaskedGather(vt, ptrs, align(t.scalar), mask, llvm::Constant::getNullValue(vt));
          } else {
            // The decode function, lowered once for all lanes (each scalar becomes a vector of
            // lanes; its loads read only for lanes the mask keeps).
            const Block& dec = *o.regions[0];
            scalars_[dec.args[0]] = el.index;
            for (int d = 0; d < lay.rank; ++d) {
              scalars_[dec.args[1 + d]] = el.block_coord[d];
              scalars_[dec.args[1 + lay.rank + d]] = el.coord_in_block[d];
            }
            lane_mask_ = mask;
            got = lanev(block(dec)[0]);
            lane_mask_ = nullptr;
            got = b_.CreateSelect(mask, got, llvm::Constant::getNullValue(vt));
          }
          got = b_.CreateSelect(el.discard, clampv, got);  // Constant clamp: the clamp value
          got = b_.CreateSelect(b_.CreateAnd(el.in_clip, lane_mask(valid)), got, old);  // skipped: unmodified
          b_.CreateStore(got, at);
        } else {
          b_.CreateMaskedScatter(old, ptrs, align(t.scalar), mask);
        }
      }
    });
    if (load) {
      mems_[o.result()] = slots;
      if (!in_memory(t)) mat(o.result());  // small matrices go back to values
    }
  }

  void op(const Op& o) {
    switch (o.kind) {
      case OpKind::constant: {
        const Type& t = o.result()->type;
        const Attr& v = o.attrs.at("value");
        if (is_float(t.scalar))
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
        b_.CreateAlignedStore(b_.getInt32(1), p, llvm::Align(4))->setAtomic(llvm::AtomicOrdering::Release);
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
        // The x86 spin-wait hint (this lowering targets x86 CPUs).
        b_.CreateCall(llvm::Intrinsic::getOrInsertDeclaration(mod_.get(), llvm::Intrinsic::x86_sse2_pause));
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
      case OpKind::mat_load: load(o); return;
      case OpKind::mat_store: store(o); return;
      case OpKind::mat_splat: mats_[o.result()] = splat(o); return;
      case OpKind::mat_mul_add: mats_[o.result()] = mul_add(o); return;
      case OpKind::mat_scale: case OpKind::mat_binary: mats_[o.result()] = elementwise(o); return;
      case OpKind::tensor_layout: case OpKind::tensor_view: mats_[o.result()] = flat_all(o.operands); return;
      case OpKind::mat_load_tensor: tensor_access(o); return;
      case OpKind::mat_store_tensor: tensor_access(o); return;
    }
    throw InternalError(cat("the SIMD lowering does not handle ", mnemonic(o)));
  }

  const Function& f_;
  llvm::LLVMContext& ctx_;
  std::unique_ptr<llvm::Module> mod_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  int S_ = 1;
  std::unordered_map<const Value*, llvm::Value*> scalars_;
  std::unordered_map<const Value*, std::vector<llvm::Value*>> mats_;  // aggregates as values
  std::unordered_map<const Value*, llvm::Value*> mems_;                 // large matrices in memory
  llvm::Value* lane_mask_ = nullptr;  // inside a decode function: scalars are vectors of lanes

  // A scalar as the current mode needs it: itself, or splat over the lanes in a decode function.
  llvm::Value* lanev(llvm::Value* x) {
    if (!lane_mask_ || x->getType()->isVectorTy()) return x;
    return b_.CreateVectorSplat(S_, x);
  }
};

}  // namespace

std::unique_ptr<llvm::Module> lower_simd(const ir::Function& f, llvm::LLVMContext& ctx) {
  return SimdLowering(f, ctx).run();
}

}  // namespace coopjit
