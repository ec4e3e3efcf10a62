// The GEMM recipe's packing: A and B copied into mr-row / nr-column panels (VNNI channels for the
// dot instructions and AMX tiles), B packed by its reader (inline_b), and the panels' addressing.
#include "build/gemm_recipe_internal.h"

#include <algorithm>

#include "core/error.h"

namespace coopjit {

// Packing (plan.pack, one batch): before any tile, the workers copy A into mr-row panels
// (column-major inside: the k-th column of a panel is mr consecutive elements) and B into
// nr-column panels (row-major inside), zero-padded to whole tiles and to Kp = K rounded up to
// KB: in the accumulator type, or with VNNI (plan.vnni = w) in the input types, w consecutive
// K elements side by side (a column of w-element channels for A, a row of them for B). Tiles
// then read only contiguous, aligned-enough, never-ragged memory: no edge checks, no K tail,
// no cache-set conflicts of strided rows.
void GemmRecipe::pack(Builder& b) {
  Kp_ = b.mul(ceil_div(b, g_.K, KB_), KB_, "Kp");
  const int w = p_.vnni;
  VW_ = b.index(w, "VNNI");
  const ScalarType pa_t = packed_a_type(p_), pb_t = packed_b_type(p_);
  const Type b_in = Type::matrix(p_.b_type, p_.kb, p_.nr, Use::b, Scope::subgroup);
  const Type b_pk = Type::matrix(pb_t, p_.kb, p_.nr, Use::b, Scope::subgroup);
  auto share = [&](Builder& x, Value* n, const char* hint) {
    Value* per = ceil_div(x, n, g_.workers);
    Value* lo = x.min(x.mul(g_.worker, per), n);
    return std::make_pair(lo, x.min(x.add(lo, per), n, hint));
  };
  // phase 2 (compute only): the panels are packed.
  Value* packs = b.cmp(CmpPred::ne, g_.phase, b.index(2), "packs");
  auto [alo, ahi] = share(b, p_.direct_a ? zero_ : b.select(packs, tiles_m_, zero_), "a_panels");  // direct_a: A is read where it is
  if (p_.own_a) {
    // own_a (one row of workers): each worker packs every row panel into its own copy of A, a
    // 64-byte multiple of elements apart (the runtime's layout), unless it has no column panel.
    const int64_t line = 64 / ir::size_in_bytes(packed_a_type(p_));
    Value* copy = b.mul(ceil_div(b, b.mul(b.mul(tiles_m_, MR_), Kp_), b.index(line)), b.index(line), "a_copy");
    g_.PA = b.ptr_offset(g_.PA, b.mul(g_.worker, copy), "own_pa");
    Value* has_cols = b.cmp(CmpPred::lt, b.mul(g_.worker, ceil_div(b, tiles_n_, g_.workers)), tiles_n_, "has_cols");
    alo = zero_;
    ahi = b.select(b.bin(BinOp::and_, packs, has_cols), tiles_m_, zero_, "a_panels");
  }
  // A unit column stride is a constant (the lowering's loads of a row become vector loads);
  // the bounds are checked only in the last panel and the K tail.
  Value* sa_c = p_.unit_a ? one_ : g_.sa_c;
  Value* k_main = b.mul(b.div(g_.K, KB_), KB_, "k_main");
  Value* t_pack = g_.CYC ? b.cycles("t_pack") : nullptr;
  // VNNI panels (not AMX) of a row-major A: full panels take 64 bytes of each row a step (a row
  // one vector load, the panel's mr x 16 channels one interleave and whole-vector stores); a kb
  // step packed each 4-byte channel with a store of its own.
  const int64_t wide_pk = !p_.amx && w > 1 && p_.unit_a ? std::max<int64_t>(p_.kb, 64 / ir::size_in_bytes(p_.a_type)) : p_.kb;
  b.for_(alo, ahi, one_, {}, [&](Builder& x, Value* q, const std::vector<Value*>&) {
    Value* dst = x.ptr_offset(g_.PA, x.mul(x.mul(q, MR_), Kp_), "panel");
    Value* m0 = x.mul(q, MR_);
    // AMX panels: each mr x kb block row-major, copied by rows (vector loads and stores).
    const Type a_rows = Type::matrix(p_.a_type, p_.mr, p_.kb, Use::b, Scope::subgroup);
    auto steps = [&](Builder& z, Value* lo, Value* hi, bool checked, int64_t kw, bool a_rows_unit = false) {
      Value* step = kw == p_.kb ? KB_ : z.index(kw);
      const Type a_w = Type::matrix(p_.a_type, p_.mr, kw, Use::a, Scope::subgroup);
      const Type a_wpk = Type::matrix(pa_t, p_.mr, kw, Use::a, Scope::subgroup);
      z.for_(lo, hi, step, {}, [&](Builder& y, Value* k, const std::vector<Value*>&) {
        if (p_.amx) {
          Value* a = y.load(a_rows, {g_.A, m0, k, g_.sa_r, sa_c, g_.M, g_.K}, checked, "a");
          demote(y.store(a, panel_a(y, dst, k), false));
          return std::vector<Value*>{};
        }
        Value* a = y.load(a_w, {g_.A, m0, k, a_rows_unit ? one_ : g_.sa_r, sa_c, g_.M, g_.K}, checked, "a");
        if (checked && p_.unit_a) a->def->attrs["row_vectors"] = 1;  // (each row a masked vector load)
        if (a_rows_unit) a->def->attrs["col_vectors"] = 1;            // (each column one vector load)
        if (needs_column_sums(p_)) {  // s8 -> u8: a + 128, in bytes (mod 256: the sign bit flipped)
          const Type a_u8 = Type::matrix(ScalarType::u8, p_.mr, kw, Use::a, Scope::subgroup);
          a = y.mat_bin(BinOp::add, y.convert_matrix(a, a_u8), y.splat(a_u8, y.constant(128.0, ScalarType::u8)));
        }
        if (a->type.scalar != pa_t) a = y.convert_matrix(a, a_wpk);
        Op* st = y.store(a, panel_a(y, dst, k), false);
        if (!p_.unit_a && w == 1) st->attrs["col_vectors"] = 1;  // (the panel's columns: one vector store each)
        demote(st);
        return std::vector<Value*>{};
      }, "k");
    };
    x.if_(x.cmp(CmpPred::le, x.add(m0, MR_), g_.M, "full_panel"), {}, [&](Builder& y) {
      if (wide_pk > p_.kb) {  // 64 bytes of each row a step, then kb steps
        Value* k_wide = y.mul(y.div(g_.K, y.index(wide_pk)), y.index(wide_pk), "k_wide");
        steps(y, zero_, k_wide, false, wide_pk);
        steps(y, k_wide, k_main, false, p_.kb);
      } else if (!p_.unit_a && !p_.amx && w == 1) {
        // A column-major (its column stride 1, tested at run time): each K index's mr elements
        // are contiguous, copied as they are into the panel's column (vector loads and stores).
        y.if_(y.cmp(CmpPred::eq, g_.sa_r, one_, "a_colmajor"), {}, [&](Builder& z) {
          steps(z, zero_, k_main, false, p_.kb, true);
          return std::vector<Value*>{};
        }, [&](Builder& z) {
          steps(z, zero_, k_main, false, p_.kb);
          return std::vector<Value*>{};
        });
      } else {
        steps(y, zero_, k_main, false, p_.kb);
      }
      steps(y, k_main, Kp_, true, p_.kb);
      return std::vector<Value*>{};
    }, [&](Builder& y) {
      steps(y, zero_, Kp_, true, p_.kb);
      return std::vector<Value*>{};
    });
    return std::vector<Value*>{};
  }, "q");
  t_pack = cycles_since(b, t_pack, CycleField::pack_a);
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
    // A column-major B (sb_r 1 at run time) whose panel lies inside B: whole steps of simd_width
    // rows first (wide_b_copy: each W x W block transposed in registers), then kb steps.
    Value* k_start = zero_;
    if (wide_b_copy()) {
      Value* WV = x.index(p_.simd_width);
      Value* fast = x.bin(BinOp::and_, x.cmp(CmpPred::eq, g_.sb_r, one_, "b_kmajor"), x.cmp(CmpPred::le, x.add(n0, NR_), g_.N),
                          "b_wide");
      k_start = x.select(fast, x.mul(x.div(g_.K, WV), WV), zero_, "k_wide");
      const Type b_w = Type::matrix(p_.b_type, p_.simd_width, p_.nr, Use::b, Scope::subgroup);
      x.for_(zero_, k_start, WV, {}, [&](Builder& y, Value* k, const std::vector<Value*>&) {
        Value* bm = y.load(b_w, {g_.B, k, n0, one_, sb_c_, g_.K, g_.N}, false, "b");
        demote(y.store(bm, panel_b(y, dst, k), false));
        return std::vector<Value*>{};
      }, "kw");
    }
    std::vector<Value*> out = x.for_(k_start, Kp_, KB_, init, [&](Builder& y, Value* k, const std::vector<Value*>& it) {
      if (tiled_b()) {  // each K step as nr / 16 tiles of kb x 16, 1 KiB each (see panel_b_tile)
        const Type b16 = Type::matrix(p_.b_type, p_.kb, 16, Use::b, Scope::subgroup);
        for (int j = 0; j < p_.nr / 16; ++j) {
          Value* bm = y.load(b16, {g_.B, k, y.add(n0, y.index(16 * j)), g_.sb_r, sb_c_, g_.K, g_.N}, true, "b");
          demote(y.store(bm, panel_b_tile(y, dst, k, j), false));
        }
        return std::vector<Value*>{};
      }
      auto step = [&](Builder& z, bool checked, Value* sr) {
        Value* bm = z.load(b_in, {g_.B, k, n0, sr, sb_c_, g_.K, g_.N}, checked, "b");
        if (p_.b_type != pb_t) bm = z.convert_matrix(bm, b_pk);
        demote(z.store(bm, panel_b(z, dst, k), false));
        if (it.empty()) return std::vector<Value*>{};
        return std::vector<Value*>{z.mul_add(a128, bm, it[0], "sums")};  // 128 * column sums
      };
      // B of a run-time column stride whose rows are unit-stride (column-major): a whole K step
      // loads each column's kb rows at once (the lowering's column tile), not a gather a row
      // (session 34; kb_rows_contiguous). Not with the s8 column sums (carried by the K loop).
      if (!kb_rows_contiguous() || sums) return step(y, true, g_.sb_r);
      Value* fast = y.bin(BinOp::and_, y.cmp(CmpPred::eq, g_.sb_r, one_, "b_kmajor"), whole_b_step(y, k, n0),
                          "b_whole_kmajor");
      y.if_(fast, {}, [&](Builder& z) { return step(z, false, one_); }, [&](Builder& z) { return step(z, true, g_.sb_r); });
      return std::vector<Value*>{};
    }, "k");
    if (sums) x.store(out[0], {g_.CS, zero_, n0, zero_, one_, one_, g_.N}, false);
    return std::vector<Value*>{};
  }, "q");
  t_pack = cycles_since(b, t_pack, CycleField::pack_b);
  // A barrier: every worker's panels are written before any tile reads them (phase 0; phases
  // 1 and 2 are two launches). own_a: a worker reads only the panels it packed.
  if (p_.own_a) return;
  b.if_(b.cmp(CmpPred::eq, g_.phase, zero_, "barrier"), {}, [&](Builder& y) {
    Value* flags = y.ptr_offset(g_.FLAGS, g_.workers, "pack_flags");
    y.flag_set(flags, g_.worker);
    y.for_(zero_, g_.workers, one_, {}, [&](Builder& x, Value* w2, const std::vector<Value*>&) {
      x.flag_wait(flags, w2);
      return std::vector<Value*>{};
    }, "w");
    return std::vector<Value*>{};
  }, [](Builder&) { return std::vector<Value*>{}; });
  cycles_since(b, t_pack, CycleField::barrier);
}

