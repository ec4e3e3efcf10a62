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
  double compile_seconds = 0;
  /// The host assembly, generated from llvm_ir on first request.
  std::string assembly() const;

 private:
  mutable std::string asm_;
  mutable std::once_flag asm_once_;
};

/// Returns the kernel cached under `plan_key` (plus the host target), building it with `build`
/// (IR -> verify -> lower -> O3 -> JIT) on a miss. Thread-safe; each key is compiled once.
std::shared_ptr<const CompiledKernel> cached_kernel(
    const std::string& plan_key, const std::function<std::unique_ptr<ir::Function>(const std::string& symbol)>& build);

/// The same for a kernel written by a user (coopjit.ir): `f` is renamed to its JIT symbol on a
/// miss; the key is its printed IR.
std::shared_ptr<const CompiledKernel> cached_kernel(ir::Function& f);

struct CacheStats {
  int64_t entries = 0, hits = 0, misses = 0;
};
CacheStats cache_stats();
void cache_clear();

/// The environment variable COOPJIT_DEBUG (comma-separated: plan, ir, llvm, asm, or all)
/// prints those stages to stderr as kernels are built.
bool debug_enabled(const std::string& stage);

}  // namespace coopjit
