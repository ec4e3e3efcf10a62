// The Level Zero runtime, loaded with dlopen("libze_loader.so.1") so that coopjit imports without
// it (Debian's libze-dev headers give the types only): zeInit and GPU discovery, device
// properties, and a context + immediate command list per device for SPIR-V modules, kernels,
// USM shared memory, launches and host synchronization.
#pragma once

#include <level_zero/ze_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coopjit::level_zero {

/// The name of a Level Zero result, e.g. "ZE_RESULT_ERROR_UNINITIALIZED" (or "ze_result_t 0x...").
std::string result_name(ze_result_t r);

struct DeviceProps {
  std::string name, driver_version, uuid;
  uint32_t vendor_id = 0, device_id = 0;
  std::vector<int64_t> subgroup_sizes;
  int64_t max_group_size = 0, shared_local_memory = 0, global_mem_bytes = 0, compute_units = 0;
  std::array<int64_t, 3> max_group_size_xyz{0, 0, 0};
  std::string spirv_version;  // the highest the module compiler takes, e.g. "1.4"
  int dp4a = -1, dpas = -1;   // 1 / 0 as the driver reports them, -1 when it reports nothing
};

struct DeviceRef {
  ze_driver_handle_t driver = nullptr;
  ze_device_handle_t device = nullptr;
  DeviceProps props;
};

struct Discovery {
  std::vector<DeviceRef> devices;  // GPU devices of every driver; "level_zero:N" is the N-th
  std::string status;              // why there are none: no loader, zeInit failed, no driver, no GPU
};

/// Loads the loader (libze_loader.so.1, or $COOPJIT_LEVEL_ZERO_LIBRARY), calls zeInit (GPU only)
/// and lists the GPUs, once per process. Never throws.
const Discovery& discover();

class Program;

/// A context and an asynchronous immediate command list on one device (its compute queue group).
class Context : public std::enable_shared_from_this<Context> {
 public:
  static std::shared_ptr<Context> create(const DeviceRef& device);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceProps& props() const { return device_.props; }
  void* alloc_shared(size_t bytes, size_t alignment = 64);  // zeMemAllocShared
  void free_shared(void* ptr);
  /// zeModuleCreate from SPIR-V; a failed build throws DeviceError with the build log.
  std::shared_ptr<Program> build(const std::string& spirv, const std::string& flags = "");
  /// Waits until everything appended so far is done (barrier + host-visible event).
  void synchronize();

  ze_context_handle_t context() const { return ctx_; }
  ze_command_list_handle_t list() const { return list_; }
  ze_device_handle_t device() const { return device_.device; }
  /// Whether this process is not the one that created the context (a child of fork()): nothing
  /// of it is released here, and devices.cpp refuses it (as opencl::Context::foreign).
  bool foreign() const;
  long owner_pid() const { return pid_; }

 private:
  explicit Context(const DeviceRef& device);
  void release();
  DeviceRef device_;
  long pid_ = 0;  // the process that created it
  ze_context_handle_t ctx_ = nullptr;
  ze_command_list_handle_t list_ = nullptr;
  ze_event_pool_handle_t pool_ = nullptr;
  ze_event_handle_t done_ = nullptr;
};

class Kernel;

class Program : public std::enable_shared_from_this<Program> {
 public:
  Program(std::shared_ptr<Context> ctx, ze_module_handle_t module, std::string build_log);
  ~Program();
  std::shared_ptr<Kernel> kernel(const std::string& name);
  const std::string& build_log() const { return log_; }
  const std::shared_ptr<Context>& context() const { return ctx_; }

 private:
  std::shared_ptr<Context> ctx_;
  ze_module_handle_t module_;
  std::string log_;
};

class Kernel {
 public:
  Kernel(std::shared_ptr<Program> program, ze_kernel_handle_t kernel, std::string name);
  ~Kernel();
  void set_pointer(unsigned index, void* ptr);
  void set_value(unsigned index, const void* data, size_t bytes);
  /// Appends a launch of global / local work-items (global a multiple of local; local all zero
  /// asks zeKernelSuggestGroupSize) to the immediate list; no wait.
  void launch(int dims, const std::array<size_t, 3>& global, const std::array<size_t, 3>& local);
  const std::string& name() const { return name_; }

 private:
  std::shared_ptr<Program> program_;
  ze_kernel_handle_t kernel_;
  std::string name_;
};

}  // namespace coopjit::level_zero
