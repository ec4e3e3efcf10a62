// The operation probes (op_probes.h): each builds the smallest kernel that needs its operation,
// with its result written to memory so that nothing is dead.
#include "build/op_probes.h"

#include <functional>
#include <map>

#include "build/tensor_recipe.h"
#include "core/error.h"
#include "ir/builder.h"

namespace coopjit {

using namespace ir;

namespace {

constexpr int64_t kN = 16;  // the probes' matrices are 16 x 16 unless the operation needs otherwise

struct Probe {
  std::unique_ptr<Function> f = std::make_unique<Function>();
  Builder b{*f};
  explicit Probe(int S) {
    f->name = "probe";
    f->attrs["subgroup_size"] = int64_t(S);
  }
  Value* ptr(ScalarType t) { return f->add_param(Type::pointer(t), cat("p", f->params.size())); }
  Builder::Access at(Value* p, int64_t rows = kN, int64_t cols = kN) {
    return {p, b.index(0), b.index(0), b.index(cols), b.index(1), b.index(rows), b.index(cols)};
  }
  Value* load(ScalarType t, Use use = Use::acc, Scope s = Scope::subgroup, int64_t rows = kN, int64_t cols = kN) {
    return b.load(Type::matrix(t, rows, cols, use, s), at(ptr(t), rows, cols), false);
  }
  void store(Value* m) { b.store(m, at(ptr(m->type.scalar), m->type.rows, m->type.cols), false); }
  Value* vec(ScalarType t, int64_t n) { return b.vector_load(Type::vector(t, n), ptr(t), b.index(0), b.index(1)); }
  void store_vec(Value* v) { b.vector_store(v, ptr(v->type.scalar), b.index(0), b.index(1)); }
  void accumulate(Value* m) { b.accumulate(m, at(ptr(m->type.scalar), m->type.rows, m->type.cols)); }
};

Type acc(ScalarType t, int64_t r = kN, int64_t c = kN, Scope s = Scope::subgroup) { return Type::matrix(t, r, c, Use::acc, s); }

std::unique_ptr<Function> tensor_probe(int S, bool store, ClampMode clamp, bool view, bool decode) {
  TensorAccessSpec s;
  s.store = store;
  s.rows = s.cols = kN;
  s.rank = 2;
  s.clamp = clamp;
  if (view) {
    s.view = TensorAccessSpec::View::dims;
    s.view_rank = 2;
    s.perm = {1, 0, 2, 3, 4};
  }
  if (decode) s.decode = TensorAccessSpec::Decode::blocked;
  s.validate();
  return build_tensor_access(s, S, "probe");
}

// A decode function as a user writes one (coopjit.tensor's decode=fn): a u8 buffer read around
// the element's index, converted and scaled by the block's coordinates into an f32 matrix.
std::unique_ptr<Function> tensor_user_decode_probe(int S) {
  TensorAccessSpec s;
  s.rows = s.cols = kN;
  s.rank = 2;
  s.clamp = ClampMode::constant;
  s.buffer_dtype = ScalarType::u8;
  s.buffer_dtype_set = true;
  s.decode = TensorAccessSpec::Decode::user;
  s.user_decode_key = "probe";
  s.user_decode = [](Builder& d, Value* buf, Value* extent, Value* index, const std::vector<Value*>& bc,
                     const std::vector<Value*>& cib) {
    Value* at = d.add(index, d.div(cib[1], d.index(2)));
    Value* inside = d.bin(BinOp::and_, d.cmp(CmpPred::ge, at, d.index(0)), d.cmp(CmpPred::lt, at, extent));
    Value* byte = d.load_scalar(buf, d.select(inside, at, d.index(0)));
    Value* v = d.convert(d.select(inside, byte, d.constant(0, ScalarType::u8)), ScalarType::f32);
    return d.mul(v, d.convert(d.add(bc[0], d.index(1)), ScalarType::f32));
  };
  s.validate();
  return build_tensor_access(s, S, "probe");
}

std::unique_ptr<Function> reduce_probe(int S, ReduceMode mode) {
  Probe p(S);
  Value* x = p.load(ScalarType::f32);
  const int64_t r = mode == ReduceMode::quad ? kN / 2 : kN;
  p.store(p.b.reduce(x, mode, acc(ScalarType::f32, r, r), BinOp::add));
  return std::move(p.f);
}

std::unique_ptr<Function> mul_add_probe(int S, ScalarType in, ScalarType out, Scope scope = Scope::subgroup,
                                        ScalarType in_b = ScalarType::i1, int64_t K = kN) {
  Probe p(S);
  if (scope == Scope::workgroup) p.f->attrs["subgroups_per_group"] = int64_t(2);
  const int64_t M = scope == Scope::workgroup ? 2 * kN : K > kN ? 1 : kN;
  Value* a = p.load(in, Use::a, scope, M, K);
  Value* b = p.load(in_b == ScalarType::i1 ? in : in_b, Use::b, scope, K, kN);
  Value* c = p.load(out, Use::acc, scope, M, kN);
  p.store(p.b.mul_add(a, b, c));
  return std::move(p.f);
}

std::unique_ptr<Function> accumulate_probe(int S, ScalarType t) {
  Probe p(S);
  p.accumulate(p.load(t));
  return std::move(p.f);
}

std::unique_ptr<Function> outer_probe(int S, Scope scope) {
  Probe p(S);
  if (scope == Scope::workgroup) p.f->attrs["subgroups_per_group"] = int64_t(2);
  Value* u = p.vec(ScalarType::f32, kN);
  Value* v = p.vec(ScalarType::f32, 8);
  p.accumulate(p.b.outer_product(u, v, acc(ScalarType::f32, kN, 8, scope)));
  return std::move(p.f);
}

std::unique_ptr<Function> vector_probe(int S, ScalarType vt, bool bias) {
  Probe p(S);
  Value* v = p.vec(vt, kN);
  Value* w = p.load(ScalarType::f16, Use::b, Scope::thread, kN, 8);
  Value* bv = bias ? p.vec(ScalarType::f32, 8) : nullptr;
  p.store_vec(p.b.vector_multiply(v, w, bv, Type::vector(ScalarType::f32, 8)));
  return std::move(p.f);
}

// HLSL 0035's groupshared Load / Store / Accumulate at both uniform scopes, each converting: an
// f32 subgroup matrix and an f32 workgroup matrix stored to and accumulated into f16 groupshared
// arrays, read back as f32 after a barrier.
std::unique_ptr<Function> groupshared_probe(int S) {
  Probe p(S);
  p.f->attrs["subgroups_per_group"] = int64_t(2);
  for (Scope s : {Scope::subgroup, Scope::workgroup}) {
    Value* m = p.load(ScalarType::f32, Use::acc, s);
    Value* g = p.b.groupshared(ScalarType::f16, kN * kN);
    Builder::Access at{g, p.b.index(0), p.b.index(0), p.b.index(kN), p.b.index(1), p.b.index(kN), p.b.index(kN)};
    p.b.store(m, at, false);
    p.b.barrier();
    p.b.accumulate(m, at);
    p.b.barrier();
    p.store(p.b.load(acc(ScalarType::f32, kN, kN, s), at, false));
  }
  return std::move(p.f);
}

using Maker = std::function<std::unique_ptr<Function>(int)>;

const std::vector<std::pair<std::string, Maker>>& probes() {
  static const std::vector<std::pair<std::string, Maker>> list = {
      // ---- SPV_NV_cooperative_matrix2 -------------------------------------------------------
      {"load_tensor", [](int S) { return tensor_probe(S, false, ClampMode::undefined, false, false); }},
      {"store_tensor", [](int S) { return tensor_probe(S, true, ClampMode::undefined, false, false); }},
      {"tensor_clamp", [](int S) { return tensor_probe(S, false, ClampMode::mirror_repeat, false, false); }},
      {"tensor_view", [](int S) { return tensor_probe(S, false, ClampMode::constant, true, false); }},
      {"tensor_decode", [](int S) { return tensor_probe(S, false, ClampMode::undefined, false, true); }},
      {"tensor_decode_user", [](int S) { return tensor_user_decode_probe(S); }},
      {"reduce_row", [](int S) { return reduce_probe(S, ReduceMode::row); }},
      {"reduce_column", [](int S) { return reduce_probe(S, ReduceMode::column); }},
      {"reduce_both", [](int S) { return reduce_probe(S, ReduceMode::both); }},
      {"reduce_2x2", [](int S) { return reduce_probe(S, ReduceMode::quad); }},
      {"per_element", [](int S) {
         Probe p(S);
         Value* x = p.load(ScalarType::f32);
         p.store(p.b.per_element(x, {}, [](Builder& b, Value* row, Value*, Value* v, const std::vector<Value*>&) {
           return b.add(v, b.convert(row, ScalarType::f32));
         }));
         return std::move(p.f);
       }},
      {"convert_use", [](int S) {
         Probe p(S);
         p.store(p.b.convert_matrix(p.load(ScalarType::f32), Type::matrix(ScalarType::f32, kN, kN, Use::a, Scope::subgroup)));
         return std::move(p.f);
       }},
      {"convert_type", [](int S) {
         Probe p(S);
         p.store(p.b.convert_matrix(p.load(ScalarType::f32), acc(ScalarType::f16), true));
         return std::move(p.f);
       }},
      {"transpose", [](int S) {
         Probe p(S);
         p.store(p.b.transpose(p.load(ScalarType::f32)));
         return std::move(p.f);
       }},
      {"workgroup_scope", [](int S) { return mul_add_probe(S, ScalarType::f32, ScalarType::f32, Scope::workgroup); }},
      // ---- HLSL 0035 ------------------------------------------------------------------------------
      {"load_store", [](int S) {
         Probe p(S);
         p.store(p.load(ScalarType::f32));
         return std::move(p.f);
       }},
      {"splat", [](int S) {
         Probe p(S);
         p.store(p.b.splat(acc(ScalarType::f32), p.b.constant(2.0, ScalarType::f32)));
         return std::move(p.f);
       }},
      {"element_access", [](int S) {  // Length, GetCoordinate, Get, Set
         Probe p(S);
         Value* m = p.load(ScalarType::f32);
         Value* out = p.ptr(ScalarType::f32);
         auto r = p.b.for_(p.b.index(0), p.b.length(m), p.b.index(1), {m},
                           [](Builder& b, Value* i, const std::vector<Value*>& it) -> std::vector<Value*> {
                             auto [row, col] = b.get_coordinate(it[0], i);
                             Value* v = b.add(b.get(it[0], i), b.convert(b.add(row, col), ScalarType::f32));
                             return {b.set(it[0], i, v)};
                           });
         p.b.store(r[0], p.at(out), false);
         return std::move(p.f);
       }},
      {"mul_add", [](int S) { return mul_add_probe(S, ScalarType::f32, ScalarType::f32); }},
      {"mul_add_f16_f32", [](int S) { return mul_add_probe(S, ScalarType::f16, ScalarType::f32); }},
      {"mul_add_i8_i32", [](int S) { return mul_add_probe(S, ScalarType::i8, ScalarType::i32); }},
      {"mul_add_fp8_f32", [](int S) { return mul_add_probe(S, ScalarType::f8_e4m3, ScalarType::f32); }},
      {"mul_add_f32_f64", [](int S) { return mul_add_probe(S, ScalarType::f32, ScalarType::f64); }},
      {"mul_add_mixed_float", [](int S) {
         return mul_add_probe(S, ScalarType::f16, ScalarType::f32, Scope::subgroup, ScalarType::f8_e4m3);
       }},
      {"mul_add_i8_k512", [](int S) {
         return mul_add_probe(S, ScalarType::i8, ScalarType::i32, Scope::subgroup, ScalarType::i8, 512);
       }},
      {"sum_accumulate", [](int S) {
         Probe p(S);
         Value* a = p.load(ScalarType::f32, Use::a);
         Value* b = p.load(ScalarType::f32, Use::b);
         p.store(p.b.sum_accumulate(a, b, p.load(ScalarType::f32)));
         return std::move(p.f);
       }},
      {"accumulate_32", [](int S) { return accumulate_probe(S, ScalarType::f32); }},
      {"accumulate_16", [](int S) { return accumulate_probe(S, ScalarType::f16); }},
      {"accumulate_8", [](int S) { return accumulate_probe(S, ScalarType::i8); }},
      {"thread_scope", [](int S) {  // a thread-scope load (each work-item its own copy), accumulated
         Probe p(S);
         p.accumulate(p.load(ScalarType::f32, Use::acc, Scope::thread, 4, 4));
         return std::move(p.f);
       }},
      {"vector_multiply", [](int S) { return vector_probe(S, ScalarType::f16, false); }},
      {"vector_multiply_add", [](int S) { return vector_probe(S, ScalarType::f16, true); }},
      {"interpreted_vector_fp8", [](int S) { return vector_probe(S, ScalarType::f8_e4m3, true); }},
      {"outer_product", [](int S) { return outer_probe(S, Scope::subgroup); }},
      {"outer_product_thread", [](int S) { return outer_probe(S, Scope::thread); }},
      {"outer_product_workgroup", [](int S) { return outer_probe(S, Scope::workgroup); }},
      {"accumulate_workgroup", [](int S) {  // a thread-group-scope matrix accumulated into a buffer
         Probe p(S);
         p.f->attrs["subgroups_per_group"] = int64_t(2);
         p.accumulate(p.load(ScalarType::f32, Use::acc, Scope::workgroup));
         return std::move(p.f);
       }},
      {"groupshared", [](int S) { return groupshared_probe(S); }},
      {"accumulator_layout", [](int S) {  // linalg::AccumulatorLayout(): a constant (1, MatrixUse::B), as coopjit.ir emits it
         Probe p(S);
         p.store(p.b.splat(acc(ScalarType::i32), p.b.convert(p.b.index(1), ScalarType::i32)));
         return std::move(p.f);
       }},
      {"norm_types", [](int S) {  // SNorm / UNorm components: a load into snorm_f32, a cast to unorm_f16
         Probe p(S);
         Type sn = acc(ScalarType::f32), un = acc(ScalarType::f16);
         sn.norm = 1;
         un.norm = 2;
         Value* m = p.b.load(sn, p.at(p.ptr(ScalarType::f32)), false);
         p.store(p.b.convert_matrix(m, un, true));
         return std::move(p.f);
       }},
      {"optimal_layouts", [](int S) {  // MulOptimal (a thread-scope B, column by column) into vector x matrix;
                                       // OuterProductOptimal (row by row) for Accumulate (coopjit.layout.optimal_strides)
         Probe p(S);
         Value* v = p.vec(ScalarType::f16, kN);
         Value* w = p.b.load(Type::matrix(ScalarType::f16, kN, 8, Use::b, Scope::thread),
                             {p.ptr(ScalarType::f16), p.b.index(0), p.b.index(0), p.b.index(1), p.b.index(kN),
                              p.b.index(kN), p.b.index(8)}, false);
         Value* y = p.b.vector_multiply(v, w, nullptr, Type::vector(ScalarType::f32, 8));
         Value* m = p.b.outer_product(y, p.vec(ScalarType::f32, 4), acc(ScalarType::f32, 8, 4, Scope::thread));
         p.b.accumulate(m, {p.ptr(ScalarType::f32), p.b.index(0), p.b.index(0), p.b.index(4), p.b.index(1),
                            p.b.index(8), p.b.index(4)});
         return std::move(p.f);
       }},
  };
  return list;
}

}  // namespace

const std::vector<std::string>& op_probe_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, make] : probes()) n.push_back(name);
    return n;
  }();
  return names;
}

std::unique_ptr<Function> build_op_probe(const std::string& name, int subgroup_size) {
  for (const auto& [n, make] : probes())
    if (n == name) return make(subgroup_size);
  std::string known;
  for (const auto& n : op_probe_names()) known += (known.empty() ? "" : ", ") + n;
  throw UserError(cat("unknown operation probe '", name, "' (known: ", known, ")"));
}

}  // namespace coopjit
