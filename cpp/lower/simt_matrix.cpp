// The SIMT lowering of matrix arithmetic: splat, mul_add (components of A and B gathered from
// their owner lanes: a broadcast or nothing in the GEMM layouts, shuffles otherwise),
// element-wise operations, per-element functions (row and column from the layout), reductions
// (in-lane combines, then xor butterflies over the lanes that share a row or a column),
// conversions of component type and use, transposes, and the per-invocation element access of
// HLSL 0035 (length / get / set / get_coordinate).
#include <set>

#include <llvm/IR/Intrinsics.h>

#include "lower/simt_lowering.h"

namespace coopjit {

namespace {
bool is_true(llvm::Value* v) { auto* c = llvm::dyn_cast<llvm::ConstantInt>(v); return c && c->isOne(); }
bool is_false(llvm::Value* v) { auto* c = llvm::dyn_cast<llvm::ConstantInt>(v); return c && c->isZero(); }
}  // namespace

// select / and / or that fold a constant condition (IRBuilder folds only all-constant selects).
static llvm::Value* sel(llvm::IRBuilder<>& b, llvm::Value* c, llvm::Value* x, llvm::Value* y) {
  if (is_true(c)) return x;
  if (is_false(c)) return y;
  return b.CreateSelect(c, x, y);
}
static llvm::Value* both(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y) {
  if (is_true(x)) return y;
  if (is_true(y)) return x;
  if (is_false(x) || is_false(y)) return b.getFalse();
  return b.CreateAnd(x, y);
}
static llvm::Value* either(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y) {
  if (is_false(x)) return y;
  if (is_false(y)) return x;
  if (is_true(x) || is_true(y)) return b.getTrue();
  return b.CreateOr(x, y);
}

// Whether a scalar is known to differ between the lanes of a subgroup: a lane id, an element of
// this lane's part of a matrix or its coordinates, and arithmetic on them. (Scalars are uniform
// otherwise in this lowering.)
bool lane_varying(const Value* v, int depth) {
  if (!v->def || depth > 64) return false;
  const Op& o = *v->def;
  switch (o.kind) {
    case OpKind::work_id: return static_cast<WorkId>(o.sub) == WorkId::lane;
    case OpKind::mat_get: case OpKind::mat_coord: return true;
    case OpKind::binary: case OpKind::cmp: case OpKind::select: case OpKind::unary: case OpKind::convert:
    case OpKind::load: case OpKind::ptr_offset:  // an element at a lane-varying position
      for (const Value* x : o.operands)
        if (lane_varying(x, depth + 1)) return true;
      return false;
    default: return false;
  }
}

std::vector<llvm::Value*> SimtLowering::splat(const Op& o) {
  const Type& t = o.result()->type;
  const LaneMap m = lanes_of(t);
  llvm::Value* s = scalar(o.operands[0]);
  // A value that may differ between lanes is read from the first lane (HLSL's Splat:
  // WaveReadLaneFirst), so that every element of the matrix is the same.
  if (lane_varying(o.operands[0])) s = broadcast(s, 0);
  std::vector<llvm::Value*> out;
  for (int64_t n = 0; n < m.comps(); ++n) out.push_back(sel(b_, inside(m, n), s, zero(t.scalar)));  // padding: zero
  return out;
}

std::vector<llvm::Value*> SimtLowering::elementwise(const Op& o) {
  const Type& t = o.result()->type;
  const auto& x = mat(o.operands[0]);
  std::vector<llvm::Value*> out;
  if (o.kind == OpKind::mat_scale) {
    llvm::Value* s = scalar(o.operands[1]);
    for (llvm::Value* v : x) out.push_back(scalar_bin(BinOp::mul, t.scalar, v, s));
    return out;
  }
  const auto& y = mat(o.operands[1]);
  for (size_t i = 0; i < x.size(); ++i) out.push_back(scalar_bin(static_cast<BinOp>(o.sub), t.scalar, x[i], y[i]));
  return out;
}

// C[n] += A[row(n), k] * B[k, col(n)] for each k: on lane p, the A element comes from its owner
// lane and component (the same lane when A's rows run over the lanes like C's, so nothing moves),
// the B element likewise (one lane for all: a broadcast, when C's column is the same on every
// lane). Gathers are shared between the components that need the same one.
std::vector<llvm::Value*> SimtLowering::mul_add(const Op& o) {
  const Type &ta = o.operands[0]->type, &tb = o.operands[1]->type, &tc = o.operands[2]->type;
  if (dpas_mode_) {  // on the matrix engines when the types and layouts allow (simt_dpas.cpp)
    std::vector<llvm::Value*> C = mat(o.operands[2]);
    if (dpas_mul_add(o, C)) return C;
  }
  if (mma_mode_) {  // on NVIDIA tensor cores when the types and shapes allow (simt_mma.cpp)
    std::vector<llvm::Value*> C = mat(o.operands[2]);
    if (mma_mul_add(o, C)) return C;
  }
  const LaneMap La = lanes_of(ta), Lb = lanes_of(tb), Lc = lanes_of(tc);
  std::vector<llvm::Value*> A = mat(o.operands[0]), B = mat(o.operands[1]);
  // Mixed precision (i8/u8 -> i32, f16/bf16 -> f32): widen the inputs first.
  for (auto& x : A) x = convert_value(x, ta.scalar, tc.scalar);
  for (auto& x : B) x = convert_value(x, tb.scalar, tc.scalar);
  std::vector<llvm::Value*> C = mat(o.operands[2]);
  std::map<std::vector<int>, llvm::Value*> got_a, got_b;
  auto fetch = [&](std::map<std::vector<int>, llvm::Value*>& cache, const std::vector<llvm::Value*>& vals,
                   const std::vector<int>& src, const std::vector<int>& slot) {
    std::vector<int> key(src);
    key.insert(key.end(), slot.begin(), slot.end());
    llvm::Value*& v = cache[key];
    if (!v) {
      std::vector<int> s(slot);
      // Padding lanes of C take whatever is cheapest: the slot the other lanes use.
      int any = -1;
      for (int x : s) any = x >= 0 ? x : any;
      std::vector<int> f(src);
      for (int p = 0; p < S_; ++p)
        if (s[p] < 0) s[p] = any, f[p] = -1;
      bool one_slot = true;
      for (int x : s) one_slot = one_slot && x == any;
      v = one_slot ? (any < 0 ? llvm::Constant::getNullValue(vals[0]->getType()) : move(vals[any], f)) : gather(vals, src, slot);
    }
    return v;
  };
  const bool fp = is_float(tc.scalar);
  for (int64_t k = 0; k < ta.cols; ++k)
    for (int64_t n = 0; n < Lc.comps(); ++n) {
      if (Lc.inside(n) == 0) continue;
      std::vector<int> sa(S_, -1), ka(S_, -1), sb(S_, -1), kb(S_, -1);
      for (int p = 0; p < S_; ++p) {
        auto [r, c] = Lc.at(p, n);
        if (r < 0) continue;
        std::tie(sa[p], ka[p]) = La.owner(r, k);
        std::tie(sb[p], kb[p]) = Lb.owner(k, c);
      }
      llvm::Value* a = fetch(got_a, A, sa, ka);
      llvm::Value* bv = fetch(got_b, B, sb, kb);
      C[n] = fp ? b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, bv, C[n]})
                : b_.CreateAdd(b_.CreateMul(a, bv), C[n]);
    }
  for (int64_t n = 0; n < Lc.comps(); ++n)
    if (Lc.inside(n) == 2) C[n] = b_.CreateSelect(inside(Lc, n), C[n], zero(tc.scalar));
  return C;
}

