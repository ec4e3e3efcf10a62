// The SIMT lowering of memory operations: coopmatrix loads and stores as the seeds' SIMT
// pseudo-code (seeds/000 and 001, "Load pseudo-code (SIMT)"): each lane reads or writes its
// components at ptr[(row + p % I + row_off) * stride_row + (col + (p / I) * chan + col_off) *
// stride_col], padding components read zero and are not written, and a checked access skips
// what falls outside rows x cols. Subgroup block reads and writes (SPV_INTEL_subgroups) replace
// the per-lane accesses when lanes touch consecutive 32-bit words at a 16-byte aligned address;
// lanes that hold runs of a row's columns read them with vector loads of up to 16 bytes.
#include "lower/simt_lowering.h"

namespace coopjit {

SimtLowering::Access SimtLowering::access(const Op& o, size_t base) {
  const auto& v = o.operands;
  return {scalar(v[base]),     scalar(v[base + 1]), scalar(v[base + 2]), scalar(v[base + 3]),
          scalar(v[base + 4]), scalar(v[base + 5]), scalar(v[base + 6]), v[base + 4], v[base + 3]};
}

void SimtLowering::guarded(llvm::Value* cond, const std::function<void()>& body) {
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(cond)) {
    if (c->isOne()) body();
    return;
  }
  auto* yes = llvm::BasicBlock::Create(ctx_, "in", fn_);
  auto* cont = llvm::BasicBlock::Create(ctx_, "cont", fn_);
  b_.CreateCondBr(cond, yes, cont);
  b_.SetInsertPoint(yes);
  body();
  b_.CreateBr(cont);
  b_.SetInsertPoint(cont);
}

llvm::Value* SimtLowering::guarded_load(llvm::Value* cond, llvm::Type* ty, llvm::Value* ptr, llvm::Align a) {
  llvm::Value* zero = llvm::Constant::getNullValue(ty);
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(cond)) return c->isOne() ? b_.CreateAlignedLoad(ty, ptr, a) : zero;
  llvm::BasicBlock* from = b_.GetInsertBlock();
  auto* yes = llvm::BasicBlock::Create(ctx_, "load.in", fn_);
  auto* cont = llvm::BasicBlock::Create(ctx_, "load.cont", fn_);
  b_.CreateCondBr(cond, yes, cont);
  b_.SetInsertPoint(yes);
  llvm::Value* v = b_.CreateAlignedLoad(ty, ptr, a);
  b_.CreateBr(cont);
  b_.SetInsertPoint(cont);
  llvm::PHINode* phi = b_.CreatePHI(ty, 2);
  phi->addIncoming(v, yes);
  phi->addIncoming(zero, from);
  return phi;
}

bool is_index_const(const Value* v, int64_t c) {
  if (!v->def || v->def->kind != OpKind::constant) return false;
  auto* i = std::get_if<int64_t>(&v->def->attrs.at("value"));
  return i && *i == c;
}

// Block I/O applies when every component is a run of S consecutive 32-bit words: lanes walk the
// rows (I == S) with a unit row stride, nothing is checked, and the components are 32-bit.
bool SimtLowering::block_io(const Type& t, const LaneMap& m, const Access& a, bool checked) {
  return target_.intel_subgroups() && !checked && m.I == S_ && m.chan == 1 && is_index_const(a.sr_ir, 1) && size_in_bytes(t.scalar) == 4;
}

