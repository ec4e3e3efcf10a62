// Python bindings of the SPIR-V device path: compiled device programs (kernel IR lowered by the
// SIMT lowering), and GEMM / reductions on "opencl:N" / "level_zero:N". Thin: the Python layer
// (coopjit/_gpu.py) checks the arguments and puts the arrays in device-visible memory; this
// converts and forwards.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "runtime/device_program.h"
#include "runtime/gpu_gemm.h"
#include "runtime/gpu_reduce.h"
#include "target/ptx_target.h"

namespace py = pybind11;
using namespace coopjit;

// bind_gemm.cpp: a fused epilogue's steps from Python's description.
coopjit::GemmEpilogue python_epilogue(const py::dict& d, coopjit::ir::ScalarType type);

namespace {

// Kernel arguments in parameter order: addresses (ints) for pointers, numbers for scalars.
std::vector<KernelArg> program_args(const DeviceProgram& p, const py::list& args) {
  if (args.size() != p.params.size())
    throw UserError(cat("the kernel takes ", p.params.size(), " arguments, got ", args.size()));
  std::vector<KernelArg> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const ir::Type& t = p.params[i];
    if (t.is_pointer()) {
      out.push_back(pointer_arg(reinterpret_cast<void*>(args[i].cast<uintptr_t>())));
    } else if (ir::is_float(t.scalar)) {
      out.push_back(scalar_arg(t, 0, args[i].cast<double>()));
    } else {
      out.push_back(scalar_arg(t, args[i].cast<int64_t>(), 0.0));
    }
  }
  return out;
}

GemmSpec gemm_spec(const std::vector<std::string>& types, const std::vector<int64_t>& shape,
                   const std::vector<int64_t>& strides, bool accumulate, const py::object& epilogue = py::none(),
                   const GemmEpilogue* steps = nullptr) {
  if (types.size() != 3 || shape.size() != 5 || strides.size() != 12)
    throw InternalError("gpu gemm: types (3), shape (M, N, K, batch1, batch2) and 12 strides");
  GemmSpec s;
  if (!epilogue.is_none() || steps) {
    s.set_types_with_epilogue(ir::parse_scalar(types[0]), ir::parse_scalar(types[1]), ir::parse_scalar(types[2]));
    s.epilogue = steps ? *steps : python_epilogue(py::cast<py::dict>(epilogue), s.epilogue.type);
    if (accumulate && !ir::is_float(s.dtype) && ir::is_float(s.c_type))
      throw UserError("an integer product with an epilogue does not take beta (accumulate): add C through residual=");
  } else {
    s.set_types(ir::parse_scalar(types[0]), ir::parse_scalar(types[1]), ir::parse_scalar(types[2]));
  }
  s.M = shape[0]; s.N = shape[1]; s.K = shape[2]; s.batch1 = shape[3]; s.batch2 = shape[4];
  s.sa_r = strides[0]; s.sa_c = strides[1]; s.sb_r = strides[2]; s.sb_c = strides[3];
  s.sc_r = strides[4]; s.sc_c = strides[5];
  s.sa_b1 = strides[6]; s.sb_b1 = strides[7]; s.sc_b1 = strides[8];
  s.sa_b2 = strides[9]; s.sb_b2 = strides[10]; s.sc_b2 = strides[11];
  s.accumulate = accumulate;
  return s;
}

ReduceSpec reduce_spec(const std::string& op, const std::string& form, const std::vector<std::string>& types,
                       const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  if (types.size() != 3 || shape.size() != 2 || strides.size() != 4)
    throw InternalError("gpu reduce: types (in, acc, out), shape (rows, cols), strides (sx_r, sx_c, sy_r, sy_c)");
  ReduceSpec s;
  s.op = op;
  s.form = form;
  s.in = ir::parse_scalar(types[0]);
  s.acc = ir::parse_scalar(types[1]);
  s.out = ir::parse_scalar(types[2]);
  s.rows = shape[0];
  s.cols = shape[1];
  s.sx_r = strides[0]; s.sx_c = strides[1]; s.sy_r = strides[2]; s.sy_c = strides[3];
  s.validate();
  return s;
}

struct PyGpuGemm {
  GpuGemmKernel k;
};