std::vector<llvm::Value*> SimtLowering::per_element(const Op& o) {
  const Type& t = o.operands[0]->type;
  const LaneMap m = lanes_of(t);
  const auto& x = mat(o.operands[0]);
  std::vector<llvm::Value*> out;
  for (int64_t n = 0; n < m.comps(); ++n) {
    llvm::Value* in = inside(m, n);
    if (is_false(in)) {
      out.push_back(zero(t.scalar));
      continue;
    }
    std::vector<llvm::Value*> args{row_of(m, n), col_of(m, n), x[n]};
    for (size_t e = 1; e < o.operands.size(); ++e)
      args.push_back(o.operands[e]->type.is_matrix() ? mat(o.operands[e])[n] : scalar(o.operands[e]));
    out.push_back(sel(b_, in, lower_region(*o.regions[0], args), zero(t.scalar)));
  }
  return out;
}

llvm::Value* SimtLowering::combine(const Op& o, ScalarType t, llvm::Value* x, llvm::Value* y) {
  if (!o.regions.empty()) return lower_region(*o.regions[0], {x, y});
  const std::string& c = std::get<std::string>(o.attrs.at("combine"));
  BinOp op = c == "add" ? BinOp::add : c == "mul" ? BinOp::mul : c == "min" ? BinOp::min : BinOp::max;
  return scalar_bin(op, t, x, y);
}

