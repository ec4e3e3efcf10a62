// The GEMM recipe (gemm_recipe.h).
#include "build/gemm_recipe.h"

#include "build/gemm_epilogue.h"
#include "core/error.h"
#include "ir/builder.h"

namespace coopjit {

using namespace ir;

namespace {

struct GemmParams {
  Value *A, *B, *C, *WS, *FLAGS, *PA, *PB, *CS;
  Value *M, *N, *K, *sa_r, *sa_c, *sb_r, *sb_c, *sc_r, *sc_c;
  Value *batch1, *batch2, *sa_b1, *sb_b1, *sc_b1, *sa_b2, *sb_b2, *sc_b2;
  Value *worker, *workers, *kt, *n_sk, *phase, *shares;
  Value *alpha, *beta;
  Value* RES;  // the epilogue's residual (its operands: epi_)
};

class GemmRecipe {
 public:
  GemmRecipe(const GemmPlan& p, Function& f) : p_(p), f_(f), T(p.dtype) {
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
    g_.phase = idx("phase"); g_.shares = idx("shares");
    g_.alpha = f.add_param(Type::of(T), "alpha");
    g_.beta = f.add_param(Type::of(T), "beta");
    acc_t_ = Type::matrix(T, p.mr, p.nr, Use::acc, Scope::subgroup);
    epi_.M = g_.M;
    epi_.N = g_.N;
    epi_.col = p.layout == "col";
  }

  void build() {
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
    if (p_.pack) pack(b);
    b.if_(b.cmp(CmpPred::ne, g_.phase, one_, "computes"), {}, [&](Builder& x) {
      stream_k(x);
      data_parallel(x, tiles_mn);
      return std::vector<Value*>{};
    }, [](Builder&) { return std::vector<Value*>{}; });
  }

 private:
  Value* ceil_div(Builder& b, Value* x, Value* y, std::string hint = {}) {
    return b.div(b.add(x, b.sub(y, one_)), y, std::move(hint));
  }

  // Output tile mn of the flattened batch x N x M space ("m_inner": consecutive tiles walk down
  // M and share one panel of B), as coordinates (mt, nt, b2, b1).
  struct Coords {
    Value *mt, *nt, *b2, *b1;
  };
  Coords coords_of(Builder& b, Value* mn) {
    Value* mt = b.rem(mn, tiles_m_, "mt");
    Value* rest = b.div(mn, tiles_m_);
    Value* nt = b.rem(rest, tiles_n_, "nt");
    Value* bi = b.div(rest, tiles_n_, "bi");
    return {mt, nt, b.rem(bi, g_.batch2, "b2"), b.div(bi, g_.batch2, "b1")};
  }
  // The next tile's coordinates, without divisions (an odometer); the row panels run over
  // [m_lo, m_hi) (all of them unless given).
  Coords next(Builder& b, const Coords& c, Value* m_lo = nullptr, Value* m_hi = nullptr) {
    Value* mt = b.add(c.mt, one_);
    Value* wrap_m = b.cmp(CmpPred::eq, mt, m_hi ? m_hi : tiles_m_);
    Value* nt = b.select(wrap_m, b.add(c.nt, one_), c.nt);
    Value* wrap_n = b.cmp(CmpPred::eq, nt, tiles_n_);
    Value* b2 = b.select(wrap_n, b.add(c.b2, one_), c.b2);
    Value* wrap_b = b.cmp(CmpPred::eq, b2, g_.batch2);
    return {b.select(wrap_m, m_lo ? m_lo : zero_, mt, "mt"), b.select(wrap_n, zero_, nt, "nt"), b.select(wrap_b, zero_, b2, "b2"),
            b.select(wrap_b, b.add(c.b1, one_), c.b1, "b1")};
  }

  // A tile's batch's A, B, C and its corner (m0, n0).
  struct Tile {
    Value *A, *B, *C, *m0, *n0, *mt, *nt, *R;
  };
  Tile tile_at(Builder& b, const Coords& c) {
    auto at = [&](Value* base, Value* s1, Value* s2, const char* n) {
      return b.ptr_offset(base, b.add(b.mul(c.b1, s1), b.mul(c.b2, s2)), n);
    };
    Value* r = p_.epilogue.residual ? at(g_.RES, g_.sc_b1, g_.sc_b2, "Rt") : nullptr;
    return {at(g_.A, g_.sa_b1, g_.sa_b2, "At"), at(g_.B, g_.sb_b1, g_.sb_b2, "Bt"), at(g_.C, g_.sc_b1, g_.sc_b2, "Ct"),
            b.mul(c.mt, MR_, "m0"), b.mul(c.nt, NR_, "n0"), c.mt, c.nt, r};
  }

  // acc over K tiles [k_lo, k_hi) of tile t; loads are checked only in edge tiles and in the
  // last partial K step.
  Value* accumulate(Builder& b, const Tile& t, Value* k_lo, Value* k_hi) {
    if (p_.pack) return accumulate_packed(b, t, k_lo, k_hi);
    Value* k0 = b.mul(k_lo, g_.kt, "k0");
    Value* k1 = b.min(b.mul(k_hi, g_.kt), g_.K, "k1");
    Value* k_main = b.sub(k1, b.rem(b.sub(k1, k0), KB_), "k_main");
    Value* full_m = b.cmp(CmpPred::le, b.add(t.m0, MR_), g_.M, "full_m");
    Value* full_n = b.cmp(CmpPred::le, b.add(t.n0, NR_), g_.N, "full_n");
    // Checks only where the tile crosses an edge: A's rows at the M edge, B's columns at the N
    // edge (masked vector loads, cheap); the K loop never leaves [0, K).
    auto body = [&](Builder& x, bool check_a, bool check_b) {
      const Type a_t = Type::matrix(p_.a_type, p_.mr, p_.kb, Use::a, Scope::subgroup);
      const Type b_t = Type::matrix(p_.b_type, p_.kb, p_.nr, Use::b, Scope::subgroup);
      auto step = [&](Builder& kb, Value* k, Value* acc_in, bool chk_a, bool chk_b) {
        Value* a = kb.load(a_t, {t.A, t.m0, k, g_.sa_r, g_.sa_c, g_.M, g_.K}, chk_a, "a");
        Value* bm = kb.load(b_t, {t.B, k, t.n0, g_.sb_r, sb_c_, g_.K, g_.N}, chk_b, "b");
        if (p_.b_prefetch && !p_.pack) bm->def->attrs["prefetch"] = int64_t(p_.b_prefetch);  // (k_outer plans, gemm_plan.h)
        return kb.mul_add(a, bm, acc_in, "acc");
      };
      Value* acc = x.splat(acc_t_, fzero_, "acc");
      acc = x.for_(k0, k_main, KB_, {acc}, [&](Builder& kb, Value* k, const std::vector<Value*>& it) {
        return std::vector<Value*>{step(kb, k, it[0], check_a, check_b)};
      }, "k")[0];
      // The last partial K step (K not a multiple of KB) reads zeros past K.
      acc = x.if_(x.cmp(CmpPred::lt, k_main, k1, "k_tail"), {acc_t_},
                  [&](Builder& y) { return std::vector<Value*>{step(y, k_main, acc, true, true)}; },
                  [&](Builder&) { return std::vector<Value*>{acc}; })[0];
      return std::vector<Value*>{acc};
    };
    return b.if_(full_m, {acc_t_}, [&](Builder& x) {
      return x.if_(full_n, {acc_t_}, [&](Builder& y) { return body(y, false, false); },
                   [&](Builder& y) { return body(y, false, true); });
    }, [&](Builder& x) { return body(x, true, true); })[0];
  }

