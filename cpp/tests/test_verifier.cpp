// Standalone unit test of the kernel IR verifier (cpp/ir/verifier.cpp): each rule of the matrix
// type, HLSL 0035's scope table and dimension rules, and the tensor addressing operations gets a
// program that breaks it; the error must name the operation, the types and the rule, and quote
// the operation with the IR printer. Prints failures, then "N passed, N failed".
#include <functional>
#include <iostream>
#include <string>

#include "core/error.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/verifier.h"

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

// Builds a function with pointer params A (f32) and H (f16) and an index param n, then the body.
std::unique_ptr<Function> make(const Body& body) {
  auto f = std::make_unique<Function>();
  f->name = "t";
  f->attrs["subgroup_size"] = int64_t(16);
  f->add_param(Type::pointer(ScalarType::f32), "A");
  f->add_param(Type::pointer(ScalarType::f16), "H");
  f->add_param(Type::index(), "n");
  Builder b(*f);
  body(*f, b);
  return f;
}

Type mat(int64_t r, int64_t c, Use u, Scope s = Scope::subgroup, ScalarType t = ScalarType::f32) {
  return Type::matrix(t, r, c, u, s);
}

Builder::Access at(Function& f, Builder& b, int ptr = 0) {
  Value* z = b.index(0);
  Value* one = b.index(1);
  return {f.params[ptr], z, z, f.params[2], one, f.params[2], f.params[2]};
}

// The program must be rejected with a message containing every needle.
void rejects(const std::string& name, const Body& body, std::initializer_list<std::string> needles) {
  auto f = make(body);
  try {
    verify(*f);
    check(false, name + ": accepted");
  } catch (const VerifyError& e) {
    std::string msg = e.what();
    bool all = true;
    for (const auto& n : needles) all = all && msg.find(n) != std::string::npos;
    check(all, name + ": message lacks an expected part: " + msg);
    check(msg.find("\n  in: ") != std::string::npos, name + ": the op is not quoted: " + msg);
  }
}

void accepts(const std::string& name, const Body& body) {
  auto f = make(body);
  try {
    verify(*f);
    check(true, name);
  } catch (const std::exception& e) {
    check(false, name + ": rejected: " + e.what());
  }
}

Value* zero_f32(Builder& b) { return b.constant(0.0, ScalarType::f32); }

}  // namespace