std::vector<llvm::Value*> SimtLowering::either_path(llvm::Value* cond,
                                                    const std::function<std::vector<llvm::Value*>()>& fast,
                                                    const std::function<std::vector<llvm::Value*>()>& slow,
                                                    const char* name) {
  auto* fast_bb = llvm::BasicBlock::Create(ctx_, cat(name, ".fast"), fn_);
  auto* slow_bb = llvm::BasicBlock::Create(ctx_, cat(name, ".slow"), fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, cat(name, ".done"), fn_);
  b_.CreateCondBr(cond, fast_bb, slow_bb);
  b_.SetInsertPoint(fast_bb);
  std::vector<llvm::Value*> x = fast();
  llvm::BasicBlock* fast_end = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(slow_bb);
  std::vector<llvm::Value*> y = slow();
  llvm::BasicBlock* slow_end = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  COOPJIT_INTERNAL_ASSERT(x.size() == y.size());
  std::vector<llvm::Value*> out;
  for (size_t n = 0; n < x.size(); ++n) {
    llvm::PHINode* phi = b_.CreatePHI(x[n]->getType(), 2);
    phi->addIncoming(x[n], fast_end);
    phi->addIncoming(y[n], slow_end);
    out.push_back(phi);
  }
  return out;
}

namespace {
// The 1-D block functions want the address and the column stride 16-byte aligned (cl_intel_subgroups).
llvm::Value* aligned16(llvm::IRBuilder<>& b, llvm::Value* base, llvm::Value* sc) {
  llvm::Value* addr = b.CreatePtrToInt(base, b.getInt64Ty());
  llvm::Value* bytes_sc = b.CreateMul(sc, b.getInt64(4));
  return b.CreateICmpEQ(b.CreateAnd(b.CreateOr(addr, bytes_sc), b.getInt64(15)), b.getInt64(0));
}
}  // namespace

// When the address is not 16-byte aligned (a view, an odd stride), the lanes read one by one.
// One uniform branch per matrix.
void SimtLowering::load_blocks(const Type& t, const LaneMap& m, const Access& a, std::vector<llvm::Value*>& out) {
  llvm::Type* ty = scalar_ty(t.scalar);
  llvm::Value* base = b_.CreateGEP(ty, a.ptr, b_.CreateAdd(a.row, b_.CreateMul(a.col, a.sc)));
  out = either_path(aligned16(b_, base, a.sc), [&] {
    std::vector<llvm::Value*> fast;
    for (int64_t n = 0; n < m.comps(); ++n) {
      llvm::Value* p = b_.CreateGEP(ty, base, b_.getInt64(m.row_off[n]));
      if (m.col_off[n]) p = b_.CreateGEP(ty, p, b_.CreateMul(a.sc, b_.getInt64(m.col_off[n])));
      llvm::Value* w = builtin("_Z30__spirv_SubgroupBlockReadINTELPU3AS1Kj", b_.getInt32Ty(), {p}, true);
      fast.push_back(ty->isIntegerTy() ? w : b_.CreateBitCast(w, ty));
    }
    return fast;
  }, [&] {
    std::vector<llvm::Value*> slow;
    for (int64_t n = 0; n < m.comps(); ++n) {
      llvm::Value* off = b_.CreateAdd(row_of(m, n), b_.CreateMul(b_.getInt64(m.col_off[n]), a.sc));
      slow.push_back(b_.CreateAlignedLoad(ty, b_.CreateGEP(ty, base, off), align(t.scalar)));
    }
    return slow;
  }, "read");
}

void SimtLowering::store_blocks(const Type& t, const LaneMap& m, const Access& a, const std::vector<llvm::Value*>& vals) {
  llvm::Type* ty = scalar_ty(t.scalar);
  llvm::Value* base = b_.CreateGEP(ty, a.ptr, b_.CreateAdd(a.row, b_.CreateMul(a.col, a.sc)));
  either_path(aligned16(b_, base, a.sc), [&] {
    for (int64_t n = 0; n < m.comps(); ++n) {
      llvm::Value* p = b_.CreateGEP(ty, base, b_.getInt64(m.row_off[n]));
      if (m.col_off[n]) p = b_.CreateGEP(ty, p, b_.CreateMul(a.sc, b_.getInt64(m.col_off[n])));
      llvm::Value* w = ty->isIntegerTy() ? vals[n] : b_.CreateBitCast(vals[n], b_.getInt32Ty());
      builtin("_Z31__spirv_SubgroupBlockWriteINTELPU3AS1jj", b_.getVoidTy(), {p, w}, true);
    }
    return std::vector<llvm::Value*>{};
  }, [&] {
    for (int64_t n = 0; n < m.comps(); ++n) {
      llvm::Value* off = b_.CreateAdd(row_of(m, n), b_.CreateMul(b_.getInt64(m.col_off[n]), a.sc));
      b_.CreateAlignedStore(vals[n], b_.CreateGEP(ty, base, off), align(t.scalar));
    }
    return std::vector<llvm::Value*>{};
  }, "write");
}