  // Packing (plan.pack, one batch): before any tile, the workers copy A into mr-row panels
  // (column-major inside: the k-th column of a panel is mr consecutive elements) and B into
  // nr-column panels (row-major inside), zero-padded to whole tiles and to Kp = K rounded up to
  // KB: in the accumulator type, or with VNNI (plan.vnni = w) in the input types, w consecutive
  // K elements side by side (a column of w-element channels for A, a row of them for B). Tiles
  // then read only contiguous, aligned-enough, never-ragged memory: no edge checks, no K tail,
  // no cache-set conflicts of strided rows.
  void pack(Builder& b) {
    Kp_ = b.mul(ceil_div(b, g_.K, KB_), KB_, "Kp");
    const int w = p_.vnni;
    VW_ = b.index(w, "VNNI");
    const ScalarType pa_t = packed_a_type(p_), pb_t = packed_b_type(p_);
    const Type a_in = Type::matrix(p_.a_type, p_.mr, p_.kb, Use::a, Scope::subgroup);
    const Type b_in = Type::matrix(p_.b_type, p_.kb, p_.nr, Use::b, Scope::subgroup);
    const Type a_pk = Type::matrix(pa_t, p_.mr, p_.kb, Use::a, Scope::subgroup);
    const Type b_pk = Type::matrix(pb_t, p_.kb, p_.nr, Use::b, Scope::subgroup);
    auto share = [&](Builder& x, Value* n, const char* hint) {
      Value* per = ceil_div(x, n, g_.workers);
      Value* lo = x.min(x.mul(g_.worker, per), n);
      return std::make_pair(lo, x.min(x.add(lo, per), n, hint));
    };
    // phase 2 (compute only): the panels are packed.
    Value* packs = b.cmp(CmpPred::ne, g_.phase, b.index(2), "packs");
    auto [alo, ahi] = share(b, p_.direct_a ? zero_ : b.select(packs, tiles_m_, zero_), "a_panels");  // direct_a: A is read where it is
    // A unit column stride is a constant (the lowering's loads of a row become vector loads);
    // the bounds are checked only in the last panel and the K tail.
    Value* sa_c = p_.unit_a ? one_ : g_.sa_c;
    Value* k_main = b.mul(b.div(g_.K, KB_), KB_, "k_main");
    b.for_(alo, ahi, one_, {}, [&](Builder& x, Value* q, const std::vector<Value*>&) {
      Value* dst = x.ptr_offset(g_.PA, x.mul(x.mul(q, MR_), Kp_), "panel");
      Value* m0 = x.mul(q, MR_);
      // AMX panels: each mr x kb block row-major, copied by rows (vector loads and stores).
      const Type a_rows = Type::matrix(p_.a_type, p_.mr, p_.kb, Use::b, Scope::subgroup);
      auto steps = [&](Builder& z, Value* lo, Value* hi, bool checked) {
        z.for_(lo, hi, KB_, {}, [&](Builder& y, Value* k, const std::vector<Value*>&) {
          if (p_.amx) {
            Value* a = y.load(a_rows, {g_.A, m0, k, g_.sa_r, sa_c, g_.M, g_.K}, checked, "a");
            demote(y.store(a, panel_a(y, dst, k), false));
            return std::vector<Value*>{};
          }
          Value* a = y.load(a_in, {g_.A, m0, k, g_.sa_r, sa_c, g_.M, g_.K}, checked, "a");
          if (needs_column_sums(p_)) {  // s8 -> u8: a + 128, in bytes (mod 256: the sign bit flipped)
            const Type a_u8 = Type::matrix(ScalarType::u8, p_.mr, p_.kb, Use::a, Scope::subgroup);
            a = y.mat_bin(BinOp::add, y.convert_matrix(a, a_u8), y.splat(a_u8, y.constant(128.0, ScalarType::u8)));
          }
          if (a->type.scalar != pa_t) a = y.convert_matrix(a, a_pk);
          demote(y.store(a, panel_a(y, dst, k), false));
          return std::vector<Value*>{};
        }, "k");
      };
      x.if_(x.cmp(CmpPred::le, x.add(m0, MR_), g_.M, "full_panel"), {}, [&](Builder& y) {
        steps(y, zero_, k_main, false);
        steps(y, k_main, Kp_, true);
        return std::vector<Value*>{};
      }, [&](Builder& y) {
        steps(y, zero_, Kp_, true);
        return std::vector<Value*>{};
      });
      return std::vector<Value*>{};
    }, "q");
    // A prepacked B is ready; inline_b packs it in the blocked nest (pack_b_rows).
    auto [blo, bhi] = share(b, p_.prepacked_b || p_.inline_b ? zero_ : b.select(packs, tiles_n_, zero_), "b_panels");
    b.for_(blo, bhi, one_, {}, [&](Builder& x, Value* q, const std::vector<Value*>&) {
      Value* dst = x.ptr_offset(g_.PB, x.mul(x.mul(q, NR_), Kp_), "panel");
      Value* n0 = x.mul(q, NR_);
      const Type sums_t = Type::matrix(T, 1, p_.nr, Use::acc, Scope::subgroup);
      const Type a128_t = Type::matrix(ScalarType::u8, 1, p_.kb, Use::a, Scope::subgroup);
      Value* sums = needs_column_sums(p_) ? x.splat(sums_t, fzero_, "sums") : nullptr;
      Value* a128 = sums ? x.splat(a128_t, x.constant(128.0, ScalarType::u8), "c128") : nullptr;
      std::vector<Value*> init;
      if (sums) init.push_back(sums);
      std::vector<Value*> out = x.for_(zero_, Kp_, KB_, init, [&](Builder& y, Value* k, const std::vector<Value*>& it) {
        if (tiled_b()) {  // each K step as nr / 16 tiles of kb x 16, 1 KiB each (see panel_b_tile)
          const Type b16 = Type::matrix(p_.b_type, p_.kb, 16, Use::b, Scope::subgroup);
          for (int j = 0; j < p_.nr / 16; ++j) {
            Value* bm = y.load(b16, {g_.B, k, y.add(n0, y.index(16 * j)), g_.sb_r, sb_c_, g_.K, g_.N}, true, "b");
            demote(y.store(bm, panel_b_tile(y, dst, k, j), false));
          }
          return std::vector<Value*>{};
        }
        Value* bm = y.load(b_in, {g_.B, k, n0, g_.sb_r, sb_c_, g_.K, g_.N}, true, "b");
        if (p_.b_type != pb_t) bm = y.convert_matrix(bm, b_pk);
        demote(y.store(bm, panel_b(y, dst, k), false));
        if (it.empty()) return std::vector<Value*>{};
        return std::vector<Value*>{y.mul_add(a128, bm, it[0], "sums")};  // 128 * column sums
      }, "k");
      if (sums) x.store(out[0], {g_.CS, zero_, n0, zero_, one_, one_, g_.N}, false);
      return std::vector<Value*>{};
    }, "q");
    // A barrier: every worker's panels are written before any tile reads them (phase 0; phases
    // 1 and 2 are two launches).
    b.if_(b.cmp(CmpPred::eq, g_.phase, zero_, "barrier"), {}, [&](Builder& y) {
      Value* flags = y.ptr_offset(g_.FLAGS, g_.workers, "pack_flags");
      y.flag_set(flags, g_.worker);
      y.for_(zero_, g_.workers, one_, {}, [&](Builder& x, Value* w2, const std::vector<Value*>&) {
        x.flag_wait(flags, w2);
        return std::vector<Value*>{};
      }, "w");
      return std::vector<Value*>{};
    }, [](Builder&) { return std::vector<Value*>{}; });
  }