int main() {
  // ---- a correct GEMM step is accepted, and printed with the coopmatrix operations
  accepts("subgroup mul_add 8x4 * 4x32", [](Function& f, Builder& b) {
    Value* a = b.load(mat(8, 4, Use::a), at(f, b), true);
    Value* bb = b.load(mat(4, 32, Use::b), at(f, b), true);
    Value* c = b.splat(mat(8, 32, Use::acc), zero_f32(b));
    b.store(b.mul_add(a, bb, c), at(f, b), true);
  });
  {
    auto f = make([](Function& f, Builder& b) {
      Value* c = b.splat(mat(8, 32, Use::acc), zero_f32(b), "c");
      b.store(c, at(f, b), false);
    });
    std::string text = print(*f);
    check(text.find("%c = coopmatrix.splat") != std::string::npos &&
              text.find("coopmatrix<f32, 8, 32, acc, subgroup>") != std::string::npos,
          "printer shows the splat and the matrix type: " + text);
  }
  accepts("workgroup mul_add with K = 3", [](Function& f, Builder& b) {
    Value* a = b.load(mat(8, 3, Use::a, Scope::workgroup), at(f, b), true);
    Value* bb = b.load(mat(3, 8, Use::b, Scope::workgroup), at(f, b), true);
    b.mul_add(a, bb, b.splat(mat(8, 8, Use::acc, Scope::workgroup), zero_f32(b)));
  });
  accepts("thread scope load", [](Function& f, Builder& b) { b.load(mat(4, 4, Use::b, Scope::thread), at(f, b), true); });

  // ---- mul_add: A MxK, B KxN, acc MxN, uses, one scope, K rule
  rejects("mul_add inner dimensions", [](Function& f, Builder& b) {
    Value* a = b.load(mat(8, 4, Use::a), at(f, b), true);
    Value* bb = b.load(mat(8, 32, Use::b), at(f, b), true);
    b.mul_add(a, bb, b.splat(mat(8, 32, Use::acc), zero_f32(b)));
  }, {"coopmatrix.mul_add", "A MxK, B KxN and acc MxN", "A 8x4, B 8x32"});
  rejects("mul_add accumulator shape", [](Function& f, Builder& b) {
    Value* a = b.load(mat(8, 4, Use::a), at(f, b), true);
    Value* bb = b.load(mat(4, 32, Use::b), at(f, b), true);
    b.mul_add(a, bb, b.splat(mat(16, 32, Use::acc), zero_f32(b)));
  }, {"acc 16x32"});
  rejects("mul_add uses", [](Function& f, Builder& b) {
    Value* a = b.load(mat(8, 4, Use::b), at(f, b), true);
    Value* bb = b.load(mat(4, 32, Use::b), at(f, b), true);
    b.mul_add(a, bb, b.splat(mat(8, 32, Use::acc), zero_f32(b)));
  }, {"uses (a, b, acc)", "got (b, b, acc)"});
  rejects("mul_add scopes differ", [](Function& f, Builder& b) {
    Value* a = b.load(mat(8, 4, Use::a, Scope::workgroup), at(f, b), true);
    Value* bb = b.load(mat(4, 32, Use::b), at(f, b), true);
    b.mul_add(a, bb, b.splat(mat(8, 32, Use::acc), zero_f32(b)));
  }, {"one scope", "workgroup, subgroup, subgroup"});
  rejects("mul_add K not a power of two", [](Function& f, Builder& b) {
    Value* a = b.load(mat(8, 6, Use::a), at(f, b), true);
    Value* bb = b.load(mat(6, 32, Use::b), at(f, b), true);
    b.mul_add(a, bb, b.splat(mat(8, 32, Use::acc), zero_f32(b)));
  }, {"K = 6", "power of two in [4, 128]", "subgroup"});
  rejects("mul_add K above 128", [](Function& f, Builder& b) {
    Value* a = b.load(mat(8, 256, Use::a), at(f, b), true);
    Value* bb = b.load(mat(256, 32, Use::b), at(f, b), true);
    b.mul_add(a, bb, b.splat(mat(8, 32, Use::acc), zero_f32(b)));
  }, {"K = 256"});
  rejects("workgroup K above 1024", [](Function& f, Builder& b) {
    Value* a = b.load(mat(8, 2048, Use::a, Scope::workgroup), at(f, b), true);
    Value* bb = b.load(mat(2048, 8, Use::b, Scope::workgroup), at(f, b), true);
    b.mul_add(a, bb, b.splat(mat(8, 8, Use::acc, Scope::workgroup), zero_f32(b)));
  }, {"K = 2048", "[1, 1024]", "workgroup"});
  // HLSL 0035: 8-bit matrices are "4 times the valid size"; Multiply<OutTy> with mixed float inputs.
  auto splat = [](Builder& b, int64_t r, int64_t c, Use u, ScalarType t) {
    return b.splat(mat(r, c, u, Scope::subgroup, t), is_float(t) ? b.constant(0, t) : b.constant_int(0, t));
  };
  accepts("8-bit mul_add with K = 512", [&](Function&, Builder& b) {
    b.mul_add(splat(b, 4, 512, Use::a, ScalarType::i8), splat(b, 512, 16, Use::b, ScalarType::u8),
              splat(b, 4, 16, Use::acc, ScalarType::i32));
  });
  rejects("8-bit mul_add with K = 1024", [&](Function&, Builder& b) {
    b.mul_add(splat(b, 4, 1024, Use::a, ScalarType::i8), splat(b, 1024, 16, Use::b, ScalarType::i8),
              splat(b, 4, 16, Use::acc, ScalarType::i32));
  }, {"K = 1024", "power of two in [4, 512]"});
  accepts("f32 x f32 into f64, f16 x f8_e4m3 into f32", [&](Function&, Builder& b) {
    b.mul_add(splat(b, 4, 8, Use::a, ScalarType::f32), splat(b, 8, 16, Use::b, ScalarType::f32),
              b.splat(mat(4, 16, Use::acc, Scope::subgroup, ScalarType::f64), b.constant(0, ScalarType::f64)));
    b.mul_add(splat(b, 4, 8, Use::a, ScalarType::f16), splat(b, 8, 16, Use::b, ScalarType::f8_e4m3), splat(b, 4, 16, Use::acc, ScalarType::f32));
  });
  rejects("mul_add component types", [](Function& f, Builder& b) {  // f32 x f16 into f16: narrowing
    Value* a = b.load(mat(8, 4, Use::a), at(f, b), true);
    Value* bb = b.load(mat(4, 16, Use::b, Scope::subgroup, ScalarType::f16), at(f, b, 1), true);
    b.mul_add(a, bb, b.splat(mat(8, 16, Use::acc, Scope::subgroup, ScalarType::f16), b.constant(0, ScalarType::f16)));
  }, {"component types", "coopmatrix<f16, 4, 16, b, subgroup>"});

  // ---- HLSL 0035's scope table: thread-scope matrices are read-only
  rejects("thread scope mul_add", [](Function& f, Builder& b) {
    Value* a = b.load(mat(8, 4, Use::a, Scope::thread), at(f, b), true);
    Value* bb = b.load(mat(4, 8, Use::b, Scope::thread), at(f, b), true);
    b.mul_add(a, bb, b.load(mat(8, 8, Use::acc, Scope::thread), at(f, b), true));
  }, {"coopmatrix.mul_add needs subgroup or workgroup scope", "coopmatrix<f32, 8, 4, a, thread>"});
  rejects("thread scope store", [](Function& f, Builder& b) {
    b.store(b.load(mat(4, 4, Use::acc, Scope::thread), at(f, b), true), at(f, b), true);
  }, {"coopmatrix.store needs subgroup or workgroup scope", "thread>"});
  rejects("thread scope splat", [](Function& f, Builder& b) {
    b.splat(mat(4, 4, Use::acc, Scope::thread), zero_f32(b));
  }, {"coopmatrix.splat needs subgroup or workgroup scope"});
  rejects("thread scope scale", [](Function& f, Builder& b) {
    b.scale(b.load(mat(4, 4, Use::acc, Scope::thread), at(f, b), true), zero_f32(b));
  }, {"coopmatrix.scale needs subgroup or workgroup scope"});

  // ---- types of loads, stores and element-wise operations
  rejects("load through a pointer of another type", [](Function& f, Builder& b) {
    b.load(mat(4, 4, Use::acc), at(f, b, 1), true);
  }, {"coopmatrix.load", "pointer element type f16", "component type f32"});
  rejects("splat of another type", [](Function& f, Builder& b) {
    b.splat(mat(4, 4, Use::acc), b.index(0));
  }, {"splat takes a scalar of the component type", "index"});
  rejects("add of different shapes", [](Function& f, Builder& b) {
    Value* x = b.splat(mat(4, 4, Use::acc), zero_f32(b));
    Value* y = b.splat(mat(4, 8, Use::acc), zero_f32(b));
    b.mat_bin(BinOp::add, x, y);
  }, {"coopmatrix.add", "two matrices of one type"});
  rejects("zero-sized matrix", [](Function& f, Builder& b) { b.splat(mat(0, 4, Use::acc), zero_f32(b)); },
          {"at least 1", "coopmatrix<f32, 0, 4, acc, subgroup>"});
  rejects("for yields the wrong type", [](Function& f, Builder& b) {
    Value* c = b.splat(mat(4, 16, Use::acc), zero_f32(b));
    b.for_(b.index(0), f.params[2], b.index(1), {c}, [&](Builder& in, Value*, const std::vector<Value*>&) {
      return std::vector<Value*>{in.splat(mat(4, 32, Use::acc), in.constant(0.0, ScalarType::f32))};
    });
  }, {"for", "yielded value 0 has type coopmatrix<f32, 4, 32"});

  // ---- tensor addressing
  auto layout = [](Function& f, Builder& b, int rank, ClampMode m, int64_t block) {
    Builder::LayoutFields lf;
    for (int d = 0; d < rank; ++d) {
      lf.block.push_back(b.index(block));
      lf.dim.push_back(f.params[2]);
      lf.stride.push_back(b.index(1));
      lf.offset.push_back(b.index(0));
      lf.span.push_back(f.params[2]);
    }
    lf.clamp_value = b.constant(0.0, ScalarType::f64);
    return b.tensor_layout(m, lf);
  };
  accepts("load_tensor with a view of rank 2", [&](Function& f, Builder& b) {
    Value* l = layout(f, b, 2, ClampMode::repeat, 2);
    Value* v = b.tensor_view(2, {1, 0}, {}, {}, {b.index(0), b.index(4), b.index(0), b.index(4)});
    b.load_tensor(f.params[0], b.splat(mat(4, 4, Use::acc), zero_f32(b)), l, v, f.params[2]);
  });
  rejects("layout rank 6", [&](Function& f, Builder& b) { layout(f, b, 6, ClampMode::constant, 1); },
          {"tensor.layout", "1 to 5 dimensions", "rank 6"});
  rejects("view permutation", [&](Function& f, Builder& b) {
    b.tensor_view(3, {0, 0, 2}, {}, {}, {b.index(0), b.index(4), b.index(0), b.index(4)});
  }, {"tensor.view", "not a permutation", "tensorview<3, nodims, perm(0, 0, 2)>"});
  rejects("view without dims of another rank", [&](Function& f, Builder& b) {
    Value* l = layout(f, b, 2, ClampMode::undefined, 1);
    Value* v = b.tensor_view(3, {0, 1, 2}, {}, {}, {b.index(0), b.index(4), b.index(0), b.index(4)});
    b.load_tensor(f.params[0], b.splat(mat(4, 4, Use::acc), zero_f32(b)), l, v, f.params[2]);
  }, {"coopmatrix.load_tensor", "rank 3 must equal the layout's rank 2"});
  rejects("store_tensor with blocks", [&](Function& f, Builder& b) {
    Value* l = layout(f, b, 2, ClampMode::constant, 2);
    b.store_tensor(b.splat(mat(4, 4, Use::acc), zero_f32(b)), f.params[0], l, nullptr, f.params[2]);
  }, {"coopmatrix.store_tensor", "block size larger than 1"});
  rejects("store_tensor of a thread-scope matrix", [&](Function& f, Builder& b) {
    Value* l = layout(f, b, 1, ClampMode::constant, 1);
    b.store_tensor(b.load(mat(4, 4, Use::acc, Scope::thread), at(f, b), true), f.params[0], l, nullptr, f.params[2]);
  }, {"coopmatrix.store_tensor needs subgroup or workgroup scope"});
  rejects("load_tensor through an f16 pointer into f32", [&](Function& f, Builder& b) {
    Value* l = layout(f, b, 1, ClampMode::constant, 1);
    b.load_tensor(f.params[1], b.splat(mat(4, 4, Use::acc), zero_f32(b)), l, nullptr, f.params[2]);
  }, {"coopmatrix.load_tensor", "component type f32", "ptr<f16>"});
  rejects("decode yielding the wrong type", [&](Function& f, Builder& b) {
    Value* l = layout(f, b, 2, ClampMode::undefined, 2);
    b.load_tensor(f.params[0], b.splat(mat(4, 4, Use::acc), zero_f32(b)), l, nullptr, f.params[2],
                  [](Builder& d, Value* index, const std::vector<Value*>&, const std::vector<Value*>&) { return index; });
  }, {"decode function yields one f32 element"});
  rejects("decode with a matrix operation", [&](Function& f, Builder& b) {
    Value* l = layout(f, b, 1, ClampMode::undefined, 1);
    b.load_tensor(f.params[0], b.splat(mat(4, 4, Use::acc), zero_f32(b)), l, nullptr, f.params[2],
                  [](Builder& d, Value*, const std::vector<Value*>&, const std::vector<Value*>&) {
                    d.splat(Type::matrix(ScalarType::f32, 2, 2, Use::acc, Scope::subgroup), d.constant(1, ScalarType::f32));
                    return d.constant(1, ScalarType::f32);
                  });
  }, {"scalar operations only, not coopmatrix.splat"});

  // ---- size limits: operations computing on matrices in registers (issue 12, item 3)
  rejects("a 1024 x 1024 x 128 mul_add", [](Function& f, Builder& b) {
    Value* a = b.load(mat(1024, 128, Use::a), at(f, b), true);
    Value* bb = b.load(mat(128, 1024, Use::b), at(f, b), true);
    b.mul_add(a, bb, b.load(mat(1024, 1024, Use::acc), at(f, b), true));
  }, {"coopmatrix.mul_add", "1024 x 128 = 131072 elements", "size limit", "16384"});
  rejects("a 64 x 128 x 128 mul_add", [](Function& f, Builder& b) {
    Value* a = b.load(mat(64, 128, Use::a), at(f, b), true);
    Value* bb = b.load(mat(128, 128, Use::b), at(f, b), true);
    b.mul_add(a, bb, b.splat(mat(64, 128, Use::acc), zero_f32(b)));
  }, {"64 x 128 x 128", "1048576 multiply-adds", "262144"});
  accepts("a 32 x 64 x 128 mul_add (at the limit)", [](Function& f, Builder& b) {
    Value* a = b.load(mat(32, 128, Use::a), at(f, b), true);
    Value* bb = b.load(mat(128, 64, Use::b), at(f, b), true);
    b.mul_add(a, bb, b.splat(mat(32, 64, Use::acc), zero_f32(b)));
  });
  // 8-bit operands: twice the elements and multiply-adds (the same bytes; Hopper's int8 wgmma
  // blocks of 64 x 256 a warpgroup: a warp's 16 x 256 x 128)
  accepts("an 8-bit 16 x 256 x 128 mul_add (B 128 x 256)", [&](Function&, Builder& b) {
    b.mul_add(splat(b, 16, 128, Use::a, ScalarType::i8), splat(b, 128, 256, Use::b, ScalarType::u8),
              splat(b, 16, 256, Use::acc, ScalarType::i32));
  });
  rejects("an 8-bit 32 x 256 x 128 mul_add", [&](Function&, Builder& b) {
    b.mul_add(splat(b, 32, 128, Use::a, ScalarType::i8), splat(b, 128, 256, Use::b, ScalarType::i8),
              splat(b, 32, 256, Use::acc, ScalarType::i32));
  }, {"32 x 256 x 128", "1048576 multiply-adds", "524288 (2^19, 8-bit operands)"});
  rejects("an f16 16 x 256 x 128 mul_add (16-bit: 2^14 elements)", [&](Function&, Builder& b) {
    b.mul_add(splat(b, 16, 128, Use::a, ScalarType::f16), splat(b, 128, 256, Use::b, ScalarType::f16),
              splat(b, 16, 256, Use::acc, ScalarType::f32));
  }, {"128 x 256 = 32768 elements", "16384"});
  rejects("an 8-bit 256 x 256 splat", [](Function&, Builder& b) {
    b.splat(mat(256, 256, Use::acc, Scope::subgroup, ScalarType::i8), b.constant_int(0, ScalarType::i8));
  }, {"256 x 256 = 65536 elements", "32768"});
  rejects("a per-element function over 128 x 128", [](Function& f, Builder& b) {
    b.per_element(b.load(mat(128, 128, Use::acc), at(f, b), true), {},
                  [](Builder&, Value*, Value*, Value* v, const std::vector<Value*>&) { return v; });
  }, {"coopmatrix.per_element", "16384 elements", "4096"});
  rejects("a splat of 2^40 x 2^40", [](Function&, Builder& b) {
    b.splat(mat(int64_t(1) << 40, int64_t(1) << 40, Use::acc), zero_f32(b));
  }, {"1099511627776 x 1099511627776 elements", "size limit"});
  accepts("a load and store of 1024 x 1024 (no limit)", [](Function& f, Builder& b) {
    b.store(b.load(mat(1024, 1024, Use::acc), at(f, b), true), at(f, b), true);
  });

  std::cout << g_passed << " passed, " << g_failed << " failed\n";
  return g_failed == 0 ? 0 : 1;
}
