// The extension module coopjit._core: error translation, version and CPU facts, and the
// registration of each binding file. Logic lives in the C++ core and in python/coopjit.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "plan/gemm_plan.h"
#include "runtime/fork.h"
#include "runtime/gemm.h"
#include "runtime/kernel.h"
#include "runtime/thread_pool.h"
#include "target/cpu_info.h"

namespace py = pybind11;

void bind_gemm(py::module_& m);
void bind_tensor(py::module_& m);
void bind_ir(py::module_& m);
void bind_reduce(py::module_& m);
void bind_layout(py::module_& m);
void bind_devices(py::module_& m);
void bind_gpu(py::module_& m);
void bind_cache(py::module_& m);
void bind_peak(py::module_& m);

PYBIND11_MODULE(_core, m) {
  m.doc() = "coopjit C++ core: spec -> plan -> kernel IR -> LLVM -> machine code";
  coopjit::fork_safety::install();  // a forked child gets a fresh worker pool and sane locks
  static py::exception<coopjit::VerifyError> verify_error(m, "VerifyError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const coopjit::VerifyError& e) {
      py::set_error(verify_error, e.what());
    } catch (const coopjit::UserTypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const coopjit::UserError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const coopjit::InternalError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.attr("version") = COOPJIT_VERSION;
  m.attr("llvm_version") = COOPJIT_LLVM_VERSION;
  m.def("cpu_info", [] {
    const coopjit::CpuInfo& c = coopjit::host_cpu();
    py::dict d;
    d["name"] = c.name;
    d["triple"] = c.triple;
    d["vector_bytes"] = c.vector_bytes;
    d["vector_registers"] = c.vector_registers;
    d["level"] = c.level;
    d["features"] = c.features;
    return d;
  }, "The host CPU as LLVM detects it: name, triple, features, vector width.");
  m.def("cache_stats", [] {
    auto s = coopjit::cache_stats();
    py::dict d;
    d["entries"] = s.entries;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    d["compiles"] = s.compiles;
    d["disk_loads"] = s.disk_loads;
    return d;
  }, "In-memory code cache counters.");
  m.def(
      "cache_clear",
      [] {
        coopjit::cache_clear();
        coopjit::gemm_memo_forget();
      },
      "Forgets the in-memory caches: compiled kernels and the per-problem plans (compiled code stays mapped).");

  m.def("get_num_threads", [] { return coopjit::ThreadPool::get().size(); },
        "Workers of the CPU pool (from the affinity mask; COOPJIT_NUM_THREADS overrides it).");
  m.def("set_num_threads", [](int64_t n) { coopjit::ThreadPool::get().set_size(n); }, py::arg("n"),
        "Sets the number of CPU workers used by later calls (1..max_threads).");
  m.attr("max_threads") = coopjit::ThreadPool::kMaxThreads;  // the most workers a pool may have
  // The opt-in launch trace (thread_pool.h; COOPJIT_TRACE=1): private, for benchmarks/amx_probe.py.
  m.def("_set_launch_trace", &coopjit::set_launch_trace, py::arg("on"));
  // Whether a launch's threads keep spinning while it runs (thread_pool.cpp): private, for A/B runs.
  m.def("_set_pool_hold", &coopjit::set_pool_hold, py::arg("on"));
  // Pinning the pool's threads, one per CPU in _pin_order() (thread_pool.h): private, for A/B runs.
  m.def("_set_pool_pin", &coopjit::set_pool_pin, py::arg("on"));
  // A pool thread on its caller's CPU moves to another at a launch's start (thread_pool.h): private, for A/B runs.
  m.def("_set_pool_spread", &coopjit::set_pool_spread, py::arg("on"));
  m.def("_pin_order", &coopjit::pin_order, "The CPUs pinned threads take: one per physical core, then the siblings.");
  auto trace_dict = [](const coopjit::LaunchTrace& t) {
    py::dict d;
    d["workers"] = t.workers;
    d["start_ns"] = t.start;
    d["end_ns"] = t.end;
    d["slept"] = t.slept;
    d["cpu"] = t.cpu;
    d["cpu_end"] = t.cpu_end;
    d["thread"] = t.thread;
    d["moved"] = t.moved;
    d["cpu_time_ns"] = t.cpu_time;
    d["join_ns"] = t.join;
    d["origin_ns"] = t.origin;
    return d;
  };
  m.def("_launch_trace", [trace_dict] { return trace_dict(coopjit::last_launch_trace()); },
        "The last multi-worker launch's stamps (ns after its start), when the trace is on.");
  m.def("_launch_traces", [trace_dict] {
    py::list out;
    for (const coopjit::LaunchTrace& t : coopjit::take_launch_traces()) out.append(trace_dict(t));
    return out;
  }, "The traced launches since the last call (up to 64, oldest first; origin_ns: each one's start), then none.");
  m.def("stream_k_tiles", &coopjit::stream_k_tiles, py::arg("split"), py::arg("tiles_mn"), py::arg("tiles_k"),
        py::arg("workers"), "Global tiles in the Stream-K partition (seeds/004); the rest are data-parallel.");

  bind_gemm(m);
  bind_tensor(m);
  bind_ir(m);
  bind_reduce(m);
  bind_layout(m);
  bind_devices(m);
  bind_gpu(m);
  bind_cache(m);
  bind_peak(m);
}