  // inline_b: column panel nt's slice in the slot, addressed as a whole panel (panel_b with K
  // steps k0.. of the K tile), and its column sums.
  Value* slot_panel(Builder& x, Value* nt) {
    Value* at = x.sub(x.mul(x.sub(nt, slot_nlo_), g_.kt), slot_k0_);
    return x.ptr_offset(slot_pb_, x.mul(at, NR_), "pb");
  }
  Value* slot_sums(Builder& x, Value* nt) { return x.ptr_offset(slot_cs_, x.mul(x.sub(nt, slot_nlo_), NR_), "sums_at"); }

  // inline_b: K steps [k0, k1) of column panels [nlo, nhi) into the slot, row by row (each K step
  // reads kb rows of B along the worker's columns); s8 x s8 also sums each panel's columns
  // (times 128) in its slot of sums. Loads are checked only at B's edges.
  void pack_b_rows(Builder& b, Value* k0, Value* k1, Value* nlo, Value* nhi) {
    slot_k0_ = k0;
    const ScalarType pb_t = packed_b_type(p_);
    const Type b_in = Type::matrix(p_.b_type, p_.kb, p_.nr, Use::b, Scope::subgroup);
    const Type b_pk = Type::matrix(pb_t, p_.kb, p_.nr, Use::b, Scope::subgroup);
    const Type sums_t = Type::matrix(T, 1, p_.nr, Use::acc, Scope::subgroup);
    const Type a128_t = Type::matrix(ScalarType::u8, 1, p_.kb, Use::a, Scope::subgroup);
    const bool sums = needs_column_sums(p_);
    auto sums_at = [&](Builder& x, Value* nt) { return Builder::Access{slot_sums(x, nt), zero_, zero_, zero_, one_, one_, NR_}; };
    if (sums)
      b.for_(nlo, nhi, one_, {}, [&](Builder& x, Value* nt, const std::vector<Value*>&) {
        x.store(x.splat(sums_t, fzero_, "zero_sums"), sums_at(x, nt), false);
        return std::vector<Value*>{};
      }, "nt");
    Value* a128 = sums ? b.splat(a128_t, b.constant(128.0, ScalarType::u8), "c128") : nullptr;
    b.for_(k0, k1, KB_, {}, [&](Builder& x, Value* k, const std::vector<Value*>&) {
      Value* full_k = x.cmp(CmpPred::le, x.add(k, KB_), g_.K, "full_k");
      x.for_(nlo, nhi, one_, {}, [&](Builder& y, Value* nt, const std::vector<Value*>&) {
        Value* n0 = y.mul(nt, NR_, "n0");
        Value* full = y.bin(BinOp::and_, full_k, y.cmp(CmpPred::le, y.add(n0, NR_), g_.N), "full");
        auto step = [&](Builder& z, bool checked) {
          Value* bm = z.load(b_in, {g_.B, k, n0, g_.sb_r, sb_c_, g_.K, g_.N}, checked, "b");
          if (p_.b_type != pb_t) bm = z.convert_matrix(bm, b_pk);
          z.store(bm, panel_b(z, slot_panel(z, nt), k), false);
          if (sums) z.store(z.mul_add(a128, bm, z.load(sums_t, sums_at(z, nt), false)), sums_at(z, nt), false);
          return std::vector<Value*>{};
        };
        y.if_(full, {}, [&](Builder& z) { return step(z, false); }, [&](Builder& z) { return step(z, true); });
        return std::vector<Value*>{};
      }, "nt");
      return std::vector<Value*>{};
    }, "k");
  }

