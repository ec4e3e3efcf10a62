// The OpenCL runtime, loaded with dlopen("libOpenCL.so.1") so that coopjit imports without it:
// device discovery (devices that take SPIR-V and have Intel subgroups), properties, and a
// context + in-order queue per device for SPIR-V programs, kernels, shared memory and launches.
#pragma once

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coopjit::opencl {

/// Whether the OpenCL loader (libOpenCL.so.1, or $COOPJIT_OPENCL_LIBRARY) loaded with every entry
/// point coopjit uses; else why not.
bool available(std::string* why = nullptr);

/// The name of an OpenCL error code, e.g. "CL_BUILD_PROGRAM_FAILURE" (or "CL error -9999").
std::string error_name(cl_int code);

struct DeviceProps {
  std::string name, vendor, version, driver_version, platform, type;  // type: cpu / gpu / accelerator
  std::string extensions;                  // space-separated, as the driver reports them
  std::vector<std::string> il_versions;    // e.g. "SPIR-V_1.4"
  std::vector<std::string> spirv_extensions;  // CL_DEVICE_SPIRV_EXTENSIONS_KHR (cl_khr_spirv_queries)
  std::vector<int64_t> subgroup_sizes;     // CL_DEVICE_SUB_GROUP_SIZES_INTEL
  int64_t max_work_group_size = 0, local_mem_bytes = 0, global_mem_bytes = 0, compute_units = 0;
  uint64_t svm_capabilities = 0;           // CL_DEVICE_SVM_CAPABILITIES bits
  bool usm_shared = false;                 // cl_intel_unified_shared_memory shared allocations
  bool has_extension(const std::string& ext) const;
  bool takes_spirv() const;                // an IL version "SPIR-V_*"
  std::string spirv_version() const;       // the highest, e.g. "1.4"; "" if none
};

struct DeviceRef {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  DeviceProps props;
};

/// Every device of every platform, in the ICD loader's order. Empty if OpenCL is unavailable.
std::vector<DeviceRef> all_devices();

/// Why coopjit cannot run SPIR-V kernels on a device ("" if it can): it needs SPIR-V IL,
/// cl_intel_subgroups with reported subgroup sizes, and host-visible shared memory (USM shared
/// or fine-grain SVM).
std::string unusable_reason(const DeviceProps& props);

/// The devices unusable_reason() accepts; "opencl:N" is the N-th of them.
std::vector<DeviceRef> usable_devices();

class Program;

/// A context and an in-order queue on one device; allocations and programs belong to it.
class Context : public std::enable_shared_from_this<Context> {
 public:
  static std::shared_ptr<Context> create(const DeviceRef& device);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceProps& props() const { return device_.props; }
  /// Host- and device-visible memory: USM shared if the device has it, else fine-grain SVM.
  void* alloc_shared(size_t bytes, size_t alignment = 64);
  void free_shared(void* ptr);
  const char* memory_kind() const { return usm_ ? "usm_shared" : "svm_fine_grain"; }
  /// Builds a program from SPIR-V (clCreateProgramWithIL + clBuildProgram); a failed build
  /// throws DeviceError with the driver's build log.
  std::shared_ptr<Program> build(const std::string& spirv, const std::string& options = "");
  void finish();

  cl_context context() const { return ctx_; }
  cl_command_queue queue() const { return queue_; }
  cl_device_id device() const { return device_.device; }
  bool uses_usm() const { return usm_; }
  /// Whether this process is not the one that created the context (a child of fork(), where the
  /// runtime's threads and driver state are gone): the context, its programs, kernels and
  /// allocations are then never released here (left to the parent), and devices.cpp refuses it.
  bool foreign() const;
  long owner_pid() const { return pid_; }

 private:
  explicit Context(const DeviceRef& device);
  DeviceRef device_;
  long pid_ = 0;  // the process that created it
  cl_context ctx_ = nullptr;
  cl_command_queue queue_ = nullptr;
  bool usm_ = false;
  void* shared_alloc_ = nullptr;  // clSharedMemAllocINTEL
  void* mem_free_ = nullptr;      // clMemBlockingFreeINTEL
  void* set_arg_ptr_ = nullptr;   // clSetKernelArgMemPointerINTEL
  friend class Kernel;
};

class Kernel;

class Program : public std::enable_shared_from_this<Program> {
 public:
  Program(std::shared_ptr<Context> ctx, cl_program program, std::string build_log);
  ~Program();
  std::shared_ptr<Kernel> kernel(const std::string& name);
  const std::string& build_log() const { return log_; }
  const std::shared_ptr<Context>& context() const { return ctx_; }

 private:
  std::shared_ptr<Context> ctx_;
  cl_program program_;
  std::string log_;
};

class Kernel {
 public:
  Kernel(std::shared_ptr<Program> program, cl_kernel kernel, std::string name);
  ~Kernel();
  void set_pointer(unsigned index, void* ptr);  // a shared allocation (USM or SVM)
  void set_value(unsigned index, const void* data, size_t bytes);
  /// Enqueues an ND-range (dims = 1..3; local all zero lets the driver choose); no wait.
  void launch(int dims, const std::array<size_t, 3>& global, const std::array<size_t, 3>& local);
  const std::string& name() const { return name_; }

 private:
  std::shared_ptr<Program> program_;
  cl_kernel kernel_;
  std::string name_;
};

}  // namespace coopjit::opencl
