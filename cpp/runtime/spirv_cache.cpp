// SPIR-V modules through the disk cache (spirv_cache.h).
#include "runtime/spirv_cache.h"

#include <mutex>

#include "core/error.h"
#include "core/xxh64.h"
#include "runtime/disk_cache.h"
#include "runtime/fork.h"

namespace coopjit {
namespace {

constexpr const char* kKind = "spirv";

std::mutex mu;
SpirvCacheStats stats;

// Everything that changes the module besides the build (disk_cache::identity): the IR (as a
// 128-bit hash and its length), the extensions, the optimization level, the kernel shapes.
std::string key_of(const std::string& llvm_ir, const SpirvOptions& o) {
  std::string k = cat("spirv O", o.opt_level, " ir ", xxh64_hex(llvm_ir, 0), xxh64_hex(llvm_ir, 1), ":",
                      llvm_ir.size(), " ext");
  for (const auto& e : o.extensions) k += " " + e;
  for (const auto& [name, s] : o.kernel_shapes)
    k += cat(" kernel ", name, " sg ", s.subgroup_size, " wg ", s.work_group_size[0], "x", s.work_group_size[1], "x",
             s.work_group_size[2]);
  return k;
}

bool load(const std::string& key, SpirvResult& r) {
  auto e = disk_cache::load(kKind, key);
  if (!e || !e->blobs.count("spirv")) return false;
  r.binary = e->blobs["spirv"];
  r.optimized_ir = e->blobs["llvm"];
  return true;
}

}  // namespace

SpirvResult cached_spirv(const std::string& llvm_ir, const SpirvOptions& options) {
  const std::string key = key_of(llvm_ir, options);
  SpirvResult r;
  bool from_disk = load(key, r);
  if (!from_disk) {
    disk_cache::CompileLock lock(kKind, key, disk_cache::lock_timeout());
    from_disk = lock.held() && load(key, r);
    if (!from_disk) {
      r = compile_spirv_ir(llvm_ir, options);
      disk_cache::store(kKind, key, {{{"kind", "SPIR-V module"}}, {{"spirv", r.binary}, {"llvm", r.optimized_ir}}});
    }
  }
  std::lock_guard<std::mutex> g(mu);
  ++(from_disk ? stats.disk_loads : stats.compiles);
  return r;
}

void spirv_cache_fork(fork_safety::Phase phase) {
  if (phase == fork_safety::Phase::prepare)
    mu.lock();
  else
    mu.unlock();
}

SpirvCacheStats spirv_cache_stats() {
  std::lock_guard<std::mutex> g(mu);
  return stats;
}

}  // namespace coopjit