  // Matrix-vector products (order "dot": the kernel's N is 1, A's rows and B's column have unit
  // stride along K): each worker takes a contiguous block of mr-row tiles of A and streams them
  // once; an mr x nr accumulator (nr lanes along K) gathers A's rows times B's column, read as
  // an mr x nr matrix with row stride 0 (one vector, loaded once per step after CSE), and one
  // row reduction per tile gives its mr results. A GEMM tile would spend a whole vector of
  // lanes per output element of the single column.
  void dot(Builder& b) {
    const Type in_a = Type::matrix(p_.a_type, p_.mr, p_.nr, Use::acc, Scope::subgroup);
    const Type in_b = Type::matrix(p_.b_type, p_.mr, p_.nr, Use::acc, Scope::subgroup);
    const Type col_t = Type::matrix(T, p_.mr, 1, Use::acc, Scope::subgroup);
    const Type c_col = Type::matrix(p_.c_type, p_.mr, 1, Use::acc, Scope::subgroup);
    Value* per = ceil_div(b, tiles_m_, g_.workers, "rows_per");
    Value* lo = b.min(b.mul(g_.worker, per), tiles_m_, "lo");
    Value* hi = b.min(b.add(lo, per), tiles_m_, "hi");
    Value* k_main = b.sub(g_.K, b.rem(g_.K, NR_), "k_main");
    b.for_(lo, hi, one_, {}, [&](Builder& x, Value* mt, const std::vector<Value*>&) {
      Value* m0 = x.mul(mt, MR_, "m0");
      auto step = [&](Builder& y, Value* k, Value* acc, bool checked_a) {
        Value* a = y.load(in_a, {g_.A, m0, k, g_.sa_r, one_, g_.M, g_.K}, checked_a, "a");
        Value* v = y.load(in_b, {g_.B, zero_, k, zero_, one_, MR_, g_.K}, checked_a, "x");
        if (p_.a_type != T) a = y.convert_matrix(a, acc_t_);
        if (p_.b_type != T) v = y.convert_matrix(v, acc_t_);
        return y.mat_bin(BinOp::add, acc, y.mat_bin(BinOp::mul, a, v), "acc");
      };
      auto rows = [&](Builder& y, bool checked) {
        Value* acc = y.splat(acc_t_, fzero_, "acc");
        acc = y.for_(zero_, k_main, NR_, {acc}, [&](Builder& kx, Value* k, const std::vector<Value*>& it) {
          return std::vector<Value*>{step(kx, k, it[0], checked)};
        }, "k")[0];
        // The K tail: checked loads read zeros past K.
        acc = y.if_(y.cmp(CmpPred::lt, k_main, g_.K, "k_tail"), {acc_t_},
                    [&](Builder& z) { return std::vector<Value*>{step(z, k_main, acc, true)}; },
                    [&](Builder&) { return std::vector<Value*>{acc}; })[0];
        return std::vector<Value*>{acc};
      };
      Value* acc = x.if_(x.cmp(CmpPred::le, x.add(m0, MR_), g_.M, "full_m"), {acc_t_},
                         [&](Builder& y) { return rows(y, false); }, [&](Builder& y) { return rows(y, true); })[0];
      Value* sums = x.reduce(acc, ReduceMode::row, col_t, BinOp::add, "sums");
      Value* result = x.scale(sums, g_.alpha, "result");
      Builder::Access c_at{g_.C, m0, zero_, g_.sc_r, one_, g_.M, one_};
      if (p_.epilogue.any()) {
        Builder::Access r_at{g_.RES, m0, zero_, g_.sc_r, one_, g_.M, one_};
        result = apply_epilogue(x, p_.epilogue, epi_, result, m0, zero_, p_.mr, 1, true, [&](Builder& y, Value* r, const Type& e_t) {
          if (!p_.accumulate) return r;
          Value* c_old = y.load(c_col, c_at, true, "c");
          if (p_.c_type != e_t.scalar) c_old = y.convert_matrix(c_old, e_t);
          return y.mat_bin(BinOp::add, r, y.scale(c_old, g_.beta), "result");
        }, &r_at);
      } else if (p_.accumulate) {
        Value* c_old = x.load(c_col, c_at, true, "c");
        if (p_.c_type != T) c_old = x.convert_matrix(c_old, col_t);
        result = x.mat_bin(BinOp::add, result, x.scale(c_old, g_.beta), "result");
      }
      if (p_.c_type != result->type.scalar) result = x.convert_matrix(result, c_col, false, "out");
      x.store(result, c_at, true);
      return std::vector<Value*>{};
    }, "mt");
  }

  // plan.demote: the stored block (contiguous in every panel layout) goes to the shared L3.
  void demote(Op* store) {
    if (!p_.demote) return;
    const Type& t = store->operands[0]->type;
    store->attrs["demote"] = t.rows * t.cols * int64_t(ir::size_in_bytes(t.scalar));
  }

  // Where K step k of a packed panel lives (see pack()).
  // AMX: block k / kb of the panel, mr x kb row-major (tile rows are 64 bytes of K).
  Builder::Access panel_a(Builder& b, Value* panel, Value* k) {
    if (p_.amx) return {b.ptr_offset(panel, b.mul(k, MR_)), zero_, zero_, KB_, one_, MR_, KB_};
    if (p_.vnni == 1) return {panel, zero_, k, one_, MR_, MR_, Kp_};
    return {panel, zero_, k, one_, b.mul(MR_, VW_), MR_, Kp_, p_.vnni};
  }
  Builder::Access panel_b(Builder& b, Value* panel, Value* k) {
    if (tiled_b()) return panel_b_tile(b, panel, k, 0);  // (the load's attr tile_cols finds the others)
    if (p_.vnni == 1) return {panel, k, zero_, NR_, one_, Kp_, NR_};
    return {panel, k, zero_, b.mul(NR_, VW_), one_, Kp_, NR_, p_.vnni};
  }
  // AMX plans with amx_feed 2: K step k of a B panel (kb x nr, at element k * nr) is nr / 16
  // tiles of kb x 16 one after the other, each 16 VNNI rows of 64 bytes (one tileloadd reads 1
  // KiB of contiguous memory); column tile j of step k.
  bool tiled_b() const { return p_.amx && p_.amx_feed >= 2; }
  Builder::Access panel_b_tile(Builder& b, Value* panel, Value* k, int j) {
    Value* at = b.add(b.mul(k, NR_), b.index(int64_t(16) * j * p_.kb));
    return {b.ptr_offset(panel, at), zero_, zero_, b.mul(b.index(16), VW_), one_, KB_, b.index(16), p_.vnni};
  }

  // amx_prefetch 6: the panels that the blocked nest's next kernels read cold, into L2 a part
  // each K step while the block's kernels run. B: the worker's next column panel (its first
  // after the last: the next block's), lines part (mt - mb) of each K step in kernel mt of the
  // block (mc_tiles parts). A: in the kernels of the worker's last column panel, row panel mt's
  // successor in the next block (mt + mc_tiles), each K step whole. Offsets 0 (the kernel's own
  // lines) where there is none.
  int64_t cold_lines_b() const { return std::max<int64_t>(1, (int64_t(p_.nr) * p_.kb * ir::size_in_bytes(packed_b_type(p_)) / 64 + p_.mc_tiles - 1) / p_.mc_tiles); }
  int64_t cold_lines_a() const { return int64_t(p_.mr) * p_.kb * ir::size_in_bytes(packed_a_type(p_)) / 64; }
  std::pair<Value*, Value*> cold_offsets(Builder& b, Value* mt, Value* nt, Value* mb) {
    if (p_.amx_prefetch != 6 || !cold_nhi_) return {nullptr, nullptr};
    Value* last_n = b.cmp(CmpPred::eq, b.add(nt, one_), cold_nhi_, "last_n");
    Value* next_n = b.select(last_n, cold_nlo_, b.add(nt, one_));
    Value* b_panel = b.mul(b.mul(NR_, Kp_), b.index(ir::size_in_bytes(packed_b_type(p_))));
    Value* far_b = b.add(b.mul(b.sub(next_n, nt), b_panel), b.mul(b.sub(mt, mb), b.index(cold_lines_b() * 64)), "far_b");
    if (p_.direct_a) return {nullptr, far_b};
    Value* next_m = b.add(mt, b.index(p_.mc_tiles));
    Value* a_panel = b.mul(b.mul(MR_, Kp_), b.index(ir::size_in_bytes(packed_a_type(p_))));
    Value* far_a = b.select(b.bin(BinOp::and_, last_n, b.cmp(CmpPred::lt, next_m, cold_mhi_)),
                            b.mul(b.index(p_.mc_tiles), a_panel), zero_, "far_a");
    return {far_a, far_b};
  }

