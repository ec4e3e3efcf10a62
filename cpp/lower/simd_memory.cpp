// The SIMD lowering of memory operations: plain strided loads and stores, matrices held in
// memory, and loads/stores through tensor layouts and views.
#include "lower/simd_lowering.h"

#include <llvm/Support/MathExtras.h>

namespace coopjit {

llvm::GlobalVariable* SimdLowering::zero_global(ScalarType t) {
  auto* ty = scalar_ty(t);
  std::string n = cat("coopjit.zero.", name(t));
  if (auto* g = mod_->getGlobalVariable(n, true)) return g;
  return new llvm::GlobalVariable(*mod_, ty, true, llvm::GlobalValue::InternalLinkage,
                                  llvm::Constant::getNullValue(ty), n);
}

SimdLowering::Addr SimdLowering::addr(const Op& o, size_t base) {
  const auto& v = o.operands;
  return {scalar(v[base]), scalar(v[base + 1]), scalar(v[base + 2]), scalar(v[base + 3]),
          scalar(v[base + 4]), scalar(v[base + 5]), scalar(v[base + 6]), is_const(v[base + 4], 1),
          const_value(v[base + 4])};
}

// 0 <= r < rows and 0 <= c < cols: a checked access's element (the seeds' bounds rule).
llvm::Value* SimdLowering::in_bounds(llvm::Value* r, llvm::Value* c, const Addr& a) {
  llvm::Value* zero = b_.getInt64(0);
  return b_.CreateAnd(b_.CreateAnd(b_.CreateICmpSGE(r, zero), b_.CreateICmpSLT(r, a.rows)),
                      b_.CreateAnd(b_.CreateICmpSGE(c, zero), b_.CreateICmpSLT(c, a.cols)));
}

SimdLowering::Chunk SimdLowering::chunk(const Type& t, const Addr& a, llvm::Value* i, int j, bool checked) {
  llvm::Type* et = scalar_ty(t.scalar);
  llvm::Value* r = b_.CreateAdd(a.row, i);
  llvm::Value* c0 = b_.CreateAdd(a.col, b_.getInt64(int64_t(j) * S_));
  llvm::Value* off = b_.CreateAdd(b_.CreateMul(r, a.sr), b_.CreateMul(c0, a.sc));
  Chunk ch{b_.CreateGEP(et, a.ptr, off), nullptr, nullptr};
  int valid = static_cast<int>(std::min<int64_t>(S_, t.cols - int64_t(j) * S_));
  if (!a.unit_col)
    ch.ptrs = b_.CreateGEP(et, ch.base, b_.CreateMul(lanes(), b_.CreateVectorSplat(S_, a.sc)));
  if (checked) {
    // The seeds' bounds: 0 <= row < rows and 0 <= col < cols (negative positions included).
    llvm::Value* cv = b_.CreateAdd(b_.CreateVectorSplat(S_, c0), lanes());
    llvm::Value* in_cols = b_.CreateAnd(b_.CreateICmpSGE(cv, llvm::Constant::getNullValue(cv->getType())),
                                        b_.CreateICmpSLT(cv, b_.CreateVectorSplat(S_, a.cols)));
    llvm::Value* m = b_.CreateAnd(in_cols, lane_mask(valid));
    // Rows of INT64_MAX: the caller knows every row is in range (a GEMM tile at N's edge inside
    // its K loop): only the columns are checked, so the mask stays loop-invariant (a per-row
    // select of it became branches in the K loop, and with them spilled accumulators).
    auto* rows_c = llvm::dyn_cast<llvm::ConstantInt>(a.rows);
    if (rows_c && rows_c->isMaxValue(true)) {
      ch.mask = m;
    } else {
      llvm::Value* row_ok = b_.CreateAnd(b_.CreateICmpSGE(r, b_.getInt64(0)), b_.CreateICmpSLT(r, a.rows));
      ch.mask = b_.CreateSelect(row_ok, m, llvm::Constant::getNullValue(m->getType()));
    }
  } else if (valid < S_) {
    ch.mask = lane_mask(valid);
  }
  return ch;
}

llvm::Value* SimdLowering::load_chunk(const Type& t, const Addr& a, llvm::Value* i, int j, bool checked) {
  auto* vt = vec_ty(t.scalar);
  llvm::Value* zero = llvm::Constant::getNullValue(vt);
  Chunk ch = chunk(t, a, i, j, checked);
  if (!a.unit_col && !ch.mask && a.sc_const >= 2 && a.sc_const <= kMaxShuffledStride && a.sc_const <= S_)
    return strided_chunk(t.scalar, ch.base, a.sc_const);
  if (!a.unit_col) return b_.CreateMaskedGather(vt, ch.ptrs, align(t.scalar), ch.mask, zero);
  if (ch.mask) return b_.CreateMaskedLoad(vt, ch.base, align(t.scalar), ch.mask, zero);
  return b_.CreateAlignedLoad(vt, ch.base, align(t.scalar));
}

// The S lanes base[0], base[s], ..., base[(S-1) s] of a small constant stride s: s vector loads
// of the (S-1) s + 1 elements they span (the last load masked to its end, so nothing past the
// last lane is touched) and one strided pick, which the backend lowers to permutes. Measured
// summing K short rows of n f32 on 2 Zen 5 cores (reads down an n x K view): 4e6 x 3 8.8 -> 26.9
// GB/s, 1e6 x 8 13.3 -> 20.8, 1e6 x 16 16.2 -> 25.5 against gathers of one element a lane.
llvm::Value* SimdLowering::strided_chunk(ScalarType t, llvm::Value* base, int64_t s) {
  auto* vt = vec_ty(t);
  llvm::Type* et = scalar_ty(t);
  const int n = static_cast<int>(s);
  std::vector<llvm::Value*> parts;
  for (int k = 0; k < n; ++k) {
    llvm::Value* p = b_.CreateConstGEP1_64(et, base, int64_t(k) * S_);
    if (k + 1 < n) parts.push_back(b_.CreateAlignedLoad(vt, p, align(t)));
    else parts.push_back(b_.CreateMaskedLoad(vt, p, align(t), lane_mask(S_ - n + 1), llvm::Constant::getNullValue(vt)));
  }
  // Concatenated (zeros pad to a power-of-two count of vectors), then picked.
  parts.resize(llvm::PowerOf2Ceil(parts.size()), llvm::Constant::getNullValue(vt));
  llvm::Value* all = concat_vectors(b_, parts);
  std::vector<int> pick(S_);
  for (int l = 0; l < S_; ++l) pick[l] = l * n;
  return b_.CreateShuffleVector(all, pick);
}

// An unchecked n x CW tile at row 0 with strides (1, n), n its row count and a constant: the
// columns are CW contiguous short rows of n elements (the n x K view of K short rows), chunk j
// the n whole vectors of S rows from ptr + (col + j S) n. Each vector is loaded once and row i's
// chunk picked from them (lanes i, i + n, ..., i + (S-1) n), where a load per row read the n
// vectors again, one element further on (n loads a vector of X, most across two lines). False
// (nothing emitted) for any other load.
bool SimdLowering::segment_tile(const Op& o, const Type& t, const Addr& a, std::vector<llvm::Value*>& out) {
  const int64_t n = a.sc_const;
  auto* r0 = llvm::dyn_cast<llvm::ConstantInt>(a.row);
  auto* sr = llvm::dyn_cast<llvm::ConstantInt>(a.sr);
  if (o.int_attr("checked") || a.unit_col || n < 2 || n > 4 * S_ || t.rows != n || t.cols % S_ != 0 || !r0 ||
      !r0->isZero() || !sr || !sr->isOne() || (S_ & (S_ - 1)) != 0)
    return false;
  auto* vt = vec_ty(t.scalar);
  llvm::Type* et = scalar_ty(t.scalar);
  const int nch = chunks(t);
  std::vector<std::vector<llvm::Value*>> picks(static_cast<size_t>(n));
  for (int j = 0; j < nch; ++j) {
    llvm::Value* base = b_.CreateGEP(et, a.ptr, b_.CreateMul(b_.CreateAdd(a.col, b_.getInt64(int64_t(j) * S_)), a.sc));
    std::vector<llvm::Value*> parts;
    for (int64_t k = 0; k < n; ++k) parts.push_back(b_.CreateAlignedLoad(vt, b_.CreateConstGEP1_64(et, base, k * S_), align(t.scalar)));
    segs_[o.result()].push_back(parts);
    parts.resize(llvm::PowerOf2Ceil(parts.size()), llvm::PoisonValue::get(vt));
    llvm::Value* all = concat_vectors(b_, parts);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int> pick(S_);
      for (int l = 0; l < S_; ++l) pick[l] = static_cast<int>(i + l * n);
      picks[i].push_back(b_.CreateShuffleVector(all, pick));
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < nch; ++j) out.push_back(picks[i][j]);
  return true;
}

// An unchecked tile of a few rows (a power of two up to S) whose row stride is the constant 1 and
// whose column stride is a run-time value: each column's rows are contiguous (a column-major B's
// K step, as the GEMM packing copies it into panels; the recipe tests the unit row stride at run
// time, GemmRecipe::kb_rows_contiguous). Chunk j: one load of the rows of each of its S columns and the
// rows picked from them (row i: lanes i, i + rows, ...), where each chunk of each row was a gather
// of S lanes from S lines. False (nothing emitted) for any other load.
bool SimdLowering::column_tile(const Op& o, const Type& t, const Addr& a, std::vector<llvm::Value*>& out) {
  const int64_t n = t.rows;
  auto* sr = llvm::dyn_cast<llvm::ConstantInt>(a.sr);
  if (o.int_attr("checked") || a.unit_col || !sr || !sr->isOne() || n < 2 || n > S_ || (n & (n - 1)) != 0 ||
      t.cols % S_ != 0 || (S_ & (S_ - 1)) != 0)
    return false;
  llvm::Type* et = scalar_ty(t.scalar);
  auto* col_t = llvm::FixedVectorType::get(et, static_cast<unsigned>(n));
  const int nch = chunks(t);
  std::vector<std::vector<llvm::Value*>> picks(static_cast<size_t>(n));
  for (int j = 0; j < nch; ++j) {
    std::vector<llvm::Value*> cols;
    for (int l = 0; l < S_; ++l) {
      llvm::Value* c = b_.CreateAdd(a.col, b_.getInt64(int64_t(j) * S_ + l));
      llvm::Value* p = b_.CreateGEP(et, a.ptr, b_.CreateAdd(a.row, b_.CreateMul(c, a.sc)));
      cols.push_back(b_.CreateAlignedLoad(col_t, p, align(t.scalar)));
    }
    if (n == S_) {
      // W = S rows (GEMM packing's wide steps of a column-major B): the S x S block transposed
      // by log2 S stages of S two-vector shuffles (bit h: rows i and i | h swap their lanes
      // j with bit h set against j ^ h), not S picks of S sources each.
      std::vector<llvm::Value*> r = cols;
      for (int h = 1; h < S_; h <<= 1)
        for (int i = 0; i < S_; ++i) {
          if (i & h) continue;
          std::vector<int> lo(S_), hi(S_);
          for (int l = 0; l < S_; ++l) {
            lo[l] = (l & h) ? S_ + (l ^ h) : l;
            hi[l] = (l & h) ? S_ + l : (l | h);
          }
          llvm::Value* x0 = r[i];
          llvm::Value* x1 = r[i | h];
          r[i] = b_.CreateShuffleVector(x0, x1, lo);
          r[i | h] = b_.CreateShuffleVector(x0, x1, hi);
        }
      for (int64_t i = 0; i < n; ++i) picks[i].push_back(r[size_t(i)]);
      continue;
    }
    llvm::Value* all = concat_vectors(b_, cols);  // column l's row i at lane l * n + i
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int> pick(S_);
      for (int l = 0; l < S_; ++l) pick[l] = static_cast<int>(l * n + i);
      picks[i].push_back(b_.CreateShuffleVector(all, pick));
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < nch; ++j) out.push_back(picks[i][j]);
  return true;
}

void SimdLowering::store_chunk(const Type& t, const Addr& a, llvm::Value* i, int j, bool checked, llvm::Value* v,
                               bool nontemporal) {
  Chunk ch = chunk(t, a, i, j, checked);
  if (!a.unit_col) {
    b_.CreateMaskedScatter(v, ch.ptrs, align(t.scalar), ch.mask);
  } else if (ch.mask) {
    b_.CreateMaskedStore(v, ch.base, align(t.scalar), ch.mask);
  } else if (nontemporal) {
    // attr nontemporal (a reduction's plan stream_y): a streaming store, which the backend emits
    // only for a store aligned to its whole vector; the caller guarantees that alignment.
    const uint64_t bytes = uint64_t(S_) * size_in_bytes(t.scalar);
    llvm::StoreInst* st = b_.CreateAlignedStore(v, ch.base, llvm::Align(std::min<uint64_t>(64, bytes)));
    st->setMetadata(llvm::LLVMContext::MD_nontemporal,
                    llvm::MDNode::get(ctx_, {llvm::ConstantAsMetadata::get(b_.getInt32(1))}));
  } else {
    b_.CreateAlignedStore(v, ch.base, align(t.scalar));
  }
}

void SimdLowering::load(const Op& o) {
  if (o.int_attr("vnni", 1) != 1) return load_vnni(o);
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
    if (segment_tile(o, t, a, out) || column_tile(o, t, a, out)) {
      mats_[o.result()] = out;
      return;
    }
    // attr prefetch: each row's lines `prefetch` bytes further along the row go to L1
    // (prefetcht0), one a 64-byte line of the row's chunks (contiguous rows only): GEMM plans'
    // b_prefetch; reductions' row tiles of short rows, whose runs side by side the hardware
    // prefetchers do not follow.
    const int64_t ahead = a.unit_col ? o.int_attr("prefetch", 0) : 0;
    const int64_t row_bytes = int64_t(chunks(t)) * S_ * size_in_bytes(t.scalar);
    for (int64_t i = 0; i < t.rows; ++i) {
      if (ahead > 0) {
        llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(i));
        llvm::Value* base = b_.CreateGEP(et, a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), a.col));
        for (int64_t off = 0; off < row_bytes; off += 64)
          b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                             {b_.CreateGEP(b_.getInt8Ty(), base, b_.getInt64(ahead + off)), b_.getInt32(0), b_.getInt32(3),
                              b_.getInt32(1)});
      }
      for (int j = 0; j < chunks(t); ++j) out.push_back(load_chunk(t, a, b_.getInt64(i), j, checked));
    }
    mats_[o.result()] = out;
    return;
  }
  // attr col_vectors (the GEMM packing of a column-major A into the panels' columns): with the row
  // stride the constant 1, each column's rows are contiguous: one vector load a column.
  auto* sr_c = llvm::dyn_cast<llvm::ConstantInt>(a.sr);
  if (!checked && o.int_attr("col_vectors") && sr_c && sr_c->isOne() && t.rows > 1) {
    auto* col_t = llvm::FixedVectorType::get(et, static_cast<unsigned>(t.rows));
    out.assign(static_cast<size_t>(t.rows * t.cols), nullptr);
    for (int64_t k = 0; k < t.cols; ++k) {
      llvm::Value* c = b_.CreateAdd(a.col, b_.getInt64(k));
      llvm::Value* v = b_.CreateAlignedLoad(col_t, b_.CreateGEP(et, a.ptr, b_.CreateAdd(a.row, b_.CreateMul(c, a.sc))),
                                            align(t.scalar));
      for (int64_t i = 0; i < t.rows; ++i) out[size_t(i * t.cols + k)] = b_.CreateExtractElement(v, i);
    }
    mats_[o.result()] = out;
    return;
  }
  for (int64_t i = 0; i < t.rows; ++i) {
    if (a.unit_col && !checked && t.cols > 1) {
      // A contiguous row: one vector load, its elements taken out (LLVM then sees element-wise
      // work on the row, as the s8 -> u8 pack's + 128, as the vector operation it is).
      auto* row_t = llvm::FixedVectorType::get(et, static_cast<unsigned>(t.cols));
      llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(i));
      llvm::Value* v = b_.CreateAlignedLoad(row_t, b_.CreateGEP(et, a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), a.col)),
                                            align(t.scalar));
      for (int64_t k = 0; k < t.cols; ++k) out.push_back(b_.CreateExtractElement(v, k));
      continue;
    }
    // attr row_vectors (the GEMM packing's checked steps: an edge panel, the K tail): each row
    // one masked vector load (lanes past the bounds, and whole rows outside them, not read)
    // instead of an element-wise select of each element's address (a panel of mr rows past M
    // took 3-4x the time of a full one).
    const int64_t es = size_in_bytes(t.scalar);
    if (a.unit_col && checked && o.int_attr("row_vectors") && (es == 4 || es == 8) && t.cols >= 2 && t.cols <= 16 &&
        (t.cols & (t.cols - 1)) == 0) {
      const unsigned w = static_cast<unsigned>(t.cols);
      auto* row_t = llvm::FixedVectorType::get(et, w);
      llvm::Value* zero = llvm::Constant::getNullValue(row_t);
      llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(i));
      std::vector<llvm::Constant*> steps;
      for (unsigned l = 0; l < w; ++l) steps.push_back(b_.getInt64(l));
      llvm::Value* cv = b_.CreateAdd(b_.CreateVectorSplat(w, a.col), llvm::ConstantVector::get(steps));
      llvm::Value* in_cols = b_.CreateAnd(b_.CreateICmpSGE(cv, llvm::Constant::getNullValue(cv->getType())),
                                          b_.CreateICmpSLT(cv, b_.CreateVectorSplat(w, a.cols)));
      llvm::Value* row_ok = b_.CreateAnd(b_.CreateICmpSGE(r, b_.getInt64(0)), b_.CreateICmpSLT(r, a.rows));
      llvm::Value* m = b_.CreateAnd(in_cols, b_.CreateVectorSplat(w, row_ok));
      llvm::Value* p = b_.CreateGEP(et, a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), a.col));
      llvm::Value* v = b_.CreateMaskedLoad(row_t, p, align(t.scalar), m, zero);
      for (int64_t k = 0; k < t.cols; ++k) out.push_back(b_.CreateExtractElement(v, k));
      continue;
    }
    for (int64_t k = 0; k < t.cols; ++k) {
      llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(i));
      llvm::Value* c = b_.CreateAdd(a.col, b_.getInt64(k));
      llvm::Value* p = b_.CreateGEP(et, a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), b_.CreateMul(c, a.sc)));
      if (checked) {
        llvm::Value* inb = in_bounds(r, c, a);
        p = b_.CreateSelect(inb, p, zero_global(t.scalar));
      }
      out.push_back(b_.CreateAlignedLoad(et, p, align(t.scalar)));
    }
  }
  mats_[o.result()] = out;
}

