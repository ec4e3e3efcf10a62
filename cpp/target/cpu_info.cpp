// Host CPU detection through LLVM (cpu_info.h).
#include "target/cpu_info.h"

#include "core/error.h"

#include <cstdlib>

#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

namespace coopjit {

std::string CpuInfo::feature_string() const {
  std::string s;
  for (const auto& [k, v] : features) {
    if (!s.empty()) s += ",";
    s += (v ? "+" : "-") + k;
  }
  return s;
}

namespace {
// COOPJIT_CPU_LEVEL=avx2 (or sse) turns the wider features off, so that the fallback code paths
// run (and are tested) on a CPU that has more.
void apply_level(CpuInfo& c, const std::string& level) {
  if (level.empty() || level == "native") return;
  if (level != "avx2" && level != "sse")
    throw UserError(cat("COOPJIT_CPU_LEVEL='", level, "' is not one of native, avx2, sse"));
  c.level = level;
  for (auto& [name, on] : c.features) {
    bool wide = name.rfind("avx512", 0) == 0 || name.rfind("amx", 0) == 0 || name == "avx10.1-256" ||
                name == "avx10.1-512" || name == "avx10.2-256" || name == "avx10.2-512" || name == "evex512";
    if (level == "sse") wide = wide || name.rfind("avx", 0) == 0 || name == "fma" || name == "f16c" || name == "vaes" ||
                               name == "vpclmulqdq" || name == "gfni";
    if (wide) on = false;
  }
}
}  // namespace

const CpuInfo& host_cpu() {
  static const CpuInfo info = [] {
    CpuInfo c;
    c.name = llvm::sys::getHostCPUName().str();
    c.triple = llvm::sys::getProcessTriple();
    for (const auto& f : llvm::sys::getHostCPUFeatures()) c.features[f.getKey().str()] = f.getValue();
    const char* level = std::getenv("COOPJIT_CPU_LEVEL");
    apply_level(c, level ? level : "");
    if (c.has("avx512f")) {
      c.vector_bytes = 64;
      c.vector_registers = 32;
    } else if (c.has("avx2") && c.has("fma")) {
      c.vector_bytes = 32;
      c.vector_registers = 16;
    }
    return c;
  }();
  return info;
}

}  // namespace coopjit