// Reductions (SPV_NV_cooperative_matrix2 Row, Column, Row|Column, 2x2) of an acc matrix.
std::vector<llvm::Value*> SimtLowering::reduce(const Op& o) {
  const Type &tm = o.operands[0]->type, &tr = o.result()->type;
  const LaneMap Ls = lanes_of(tm), Lr = lanes_of(tr);
  const auto& x = mat(o.operands[0]);
  const ScalarType T = tm.scalar;
  const auto mode = static_cast<ReduceMode>(o.sub);
  std::vector<llvm::Value*> out;

  // part (valid) (op)= v (valid_v), skipping what is not valid.
  auto accumulate = [&](llvm::Value*& part, llvm::Value*& valid, llvm::Value* v, llvm::Value* valid_v) {
    if (!part) {
      part = v, valid = valid_v;
      return;
    }
    llvm::Value* c = combine(o, T, part, v);
    part = sel(b_, valid_v, sel(b_, valid, c, v), part);
    valid = either(b_, valid, valid_v);
  };
  // Combines each lane's value with those of the lanes p ^ m for m in masks (an xor butterfly).
  auto butterfly = [&](llvm::Value*& part, llvm::Value*& valid, const std::vector<int>& masks) {
    for (int m : masks) {
      llvm::Value* other = shuffle_xor(part, m);
      llvm::Value* other_valid = is_true(valid) ? valid : b_.CreateTrunc(shuffle_xor(b_.CreateZExt(valid, b_.getInt32Ty()), m), b_.getInt1Ty());
      llvm::Value* c = combine(o, T, part, other);
      part = sel(b_, other_valid, sel(b_, valid, c, other), part);
      valid = either(b_, valid, other_valid);
    }
  };
  auto masks = [&](int from, int to) {  // from, 2 from, ... below to
    std::vector<int> ms;
    for (int m = from; m < to; m *= 2) ms.push_back(m);
    return ms;
  };

  if (mode == ReduceMode::row) {
    // Components with one row offset hold one row on each lane; the lanes p % I hold the same rows.
    std::map<int64_t, std::pair<llvm::Value*, llvm::Value*>> parts;
    for (int64_t n = 0; n < Ls.comps(); ++n) {
      if (Ls.inside(n) == 0) continue;
      auto& [part, valid] = parts[Ls.row_off[n]];
      accumulate(part, valid, x[n], inside(Ls, n));
    }
    for (auto& [ro, pv] : parts) butterfly(pv.first, pv.second, masks(static_cast<int>(Ls.I), S_));
    COOPJIT_INTERNAL_ASSERT(Lr.I == Ls.I);
    for (int64_t n = 0; n < Lr.comps(); ++n) {
      auto it = parts.find(Lr.row_off[n]);
      COOPJIT_INTERNAL_ASSERT(it != parts.end());
      out.push_back(sel(b_, both(b_, inside(Lr, n), it->second.second), it->second.first, zero(T)));
    }
    return out;
  }
  if (mode == ReduceMode::column) {
    // Components with one column offset hold one column on each lane; lanes with one p / I hold
    // the same columns.
    std::map<int64_t, std::pair<llvm::Value*, llvm::Value*>> parts;
    for (int64_t n = 0; n < Ls.comps(); ++n) {
      if (Ls.inside(n) == 0) continue;
      auto& [part, valid] = parts[Ls.col_off[n]];
      accumulate(part, valid, x[n], inside(Ls, n));
    }
    std::vector<llvm::Value*> vals;
    std::vector<int64_t> offs;
    for (auto& [co, pv] : parts) {
      llvm::Value* always = b_.getTrue();  // lanes sharing a column share its validity
      butterfly(pv.first, always, masks(1, static_cast<int>(Ls.I)));
      vals.push_back(pv.first);
      offs.push_back(co);
    }
    // Result component n of lane p wants column c: it is on lane q = (c - off) * I + (any row
    // lane), as the sum of group g with offset off.
    for (int64_t n = 0; n < Lr.comps(); ++n) {
      std::vector<int> src(S_, -1), slot(S_, -1);
      for (int p = 0; p < S_; ++p) {
        auto [r, c] = Lr.at(p, n);
        if (r < 0) continue;
        for (size_t g = 0; g < offs.size() && slot[p] < 0; ++g) {
          const int64_t d = c - offs[g];
          if (d < 0 || d >= S_ / Ls.I) continue;
          const int64_t q0 = d * Ls.I;
          src[p] = static_cast<int>(p >= q0 && p < q0 + Ls.I ? p : q0 + p % Ls.I);
          slot[p] = static_cast<int>(g);
        }
        COOPJIT_INTERNAL_ASSERT(slot[p] >= 0, "no lane holds column ", c);
      }
      out.push_back(gather(vals, src, slot));
    }
    return out;
  }
  if (mode == ReduceMode::both) {
    llvm::Value *part = nullptr, *valid = nullptr;
    for (int64_t n = 0; n < Ls.comps(); ++n)
      if (Ls.inside(n) != 0) accumulate(part, valid, x[n], inside(Ls, n));
    butterfly(part, valid, masks(1, S_));
    for (int64_t n = 0; n < Lr.comps(); ++n) out.push_back(sel(b_, inside(Lr, n), part, zero(T)));
    return out;
  }
  // 2x2: each result element combines the four source elements, gathered from their owners.
  for (int64_t n = 0; n < Lr.comps(); ++n) {
    llvm::Value* acc = nullptr;
    for (int q = 0; q < 4; ++q) {
      std::vector<int> src(S_, -1), slot(S_, -1);
      for (int p = 0; p < S_; ++p) {
        auto [r, c] = Lr.at(p, n);
        if (r < 0) continue;
        auto [l, k] = Ls.owner(2 * r + (q & 1), 2 * c + (q >> 1));
        src[p] = static_cast<int>(l);
        slot[p] = static_cast<int>(k);
      }
      llvm::Value* v = gather(x, src, slot);
      acc = acc ? combine(o, T, acc, v) : v;
    }
    out.push_back(sel(b_, inside(Lr, n), acc, zero(T)));
  }
  return out;
}

