// Host CPU detection through LLVM (cpu_info.h).
#include "target/cpu_info.h"

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

const CpuInfo& host_cpu() {
  static const CpuInfo info = [] {
    CpuInfo c;
    c.name = llvm::sys::getHostCPUName().str();
    c.triple = llvm::sys::getProcessTriple();
    for (const auto& f : llvm::sys::getHostCPUFeatures()) c.features[f.getKey().str()] = f.getValue();
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
