// The code cache: one compiled kernel per (plan key, host target) in memory, backed by the disk
// cache (kind "x86-obj": the object, the kernel IR and the optimized LLVM IR) across processes.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <unordered_map>

#include <llvm/Support/raw_ostream.h>

#include "core/error.h"
#include "core/xxh64.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ir/norm_types.h"
#include "lower/simd_lower.h"
#include "runtime/disk_cache.h"
#include "runtime/fork.h"
#include "runtime/kernel.h"
#include "target/cpu_info.h"
#include "target/cpu_jit.h"

namespace coopjit {
namespace {

constexpr const char* kKind = "x86-obj";

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

// The same for a key in every process, so the object on disk names the symbol it defines.
std::string symbol_for(const std::string& plan_key, const std::string& key) {
  std::string s = "coopjit_";
  for (char c : plan_key.substr(0, 64)) s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s + "_" + xxh64_hex(key);
}

void print_stages(const CompiledKernel& k, const std::string& plan_key) {
  if (debug_enabled("plan"))
    std::cerr << "[coopjit] plan " << plan_key << (k.origin == "disk" ? " (from the disk cache)" : "") << "\n";
  if (debug_enabled("ir")) std::cerr << "[coopjit] kernel IR:\n" << k.ir_text;
}

// Fills k from the disk cache; false when it has no usable entry.
bool load_from_disk(const std::string& key, CompiledKernel& k) {
  auto e = disk_cache::load(kKind, key);
  if (!e) return false;
  auto obj = e->blobs.find("object");
  auto sym = e->meta.find("symbol");
  if (obj == e->blobs.end() || sym == e->meta.end()) return false;
  try {
    k.entry = reinterpret_cast<KernelEntry>(jit_load_object(obj->second, sym->second));
  } catch (const InternalError& err) {
    if (debug_enabled("cache")) std::cerr << "[coopjit] cache: cannot link the stored object: " << err.what() << "\n";
    return false;
  }
  k.symbol = sym->second;
  k.ir_text = e->blobs["ir"];
  k.llvm_ir = e->blobs["llvm"];
  k.origin = "disk";
  return true;
}

using GetFunction = std::function<ir::Function*(const std::string& symbol)>;

void compile(const std::string& plan_key, CompiledKernel& k, const GetFunction& get) {
  ir::Function* f = get(k.symbol);
  k.ir_text = ir::print(*f);
  k.origin = "compiled";
  print_stages(k, plan_key);
  ir::verify(*f);
  auto normed = ir::lower_norm_types(*f);  // SNorm / UNorm matrices: float ones, clamped where produced
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto mod = lower_simd(normed ? *normed : *f, *ctx);
  if (debug_enabled("lower")) {
    std::cerr << "[coopjit] LLVM IR from the lowering (before O3):\n";
    mod->print(llvm::errs(), nullptr);
    llvm::errs().flush();
  }
  JitResult r = jit_compile(std::move(mod), std::move(ctx), k.symbol);
  k.entry = reinterpret_cast<KernelEntry>(r.entry);
  k.llvm_ir = std::move(r.optimized_ir);
  disk_cache::Entry e;
  e.meta = {{"symbol", k.symbol}, {"plan", plan_key}, {"cpu", host_cpu().name}};
  e.blobs = {{"object", std::move(r.object)}, {"ir", k.ir_text}, {"llvm", k.llvm_ir}};
  disk_cache::store(kKind, k.key, e);
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
static std::shared_ptr<const CompiledKernel> lookup_or_compile(const std::string& plan_key, const GetFunction& get) {
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
  std::lock_guard<std::mutex> compile_lock(c.compile_mu);
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
  k->symbol = symbol_for(plan_key, key);
  bool from_disk = load_from_disk(key, *k);
  if (!from_disk) {
    // Another process may be compiling this key: wait for it (bounded), then look again.
    disk_cache::CompileLock lock(kKind, key, disk_cache::lock_timeout());
    from_disk = lock.held() && load_from_disk(key, *k);
    if (!from_disk) compile(plan_key, *k, get);
  }
  if (from_disk) {
    print_stages(*k, plan_key);
    if (debug_enabled("lower"))
      std::cerr << "[coopjit] LLVM IR from the lowering: not stored (loaded from the disk cache; COOPJIT_CACHE=0 "
                   "compiles it again)\n";
  }
  k->compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (debug_enabled("cache"))
    std::cerr << "[coopjit] cache: " << plan_key << (from_disk ? " loaded from disk in " : " compiled in ")
              << k->compile_seconds * 1e3 << " ms\n";
  if (debug_enabled("llvm")) std::cerr << "[coopjit] LLVM IR after O3:\n" << k->llvm_ir;
  if (debug_enabled("asm")) std::cerr << "[coopjit] assembly:\n" << k->assembly();
  std::lock_guard<std::mutex> g(c.mu);
  ++(from_disk ? c.stats.disk_loads : c.stats.compiles);
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

// Before fork(): no compile under way (none is inside LLVM's JIT, or holds a disk compile lock)
// and the map consistent; both released after it, in the parent and the child (runtime/fork.h).
void kernel_cache_fork(fork_safety::Phase phase) {
  Cache& c = cache();
  if (phase == fork_safety::Phase::prepare) {
    c.compile_mu.lock();
    c.mu.lock();
  } else {
    c.mu.unlock();
    c.compile_mu.unlock();
  }
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
