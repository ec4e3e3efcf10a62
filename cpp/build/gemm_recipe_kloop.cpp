// The GEMM recipe's K loop: one output tile's sum over K tiles, unpacked (edge checks only in
// edge tiles) or on packed panels (FMAs, dot instructions or AMX tiles), and its alpha / beta
// epilogue into C.
#include "build/gemm_recipe_internal.h"

#include <cstdint>

#include "core/error.h"

namespace coopjit {

// acc over K tiles [k_lo, k_hi) of tile t; loads are checked only in edge tiles and in the
// last partial K step.
Value* GemmRecipe::two_level_sum(Builder& b, Value* lo, Value* hi, Value* chunk, Value* acc, const StepsFn& steps) {
  return b.if_(b.cmp(CmpPred::gt, b.sub(hi, lo), chunk, "long_k"), {acc_t_}, [&](Builder& z) {
    return z.for_(lo, hi, chunk, {acc}, [&](Builder& y, Value* kk, const std::vector<Value*>& it) {
      Value* part = steps(y, kk, y.min(y.add(kk, chunk), hi, "kc_end"), y.splat(acc_t_, fzero_, "part"));
      return std::vector<Value*>{y.mat_bin(BinOp::add, it[0], part, "acc")};
    }, "kc");
  }, [&](Builder& z) { return std::vector<Value*>{steps(z, lo, hi, acc)}; })[0];
}

Value* GemmRecipe::accumulate(Builder& b, const Tile& t, Value* k_lo, Value* k_hi, bool two_level) {
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
    // (in_k: a step of the K loop, whose kb rows of B are all below K: B's checked loads there bound
    // its rows by INT64_MAX, so only its columns are checked, with a mask the loop does not
    // recompute; the per-row checks became branches in the loop, which spilled accumulators of the
    // 8-lane tiles: 100x37x250 f32 on Zen 4, 4 x 40 lanes, one thread 28.8 -> 19.1 us)
    auto step = [&](Builder& kb, Value* k, Value* acc_in, bool chk_a, bool chk_b, bool in_k) {
      Value* a = kb.load(a_t, {t.A, t.m0, k, g_.sa_r, p_.unit_a ? one_ : g_.sa_c, g_.M, g_.K}, chk_a, "a");
      Value* bm = kb.load(b_t, {t.B, k, t.n0, g_.sb_r, sb_c_, in_k ? kb.index(INT64_MAX) : g_.K, g_.N}, chk_b, "b");
      if (p_.b_prefetch && !p_.pack) bm->def->attrs["prefetch"] = int64_t(p_.b_prefetch);  // (k_outer plans, gemm_plan.h)
      return kb.mul_add(a, bm, acc_in, "acc");
    };
    Value* acc = x.splat(acc_t_, fzero_, "acc");
    auto steps = [&](Builder& y, Value* lo, Value* hi, Value* init) {
      return y.for_(lo, hi, KB_, {init}, [&](Builder& kb, Value* k, const std::vector<Value*>& it) {
        return std::vector<Value*>{step(kb, k, it[0], check_a, check_b, true)};
      }, "k")[0];
    };
    if (two_level && flush_steps() > 0) {
      // A float accumulator is flushed every flush_steps() K steps into a second sum (two-level
      // summation) where the range is longer: each output's error grows like (K / kc + kc) * eps
      // rather than K * eps (a BLAS adds each kc block into C). The tile walk and Stream-K run
      // their whole K range here in one call; the blocked nest's K tiles are its own kc blocks.
      acc = two_level_sum(x, k0, k_main, x.mul(KB_, x.index(flush_steps()), "kc"), acc, steps);
    } else {
      acc = steps(x, k0, k_main, acc);
    }
    // The last partial K step (K not a multiple of KB) reads zeros past K.
    acc = x.if_(x.cmp(CmpPred::lt, k_main, k1, "k_tail"), {acc_t_},
                [&](Builder& y) { return std::vector<Value*>{step(y, k_main, acc, true, true, false)}; },
                [&](Builder&) { return std::vector<Value*>{acc}; })[0];
    return std::vector<Value*>{acc};
  };
  return b.if_(full_m, {acc_t_}, [&](Builder& x) {
    return x.if_(full_n, {acc_t_}, [&](Builder& y) { return body(y, false, false); },
                 [&](Builder& y) { return body(y, false, true); });
  }, [&](Builder& x) { return body(x, true, true); })[0];
}

// `init`: the partial sum to continue (AMX: loaded into the tiles), else zeros.
// far_a / far_b (amx_prefetch 6): the bytes from each K step of the A / B panel to the lines
// of a later kernel's cold panel that go to L2 with it (see cold_offsets).
void GemmRecipe::prefetch_block_lines(Builder& b, Value* step, const Builder::Access& at) {
  const int64_t es = ir::size_in_bytes(at.ptr->type.scalar);
  const int64_t per_line = 64 / es, lines_per_row = (int64_t(p_.nr) * es + 63) / 64;
  Value* r = b.min(b.add(at.row, b.min(step, b.index(p_.mr - 1))), b.sub(at.rows, one_), "pf_row");
  Value* row = b.mul(r, at.stride_row);
  for (int64_t l = 0; l < lines_per_row; ++l) {
    Value* c = l ? b.min(b.add(at.col, b.index(l * per_line)), b.sub(at.cols, one_), "pf_col") : at.col;
    b.prefetch(at.ptr, b.add(row, b.mul(c, at.stride_col)), true, 3);
  }
}

Value* GemmRecipe::accumulate_packed(Builder& b, const Tile& t, Value* k_lo, Value* k_hi, Value* init,
                                          Value* far_a, Value* far_b, const StepFn& per_step) {
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
    if (per_step) per_step(kb, kb.div(kb.sub(k, k0), KB_, "step"));
    return std::vector<Value*>{kb.mul_add(a, bm, it[0], "acc")};
  }, "k")[0];
}

Value* GemmRecipe::add_beta_c(Builder& b, Value* result, const Type& c_t, const Builder::Access& c_at, bool checked,
                              const Type& e_t) {
  Value* c_old = b.load(c_t, c_at, checked, "c");
  if (p_.c_type != e_t.scalar) c_old = b.convert_matrix(c_old, e_t);
  return b.mat_bin(BinOp::add, result, b.scale(c_old, g_.beta), "result");
}

void GemmRecipe::store_c(Builder& b, Value* result, const Type& c_t, const Builder::Access& c_at, bool checked) {
  if (p_.c_type != result->type.scalar) result = b.convert_matrix(result, c_t, false, "out");
  b.store(result, c_at, checked);
}

// C = alpha * acc (+ beta * C), by the tile's owner only, once; with add_to_c, C += alpha * acc
// (the later K blocks of the blocked loop nest).
void GemmRecipe::epilogue(Builder& b, const Tile& t, Value* acc, bool add_to_c) {
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
        return p_.accumulate ? add_beta_c(y, r, c_t, c_at, checked, e_t) : r;
      }, t.R ? &r_at : nullptr);
    } else if (add_to_c) {  // (only with C in the accumulator type at run time: see data_parallel)
      Value* c_old = x.load(c_t, c_at, checked, "c");
      if (p_.c_type != T) c_old = x.convert_matrix(c_old, acc_t_);
      result = x.mat_bin(BinOp::add, result, c_old, "result");
    } else if (p_.accumulate) {
      result = add_beta_c(x, result, c_t, c_at, checked, acc_t_);
    }
    store_c(x, result, c_t, c_at, checked);
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

}  // namespace coopjit
