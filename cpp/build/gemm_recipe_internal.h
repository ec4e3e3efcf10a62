// The CPU GEMM recipe's class (internal to cpp/build/): GemmRecipe emits one planned GEMM's
// kernel IR; its methods are defined in gemm_recipe.cpp (parameters, body) and in one file per part
// of the kernel: _walks (Stream-K / data-parallel / dot walks), _nest (the cache-blocked nest),
// _kloop (a tile's K loop and epilogue) and _pack (the packed panels).
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "build/gemm_epilogue.h"
#include "ir/builder.h"
#include "plan/gemm_plan.h"

namespace coopjit {

// (the recipe's files name the IR's types unqualified)
using namespace ir;

struct GemmParams {
  Value *A, *B, *C, *WS, *FLAGS, *PA, *PB, *CS;
  Value *M, *N, *K, *sa_r, *sa_c, *sb_r, *sb_c, *sc_r, *sc_c;
  Value *batch1, *batch2, *sa_b1, *sb_b1, *sc_b1, *sa_b2, *sb_b2, *sc_b2;
  Value *worker, *workers, *kt, *n_sk, *phase, *shares;
  Value *alpha, *beta;
  Value* RES;  // the epilogue's residual (its operands: epi_)
  Value* CYC = nullptr;  // plan.cycles: each worker's kCycleFields counters (gemm_plan.h)
};

class GemmRecipe {
 public:
  // gemm_recipe.cpp: the parameters (in gemm_recipe.h's order), then the kernel's body.
  GemmRecipe(const GemmPlan& p, Function& f);
  void build();

 private:
  Value* ceil_div(Builder& b, Value* x, Value* y, std::string hint = {}) {
    return b.div(b.add(x, b.sub(y, one_)), y, std::move(hint));
  }

  // Output tile mn of the flattened batch x N x M space ("m_inner": consecutive tiles walk down
  // M and share one panel of B), as coordinates (mt, nt, b2, b1).
  struct Coords {
    Value *mt, *nt, *b2, *b1;
  };
  Coords coords_of(Builder& b, Value* mn);  // (gemm_recipe.cpp, as next and tile_at)
  Coords next(Builder& b, const Coords& c, Value* m_lo = nullptr, Value* m_hi = nullptr);

  // A tile's batch's A, B, C and its corner (m0, n0).
  struct Tile {
    Value *A, *B, *C, *m0, *n0, *mt, *nt, *R;
  };
  Tile tile_at(Builder& b, const Coords& c);

  // gemm_recipe_kloop.cpp: one tile's K loop (unpacked or on packed panels) and its epilogue.
  // two_level: a float sum over a range longer than flush_steps() K steps is kept as a sum of
  // flush_steps()-step partial sums (the tile walk and Stream-K, which run all of K at once).
  Value* accumulate(Builder& b, const Tile& t, Value* k_lo, Value* k_hi, bool two_level = false);
  // The K steps of each partial sum of a two-level float sum (about 512 elements of K); 0 for
  // integer accumulators (exact).
  static constexpr int64_t kFlushK = 2048;  // (the tile walk: K elements per block added into C)
  int64_t flush_steps() const { return ir::is_float(T) ? std::max<int64_t>(1, 512 / std::max(p_.kb, 1)) : 0; }
  // The two-level float sum of K steps over [lo, hi): where the range is longer than `chunk`, each
  // chunk's steps start from zeros and their sum is added into acc, so an output's error grows like
  // (range / chunk + chunk) * eps, not range * eps; a shorter range runs steps(lo, hi, acc) as is.
  // steps(b, from, to, init) returns init plus the steps over [from, to).
  using StepsFn = std::function<Value*(Builder&, Value*, Value*, Value*)>;
  Value* two_level_sum(Builder& b, Value* lo, Value* hi, Value* chunk, Value* acc, const StepsFn& steps);
  // per_step (may be empty): more code in each K step, given the step's index from 0.
  using StepFn = std::function<void(Builder&, Value*)>;
  Value* accumulate_packed(Builder& b, const Tile& t, Value* k_lo, Value* k_hi, Value* init = nullptr,
                           Value* far_a = nullptr, Value* far_b = nullptr, const StepFn& per_step = {});
  // plan.c_prefetch: step s of a tile's K loop prefetches for writing row min(s, mr - 1) of the
  // mr x nr block at ptr[(row0 + r) * stride_row + (col0 + c) * stride_col] (C's or the
  // scratch's), one line per 64 bytes of the row, the row and columns clamped to [0, rows) x [0, cols).
  void prefetch_block_lines(Builder& b, Value* step, const Builder::Access& at);
  void epilogue(Builder& b, const Tile& t, Value* acc, bool add_to_c = false);
  // C's part of an epilogue (the tiles' and the dot walk's): result + beta * C, C read at c_at as
  // c_t and converted to e_t's type; and result written to C at c_at, converted to c_t.
  Value* add_beta_c(Builder& b, Value* result, const Type& c_t, const Builder::Access& c_at, bool checked, const Type& e_t);
  void store_c(Builder& b, Value* result, const Type& c_t, const Builder::Access& c_at, bool checked);

