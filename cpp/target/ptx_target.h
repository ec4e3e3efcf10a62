// PTX out of LLVM: an llvm::Module of PTX kernels (triple nvptx64-nvidia-cuda, from the SIMT
// lowering's NVPTX target) optimized and compiled by LLVM's NVPTX backend for one SM
// architecture. The CUDA driver JIT-compiles the PTX (runtime/cuda.h); ptxas checks it in tests.
#pragma once

#include <string>

namespace llvm {
class Module;
}  // namespace llvm

namespace coopjit {

inline constexpr const char* kNvptxTriple = "nvptx64-nvidia-cuda";

struct PtxOptions {
  std::string sm = "sm_90";  // the .target
  /// The PTX ISA version as 10 * major + minor (78: 7.8); 0: the lowest that LLVM allows for sm
  /// (7.0 for sm_80, 7.8 for sm_90), which every CUDA 12 and 13 driver accepts.
  int ptx_version = 0;
  int opt_level = 3;  // 0..3 as in SpirvOptions
};

struct PtxResult {
  std::string ptx;           // the PTX text
  std::string optimized_ir;  // the LLVM IR handed to the backend
};

/// Compiles the kernels of `module` (optimized in place) to PTX. InternalError if the backend
/// fails (LLVM's fatal errors are turned into exceptions).
PtxResult compile_ptx(llvm::Module& module, const PtxOptions& options = {});

/// The same for a module given as LLVM IR text (the disk cache keeps PTX by that text).
PtxResult compile_ptx_ir(const std::string& llvm_ir, const PtxOptions& options = {});

/// compile_ptx_ir through the disk cache (kind "ptx"): compiled once per (IR, SM, PTX version,
/// optimization level) on this machine, loaded from disk afterwards. The driver keeps its own
/// cache of the machine code it JIT-compiles from PTX (~/.nv/ComputeCache).
PtxResult cached_ptx(const std::string& llvm_ir, const PtxOptions& options = {});

struct PtxCacheStats {
  int64_t compiles = 0, disk_loads = 0;
};
PtxCacheStats ptx_cache_stats();

/// The highest PTX ISA version (10 * major + minor) a CUDA driver of version `driver`
/// (cuDriverGetVersion: 1000 * major + 10 * minor) JIT-compiles, from NVIDIA's PTX ISA release
/// notes (CUDA 12.0: 8.0, ..., 12.8: 8.7, 12.9: 8.8, 13.0: 9.0); 0 for drivers older than 11.0.
int max_ptx_version_for_driver(int driver);

/// The lowest PTX ISA version LLVM's NVPTX backend writes for `sm` (70 for sm_80, 78 for sm_90).
int min_ptx_version_for_sm(const std::string& sm);

}  // namespace coopjit
