// What the host CPU is and can do, as LLVM detects it (sys::getHostCPUName/Features). The CPU
// name can read "rocketlake" or "znver4" while the features say more: the features decide.
#pragma once

#include <map>
#include <string>

namespace coopjit {

struct CpuInfo {
  std::string name;    // LLVM's CPU name
  std::string triple;  // the process triple
  std::map<std::string, bool> features;
  int vector_bytes = 16;
  int vector_registers = 16;
  std::string level = "native";  // or what COOPJIT_CPU_LEVEL forced: avx2, sse

  bool has(const std::string& f) const {
    auto it = features.find(f);
    return it != features.end() && it->second;
  }
  /// "+avx512f,-amx-tile,..." in a fixed order: part of every code cache key.
  std::string feature_string() const;
};

const CpuInfo& host_cpu();

}  // namespace coopjit
