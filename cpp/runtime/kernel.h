// A compiled kernel and the in-memory code cache. This header holds no LLVM types, so the
// Python bindings can include it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "ir/ir.h"

namespace coopjit {

/// The calling convention of every CPU kernel: parameter slots by kind (see simd_lower.h).
using KernelEntry = void (*)(void* const* ptrs, const int64_t* ints, const double* fps);

struct CompiledKernel {
  std::string key;      // the code cache key: plan key + target
  std::string symbol;   // the JIT symbol
  std::string ir_text;  // the kernel IR, as printed
  std::string llvm_ir;  // LLVM IR after the O3 pipeline
  KernelEntry entry = nullptr;
  double compile_seconds = 0;  // the LLVM compile, or the load when origin is "disk"
  std::string origin;          // "compiled" (by LLVM in this process) or "disk" (the disk cache)
  /// The host assembly, generated from llvm_ir on first request.
  std::string assembly() const;

 private:
  mutable std::string asm_;
  mutable std::once_flag asm_once_;
};

/// Returns the kernel cached under `plan_key` (plus the host target), building it with `build`
/// (IR -> verify -> lower -> O3 -> object -> JIT) on a miss, unless the disk cache holds its
/// object (runtime/disk_cache.h), which is then linked without running LLVM's pipeline.
/// Thread-safe; each key is compiled once per process, and once per machine while another
/// process compiling it holds its lock.
std::shared_ptr<const CompiledKernel> cached_kernel(
    const std::string& plan_key, const std::function<std::unique_ptr<ir::Function>(const std::string& symbol)>& build);

/// The same for a kernel written by a user (coopjit.ir): `f` is renamed to its JIT symbol on a
/// miss; the key is its printed IR.
std::shared_ptr<const CompiledKernel> cached_kernel(ir::Function& f);

struct CacheStats {
  int64_t entries = 0, hits = 0, misses = 0;
  int64_t compiles = 0;    // misses compiled by LLVM in this process
  int64_t disk_loads = 0;  // misses served by the disk cache
};
CacheStats cache_stats();
void cache_clear();

/// The environment variable COOPJIT_DEBUG (comma-separated: plan, ir, lower, llvm, asm, cache,
/// or all) prints those stages to stderr as kernels are built: the plan, the kernel IR, the
/// LLVM IR from the lowering, the LLVM IR after O3, the assembly, and the disk cache's doings.
bool debug_enabled(const std::string& stage);

}  // namespace coopjit
