// Reductions on the CPU: plan, fetch (or build) the code, run on the worker pool. No LLVM here.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "spec/reduce_spec.h"

namespace coopjit {

/// Runs the reduction `spec` from x (element [0, 0] of X) into y.
void run_reduce(const ReduceSpec& spec, const void* x, void* y, int threads_override = 0);

/// Plan fields every later CPU reduction takes instead of plan_reduce's (for benchmarks and
/// tests: the A/B of a plan choice in one process): keys "field" (every form) or "form.field"
/// (that form only; it wins), fields tile_rows, tile_cols, block_cols, prefetch, read_past,
/// threads, shares (the row, column and 2x2 forms' work cut into that many shares over the
/// threads, run_shares; 0 or up to threads: one a thread), sum_block and sum_levels (the row
/// form's float sums: ReducePlan's levels of partial sums; 0: one accumulator a lane; other
/// forms and ops ignore them), stream_y (the column form's streaming stores of Y: 1 asks for
/// them where Y is contiguous and a tile's results are whole lines, 0 turns them off), and "column.split" (0: the column form
/// is not split into column_rows + column).
/// An empty map restores the planner's choices. Checked here: unknown keys, values out of range.
void set_reduce_plan_overrides(const std::map<std::string, int64_t>& overrides);

/// The plan plan_reduce makes for `spec` on a CPU of `vector_bytes`-byte vectors (0: this one's)
/// with `max_threads` workers (0: the pool's), without the plan overrides: the planner's choice
/// for another CPU (tests of rules for many-core hosts; coopjit._core.reduce_plan).
ReducePlan planned_reduce(const ReduceSpec& spec, int vector_bytes = 0, int max_threads = 0);

/// The kernel IR of the reduction `spec` (for tests and kernel.source).
std::string reduce_ir(const ReduceSpec& spec);

}  // namespace coopjit