void SimtLowering::load(const Op& o) {
  const Type& t = o.result()->type;
  const Access a = access(o, 0);
  const bool checked = o.int_attr("checked");
  if (t.scope == Scope::thread) {
    mats_[o.result()] = thread_load(t, a, checked);
    return;
  }
  const LaneMap m = lanes_of(t);
  if (auto blocks = block2d_plan(t, m, a, false)) {
    const Region2d r = region2d(t, a);
    mats_[o.result()] = either_path(r.ok, [&] { return block2d_load(t, m, r, *blocks, o); },
                                    [&] { return lane_loads(t, m, a, checked); }, "load2d");
    return;
  }
  mats_[o.result()] = lane_loads(t, m, a, checked);
}

// A thread-scope matrix (HLSL 0035: each work-item its own copy): every work-item reads all the
// elements, row-major, at its own position; a checked load reads zero outside the bounds.
std::vector<llvm::Value*> SimtLowering::thread_load(const Type& t, const Access& a, bool checked) {
  llvm::Type* ty = scalar_ty(t.scalar);
  std::vector<llvm::Value*> out;
  for (int64_t r = 0; r < t.rows; ++r) {
    llvm::Value* row = b_.CreateAdd(a.row, b_.getInt64(r));
    llvm::Value* r_ok = checked ? b_.CreateICmpULT(row, a.rows) : b_.getTrue();
    for (int64_t c = 0; c < t.cols; ++c) {
      llvm::Value* col = b_.CreateAdd(a.col, b_.getInt64(c));
      llvm::Value* ok = checked ? b_.CreateAnd(r_ok, b_.CreateICmpULT(col, a.cols)) : b_.getTrue();
      llvm::Value* ptr = b_.CreateGEP(ty, a.ptr, b_.CreateAdd(b_.CreateMul(row, a.sr), b_.CreateMul(col, a.sc)));
      out.push_back(guarded_load(ok, ty, ptr, align(t.scalar)));
    }
  }
  return out;
}

// The seeds' SIMT pseudo-code, or 1-D block reads, or 32-bit channel loads.
std::vector<llvm::Value*> SimtLowering::lane_loads(const Type& t, const LaneMap& m, const Access& a, bool checked) {
  std::vector<llvm::Value*> out;
  if (block_io(t, m, a, checked)) {
    load_blocks(t, m, a, out);
    return out;
  }
  // Lanes holding runs of a row (I == S: components of one row offset with consecutive column
  // offsets, as in a tall acc tile of few columns) read each run with vector loads of up to 16
  // bytes, where one uniform check finds the addresses aligned; one by one otherwise.
  if (const int64_t w = vector_width(t, m, a, checked); w > 1) {
    const int64_t e = size_in_bytes(t.scalar);
    llvm::Value* addr = b_.CreatePtrToInt(a.ptr, b_.getInt64Ty());
    llvm::Value* first = b_.CreateAdd(addr, b_.CreateMul(b_.CreateAdd(b_.CreateMul(a.row, a.sr), a.col), b_.getInt64(e)));
    llvm::Value* bytes = b_.CreateOr(first, b_.CreateMul(a.sr, b_.getInt64(e)));
    llvm::Value* aligned = b_.CreateICmpEQ(b_.CreateAnd(bytes, b_.getInt64(w * e - 1)), b_.getInt64(0));
    return either_path(aligned, [&] { return vector_loads(t, m, a, w); },
                       [&] { return element_loads(t, m, a, checked); }, "vec");
  }
  // VNNI (seeds/001): matrix_a's omega consecutive K values of one row share a 32-bit channel;
  // with a unit column stride they are adjacent in memory, so each channel is one 32-bit load
  // when the addresses are 4-byte aligned (one uniform check), split into its components.
  const int64_t e = size_in_bytes(t.scalar);
  if (!checked && m.chan > 1 && m.chan * e == 4 && m.I == S_ && is_index_const(a.sc_ir, 1)) {
    llvm::Value* addr = b_.CreatePtrToInt(a.ptr, b_.getInt64Ty());
    llvm::Value* bytes = b_.CreateOr(addr, b_.CreateMul(b_.CreateOr(a.sr, a.col), b_.getInt64(e)));
    llvm::Value* aligned = b_.CreateICmpEQ(b_.CreateAnd(bytes, b_.getInt64(3)), b_.getInt64(0));
    return either_path(aligned, [&] { return channel_loads(t, m, a); },
                       [&] { return element_loads(t, m, a, checked); }, "vnni");
  }
  return element_loads(t, m, a, checked);
}