  // `init`: the partial sum to continue (AMX: loaded into the tiles), else zeros.
  // far_a / far_b (amx_prefetch 6): the bytes from each K step of the A / B panel to the lines
  // of a later kernel's cold panel that go to L2 with it (see cold_offsets).
  Value* accumulate_packed(Builder& b, const Tile& t, Value* k_lo, Value* k_hi, Value* init = nullptr,
                           Value* far_a = nullptr, Value* far_b = nullptr) {
    Value* k0 = b.mul(k_lo, g_.kt, "k0");
    Value* k1 = b.min(b.mul(k_hi, g_.kt), Kp_, "k1");
    Value* pa = p_.direct_a ? nullptr : b.ptr_offset(g_.PA, b.mul(b.mul(t.mt, MR_), Kp_), "pa");
    Value* pb = slot_pb_ ? slot_panel(b, t.nt) : b.ptr_offset(g_.PB, b.mul(b.mul(t.nt, NR_), Kp_), "pb");
    const Type a_t = Type::matrix(packed_a_type(p_), p_.mr, p_.kb, Use::a, Scope::subgroup);
    const Type b_t = Type::matrix(packed_b_type(p_), p_.kb, p_.nr, Use::b, Scope::subgroup);
    Value* acc = init ? init : b.splat(acc_t_, fzero_, "acc");
    return b.for_(k0, k1, KB_, {acc}, [&](Builder& kb, Value* k, const std::vector<Value*>& it) {
      // direct_a: A's own rows (full tiles: M and K are multiples of mr and kb), unpacked.
      const Type a_in = Type::matrix(p_.a_type, p_.mr, p_.kb, Use::a, Scope::subgroup);
      Value* a = p_.direct_a ? kb.load(a_in, {g_.A, t.m0, k, g_.sa_r, one_, g_.M, g_.K}, false, "a")
                             : kb.load(a_t, panel_a(kb, pa, k), false, "a");
      // AMX: the A panel streams from L2 past the B slice held in L1 (2 KiB a step, contiguous);
      // its lines two steps ahead are prefetched into L1 (tileloadd stalls on an L1 miss). A
      // direct A: each row's bytes two steps further along the row.
      const int64_t a_step = (p_.direct_a ? 1 : p_.mr) * p_.kb * ir::size_in_bytes(packed_a_type(p_));
      const int64_t b_step = int64_t(p_.nr) * p_.kb * ir::size_in_bytes(packed_b_type(p_));
      if (p_.amx && p_.amx_prefetch >= 1 && p_.amx_prefetch != 5) a->def->attrs["prefetch"] = 2 * a_step;
      Value* bm = kb.load(b_t, panel_b(kb, pb, k), false, "b");
      if (p_.amx && p_.amx_prefetch == 2)  // B's lines two steps ahead too (amx_prefetch 2)
        bm->def->attrs["prefetch"] = 2 * b_step;
      // amx_prefetch 3 / 4 / 5: A's and B's lines 8 / 16 / 8 K steps ahead into L2 (prefetcht1; 5 without
      // the L1 prefetch of A): a panel's K steps cross a 4 KiB page every 2 steps, where the
      // hardware's L2 streamer stops, so a panel read from L3 stalls tileloadd at each page.
      if (p_.amx && p_.amx_prefetch >= 3 && p_.amx_prefetch <= 5) {
        const int64_t steps = p_.amx_prefetch == 4 ? 16 : 8;
        a->def->attrs["prefetch_l2"] = steps * a_step;
        bm->def->attrs["prefetch_l2"] = steps * b_step;
      }
      if (tiled_b()) bm->def->attrs["tile_cols"] = int64_t(16) * p_.kb * ir::size_in_bytes(packed_b_type(p_));
      for (auto [ld, far, lines] : {std::tuple{a, far_a, cold_lines_a()}, std::tuple{bm, far_b, cold_lines_b()}})
        if (far) {
          ld->def->operands.push_back(far);
          ld->def->attrs["prefetch_far"] = lines;
        }
      return std::vector<Value*>{kb.mul_add(a, bm, it[0], "acc")};
    }, "k")[0];
  }

  // C = alpha * acc (+ beta * C), by the tile's owner only, once; with add_to_c, C += alpha * acc
  // (the later K blocks of the blocked loop nest).
  void epilogue(Builder& b, const Tile& t, Value* acc, bool add_to_c = false) {
    Value* full = b.bin(BinOp::and_, b.cmp(CmpPred::le, b.add(t.m0, MR_), g_.M),
                        b.cmp(CmpPred::le, b.add(t.n0, NR_), g_.N), "full");
    auto body = [&](Builder& x, bool checked) {
      Builder::Access c_at{t.C, t.m0, t.n0, g_.sc_r, sc_c_, g_.M, g_.N};
      const Type c_t = Type::matrix(p_.c_type, p_.mr, p_.nr, Use::acc, Scope::subgroup);
      Value* prod = acc;
      if (needs_column_sums(p_) && !add_to_c && !p_.inline_b)  // (A + 128) B - 128 * column sums of B = A B
        prod = x.mat_bin(BinOp::sub, acc, x.load(acc_t_, {g_.CS, zero_, t.n0, zero_, one_, MR_, g_.N}, false, "sums"));
      Value* result = x.scale(prod, g_.alpha, "result");
      if (p_.epilogue.any()) {  // (never add_to_c: the blocked nest keeps partial sums apart)
        Builder::Access r_at = c_at;
        r_at.ptr = t.R;
        result = apply_epilogue(x, p_.epilogue, epi_, result, t.m0, t.n0, p_.mr, p_.nr, checked, [&](Builder& y, Value* r, const Type& e_t) {
          if (!p_.accumulate) return r;
          Value* c_old = y.load(c_t, c_at, checked, "c");
          if (p_.c_type != e_t.scalar) c_old = y.convert_matrix(c_old, e_t);
          return y.mat_bin(BinOp::add, r, y.scale(c_old, g_.beta), "result");
        }, t.R ? &r_at : nullptr);
      } else if (add_to_c) {  // (only with C in the accumulator type at run time: see data_parallel)
        Value* c_old = x.load(c_t, c_at, checked, "c");
        if (p_.c_type != T) c_old = x.convert_matrix(c_old, acc_t_);
        result = x.mat_bin(BinOp::add, result, c_old, "result");
      } else if (p_.accumulate) {
        Value* c_old = x.load(c_t, c_at, checked, "c");
        if (p_.c_type != T) c_old = x.convert_matrix(c_old, acc_t_);
        result = x.mat_bin(BinOp::add, result, x.scale(c_old, g_.beta), "result");
      }
      if (p_.c_type != result->type.scalar) result = x.convert_matrix(result, c_t, false, "out");
      x.store(result, c_at, checked);
      return std::vector<Value*>{};
    };
    auto general = [&](Builder& y) {
      y.if_(full, {}, [&](Builder& x) { return body(x, false); }, [&](Builder& x) { return body(x, true); });
      return std::vector<Value*>{};
    };
    if (add_to_c || !tile_store_c()) {
      general(b);
      return;
    }
    // plan amx_store: a full tile with alpha 1 goes from the tiles to C (tilestored at C's row
    // stride; bf16 C: the lowering converts the tiles' rows with vcvtneps2bf16 where it can).
    Value* alpha_one = b.cmp(CmpPred::eq, g_.alpha, b.constant(1.0, T), "alpha_one");
    b.if_(b.bin(BinOp::and_, full, alpha_one, "store_tiles"), {}, [&](Builder& x) {
      Value* out = acc;
      if (p_.c_type != T) out = x.convert_matrix(acc, Type::matrix(p_.c_type, p_.mr, p_.nr, Use::acc, Scope::subgroup), false, "out");
      x.store(out, {t.C, t.m0, t.n0, g_.sc_r, sc_c_, g_.M, g_.N}, false);
      return std::vector<Value*>{};
    }, general);
  }