void SimdLowering::store(const Op& o) {
  if (o.int_attr("vnni", 1) != 1) return store_vnni(o);
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
    const bool nontemporal = o.int_attr("nontemporal") != 0;
    for (int64_t i = 0; i < t.rows; ++i)
      for (int j = 0; j < chunks(t); ++j) store_chunk(t, a, b_.getInt64(i), j, checked, vals[idx++], nontemporal);
    return;
  }
  // attr col_vectors: a column of contiguous rows (the row stride the constant 1) one vector store.
  auto* sr_c = llvm::dyn_cast<llvm::ConstantInt>(a.sr);
  if (!checked && o.int_attr("col_vectors") && sr_c && sr_c->isOne() && t.rows > 1) {
    auto* col_t = llvm::FixedVectorType::get(et, static_cast<unsigned>(t.rows));
    for (int64_t k = 0; k < t.cols; ++k) {
      llvm::Value* v = llvm::PoisonValue::get(col_t);
      for (int64_t i = 0; i < t.rows; ++i) v = b_.CreateInsertElement(v, vals[size_t(i * t.cols + k)], i);
      llvm::Value* c = b_.CreateAdd(a.col, b_.getInt64(k));
      b_.CreateAlignedStore(v, b_.CreateGEP(et, a.ptr, b_.CreateAdd(a.row, b_.CreateMul(c, a.sc))), align(t.scalar));
    }
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
      llvm::Value* inb = in_bounds(r, c, a);
      auto* st = llvm::BasicBlock::Create(ctx_, "store.in", fn_);
      auto* cont = llvm::BasicBlock::Create(ctx_, "store.cont", fn_);
      b_.CreateCondBr(inb, st, cont);
      b_.SetInsertPoint(st);
      b_.CreateAlignedStore(v, p, align(t.scalar));
      b_.CreateBr(cont);
      b_.SetInsertPoint(cont);
    }
}

