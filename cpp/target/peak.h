// Microbenchmarks of the host's peak throughput (f32 FMA, AVX512-BF16 dot, AMX bf16: loops
// JIT-compiled from LLVM IR built here; copy bandwidth: memcpy), on one thread and on all cores.
#pragma once

#include <string>
#include <vector>

namespace coopjit {

/// One measured peak. When the CPU lacks the unit, `available` is false and `note` says why.
struct PeakMeasurement {
  std::string name;  // one of peak_names()
  std::string unit;  // "GFLOP/s" or "GB/s"
  bool available = false;
  double single = 0;  // one thread
  double all = 0;     // one thread per core of the process's affinity mask
  int threads = 1;    // the thread count of `all`
  std::string note;   // what was measured, or why it could not be
};

/// The peaks measure_peak knows: "f32_fma", "bf16_dot", "amx_bf16", "amx_int8", "copy".
std::vector<std::string> peak_names();

/// Measures one peak, on one thread and on all cores: each timed run lasts about `seconds`, and
/// the best of 5 runs is kept. Takes about 10 * `seconds`.
PeakMeasurement measure_peak(const std::string& name, double seconds = 0.1);

/// The host assembly of one JIT-compiled peak kernel ("f32_fma", "bf16_dot", "amx_bf16", "amx_int8"), built
/// for the host's features plus the ones the kernel needs: the AMX kernel can be read on any
/// x86 host even where it cannot run.
std::string peak_kernel_assembly(const std::string& name);

}  // namespace coopjit