int64_t SimtLowering::vector_width(const Type& t, const LaneMap& m, const Access& a, bool checked) {
  const int64_t e = size_in_bytes(t.scalar);
  if (checked || m.I != S_ || m.chan != 1 || !is_index_const(a.sc_ir, 1) || e > 8) return 1;
  // The runs: maximal sequences of components n, n + 1, ... with one row offset and consecutive
  // column offsets. The width divides each run's first column and its length.
  int64_t w = 16 / e;
  for (int64_t n = 0; n < m.comps();) {
    int64_t len = 1;
    while (n + len < m.comps() && m.row_off[n + len] == m.row_off[n] && m.col_off[n + len] == m.col_off[n] + len) ++len;
    while (w > 1 && (m.col_off[n] % w != 0 || len % w != 0)) w /= 2;
    n += len;
  }
  return w;
}

std::vector<llvm::Value*> SimtLowering::vector_loads(const Type& t, const LaneMap& m, const Access& a, int64_t w) {
  llvm::Type* ty = scalar_ty(t.scalar);
  llvm::Type* vty = llvm::FixedVectorType::get(ty, static_cast<unsigned>(w));
  const llvm::Align al(static_cast<uint64_t>(w * size_in_bytes(t.scalar)));
  std::vector<llvm::Value*> out;
  for (int64_t n = 0; n < m.comps(); n += w) {
    llvm::Value* row = b_.CreateAdd(a.row, row_of(m, n));
    llvm::Value* col = b_.CreateAdd(a.col, col_of(m, n));
    llvm::Value* ptr = b_.CreateGEP(ty, a.ptr, b_.CreateAdd(b_.CreateMul(row, a.sr), col));
    // The freeze keeps the vector whole: a load used only by extracts is split into scalar loads
    // (VectorCombine), and the two paths' loads then merge, their alignment lost (NVPTX: four
    // ld.global.b32 instead of one ld.global.v4). It emits no instruction.
    llvm::Value* v = b_.CreateFreeze(b_.CreateAlignedLoad(vty, ptr, al));
    for (int64_t c = 0; c < w; ++c) out.push_back(b_.CreateExtractElement(v, static_cast<uint64_t>(c)));
  }
  return out;
}

std::vector<llvm::Value*> SimtLowering::channel_loads(const Type& t, const LaneMap& m, const Access& a) {
  llvm::Type* ty = scalar_ty(t.scalar);
  llvm::Type* ety = b_.getIntNTy(static_cast<unsigned>(size_in_bytes(t.scalar) * 8));
  std::vector<llvm::Value*> out;
  for (int64_t n = 0; n < m.comps(); n += m.chan) {
    llvm::Value* row = b_.CreateAdd(a.row, row_of(m, n));
    llvm::Value* col = b_.CreateAdd(a.col, col_of(m, n));
    llvm::Value* ptr = b_.CreateGEP(ty, a.ptr, b_.CreateAdd(b_.CreateMul(row, a.sr), col));
    llvm::Value* word = b_.CreateAlignedLoad(b_.getInt32Ty(), ptr, llvm::Align(4));
    for (int64_t c = 0; c < m.chan; ++c) {
      llvm::Value* x = b_.CreateTrunc(b_.CreateLShr(word, c * ety->getIntegerBitWidth()), ety);
      out.push_back(ty == ety ? x : b_.CreateBitCast(x, ty));
    }
  }
  return out;
}

