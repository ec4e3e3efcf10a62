// ReduceSpec: a reduction of a 2-D strided view X (rows x cols) to a vector Y: over each row
// ("row": Y[i] = op_j X[i, j]) or over each column ("column": Y[j] = op_i X[i, j]); or the
// 2x2 reduction of SPV_NV_cooperative_matrix2 ("2x2": Y[i, j] = op of X[2i..2i+1, 2j..2j+1]).
// "column_rows" is the first pass of a column reduction over rows split among the workers: Y is
// a workers x cols matrix of partials in the accumulator type (row stride sy_r), row w the op
// over worker w's share of X's rows; the column form then reduces it.
#pragma once

#include <cstdint>
#include <string>

#include "ir/types.h"

namespace coopjit {

struct ReduceSpec {
  std::string op = "sum";  // sum, prod, min, max
  std::string form = "row";  // row, column, 2x2
  ir::ScalarType in = ir::ScalarType::f32, acc = ir::ScalarType::f32, out = ir::ScalarType::f32;
  int64_t rows = 0, cols = 0;
  int64_t sx_r = 0, sx_c = 0;  // element strides of X
  int64_t sy_r = 0, sy_c = 1;  // element strides of Y (sy_r only for 2x2)

  void validate() const;
};

struct ReducePlan {
  int simd_width = 16;
  int tile_rows = 4, tile_cols = 64;  // the accumulator tile
  bool unit = true;  // X's stride along the tile's columns is 1 (vector loads)
  int64_t stride = 0;  // X's stride along the tile's columns fixed in the kernel (2..16: vector loads + a pick), else 0
  int threads = 1;
  // Row, column and 2x2 forms: the work cut into this many shares of tiles, run on the `threads`
  // threads (the runtime's run_shares: a thread that runs slower hands its later shares to the
  // others). 0: one share a thread. The planner takes 4 a thread for sums along long contiguous
  // rows on 8+ workers (plan_reduce; measured on the 16-core Emerald Rapids host); a plan
  // override sets it for any row, column or 2x2 reduction.
  int shares = 0;
  int block_cols = 0;  // column_rows: columns of a block whose partial row stays in L1
  int prefetch = 0;  // row form: the lines this many bytes past each main tile's are prefetched (0: none)
  bool read_past = false;  // row form: a row's tail tile may read past its end into the next row
  bool unit_y = false;  // Y's stride is 1 (sy_c): the column form stores whole vectors, not scatters
  bool segments = false;  // column form of the n x K view of K contiguous rows of n = stride elements
  // Column form with a contiguous Y (unit_y): the full tiles' results are stored non-temporally
  // (streaming stores, no read of Y's lines before they are written). run_reduce starts the
  // kernel's Y on a 64-byte boundary (the columns before it in a call of their own), so that
  // every full tile's store is aligned, and fences the stores before the call returns.
  bool stream_y = false;
  // Row form, float sums: each lane's sum of sum_block tiles is added into an accumulator of the
  // next level, whose sum of sum_block of those into the next, sum_levels levels above the tiles'
  // (a walk of at most sum_block tiles: one accumulator, as before). 0: one accumulator a lane.
  int sum_block = 0, sum_levels = 0;
  std::string key(const ReduceSpec& s) const;  // everything that changes the code
};

ReducePlan plan_reduce(const ReduceSpec& spec, int vector_bytes, int max_threads);

/// Whether plan p of spec s stores Y non-temporally (ReducePlan::stream_y): the planner's rule,
/// also applied again after plan overrides (a tile width may rule it out).
bool stream_y_pays(const ReduceSpec& s, const ReducePlan& p);

}  // namespace coopjit