// attr demote (GemmPlan::demote): the `bytes` from the store's first element, contiguous, pushed
// to the shared L3 (CLDEMOTE, one per 64-byte line).
void SimdLowering::demote_lines(const Op& o, int64_t bytes) {
  const Type& t = o.operands[0]->type;
  Addr a = addr(o, 1);
  llvm::Value* first = o.int_attr("vnni", 1) != 1
                           ? vnni_element_ptr(t, a, 0, 0)
                           : b_.CreateGEP(scalar_ty(t.scalar), a.ptr,
                                          b_.CreateAdd(b_.CreateMul(a.row, a.sr), b_.CreateMul(a.col, a.sc)));
  for (int64_t off = 0; off < bytes; off += 64)
    b_.CreateIntrinsic(llvm::Intrinsic::x86_cldemote, {},
                       {b_.CreateGEP(b_.getInt8Ty(), first, b_.getInt64(off))});
}

llvm::ArrayType* SimdLowering::slots_ty(const Type& t) {
  return llvm::ArrayType::get(vec_ty(t.scalar), static_cast<uint64_t>(t.rows * chunks(t)));
}

llvm::Value* SimdLowering::new_slots(const Type& t) {
  llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  return eb.CreateAlloca(slots_ty(t), nullptr, "matrix.slots");
}