std::vector<llvm::Value*> SimtLowering::element_loads(const Type& t, const LaneMap& m, const Access& a, bool checked) {
  llvm::Type* ty = scalar_ty(t.scalar);
  std::vector<llvm::Value*> out;
  // Components that share a row offset share the row check (the pseudo-code's row_ok).
  std::map<int64_t, llvm::Value*> row_ok;
  for (int64_t n = 0; n < m.comps(); ++n) {
    llvm::Value* ok = inside(m, n);
    if (llvm::isa<llvm::ConstantInt>(ok) && llvm::cast<llvm::ConstantInt>(ok)->isZero()) {
      out.push_back(llvm::Constant::getNullValue(ty));
      continue;
    }
    llvm::Value* row = b_.CreateAdd(a.row, row_of(m, n));
    llvm::Value* col = b_.CreateAdd(a.col, col_of(m, n));
    if (checked) {
      llvm::Value*& r_ok = row_ok[m.row_off[n]];
      if (!r_ok) r_ok = b_.CreateICmpULT(row, a.rows);
      ok = b_.CreateAnd(ok, b_.CreateAnd(r_ok, b_.CreateICmpULT(col, a.cols)));
    }
    llvm::Value* ptr = b_.CreateGEP(ty, a.ptr, b_.CreateAdd(b_.CreateMul(row, a.sr), b_.CreateMul(col, a.sc)));
    out.push_back(guarded_load(ok, ty, ptr, align(t.scalar)));
  }
  return out;
}

void SimtLowering::store(const Op& o) {
  const Type& t = o.operands[0]->type;
  const LaneMap m = lanes_of(t);
  const Access a = access(o, 1);
  const bool checked = o.int_attr("checked");
  const auto& vals = mat(o.operands[0]);
  if (auto blocks = block2d_plan(t, m, a, true)) {
    const Region2d r = region2d(t, a);
    either_path(r.ok, [&] { block2d_store(t, r, *blocks, vals); return std::vector<llvm::Value*>{}; },
                [&] { lane_stores(t, m, a, checked, vals); return std::vector<llvm::Value*>{}; }, "store2d");
    return;
  }
  lane_stores(t, m, a, checked, vals);
}

void SimtLowering::lane_stores(const Type& t, const LaneMap& m, const Access& a, bool checked,
                               const std::vector<llvm::Value*>& vals) {
  llvm::Type* ty = scalar_ty(t.scalar);
  if (block_io(t, m, a, checked)) {
    store_blocks(t, m, a, vals);
    return;
  }
  std::map<int64_t, llvm::Value*> row_ok;
  for (int64_t n = 0; n < m.comps(); ++n) {
    llvm::Value* ok = inside(m, n);
    llvm::Value* row = b_.CreateAdd(a.row, row_of(m, n));
    llvm::Value* col = b_.CreateAdd(a.col, col_of(m, n));
    if (checked) {
      llvm::Value*& r_ok = row_ok[m.row_off[n]];
      if (!r_ok) r_ok = b_.CreateICmpULT(row, a.rows);
      ok = b_.CreateAnd(ok, b_.CreateAnd(r_ok, b_.CreateICmpULT(col, a.cols)));
    }
    guarded(ok, [&] {
      llvm::Value* ptr = b_.CreateGEP(ty, a.ptr, b_.CreateAdd(b_.CreateMul(row, a.sr), b_.CreateMul(col, a.sc)));
      b_.CreateAlignedStore(vals[n], ptr, align(t.scalar));
    });
  }
}

