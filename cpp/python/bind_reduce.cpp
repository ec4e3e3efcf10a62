// Python bindings of reductions: the Python layer (coopjit/_reduce.py) chooses the form and the
// views; this converts and forwards, re-checking what memory safety needs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

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
    throw UserTypeError("reduce: element sizes do not match the dtypes");
  s.rows = x.shape(0);
  s.cols = x.shape(1);
  const int64_t xi = x.itemsize(), yi = y.itemsize();
  if (x.strides(0) % xi || x.strides(1) % xi) throw UserError("reduce: X strides are not whole elements");
  s.sx_r = x.strides(0) / xi;
  s.sx_c = x.strides(1) / xi;
  if (!y.writeable()) throw UserError("reduce: the output is read-only");
  if (form == "2x2") {
    if (y.ndim() != 2 || y.shape(0) * 2 != s.rows || y.shape(1) * 2 != s.cols)
      throw UserError("reduce2x2: the output must have half the input's shape");
    s.sy_r = y.strides(0) / yi;
    s.sy_c = y.strides(1) / yi;
  } else {
    const int64_t n = form == "row" ? s.rows : s.cols;
    if (y.ndim() != 1 || y.shape(0) != n) throw UserError(cat("reduce: the output must be 1-D of length ", n));
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
  m.def("reduce_ir",
        [](const std::string& op, const std::string& form, const py::array& x, py::array& y, const std::string& in,
           const std::string& acc, const std::string& out) { return reduce_ir(spec_of(op, form, x, y, in, acc, out)); });
}
