// The GEMM recipe's walks over the output tiles: Stream-K ranges with their partial tiles through
// the workspace and flags, the data-parallel tiles, the tile walk, and the dot walk of
// matrix-vector products.
#include "build/gemm_recipe_internal.h"

#include "core/error.h"

namespace coopjit {

// Matrix-vector products (order "dot": the kernel's N is 1, A's rows have unit stride along K):
// each worker takes a contiguous block of mr-row tiles of A and streams them
// once; an mr x nr accumulator (nr lanes along K) gathers A's rows times B's column, read as
// an mr x nr matrix with row stride 0 (one vector, loaded once per step after CSE), and one
// row reduction per tile gives its mr results. A GEMM tile would spend a whole vector of
// lanes per output element of the single column. B's column is read with unit stride: another
// stride is gathered into a contiguous copy first (run_gemm). A batch of products: the row tiles
// of every product in turn (product-major), each worker a contiguous range of them, walked as
// each product's part of the range (one division a product, none a tile).
void GemmRecipe::dot(Builder& b) {
  const Type in_a = Type::matrix(p_.a_type, p_.mr, p_.nr, Use::acc, Scope::subgroup);
  const Type in_b = Type::matrix(p_.b_type, p_.mr, p_.nr, Use::acc, Scope::subgroup);
  const Type col_t = Type::matrix(T, p_.mr, 1, Use::acc, Scope::subgroup);
  const Type c_col = Type::matrix(p_.c_type, p_.mr, 1, Use::acc, Scope::subgroup);
  Value* all = b.mul(b.mul(g_.batch1, g_.batch2), tiles_m_, "tiles_all");
  Value* per = ceil_div(b, all, g_.workers, "rows_per");
  Value* lo = b.min(b.mul(g_.worker, per), all, "lo");
  Value* hi = b.min(b.add(lo, per), all, "hi");
  Value* k_main = b.sub(g_.K, b.rem(g_.K, NR_), "k_main");
  // The products the range meets: [lo / tiles_m, ceil(hi / tiles_m)).
  Value* bi_lo = b.div(lo, tiles_m_, "bi_lo");
  Value* bi_hi = ceil_div(b, hi, tiles_m_, "bi_hi");
  b.for_(bi_lo, bi_hi, one_, {}, [&](Builder& bx, Value* bi, const std::vector<Value*>&) {
    Value* first = bx.mul(bi, tiles_m_, "first");
    Value* mt_lo = bx.sub(bx.bin(BinOp::max, lo, first), first, "mt_lo");
    Value* mt_hi = bx.sub(bx.min(hi, bx.add(first, tiles_m_)), first, "mt_hi");
    // The product's A, B and C (GemmRecipe::tile_at's batch offsets; N has one tile).
    const Tile bt = tile_at(bx, {zero_, zero_, bx.rem(bi, g_.batch2, "b2"), bx.div(bi, g_.batch2, "b1")});
    bx.for_(mt_lo, mt_hi, one_, {}, [&](Builder& x, Value* mt, const std::vector<Value*>&) {
      Value* m0 = x.mul(mt, MR_, "m0");
      auto step = [&](Builder& y, Value* k, Value* acc, bool checked_a, bool tail) {
        Value* a = y.load(in_a, {bt.A, m0, k, g_.sa_r, one_, g_.M, g_.K}, checked_a, "a");
        // b_prefetch: the walk's streamed matrix is A here; each of its mr rows' lines `b_prefetch`
        // bytes ahead go to L1 (gemm_plan.h). Not in the K tail (nothing of the row is left ahead).
        if (p_.b_prefetch && !tail) a->def->attrs["prefetch"] = int64_t(p_.b_prefetch);
        Value* v = y.load(in_b, {bt.B, zero_, k, zero_, one_, MR_, g_.K}, checked_a, "x");
        if (p_.a_type != T) a = y.convert_matrix(a, acc_t_);
        if (p_.b_type != T) v = y.convert_matrix(v, acc_t_);
        return y.mat_bin(BinOp::add, acc, y.mat_bin(BinOp::mul, a, v), "acc");
      };
      auto rows = [&](Builder& y, bool checked) {
        Value* acc = y.splat(acc_t_, fzero_, "acc");
        auto steps = [&](Builder& z, Value* lo, Value* hi, Value* init) {
          return z.for_(lo, hi, NR_, {init}, [&](Builder& kx, Value* k, const std::vector<Value*>& it) {
            return std::vector<Value*>{step(kx, k, it[0], checked, false)};
          }, "k")[0];
        };
        if (flush_steps() > 0) {
          // Two-level float sum (as GemmRecipe::accumulate): each lane's partial sum of
          // flush_steps() steps goes into a second accumulator, so a lane's error grows like
          // (K / (nr kc) + kc) * eps, not K / nr * eps.
          acc = two_level_sum(y, zero_, k_main, y.mul(NR_, y.index(flush_steps()), "kc"), acc, steps);
        } else {
          acc = steps(y, zero_, k_main, acc);
        }
        // The K tail: checked loads read zeros past K.
        acc = y.if_(y.cmp(CmpPred::lt, k_main, g_.K, "k_tail"), {acc_t_},
                    [&](Builder& z) { return std::vector<Value*>{step(z, k_main, acc, true, true)}; },
                    [&](Builder&) { return std::vector<Value*>{acc}; })[0];
        return std::vector<Value*>{acc};
      };
      Value* acc = x.if_(x.cmp(CmpPred::le, x.add(m0, MR_), g_.M, "full_m"), {acc_t_},
                         [&](Builder& y) { return rows(y, false); }, [&](Builder& y) { return rows(y, true); })[0];
      Value* sums = x.reduce(acc, ReduceMode::row, col_t, BinOp::add, "sums");
      // Any order: each lane already holds the sum of every nr-th element of the row, so no element
      // order is left to keep; the lowering then sums a row's vectors pairwise and its lanes by
      // rotations (a tree: 3 + 4 adds a row of 64 f32) where the element-by-element chain was 63
      // dependent scalar adds a row, 252 a tile of 4 rows, between one tile's loads and the next's.
      sums->def->attrs["order"] = std::string("any");
      Value* result = x.scale(sums, g_.alpha, "result");
      Builder::Access c_at{bt.C, m0, zero_, g_.sc_r, one_, g_.M, one_};
      if (p_.epilogue.any()) {
        Builder::Access r_at{bt.R ? bt.R : g_.RES, m0, zero_, g_.sc_r, one_, g_.M, one_};
        result = apply_epilogue(x, p_.epilogue, epi_, result, m0, zero_, p_.mr, 1, true, [&](Builder& y, Value* r, const Type& e_t) {
          return p_.accumulate ? add_beta_c(y, r, c_col, c_at, true, e_t) : r;
        }, &r_at);
      } else if (p_.accumulate) {
        result = add_beta_c(x, result, c_col, c_at, true, col_t);
      }
      store_c(x, result, c_col, c_at, true);
      return std::vector<Value*>{};
    }, "mt");
    return std::vector<Value*>{};
  }, "bi");
}

// The worker's slot of the workspace: an mr x nr tile, row-major.
Builder::Access GemmRecipe::partial_at(Builder& b, Value* w) {
  Value* base = b.ptr_offset(g_.WS, b.mul(w, b.mul(MR_, NR_)), "partial");
  return {base, zero_, zero_, NR_, one_, MR_, NR_};
}

// Stream-K: the worker's contiguous range of the first n_sk global tiles. Its first output
// tile may start mid-K: that partial goes to the workspace and its flag is set. The worker
// holding K tile 0 of an output tile owns it: it adds the partials of the workers after it,
// in worker order (so the result does not depend on timing), then writes C.
void GemmRecipe::stream_k(Builder& b) {
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
      Value* acc = accumulate(y, t, k_lo, k_hi, true);
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
void GemmRecipe::data_parallel(Builder& b, Value* tiles_mn) {
  // Packed, without Stream-K: the cache-blocked loop nest; unpacked skinny products (order
  // "k_outer") take the same nest straight from A and B.
  if (p_.pack || p_.order == "k_outer") {
    if (!p_.streams()) {
      blocked(b);
      return;
    }
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
void GemmRecipe::tile_walk(Builder& b, Value* tiles_mn) {
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
  // walk_kc (long K): the blocks of K, each added into C, outside the tiles; else the plain walk (both
  // loops in the kernel, chosen once a call: a loop of one block cost 64^3 6% more, 2.86 -> 3.04 us).
  auto walk = [&](Builder& wb, bool two_level) {
    wb.for_(zero_, count, one_, {mt0, nt0, c0.b2, c0.b1}, [&](Builder& x, Value*, const std::vector<Value*>& it) {
      Coords c{it[0], it[1], it[2], it[3]};
      Tile t = tile_at(x, c);
      epilogue(x, t, accumulate(x, t, zero_, tiles_k_, two_level));
      Coords n = next(x, c, m_lo, m_hi);
      return std::vector<Value*>{n.mt, n.nt, n.b2, n.b1};
    }, "mn");
  };
  // Long K, float C without fused steps: blocks of about kFlushK elements of K, each added into C
  // (as the blocked nest adds each K tile, and a BLAS each kc block), so each output's error
  // grows like (K / kc + kc) * eps, not K * eps. (A second set of accumulators in registers
  // instead spilled the 8 x 48 f32 tile's: 200x200x8192 ran 14% longer on one Zen 5 core.)
  // Each block's K loop is the plain walk's from k = 0 (A and B advanced to the block, K the
  // elements left): the loop from a block's k0 kept more live values, and the 8 x 48 tile's
  // 200x200x8192 ran 8% longer.
  auto block = [&](Builder& x, const Tile& t, Value* kt0, Value* kc_tiles) {
    Value* k0 = x.mul(kt0, g_.kt, "kc0");
    Tile s = t;
    s.A = x.ptr_offset(t.A, x.mul(k0, p_.unit_a ? one_ : g_.sa_c), "a_kc");
    s.B = x.ptr_offset(t.B, x.mul(k0, g_.sb_r), "b_kc");
    Value* K_all = g_.K;
    g_.K = x.sub(K_all, k0, "k_left");
    Value* acc = accumulate(x, s, zero_, kc_tiles);
    g_.K = K_all;
    x.if_(x.cmp(CmpPred::eq, kt0, zero_, "first_kc"), {}, [&](Builder& z) {
      epilogue(z, t, acc);
      return std::vector<Value*>{};
    }, [&](Builder& z) {
      epilogue(z, t, acc, true);
      return std::vector<Value*>{};
    });
  };
  // N over 64 and rows of a tile's B 192 bytes or wider (the 8 x 48 f32 and 8 x 24 f64 tiles of
  // AVX-512): the block loop is outside the walk over the worker's tiles (as a BLAS's kc loop is
  // outside its tiles), so the tiles down one column panel share the block's rows of B (2048 x 48
  // f32: 384 KiB, held in L2) where each tile's own walk over all of K streamed the whole panel
  // again (96x96x16384: 12 tiles a panel, 3 MiB each); each output's sum is the same, in the same
  // order. One Zen 5 core, CPU time, 9 rounds: f32 96x96x16384 1.54 -> 1.36 ms, 200x200x8192 3.93
  // -> 3.14, 128x128x8192 1.79 -> 1.51, f64 96x96x8192 1.73 -> 1.32. N up to 64 ran longer so
  // (f64 64x64x8192 0.68 -> 0.90 ms; f32 64x64x16384, 32x32x16384 and 128x32x16384 10-40% in some
  // rounds) and keeps the blocks inside each tile, as do narrower tiles (not measured);
  // benchmarks/recorded/issue14-zen5-2core-int8-session27.txt.
  const bool blocks_outside = p_.nr * int64_t(ir::size_in_bytes(p_.b_type)) >= 192;
  auto walk_kc_inside = [&](Builder& wb, Value* kc_tiles) {
    wb.for_(zero_, count, one_, {mt0, nt0, c0.b2, c0.b1}, [&](Builder& x, Value*, const std::vector<Value*>& it) {
      Coords c{it[0], it[1], it[2], it[3]};
      Tile t = tile_at(x, c);
      x.for_(zero_, tiles_k_, kc_tiles, {}, [&](Builder& y, Value* kt0, const std::vector<Value*>&) {
        block(y, t, kt0, kc_tiles);
        return std::vector<Value*>{};
      }, "kc");
      Coords n = next(x, c, m_lo, m_hi);
      return std::vector<Value*>{n.mt, n.nt, n.b2, n.b1};
    }, "mn");
  };
  // Both orders in one loop nest, chosen at run time by the outer loop's step: blocks of K
  // (kc_tiles) outside the walk over the tiles where N is over 64, else all of K in one outer
  // step, its blocks inside each tile. One copy of the tile's K loops, not two: each copy is a
  // main and a last-step K loop for each of the three edge cases; the second copy was 6 of the
  // 27 K loops of the 6 x 64 f32 kernel (session 35; the Stream-K walk, now only in kernels
  // that can stream, another 9).
  auto walk_kc = [&](Builder& wb, Value* kc_tiles) {
    if (!blocks_outside) {
      walk_kc_inside(wb, kc_tiles);
      return;
    }
    Value* outer = wb.select(wb.cmp(CmpPred::gt, g_.N, wb.index(64), "wide_n"), kc_tiles, tiles_k_, "kc_outer");
    wb.for_(zero_, tiles_k_, outer, {}, [&](Builder& y, Value* ko, const std::vector<Value*>&) {
      Value* ko_end = y.min(y.add(ko, outer), tiles_k_, "kc_outer_end");
      y.for_(zero_, count, one_, {mt0, nt0, c0.b2, c0.b1}, [&](Builder& x, Value*, const std::vector<Value*>& it) {
        Coords c{it[0], it[1], it[2], it[3]};
        Tile t = tile_at(x, c);
        x.for_(ko, ko_end, kc_tiles, {}, [&](Builder& z, Value* kt0, const std::vector<Value*>&) {
          block(z, t, kt0, kc_tiles);
          return std::vector<Value*>{};
        }, "kc");
        Coords n = next(x, c, m_lo, m_hi);
        return std::vector<Value*>{n.mt, n.nt, n.b2, n.b1};
      }, "mn");
      return std::vector<Value*>{};
    }, "kc_o");
  };
  if (!p_.pack && flush_steps() > 0 && p_.c_type == T && !p_.epilogue.any()) {
    Value* kc_tiles = b.bin(BinOp::max, b.div(b.index(kFlushK), g_.kt), one_, "kc_tiles");
    b.if_(b.cmp(CmpPred::gt, tiles_k_, kc_tiles, "long_k"), {}, [&](Builder& x) {
      walk_kc(x, kc_tiles);
      return std::vector<Value*>{};
    }, [&](Builder& x) {
      walk(x, false);  // (K up to kFlushK: one block)
      return std::vector<Value*>{};
    });
    return;
  }
  walk(b, true);  // (C of another type, fused steps: two_level sums in registers)
}

}  // namespace coopjit
