// Standalone unit test of the extent analysis (cpp/ir/extent.cpp): the element offsets each
// pointer parameter's accesses reach, against offsets worked out by hand from the seeds' access
// rule (element (i, j) of a matrix at (row, col) is ptr[(row + i) * stride_row + (col + j) *
// stride_col]; a checked access reaches it only when 0 <= row + i < rows and 0 <= col + j < cols).
// Prints failures, then "N passed, N failed".
#include <functional>
#include <iostream>
#include <string>

#include "core/error.h"
#include "ir/builder.h"
#include "ir/extent.h"

using namespace coopjit;
using namespace coopjit::ir;

namespace {

int g_passed = 0, g_failed = 0;

void check(bool ok, const std::string& what) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    std::cout << "FAILED: " << what << "\n";
  }
}

using Body = std::function<void(Function&, Builder&)>;

// Pointer params X, Y (f32), index params n, m.
std::unique_ptr<Function> make(const Body& body) {
  auto f = std::make_unique<Function>();
  f->name = "t";
  f->add_param(Type::pointer(ScalarType::f32), "X");
  f->add_param(Type::pointer(ScalarType::f32), "Y");
  f->add_param(Type::index(), "n");
  f->add_param(Type::index(), "m");
  Builder b(*f);
  body(*f, b);
  return f;
}

Type acc(int64_t r, int64_t c) { return Type::matrix(ScalarType::f32, r, c, Use::acc, Scope::subgroup); }

Builder::Access at(Function& f, Builder& b, int ptr, Value* row, Value* col, int64_t sr, int64_t sc, int64_t rows = 1 << 20,
                   int64_t cols = 1 << 20) {
  return {f.params[ptr], row, col, b.index(sr), b.index(sc), b.index(rows), b.index(cols)};
}

std::string text(const ParamExtent& e) {
  return cat("[", e.lo, ", ", e.hi, "] touched ", e.touched, " bounded ", e.bounded, " read ", e.read, " written ",
             e.written);
}

void expect(const std::string& name, const ParamExtent& e, int64_t lo, int64_t hi, bool read, bool written) {
  check(e.bounded && e.touched && e.lo == lo && e.hi == hi && e.read == read && e.written == written,
        cat(name, ": got ", text(e), ", want [", lo, ", ", hi, "] read ", read, " written ", written));
}

void refused(const std::string& name, const Body& body, const std::string& needle) {
  auto f = make(body);
  try {
    analyze_extents(*f, {});
    check(false, name + ": accepted");
  } catch (const UserError& e) {
    check(std::string(e.what()).find(needle) != std::string::npos, name + ": message: " + e.what());
  }
}

}  // namespace