llvm::Value* SimdLowering::slot(const Type& t, llvm::Value* slots, llvm::Value* i, int j) {
  llvm::Value* k = b_.CreateAdd(b_.CreateMul(i, b_.getInt64(chunks(t))), b_.getInt64(j));
  return b_.CreateInBoundsGEP(slots_ty(t), slots, {b_.getInt64(0), k});
}

llvm::Value* SimdLowering::mem_of(const Value* v) {
  if (auto it = mems_.find(v); it != mems_.end()) return it->second;
  const Type& t = v->type;
  llvm::Value* slots = new_slots(t);
  std::vector<llvm::Value*> vecs = as_vectors(t, mat(v));
  for (size_t k = 0; k < vecs.size(); ++k) b_.CreateStore(vecs[k], b_.CreateConstInBoundsGEP2_64(slots_ty(t), slots, 0, k));
  mems_[v] = slots;
  return slots;
}

void SimdLowering::copy_slots(const Type& t, llvm::Value* dst, llvm::Value* src) {
  const llvm::DataLayout& dl = mod_->getDataLayout();
  uint64_t bytes = dl.getTypeAllocSize(slots_ty(t));
  b_.CreateMemCpy(dst, llvm::MaybeAlign(64), src, llvm::MaybeAlign(64), bytes);
}

