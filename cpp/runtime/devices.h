// The GPU devices coopjit can use, named "opencl:N", "level_zero:N" (SPIR-V) and "cuda:N" (PTX),
// behind one interface: properties, memory the kernels use (host-visible USM shared / fine-grain
// SVM on the SPIR-V devices; device memory with explicit copies on CUDA), modules, kernels and
// synchronous launches. "cpu" (the ORC JIT path) is not one of them. No OpenCL, Level Zero or
// CUDA type crosses this header.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace coopjit {

struct DeviceInfo {
  std::string name;     // "opencl:0", "level_zero:0", "cuda:0"
  std::string backend;  // "opencl", "level_zero" or "cuda"
  std::string device_name, vendor, driver_version, platform, type;  // type: gpu / cpu / accelerator
  std::string spirv_version;  // the highest SPIR-V version the device takes, e.g. "1.4"
  std::string memory;         // what alloc_shared gives: "usm_shared", "svm_fine_grain" or "device" (CUDA: not host-visible)
  std::vector<int64_t> subgroup_sizes;
  int64_t max_work_group_size = 0, local_memory_bytes = 0, global_memory_bytes = 0, compute_units = 0;
  int dpas = -1;  // 1 / 0 as the driver reports DPAS (Intel XMX), -1 when it does not say
  int block2d = -1;  // 1 / 0: 2-D block loads and stores (SPV_INTEL_2d_block_io), -1 when unknown
  std::vector<std::string> extensions;  // OpenCL extensions (empty for Level Zero)
  std::vector<std::string> spirv_extensions;  // SPIR-V extensions the OpenCL device takes (cl_khr_spirv_queries)
  // CUDA devices: "sm_90", "9.0", and figures the planner and the benchmarks read.
  std::string arch, compute_capability;
  int64_t shared_memory_per_sm_bytes = 0, registers_per_block = 0, l2_bytes = 0;
  int64_t clock_khz = 0, memory_clock_khz = 0, memory_bus_bits = 0;
};

/// The usable SPIR-V devices: OpenCL ones first ("opencl:0", ...), then Level Zero GPUs.
/// Discovered once per process; never throws.
const std::vector<DeviceInfo>& spirv_devices();

/// Every usable GPU device: the SPIR-V ones, then CUDA's ("cuda:0", ...).
std::vector<DeviceInfo> gpu_devices();

/// Why a backend gives no (or fewer) devices: the loader, the driver, each rejected device.
struct BackendStatus {
  std::string backend;
  int usable = 0;
  std::string status;                // "" when the runtime loaded and initialized
  std::vector<std::string> rejected;  // "<device>: <reason>" for devices coopjit cannot use
};
std::vector<BackendStatus> backend_status();

/// The DeviceInfo of "opencl:N" / "level_zero:N" / "cuda:N". UserError for a malformed name, DeviceError
/// (naming the missing runtime or driver) when there is no such device.
const DeviceInfo& device_info(const std::string& name);

struct KernelArg {
  bool is_pointer = false;
  void* pointer = nullptr;           // memory from alloc_shared, when is_pointer
  std::vector<uint8_t> value;        // the argument's bytes otherwise
};

class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  /// Sets the arguments, launches an ND-range of `global` work-items in work-groups of `local`
  /// (all zero: the driver chooses) and waits for it.
  virtual void launch(const std::vector<KernelArg>& args, int dims, const std::array<size_t, 3>& global,
                      const std::array<size_t, 3>& local) = 0;
  /// Bytes of dynamic shared memory each work-group of the later launches gets (CUDA: the
  /// launch's sharedMemBytes, above 48 KiB after cuFuncSetAttribute); other devices take none.
  /// CUDA: launches `groups` blocks of `local` threads on `stream` (a CUstream handle: 0 the
  /// legacy default stream, as the CUDA array interface names it 1; another framework's stream)
  /// without waiting; `params` point at each argument's bytes. Other devices have no streams.
  virtual void launch_on_stream(void** params, size_t groups, size_t local, uintptr_t stream) {
    (void)params, (void)groups, (void)local, (void)stream;
    throw UserError("launches on a stream are a CUDA feature");
  }
  virtual void set_dynamic_shared(size_t bytes) {
    if (bytes) throw UserError(cat("dynamic shared memory (", bytes, " bytes) is a CUDA launch attribute"));
  }
};

class DeviceModule {
 public:
  virtual ~DeviceModule() = default;
  virtual std::shared_ptr<DeviceKernel> kernel(const std::string& name) = 0;
  virtual std::string build_log() const = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  /// Memory the device's kernels read and write; the host may use it directly only where
  /// host_visible() (SPIR-V devices' shared memory), else through copy_to_device / copy_to_host.
  virtual void* alloc_shared(size_t bytes, size_t alignment) = 0;
  virtual void free_shared(void* ptr) = 0;
  virtual bool host_visible() const { return true; }
  /// Copies between host memory and memory from alloc_shared (waiting for the device's work).
  virtual void copy_to_device(void* dst, const void* src, size_t bytes);
  virtual void copy_to_host(void* dst, const void* src, size_t bytes);
  /// The SIMT lowering's target for this device (simt_target.h): "spirv64" or "nvptx64:sm_XX".
  virtual std::string simt_target() const { return "spirv64"; }
  /// Builds a SPIR-V module; DeviceError with the driver's build log when it fails.
  virtual std::shared_ptr<DeviceModule> load_spirv(const std::string& spirv) = 0;
  /// Loads a PTX module (CUDA devices); DeviceError with the JIT log when it fails, UserError on
  /// devices that take no PTX.
  virtual std::shared_ptr<DeviceModule> load_ptx(const std::string& ptx);
  virtual void synchronize() = 0;
  /// DeviceError when this process is a child of fork() and the device was opened before it
  /// (the runtime's context does not survive fork()); every operation but free_shared checks.
  virtual void check() const = 0;
};

/// The device (one context and queue per device and process, created on first use).
std::shared_ptr<Device> open_device(const std::string& name);

/// Shared memory on a device, freed when the last owner lets go (it keeps the device alive).
class SharedAllocation {
 public:
  SharedAllocation(std::shared_ptr<Device> device, size_t bytes, size_t alignment = 64);
  ~SharedAllocation();
  SharedAllocation(const SharedAllocation&) = delete;
  SharedAllocation& operator=(const SharedAllocation&) = delete;
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  const std::string& device() const { return device_->info().name; }
  /// Copies bytes from the host into the allocation at offset, and back (any device).
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;

 private:
  std::shared_ptr<Device> device_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// Live shared allocations (for tests that check that memory is freed).
int64_t live_shared_allocations();

}  // namespace coopjit