// coopmatrix.accumulate: an atomic add of each component inside the matrix and the bounds, in
// the component type (HLSL 0035: "the data is added in the component type of the matrix").
// A groupshared array of another element type: the component converted to it and added in it.
void SimtLowering::accumulate(const Op& o) {
  const Type& t = o.operands[0]->type;
  const Access a = access(o, 1);
  const auto& vals = mat(o.operands[0]);
  const ScalarType mt = o.operands[1]->type.scalar;
  llvm::Type* ty = scalar_ty(mt);
  auto add_at = [&](llvm::Value* row, llvm::Value* col, llvm::Value* inside, llvm::Value* v) {
    llvm::Value* ok = b_.CreateAnd(inside, b_.CreateAnd(b_.CreateICmpULT(row, a.rows), b_.CreateICmpULT(col, a.cols)));
    guarded(ok, [&] {
      atomic_add(mt, b_.CreateGEP(ty, a.ptr, b_.CreateAdd(b_.CreateMul(row, a.sr), b_.CreateMul(col, a.sc))),
                 convert_value(v, t.scalar, mt));
    });
  };
  if (t.scope == Scope::thread) {  // every work-item adds its own copy of the whole matrix
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c)
        add_at(b_.CreateAdd(a.row, b_.getInt64(r)), b_.CreateAdd(a.col, b_.getInt64(c)), b_.getTrue(),
               vals[r * t.cols + c]);
    return;
  }
  const LaneMap m = lanes_of(t);
  for (int64_t n = 0; n < m.comps(); ++n)
    add_at(b_.CreateAdd(a.row, row_of(m, n)), b_.CreateAdd(a.col, col_of(m, n)), inside(m, n), vals[n]);
}

// Repeats new = update(old) and a compare-exchange of `ptr` (an integer of type ity) from old to
// new until no other work-item wrote in between.
void SimtLowering::cas_loop(llvm::Value* ptr, llvm::Type* ity, const std::function<llvm::Value*(llvm::Value*)>& update) {
  const llvm::Align al(ity->getPrimitiveSizeInBits() / 8);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::Value* first = b_.CreateAlignedLoad(ity, ptr, al);  // a guess: a torn or stale value only costs a retry
  auto* loop = llvm::BasicBlock::Create(ctx_, "acc.cas", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "acc.done", fn_);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  llvm::PHINode* old = b_.CreatePHI(ity, 2);
  old->addIncoming(first, pre);
  llvm::Value* pair = b_.CreateAtomicCmpXchg(ptr, old, update(old), al, llvm::AtomicOrdering::Monotonic,
                                             llvm::AtomicOrdering::Monotonic);
  old->addIncoming(b_.CreateExtractValue(pair, 0), b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateExtractValue(pair, 1), done, loop);
  b_.SetInsertPoint(done);
}

