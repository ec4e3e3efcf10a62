// The GEMM recipe's cache-blocked loop nest: each worker's block of row and column panels, K tile
// by K tile, its tiles, and (amx_prefetch 6) the cold panels fetched into L2 ahead of them.
#include "build/gemm_recipe_internal.h"

#include "core/error.h"

namespace coopjit {

std::pair<Value*, Value*> GemmRecipe::cold_offsets(Builder& b, Value* mt, Value* nt, Value* mb) {
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
void GemmRecipe::blocked(Builder& b) {
  Value* gm;
  if (p_.inline_b) {
    // inline_b: one row of workers (grid_m 1), shares too: each share a range of column panels
    // with its own slot (phase 2 launches of threads x shares shares, GemmPlan::shares).
    gm = one_;
  } else if (p_.grid_m > 0) {
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
  // row of workers: gn is the worker count; with shares, a share's slot).
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
  if (p_.nc_tiles > 0 && !p_.k_inner) {  // (plan nc_tiles: blocks of column panels, each row panel across a block; never inline_b)
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
  if (p_.k_inner && p_.nc_tiles > 0) {
    // (plan k_inner with nc_tiles, session 28: blocks of C of MC row panels x NC column panels,
    // each block through every K tile, its partial sums kept in L2 (the scratch's 4 KiB tile
    // blocks); within a K tile, each column panel's slice of B (nr x kt) is read by the block's
    // row panels in turn, from L1 where kt is short enough)
    Value* NC = b.index(p_.nc_tiles, "NC");
    b.for_(mlo, mhi, MC, {}, [&](Builder& mx, Value* mb, const std::vector<Value*>&) {
      Value* mend = mx.min(mx.add(mb, MC), mhi, "m_end");
      mx.for_(nlo, nhi, NC, {}, [&](Builder& nx, Value* nb, const std::vector<Value*>&) {
        Value* nend = nx.min(nx.add(nb, NC), nhi, "n_end");
        nx.for_(zero_, tiles_k_, one_, {}, [&](Builder& kx, Value* kt, const std::vector<Value*>&) {
          kx.for_(nb, nend, one_, {}, [&](Builder& cx, Value* nt, const std::vector<Value*>&) {
            rows(cx, kt, nt, mb, mend);
            return std::vector<Value*>{};
          }, "nt");
          return std::vector<Value*>{};
        }, "kt");
        return std::vector<Value*>{};
      }, "nb");
      return std::vector<Value*>{};
    }, "mb");
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
void GemmRecipe::tile(Builder& tx, Value* kt, Value* mt, Value* nt, Value* scratch_cols, Value* mb) {
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
    // plan.cycles: the tile's K loop (with the load of its partial sums) counted as the first row
    // panel of its block (B's slice cold) or another, then its epilogue or store of partial sums.
    // plan.c_prefetch: the lines this K tile will write (C's at the last K tile, else the scratch's)
    // prefetched for writing during its K loop, two a step.
    StepFn lines;
    if (p_.c_prefetch)
      lines = [&](Builder& s, Value* step) {
        s.if_(last, {}, [&](Builder& y) {
          prefetch_block_lines(y, step, {t.C, t.m0, t.n0, g_.sc_r, sc_c_, g_.M, g_.N});
          return std::vector<Value*>{};
        }, [&](Builder& y) {
          prefetch_block_lines(y, step, part);
          return std::vector<Value*>{};
        });
      };
    auto timed = [&](Builder& e, bool continues) {
      Value* t0 = g_.CYC ? e.cycles("t_tile") : nullptr;
      Value* sum = continues ? e.load(acc_t_, part, false, "partial") : nullptr;
      Value* acc = accumulate_packed(e, t, kt, e.add(kt, one_), sum, far_a, far_b, lines);
      if (!g_.CYC) return finish(e, acc);
      Value* other = e.index(int64_t(CycleField::tiles_other));
      Value* field = mb ? e.select(e.cmp(CmpPred::eq, mt, mb), e.index(int64_t(CycleField::tiles_first)), other, "cyc_field")
                        : other;
      Value* t1 = cycles_since(e, t0, field);
      count_one(e, e.add(field, one_));
      finish(e, acc);
      cycles_since(e, t1, CycleField::tile_stores);
      return std::vector<Value*>{};
    };
    tx.if_(first, {}, [&](Builder& e) { return timed(e, false); }, [&](Builder& e) { return timed(e, true); });
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
  // The unpacked nest's phase 4 (the last K tile of a K split with a fused epilogue,
  // GemmPlan::ksplit): the scratch holds the other parts' sum, which its first K tile adds too.
  if (!p_.pack) first = tx.select(first, tx.cmp(CmpPred::ne, g_.phase, tx.index(4), "not_k_last"), first, "first_k");
  tx.if_(last, {}, [&](Builder& e) {
    Value* total = e.if_(first, {acc_t_}, [&](Builder& f) { return std::vector<Value*>{acc}; },
                         [&](Builder& f) {
                           return std::vector<Value*>{f.mat_bin(BinOp::add, acc, f.load(acc_t_, part, false))};
                         })[0];
    // The unpacked nest with 16-bit C or a fused epilogue (phase 3: one part of a K split,
    // GemmPlan::ksplit): the part's sums stay in the scratch, in the accumulator type, and the
    // caller adds the parts and writes C (16-bit C), or a phase 4 launch of the last K tile
    // adds their sum and applies the epilogue once.
    if (!p_.pack) {
      e.if_(e.cmp(CmpPred::eq, g_.phase, e.index(3), "k_part"), {}, [&](Builder& f) {
        f.store(total, part, false);
        return std::vector<Value*>{};
      }, [&](Builder& f) {
        epilogue(f, t, total);
        return std::vector<Value*>{};
      });
      return std::vector<Value*>{};
    }
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

}  // namespace coopjit
