// The GEMM recipe (gemm_recipe.h): the kernel's parameters and body, which runs the walk the plan
// names (GemmRecipe, gemm_recipe_internal.h; its parts in gemm_recipe_*.cpp).
#include "build/gemm_recipe.h"

#include "build/gemm_recipe_internal.h"
#include "core/error.h"

namespace coopjit {

GemmRecipe::GemmRecipe(const GemmPlan& p, Function& f) : p_(p), f_(f), T(p.dtype) {
  auto idx = [&](const char* n) { return f.add_param(Type::index(), n); };
  g_.A = f.add_param(Type::pointer(p.a_type), "A");
  g_.B = f.add_param(Type::pointer(p.b_type), "B");
  g_.C = f.add_param(Type::pointer(p.c_type), "C");
  g_.WS = f.add_param(Type::pointer(T), "WS");
  g_.FLAGS = f.add_param(Type::pointer(ScalarType::i32), "FLAGS");
  // Packed panels (plan.pack): in the accumulator type, or VNNI-packed input types (plan.vnni).
  g_.PA = f.add_param(Type::pointer(packed_a_type(p)), "PA");
  g_.PB = f.add_param(Type::pointer(packed_b_type(p)), "PB");
  g_.CS = f.add_param(Type::pointer(T), "CS");  // s8 x s8: 128 * B's column sums (needs_column_sums)
  // The epilogue's vectors and residual (GemmEpilogue, in the caller's orientation; the
  // residual has C's element strides).
  epi_ = add_epilogue_params(f, p.epilogue);
  g_.RES = epi_.residual;
  // plan.cycles: the 13th pointer (the runtime's counters), only in kernels built with it.
  if (p.cycles) g_.CYC = f.add_param(Type::pointer(ScalarType::index), "CYC");
  g_.M = idx("M"); g_.N = idx("N"); g_.K = idx("K");
  g_.sa_r = idx("sa_r"); g_.sa_c = idx("sa_c"); g_.sb_r = idx("sb_r"); g_.sb_c = idx("sb_c");
  g_.sc_r = idx("sc_r"); g_.sc_c = idx("sc_c");
  g_.batch1 = idx("batch1"); g_.batch2 = idx("batch2");
  g_.sa_b1 = idx("sa_b1"); g_.sb_b1 = idx("sb_b1"); g_.sc_b1 = idx("sc_b1");
  g_.sa_b2 = idx("sa_b2"); g_.sb_b2 = idx("sb_b2"); g_.sc_b2 = idx("sc_b2");
  g_.worker = idx("worker"); g_.workers = idx("workers"); g_.kt = idx("kt"); g_.n_sk = idx("n_sk");
  // phase (packed plans): 0 = pack, wait for every worker's panels, compute; 1 = pack only (the
  // launch's end is the barrier); 2 = compute only, `workers` being shares of the blocked nest
  // (ThreadPool::run_shares), `shares` of them per thread: the grid has shares x grid_m rows.
  // 3 (the unpacked nest with 16-bit C or a fused epilogue, a part of a K split): the sums go to
  // the scratch, not C; 4 (the same nest, the split's last K tile): its first K tile adds the
  // scratch (the other parts' sum) and the epilogue applies once.
  g_.phase = idx("phase"); g_.shares = idx("shares");
  g_.alpha = f.add_param(Type::of(T), "alpha");
  g_.beta = f.add_param(Type::of(T), "beta");
  acc_t_ = Type::matrix(T, p.mr, p.nr, Use::acc, Scope::subgroup);
  epi_.M = g_.M;
  epi_.N = g_.N;
  epi_.col = p.layout == "col";
}

void GemmRecipe::build() {
  Builder b(f_);
  if (!p_.fixed.empty()) {  // the shape and strides as constants (GemmPlan::fixed)
    Value** slots[] = {&g_.M, &g_.N, &g_.K, &g_.sa_r, &g_.sa_c, &g_.sb_r, &g_.sb_c, &g_.sc_r, &g_.sc_c,
                       &g_.batch1, &g_.batch2, &g_.sa_b1, &g_.sb_b1, &g_.sc_b1, &g_.sa_b2, &g_.sb_b2, &g_.sc_b2};
    for (size_t i = 0; i < p_.fixed.size(); ++i) *slots[i] = b.index(p_.fixed[i]);
    epi_.M = g_.M;
    epi_.N = g_.N;
  }
  one_ = b.index(1, "c1");
  zero_ = b.index(0, "c0");
  // A plan without Stream-K tiles (GemmPlan::streams) has no Stream-K walk; its n_sk is 0.
  if (!p_.streams()) g_.n_sk = zero_;
  // Unit strides are compile-time constants: the lowering turns them into vector accesses.
  sb_c_ = p_.unit_b ? one_ : g_.sb_c;
  sc_c_ = p_.unit_c ? one_ : g_.sc_c;
  MR_ = b.index(p_.mr, "MR");
  NR_ = b.index(p_.nr, "NR");
  KB_ = b.index(p_.kb, "KB");
  fzero_ = b.constant(0.0, T, "zero");
  tiles_m_ = ceil_div(b, g_.M, MR_, "tiles_m");
  tiles_n_ = ceil_div(b, g_.N, NR_, "tiles_n");
  Value* tiles_mn = b.mul(b.mul(b.mul(g_.batch1, g_.batch2), tiles_m_), tiles_n_, "tiles_mn");
  tiles_k_ = b.bin(BinOp::max, ceil_div(b, g_.K, g_.kt), one_, "tiles_k");
  if (p_.order == "dot") {
    dot(b);
    return;
  }
  Value* t_start = g_.CYC ? b.cycles("t_start") : nullptr;
  if (p_.pack) pack(b);
  b.if_(b.cmp(CmpPred::ne, g_.phase, one_, "computes"), {}, [&](Builder& x) {
    if (p_.streams()) stream_k(x);
    data_parallel(x, tiles_mn);
    return std::vector<Value*>{};
  }, [](Builder&) { return std::vector<Value*>{}; });
  if (g_.CYC) {
    cycles_since(b, t_start, CycleField::kernel);
    count_one(b, b.index(int64_t(CycleField::calls)));
  }
}

Value* GemmRecipe::cycles_since(Builder& b, Value* since, Value* field) {
  if (!g_.CYC) return nullptr;
  Value* now = b.cycles("now");
  Value* at = b.add(b.mul(g_.worker, b.index(kCycleFields)), field, "cyc_at");
  b.store_scalar(g_.CYC, at, b.add(b.load_scalar(g_.CYC, at), b.sub(now, since)));
  return now;
}

void GemmRecipe::count_one(Builder& b, Value* field) {
  Value* at = b.add(b.mul(g_.worker, b.index(kCycleFields)), field, "cyc_at");
  b.store_scalar(g_.CYC, at, b.add(b.load_scalar(g_.CYC, at), one_));
}

GemmRecipe::Coords GemmRecipe::coords_of(Builder& b, Value* mn) {
  Value* mt = b.rem(mn, tiles_m_, "mt");
  Value* rest = b.div(mn, tiles_m_);
  Value* nt = b.rem(rest, tiles_n_, "nt");
  Value* bi = b.div(rest, tiles_n_, "bi");
  return {mt, nt, b.rem(bi, g_.batch2, "b2"), b.div(bi, g_.batch2, "b1")};
}

// The next tile's coordinates, without divisions (an odometer); the row panels run over
// [m_lo, m_hi) (all of them unless given).
GemmRecipe::Coords GemmRecipe::next(Builder& b, const Coords& c, Value* m_lo, Value* m_hi) {
  Value* mt = b.add(c.mt, one_);
  Value* wrap_m = b.cmp(CmpPred::eq, mt, m_hi ? m_hi : tiles_m_);
  Value* nt = b.select(wrap_m, b.add(c.nt, one_), c.nt);
  Value* wrap_n = b.cmp(CmpPred::eq, nt, tiles_n_);
  Value* b2 = b.select(wrap_n, b.add(c.b2, one_), c.b2);
  Value* wrap_b = b.cmp(CmpPred::eq, b2, g_.batch2);
  return {b.select(wrap_m, m_lo ? m_lo : zero_, mt, "mt"), b.select(wrap_n, zero_, nt, "nt"), b.select(wrap_b, zero_, b2, "b2"),
          b.select(wrap_b, b.add(c.b1, one_), c.b1, "b1")};
}

GemmRecipe::Tile GemmRecipe::tile_at(Builder& b, const Coords& c) {
  auto at = [&](Value* base, Value* s1, Value* s2, const char* n) {
    return b.ptr_offset(base, b.add(b.mul(c.b1, s1), b.mul(c.b2, s2)), n);
  };
  Value* r = p_.epilogue.residual ? at(g_.RES, g_.sc_b1, g_.sc_b2, "Rt") : nullptr;
  return {at(g_.A, g_.sa_b1, g_.sa_b2, "At"), at(g_.B, g_.sb_b1, g_.sb_b2, "Bt"), at(g_.C, g_.sc_b1, g_.sc_b2, "Ct"),
          b.mul(c.mt, MR_, "m0"), b.mul(c.nt, NR_, "n0"), c.mt, c.nt, r};
}

std::unique_ptr<Function> build_gemm(const GemmPlan& p, const std::string& name) {
  auto f = std::make_unique<Function>();
  f->name = name;
  f->attrs["subgroup_size"] = int64_t(p.simd_width);
  if (p.amx) {
    f->attrs["amx"] = int64_t(p.amx);  // the lowering keeps the K loop's matrices in tiles
    f->attrs["amx_feed"] = int64_t(p.amx_feed);
  }
  GemmRecipe(p, *f).build();
  return f;
}

}  // namespace coopjit
