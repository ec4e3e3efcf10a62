// Kernels for SPIR-V devices: kernel IR -> verify -> SIMT lowering -> SPIR-V -> the device's
// driver, cached per (device, key) like cpp/runtime/kernel_cache.cpp does for the CPU, and
// launched in work-groups of the kernel's required size. No LLVM types cross this header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "runtime/devices.h"

namespace coopjit {

/// One compiled kernel on one device.
struct DeviceProgram {
  std::string key;       // the cache key: device + plan key + LLVM version
  std::string device;    // "opencl:0", "level_zero:0"
  std::string name;      // the kernel's entry point
  std::string ir_text;   // the kernel IR, as printed
  std::string llvm_ir;   // the LLVM IR handed to the SPIR-V backend (after the IR pipeline)
  std::string spirv;     // the SPIR-V binary (SPIR-V devices)
  std::string target;    // the SIMT lowering's target: "spirv64" or "nvptx64:sm_90"
  std::string ptx;       // the PTX module (NVIDIA devices)
  std::vector<ir::Type> params;  // the kernel's parameter types, in order
  int subgroup_size = 16, work_group_size = 16;
  int64_t dynamic_shared = 0;  // bytes of dynamic shared memory a work-group (function attribute dynamic_shared)
  int64_t tensor_maps = 0;     // CUDA tensor maps (128-byte arguments) after `params` (function attribute tensor_maps)
  double compile_seconds = 0;
  std::shared_ptr<DeviceModule> module;
  std::shared_ptr<DeviceKernel> kernel;

  /// "ir", "llvm", "spirv" (the disassembly; SPIR-V devices) or "ptx" (NVIDIA devices);
  /// UserError for another kind.
  std::string source(const std::string& kind) const;
  /// Launches `groups` work-groups (of work_group_size work-items) and waits.
  void launch(const std::vector<KernelArg>& args, int64_t groups) const;
  /// CUDA: launches `groups` work-groups on `stream` (see DeviceKernel::launch_on_stream) and
  /// returns without waiting; `params` point at each argument's bytes, in parameter order.
  void launch_on_stream(void** params, int64_t groups, uintptr_t stream) const;
};

/// The program cached under (device, key), built from `build` (which names the function with
/// the symbol it is given) on a miss. Thread-safe; each key is compiled once. A device named
/// "target:<name>" (a GPU described by name, gpu_plan.h) gets the SPIR-V module, validated with
/// spirv-val (or for "target:sm_XX" the PTX module), and no driver build: its launch() raises
/// UserError. "cuda:N" devices get PTX for their architecture, JIT-compiled by the driver.
std::shared_ptr<const DeviceProgram> device_program(
    const std::string& device, const std::string& key,
    const std::function<std::unique_ptr<ir::Function>(const std::string& symbol)>& build);

/// The same for a kernel written by a user (coopjit.ir); the key is its printed IR.
std::shared_ptr<const DeviceProgram> device_program(const std::string& device, ir::Function& f);

/// A scalar kernel argument of IR type `t` (index and integers from `i`, floats from `d`), as
/// the SIMT lowering declares it (f16 / bf16 travel as float).
KernelArg scalar_arg(const ir::Type& t, int64_t i, double d);
inline KernelArg pointer_arg(void* p) { KernelArg a; a.is_pointer = true; a.pointer = p; return a; }

/// Every program in the cache (tests validate each module with spirv-val).
std::vector<std::shared_ptr<const DeviceProgram>> device_programs();

struct DeviceCacheStats {
  int64_t entries = 0, hits = 0, misses = 0;
};
DeviceCacheStats device_cache_stats();

}  // namespace coopjit
