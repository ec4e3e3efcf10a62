// Python bindings of the SPIR-V side: LLVM IR -> SPIR-V, spirv-dis / spirv-val, the SPIR-V
// devices ("opencl:N", "level_zero:N"), shared allocations exposed through the buffer protocol,
// modules and kernels. Thin: python/coopjit/devices.py and spirv.py hold the Python logic.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "runtime/cuda.h"
#include "runtime/devices.h"
#include "runtime/spirv_cache.h"
#include "target/spirv_target.h"
#include "target/spirv_tools.h"

namespace py = pybind11;

namespace {

py::dict info_dict(const coopjit::DeviceInfo& d) {
  py::dict r;
  r["name"] = d.name;
  r["backend"] = d.backend;
  r["device_name"] = d.device_name;
  r["vendor"] = d.vendor;
  r["driver_version"] = d.driver_version;
  r["platform"] = d.platform;
  r["type"] = d.type;
  r["spirv_version"] = d.spirv_version;
  r["memory"] = d.memory;
  r["subgroup_sizes"] = d.subgroup_sizes;
  r["max_work_group_size"] = d.max_work_group_size;
  r["local_memory_bytes"] = d.local_memory_bytes;
  r["global_memory_bytes"] = d.global_memory_bytes;
  r["compute_units"] = d.compute_units;
  r["dpas"] = d.dpas < 0 ? py::object(py::none()) : py::object(py::bool_(d.dpas == 1));
  r["block2d"] = d.block2d < 0 ? py::object(py::none()) : py::object(py::bool_(d.block2d == 1));
  r["spirv_extensions"] = d.spirv_extensions;
  r["extensions"] = d.extensions;
  if (d.backend == "cuda") {
    r["arch"] = d.arch;
    r["compute_capability"] = d.compute_capability;
    r["shared_memory_per_sm_bytes"] = d.shared_memory_per_sm_bytes;
    r["registers_per_block"] = d.registers_per_block;
    r["l2_bytes"] = d.l2_bytes;
    r["clock_khz"] = d.clock_khz;
    r["memory_clock_khz"] = d.memory_clock_khz;
    r["memory_bus_bits"] = d.memory_bus_bits;
    // HBM is double data rate: bytes/s = 2 * clock * bus width / 8.
    r["memory_bandwidth_gbs"] = 2.0 * double(d.memory_clock_khz) * 1e3 * double(d.memory_bus_bits) / 8 / 1e9;
  }
  return r;
}

// The core is compiled without RTTI, so its polymorphic classes reach Python inside these plain
// handles (pybind11 would ask typeid of the dynamic type otherwise).
struct PyKernel {
  std::shared_ptr<coopjit::DeviceKernel> k;
};
struct PyModule {
  std::shared_ptr<coopjit::DeviceModule> m;
};
struct PyDeviceBuffer {
  std::shared_ptr<coopjit::SharedAllocation> a;
};

std::array<size_t, 3> triple(const std::vector<size_t>& v, size_t fill, const char* what) {
  if (v.size() > 3) throw coopjit::UserError(std::string(what) + " has more than 3 dimensions");
  std::array<size_t, 3> r{fill, fill, fill};
  for (size_t i = 0; i < v.size(); ++i) r[i] = v[i];
  return r;
}

}  // namespace

