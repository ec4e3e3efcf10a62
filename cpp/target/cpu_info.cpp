// Host CPU detection through LLVM (cpu_info.h).
#include "target/cpu_info.h"

#include "core/error.h"

#include <cstdlib>

#include <sys/syscall.h>
#include <unistd.h>

#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/TargetParser/X86TargetParser.h>
#include <llvm/ADT/SmallVector.h>

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

void set_vectors(CpuInfo& c) {
  if (c.has("avx512f")) {
    c.vector_bytes = 64;
    c.vector_registers = 32;
  } else if (c.has("avx2") && c.has("fma")) {
    c.vector_bytes = 32;
    c.vector_registers = 16;
  }
}
}  // namespace

CpuInfo cpu_info_for(const std::string& name) {
  if (llvm::X86::parseArchX86(name) == llvm::X86::CK_None)
    throw UserError(cat("cpu '", name, "' is not an x86 CPU LLVM knows (for example sapphirerapids, graniterapids, ",
                        "znver4, skylake-avx512, x86-64-v3)"));
  CpuInfo c;
  c.name = name;
  c.triple = llvm::sys::getProcessTriple();
  llvm::SmallVector<llvm::StringRef, 64> feats;
  llvm::X86::getFeaturesForCPU(name, feats);
  // The CPU's list leaves out what its features imply (alderlake names avxvnni and fma, not avx2
  // or avx): add those, so that a named CPU gets the vectors and instructions it has.
  llvm::StringMap<bool> all;
  for (llvm::StringRef f : feats) {
    all[f] = true;
    llvm::X86::updateImpliedFeatures(f, true, all);
  }
  for (const auto& f : all)
    if (f.getValue()) c.features[f.getKey().str()] = true;
  set_vectors(c);
  return c;
}

const CpuInfo& host_cpu() {
  static const CpuInfo info = [] {
    CpuInfo c;
    c.name = llvm::sys::getHostCPUName().str();
    c.triple = llvm::sys::getProcessTriple();
    for (const auto& f : llvm::sys::getHostCPUFeatures()) c.features[f.getKey().str()] = f.getValue();
    const char* level = std::getenv("COOPJIT_CPU_LEVEL");
    apply_level(c, level ? level : "");
    set_vectors(c);
    return c;
  }();
  return info;
}

bool amx_permitted() {
  static const bool ok = host_cpu().has("amx-tile") &&
                         syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
  return ok;
}

}  // namespace coopjit
