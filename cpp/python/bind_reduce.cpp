// Python bindings of reductions: the Python layer (coopjit/_reduce.py) chooses the form and the
// views; this converts and forwards, re-checking what memory safety needs.
#include <optional>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "runtime/reduce.h"

namespace py = pybind11;
using namespace coopjit;

namespace {
ReduceSpec spec_of(const std::string& op, const std::string& form, const py::array& x, const py::array& y,
                   const std::string& in, const std::string& acc, const std::string& out) {
  ReduceSpec s;
  s.op = op;
  s.form = form;
  s.in = ir::parse_scalar(in);
  s.acc = ir::parse_scalar(acc);
  s.out = ir::parse_scalar(out);
  if (x.ndim() != 2) throw UserError(cat("reduce: X must be 2-D, got ", x.ndim(), "-D"));
  if (x.itemsize() != ir::size_in_bytes(s.in) || y.itemsize() != ir::size_in_bytes(s.out))
    throw UserTypeError(cat("reduce: element sizes do not match the dtypes: X has ", x.itemsize(), "-byte elements for ",
                            in, ", the output ", y.itemsize(), "-byte elements for ", out));
  for (const py::array* a : {&x, &y}) {
    const char* what = a == &x ? "X" : "the output";
    const int64_t item = a->itemsize();
    for (int d = 0; d < a->ndim(); ++d)
      if (a->strides(d) % item)
        throw UserError(cat("reduce: ", what, " has byte stride ", a->strides(d), " in dim ", d,
                            ", not a multiple of its itemsize ", item));
    if (reinterpret_cast<uintptr_t>(a->data()) % item)
      throw UserError(cat("reduce: ", what, " at address ", a->data(), " is not aligned to its itemsize ", item));
  }
  s.rows = x.shape(0);
  s.cols = x.shape(1);
  const int64_t xi = x.itemsize(), yi = y.itemsize();
  s.sx_r = x.strides(0) / xi;
  s.sx_c = x.strides(1) / xi;
  if (!y.writeable()) throw UserError(cat("reduce: the output (shape ", y.ndim() ? y.shape(0) : 0, "...) is read-only"));
  if (form == "2x2") {
    if (y.ndim() != 2 || y.shape(0) * 2 != s.rows || y.shape(1) * 2 != s.cols)
      throw UserError(cat("reduce2x2: the output must have half the input's shape (", s.rows / 2, ", ", s.cols / 2,
                          "), got ", y.ndim(), "-D with ", y.ndim() ? y.shape(0) : 0, " rows"));
    s.sy_r = y.strides(0) / yi;
    s.sy_c = y.strides(1) / yi;
  } else {
    const int64_t n = form == "row" ? s.rows : s.cols;
    if (y.ndim() != 1 || y.shape(0) != n)
      throw UserError(cat("reduce: the output must be 1-D of length ", n, ", got ", y.ndim(), "-D of length ",
                          y.ndim() ? y.shape(0) : 0));
    s.sy_c = y.strides(0) / yi;
  }
  s.validate();
  return s;
}
}  // namespace

void bind_reduce(py::module_& m) {
  m.def("reduce2d",
        [](const std::string& op, const std::string& form, const py::array& x, py::array& y, const std::string& in,
           const std::string& acc, const std::string& out, int threads) {
          ReduceSpec s = spec_of(op, form, x, y, in, acc, out);
          const void* px = x.data();
          void* py_ = y.mutable_data();
          py::gil_scoped_release nogil;
          run_reduce(s, px, py_, threads);
        },
        py::arg("op"), py::arg("form"), py::arg("x"), py::arg("y"), py::arg("in_dtype"), py::arg("acc_dtype"),
        py::arg("out_dtype"), py::arg("threads") = 0);
  m.def("reduce_plan_overrides", &set_reduce_plan_overrides, py::arg("overrides"),
        "Plan fields every later CPU reduction takes instead of the planner's ({}: the planner's again): "
        "'field' or 'form.field' (form row, column, column_rows, 2x2) for tile_rows, tile_cols, block_cols, "
        "prefetch, read_past, threads, shares (not column_rows), sum_block, sum_levels (row form float sums), "
        "stream_y (column form: 0 / 1, streaming stores of Y where its tile allows); "
        "'column.split' 0 keeps a column reduction in "
        "one pass.");
  m.def("reduce_plan",
        [](const std::string& op, const std::string& form, int64_t rows, int64_t cols, std::optional<int64_t> sx_r,
           int64_t sx_c, const std::string& in, const std::string& acc, const std::string& out, int vector_bytes, int threads) {
          ReduceSpec s;
          s.op = op;
          if (form != "row" && form != "column" && form != "2x2" && form != "column_rows")
            throw UserError(cat("reduce_plan: unknown form '", form, "' (known: row, column, column_rows, 2x2)"));
          s.form = form;
          s.in = ir::parse_scalar(in);
          s.acc = ir::parse_scalar(acc.empty() ? in : acc);
          s.out = ir::parse_scalar(out.empty() ? (acc.empty() ? in : acc) : out);
          s.rows = rows;
          s.cols = cols;
          s.sx_r = sx_r ? *sx_r : cols;
          s.sx_c = sx_c;
          s.sy_r = form == "column_rows" ? cols : 0;
          s.sy_c = 1;
          const ReducePlan p = planned_reduce(s, vector_bytes, threads);
          py::dict d;
          d["simd_width"] = p.simd_width;
          d["tile_rows"] = p.tile_rows;
          d["tile_cols"] = p.tile_cols;
          d["unit"] = p.unit;
          d["stride"] = p.stride;
          d["threads"] = p.threads;
          d["shares"] = p.shares;
          d["block_cols"] = p.block_cols;
          d["prefetch"] = p.prefetch;
          d["read_past"] = p.read_past;
          d["unit_y"] = p.unit_y;
          d["segments"] = p.segments;
          d["stream_y"] = p.stream_y;
          d["sum_block"] = p.sum_block;
          d["sum_levels"] = p.sum_levels;
          d["key"] = p.key(s);
          return d;
        },
        py::arg("op"), py::arg("form"), py::arg("rows"), py::arg("cols"), py::arg("sx_r") = py::none(),
        py::arg("sx_c") = 1,
        py::arg("in_dtype") = "f32", py::arg("acc_dtype") = "", py::arg("out_dtype") = "", py::arg("vector_bytes") = 0,
        py::arg("threads") = 0,
        "The plan of a CPU reduction of a rows x cols view (element strides sx_r, None: cols, and sx_c) on a "
        "CPU of vector_bytes-byte vectors (0: this one's) with `threads` workers (0: the pool's), without the "
        "plan overrides: the planner's choice for another CPU. acc / out default to the input's type.");
  m.def("reduce_ir",
        [](const std::string& op, const std::string& form, const py::array& x, py::array& y, const std::string& in,
           const std::string& acc, const std::string& out) { return reduce_ir(spec_of(op, form, x, y, in, acc, out)); });
}