  // plan amx_store: the AMX nest's full tiles may go from the tiles to C (see epilogue()).
  bool tile_store_c() const {
    return p_.amx && p_.pack && p_.amx_store && !p_.epilogue.any() && !p_.accumulate && p_.unit_c && !needs_column_sums(p_) &&
           (p_.c_type == T || (p_.c_type == ScalarType::bf16 && T == ScalarType::f32));
  }

  // The worker's slot of the workspace: an mr x nr tile, row-major.
  Builder::Access partial_at(Builder& b, Value* w) {
    Value* base = b.ptr_offset(g_.WS, b.mul(w, b.mul(MR_, NR_)), "partial");
    return {base, zero_, zero_, NR_, one_, MR_, NR_};
  }

  // Stream-K: the worker's contiguous range of the first n_sk global tiles. Its first output
  // tile may start mid-K: that partial goes to the workspace and its flag is set. The worker
  // holding K tile 0 of an output tile owns it: it adds the partials of the workers after it,
  // in worker order (so the result does not depend on timing), then writes C.
  void stream_k(Builder& b) {
    Value* per = ceil_div(b, g_.n_sk, g_.workers, "sk_per");
    Value* start = b.min(b.mul(g_.worker, per), g_.n_sk, "sk_start");
    Value* end = b.min(b.add(start, per), g_.n_sk, "sk_end");
    b.if_(b.cmp(CmpPred::lt, start, end), {}, [&](Builder& x) {
      Value* mn_first = x.div(start, tiles_k_, "mn_first");
      Value* mn_last = x.div(x.sub(end, one_), tiles_k_, "mn_last");
      Value* k_first = x.rem(start, tiles_k_);
      Value* k_last = x.add(x.rem(x.sub(end, one_), tiles_k_), one_);
      x.for_(mn_first, x.add(mn_last, one_), one_, {}, [&](Builder& y, Value* mn, const std::vector<Value*>&) {
        Value* k_lo = y.select(y.cmp(CmpPred::eq, mn, mn_first), k_first, zero_, "k_lo");
        Value* k_hi = y.select(y.cmp(CmpPred::eq, mn, mn_last), k_last, tiles_k_, "k_hi");
        Tile t = tile_at(y, coords_of(y, mn));
        Value* acc = accumulate(y, t, k_lo, k_hi);
        y.if_(y.cmp(CmpPred::gt, k_lo, zero_, "send_partial"), {}, [&](Builder& z) {
          z.store(acc, partial_at(z, g_.worker), false);
          z.flag_set(g_.FLAGS, g_.worker);
          return std::vector<Value*>{};
        }, [&](Builder& z) {
          // Contributors: the workers whose ranges start inside this tile's K tiles.
          Value* tile_end = z.mul(z.add(mn, one_), tiles_k_);
          Value* w_end = z.min(z.min(ceil_div(z, tile_end, per), g_.workers), ceil_div(z, g_.n_sk, per), "w_end");
          Value* total = z.for_(z.add(g_.worker, one_), w_end, one_, {acc},
                                [&](Builder& q, Value* w, const std::vector<Value*>& it) {
                                  q.flag_wait(g_.FLAGS, w);
                                  Value* part = q.load(acc_t_, partial_at(q, w), false, "part");
                                  return std::vector<Value*>{q.mat_bin(BinOp::add, it[0], part, "acc")};
                                }, "w")[0];
          epilogue(z, t, total);
          return std::vector<Value*>{};
        });
        return std::vector<Value*>{};
      }, "mn");
      return std::vector<Value*>{};
    }, {});
  }

  // Data-parallel: whole output tiles after the Stream-K ones, a contiguous block per worker.
  void data_parallel(Builder& b, Value* tiles_mn) {
    // Packed, without Stream-K: the cache-blocked loop nest; unpacked skinny products (order
    // "k_outer") take the same nest straight from A and B.
    if (p_.pack || p_.order == "k_outer") {
      b.if_(b.cmp(CmpPred::eq, g_.n_sk, zero_, "all_dp"), {}, [&](Builder& x) {
        blocked(x);
        return std::vector<Value*>{};
      }, [&](Builder& x) {
        tile_walk(x, tiles_mn);
        return std::vector<Value*>{};
      });
      return;
    }
    tile_walk(b, tiles_mn);
  }

  // Whole output tiles after the Stream-K ones, a contiguous block per worker: of the walk down
  // M (tile mt + tiles_m * (nt + tiles_n * batch)), or, for one product without Stream-K tiles
  // and at least as many row panels as workers, the row panels [m_lo, m_hi) of every column
  // panel (down M, then across N). A block of the walk down M gave one worker the last column
  // panel, whose tiles cross N's edge (masked loads and stores): on 2 Zen 5 cores f32
  // 3000x500x200 and 513x129x700 ran 1.25-1.3x longer on that worker (1.63 against 1.27 ms,
  // 0.30 against 0.23), while with the rows split each worker gets the same share of edge
  // tiles. One loop either way: the walk's row range and first tile are chosen at run time.
  void tile_walk(Builder& b, Value* tiles_mn) {
    Value* first = b.div(g_.n_sk, tiles_k_, "dp_first");
    Value* per = ceil_div(b, b.sub(tiles_mn, first), g_.workers, "dp_per");
    Value* lo = b.min(b.add(first, b.mul(g_.worker, per)), tiles_mn, "dp_lo");
    Value* hi = b.min(b.add(lo, per), tiles_mn, "dp_hi");
    Coords c0 = coords_of(b, lo);
    Value* by_rows = b.bin(BinOp::and_, b.cmp(CmpPred::eq, g_.n_sk, zero_),
                           b.bin(BinOp::and_, b.cmp(CmpPred::eq, b.mul(g_.batch1, g_.batch2), one_),
                                 b.cmp(CmpPred::ge, tiles_m_, g_.workers)), "by_rows");
    Value* rows_per = ceil_div(b, tiles_m_, g_.workers, "rows_per");
    Value* r_lo = b.min(b.mul(g_.worker, rows_per), tiles_m_, "r_lo");
    Value* r_hi = b.min(b.add(r_lo, rows_per), tiles_m_, "r_hi");
    Value* m_lo = b.select(by_rows, r_lo, zero_, "walk_m_lo");
    Value* m_hi = b.select(by_rows, r_hi, tiles_m_, "walk_m_hi");
    Value* count = b.select(by_rows, b.mul(b.sub(r_hi, r_lo), tiles_n_), b.sub(hi, lo), "walk_tiles");
    Value* mt0 = b.select(by_rows, r_lo, c0.mt, "mt0");
    Value* nt0 = b.select(by_rows, zero_, c0.nt, "nt0");
    b.for_(zero_, count, one_, {mt0, nt0, c0.b2, c0.b1}, [&](Builder& x, Value*, const std::vector<Value*>& it) {
      Coords c{it[0], it[1], it[2], it[3]};
      Tile t = tile_at(x, c);
      epilogue(x, t, accumulate(x, t, zero_, tiles_k_));
      Coords n = next(x, c, m_lo, m_hi);
      return std::vector<Value*>{n.mt, n.nt, n.b2, n.b1};
    }, "mn");
  }