// inline_b: column panel nt's slice in the slot, addressed as a whole panel (panel_b with K
// steps k0.. of the K tile), and its column sums.
Value* GemmRecipe::slot_panel(Builder& x, Value* nt) {
  Value* at = x.sub(x.mul(x.sub(nt, slot_nlo_), g_.kt), slot_k0_);
  return x.ptr_offset(slot_pb_, x.mul(at, NR_), "pb");
}

// inline_b: K steps [k0, k1) of column panels [nlo, nhi) into the slot, row by row (each K step
// reads kb rows of B along the worker's columns); s8 x s8 also sums each panel's columns
// (times 128) in its slot of sums. Loads are checked only at B's edges.
void GemmRecipe::pack_b_rows(Builder& b, Value* k0, Value* k1, Value* nlo, Value* nhi) {
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
  // One K step of column panel nt into the slot; kmajor: B's rows are unit-stride (tested at run
  // time), each whole K step loads its columns' kb contiguous rows (the lowering's column tile).
  auto body = [&](Builder& y, Value* k, Value* nt, bool kmajor) {
    Value* n0 = y.mul(nt, NR_, "n0");
    Value* full = whole_b_step(y, k, n0);
    auto step = [&](Builder& z, bool checked) {
      Value* sr = kmajor && !checked ? one_ : g_.sb_r;
      // b_prefetch (inline_b, session 29): the same columns' rows b_prefetch / (nr x B's element
      // size) K rows further on, one prefetcht0 a 64-byte line, the row clamped to B's last: each
      // row of a worker's panels is its own short run of lines (B's rows are a page apart or
      // more in the skinny products), which the hardware prefetchers do not follow.
      if (p_.b_prefetch && p_.unit_b && !checked) {
        const int64_t es = ir::size_in_bytes(p_.b_type);
        const int64_t ahead = std::max<int64_t>(1, p_.b_prefetch / (int64_t(p_.nr) * es));
        Value* last = z.sub(g_.K, one_);
        for (int r = 0; r < p_.kb; ++r) {
          Value* row = z.min(z.add(k, z.index(ahead + r)), last, "pf_row");
          Value* at = z.add(z.mul(row, g_.sb_r), n0);
          for (int64_t off = 0; off < int64_t(p_.nr) * es; off += 64) z.prefetch(g_.B, z.add(at, z.index(off / es)), false, 3);
        }
      }
      Value* bm = z.load(b_in, {g_.B, k, n0, sr, sb_c_, g_.K, g_.N}, checked, "b");
      if (p_.b_type != pb_t) bm = z.convert_matrix(bm, b_pk);
      z.store(bm, panel_b(z, slot_panel(z, nt), k), false);
      if (sums) z.store(z.mul_add(a128, bm, z.load(sums_t, sums_at(z, nt), false)), sums_at(z, nt), false);
      return std::vector<Value*>{};
    };
    y.if_(full, {}, [&](Builder& z) { return step(z, false); }, [&](Builder& z) { return step(z, true); });
    return std::vector<Value*>{};
  };
  // Row-major B: K steps outer, each reads kb rows along the worker's columns (runs of lines).
  auto k_then_n = [&](Builder& bb) {
    bb.for_(k0, k1, KB_, {}, [&](Builder& x, Value* k, const std::vector<Value*>&) {
      x.for_(nlo, nhi, one_, {}, [&](Builder& y, Value* nt, const std::vector<Value*>&) { return body(y, k, nt, false); }, "nt");
      return std::vector<Value*>{};
    }, "k");
    return std::vector<Value*>{};
  };
  if (!kb_rows_contiguous()) {
    k_then_n(b);
    return;
  }
  // A column-major B (session 34): panels outer, so that a panel's nr columns are read down the K
  // tile while their lines stay in L1 (K steps outer read every column of the worker's panels per
  // step, each line again kb_bytes later from L2, as many streams as columns).
  // Steps of W = simd_width rows (wide_b_copy, session 36): each whole one loads W rows of each of
  // the panel's columns (one vector a column) and transposes each W x W block in registers (the
  // lowering's column tile of W rows: log2 W stages of W two-vector shuffles), then stores W
  // whole rows of the panel; the rest in kb steps.
  const int64_t W = p_.simd_width;
  const bool wide = wide_b_copy();
  b.if_(b.cmp(CmpPred::eq, g_.sb_r, one_, "b_kmajor"), {}, [&](Builder& bb) {
    bb.for_(nlo, nhi, one_, {}, [&](Builder& x, Value* nt, const std::vector<Value*>&) {
      Value* k_w = k0;
      if (wide) {
        Value* WV = x.index(W);
        k_w = x.add(k0, x.mul(x.div(x.sub(k1, k0), WV), WV), "k_wide");
        const Type b_w = Type::matrix(p_.b_type, W, p_.nr, Use::b, Scope::subgroup);
        x.for_(k0, k_w, WV, {}, [&](Builder& y, Value* k, const std::vector<Value*>&) {
          Value* n0 = y.mul(nt, NR_, "n0");
          y.if_(whole_b_step(y, k, n0, WV), {}, [&](Builder& z) {
            Value* bm = z.load(b_w, {g_.B, k, n0, one_, sb_c_, g_.K, g_.N}, false, "b");
            z.store(bm, panel_b(z, slot_panel(z, nt), k), false);
            return std::vector<Value*>{};
          }, [&](Builder& z) {
            z.for_(k, z.add(k, WV), KB_, {}, [&](Builder& u, Value* kk, const std::vector<Value*>&) { return body(u, kk, nt, true); },
                   "k_edge");
            return std::vector<Value*>{};
          });
          return std::vector<Value*>{};
        }, "kw");
      }
      x.for_(k_w, k1, KB_, {}, [&](Builder& y, Value* k, const std::vector<Value*>&) { return body(y, k, nt, true); }, "k");
      return std::vector<Value*>{};
    }, "nt");
    return std::vector<Value*>{};
  }, k_then_n);
}

