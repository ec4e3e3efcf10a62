// Validation and planning of reductions (reduce_spec.h).
#include "spec/reduce_spec.h"

#include <algorithm>

#include "core/error.h"

namespace coopjit {

void ReduceSpec::validate() const {
  if (op != "sum" && op != "prod" && op != "min" && op != "max")
    throw UserError(cat("unknown reduction '", op, "' (known: sum, prod, min, max)"));
  if (form != "row" && form != "column" && form != "2x2")
    throw InternalError(cat("unknown reduction form '", form, "'"));
  if (rows < 0 || cols < 0) throw UserError(cat("negative reduction size ", rows, " x ", cols));
}

std::string ReducePlan::key(const ReduceSpec& s) const {
  return cat("reduce.", s.op, ".", s.form, ".", ir::name(s.in), ".", ir::name(s.acc), ".", ir::name(s.out), ".s",
             simd_width, ".t", tile_rows, "x", tile_cols, unit ? ".u" : ".g");
}

ReducePlan plan_reduce(const ReduceSpec& s, int vector_bytes, int max_threads) {
  s.validate();
  ReducePlan p;
  p.simd_width = std::max(1, vector_bytes / ir::size_in_bytes(s.acc));
  // Enough independent accumulator vectors to cover the add latency, few enough to stay in
  // registers: 4 rows x 4 vectors for a row reduction, 4 rows x 8 vectors down columns.
  p.tile_cols = p.simd_width * (s.form == "column" ? 8 : 4);
  p.tile_rows = 4;
  if (s.form == "2x2") p.tile_rows = 8, p.tile_cols = p.simd_width * 2;
  p.unit = s.sx_c == 1;  // the tile's columns run along X's columns in every form
  const double bytes = double(s.rows) * s.cols * ir::size_in_bytes(s.in);
  p.threads = bytes < (1 << 20) ? 1 : std::max(1, max_threads);
  return p;
}

}  // namespace coopjit