  // The cache-blocked nest over packed panels (one batch): for each K tile, for each block of
  // MC row panels (their K-tile slices stay in L2), for each of the worker's column panels (its
  // K-tile slice stays in L1), for each row panel of the block: a tile's partial product, written
  // to C at the first K tile and added to C at the others. With C in another type than the
  // accumulator's (bf16 out), the partial sums stay in the accumulator type in a scratch matrix
  // (the workspace, unused without Stream-K: whole tiles, tiles_n * nr wide) until the last K
  // tile writes C once.
  //
  // The workers form a gm x gn grid (plan.grid_m, at most the workers; gn = workers / gm, the
  // workers past gm * gn idle): worker w takes row panels of part w % gm and column panels of
  // part w / gm.
  //
  // grid_m 0 (the default) chooses gm when the kernel runs, as the planner would: of the
  // divisors g of the workers with g <= tiles_m, the one whose blocks read the fewest rows of A
  // plus columns of B per worker (the smaller on ties), so that one code serves every size.
  void blocked(Builder& b) {
    Value* gm;
    if (p_.grid_m > 0) {
      gm = b.min(b.mul(b.index(p_.grid_m, "GM"), g_.shares), g_.workers, "gm");
    } else {
      Value* W = g_.workers;
      std::vector<Value*> best = b.for_(one_, b.add(W, one_), one_, {b.index(int64_t(1) << 60), one_},
                                        [&](Builder& x, Value* g, const std::vector<Value*>& it) {
        Value* ok = x.bin(BinOp::and_, x.cmp(CmpPred::eq, x.rem(W, g), zero_), x.cmp(CmpPred::le, g, tiles_m_));
        Value* cost = x.add(x.mul(ceil_div(x, tiles_m_, g), MR_), x.mul(ceil_div(x, tiles_n_, x.div(W, g)), NR_));
        Value* better = x.bin(BinOp::and_, ok, x.cmp(CmpPred::lt, cost, it[0]), "better");
        return std::vector<Value*>{x.select(better, cost, it[0]), x.select(better, g, it[1])};
      }, "g");
      gm = best[1];
    }
    Value* gn = b.div(g_.workers, gm, "gn");
    Value* wm = b.rem(g_.worker, gm, "wm");
    Value* wn = b.div(g_.worker, gm, "wn");  // >= gn: an idle worker (empty ranges)
    Value* per = ceil_div(b, tiles_n_, gn, "cols_per");
    Value* nlo = b.min(b.mul(wn, per), tiles_n_, "n_lo");
    Value* nhi = b.min(b.add(nlo, per), tiles_n_, "n_hi");
    Value* rows_per = ceil_div(b, tiles_m_, gm, "rows_per");
    Value* mlo = b.min(b.mul(wm, rows_per), tiles_m_, "m_lo");
    Value* mhi = b.min(b.add(mlo, rows_per), tiles_m_, "m_hi");
    Value* MC = b.index(p_.mc_tiles, "MC");
    cold_nlo_ = nlo, cold_nhi_ = nhi, cold_mhi_ = mhi;  // (amx_prefetch 6: cold_offsets)
    Value* scratch_cols = b.mul(tiles_n_, NR_, "scratch_cols");
    // inline_b: the worker's slot of B (its column panels' slices of one K tile, kt x nr each,
    // one after the other) and of their column sums (nr each); cols_per panels a worker (one
    // row of workers: gn is the worker count).
    if (p_.inline_b) {
      slot_pb_ = b.ptr_offset(g_.PB, b.mul(b.mul(b.mul(g_.worker, per), NR_), g_.kt), "slot_b");
      if (needs_column_sums(p_)) slot_cs_ = b.ptr_offset(g_.CS, b.mul(b.mul(g_.worker, per), NR_), "slot_sums");
      slot_nlo_ = nlo;
    }
    // The tiles mt in [m_lo, m_hi) of column panel nt, K tile kt: blocks of MC row panels.
    auto rows = [&](Builder& rx, Value* kt, Value* nt, Value* m_lo, Value* m_hi) {
      rx.for_(m_lo, m_hi, one_, {}, [&](Builder& tx, Value* mt, const std::vector<Value*>&) {
        tile(tx, kt, mt, nt, scratch_cols, m_lo);
        return std::vector<Value*>{};
      }, "mt");
    };
    // inline_b: for each K tile, the slices of the worker's column panels packed into its slot
    // first (B's rows read along their length, which the prefetchers follow), then the nest.
    // One K tile of one block of row panels [mb, mend): each of the worker's column panels in turn.
    auto panels = [&](Builder& x, Value* kt, Value* mb, Value* mend) {
      x.for_(nlo, nhi, one_, {}, [&](Builder& nx, Value* nt, const std::vector<Value*>&) {
        rows(nx, kt, nt, mb, mend);
        return std::vector<Value*>{};
      }, "nt");
    };
    if (p_.nc_tiles > 0) {  // (plan nc_tiles: blocks of column panels, each row panel across a block; never inline_b)
      Value* NC = b.index(p_.nc_tiles, "NC");
      b.for_(zero_, tiles_k_, one_, {}, [&](Builder& kx, Value* kt, const std::vector<Value*>&) {
        kx.for_(nlo, nhi, NC, {}, [&](Builder& nx, Value* nb, const std::vector<Value*>&) {
          Value* nend = nx.min(nx.add(nb, NC), nhi, "n_end");
          nx.for_(mlo, mhi, one_, {}, [&](Builder& mx, Value* mt, const std::vector<Value*>&) {
            mx.for_(nb, nend, one_, {}, [&](Builder& tx, Value* nt, const std::vector<Value*>&) {
              tile(tx, kt, mt, nt, scratch_cols);
              return std::vector<Value*>{};
            }, "nt");
            return std::vector<Value*>{};
          }, "mt");
          return std::vector<Value*>{};
        }, "nb");
        return std::vector<Value*>{};
      }, "kt");
      return;
    }
    if (p_.k_inner) {  // (plan k_inner: each block of row panels through every K tile; never inline_b)
      b.for_(mlo, mhi, MC, {}, [&](Builder& mx, Value* mb, const std::vector<Value*>&) {
        Value* mend = mx.min(mx.add(mb, MC), mhi, "m_end");
        mx.for_(zero_, tiles_k_, one_, {}, [&](Builder& kx, Value* kt, const std::vector<Value*>&) {
          panels(kx, kt, mb, mend);
          return std::vector<Value*>{};
        }, "kt");
        return std::vector<Value*>{};
      }, "mb");
      return;
    }
    b.for_(zero_, tiles_k_, one_, {}, [&](Builder& kx, Value* kt, const std::vector<Value*>&) {
      if (p_.inline_b) {
        Value* k0 = kx.mul(kt, g_.kt, "k0");
        pack_b_rows(kx, k0, kx.min(kx.add(k0, g_.kt), Kp_, "k1"), nlo, nhi);
      }
      kx.for_(mlo, mhi, MC, {}, [&](Builder& mx, Value* mb, const std::vector<Value*>&) {
        panels(mx, kt, mb, mx.min(mx.add(mb, MC), mhi, "m_end"));
        return std::vector<Value*>{};
      }, "mb");
      return std::vector<Value*>{};
    }, "kt");
    if (p_.inline_b) slot_pb_ = slot_cs_ = slot_nlo_ = slot_k0_ = nullptr;  // (this branch only; inline_b plans are data-parallel)
  }

