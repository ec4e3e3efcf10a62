// Combine and identity of reduction ops (reduce_ops.h).
#include "build/reduce_ops.h"

#include <functional>
#include <limits>
#include <vector>

namespace coopjit {

using namespace ir;

BinOp reduce_combine(const std::string& op) {
  return op == "sum" ? BinOp::add : op == "prod" ? BinOp::mul : op == "min" ? BinOp::min : BinOp::max;
}

Value* reduce_identity(Builder& b, const std::string& op, ScalarType t) {
  if (is_float(t)) {
    const double inf = std::numeric_limits<double>::infinity();
    return b.constant(op == "sum" ? 0.0 : op == "prod" ? 1.0 : op == "min" ? inf : -inf, t, "identity");
  }
  if (op == "sum" || op == "prod") return b.constant_int(op == "sum" ? 0 : 1, t, "identity");
  const bool mn = op == "min";
  const int bits = size_in_bytes(t) * 8;
  int64_t v;
  if (is_signed(t))
    v = mn ? (bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (bits - 1)) - 1)
           : (bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (bits - 1)));
  else
    v = mn ? (bits == 64 ? -1 : (int64_t(1) << bits) - 1) : 0;  // all ones is the unsigned maximum
  return b.constant_int(v, t, "identity");
}

Value* ReduceTilePass::accumulate(Builder& x, bool row_form, Value* fixed, bool checked, Value* start,
                                  Value* past_end) const {
  Value* len = row_form ? cols : rows;
  Value* step = row_form ? TC : TR;
  Value* first = start ? start : zero;
  Value* main = start ? x.sub(len, x.rem(x.sub(len, start), step), "main") : x.sub(len, x.rem(len, step), "main");
  auto at = [&](Value* pos) -> Builder::Access {
    return row_form ? Builder::Access{X, fixed, pos, sx_r, sx_c, rows, cols}
                    : Builder::Access{X, pos, fixed, sx_r, sx_c, rows, cols};
  };
  Value* acc = x.splat(acc_t(), id, "acc");
  // min / max do not mind an element combined twice: along whole rows of at least a tile, the
  // head and the tail are whole tiles at 0 and at len - TC (unmasked loads overlapping the main
  // tiles). The masked tile cost more than the 32 steps of a 4096-column row in a 1-row tile
  // (Zen 5: max along the rows of 4096 x 4084 f32 1.5 ms against 3.1).
  const bool idem = row_form && !checked && (comb == BinOp::min || comb == BinOp::max);
  // The masked tile at pos: its elements from `limit` on are the identity.
  auto masked = [&](Builder& k, Value* pos, Value* limit) {
    Value* t = widen(k, k.load(in_t(), at(pos), true, "x"));
    return k.per_element(t, {limit}, [&](Builder& e, Value* r, Value* c, Value* v, const std::vector<Value*>& xs) {
      return e.select(e.cmp(CmpPred::lt, row_form ? c : r, xs[0]), v, id);
    });
  };
  // A tile, overlapping when the op allows it and the row holds a whole tile, else masked.
  auto edge = [&](Builder& k, Value* pos, Value* limit, Value* whole_at) {
    if (!idem) return masked(k, pos, limit);
    return k.if_(k.cmp(CmpPred::le, step, len, "whole"), {acc_t()}, [&](Builder& w) {
      return std::vector<Value*>{widen(w, w.load(in_t(), at(whole_at), false, "x"))};
    }, [&](Builder& w) { return std::vector<Value*>{masked(w, pos, limit)}; })[0];
  };
  // The tile at pos read whole (the row holds it: no checks), its elements from `limit` on the
  // identity: a select with a mask that is the same for every tile, where the checked load of
  // `masked` tests every row and column (rows of 256 f32 at offset 16 into a line: the head cost
  // a third of the time).
  auto selected = [&](Builder& k, Value* pos, Value* limit) {
    Value* t = widen(k, k.load(in_t(), at(pos), false, "x"));
    return k.per_element(t, {limit}, [&](Builder& e, Value* r, Value* c, Value* v, const std::vector<Value*>& xs) {
      return e.select(e.cmp(CmpPred::lt, row_form ? c : r, xs[0]), v, id);
    });
  };
  if (start) {  // the elements before `start`: one tile at 0, its elements from `start` on the identity
    acc = x.if_(x.cmp(CmpPred::lt, zero, start, "head"), {acc_t()}, [&](Builder& k) {
      if (idem || checked) return std::vector<Value*>{edge(k, zero, start, zero)};
      return k.if_(k.cmp(CmpPred::le, step, len, "whole"), {acc_t()}, [&](Builder& w) {
        return std::vector<Value*>{selected(w, zero, start)};
      }, [&](Builder& w) { return std::vector<Value*>{masked(w, zero, start)}; });
    }, [&](Builder&) { return std::vector<Value*>{acc}; })[0];
  }
  auto steps = [&](Builder& y, Value* lo, Value* hi, Value* init) {
    return y.for_(lo, hi, step, {init}, [&](Builder& k, Value* pos, const std::vector<Value*>& it) {
      Value* x = k.load(in_t(), at(pos), checked, "x");
      if (row_form && prefetch > 0) x->def->attrs["prefetch"] = int64_t(prefetch);
      Value* t = widen(k, x);
      return std::vector<Value*>{k.mat_bin(comb, it[0], t, "acc")};
    }, row_form ? "c" : "r")[0];
  };
  if (comb == BinOp::add && is_float(s.acc) && !row_form) {
    // A float sum down the rows (the column form: a lane per column, each summing every row, so
    // n = rows; the row form's lanes take every CW-th element of a row, and a long row is split
    // into pieces before it: left as it was, whose code ran 4% longer with the split in it,
    // sums of 8192^2 f32 along axis 1 on one Zen 5 core):
    // each lane's partial sum of kFlush tiles goes into a second accumulator, whose
    // partial sum of kFlush of those goes into a third (three-level summation) where the walk
    // is longer, so a lane's error grows like (2 kFlush + n / kFlush^2) * eps, not n * eps (n:
    // the lane's elements; constant data, whose rounding errors do not cancel, is the worst).
    constexpr int64_t kFlush = 256;
    Value* span1 = x.mul(step, x.index(kFlush), "span1");
    Value* span2 = x.mul(span1, x.index(kFlush), "span2");
    // The sum over [lo, hi) in parts of `span` (each summed by `inner`) when it is longer.
    auto split = [&](Builder& y, Value* lo, Value* hi, Value* init, Value* span, const auto& inner) {
      return y.if_(y.cmp(CmpPred::gt, y.sub(hi, lo), span, "long_walk"), {acc_t()}, [&](Builder& z) {
        return z.for_(lo, hi, span, {init}, [&](Builder& w, Value* p0, const std::vector<Value*>& it) {
          Value* part = inner(w, p0, w.min(w.add(p0, span), hi, "span_end"), w.splat(acc_t(), id, "part"));
          return std::vector<Value*>{w.mat_bin(comb, it[0], part, "acc")};
        }, "span");
      }, [&](Builder& z) { return std::vector<Value*>{inner(z, lo, hi, init)}; })[0];
    };
    acc = split(x, first, main, acc, span2, [&](Builder& y, Value* lo, Value* hi, Value* init) {
      return split(y, lo, hi, init, span1, steps);
    });
  } else if (comb == BinOp::add && is_float(s.acc) && row_form && sum_block > 0 && sum_levels > 0) {
    // A float sum along a row (plan sum_block / sum_levels): a lane takes every CW-th element of
    // the row, so one accumulator over a long row (a 1-D array's pieces, few long rows) sums
    // cols / CW elements in a chain (constant data, whose rounding errors do not cancel: 3.7e-5
    // over 1e6 elements where NumPy's pairwise sum gives 6e-8). Instead each lane's partial of
    // sum_block tiles is added into an accumulator of the next level, and so on sum_levels
    // levels up, so a lane's error grows like (sum_levels * sum_block + n / sum_block^levels) *
    // eps (n: the lane's elements). A walk of at most 8 * sum_block tiles runs the one loop as
    // before (rows of 4096 f32 in 4 blocks of 16 tiles ran 6-7% slower, one Zen 5 thread, CPU
    // time; a lane's chain there is at most 8 * sum_block elements).
    std::vector<Value*> spans{x.mul(step, x.index(sum_block), "span")};
    for (int k = 1; k < sum_levels; ++k) spans.push_back(x.mul(spans.back(), x.index(sum_block), "span"));
    // Level k over [lo, hi): its parts of spans[k - 1], each summed by level k - 1 from the
    // identity; level 0 the tiles.
    std::function<Value*(Builder&, Value*, Value*, Value*, int)> level = [&](Builder& y, Value* lo, Value* hi,
                                                                              Value* init, int k) -> Value* {
      if (k == 0) return steps(y, lo, hi, init);
      Value* span = spans[k - 1];
      return y.for_(lo, hi, span, {init}, [&](Builder& w, Value* p0, const std::vector<Value*>& it) {
        Value* part = level(w, p0, w.min(w.add(p0, span), hi, "span_end"), w.splat(acc_t(), id, "part"), k - 1);
        return std::vector<Value*>{w.mat_bin(comb, it[0], part, "acc")};
      }, "span")[0];
    };
    Value* long_walk = x.cmp(CmpPred::gt, x.sub(main, first), x.mul(spans[0], x.index(8)), "long_walk");
    acc = x.if_(long_walk, {acc_t()}, [&](Builder& z) {
      return std::vector<Value*>{level(z, first, main, acc, sum_levels)};
    }, [&](Builder& z) { return std::vector<Value*>{steps(z, first, main, acc)}; })[0];
  } else {
    acc = steps(x, first, main, acc);
  }
  return x.if_(x.cmp(CmpPred::lt, main, len, "tail"), {acc_t()}, [&](Builder& k) {
    if (!idem && !checked && past_end) {  // read whole, its elements past the row's end the identity
      return std::vector<Value*>{k.mat_bin(comb, acc, k.if_(past_end, {acc_t()}, [&](Builder& w) {
        return std::vector<Value*>{selected(w, main, w.sub(len, main))};
      }, [&](Builder& w) { return std::vector<Value*>{masked(w, main, w.sub(len, main))}; })[0], "acc")};
    }
    Value* t = idem ? edge(k, main, k.sub(len, main), k.sub(len, step)) : masked(k, main, k.sub(len, main));
    return std::vector<Value*>{k.mat_bin(comb, acc, t, "acc")};
  }, [&](Builder&) { return std::vector<Value*>{acc}; })[0];
}

}  // namespace coopjit