// plan.demote: the stored block (contiguous in every panel layout) goes to the shared L3.
void GemmRecipe::demote(Op* store) {
  if (!p_.demote) return;
  const Type& t = store->operands[0]->type;
  store->attrs["demote"] = t.rows * t.cols * int64_t(ir::size_in_bytes(t.scalar));
}

// Where K step k of a packed panel lives (see pack()).
// AMX: block k / kb of the panel, mr x kb row-major (tile rows are 64 bytes of K). f32 / f64
// (vnni 1) A whose rows are unit-stride (unit_a, row-major A) likewise, so that packing copies
// rows (session 36: a transpose into the columns before, 1-1.5 cycles an element); other A
// (column-major, strided) the columns of the panel (mr consecutive elements a K index), which
// a column-major A fills by copying its columns. The tiles broadcast A's elements from either.
Builder::Access GemmRecipe::panel_a(Builder& b, Value* panel, Value* k) {
  if (p_.amx || (p_.vnni == 1 && p_.unit_a)) return {b.ptr_offset(panel, b.mul(k, MR_)), zero_, zero_, KB_, one_, MR_, KB_};
  if (p_.vnni == 1) return {panel, zero_, k, one_, MR_, MR_, Kp_};
  return {panel, zero_, k, one_, b.mul(MR_, VW_), MR_, Kp_, p_.vnni};
}

Builder::Access GemmRecipe::panel_b(Builder& b, Value* panel, Value* k) {
  if (tiled_b()) return panel_b_tile(b, panel, k, 0);  // (the load's attr tile_cols finds the others)
  if (p_.vnni == 1) return {panel, k, zero_, NR_, one_, Kp_, NR_};
  return {panel, k, zero_, b.mul(NR_, VW_), one_, Kp_, NR_, p_.vnni};
}

Builder::Access GemmRecipe::panel_b_tile(Builder& b, Value* panel, Value* k, int j) {
  Value* at = b.add(b.mul(k, NR_), b.index(int64_t(16) * j * p_.kb));
  return {b.ptr_offset(panel, at), zero_, zero_, b.mul(b.index(16), VW_), one_, KB_, b.index(16), p_.vnni};
}

}  // namespace coopjit
