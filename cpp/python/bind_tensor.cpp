// Python bindings of load_matrix / store_matrix through tensor layouts and views. The Python
// layer (coopjit/tensor.py) validates; this file converts, re-checks what memory safety needs,
// and forwards.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "runtime/tensor_access.h"

namespace py = pybind11;
using namespace coopjit;

void set_decode(TensorAccessSpec& s, const py::object& decode);  // bind_ir.cpp

void bind_tensor(py::module_& m) {
  m.def(
      "tensor_access",
      [](bool store, py::array buffer, py::array matrix, const std::string& dtype, const std::string& clamp,
         int rank, const std::vector<int64_t>& layout, double clamp_value, int view_kind,
         const std::vector<int>& perm, const std::vector<int64_t>& view_fields, const py::object& decode,
         const std::string& buffer_dtype) {
        TensorAccessSpec s;
        s.store = store;
        s.dtype = ir::parse_scalar(dtype);
        if (!buffer_dtype.empty()) {
          s.buffer_dtype = ir::parse_scalar(buffer_dtype);
          s.buffer_dtype_set = true;
        }
        s.clamp = ir::parse_clamp(clamp);
        s.rank = rank;
        set_decode(s, decode);
        if (matrix.ndim() != 2) throw UserError(cat("the matrix must be 2-D, got ", matrix.ndim(), "-D"));
        s.rows = matrix.shape(0);
        s.cols = matrix.shape(1);
        if (buffer.itemsize() != ir::size_in_bytes(s.buffer_type()) || matrix.itemsize() != ir::size_in_bytes(s.dtype))
          throw UserTypeError(cat("the buffer must have ", ir::size_in_bytes(s.buffer_type()), "-byte elements (",
                                  ir::name(s.buffer_type()), ") and the matrix ", ir::size_in_bytes(s.dtype),
                                  "-byte ones (", dtype, ")"));
        if (!(buffer.flags() & py::array::c_style))
          throw UserError("the buffer must be C-contiguous (it is addressed as a flat array)");
        if (layout.size() != size_t(5 * rank))
          throw UserError(cat("the layout has ", layout.size(), " fields, a rank-", rank, " layout has ", 5 * rank));
        s.view = static_cast<TensorAccessSpec::View>(view_kind);
        s.view_rank = static_cast<int>(perm.size());
        for (size_t i = 0; i < perm.size() && i < 5; ++i) s.perm[i] = static_cast<int8_t>(perm[i]);
        const int64_t item = matrix.itemsize();
        if (matrix.strides(0) % item || matrix.strides(1) % item)
          throw UserError("the matrix strides must be whole elements");
        std::vector<int64_t> ints{static_cast<int64_t>(buffer.size()), matrix.strides(0) / item,
                                  matrix.strides(1) / item};
        ints.insert(ints.end(), layout.begin(), layout.end());
        ints.insert(ints.end(), view_fields.begin(), view_fields.end());
        void* pb = store ? buffer.mutable_data() : const_cast<void*>(buffer.data());
        void* pm = store ? const_cast<void*>(matrix.data()) : matrix.mutable_data();
        py::gil_scoped_release nogil;
        auto k = tensor_access_kernel(s);
        run_tensor_access(*k, pb, pm, ints, clamp_value);
      },
      py::arg("store"), py::arg("buffer"), py::arg("matrix"), py::arg("dtype"), py::arg("clamp"), py::arg("rank"),
      py::arg("layout"), py::arg("clamp_value"), py::arg("view_kind"), py::arg("perm"), py::arg("view_fields"),
      py::arg("decode") = py::none(), py::arg("buffer_dtype") = "");

  m.def(
      "tensor_access_ir",
      [](bool store, const std::string& dtype, int64_t rows, int64_t cols, const std::string& clamp, int rank,
         int view_kind, const std::vector<int>& perm, const py::object& decode) {
        TensorAccessSpec s;
        s.store = store;
        s.dtype = ir::parse_scalar(dtype);
        s.rows = rows;
        s.cols = cols;
        s.clamp = ir::parse_clamp(clamp);
        s.rank = rank;
        s.view = static_cast<TensorAccessSpec::View>(view_kind);
        s.view_rank = static_cast<int>(perm.size());
        for (size_t i = 0; i < perm.size() && i < 5; ++i) s.perm[i] = static_cast<int8_t>(perm[i]);
        set_decode(s, decode);
        return tensor_access_kernel(s)->ir_text;
      },
      py::arg("store"), py::arg("dtype"), py::arg("rows"), py::arg("cols"), py::arg("clamp"), py::arg("rank"),
      py::arg("view_kind"), py::arg("perm"), py::arg("decode") = py::none(),
      "The kernel IR of a tensor access kernel (for tests and debugging).");
}