// Operands whose plan differs from the compiled kernel's. The spec is checked as a CPU spec
// (gemm_spec), so the message names the kernel's device itself.
UserError plan_mismatch(const PyGpuGemm& k, const GpuGemmPlan& p, GemmSpec s) {
  s.device = k.k.device;
  return UserError(cat("these operands need plan ", p.key(), " but the kernel was compiled for ", k.k.plan.key(), " (",
                       s.str(), ")"));
}

}  // namespace

void bind_gpu(py::module_& m) {
  py::class_<DeviceProgram, std::shared_ptr<DeviceProgram>>(m, "DeviceProgram",
                                                            "A kernel compiled for a SPIR-V device.")
      .def_readonly("name", &DeviceProgram::name)
      .def_readonly("device", &DeviceProgram::device)
      .def_readonly("key", &DeviceProgram::key)
      .def_readonly("subgroup_size", &DeviceProgram::subgroup_size)
      .def_readonly("work_group_size", &DeviceProgram::work_group_size)
      .def_readonly("compile_seconds", &DeviceProgram::compile_seconds)
      .def_property_readonly("params", [](const DeviceProgram& p) {
        std::vector<std::string> out;
        for (const auto& t : p.params) out.push_back(t.str());
        return out;
      })
      .def_property_readonly("spirv", [](const DeviceProgram& p) { return py::bytes(p.spirv); })
      .def_readonly("target", &DeviceProgram::target)
      .def_readonly("ptx", &DeviceProgram::ptx)
      .def("source", &DeviceProgram::source, py::arg("kind") = "spirv")
      .def("launch", [](const DeviceProgram& p, const py::list& args, int64_t groups) {
        auto a = program_args(p, args);
        py::gil_scoped_release nogil;
        p.launch(a, groups);
      }, py::arg("args"), py::arg("groups"), "Launches `groups` work-groups with the arguments in parameter order.");

  m.def("device_programs", [] {
    std::vector<std::shared_ptr<DeviceProgram>> out;
    for (const auto& p : device_programs()) out.push_back(std::const_pointer_cast<DeviceProgram>(p));
    return out;
  }, "Every program in the device kernel cache.");
  m.def("device_cache_stats", [] {
    auto s = device_cache_stats();
    py::dict d;
    d["entries"] = s.entries;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    return d;
  }, "Counters of the SPIR-V device kernel cache.");
  m.def("ptx_cache_stats", [] {
    auto s = ptx_cache_stats();
    py::dict d;
    d["compiles"] = s.compiles;
    d["disk_loads"] = s.disk_loads;
    return d;
  }, "PTX modules compiled by LLVM's NVPTX backend and loaded from the disk cache in this process.");

  py::class_<PyGpuGemm>(m, "GpuGemmKernel")
      .def_property_readonly("config", [](const PyGpuGemm& k) { return k.k.plan.fields(); })
      .def_property_readonly("key", [](const PyGpuGemm& k) { return k.k.code->key; })
      .def_property_readonly("plan_key", [](const PyGpuGemm& k) { return k.k.plan.key(); })
      .def_property_readonly("compile_seconds", [](const PyGpuGemm& k) { return k.k.code->compile_seconds; })
      .def_property_readonly("spirv", [](const PyGpuGemm& k) { return py::bytes(k.k.code->spirv); })
      .def_property_readonly("ptx", [](const PyGpuGemm& k) { return k.k.code->ptx; })
      .def_property_readonly("fixup_ptx", [](const PyGpuGemm& k) { return k.k.fixup ? k.k.fixup->ptx : std::string(); })
      .def_property_readonly("copy_ptx", [](const PyGpuGemm& k) { return k.k.copy ? k.k.copy->ptx : std::string(); })
      .def("source", [](const PyGpuGemm& k, const std::string& kind) { return k.k.code->source(kind); }, py::arg("kind") = "spirv")
      .def("run", [](const PyGpuGemm& k, const std::vector<std::string>& types, const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& strides, uintptr_t a, uintptr_t b, uintptr_t c, double alpha, double beta,
                     const std::vector<uintptr_t>& epilogue) {
        const bool fused = k.k.spec.epilogue.any() || k.k.spec.c_type != k.k.spec.dtype;
        GemmSpec s = gemm_spec(types, shape, strides, k.k.spec.accumulate, py::none(), fused ? &k.k.spec.epilogue : nullptr);
        EpilogueArgs ea;
        if (s.epilogue.any()) {
          if (epilogue.size() != 4) throw InternalError("the epilogue's four operand addresses");
          ea = {reinterpret_cast<const void*>(epilogue[0]), reinterpret_cast<const void*>(epilogue[1]),
                reinterpret_cast<const void*>(epilogue[2]), reinterpret_cast<const void*>(epilogue[3])};
        }
        GpuGemmPlan p = plan_gpu_gemm(s, gpu_target(k.k.device), k.k.overrides);
        if (p.key() != k.k.plan.key())
          throw plan_mismatch(k, p, s);
        py::gil_scoped_release nogil;
        run_gpu_gemm(k.k, s, reinterpret_cast<const void*>(a), reinterpret_cast<const void*>(b), reinterpret_cast<void*>(c),
                     alpha, beta, s.epilogue.any() ? &ea : nullptr);
      }, py::arg("types"), py::arg("shape"), py::arg("strides"), py::arg("a"), py::arg("b"), py::arg("c"), py::arg("alpha"),
         py::arg("beta"), py::arg("epilogue") = std::vector<uintptr_t>{})
      .def("launcher", [](const PyGpuGemm& k, const std::vector<std::string>& types, const std::vector<int64_t>& shape,
                          const std::vector<int64_t>& strides, bool aligned) -> py::object {
        // as run(): the kernel's epilogue, or (a C of another type than the accumulator's) its conversion
        const bool fused = k.k.spec.epilogue.any() || k.k.spec.c_type != k.k.spec.dtype;
        GemmSpec s = gemm_spec(types, shape, strides, k.k.spec.accumulate, py::none(), fused ? &k.k.spec.epilogue : nullptr);
        GpuGemmPlan p = plan_gpu_gemm(s, gpu_target(k.k.device), k.k.overrides);
        if (p.key() != k.k.plan.key())
          throw plan_mismatch(k, p, s);
        std::shared_ptr<const GpuGemmLaunch> l;
        {
          py::gil_scoped_release nogil;
          l = prepare_gpu_gemm_launch(k.k, s, aligned);
        }
        if (!l) return py::none();
        return py::cast(std::const_pointer_cast<GpuGemmLaunch>(l));
      }, py::arg("types"), py::arg("shape"), py::arg("strides"), py::arg("aligned"),
         "The launch of this kernel for operands of these shapes and strides (GpuGemmLaunch), or None when its plan "
         "needs more than one launch (Stream-K outside the warp-specialized kernel). `aligned`: op(A) and op(B) start "
         "on 16 bytes.");

  py::class_<GpuGemmLaunch, std::shared_ptr<GpuGemmLaunch>>(m, "GpuGemmLaunch",
      "A product's launch prepared once (CUDA): launch() queues it on a stream and returns.")
      .def_property_readonly("groups", [](const GpuGemmLaunch& l) { return l.groups; })
      .def_property_readonly("config", [](const GpuGemmLaunch& l) { return l.k.plan.fields(); })
      .def_property_readonly("plan_key", [](const GpuGemmLaunch& l) { return l.k.plan.key(); })
      .def_property_readonly("fused", [](const GpuGemmLaunch& l) { return l.epi_slot != 0; })
      .def("launch", [](const GpuGemmLaunch& l, uintptr_t a, uintptr_t b, uintptr_t c, double alpha, double beta,
                        uintptr_t stream, const std::vector<uintptr_t>& epilogue) {
        EpilogueArgs ea;
        if (l.epi_slot) {
          if (epilogue.size() != 4)
            throw UserError(cat("this launch has a fused epilogue: pass its four operand addresses (scale, row_scale, "
                                "bias, residual; 0 where a step is absent), got ", epilogue.size()));
          ea = {reinterpret_cast<const void*>(epilogue[0]), reinterpret_cast<const void*>(epilogue[1]),
                reinterpret_cast<const void*>(epilogue[2]), reinterpret_cast<const void*>(epilogue[3])};
          const GemmEpilogue& e = l.epilogue;
          const char* names[4] = {"scale", "row_scale", "bias", "residual"};
          const bool need[4] = {e.scale, e.row_scale, e.bias != 0, e.residual};
          for (size_t i = 0; i < 4; ++i)
            if (need[i] != (epilogue[i] != 0))
              throw UserError(cat("this launch's epilogue ", need[i] ? "reads " : "has no ", names[i], ", but its address is ",
                                  epilogue[i]));
        } else if (!epilogue.empty()) {
          throw UserError(cat("this launch has no fused epilogue, but ", epilogue.size(), " epilogue addresses were given"));
        }
        py::gil_scoped_release nogil;
        launch_gpu_gemm(l, reinterpret_cast<const void*>(a), reinterpret_cast<const void*>(b), reinterpret_cast<void*>(c),
                        alpha, beta, stream, l.epi_slot ? &ea : nullptr);
      }, py::arg("a"), py::arg("b"), py::arg("c"), py::arg("alpha"), py::arg("beta"), py::arg("stream"),
         py::arg("epilogue") = std::vector<uintptr_t>{},
         "Queues the product on `stream` (a CUstream handle; 0: the legacy default stream) without waiting: a, b, "
         "c are the device addresses of element [0, 0] of op(A), op(B) and C; `epilogue` (launches with a fused "
         "epilogue): the device addresses of its scale, row_scale, bias and residual, 0 where a step is absent.");

  m.def("gpu_gemm_kernel", [](const std::string& device, const std::vector<std::string>& types,
                              const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, bool accumulate,
                              const PlanOverrides& overrides, const py::object& epilogue) {
    GemmSpec s = gemm_spec(types, shape, strides, accumulate, epilogue);
    py::gil_scoped_release nogil;
    return PyGpuGemm{gpu_gemm_kernel(s, device, overrides)};
  }, py::arg("device"), py::arg("types"), py::arg("shape"), py::arg("strides"), py::arg("accumulate"),
     py::arg("overrides") = PlanOverrides{}, py::arg("epilogue") = py::none(),
     "Plans and compiles (or takes from the cache) the GEMM of a spec on a SPIR-V device.");

  m.def("gpu_stream_k_flags", [](const std::string& device, uintptr_t stream, bool clear) {
    py::gil_scoped_release nogil;
    return read_stream_k_flags(device, stream, clear);
  }, py::arg("device"), py::arg("stream") = 0, py::arg("clear") = true,
     "This thread's in-kernel Stream-K flags of `device` and `stream` (else stream 0's) as i32, [] when there are none "
     "(debug: the flags are zero between launches; after them, the trace entries of sk_trace plans, gpu_plan.h); "
     "`clear`: zeroed after the copy (call it with no launch in flight).");

  m.def("gpu_gemm_plan", [](const std::string& device, const std::vector<std::string>& types,
                            const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, bool accumulate,
                            const PlanOverrides& overrides, const py::object& epilogue) {
    GemmSpec s = gemm_spec(types, shape, strides, accumulate, epilogue);
    const GpuGemmPlan p = plan_gpu_gemm(s, gpu_target(device), overrides);
    std::map<std::string, std::string> f = p.fields();
    f["key"] = p.key();
    f["code_key"] = p.code_key();
    return f;
  }, py::arg("device"), py::arg("types"), py::arg("shape"), py::arg("strides"), py::arg("accumulate"),
     py::arg("overrides") = PlanOverrides{}, py::arg("epilogue") = py::none(),
     "The plan gpu_gemm_kernel would compile (its fields, key and code_key), without compiling it "
     "(scripts/plan_dump.py gpu).");

  m.def("gpu_reduce_program", [](const std::string& device, const std::string& op, const std::string& form,
                                 const std::vector<std::string>& types, const std::vector<int64_t>& shape,
                                 const std::vector<int64_t>& strides) {
    const ReduceSpec s = reduce_spec(op, form, types, shape, strides);
    py::gil_scoped_release nogil;
    return std::const_pointer_cast<DeviceProgram>(gpu_reduce_program(device, s));
  }, py::arg("device"), py::arg("op"), py::arg("form"), py::arg("types"), py::arg("shape"), py::arg("strides"),
     "The reduction program for a device or named target, compiled but not run.");

  m.def("gpu_reduce", [](const std::string& device, const std::string& op, const std::string& form,
                         const std::vector<std::string>& types, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& strides, uintptr_t x, uintptr_t y) {
    const ReduceSpec s = reduce_spec(op, form, types, shape, strides);
    py::gil_scoped_release nogil;
    return std::const_pointer_cast<DeviceProgram>(
        run_gpu_reduce(device, s, reinterpret_cast<const void*>(x), reinterpret_cast<void*>(y)));
  }, py::arg("device"), py::arg("op"), py::arg("form"), py::arg("types"), py::arg("shape"), py::arg("strides"),
     py::arg("x"), py::arg("y"), "A reduction on a SPIR-V device; returns the program it ran.");
}
