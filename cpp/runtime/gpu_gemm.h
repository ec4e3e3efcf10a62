// GEMM on a SPIR-V device: plan (gpu_plan.h), build (gemm_recipe_gpu.h) and cache the program
// (device_program.h), launch it over the macro tiles (Stream-K: the workers and data-parallel
// tiles, then the fix-up over a workspace in shared memory). The operands must be device-visible
// memory (coopjit.empty / shared allocations); the Python layer copies host arrays there.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plan/gpu_plan.h"
#include "runtime/device_program.h"
#include "spec/gemm_spec.h"

namespace coopjit {

struct GpuGemmKernel {
  GemmSpec spec;
  GpuGemmPlan plan;
  PlanOverrides overrides;
  std::string device;
  std::shared_ptr<const DeviceProgram> code;
  std::shared_ptr<const DeviceProgram> fixup;  // Stream-K plans: adds the partial tiles
  std::shared_ptr<const DeviceProgram> copy;   // kmajor plans: the K-major copy (kmajor_copy.h)
};

/// Plans `spec` for `device` and returns its compiled kernel (from the cache when it exists).
GpuGemmKernel gpu_gemm_kernel(const GemmSpec& spec, const std::string& device, const PlanOverrides& overrides = {});

/// Runs `k` on operands with `spec`'s shapes and strides (the caller checked that they need the
/// same plan); a, b, c point at element [0, 0] of op(A), op(B) and C in device-visible memory.
/// `epilogue`: the device addresses of the fused epilogue's operands (required when the plan has one).
void run_gpu_gemm(const GpuGemmKernel& k, const GemmSpec& spec, const void* a, const void* b, void* c, double alpha,
                  double beta, const EpilogueArgs* epilogue = nullptr);

/// One product's launch prepared once (CUDA device arrays; data-parallel plans, and Stream-K in
/// the warp-specialized kernel): the kernel, its grid and its argument bytes, of which each launch
/// sets the three pointers, alpha, beta and the fused epilogue's operands. Made by prepare_gpu_gemm_launch; shared by threads (launch copies).
/// The Tensor Memory Accelerator's 2-D maps of a kernel's A and B (one matrix each): element
/// size and row strides in bytes; `ok` is false where the operands' strides and extents cannot be
/// described (the plan without TMA runs them).
struct TmaGeometry {
  bool ok = false;
  int64_t esz = 0, a_rows = 0, b_rows = 0;
  // tma_store plans: C's map (its strides and extents; the base's alignment is checked per call).
  bool c_ok = false;
  int64_t c_esz = 0, c_lines = 0;  // C's element bytes; bytes between its lines (rows, or columns when unit_c)
};
/// A tma_store plan's C at `c` can be written through a tensor map (the base 16-byte aligned too).
bool tma_store_ok(const TmaGeometry& t, const void* c);

struct GpuGemmLaunch {
  GpuGemmKernel k;
  GemmArgs g;                 // the kernel's view of the operands (TMA plans make their tensor maps from it)
  TmaGeometry tma;            // TMA plans: the maps' geometry
  bool swap_ab = false;
  bool int_scalars = false;
  int64_t groups = 0;
  ir::ScalarType acc{};
  std::vector<uint64_t> slots;  // each parameter's bytes (at most 8), in parameter order
  size_t alpha_slot = 0;        // alpha's slot (beta's the next)
  // Plans with a fused epilogue: the first of its four operand slots (scale, row_scale, bias,
  // residual; 0: no epilogue) and its steps (which operands a launch must give).
  size_t epi_slot = 0;
  GemmEpilogue epilogue;
  // Stream-K ws plans: the workspace's slot (0: none) and bytes (a workspace per thread, device
  // and stream), and the fix-up's work-groups (queued after the product; 0: no fix-up).
  size_t ws_slot = 0;
  int64_t ws_bytes = 0, fixup_groups = 0;
  size_t flags_slot = 0;  // sk_flags plans: the flags' parameter (stream_k_flags)
  int64_t flags_bytes = 0;
  // kmajor plans: the operands' K-major copies go first (on the same stream, into a workspace
  // per thread, device and stream); `k` is then the product on the copies. `spec`: the caller's.
  int kmajor = 0;
  GemmSpec spec;
  std::shared_ptr<const DeviceProgram> copy;
  // TMA plans: the last call's two tensor maps (128 bytes each) and the kernel operands they
  // describe; a call on the same operands reuses them (the maps depend on nothing else here), one
  // on others makes them again. Not copied with the launch.
  struct MapCache {
    std::mutex m;
    const void* a = nullptr;
    const void* b = nullptr;
    const void* c = nullptr;  // tma_store plans: C's map too
    alignas(64) uint8_t maps[3][128] = {};
    MapCache() = default;
    MapCache(const MapCache&) {}
    MapCache& operator=(const MapCache&) { return *this; }
  };
  mutable MapCache map_cache;
  // tma_store plans: a call whose C is not 16-byte aligned runs the launch of the plan without
  // TMA stores, prepared at its first such call (the kernel's spec and `aligned` kept for it).
  GemmSpec kspec;
  bool kaligned = false;
  struct Fallback {
    std::mutex m;
    std::shared_ptr<const GpuGemmLaunch> l;
    Fallback() = default;
    Fallback(const Fallback&) {}
    Fallback& operator=(const Fallback&) { return *this; }
  };
  mutable Fallback no_tma_store;
};

/// The launch of `k` for operands with `spec`'s shapes and strides (the caller checked that they
/// need k's plan); `aligned`: whether op(A) and op(B) start on 16 bytes (else the plan without
/// the cp.async pipeline). Null when the plan streams (Stream-K) outside the warp-specialized
/// kernel (ws plans queue the product and its fix-up).
std::shared_ptr<const GpuGemmLaunch> prepare_gpu_gemm_launch(const GpuGemmKernel& k, const GemmSpec& spec, bool aligned);

/// Queues the product on `stream` (a CUstream handle) and returns without waiting. `epilogue`:
/// the device addresses of the fused epilogue's operands (required when the plan has one; read
/// by the kernel when it runs, so they must stay valid until then, as a, b and c).
void launch_gpu_gemm(const GpuGemmLaunch& l, const void* a, const void* b, void* c, double alpha, double beta,
                     uintptr_t stream, const EpilogueArgs* epilogue = nullptr);

/// The in-kernel Stream-K flags' allocation of this thread, `device` and `stream` (else of
/// stream 0, the synchronous path's), as i32 (empty when there is none): zero between launches,
/// after them sk_trace plans' trace entries (gpu_plan.h). `clear`: zeroed after the copy.
std::vector<int32_t> read_stream_k_flags(const std::string& device, uintptr_t stream, bool clear);

}  // namespace coopjit
