// The reduction recipe (reduce_recipe.h).
#include "build/reduce_recipe.h"

#include "build/reduce_ops.h"
#include "ir/builder.h"

namespace coopjit {

using namespace ir;

std::unique_ptr<Function> build_reduce(const ReduceSpec& s, const ReducePlan& p, const std::string& name) {
  auto f = std::make_unique<Function>();
  f->name = name;
  f->attrs["subgroup_size"] = int64_t(p.simd_width);
  Value* X = f->add_param(Type::pointer(s.in), "X");
  Value* Y = f->add_param(Type::pointer(s.out), "Y");
  auto idx = [&](const char* n) { return f->add_param(Type::index(), n); };
  Value *rows = idx("rows"), *cols = idx("cols"), *sx_r = idx("sx_r"), *sx_c_param = idx("sx_c");
  Value *sy_r = idx("sy_r"), *sy_c_param = idx("sy_c"), *worker = idx("worker"), *workers = idx("workers");
  // The row form: the column where the full tiles start (a 64-byte boundary of every row; 0
  // when the rows do not share their offset into a cache line). Unused by the other forms.
  Value* head = idx("head");

  Builder b(*f);
  Value* one = b.index(1, "c1");
  Value* zero = b.index(0, "c0");
  Value* sx_c = p.unit ? one : p.stride ? b.index(p.stride, "sx_c_fixed") : sx_c_param;
  Value* sy_c = p.unit_y ? one : sy_c_param;
  const int R = p.tile_rows, CW = p.tile_cols;
  Value* TR = b.index(R, "TR");
  Value* TC = b.index(CW, "TC");
  const BinOp comb = reduce_combine(s.op);
  Value* id = reduce_identity(b, s.op, s.acc);
  auto ceil_div = [&](Builder& x, Value* n, Value* d) { return x.div(x.add(n, x.sub(d, one)), d); };
  auto in_t = [&](int r, int c) { return Type::matrix(s.in, r, c, Use::acc, Scope::subgroup); };
  auto acc_t = [&](int r, int c) { return Type::matrix(s.acc, r, c, Use::acc, Scope::subgroup); };
  auto out_t = [&](int r, int c) { return Type::matrix(s.out, r, c, Use::acc, Scope::subgroup); };
  auto widen = [&](Builder& x, Value* m, int r, int c) { return s.in == s.acc ? m : x.convert_matrix(m, acc_t(r, c)); };
  auto narrow = [&](Builder& x, Value* m, int r, int c) { return s.out == s.acc ? m : x.convert_matrix(m, out_t(r, c)); };
  // A worker's contiguous share of n tiles.
  auto share = [&](Builder& x, Value* n) {
    Value* per = ceil_div(x, n, workers);
    Value* lo = x.min(x.mul(worker, per), n, "lo");
    return std::make_pair(lo, x.min(x.add(lo, per), n, "hi"));
  };
  const ReduceTilePass pass{s, X, rows, cols, sx_r, sx_c, TR, TC, zero, id, R, CW, comb, p.prefetch, p.sum_block,
                            p.sum_levels};

  if (s.form == "row") {  // Y[i] = op over row i: tiles of R rows walk along the columns
    auto [lo, hi] = share(b, ceil_div(b, rows, TR));
    b.for_(lo, hi, one, {}, [&](Builder& x, Value* rt, const std::vector<Value*>&) {
      Value* r0 = x.mul(rt, TR, "r0");
      Value* acc = x.if_(x.cmp(CmpPred::le, x.add(r0, TR), rows, "full"), {acc_t(R, CW)},
                         [&](Builder& y) {
                           // A row after the tile's last: each row's tail may be read whole (plan
                           // read_past: the rows' gaps are under a page and rows at least a tile long).
                           Value* past = p.read_past ? y.cmp(CmpPred::lt, y.add(r0, TR), rows, "past_end") : nullptr;
                           return std::vector<Value*>{pass.accumulate(y, true, r0, false, head, past)};
                         },
                         [&](Builder& y) { return std::vector<Value*>{pass.accumulate(y, true, r0, true, head)}; })[0];
      Value* red = x.reduce(acc, ReduceMode::row, acc_t(R, 1), comb, "sums");
      // Any order: the tile's lanes already hold sums of strided columns, so the element order
      // is gone; a tree across the lanes, not a chain of CW dependent scalar adds a row (which
      // made rows of up to 512 f32 latency-bound: 128 f32 at 8 GB/s on one Zen 5 core).
      red->def->attrs["order"] = std::string("any");
      x.store(narrow(x, red, R, 1), {Y, r0, zero, sy_c, one, rows, one}, true);
      return std::vector<Value*>{};
    }, "rt");
  } else if (s.form == "column") {  // Y[j] = op over column j: tiles of CW columns walk down the rows
    auto [lo, hi] = share(b, ceil_div(b, cols, TC));
    b.for_(lo, hi, one, {}, [&](Builder& x, Value* ct, const std::vector<Value*>&) {
      Value* c0 = x.mul(ct, TC, "c0");
      Value* full = x.cmp(CmpPred::le, x.add(c0, TC), cols, "full");
      Value* acc = x.if_(full, {acc_t(R, CW)},
                         [&](Builder& y) {
                           if (!p.segments) return std::vector<Value*>{pass.accumulate(y, false, c0, false)};
                           // Plan segments: X is the n x K view of K contiguous rows of n = rows
                           // elements (strides 1 and n, both fixed): the tile's CW rows are one
                           // n x CW load (whole vectors, each row picked from them), reduced down
                           // its columns.
                           const int n = static_cast<int>(p.stride);
                           Value* t = y.load(in_t(n, CW), {X, zero, c0, one, sx_c, rows, cols}, false, "x");
                           if (s.in != s.acc) t = y.convert_matrix(t, acc_t(n, CW));
                           Value* r = y.reduce(t, ReduceMode::column, acc_t(1, CW), comb, "rows");
                           r->def->attrs["order"] = std::string("any");  // each of X's rows in any order
                           return std::vector<Value*>{r};
                         },
                         [&](Builder& y) { return std::vector<Value*>{pass.accumulate(y, false, c0, true)}; })[0];
      Value* red = x.reduce(acc, ReduceMode::column, acc_t(1, CW), comb, "sums");
      // A full tile's results are stored whole, without the bounds test of each lane (a checked
      // store built the lanes' masks from 64-bit column indices, about 15 instructions a vector:
      // the cost of an output element where few rows are reduced); with plan stream_y
      // non-temporally (Y starts on a 64-byte boundary and a tile's results are whole lines: the
      // store is aligned). The last, partial tile: masked stores.
      Value* out = narrow(x, red, 1, CW);
      x.if_(full, {}, [&](Builder& y) {
        Op* st = y.store(out, {Y, zero, c0, one, sy_c, one, cols}, false);
        if (p.stream_y) st->attrs["nontemporal"] = int64_t(1);
        return std::vector<Value*>{};
      }, [&](Builder& y) {
        y.store(out, {Y, zero, c0, one, sy_c, one, cols}, true);
        return std::vector<Value*>{};
      });
      return std::vector<Value*>{};
    }, "ct");
  } else if (s.form == "column_rows") {
    // Y: the workers x cols partials (row stride sy_r). Worker w walks its share of X's rows, a
    // block of CB columns at a time: row w's block of partials stays in L1 while each row's run
    // of CB elements streams past (runs of whole pages, which the prefetchers follow; tiles of
    // a column walk read 2 KiB per row).
    const auto rows_share = share(b, rows);  // (not a structured binding: the lambdas below capture them)
    Value *lo = rows_share.first, *hi = rows_share.second;
    Value* CB = b.index(p.block_cols, "CB");
    Value* c_main = b.sub(cols, b.rem(cols, TC), "c_main");
    auto part_at = [&](Value* c0) { return Builder::Access{Y, worker, c0, sy_r, one, workers, cols}; };
    b.for_(zero, cols, CB, {}, [&](Builder& x, Value* cb, const std::vector<Value*>&) {
      Value* cend = x.min(x.add(cb, CB), cols, "c_end");
      Value* mend = x.min(cend, c_main, "m_end");
      x.for_(cb, cend, TC, {}, [&](Builder& y, Value* c0, const std::vector<Value*>&) {
        y.store(y.splat(acc_t(1, CW), id), part_at(c0), true);
        return std::vector<Value*>{};
      }, "c");
      // R rows at a time (R streams in flight, one update of the partials), then the rest one
      // by one.
      auto rows_pass = [&](Builder& y, Value* r, int nr) {
        auto step = [&](Builder& z, Value* c0, bool checked) {
          // The rows' tiles combined pairwise (element-wise ops stay vector ops for every op).
          std::vector<Value*> ts;
          for (int i = 0; i < nr; ++i)
            ts.push_back(widen(z, z.load(in_t(1, CW), {X, z.add(r, z.index(i)), c0, sx_r, sx_c, rows, cols}, checked, "x"),
                               1, CW));
          while (ts.size() > 1) {
            std::vector<Value*> next;
            for (size_t i = 0; i + 1 < ts.size(); i += 2) next.push_back(z.mat_bin(comb, ts[i], ts[i + 1], "rows"));
            if (ts.size() % 2) next.push_back(ts.back());
            ts = next;
          }
          Value* t = ts[0];
          Value* part = z.load(acc_t(1, CW), part_at(c0), checked, "part");
          z.store(z.mat_bin(comb, part, t, "part"), part_at(c0), checked);
        };
        y.for_(cb, mend, TC, {}, [&](Builder& z, Value* c0, const std::vector<Value*>&) {
          step(z, c0, false);
          return std::vector<Value*>{};
        }, "c");
        y.if_(y.cmp(CmpPred::lt, mend, cend, "tail"), {}, [&](Builder& z) {
          step(z, mend, true);
          return std::vector<Value*>{};
        }, [&](Builder&) { return std::vector<Value*>{}; });
        return std::vector<Value*>{};
      };
      Value* r_main = x.sub(hi, x.rem(x.sub(hi, lo), TR), "r_main");
      x.for_(lo, r_main, TR, {}, [&](Builder& y, Value* r, const std::vector<Value*>&) { return rows_pass(y, r, R); }, "r");
      x.for_(r_main, hi, one, {}, [&](Builder& y, Value* r, const std::vector<Value*>&) { return rows_pass(y, r, 1); }, "r");
      return std::vector<Value*>{};
    }, "cb");
  } else {  // 2x2: each R x CW tile of X gives an R/2 x CW/2 tile of Y
    Value* tiles_c = ceil_div(b, cols, TC);
    auto [lo, hi] = share(b, b.mul(ceil_div(b, rows, TR), tiles_c));
    Value* yr = b.div(rows, b.index(2));
    Value* yc = b.div(cols, b.index(2));
    b.for_(lo, hi, one, {}, [&](Builder& x, Value* t, const std::vector<Value*>&) {
      Value* r0 = x.mul(x.div(t, tiles_c), TR, "r0");
      Value* c0 = x.mul(x.rem(t, tiles_c), TC, "c0");
      Value* m = widen(x, x.load(in_t(R, CW), {X, r0, c0, sx_r, sx_c, rows, cols}, true, "x"), R, CW);
      Value* red = x.reduce(m, ReduceMode::quad, acc_t(R / 2, CW / 2), comb, "quads");
      Value* half = x.index(2);
      x.store(narrow(x, red, R / 2, CW / 2), {Y, x.div(r0, half), x.div(c0, half), sy_r, sy_c, yr, yc}, true);
      return std::vector<Value*>{};
    }, "t");
  }
  return f;
}

}  // namespace coopjit
