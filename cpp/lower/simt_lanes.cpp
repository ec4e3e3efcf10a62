// The SIMT lowering's lanes: where each component of a coopmatrix lives (LaneMap, from the
// layout module of seeds/001) and how values move between the lanes of a subgroup (broadcasts,
// shuffles, xor shuffles; gathers of components and whole re-layouts built from them).
#include <algorithm>
#include <set>

#include "layout/coopmatrix_layout.h"
#include "lower/simt_lowering.h"

namespace coopjit {

LaneMap LaneMap::of(const Type& t, int S) {
  const layout::Use use = t.use == Use::a ? layout::Use::a : t.use == Use::b ? layout::Use::b : layout::Use::acc;
  std::optional<layout::CoopMatrixLayout> L;
  try {
    L.emplace(t.rows, t.cols, use, name(t.scalar), S);
  } catch (const layout::LayoutError& e) {
    throw UserError(cat("SIMT lowering: ", t.str(), " with subgroup size ", S, ": ", e.what()));
  }
  LaneMap m;
  m.M = t.rows;
  m.N = t.cols;
  m.S = S;
  m.I = L->I();
  m.chan = L->channels();
  m.V = L->V();
  const int64_t K1 = L->K1(), Jp = L->slot_cols();
  for (int64_t v = 0; v < m.V; ++v)
    for (int64_t c = 0; c < m.chan; ++c) {
      // Lane 0's entry L = v * S of the I x K1 x Jp x K2 tensor (seeds/001, "Work-item mapping");
      // lane p adds p % I to the row and p / I to the (entry) column.
      int64_t row = 0, col = 0;
      if (m.I == S) {
        const int64_t k1 = v % K1, j = (v / K1) % Jp, k2 = v / (K1 * Jp);
        row = k1 * m.I + k2 * m.I * K1;
        col = j * m.chan + c;
      } else {  // I < S: K = 1, the lanes of one entry column are I consecutive ones
        col = v * (S / m.I) * m.chan + c;
      }
      m.row_off.push_back(row);
      m.col_off.push_back(col);
    }
  // The closed form above against the layout module's element() for every lane and slot.
  for (int64_t p = 0; p < S; ++p)
    for (int64_t v = 0; v < m.V; ++v)
      for (int64_t c = 0; c < m.chan; ++c) {
        auto e = L->element(p, v, c);
        auto mine = m.at(p, v * m.chan + c);
        COOPJIT_INTERNAL_ASSERT(e ? (mine.first == e->row && mine.second == e->col) : mine.first < 0,
                                "lane map differs from the layout at ", t.str(), " p=", p, " v=", v, " c=", c);
      }
  return m;
}

std::pair<int64_t, int64_t> LaneMap::at(int64_t p, int64_t n) const {
  const int64_t row = p % I + row_off[n];
  const int64_t col = (p / I) * chan + col_off[n];
  if (row >= M || col >= N) return {-1, -1};
  return {row, col};
}

std::pair<int64_t, int64_t> LaneMap::owner(int64_t row, int64_t col) const {
  // Inverse of at(): the lane p and component n with at(p, n) == (row, col), by search over the
  // lanes (S <= 64) and the components whose offsets fit.
  for (int64_t n = 0; n < comps(); ++n) {
    const int64_t dr = row - row_off[n], dc = col - col_off[n];
    if (dr < 0 || dr >= I || dc < 0 || dc % chan != 0) continue;
    const int64_t p = dr + (dc / chan) * I;
    if (p < S) return {p, n};
  }
  throw InternalError(cat("LaneMap::owner: no lane holds (", row, ", ", col, ") of a ", M, " x ", N, " matrix"));
}

int LaneMap::inside(int64_t n) const {
  if (I == S) return 1;
  const int64_t lo = col_off[n], hi = (S / I - 1) * chan + col_off[n];
  if (lo >= N) return 0;
  return hi < N ? 1 : 2;
}

// ---- per-lane positions ----------------------------------------------------------------------------
namespace {
llvm::Value* entry_value(llvm::IRBuilder<>& b, llvm::Instruction* after, const std::function<llvm::Value*(llvm::IRBuilder<>&)>& f) {
  llvm::IRBuilder<> eb(after->getParent(), std::next(after->getIterator()));
  (void)b;
  return f(eb);
}
}  // namespace

llvm::Value* SimtLowering::row_of(const LaneMap& m, int64_t n) {
  if (m.I == 1) return b_.getInt64(m.row_off[n]);
  auto it = lane_mod_.find(m.I);
  if (it == lane_mod_.end()) {
    llvm::Value* v = m.I == S_ ? lane64_ : entry_value(b_, llvm::cast<llvm::Instruction>(lane64_), [&](llvm::IRBuilder<>& eb) {
      return eb.CreateAnd(lane64_, eb.getInt64(m.I - 1), cat("lane.mod", m.I));
    });
    it = lane_mod_.emplace(m.I, v).first;
  }
  return m.row_off[n] ? b_.CreateAdd(it->second, b_.getInt64(m.row_off[n])) : it->second;
}

llvm::Value* SimtLowering::col_of(const LaneMap& m, int64_t n) {
  if (m.I == S_) return b_.getInt64(m.col_off[n]);
  const int64_t key = m.I * 1000 + m.chan;
  auto it = lane_div_.find(key);
  if (it == lane_div_.end()) {
    int shift = 0;
    while ((int64_t(1) << shift) < m.I) ++shift;
    llvm::Value* v = entry_value(b_, llvm::cast<llvm::Instruction>(lane64_), [&](llvm::IRBuilder<>& eb) {
      llvm::Value* d = eb.CreateLShr(lane64_, eb.getInt64(shift));
      return m.chan > 1 ? eb.CreateMul(d, eb.getInt64(m.chan)) : d;
    });
    it = lane_div_.emplace(key, v).first;
  }
  return m.col_off[n] ? b_.CreateAdd(it->second, b_.getInt64(m.col_off[n])) : it->second;
}

llvm::Value* SimtLowering::inside(const LaneMap& m, int64_t n) {
  switch (m.inside(n)) {
    case 0: return b_.getFalse();
    case 1: return b_.getTrue();
    default: return b_.CreateICmpSLT(col_of(m, n), b_.getInt64(m.N));
  }
}

llvm::Value* SimtLowering::lane_in(uint64_t mask) {
  const uint64_t all = S_ == 64 ? ~uint64_t(0) : (uint64_t(1) << S_) - 1;
  if ((mask & all) == all) return b_.getTrue();
  if ((mask & all) == 0) return b_.getFalse();
  llvm::Value* bit = b_.CreateAnd(b_.CreateLShr(b_.getInt64(mask), lane64_), b_.getInt64(1));
  return b_.CreateICmpNE(bit, b_.getInt64(0));
}

// ---- moves between lanes (the target's shuffles) ---------------------------------------------------
llvm::Value* SimtLowering::shuffle(llvm::Value* x, llvm::Value* src_lane) { return target_.shuffle(b_, x, src_lane); }

llvm::Value* SimtLowering::shuffle_xor(llvm::Value* x, int mask) { return target_.shuffle_xor(b_, x, mask); }

llvm::Value* SimtLowering::broadcast(llvm::Value* x, int src_lane) { return target_.broadcast(b_, x, src_lane); }

llvm::Value* SimtLowering::move(llvm::Value* x, const std::vector<int>& src) {
  bool any = false, ident = true, same = true;
  int first = -1;
  for (int p = 0; p < S_; ++p) {
    if (src[p] < 0) continue;
    any = true;
    ident = ident && src[p] == p;
    if (first < 0) first = src[p];
    same = same && src[p] == first;
  }
  if (!any || ident) return x;
  if (same) return broadcast(x, first);
  for (int m = 1; m < S_; ++m) {
    bool ok = true;
    for (int p = 0; p < S_ && ok; ++p) ok = src[p] < 0 || src[p] == (p ^ m);
    if (ok) return shuffle_xor(x, m);
  }
  // A general permutation: the source lanes come from a constant table indexed by the lane.
  std::vector<int> table(src);
  for (int p = 0; p < S_; ++p)
    if (table[p] < 0) table[p] = p;
  llvm::GlobalVariable*& g = tables_[table];
  auto* arr = llvm::ArrayType::get(b_.getInt32Ty(), S_);
  if (!g) {
    std::vector<llvm::Constant*> cs;
    for (int v : table) cs.push_back(b_.getInt32(v));
    g = new llvm::GlobalVariable(*mod_, arr, true, llvm::GlobalValue::InternalLinkage, llvm::ConstantArray::get(arr, cs),
                                 cat("coopjit.lanes.", tables_.size()), nullptr, llvm::GlobalValue::NotThreadLocal,
                                 target_.constant_addrspace());
  }
  llvm::Value* idx = b_.CreateAlignedLoad(b_.getInt32Ty(), b_.CreateInBoundsGEP(arr, g, {b_.getInt64(0), lane64_}),
                                          llvm::Align(4));
  return shuffle(x, idx);
}

llvm::Value* SimtLowering::gather(const std::vector<llvm::Value*>& vals, const std::vector<int>& src,
                                  const std::vector<int>& slot) {
  std::set<int> slots;
  uint64_t used = 0;
  for (int p = 0; p < S_; ++p)
    if (slot[p] >= 0) slots.insert(slot[p]), used |= uint64_t(1) << p;
  if (slots.empty()) return llvm::Constant::getNullValue(vals.at(0)->getType());
  llvm::Value* r = nullptr;
  for (int s : slots) {
    std::vector<int> from(S_, -1);
    uint64_t mask = 0;
    for (int p = 0; p < S_; ++p)
      if (slot[p] == s) from[p] = src[p], mask |= uint64_t(1) << p;
    llvm::Value* v = move(vals.at(s), from);
    r = r ? b_.CreateSelect(lane_in(mask), v, r) : v;
  }
  // Lanes that take nothing (padding) hold zero.
  return b_.CreateSelect(lane_in(used), r, llvm::Constant::getNullValue(r->getType()));
}

std::vector<llvm::Value*> SimtLowering::gather_from(const std::vector<llvm::Value*>& d, const LaneMap& dst, ScalarType s,
                                                    const std::function<std::pair<int, int>(int64_t, int64_t)>& owner) {
  std::vector<llvm::Value*> C(static_cast<size_t>(dst.comps()));
  for (int64_t n = 0; n < dst.comps(); ++n) {
    if (dst.inside(n) == 0) {
      C[n] = zero(s);
      continue;
    }
    std::vector<int> src(S_, -1), slot(S_, -1);
    for (int p = 0; p < S_; ++p) {
      auto [r, c] = dst.at(p, n);
      if (r < 0) continue;
      std::tie(src[p], slot[p]) = owner(r, c);
    }
    C[n] = gather(d, src, slot);
  }
  return C;
}

std::vector<llvm::Value*> SimtLowering::relayout(const std::vector<llvm::Value*>& from, const LaneMap& src,
                                                 const LaneMap& dst, bool transpose) {
  if (!transpose && src.same_as(dst)) return from;
  std::vector<llvm::Value*> out;
  for (int64_t n = 0; n < dst.comps(); ++n) {
    std::vector<int> lanes(S_, -1), slots(S_, -1);
    for (int p = 0; p < S_; ++p) {
      auto [r, c] = dst.at(p, n);
      if (r < 0) continue;
      auto [q, k] = transpose ? src.owner(c, r) : src.owner(r, c);
      lanes[p] = static_cast<int>(q);
      slots[p] = static_cast<int>(k);
    }
    out.push_back(gather(from, lanes, slots));
  }
  return out;
}

}  // namespace coopjit
