// Python bindings of GEMM: compile (spec -> plan -> code), run on NumPy arrays, show the code.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "runtime/gemm.h"
#include "target/cpu_info.h"

namespace py = pybind11;
using namespace coopjit;

namespace {

ir::ScalarType dtype_of(const py::array& x, const char* what) {
  py::dtype d = x.dtype();
  if (d.kind() == 'f' && d.itemsize() == 4) return ir::ScalarType::f32;
  if (d.kind() == 'f' && d.itemsize() == 8) return ir::ScalarType::f64;
  throw UserTypeError(cat(what, " has dtype ", std::string(py::str(d)), "; supported: float32, float64"));
}

// The element strides of a 2-D array; the Python layer makes sure they are whole elements.
std::pair<int64_t, int64_t> strides_of(const py::array& x, const char* what) {
  if (x.ndim() != 2) throw UserError(cat(what, " must be 2-D, got ", x.ndim(), "-D"));
  const int64_t item = x.itemsize();
  const int64_t s0 = x.strides(0), s1 = x.strides(1);
  if (s0 % item || s1 % item)
    throw UserError(cat(what, " has byte strides (", s0, ", ", s1, ") that are not multiples of its itemsize ", item));
  if (reinterpret_cast<uintptr_t>(x.data()) % item)
    throw UserError(cat(what, " is not aligned to its itemsize ", item));
  return {s0 / item, s1 / item};
}

// The spec of C = op(A) op(B) (+ C) for arrays a (M x K), b (K x N), c (M x N), already the
// operands as the kernel reads them (transposes are views made by the caller).
GemmSpec spec_of(const py::array& a, const py::array& b, const py::array& c, bool accumulate) {
  GemmSpec s;
  s.dtype = dtype_of(a, "a");
  if (dtype_of(b, "b") != s.dtype || dtype_of(c, "c") != s.dtype)
    throw UserTypeError(cat("a, b and c must have one dtype, got ", std::string(py::str(a.dtype())), ", ",
                            std::string(py::str(b.dtype())), ", ", std::string(py::str(c.dtype()))));
  std::tie(s.sa_r, s.sa_c) = strides_of(a, "a");
  std::tie(s.sb_r, s.sb_c) = strides_of(b, "b");
  std::tie(s.sc_r, s.sc_c) = strides_of(c, "c");
  s.M = a.shape(0);
  s.K = a.shape(1);
  s.N = b.shape(1);
  if (b.shape(0) != s.K || c.shape(0) != s.M || c.shape(1) != s.N)
    throw UserError(cat("shapes do not match: a (", a.shape(0), ", ", a.shape(1), "), b (", b.shape(0), ", ",
                        b.shape(1), "), c (", c.shape(0), ", ", c.shape(1), ")"));
  if (!c.writeable()) throw UserError("c (the output) is read-only");
  s.accumulate = accumulate;
  return s;
}

struct PyGemmKernel {
  GemmKernel k;
  PlanOverrides overrides;

  void run(const py::array& a, const py::array& b, py::array& c, double alpha, double beta) const {
    GemmSpec s = spec_of(a, b, c, k.spec.accumulate);
    if (!k.spec.accumulate && beta != 0.0)
      throw UserError(cat("this kernel was compiled without accumulation (beta = 0) but was called with beta = ",
                          beta, "; compile it with accumulate=True"));
    const CpuInfo& cpu = host_cpu();
    GemmPlan p = plan_gemm(s, {cpu.vector_bytes, cpu.vector_registers}, overrides);
    if (p.key() != k.plan.key())
      throw UserError(cat("these operands need plan ", p.key(), " but the kernel was compiled for ", k.plan.key(),
                          " (", s.str(), ")"));
    const void* pa = a.data();
    const void* pb = b.data();
    void* pc = c.mutable_data();
    py::gil_scoped_release nogil;
    run_gemm(k, s, pa, pb, pc, alpha, beta);
  }

  std::string source(const std::string& kind) const {
    if (kind == "ir") return k.code->ir_text;
    if (kind == "llvm") return k.code->llvm_ir;
    if (kind == "asm") {
      py::gil_scoped_release nogil;
      return k.code->assembly();
    }
    throw UserError(cat("unknown source kind '", kind, "' (known: ir, llvm, asm)"));
  }
};

}  // namespace

void bind_gemm(py::module_& m) {
  py::class_<PyGemmKernel>(m, "GemmKernel")
      .def_property_readonly("config", [](const PyGemmKernel& k) { return k.k.plan.fields(); })
      .def_property_readonly("key", [](const PyGemmKernel& k) { return k.k.code->key; })
      .def_property_readonly("spec", [](const PyGemmKernel& k) { return k.k.spec.str(); })
      .def_property_readonly("compile_seconds", [](const PyGemmKernel& k) { return k.k.code->compile_seconds; })
      .def("source", &PyGemmKernel::source, py::arg("kind") = "ir")
      .def("run", &PyGemmKernel::run, py::arg("a"), py::arg("b"), py::arg("c"), py::arg("alpha"), py::arg("beta"));

  m.def("compile_gemm",
        [](const std::string& dtype, int64_t M, int64_t N, int64_t K, std::vector<int64_t> strides, bool accumulate,
           const PlanOverrides& overrides) {
          if (strides.size() != 6) throw UserError(cat("compile_gemm takes 6 strides, got ", strides.size()));
          GemmSpec s;
          s.dtype = ir::parse_scalar(dtype);
          s.M = M; s.N = N; s.K = K;
          s.sa_r = strides[0]; s.sa_c = strides[1];
          s.sb_r = strides[2]; s.sb_c = strides[3];
          s.sc_r = strides[4]; s.sc_c = strides[5];
          s.accumulate = accumulate;
          py::gil_scoped_release nogil;
          return PyGemmKernel{gemm_kernel(s, overrides), overrides};
        },
        py::arg("dtype"), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("strides"), py::arg("accumulate"),
        py::arg("overrides") = PlanOverrides{});

  m.def("gemm",
        [](const py::array& a, const py::array& b, py::array& c, double alpha, double beta,
           const PlanOverrides& overrides) {
          GemmSpec s = spec_of(a, b, c, beta != 0.0);
          const void* pa = a.data();
          const void* pb = b.data();
          void* pc = c.mutable_data();
          py::gil_scoped_release nogil;
          GemmKernel k = gemm_kernel(s, overrides);
          run_gemm(k, s, pa, pb, pc, alpha, beta);
        },
        py::arg("a"), py::arg("b"), py::arg("c"), py::arg("alpha"), py::arg("beta"),
        py::arg("overrides") = PlanOverrides{},
        "C = alpha * a @ b + beta * C in place; a, b, c are the operands as read (transposes as views).");
}
