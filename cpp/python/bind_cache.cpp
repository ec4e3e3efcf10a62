// Python bindings of the disk cache and of the tuned-plan table: where the cache lives, what it
// holds, clearing it; the GEMM problem signature the tuner keys on; setting tuned plans.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>

#include "core/xxh64.h"
#include "runtime/disk_cache.h"
#include "runtime/gemm.h"
#include "runtime/spirv_cache.h"
#include "runtime/thread_pool.h"
#include "runtime/tuned_plans.h"
#include "target/cpu_info.h"

namespace py = pybind11;
using namespace coopjit;

using Types = std::array<std::string, 3>;  // IR names of the element types of a, b, c (as gemm takes them)
GemmSpec gemm_spec_of(const py::array& a, const py::array& b, const py::array& c, bool accumulate, const Types& types);

void bind_cache(py::module_& m) {
  m.def("set_cache_dir", &disk_cache::set_directory, py::arg("path"),
        "Sets the disk cache's directory; '' disables the disk cache.");
  m.def("cache_dir", &disk_cache::directory, "The disk cache's directory ('' when disabled).");
  m.def("cache_identity", &disk_cache::identity, "The build identity every disk cache entry must match.");
  m.def("disk_cache_info", [] {
    auto i = disk_cache::info();
    auto s = disk_cache::stats();
    py::dict d;
    d["directory"] = i.directory;
    d["entries"] = i.entries;
    d["bytes"] = i.bytes;
    d["kinds"] = i.kinds;
    d["loads"] = s.loads;
    d["stores"] = s.stores;
    d["rejected"] = s.rejected;
    d["write_errors"] = s.write_errors;
    d["lock_waits"] = s.lock_waits;
    d["lock_timeouts"] = s.lock_timeouts;
    d["evicted"] = s.evicted;
    return d;
  }, "The disk cache: directory, entries, bytes per kind, and this process's counters.");
  m.def("spirv_cache_stats", [] {
    auto s = spirv_cache_stats();
    py::dict d;
    d["compiles"] = s.compiles;
    d["disk_loads"] = s.disk_loads;
    return d;
  }, "SPIR-V modules compiled by LLVM in this process, and loaded from the disk cache.");
  m.def("disk_cache_clear", &disk_cache::clear, "Deletes every disk cache entry; returns how many.");
  m.def("disk_cache_path", &disk_cache::entry_path, py::arg("kind"), py::arg("key"),
        "The file of one entry (kind 'x86-obj' and a kernel's key).");
  m.def("xxh64", [](py::bytes data, uint64_t seed) { return xxh64_hex(std::string(data), seed); }, py::arg("data"),
        py::arg("seed") = 0, "The XXH64 the disk cache checksums entries with (16 hex digits).");

  m.def("gemm_signature",
        [](const py::array& a, const py::array& b, const py::array& c, bool accumulate, const Types& types) {
          return gemm_signature(gemm_spec_of(a, b, c, accumulate, types));
        },
        py::arg("a"), py::arg("b"), py::arg("c"), py::arg("accumulate"), py::arg("types"),
        "What a GEMM's plan depends on, as the tuned-plan table keys it (operands as gemm takes them).");
  m.def("gemm_plan",
        [](const py::array& a, const py::array& b, const py::array& c, bool accumulate, const Types& types,
           const PlanOverrides& overrides) {
          return plan_gemm(gemm_spec_of(a, b, c, accumulate, types), host_target(), overrides).fields();
        },
        py::arg("a"), py::arg("b"), py::arg("c"), py::arg("accumulate"), py::arg("types"),
        py::arg("overrides") = PlanOverrides{},
        "The plan (fields) gemm would choose for these operands with these overrides, ignoring tuned plans.");
  m.def("set_tuned_plan", &set_tuned_plan, py::arg("signature"), py::arg("overrides"),
        "Sets the tuned plan of a GEMM signature (empty overrides remove it).");
  m.def("tuned_plans", &tuned_plans, "The tuned-plan table: signature -> overrides.");
  m.def("clear_tuned_plans", &clear_tuned_plans, "Forgets every tuned plan of this process.");
}