llvm::Value* SimtLowering::select_component(const std::vector<llvm::Value*>& comps, llvm::Value* i) {
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(i)) {
    const uint64_t k = c->getZExtValue();
    return k < comps.size() ? comps[k] : llvm::Constant::getNullValue(comps.at(0)->getType());
  }
  llvm::Value* r = llvm::Constant::getNullValue(comps.at(0)->getType());
  for (size_t k = 0; k < comps.size(); ++k) r = b_.CreateSelect(b_.CreateICmpEQ(i, b_.getInt64(k)), comps[k], r);
  return r;
}

void SimtLowering::matrix_op(const Op& o) {
  const auto& v = o.operands;
  switch (o.kind) {
    case OpKind::mat_convert: case OpKind::mat_transpose: {
      if (frag_op(o)) return;  // an element conversion of wgmma's accumulators (simt_wgmma.cpp)
      const Type &m = v[0]->type, &r = o.result()->type;
      std::vector<llvm::Value*> c = mat(v[0]);
      for (auto& x : c) x = convert_value(x, m.scalar, r.scalar);
      mats_[o.result()] = relayout(c, lanes_of(m), lanes_of(r), o.kind == OpKind::mat_transpose);
      return;
    }
    case OpKind::mat_length:  // the components this invocation holds
      scalars_[o.result()] = b_.getInt64(lanes_of(v[0]->type).comps());
      return;
    case OpKind::mat_get:
      scalars_[o.result()] = select_component(mat(v[0]), scalar(v[1]));
      return;
    case OpKind::mat_set: {
      std::vector<llvm::Value*> c = mat(v[0]);
      llvm::Value* i = scalar(v[1]);
      for (size_t k = 0; k < c.size(); ++k) c[k] = b_.CreateSelect(b_.CreateICmpEQ(i, b_.getInt64(k)), scalar(v[2]), c[k]);
      mats_[o.result()] = c;
      return;
    }
    case OpKind::mat_coord: {  // component i of this lane: (row, col); out of range: UINT32_MAX
      const LaneMap m = lanes_of(v[0]->type);
      std::vector<llvm::Value*> rows, cols;
      for (int64_t n = 0; n < m.comps(); ++n) rows.push_back(row_of(m, n)), cols.push_back(col_of(m, n));
      llvm::Value* i = scalar(v[1]);
      llvm::Value* ok = b_.CreateICmpULT(i, b_.getInt64(m.comps()));
      llvm::Value* bad = b_.getInt64(0xFFFFFFFFu);
      scalars_[o.results[0]] = b_.CreateSelect(ok, select_component(rows, i), bad);
      scalars_[o.results[1]] = b_.CreateSelect(ok, select_component(cols, i), bad);
      return;
    }
    case OpKind::mat_sum_accumulate: {
      const Type& c = v[2]->type;
      const LaneMap Lc = lanes_of(c);
      auto a = mat(v[0]), bb = mat(v[1]);
      for (auto& x : a) x = convert_value(x, v[0]->type.scalar, c.scalar);
      for (auto& x : bb) x = convert_value(x, v[1]->type.scalar, c.scalar);
      a = relayout(a, lanes_of(v[0]->type), Lc);
      bb = relayout(bb, lanes_of(v[1]->type), Lc);
      std::vector<llvm::Value*> acc = mat(v[2]);
      for (size_t k = 0; k < acc.size(); ++k)
        acc[k] = scalar_bin(BinOp::add, c.scalar, acc[k], scalar_bin(BinOp::add, c.scalar, a[k], bb[k]));
      mats_[o.result()] = acc;
      return;
    }
    case OpKind::mat_outer_product: {  // element (r, c) = x[r] * y[c], x and y held by every lane
      const Type& r = o.result()->type;
      std::vector<llvm::Value*> xs = mat(v[0]), ys = mat(v[1]);
      for (auto& e : xs) e = convert_value(e, v[0]->type.scalar, r.scalar);
      for (auto& e : ys) e = convert_value(e, v[1]->type.scalar, r.scalar);
      std::vector<llvm::Value*> out;
      if (r.scope == Scope::thread) {  // each work-item the whole product of its own vectors
        for (auto* x : xs)
          for (auto* y : ys) out.push_back(scalar_bin(BinOp::mul, r.scalar, x, y));
        mats_[o.result()] = out;
        return;
      }
      const LaneMap m = lanes_of(r);
      for (int64_t n = 0; n < m.comps(); ++n) {
        llvm::Value* prod = scalar_bin(BinOp::mul, r.scalar, select_component(xs, row_of(m, n)),
                                       select_component(ys, col_of(m, n)));
        out.push_back(sel(b_, inside(m, n), prod, zero(r.scalar)));
      }
      mats_[o.result()] = out;
      return;
    }
    case OpKind::vec_matrix_mul: {  // HLSL 0035 Multiply / MultiplyAdd: r[k] = sum_i x[i] B[i][k] (+ bias[k])
      const Type &m = v[1]->type, &r = o.result()->type;
      const auto &x = mat(v[0]), &bm = mat(v[1]);
      const bool fp = is_float(r.scalar) && r.scalar != ScalarType::bf16 && r.scalar != ScalarType::f8_e4m3 &&
                      r.scalar != ScalarType::f8_e5m2;
      std::vector<llvm::Value*> out;
      for (int64_t k = 0; k < m.cols; ++k) {
        llvm::Value* acc = v.size() > 2 ? convert_value(mat(v[2])[k], v[2]->type.scalar, r.scalar) : zero(r.scalar);
        for (int64_t i = 0; i < m.rows; ++i) {
          llvm::Value* a = convert_value(x[i], v[0]->type.scalar, r.scalar);
          llvm::Value* w = convert_value(bm[i * m.cols + k], m.scalar, r.scalar);
          acc = fp ? b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, w, acc})
                   : scalar_bin(BinOp::add, r.scalar, scalar_bin(BinOp::mul, r.scalar, a, w), acc);
        }
        out.push_back(acc);
      }
      mats_[o.result()] = out;
      return;
    }
    default:
      throw UserError(cat("the SIMT lowering (SPIR-V devices) does not support ", mnemonic(o), " yet"));
  }
}

}  // namespace coopjit
