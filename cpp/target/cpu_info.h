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

/// What LLVM knows of a named x86 CPU ("sapphirerapids", "graniterapids", "znver4", ...): its
/// features, for code built for it on another machine (coopjit.cross_compile). UserError for a
/// name LLVM does not know.
CpuInfo cpu_info_for(const std::string& name);

/// Whether this process may use AMX tile data: asks Linux once (arch_prctl(ARCH_REQ_XCOMP_PERM,
/// XTILEDATA)), as every process must before its first tile instruction. False without AMX.
bool amx_permitted();

}  // namespace coopjit
