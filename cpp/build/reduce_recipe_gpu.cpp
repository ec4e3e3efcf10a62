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
  if (s.form == "row") return ceil_div(s.rows, p.tile_rows);
  if (s.form == "column") return ceil_div(s.cols, p.tile_cols);
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
  const ReduceTilePass pass{s, X, rows, cols, sx_r, sx_c, TR, TC, zero, id, R, CW, comb};

  if (s.form == "row") {
    Value* rt = worker;
    b.if_(b.cmp(CmpPred::lt, rt, cdiv(b, rows, TR)), {}, [&](Builder& x) {
      Value* r0 = x.mul(rt, TR, "r0");
      Value* acc = x.if_(x.cmp(CmpPred::le, x.add(r0, TR), rows, "full"), {acc_t(R, CW)},
                         [&](Builder& y) { return std::vector<Value*>{pass.accumulate(y, true, r0, false)}; },
                         [&](Builder& y) { return std::vector<Value*>{pass.accumulate(y, true, r0, true)}; })[0];
      Value* red = x.reduce(acc, ReduceMode::row, acc_t(R, 1), comb, "sums");
      x.store(narrow(x, red, R, 1), {Y, r0, zero, sy_c, one, rows, one}, true);
      return std::vector<Value*>{};
    }, {});
  } else if (s.form == "column") {
    Value* ct = worker;
    b.if_(b.cmp(CmpPred::lt, ct, cdiv(b, cols, TC)), {}, [&](Builder& x) {
      Value* c0 = x.mul(ct, TC, "c0");
      Value* acc = x.if_(x.cmp(CmpPred::le, x.add(c0, TC), cols, "full"), {acc_t(R, CW)},
                         [&](Builder& y) { return std::vector<Value*>{pass.accumulate(y, false, c0, false)}; },
                         [&](Builder& y) { return std::vector<Value*>{pass.accumulate(y, false, c0, true)}; })[0];
      Value* red = x.reduce(acc, ReduceMode::column, acc_t(1, CW), comb, "sums");
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