  // One tile of the blocked nest: row panel mt, column panel nt, K tile kt.
  void tile(Builder& tx, Value* kt, Value* mt, Value* nt, Value* scratch_cols, Value* mb = nullptr) {
    Tile t = tile_at(tx, Coords{mt, nt, zero_, zero_});
    Value* first = tx.cmp(CmpPred::eq, kt, zero_, "first_k");
    if (p_.amx && p_.pack) {
      // AMX: the partial sums stay in the accumulator type in the scratch matrix and
      // each K tile continues them in the tiles (tileloadd / tilestored of whole tiles,
      // no trip through vectors), so a short K tile whose B slice stays in L1 costs
      // little per tile; the last K tile applies the epilogue once.
      // k_inner: tile (mt, nt) at tile (mt * tiles_n + nt) of the scratch, one 4 KiB block (the
      // scratch holds tiles_m x tiles_n whole tiles either way).
      Builder::Access part =
          p_.k_inner ? Builder::Access{tx.ptr_offset(g_.WS, tx.mul(tx.add(tx.mul(mt, tiles_n_), nt), tx.mul(MR_, NR_)), "part"),
                                       zero_, zero_, NR_, one_, MR_, NR_}
                     : Builder::Access{g_.WS, t.m0, t.n0, scratch_cols, one_, g_.M, scratch_cols};
      Value* last = tx.cmp(CmpPred::eq, tx.add(kt, one_), tiles_k_, "last_k");
      auto finish = [&](Builder& e, Value* acc) {
        e.if_(last, {}, [&](Builder& f) {
          epilogue(f, t, acc);
          return std::vector<Value*>{};
        }, [&](Builder& f) {
          f.store(acc, part, false);
          return std::vector<Value*>{};
        });
        return std::vector<Value*>{};
      };
      const std::pair<Value*, Value*> far = mb ? cold_offsets(tx, mt, nt, mb) : std::pair<Value*, Value*>{nullptr, nullptr};
      Value *far_a = far.first, *far_b = far.second;  // (not structured bindings: lambdas capture them)
      tx.if_(first, {}, [&](Builder& e) { return finish(e, accumulate_packed(e, t, kt, e.add(kt, one_), nullptr, far_a, far_b)); },
             [&](Builder& e) {
               Value* sum = e.load(acc_t_, part, false, "partial");
               return finish(e, accumulate_packed(e, t, kt, e.add(kt, one_), sum, far_a, far_b));
             });
      return;
    }
    Value* acc = accumulate(tx, t, kt, tx.add(kt, one_));
    if (slot_cs_)  // inline_b, s8 x s8: this K tile's 128 x column sums (the epilogue subtracts none)
      acc = tx.mat_bin(BinOp::sub, acc, tx.load(acc_t_, {slot_sums(tx, nt), zero_, zero_, zero_, one_, MR_, NR_}, false, "sums"));
    if (p_.c_type == T && !p_.epilogue.any()) {
      tx.if_(first, {}, [&](Builder& e) {
        epilogue(e, t, acc);
        return std::vector<Value*>{};
      }, [&](Builder& e) {
        epilogue(e, t, acc, true);
        return std::vector<Value*>{};
      });
      return;
    }
    Builder::Access part{g_.WS, t.m0, t.n0, scratch_cols, one_, g_.M, scratch_cols};
    Value* last = tx.cmp(CmpPred::eq, tx.add(kt, one_), tiles_k_, "last_k");
    tx.if_(last, {}, [&](Builder& e) {
      Value* total = e.if_(first, {acc_t_}, [&](Builder& f) { return std::vector<Value*>{acc}; },
                           [&](Builder& f) {
                             return std::vector<Value*>{f.mat_bin(BinOp::add, acc, f.load(acc_t_, part, false))};
                           })[0];
      epilogue(e, t, total);
      return std::vector<Value*>{};
    }, [&](Builder& e) {
      Value* sum = e.if_(first, {acc_t_}, [&](Builder& f) { return std::vector<Value*>{acc}; },
                         [&](Builder& f) {
                           return std::vector<Value*>{f.mat_bin(BinOp::add, acc, f.load(acc_t_, part, false))};
                         })[0];
      e.store(sum, part, false);
      return std::vector<Value*>{};
    });
  }

  const GemmPlan& p_;
  Function& f_;
  const ScalarType T;
  GemmParams g_{};
  EpilogueOperands epi_;
  Type acc_t_;
  Value *one_ = nullptr, *zero_ = nullptr, *sb_c_ = nullptr, *sc_c_ = nullptr, *MR_ = nullptr, *NR_ = nullptr,
        *KB_ = nullptr, *fzero_ = nullptr, *tiles_m_ = nullptr, *tiles_n_ = nullptr, *tiles_k_ = nullptr,
        *Kp_ = nullptr, *VW_ = nullptr;
  // inline_b: the worker's slot of B's panels and column sums, its first column panel, the K tile's start
  Value *slot_pb_ = nullptr, *slot_cs_ = nullptr, *slot_nlo_ = nullptr, *slot_k0_ = nullptr;
  // the blocked nest's worker ranges (amx_prefetch 6: cold_offsets)
  Value *cold_nlo_ = nullptr, *cold_nhi_ = nullptr, *cold_mhi_ = nullptr;
};

}  // namespace

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
