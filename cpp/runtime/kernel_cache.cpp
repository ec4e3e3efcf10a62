// The in-memory code cache: one compiled kernel per (plan key, host target).
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lower/simd_lower.h"
#include "runtime/kernel.h"
#include "target/cpu_info.h"
#include "target/cpu_jit.h"

namespace coopjit {
namespace {

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const CompiledKernel>> entries;
  std::mutex compile_mu;  // one compile at a time (LLVM memory and the 2 cores favour it)
  CacheStats stats;
};
Cache& cache() {
  static Cache c;
  return c;
}

std::string symbol_for(const std::string& key, int64_t serial) {
  std::string s = "coopjit_";
  for (char c : key) s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s + "_" + std::to_string(serial);
}

}  // namespace

bool debug_enabled(const std::string& stage) {
  const char* env = std::getenv("COOPJIT_DEBUG");
  if (!env) return false;
  std::string s = std::string(",") + env + ",";
  return s.find("," + stage + ",") != std::string::npos || s.find(",all,") != std::string::npos;
}

std::string CompiledKernel::assembly() const {
  std::call_once(asm_once_, [this] { asm_ = emit_assembly(llvm_ir); });
  return asm_;
}

// The cache proper: `get` returns the function to compile under a symbol (alive until return).
static std::shared_ptr<const CompiledKernel> lookup_or_compile(const std::string& plan_key,
                                                        const std::function<ir::Function*(const std::string&)>& get) {
  const CpuInfo& cpu = host_cpu();
  const std::string key = plan_key + "@" + cpu.name + ":" + cpu.feature_string();
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> g(c.mu);
    auto it = c.entries.find(key);
    if (it != c.entries.end()) {
      ++c.stats.hits;
      return it->second;
    }
  }
  std::lock_guard<std::mutex> compile(c.compile_mu);
  {
    std::lock_guard<std::mutex> g(c.mu);  // another thread may have compiled it meanwhile
    auto it = c.entries.find(key);
    if (it != c.entries.end()) {
      ++c.stats.hits;
      return it->second;
    }
    ++c.stats.misses;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto k = std::make_shared<CompiledKernel>();
  k->key = key;
  k->symbol = symbol_for(plan_key, c.stats.misses);
  ir::Function* f = get(k->symbol);
  k->ir_text = ir::print(*f);
  if (debug_enabled("plan")) std::cerr << "[coopjit] plan " << plan_key << "\n";
  if (debug_enabled("ir")) std::cerr << "[coopjit] kernel IR:\n" << k->ir_text;
  ir::verify(*f);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto mod = lower_simd(*f, *ctx);
  JitResult r = jit_compile(std::move(mod), std::move(ctx), k->symbol);
  k->entry = reinterpret_cast<KernelEntry>(r.entry);
  k->llvm_ir = std::move(r.optimized_ir);
  k->compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (debug_enabled("llvm")) std::cerr << "[coopjit] LLVM IR after O3:\n" << k->llvm_ir;
  if (debug_enabled("asm")) std::cerr << "[coopjit] assembly:\n" << k->assembly();
  std::lock_guard<std::mutex> g(c.mu);
  c.entries[key] = k;
  c.stats.entries = static_cast<int64_t>(c.entries.size());
  return k;
}

std::shared_ptr<const CompiledKernel> cached_kernel(
    const std::string& plan_key, const std::function<std::unique_ptr<ir::Function>(const std::string&)>& build) {
  std::unique_ptr<ir::Function> holder;
  return lookup_or_compile(plan_key, [&](const std::string& symbol) {
    holder = build(symbol);
    return holder.get();
  });
}

std::shared_ptr<const CompiledKernel> cached_kernel(ir::Function& f) {
  ir::verify(f);  // user programs: errors before anything is cached
  const std::string key = "custom:" + ir::print(f);
  return lookup_or_compile(key, [&](const std::string& symbol) {
    f.name = symbol;  // the user's function takes its JIT symbol
    return &f;
  });
}

CacheStats cache_stats() {
  std::lock_guard<std::mutex> g(cache().mu);
  return cache().stats;
}

void cache_clear() {
  std::lock_guard<std::mutex> g(cache().mu);
  cache().entries.clear();
  cache().stats = {};
}

}  // namespace coopjit