// *ptr += v in component type t, atomically: an atomic integer add for 32- and 64-bit integers, a
// float atomic add where the target has one (NVPTX f32 / f64), otherwise a compare-exchange loop:
// on the value's bits (32- and 64-bit floats), or, for 8- and 16-bit components (which neither
// OpenCL nor PTX adds atomically), on the aligned 32-bit word holding the element, replacing only
// its bits. The word's other bytes are rewritten with the value they had (a neighbour's
// concurrent add makes the exchange fail and retry, so no update is lost); they lie in the same
// 4-byte-aligned word as an element of the buffer, inside the device allocation's granularity.
void SimtLowering::atomic_add(ScalarType t, llvm::Value* ptr, llvm::Value* v) {
  llvm::Type* ty = scalar_ty(t);
  const unsigned bits = ty->getPrimitiveSizeInBits();
  if (bits >= 32) {
    if (!is_float(t)) {
      b_.CreateAtomicRMW(llvm::AtomicRMWInst::Add, ptr, v, llvm::Align(bits / 8), llvm::AtomicOrdering::Monotonic);
    } else if (target_.float_atomic_add(t)) {
      b_.CreateAtomicRMW(llvm::AtomicRMWInst::FAdd, ptr, v, llvm::Align(bits / 8), llvm::AtomicOrdering::Monotonic);
    } else {
      llvm::Type* ity = b_.getIntNTy(bits);
      cas_loop(ptr, ity, [&](llvm::Value* old) {
        return b_.CreateBitCast(scalar_bin(BinOp::add, t, b_.CreateBitCast(old, ty), v), ity);
      });
    }
    return;
  }
  llvm::Type *i32 = b_.getInt32Ty(), *i64 = b_.getInt64Ty(), *ity = b_.getIntNTy(bits);
  llvm::Value* addr = b_.CreatePtrToInt(ptr, i64);
  llvm::Value* word = b_.CreateIntToPtr(b_.CreateAnd(addr, b_.getInt64(~uint64_t(3))), ptr->getType());
  // The element's bit offset in the word (little-endian: SPIR-V devices and NVIDIA GPUs).
  llvm::Value* shift = b_.CreateShl(b_.CreateTrunc(b_.CreateAnd(addr, b_.getInt64(3)), i32), 3);
  llvm::Value* mask = b_.CreateShl(b_.getInt32((1u << bits) - 1), shift);
  cas_loop(word, i32, [&](llvm::Value* old) {
    llvm::Value* e = b_.CreateTrunc(b_.CreateLShr(old, shift), ity);
    if (ty != ity) e = b_.CreateBitCast(e, ty);  // f16
    llvm::Value* sum = scalar_bin(BinOp::add, t, e, v);
    if (ty != ity) sum = b_.CreateBitCast(sum, ity);
    return b_.CreateOr(b_.CreateAnd(old, b_.CreateNot(mask)), b_.CreateShl(b_.CreateZExt(sum, i32), shift));
  });
}

// vector.load / vector.store: per-thread vectors, one element per component.
void SimtLowering::vector_access(const Op& o) {
  const auto& v = o.operands;
  const bool is_load = o.kind == OpKind::vec_load;
  const Type& t = is_load ? o.result()->type : v[0]->type;
  llvm::Value* ptr = scalar(v[is_load ? 0 : 1]);
  llvm::Value* off = scalar(v[is_load ? 1 : 2]);
  llvm::Value* stride = scalar(v[is_load ? 2 : 3]);
  llvm::Type* ty = scalar_ty(t.scalar);
  std::vector<llvm::Value*> out;
  for (int64_t k = 0; k < t.cols; ++k) {
    llvm::Value* p = b_.CreateGEP(ty, ptr, b_.CreateAdd(off, b_.CreateMul(stride, b_.getInt64(k))));
    if (is_load) out.push_back(b_.CreateAlignedLoad(ty, p, align(t.scalar)));
    else b_.CreateAlignedStore(mat(v[0])[k], p, align(t.scalar));
  }
  if (is_load) mats_[o.result()] = out;
}

}  // namespace coopjit