int main() {
  {  // an 8 x 24 load at (0, 0), rows of 24: elements 0 .. 191; a store at (2, 3) with row stride 32
    auto f = make([](Function& f, Builder& b) {
      Value* m = b.load(acc(8, 24), at(f, b, 0, b.index(0), b.index(0), 24, 1), false);
      b.store(m, at(f, b, 1, b.index(2), b.index(3), 32, 1), false);
    });
    auto e = analyze_extents(*f, {});
    expect("load 8x24", e[0], 0, 191, true, false);
    expect("store 8x24 at (2, 3)", e[1], 2 * 32 + 3, 9 * 32 + 3 + 23, false, true);
    check(e[0].row_stride == 24, "the row stride of X is 24");
    check(!extents_depend_on_call(e), "constant extents");
  }
  {  // checked at (-1, -1) with bounds 4 x 16: rows 0..2, cols 0..14 -> 0 .. 2 * 16 + 14
    auto f = make([](Function& f, Builder& b) {
      b.load(acc(4, 16), at(f, b, 0, b.index(-1), b.index(-1), 16, 1, 4, 16), true);
    });
    expect("checked at (-1, -1)", analyze_extents(*f, {})[0], 0, 46, true, false);
  }
  {  // checked entirely outside its bounds: reaches nothing
    auto f = make([](Function& f, Builder& b) {
      b.load(acc(4, 16), at(f, b, 0, b.index(-8), b.index(0), 16, 1, 4, 16), true);
    });
    auto e = analyze_extents(*f, {});
    check(!e[0].touched && e[0].bounded && e[0].read, "checked outside the bounds: " + text(e[0]));
  }
  {  // for i in range(0, n, 4): load 4 x 16 at row i; with n = 10 the last i is 8: rows 0 .. 11
    auto f = make([](Function& f, Builder& b) {
      b.for_(b.index(0), f.params[2], b.index(4), {}, [&](Builder& in, Value* i, const std::vector<Value*>&) {
        in.load(acc(4, 16), at(f, in, 0, i, in.index(0), 16, 1), false);
        return std::vector<Value*>{};
      });
    });
    auto e0 = analyze_extents(*f, {});
    check(!e0[0].bounded && extents_depend_on_call(e0), "depends on n at compile time: " + text(e0[0]));
    std::vector<int64_t> ints{0, 0, 10, 0};
    ExtentEnv env;
    env.ints = &ints;
    expect("loop to n = 10", analyze_extents(*f, env)[0], 0, 12 * 16 - 1, true, false);
    ints[2] = 0;
    auto e = analyze_extents(*f, env);
    check(!e[0].touched && e[0].bounded, "no iteration: nothing touched: " + text(e[0]));
  }
  {  // a position computed with mul / add / rem / min / max from n
    auto f = make([](Function& f, Builder& b) {
      Value* r = b.bin(BinOp::rem, f.params[2], b.index(5));                  // [0, 4] for n >= 0
      Value* c = b.bin(BinOp::min, b.bin(BinOp::mul, f.params[3], b.index(2)), b.index(6));
      b.store(b.splat(acc(2, 2), b.constant(0, ScalarType::f32)), at(f, b, 1, r, c, 10, 1), false);
    });
    std::vector<int64_t> ints{0, 0, 7, 1};  // r = 2, c = 2: rows 2..3, cols 2..3
    ExtentEnv env;
    env.ints = &ints;
    expect("arithmetic positions", analyze_extents(*f, env)[1], 22, 33, false, true);
  }
  {  // work-item ids: group in [0, groups), lane in [0, subgroup size)
    auto f = make([](Function& f, Builder& b) {
      Value* g = b.bin(BinOp::mul, b.work_id(WorkId::group, 0), b.index(16));
      b.load(acc(16, 16), at(f, b, 0, g, b.index(0), 16, 1), false);
    });
    ExtentEnv env;
    env.groups = 3;
    env.subgroup_size = env.work_group_size = 16;
    expect("three work-groups", analyze_extents(*f, env)[0], 0, 48 * 16 - 1, true, false);
  }
  {  // vectors: offset + k * stride
    auto f = make([](Function& f, Builder& b) {
      b.vector_load(Type::vector(ScalarType::f32, 8), f.params[0], b.index(5), b.index(3));
    });
    expect("vector of 8 at 5, stride 3", analyze_extents(*f, {})[0], 5, 26, true, false);
  }
  // ---- what cannot be bounded is refused
  refused("position from a matrix element", [](Function& f, Builder& b) {
    Value* m = b.load(Type::matrix(ScalarType::i32, 1, 16, Use::acc, Scope::subgroup),
                      {f.params[0], b.index(0), b.index(0), b.index(16), b.index(1), b.index(1), b.index(16)}, false);
    Value* r = b.convert(b.get(m, b.index(0)), ScalarType::index);
    b.load(acc(4, 16), at(f, b, 1, r, b.index(0), 16, 1), false);
  }, "depends on data");
  refused("a loop-carried position", [](Function& f, Builder& b) {
    b.for_(b.index(0), b.index(4), b.index(1), {b.index(0)}, [&](Builder& in, Value*, const std::vector<Value*>& it) {
      in.load(acc(1, 16), at(f, in, 0, it[0], in.index(0), 16, 1), false);
      return std::vector<Value*>{in.bin(BinOp::add, it[0], in.index(1))};
    });
  }, "depends on data");
  refused("a loop with step 0", [](Function& f, Builder& b) {
    b.for_(b.index(0), f.params[2], b.index(0), {}, [](Builder&, Value*, const std::vector<Value*>&) {
      return std::vector<Value*>{};
    });
  }, "never end");
  {  // ... unless the access is checked with bounds that do not depend on data
    auto f = make([](Function& f, Builder& b) {
      Value* m = b.load(Type::matrix(ScalarType::i32, 1, 16, Use::acc, Scope::subgroup),
                        {f.params[0], b.index(0), b.index(0), b.index(16), b.index(1), b.index(1), b.index(16)}, false);
      Value* r = b.convert(b.get(m, b.index(0)), ScalarType::index);
      b.load(acc(4, 16), at(f, b, 1, r, b.index(0), 16, 1, 8, 16), true);
    });
    expect("checked at a data-dependent row", analyze_extents(*f, {})[1], 0, 127, true, false);
  }
  // A position from data, kept inside [lo, hi) by a select on lo <= x && x < hi (a decode
  // function's guard): the range [lo, hi - 1] and the other choice, whatever x is.
  auto guarded = [](Value* lo, Value* hi, int64_t other, CmpPred first) {
    return make([=](Function& f, Builder& b) {
      Value* m = b.load(Type::matrix(ScalarType::i32, 1, 16, Use::acc, Scope::subgroup),
                        {f.params[0], b.index(0), b.index(0), b.index(16), b.index(1), b.index(1), b.index(16)}, false);
      Value* x = b.convert(b.get(m, b.index(0)), ScalarType::index);
      Value* ge = b.cmp(CmpPred::ge, x, lo ? lo : b.index(3));
      Value* lt = b.cmp(CmpPred::lt, x, hi ? hi : b.index(40));
      Value* in = first == CmpPred::ge ? b.bin(BinOp::and_, ge, lt) : b.bin(BinOp::and_, lt, ge);
      b.load_scalar(f.params[1], b.select(in, x, b.index(other)));
    });
  };
  expect("a guarded data position", analyze_extents(*guarded(nullptr, nullptr, 0, CmpPred::ge), {})[1], 0, 39, true, false);
  expect("a guarded data position, the tests swapped", analyze_extents(*guarded(nullptr, nullptr, 50, CmpPred::lt), {})[1], 3, 50,
         true, false);
  refused("a data position guarded on one side", [](Function& f, Builder& b) {
    Value* m = b.load(Type::matrix(ScalarType::i32, 1, 16, Use::acc, Scope::subgroup),
                      {f.params[0], b.index(0), b.index(0), b.index(16), b.index(1), b.index(1), b.index(16)}, false);
    Value* x = b.convert(b.get(m, b.index(0)), ScalarType::index);
    b.load_scalar(f.params[1], b.select(b.cmp(CmpPred::lt, x, b.index(40)), x, b.index(0)));
  }, "depends on data");
  refused("a data position guarded by data", [](Function& f, Builder& b) {
    Value* m = b.load(Type::matrix(ScalarType::i32, 1, 16, Use::acc, Scope::subgroup),
                      {f.params[0], b.index(0), b.index(0), b.index(16), b.index(1), b.index(1), b.index(16)}, false);
    Value* x = b.convert(b.get(m, b.index(0)), ScalarType::index);
    Value* y = b.convert(b.get(m, b.index(1)), ScalarType::index);
    Value* in = b.bin(BinOp::and_, b.cmp(CmpPred::ge, x, b.index(0)), b.cmp(CmpPred::lt, x, y));
    b.load_scalar(f.params[1], b.select(in, x, b.index(0)));
  }, "depends on data");

  // Groupshared arrays: an access must stay inside the array (elements [0, n)); the parameters'
  // extents do not count it.
  auto shared_store = [](int64_t n, int64_t row, bool by_param) {
    return [=](Function& f, Builder& b) {
      Value* g = b.groupshared(ScalarType::f16, n);
      Value* m = b.load(acc(4, 16), at(f, b, 0, b.index(0), b.index(0), 16, 1), false);
      b.store(m, {g, by_param ? f.params[2] : b.index(row), b.index(0), b.index(16), b.index(1), b.index(4), b.index(16)},
              false);
    };
  };
  {  // rows 2 .. 5 of 16: elements 32 .. 95 of 96
    auto f = make(shared_store(96, 2, false));
    auto e = analyze_extents(*f, {});
    expect("the load feeding a groupshared store", e[0], 0, 63, true, false);
    check(!e[1].touched && !extents_depend_on_call(e), "the groupshared store touches no parameter: " + text(e[1]));
  }
  refused("a groupshared store past the end", shared_store(95, 2, false), "reaches elements 32 to 95 of the groupshared array groupshared<f16, 95>");
  refused("a groupshared store before the start", shared_store(96, -1, false), "reaches elements -16 to 47");
  {  // at row n: known at the call; n = 2 fits 96 elements, n = 3 does not
    auto f = make(shared_store(96, 0, true));
    bool dynamic = false;
    analyze_extents(*f, {}, -1, &dynamic);
    check(dynamic, "a groupshared position from a parameter is checked at the call");
    std::vector<int64_t> ints{0, 0, 2, 0};
    ExtentEnv env;
    env.ints = &ints;
    analyze_extents(*f, env);
    ints[2] = 3;
    try {
      analyze_extents(*f, env);
      check(false, "a groupshared store at row 3 of 6 rows: accepted");
    } catch (const UserError& e) {
      check(std::string(e.what()).find("reaches elements 48 to 111") != std::string::npos, cat("row 3: ", e.what()));
    }
  }

  std::cout << g_passed << " passed, " << g_failed << " failed\n";
  return g_failed == 0 ? 0 : 1;
}