void bind_devices(py::module_& m) {
  py::register_exception<coopjit::DeviceError>(m, "DeviceError", PyExc_RuntimeError);

  // ---- SPIR-V ----
  m.def("spirv_default_extensions", &coopjit::default_spirv_extensions,
        "The SPIR-V extensions LLVM may use by default (an explicit list, never \"all\").");
  m.def("spirv_compile", [](const std::string& llvm_ir, std::optional<std::vector<std::string>> extensions, int opt_level,
                            const std::map<std::string, std::pair<int, std::vector<int>>>& kernel_shapes) {
    coopjit::SpirvOptions o;
    if (extensions) o.extensions = *extensions;
    o.opt_level = opt_level;
    for (const auto& [name, shape] : kernel_shapes) {
      coopjit::KernelShape k;
      k.subgroup_size = shape.first;
      if (shape.second.size() > 3) throw coopjit::UserError("a work-group size has at most 3 dimensions");
      for (size_t i = 0; i < shape.second.size(); ++i) k.work_group_size[i] = shape.second[i];
      o.kernel_shapes[name] = k;
    }
    coopjit::SpirvResult r;
    {
      py::gil_scoped_release unlocked;
      r = coopjit::cached_spirv(llvm_ir, o);  // through the disk cache
    }
    py::dict d;
    d["binary"] = py::bytes(r.binary);
    d["llvm"] = r.optimized_ir;
    return d;
  }, py::arg("llvm_ir"), py::arg("extensions") = py::none(), py::arg("opt_level") = 3,
     py::arg("kernel_shapes") = std::map<std::string, std::pair<int, std::vector<int>>>{},
     "LLVM IR text (OpenCL kernels, spirv64) -> {'binary': SPIR-V bytes, 'llvm': the IR given to the backend};\n"
     "kernel_shapes: {kernel: (subgroup_size, work_group_size)} marks kernels (0 / [] = no requirement).");
  m.def("spirv_disassemble", [](const py::bytes& b) { return coopjit::spirv_disassemble(std::string(b)); },
        "spirv-dis of a SPIR-V module.");
  m.def("spirv_validate", [](const py::bytes& b) {
    auto v = coopjit::spirv_validate(std::string(b));
    return py::make_tuple(v.ok, v.message, v.command);
  }, "spirv-val of a SPIR-V module: (ok, message, command).");
  m.def("set_spirv_tools_dir", &coopjit::set_spirv_tools_dir, "Registers a directory with spirv-dis / spirv-val.");
  m.def("spirv_tool_path", &coopjit::spirv_tool_path, "The path of a SPIRV-Tools program, e.g. 'spirv-val'.");
  m.def("spirv_tool_version", &coopjit::spirv_tool_version, "The first line of '<tool> --version'.");

  // ---- devices ----
  m.def("spirv_devices", [] {
    py::list l;
    for (const auto& d : coopjit::spirv_devices()) l.append(info_dict(d));
    return l;
  }, "The usable SPIR-V devices (opencl:N, level_zero:N) with their properties.");
  m.def("gpu_devices", [] {
    py::list l;
    for (const auto& d : coopjit::gpu_devices()) l.append(info_dict(d));
    return l;
  }, "Every usable GPU device (SPIR-V ones, then cuda:N) with its properties.");
  m.def("device_info", [](const std::string& name) { return info_dict(coopjit::device_info(name)); },
        "Properties of one GPU device; DeviceError naming the missing runtime or driver if absent.");
  m.def("backend_status", [] {
    py::list l;
    for (const auto& s : coopjit::backend_status()) {
      py::dict d;
      d["backend"] = s.backend;
      d["usable"] = s.usable;
      d["status"] = s.status;
      d["rejected"] = s.rejected;
      l.append(d);
    }
    return l;
  }, "Per runtime: usable device count, why it gives none, and the devices it rejects.");
  m.def("live_shared_allocations", &coopjit::live_shared_allocations, "Shared allocations not yet freed.");

  py::class_<coopjit::SharedAllocation, std::shared_ptr<coopjit::SharedAllocation>>(
      m, "SharedBuffer", py::buffer_protocol(), "Host- and device-visible memory (USM shared / fine-grain SVM).")
      .def_buffer([](coopjit::SharedAllocation& a) {
        return py::buffer_info(a.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(a.bytes())}, {1});
      })
      .def_property_readonly("address", [](const coopjit::SharedAllocation& a) { return reinterpret_cast<uintptr_t>(a.data()); })
      .def_property_readonly("nbytes", &coopjit::SharedAllocation::bytes)
      .def_property_readonly("device", &coopjit::SharedAllocation::device);
  m.def("alloc_shared", [](const std::string& device, size_t nbytes) {
    auto dev = coopjit::open_device(device);
    if (!dev->host_visible())
      throw coopjit::UserError(coopjit::cat(device, "'s memory is not host-visible: NumPy arrays go in and out by copies"));
    return std::make_shared<coopjit::SharedAllocation>(dev, nbytes);
  }, py::arg("device"), py::arg("nbytes"), "Shared memory of nbytes on a SPIR-V device.");

  py::class_<PyDeviceBuffer>(m, "DeviceBuffer", "Device memory (any GPU device) reached through explicit copies.")
      .def_property_readonly("address", [](const PyDeviceBuffer& b) { return reinterpret_cast<uintptr_t>(b.a->data()); })
      .def_property_readonly("nbytes", [](const PyDeviceBuffer& b) { return b.a->bytes(); })
      .def_property_readonly("device", [](const PyDeviceBuffer& b) { return b.a->device(); })
      .def("upload", [](PyDeviceBuffer& b, uintptr_t host, size_t nbytes, size_t offset) {
        py::gil_scoped_release unlocked;
        b.a->upload(reinterpret_cast<const void*>(host), nbytes, offset);
      }, py::arg("host"), py::arg("nbytes"), py::arg("offset") = 0, "Copies nbytes from a host address in.")
      .def("download", [](const PyDeviceBuffer& b, uintptr_t host, size_t nbytes, size_t offset) {
        py::gil_scoped_release unlocked;
        b.a->download(reinterpret_cast<void*>(host), nbytes, offset);
      }, py::arg("host"), py::arg("nbytes"), py::arg("offset") = 0, "Copies nbytes out to a host address.");
  m.def("alloc_device", [](const std::string& device, size_t nbytes) {
    auto dev = coopjit::open_device(device);
    py::gil_scoped_release unlocked;
    return PyDeviceBuffer{std::make_shared<coopjit::SharedAllocation>(dev, nbytes)};
  }, py::arg("device"), py::arg("nbytes"), "Device memory of nbytes (a DeviceBuffer).");

  py::class_<PyKernel>(m, "DeviceKernel")
      .def("launch", [](PyKernel& k, const py::list& args, const std::vector<size_t>& global,
                        const std::vector<size_t>& local) {
        std::vector<coopjit::KernelArg> a;
        for (const auto& item : args) {
          auto t = item.cast<py::tuple>();
          coopjit::KernelArg arg;
          std::string kind = t[0].cast<std::string>();
          if (kind == "ptr") {
            arg.is_pointer = true;
            arg.pointer = reinterpret_cast<void*>(t[1].cast<uintptr_t>());
          } else {
            std::string bytes = t[1].cast<py::bytes>();
            arg.value.assign(bytes.begin(), bytes.end());
          }
          a.push_back(std::move(arg));
        }
        if (global.empty()) throw coopjit::UserError("a launch needs a global size");
        if (!local.empty() && local.size() != global.size())
          throw coopjit::UserError("the local size has a different number of dimensions than the global size");
        auto g = triple(global, 1, "the global size"), l = triple(local, local.empty() ? 0 : 1, "the local size");
        py::gil_scoped_release unlocked;
        k.k->launch(a, static_cast<int>(global.size()), g, l);
      }, py::arg("args"), py::arg("global_size"), py::arg("local_size"),
      "Sets the arguments (('ptr', address) or ('bytes', value)), launches and waits.");

  py::class_<PyModule>(m, "DeviceModule")
      .def("kernel", [](PyModule& p, const std::string& name) { return PyKernel{p.m->kernel(name)}; },
           "The kernel of that name.")
      .def_property_readonly("build_log", [](const PyModule& p) { return p.m->build_log(); });
  m.def("load_spirv", [](const std::string& device, const py::bytes& binary) {
    std::string spirv = binary;
    auto dev = coopjit::open_device(device);
    py::gil_scoped_release unlocked;
    return PyModule{dev->load_spirv(spirv)};
  }, py::arg("device"), py::arg("binary"), "Builds a SPIR-V module on a device (DeviceError with the build log).");
  m.def("load_ptx", [](const std::string& device, const std::string& ptx) {
    auto dev = coopjit::open_device(device);
    py::gil_scoped_release unlocked;
    return PyModule{dev->load_ptx(ptx)};
  }, py::arg("device"), py::arg("ptx"), "Loads a PTX module on a CUDA device (DeviceError with the driver's JIT log).");
  m.def("cuda_image_cache_stats", [] {
    auto s = coopjit::cuda::image_cache_stats();
    py::dict d;
    d["compiles"] = s.compiles;
    return d;
  }, "PTX modules the CUDA driver compiled to machine code in this process (its own JIT cache may have served them).");
}