namespace coopjit {

// coopmatrix.load_tensor / store_tensor (SPV_NV_cooperative_matrix2): each component of each
// lane is one matrix element (row_of, col_of); its buffer element comes from the pseudo-code's
// address calculation (tensor_addressing.cpp, the one the CPU lowering uses, here on scalars).
// An access happens only where the component is inside the matrix and the view's clip, the
// clamp mode keeps it (Constant: a load reads the clamp value, a store is dropped) and the index
// is inside ptr[0, extent): nothing outside the buffer is touched whatever the layout says.
// Loads start from the object operand: what the clip skips keeps its value.
SimtLowering::TensorOp SimtLowering::tensor_op(const Op& o) {
  TensorOp t;
  t.load = o.kind == OpKind::mat_load_tensor;
  t.matrix = o.operands[t.load ? 1 : 0];
  t.ptr = scalar(o.operands[t.load ? 0 : 1]);
  t.layout = layout_parts(o.operands[2]->type, mat(o.operands[2]));
  t.extent = scalar(o.operands[3]);
  t.has_view = o.operands.size() > 4;
  if (t.has_view) t.view = view_parts(o.operands[4]->type, mat(o.operands[4]));
  // The clamp value arrives as f64; fp8 matrices take its raw bits (0..255), as on the CPU.
  const ScalarType T = t.matrix->type.scalar;
  if (t.load) {
    const bool fp8 = T == ScalarType::f8_e4m3 || T == ScalarType::f8_e5m2;
    t.clamp = fp8 ? b_.CreateFPToUI(t.layout.clamp_value, scalar_ty(T)) : convert_value(t.layout.clamp_value, ScalarType::f64, T);
  }
  return t;
}

// Element (row, col) where `in` (inside the matrix) holds: a load's new value (old: the object's),
// or the store of old.
llvm::Value* SimtLowering::tensor_element_access(const Op& o, const TensorOp& t, llvm::Value* row, llvm::Value* col,
                                                 llvm::Value* in, llvm::Value* old) {
  const ScalarType T = t.matrix->type.scalar;
  llvm::Type* ty = scalar_ty(T);
  TensorElement el = tensor_element(b_, 0, t.layout, t.has_view ? &t.view : nullptr, row, col, t.matrix->type.cols, !t.load);
  llvm::Value* in_buf = b_.CreateAnd(b_.CreateICmpSGE(el.index, b_.getInt64(0)), b_.CreateICmpSLT(el.index, t.extent));
  llvm::Value* kept = b_.CreateAnd(in, el.in_clip);
  llvm::Value* access = b_.CreateAnd(kept, b_.CreateAnd(b_.CreateNot(el.discard), in_buf));
  if (!t.load) {
    guarded(access, [&] { b_.CreateAlignedStore(old, b_.CreateGEP(ty, t.ptr, el.index), align(T)); });
    return nullptr;
  }
  llvm::Value* got;
  if (o.regions.empty()) {
    got = guarded_load(access, ty, b_.CreateGEP(ty, t.ptr, el.index), align(T));
  } else {
    // The decode function, run only where the access is kept (its loads may read anywhere the
    // extent analysis allowed; elsewhere the element is 0, as a load outside the buffer).
    const Block& dec = *o.regions[0];
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* yes = llvm::BasicBlock::Create(ctx_, "decode", fn_);
    auto* cont = llvm::BasicBlock::Create(ctx_, "decode.cont", fn_);
    b_.CreateCondBr(access, yes, cont);
    b_.SetInsertPoint(yes);
    std::vector<llvm::Value*> args{el.index};
    args.insert(args.end(), el.block_coord.begin(), el.block_coord.end());
    args.insert(args.end(), el.coord_in_block.begin(), el.coord_in_block.end());
    llvm::Value* v = lower_region(dec, args);
    llvm::BasicBlock* yes_end = b_.GetInsertBlock();
    b_.CreateBr(cont);
    b_.SetInsertPoint(cont);
    llvm::PHINode* phi = b_.CreatePHI(ty, 2);
    phi->addIncoming(v, yes_end);
    phi->addIncoming(llvm::Constant::getNullValue(ty), from);
    got = phi;
  }
  got = b_.CreateSelect(el.discard, t.clamp, got);
  return b_.CreateSelect(kept, got, old);
}

void SimtLowering::tensor_access(const Op& o) {
  const TensorOp t = tensor_op(o);
  const LaneMap m = lanes_of(t.matrix->type);
  const std::vector<llvm::Value*> old = mat(t.matrix);
  std::vector<llvm::Value*> out;
  for (int64_t n = 0; n < m.comps(); ++n) {
    llvm::Value* in = inside(m, n);
    if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(in); c && c->isZero()) {  // padding on every lane
      out.push_back(old[n]);
      continue;
    }
    out.push_back(tensor_element_access(o, t, row_of(m, n), col_of(m, n), in, old[n]));
  }
  if (t.load) mats_[o.result()] = std::move(out);
}

}  // namespace coopjit
