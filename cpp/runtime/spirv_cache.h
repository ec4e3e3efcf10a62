// SPIR-V modules through the disk cache (kind "spirv"): a module is compiled by LLVM's SPIR-V
// backend once per (LLVM IR, options) on this machine and loaded from disk afterwards. A SPIR-V
// module does not depend on the device (the driver finishes it), so the device is not in the key.
#pragma once

#include <cstdint>
#include <string>

#include "target/spirv_target.h"

namespace coopjit {

/// compile_spirv_ir(llvm_ir, options), or the module stored by an earlier compile of the same.
SpirvResult cached_spirv(const std::string& llvm_ir, const SpirvOptions& options = {});

struct SpirvCacheStats {
  int64_t compiles = 0, disk_loads = 0;
};
SpirvCacheStats spirv_cache_stats();

}  // namespace coopjit
