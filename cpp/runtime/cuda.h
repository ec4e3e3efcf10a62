// The CUDA driver, loaded with dlopen("libcuda.so.1") so that coopjit imports without it:
// device discovery and properties, and for each device a Device (devices.h) on its primary
// context (the one PyTorch and CuPy use): device memory (cuMemAlloc, explicit copies; never
// managed memory), modules from PTX (compiled by the driver's JIT through cuLink*, the JIT log on failure; the
// machine code kept in coopjit's disk cache), kernels
// launched on one stream per device and waited for. No CUDA type crosses this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/devices.h"

namespace coopjit::cuda {

struct DeviceProps {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sms = 0, warp_size = 32, max_threads_per_block = 1024, registers_per_block = 0;
  int64_t total_memory = 0, shared_per_block = 0, shared_per_block_optin = 0, shared_per_sm = 0, l2_bytes = 0;
  int64_t clock_khz = 0, memory_clock_khz = 0, memory_bus_bits = 0;
  std::string arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
};

struct Discovery {
  std::vector<DeviceProps> devices;
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000
  std::string status;      // "" when the driver loaded and initialized, else why not
};

/// The driver and its devices (libcuda.so.1, or $COOPJIT_CUDA_LIBRARY); discovered once, never
/// throws. Devices older than sm_80 are listed in status and left out.
const Discovery& discover();

/// The Device of CUDA device `ordinal` (info: its DeviceInfo). DeviceError when the driver fails.
std::shared_ptr<Device> open(const DeviceInfo& info, int ordinal);

/// Whether the driver makes tensor maps (cuTensorMapEncodeTiled: CUDA 12 and newer).
bool tensor_maps_available();
/// A CUtensorMap (128 bytes) for the Tensor Memory Accelerator of CUDA device `device`: a 2-D matrix at `base` (16-byte
/// aligned) of `outer` rows of `inner` contiguous elements of `elem_bytes` bytes, rows
/// `outer_stride_bytes` apart (a multiple of 16), copied in boxes of box_inner x box_outer with
/// the 128-byte swizzle (box_inner elem_bytes <= 128; `swizzle` 3; 2, 1: the 64- and 32-byte
/// ones, box_inner elem_bytes <= 64 / 32), zeros outside the matrix. DeviceError when the driver
/// refuses it.
std::vector<uint8_t> tensor_map_2d(const std::string& device, const void* base, int elem_bytes, int64_t inner, int64_t outer,
                                   int64_t outer_stride_bytes, int box_inner, int box_outer, int swizzle = 3);

/// PTX modules the driver compiled to machine code in this process (cuModuleLoadDataEx; the
/// driver's own JIT cache may have served them).
struct ImageCacheStats {
  int64_t compiles = 0;
};
ImageCacheStats image_cache_stats();

}  // namespace coopjit::cuda