void SimdLowering::row_loop(int64_t rows, const std::function<void(llvm::Value*)>& body) {
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

llvm::Value* SimdLowering::convert_clamp_value(llvm::Value* d, ScalarType t) {
  llvm::Type* ty = scalar_ty(t);
  if (t == ScalarType::f64) return d;
  if (t == ScalarType::f32) return b_.CreateFPTrunc(d, ty);
  if (t == ScalarType::f16 || t == ScalarType::bf16)  // via f32: no libcall for double -> half
    return b_.CreateFPTrunc(b_.CreateFPTrunc(d, b_.getFloatTy()), ty);
  if (is_float(t)) return b_.CreateFPToUI(d, ty);  // fp8: the caller passes the raw bits (0..255)
  return is_signed(t) ? b_.CreateFPToSI(d, ty) : b_.CreateFPToUI(d, ty);
}

void SimdLowering::tensor_access(const Op& o) {
  const bool load = o.kind == OpKind::mat_load_tensor;
  const Value* m = o.operands[load ? 1 : 0];
  const Type& t = m->type;
  llvm::Value* ptr = scalar(o.operands[load ? 0 : 1]);
  LayoutParts lay = layout_parts(o.operands[2]->type, mat(o.operands[2]));
  llvm::Value* extent = scalar(o.operands[3]);
  ViewParts view;
  const bool has_view = o.operands.size() > 4;
  if (has_view) view = view_parts(o.operands[4]->type, mat(o.operands[4]));
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

}  // namespace coopjit
