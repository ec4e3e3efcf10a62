// The GEMM recipe (gemm_recipe.h).
#include "build/gemm_recipe.h"

#include "ir/builder.h"

namespace coopjit {

using namespace ir;

std::unique_ptr<Function> build_gemm(const GemmPlan& p, const std::string& name) {
  auto f = std::make_unique<Function>();
  f->name = name;
  f->attrs["subgroup_size"] = int64_t(p.simd_width);
  const ScalarType T = p.dtype;
  Value* A = f->add_param(Type::pointer(T), "A");
  Value* B = f->add_param(Type::pointer(T), "B");
  Value* C = f->add_param(Type::pointer(T), "C");
  Value* M = f->add_param(Type::index(), "M");
  Value* N = f->add_param(Type::index(), "N");
  Value* K = f->add_param(Type::index(), "K");
  Value* sa_r = f->add_param(Type::index(), "sa_r");
  Value* sa_c = f->add_param(Type::index(), "sa_c");
  Value* sb_r = f->add_param(Type::index(), "sb_r");
  Value* sb_c_param = f->add_param(Type::index(), "sb_c");
  Value* sc_r = f->add_param(Type::index(), "sc_r");
  Value* sc_c_param = f->add_param(Type::index(), "sc_c");
  Value* tile_begin = f->add_param(Type::index(), "tile_begin");
  Value* tile_end = f->add_param(Type::index(), "tile_end");
  Value* alpha = f->add_param(Type::of(T), "alpha");
  Value* beta = f->add_param(Type::of(T), "beta");

  Builder b(*f);
  const Type acc_t = Type::matrix(T, p.mr, p.nr, Use::acc, Scope::subgroup);
  Value* one = b.index(1, "c1");
  Value* zero_i = b.index(0, "c0");
  // Unit strides are compile-time constants: the lowering turns them into vector accesses.
  Value* sb_c = p.unit_b ? one : sb_c_param;
  Value* sc_c = p.unit_c ? one : sc_c_param;
  Value* MR = b.index(p.mr, "MR");
  Value* NR = b.index(p.nr, "NR");
  Value* KB = b.index(p.kb, "KB");
  Value* tiles_m = b.div(b.add(M, b.sub(MR, one)), MR, "tiles_m");
  Value* tiles_n = b.div(b.add(N, b.sub(NR, one)), NR, "tiles_n");
  Value* zero = b.constant(0.0, T, "zero");
  Value* k_main = b.sub(K, b.rem(K, KB), "k_main");

  // One register tile at (m0, n0); `checked` loads and stores stay inside M x N. The K loop
  // steps by KB (a power of two: HLSL 0035's K rule); a last partial step reads zeros past K.
  auto tile = [&](Builder& t, Value* m0, Value* n0, bool checked) -> std::vector<Value*> {
    const Type a_t = Type::matrix(T, p.mr, p.kb, Use::a, Scope::subgroup);
    const Type b_t = Type::matrix(T, p.kb, p.nr, Use::b, Scope::subgroup);
    auto step = [&](Builder& kb, Value* k, Value* acc_in, bool chk) {
      Value* a = kb.load(a_t, {A, m0, k, sa_r, sa_c, M, K}, chk, "a");
      Value* bm = kb.load(b_t, {B, k, n0, sb_r, sb_c, K, N}, chk, "b");
      return kb.mul_add(a, bm, acc_in, "acc");
    };
    Value* acc = t.splat(acc_t, zero, "acc");
    acc = t.for_(zero_i, k_main, KB, {acc}, [&](Builder& kb, Value* k, const std::vector<Value*>& it) {
      return std::vector<Value*>{step(kb, k, it[0], checked)};
    }, "k")[0];
    acc = t.if_(t.cmp(CmpPred::lt, k_main, K, "k_tail"), {acc_t},
                [&](Builder& x) { return std::vector<Value*>{step(x, k_main, acc, true)}; },
                [&](Builder&) { return std::vector<Value*>{acc}; })[0];
    Value* result = t.scale(acc, alpha, "result");
    Builder::Access c_at{C, m0, n0, sc_r, sc_c, M, N};
    if (p.accumulate) {
      Value* c_old = t.load(acc_t, c_at, checked, "c");
      result = t.mat_bin(BinOp::add, result, t.scale(c_old, beta), "result");
    }
    t.store(result, c_at, checked);
    return {};
  };

  // The flattened tile space; "m_inner" walks down a column of tiles so that consecutive tiles
  // reuse one panel of B.
  b.for_(tile_begin, tile_end, one, {}, [&](Builder& t, Value* tid, const std::vector<Value*>&) {
    Value *mt, *nt;
    if (p.order == "m_inner") {
      nt = t.div(tid, tiles_m, "nt");
      mt = t.rem(tid, tiles_m, "mt");
    } else {
      mt = t.div(tid, tiles_n, "mt");
      nt = t.rem(tid, tiles_n, "nt");
    }
    Value* m0 = t.mul(mt, MR, "m0");
    Value* n0 = t.mul(nt, NR, "n0");
    Value* full = t.bin(BinOp::and_, t.cmp(CmpPred::le, t.add(m0, MR), M),
                        t.cmp(CmpPred::le, t.add(n0, NR), N), "full");
    t.if_(full, {}, [&](Builder& x) { return tile(x, m0, n0, false); },
          [&](Builder& x) { return tile(x, m0, n0, true); });
    return std::vector<Value*>{};
  }, "tile");
  return f;
}

}  // namespace coopjit
