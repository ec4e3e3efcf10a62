// Python bindings of the coopmatrix layout (cpp/layout): registers CoopMatrixLayout, LayoutError
// (a ValueError) and layout_component_size on coopjit._core. python/coopjit/layout.py wraps them.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layout/coopmatrix_layout.h"

namespace py = pybind11;

void bind_layout(py::module_& m) {
  using namespace coopjit::layout;

  // Bad input raises coopjit._core.LayoutError, a subclass of ValueError.
  py::register_exception<LayoutError>(m, "LayoutError", PyExc_ValueError);

  m.def("layout_component_size", &component_size, py::arg("dtype"),
        "Size in bytes of a coopmatrix component type given by name, e.g. 'f16' -> 2.");

  py::class_<CoopMatrixLayout>(m, "CoopMatrixLayout",
                               "Layout of a cooperative matrix over the lanes of a subgroup.")
      .def(py::init([](int64_t rows, int64_t cols, const std::string& use,
                       const std::string& dtype, int64_t subgroup_size) {
             return CoopMatrixLayout(rows, cols, parse_use(use), dtype, subgroup_size);
           }),
           py::arg("rows"), py::arg("cols"), py::arg("use"), py::arg("dtype"),
           py::arg("subgroup_size"))
      .def_property_readonly("rows", &CoopMatrixLayout::rows)
      .def_property_readonly("cols", &CoopMatrixLayout::cols)
      .def_property_readonly(
          "use", [](const CoopMatrixLayout& l) { return std::string(use_name(l.use())); })
      .def_property_readonly("dtype", &CoopMatrixLayout::dtype)
      .def_property_readonly("component_size", &CoopMatrixLayout::component_size)
      .def_property_readonly("subgroup_size", &CoopMatrixLayout::subgroup_size)
      .def_property_readonly("I", &CoopMatrixLayout::I)
      .def_property_readonly("J", &CoopMatrixLayout::J)
      .def_property_readonly("K", &CoopMatrixLayout::K)
      .def_property_readonly("K1", &CoopMatrixLayout::K1)
      .def_property_readonly("K2", &CoopMatrixLayout::K2)
      .def_property_readonly("V", &CoopMatrixLayout::V)
      .def_property_readonly("omega", &CoopMatrixLayout::omega)
      .def_property_readonly("vnni", &CoopMatrixLayout::vnni)
      .def_property_readonly("channels", &CoopMatrixLayout::channels)
      // owner -> (p, v, c); element -> (row, col) or None.
      .def("owner",
           [](const CoopMatrixLayout& l, int64_t row, int64_t col) {
             const Slot s = l.owner(row, col);
             return py::make_tuple(s.p, s.v, s.c);
           },
           py::arg("row"), py::arg("col"))
      .def("element",
           [](const CoopMatrixLayout& l, int64_t p, int64_t v, int64_t c) {
             std::optional<std::pair<int64_t, int64_t>> out;
             if (const std::optional<Element> e = l.element(p, v, c)) out.emplace(e->row, e->col);
             return out;
           },
           py::arg("p"), py::arg("v"), py::arg("c") = 0)
      // table -> int64 array of shape table_shape(), (-1, -1) for padding.
      .def("table", [](const CoopMatrixLayout& l) {
        const std::vector<int64_t> data = l.table();
        py::array_t<int64_t> out(l.table_shape());
        std::copy(data.begin(), data.end(), out.mutable_data());
        return out;
      });
}
