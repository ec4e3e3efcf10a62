// Python bindings of the peak microbenchmarks (cpp/target/peak.h): measure one peak, show a
// peak kernel's assembly.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "target/peak.h"

namespace py = pybind11;

void bind_peak(py::module_& m) {
  m.def("peak_names", &coopjit::peak_names, "The peaks measure_peak knows.");
  m.def("measure_peak",
        [](const std::string& name, double seconds) {
          coopjit::PeakMeasurement r;
          {
            py::gil_scoped_release nogil;
            r = coopjit::measure_peak(name, seconds);
          }
          py::dict d;
          d["unit"] = r.unit;
          d["single"] = r.available ? py::object(py::float_(r.single)) : py::none();
          d["all"] = r.available ? py::object(py::float_(r.all)) : py::none();
          d["threads"] = r.threads;
          d["note"] = r.note;
          return d;
        },
        py::arg("name"), py::arg("seconds") = 0.1,
        "Measures one peak on one thread ('single') and one thread per core ('all'); None where the CPU lacks it.");
  m.def("peak_kernel_assembly",
        [](const std::string& name) {
          py::gil_scoped_release nogil;
          return coopjit::peak_kernel_assembly(name);
        },
        py::arg("name"), "Host assembly of a peak kernel (f32_fma, bf16_dot, amx_bf16, amx_int8), built with the features it needs.");
}
