// The SPIR-V devices coopjit can use, named "opencl:N" and "level_zero:N", behind one interface:
// properties, host- and device-visible shared memory (USM shared / fine-grain SVM), SPIR-V
// modules, kernels and synchronous launches. "cpu" (the ORC JIT path) is not one of them.
// No OpenCL or Level Zero type crosses this header.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coopjit {

struct DeviceInfo {
  std::string name;     // "opencl:0", "level_zero:0"
  std::string backend;  // "opencl" or "level_zero"
  std::string device_name, vendor, driver_version, platform, type;  // type: gpu / cpu / accelerator
  std::string spirv_version;  // the highest SPIR-V version the device takes, e.g. "1.4"
  std::string memory;         // what empty() allocates: "usm_shared" or "svm_fine_grain"
  std::vector<int64_t> subgroup_sizes;
  int64_t max_work_group_size = 0, local_memory_bytes = 0, global_memory_bytes = 0, compute_units = 0;
  int dpas = -1;  // 1 / 0 as the driver reports DPAS (Intel XMX), -1 when it does not say
  int block2d = -1;  // 1 / 0: 2-D block loads and stores (SPV_INTEL_2d_block_io), -1 when unknown
  std::vector<std::string> extensions;  // OpenCL extensions (empty for Level Zero)
  std::vector<std::string> spirv_extensions;  // SPIR-V extensions the OpenCL device takes (cl_khr_spirv_queries)
};

/// The usable SPIR-V devices: OpenCL ones first ("opencl:0", ...), then Level Zero GPUs.
/// Discovered once per process; never throws.
const std::vector<DeviceInfo>& spirv_devices();

/// Why a backend gives no (or fewer) devices: the loader, the driver, each rejected device.
struct BackendStatus {
  std::string backend;
  int usable = 0;
  std::string status;                // "" when the runtime loaded and initialized
  std::vector<std::string> rejected;  // "<device>: <reason>" for devices coopjit cannot use
};
std::vector<BackendStatus> backend_status();

/// The DeviceInfo of "opencl:N" / "level_zero:N". UserError for a malformed name, DeviceError
/// (naming the missing runtime or driver) when there is no such device.
const DeviceInfo& device_info(const std::string& name);

struct KernelArg {
  bool is_pointer = false;
  void* pointer = nullptr;           // shared memory, when is_pointer
  std::vector<uint8_t> value;        // the argument's bytes otherwise
};

class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  /// Sets the arguments, launches an ND-range of `global` work-items in work-groups of `local`
  /// (all zero: the driver chooses) and waits for it.
  virtual void launch(const std::vector<KernelArg>& args, int dims, const std::array<size_t, 3>& global,
                      const std::array<size_t, 3>& local) = 0;
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
  virtual void* alloc_shared(size_t bytes, size_t alignment) = 0;
  virtual void free_shared(void* ptr) = 0;
  /// Builds a SPIR-V module; DeviceError with the driver's build log when it fails.
  virtual std::shared_ptr<DeviceModule> load_spirv(const std::string& spirv) = 0;
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

 private:
  std::shared_ptr<Device> device_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// Live shared allocations (for tests that check that memory is freed).
int64_t live_shared_allocations();

}  // namespace coopjit