  // gemm_recipe_pack.cpp: packing A and B into panels, and addressing the panels.
  void pack(Builder& b);
  Value* slot_panel(Builder& x, Value* nt);
  Value* slot_sums(Builder& x, Value* nt) { return x.ptr_offset(slot_cs_, x.mul(x.sub(nt, slot_nlo_), NR_), "sums_at"); }

  void pack_b_rows(Builder& b, Value* k0, Value* k1, Value* nlo, Value* nhi);
  // B's packing may find its K steps' rows contiguous in each column at run time (a column-major
  // B: a run-time column stride, row stride 1): the copies test it (session 34). Not where the
  // column stride is known to be 1 or B is copied in whole 1 KiB tiles (tiled_b).
  bool kb_rows_contiguous() const { return !p_.unit_b && !tiled_b() && p_.kb >= 2 && (p_.kb & (p_.kb - 1)) == 0; }
  // Steps of simd_width rows for such a B (session 36): f32 / f64 panels without conversions or
  // column sums; each whole step loads simd_width rows of each of the panel's columns and the
  // lowering transposes each square block in registers (SimdLowering::column_tile).
  bool wide_b_copy() const {
    const int64_t es = ir::size_in_bytes(p_.b_type), W = p_.simd_width;
    return kb_rows_contiguous() && !needs_column_sums(p_) && p_.vnni == 1 && p_.b_type == packed_b_type(p_) &&
           (es == 4 || es == 8) && W > p_.kb && W % p_.kb == 0 && p_.nr % W == 0;
  }
  // K step k of column panel n0 (kb rows, or `rows`) lies wholly inside B (no load of it needs a check).
  Value* whole_b_step(Builder& b, Value* k, Value* n0, Value* rows = nullptr) {
    return b.bin(BinOp::and_, b.cmp(CmpPred::le, b.add(k, rows ? rows : KB_), g_.K, "full_k"),
                 b.cmp(CmpPred::le, b.add(n0, NR_), g_.N), "full");
  }
  void demote(Op* store);
  Builder::Access panel_a(Builder& b, Value* panel, Value* k);
  Builder::Access panel_b(Builder& b, Value* panel, Value* k);
  // AMX plans with amx_feed 2: K step k of a B panel (kb x nr, at element k * nr) is nr / 16
  // tiles of kb x 16 one after the other, each 16 VNNI rows of 64 bytes (one tileloadd reads 1
  // KiB of contiguous memory); column tile j of step k.
  bool tiled_b() const { return p_.amx && p_.amx_feed >= 2; }
  Builder::Access panel_b_tile(Builder& b, Value* panel, Value* k, int j);

  // amx_prefetch 6: the panels that the blocked nest's next kernels read cold, into L2 a part
  // each K step while the block's kernels run. B: the worker's next column panel (its first
  // after the last: the next block's), lines part (mt - mb) of each K step in kernel mt of the
  // block (mc_tiles parts). A: in the kernels of the worker's last column panel, row panel mt's
  // successor in the next block (mt + mc_tiles), each K step whole. Offsets 0 (the kernel's own
  // lines) where there is none.
  int64_t cold_lines_b() const { return std::max<int64_t>(1, (int64_t(p_.nr) * p_.kb * ir::size_in_bytes(packed_b_type(p_)) / 64 + p_.mc_tiles - 1) / p_.mc_tiles); }
  int64_t cold_lines_a() const { return int64_t(p_.mr) * p_.kb * ir::size_in_bytes(packed_a_type(p_)) / 64; }
  std::pair<Value*, Value*> cold_offsets(Builder& b, Value* mt, Value* nt, Value* mb);  // (gemm_recipe_nest.cpp)

  // plan amx_store: the AMX nest's full tiles may go from the tiles to C (see epilogue()).
  bool tile_store_c() const {
    return p_.amx && p_.pack && p_.amx_store && !p_.epilogue.any() && !p_.accumulate && p_.unit_c && !needs_column_sums(p_) &&
           (p_.c_type == T || (p_.c_type == ScalarType::bf16 && T == ScalarType::f32));
  }

  // gemm_recipe_walks.cpp: the walks over the output tiles: Stream-K, data-parallel, the tile
  // walk, and the dot walk of matrix-vector products.
  Builder::Access partial_at(Builder& b, Value* w);
  void stream_k(Builder& b);
  void data_parallel(Builder& b, Value* tiles_mn);
  void tile_walk(Builder& b, Value* tiles_mn);
  void dot(Builder& b);

  // gemm_recipe_nest.cpp: the cache-blocked loop nest and its tiles.
  void blocked(Builder& b);
  void tile(Builder& tx, Value* kt, Value* mt, Value* nt, Value* scratch_cols, Value* mb = nullptr);

  // plan.cycles (debugging): the time-stamp counter now, and its ticks since `since` added to
  // counter `field` of this worker's (CycleField, gemm_plan.h); nullptr without the plan field.
  Value* cycles_since(Builder& b, Value* since, Value* field);
  Value* cycles_since(Builder& b, Value* since, CycleField field) {
    return g_.CYC ? cycles_since(b, since, b.index(int64_t(field))) : nullptr;
  }
  void count_one(Builder& b, Value* field);  // counter `field` of this worker + 1

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

}  // namespace coopjit
