// The GEMM recipe for SPIR-V devices (gemm_recipe_gpu.h).
#include "build/gemm_recipe_gpu.h"

#include "ir/builder.h"

namespace coopjit {

using namespace ir;

std::unique_ptr<Function> build_gemm_gpu(const GpuGemmPlan& p, const std::string& name) {
  auto fp = std::make_unique<Function>();
  Function& f = *fp;
  f.name = name;
  f.attrs["subgroup_size"] = int64_t(p.subgroup_size);
  f.attrs["subgroups_per_group"] = int64_t(p.sg_m * p.sg_n);
  if (p.dpas) f.attrs["dpas"] = int64_t(p.dpas);
  if (p.block2d) f.attrs["block2d"] = int64_t(p.block2d);
  const ScalarType T = p.dtype;
  auto idx = [&](const char* n) { return f.add_param(Type::index(), n); };
  Value* A = f.add_param(Type::pointer(p.a_type), "A");
  Value* B = f.add_param(Type::pointer(p.b_type), "B");
  Value* C = f.add_param(Type::pointer(p.c_type), "C");
  Value *M = idx("M"), *N = idx("N"), *K = idx("K");
  Value *sa_r_p = idx("sa_r"), *sa_c = idx("sa_c"), *sb_r_p = idx("sb_r"), *sb_c = idx("sb_c");
  Value *sc_r_p = idx("sc_r"), *sc_c = idx("sc_c");
  Value *batch1 = idx("batch1"), *batch2 = idx("batch2");
  Value *sa_b1 = idx("sa_b1"), *sb_b1 = idx("sb_b1"), *sc_b1 = idx("sc_b1");
  Value *sa_b2 = idx("sa_b2"), *sb_b2 = idx("sb_b2"), *sc_b2 = idx("sc_b2");
  Value* alpha = f.add_param(Type::of(T), "alpha");
  Value* beta = f.add_param(Type::of(T), "beta");
  (void)batch1;

  Builder b(f);
  Value* one = b.index(1, "c1");
  Value* zero = b.index(0, "c0");
  // Unit row strides are constants: the SIMT lowering turns them into subgroup block reads/writes.
  Value* sa_r = p.unit_a ? one : sa_r_p;
  Value* sb_r = p.unit_b ? one : sb_r_p;
  Value* sc_r = p.unit_c ? one : sc_r_p;
  Value* MR = b.index(p.mr, "MR");
  Value* NR = b.index(p.nr, "NR");
  Value* KB = b.index(p.kb, "KB");
  Value* fzero = b.constant(0.0, T, "zero");
  auto ceil_div = [&](Builder& x, Value* n, Value* d, const char* h) { return x.div(x.add(n, x.sub(d, one)), d, h); };

  // This work-group's macro tile: consecutive groups walk down M (they share B's panel).
  Value* tiles_m = ceil_div(b, M, b.index(int64_t(p.mr) * p.sg_m), "tiles_m");
  Value* tiles_n = ceil_div(b, N, b.index(int64_t(p.nr) * p.sg_n), "tiles_n");
  Value* g = b.work_id(WorkId::group, 0, "group");
  Value* mt = b.rem(g, tiles_m, "mt");
  Value* rest = b.div(g, tiles_m);
  Value* nt = b.rem(rest, tiles_n, "nt");
  Value* bi = b.div(rest, tiles_n, "bi");
  Value* b2 = b.rem(bi, batch2, "b2");
  Value* b1 = b.div(bi, batch2, "b1");
  // This subgroup's tile inside it.
  Value* sg = b.work_id(WorkId::subgroup, 0, "sg");
  Value* SGM = b.index(p.sg_m, "SGM");
  Value* m0 = b.mul(b.add(b.mul(mt, SGM), b.rem(sg, SGM)), MR, "m0");
  Value* n0 = b.mul(b.add(b.mul(nt, b.index(p.sg_n)), b.div(sg, SGM)), NR, "n0");
  auto at = [&](Value* base, Value* s1, Value* s2, const char* n) {
    return b.ptr_offset(base, b.add(b.mul(b1, s1), b.mul(b2, s2)), n);
  };
  Value* At = at(A, sa_b1, sa_b2, "At");
  Value* Bt = at(B, sb_b1, sb_b2, "Bt");
  Value* Ct = at(C, sc_b1, sc_b2, "Ct");

  const Type acc_t = Type::matrix(T, p.mr, p.nr, Use::acc, Scope::subgroup);
  const Type a_t = Type::matrix(p.a_type, p.mr, p.kb, Use::a, Scope::subgroup);
  const Type b_t = Type::matrix(p.b_type, p.kb, p.nr, Use::b, Scope::subgroup);
  const Type c_t = Type::matrix(p.c_type, p.mr, p.nr, Use::acc, Scope::subgroup);

  Value* live = b.bin(BinOp::and_, b.cmp(CmpPred::lt, m0, M), b.cmp(CmpPred::lt, n0, N), "live");
  b.if_(live, {}, [&](Builder& x) {
    Value* full = x.bin(BinOp::and_, x.cmp(CmpPred::le, x.add(m0, MR), M), x.cmp(CmpPred::le, x.add(n0, NR), N), "full");
    Value* k_main = x.sub(K, x.rem(K, KB), "k_main");
    // The tile: a K loop of mul_add (loads checked only in edge tiles), the K tail (checked), then
    // C = alpha acc (+ beta C) (checked in edge tiles).
    // With 2-D block loads, each load also names the next K step's blocks (A: kb columns on, B:
    // kb rows down) for the lowering's prefetch.
    auto step = [&](Builder& kb, Value* k, Value* acc_in, bool chk) {
      Value* a = kb.load(a_t, {At, m0, k, sa_r, sa_c, M, K}, chk, "a");
      Value* bm = kb.load(b_t, {Bt, k, n0, sb_r, sb_c, K, N}, chk, "b");
      if (p.block2d) {
        a->def->attrs["prefetch_row"] = int64_t(0), a->def->attrs["prefetch_col"] = int64_t(p.kb);
        bm->def->attrs["prefetch_row"] = int64_t(p.kb), bm->def->attrs["prefetch_col"] = int64_t(0);
      }
      return kb.mul_add(a, bm, acc_in, "acc");
    };
    auto k_loop = [&](Builder& y, bool checked) {
      Value* acc = y.splat(acc_t, fzero, "acc");
      return std::vector<Value*>{y.for_(zero, k_main, KB, {acc}, [&](Builder& kb, Value* k, const std::vector<Value*>& it) {
        return std::vector<Value*>{step(kb, k, it[0], checked)};
      }, "k")[0]};
    };
    Value* acc = x.if_(full, {acc_t}, [&](Builder& y) { return k_loop(y, false); },
                       [&](Builder& y) { return k_loop(y, true); })[0];
    acc = x.if_(x.cmp(CmpPred::lt, k_main, K, "k_tail"), {acc_t},
                [&](Builder& z) { return std::vector<Value*>{step(z, k_main, acc, true)}; },
                [&](Builder&) { return std::vector<Value*>{acc}; })[0];
    auto epilogue = [&](Builder& y, bool checked) {
      Builder::Access c_at{Ct, m0, n0, sc_r, sc_c, M, N};
      Value* result = y.scale(acc, alpha, "result");
      if (p.accumulate) {
        Value* c_old = y.load(c_t, c_at, checked, "c");
        if (p.c_type != T) c_old = y.convert_matrix(c_old, acc_t);
        result = y.mat_bin(BinOp::add, result, y.scale(c_old, beta), "result");
      }
      if (p.c_type != T) result = y.convert_matrix(result, c_t, false, "out");
      y.store(result, c_at, checked);
      return std::vector<Value*>{};
    };
    x.if_(full, {}, [&](Builder& y) { return epilogue(y, false); }, [&](Builder& y) { return epilogue(y, true); });
    return std::vector<Value*>{};
  }, {});
  return fp;
}

}  // namespace coopjit
