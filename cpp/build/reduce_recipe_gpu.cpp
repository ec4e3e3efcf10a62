// The reduction recipe for SPIR-V devices (reduce_recipe_gpu.h).
#include "build/reduce_recipe_gpu.h"

#include "build/reduce_ops.h"
#include "ir/builder.h"

namespace coopjit {

using namespace ir;

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int64_t gpu_reduce_tiles(const ReduceSpec& s, const GpuReducePlan& p) {
  if (s.form == "row") return ceil_div(s.rows, p.tile_rows) * p.parts;
  if (s.form == "column") return ceil_div(s.cols, p.tile_cols) * p.parts;
  return ceil_div(s.rows, p.tile_rows) * ceil_div(s.cols, p.tile_cols);
}

int64_t gpu_reduce_groups(const ReduceSpec& s, const GpuReducePlan& p) {
  return ceil_div(gpu_reduce_tiles(s, p), p.subgroups);
}

std::unique_ptr<Function> build_reduce_gpu(const ReduceSpec& s, const GpuReducePlan& p, const std::string& name) {
  auto f = std::make_unique<Function>();
  f->name = name;
  f->attrs["subgroup_size"] = int64_t(p.subgroup_size);
  f->attrs["subgroups_per_group"] = int64_t(p.subgroups);
  Value* X = f->add_param(Type::pointer(s.in), "X");
  Value* Y = f->add_param(Type::pointer(s.out), "Y");
  auto idx = [&](const char* n) { return f->add_param(Type::index(), n); };
  Value *rows = idx("rows"), *cols = idx("cols"), *sx_r = idx("sx_r"), *sx_c_param = idx("sx_c");
  Value *sy_r = idx("sy_r"), *sy_c = idx("sy_c");
  // Split (plan.parts > 1): W, the partials of each part in the accumulator type (column form:
  // parts x cols, row form: rows x parts, row-major), and the number of parts.
  Value* W = p.parts > 1 ? f->add_param(Type::pointer(s.acc), "W") : nullptr;
  Value* parts = p.parts > 1 ? idx("parts") : nullptr;

  Builder b(*f);
  Value* one = b.index(1, "c1");
  Value* zero = b.index(0, "c0");
  Value* sx_c = p.unit ? one : sx_c_param;
  const int R = p.tile_rows, CW = p.tile_cols;
  Value* TR = b.index(R, "TR");
  Value* TC = b.index(CW, "TC");
  const BinOp comb = reduce_combine(s.op);
  Value* id = reduce_identity(b, s.op, s.acc);
  // One worker per subgroup, one tile per worker (the launch covers the tiles).
  Value* worker = b.add(b.mul(b.work_id(WorkId::group, 0, "group"), b.index(p.subgroups)),
                        b.work_id(WorkId::subgroup, 0, "sg"), "worker");
  auto cdiv = [&](Builder& x, Value* n, Value* d) { return x.div(x.add(n, x.sub(d, one)), d); };
  auto in_t = [&](int r, int c) { return Type::matrix(s.in, r, c, Use::acc, Scope::subgroup); };
  auto acc_t = [&](int r, int c) { return Type::matrix(s.acc, r, c, Use::acc, Scope::subgroup); };
  auto out_t = [&](int r, int c) { return Type::matrix(s.out, r, c, Use::acc, Scope::subgroup); };
  auto widen = [&](Builder& x, Value* m, int r, int c) { return s.in == s.acc ? m : x.convert_matrix(m, acc_t(r, c)); };
  auto narrow = [&](Builder& x, Value* m, int r, int c) { return s.out == s.acc ? m : x.convert_matrix(m, out_t(r, c)); };
  const ReduceTilePass whole{s, X, rows, cols, sx_r, sx_c, TR, TC, zero, id, R, CW, comb};
  // With parts, worker w reduces tile w mod tiles over part w / tiles of the reduced dimension:
  // the same pass on the sub-array that starts there (X offset, the dimension's length cut). The
  // parts are whole tiles (the chunk rounded up to the tile), so only the last one has a tail.
  auto part_pass = [&](Builder& x, Value* q, bool row_form) {
    Value* len = row_form ? cols : rows;
    Value* step = row_form ? TC : TR;
    Value* chunk = x.mul(cdiv(x, cdiv(x, len, parts), step), step, "chunk");
    Value* lo = x.min(x.mul(q, chunk), len, "lo");
    Value* n = x.sub(x.min(x.add(lo, chunk), len), lo, "n");
    Value* Xq = x.ptr_offset(X, x.mul(lo, row_form ? sx_c : sx_r), "Xq");
    return ReduceTilePass{s, Xq, row_form ? rows : n, row_form ? n : cols, sx_r, sx_c, TR, TC, zero, id, R, CW, comb};
  };

  if (s.form == "row") {
    Value* tiles = cdiv(b, rows, TR);
    Value* rt = parts ? b.rem(worker, tiles, "rt") : worker;
    b.if_(b.cmp(CmpPred::lt, worker, parts ? b.mul(tiles, parts) : tiles), {}, [&](Builder& x) {
      Value* r0 = x.mul(rt, TR, "r0");
      Value* q = parts ? x.div(worker, tiles, "part") : nullptr;
      const ReduceTilePass pass = parts ? part_pass(x, q, true) : whole;
      Value* acc = x.if_(x.cmp(CmpPred::le, x.add(r0, TR), rows, "full"), {acc_t(R, CW)},
                         [&](Builder& y) { return std::vector<Value*>{pass.accumulate(y, true, r0, false)}; },
                         [&](Builder& y) { return std::vector<Value*>{pass.accumulate(y, true, r0, true)}; })[0];
      Value* red = x.reduce(acc, ReduceMode::row, acc_t(R, 1), comb, "sums");
      if (parts)  // column q of the rows x parts partials
        x.store(red, {W, r0, q, parts, one, rows, parts}, true);
      else
        x.store(narrow(x, red, R, 1), {Y, r0, zero, sy_c, one, rows, one}, true);
      return std::vector<Value*>{};
    }, {});
  } else if (s.form == "column") {
    Value* tiles = cdiv(b, cols, TC);
    Value* ct = parts ? b.rem(worker, tiles, "ct") : worker;
    b.if_(b.cmp(CmpPred::lt, worker, parts ? b.mul(tiles, parts) : tiles), {}, [&](Builder& x) {
      Value* c0 = x.mul(ct, TC, "c0");
      Value* q = parts ? x.div(worker, tiles, "part") : nullptr;
      const ReduceTilePass pass = parts ? part_pass(x, q, false) : whole;
      Value* acc = x.if_(x.cmp(CmpPred::le, x.add(c0, TC), cols, "full"), {acc_t(R, CW)},
                         [&](Builder& y) { return std::vector<Value*>{pass.accumulate(y, false, c0, false)}; },
                         [&](Builder& y) { return std::vector<Value*>{pass.accumulate(y, false, c0, true)}; })[0];
      Value* red = x.reduce(acc, ReduceMode::column, acc_t(1, CW), comb, "sums");
      if (parts)  // row q of the parts x cols partials
        x.store(red, {W, q, c0, cols, one, parts, cols}, true);
      else
        x.store(narrow(x, red, 1, CW), {Y, zero, c0, one, sy_c, one, cols}, true);
      return std::vector<Value*>{};
    }, {});
  } else {  // 2x2
    Value* tiles_c = cdiv(b, cols, TC);
    Value* t = worker;
    b.if_(b.cmp(CmpPred::lt, t, b.mul(cdiv(b, rows, TR), tiles_c)), {}, [&](Builder& x) {
      Value* r0 = x.mul(x.div(t, tiles_c), TR, "r0");
      Value* c0 = x.mul(x.rem(t, tiles_c), TC, "c0");
      Value* two = x.index(2);
      Value* m = widen(x, x.load(in_t(R, CW), {X, r0, c0, sx_r, sx_c, rows, cols}, true, "x"), R, CW);
      Value* red = x.reduce(m, ReduceMode::quad, acc_t(R / 2, CW / 2), comb, "quads");
      x.store(narrow(x, red, R / 2, CW / 2), {Y, x.div(r0, two), x.div(c0, two), sy_r, sy_c, x.div(rows, two), x.div(cols, two)},
              true);
      return std::vector<Value*>{};
    }, {});
  }
  return f;
}

}  // namespace coopjit
