// The fused GEMM epilogue as kernel IR (gemm_epilogue.h).
#include "build/gemm_epilogue.h"

#include "core/error.h"

namespace coopjit {

using namespace ir;

namespace {

// One activation on a scalar v of type E (inside a per-element region).
Value* activation(Builder& z, const std::string& act, Value* v, ScalarType E) {
  auto k = [&](double c) { return z.constant(c, E); };
  if (act == "relu") return z.bin(BinOp::max, v, k(0.0));
  if (act == "tanh") return z.unary(UnOp::tanh, v);
  // sigmoid v = 1 / (1 + e^-v); silu v = v sigmoid v (e^-v = inf gives 0 and -0). The divisor is in
  // [1, inf]: attribute recip_approx lets a GPU target take its approximate reciprocal (NVPTX:
  // rcp.approx.ftz, one MUFU.RCP; an IEEE division there is a call to a slow path per element).
  if (act == "sigmoid" || act == "silu") {
    Value* q = z.bin(BinOp::div, act == "sigmoid" ? k(1.0) : v, z.bin(BinOp::add, k(1.0), z.unary(UnOp::exp, z.unary(UnOp::neg, v))));
    q->def->attrs["recip_approx"] = int64_t(1);
    return q;
  }
  Value* half_v = z.bin(BinOp::mul, v, k(0.5));
  if (act == "gelu") {  // v (1 + erf(v / sqrt 2)) / 2
    // erf is added to 1: attribute erf_absolute lets a GPU target drop erf's relative accuracy near 0
    // (NVPTX: 1 - erfc with v's sign, without the series below 0.5: 13 instructions an element less).
    Value* e = z.unary(UnOp::erf, z.bin(BinOp::mul, v, k(0.7071067811865476)));
    e->def->attrs["erf_absolute"] = int64_t(1);
    return z.bin(BinOp::mul, half_v, z.bin(BinOp::add, k(1.0), e));
  }
  if (act == "gelu_tanh") {  // v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3))) / 2
    Value* v3 = z.bin(BinOp::mul, z.bin(BinOp::mul, v, v), v);
    Value* u = z.bin(BinOp::mul, k(0.7978845608028654), z.bin(BinOp::add, v, z.bin(BinOp::mul, k(0.044715), v3)));
    return z.bin(BinOp::mul, half_v, z.bin(BinOp::add, k(1.0), z.unary(UnOp::tanh, u)));
  }
  throw InternalError("unknown epilogue activation " + act);
}

}  // namespace

EpilogueOperands add_epilogue_params(Function& f, const GemmEpilogue& e) {
  const Type p = Type::pointer(e.type);
  EpilogueOperands o;
  o.scale = f.add_param(p, "SCALE");
  o.row_scale = f.add_param(p, "ROW_SCALE");
  o.bias = f.add_param(p, "BIAS");
  o.residual = f.add_param(p, "RESIDUAL");
  return o;
}

Value* apply_epilogue(Builder& x, const GemmEpilogue& e, const EpilogueOperands& ops, Value* y, Value* m0, Value* n0,
                      int rows, int cols, bool checked, const BetaC& beta_c, const Builder::Access* residual_at) {
  const ScalarType E = e.type;
  const Type e_t = Type::matrix(E, rows, cols, Use::acc, Scope::subgroup);
  if (y->type.scalar != E) y = x.convert_matrix(y, e_t);
  Value* zero = x.index(0);
  Value* one = x.index(1);
  Value* R = x.index(rows);
  Value* Cc = x.index(cols);
  // A vector along the kernel's N (a value per column) or its M (a value per row), as a tile.
  auto along_n = [&](Value* v) { return x.load(e_t, {v, zero, n0, zero, one, R, ops.N}, checked, "vec_n"); };
  auto along_m = [&](Value* v) { return x.load(e_t, {v, m0, zero, one, zero, ops.M, Cc}, checked, "vec_m"); };
  // The caller's per-column vectors run along the kernel's N in "row", along its M in "col".
  auto per_col = [&](Value* v) { return ops.col ? along_m(v) : along_n(v); };
  auto per_row = [&](Value* v) { return ops.col ? along_n(v) : along_m(v); };
  if (e.scale) y = x.mat_bin(BinOp::mul, y, per_col(ops.scale), "scaled");
  if (e.row_scale) y = x.mat_bin(BinOp::mul, y, per_row(ops.row_scale), "scaled");
  y = beta_c(x, y, e_t);
  if (e.bias) y = x.mat_bin(BinOp::add, y, e.bias == 1 ? per_col(ops.bias) : per_row(ops.bias), "biased");
  if (!e.activation.empty()) {
    const std::string act = e.activation;
    y = x.per_element(y, {}, [act, E](Builder& z, Value*, Value*, Value* v, const std::vector<Value*>&) {
      return activation(z, act, v, E);
    }, "activated");
  }
  if (e.residual) {
    COOPJIT_INTERNAL_ASSERT(residual_at != nullptr, "the residual's access");
    y = x.mat_bin(BinOp::add, y, x.load(e_t, *residual_at, checked, "residual"), "y");
  }
  if (e.fn) {
    // The user's function sees the caller's (row, column) of the element.
    const bool col = ops.col;
    y = x.per_element(y, {m0, n0}, [&e, col](Builder& z, Value* r, Value* c, Value* v, const std::vector<Value*>& xs) {
      Value* km = z.add(xs[0], r);
      Value* kn = z.add(xs[1], c);
      return e.fn(z, col ? kn : km, col ? km : kn, v);
    }, "user_epilogue");
  }
  return y;
}

}  // namespace coopjit
