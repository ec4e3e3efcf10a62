// The OpenCL runtime through dlopen (opencl.h): the entry-point table, error names, discovery and
// the Context / Program / Kernel wrappers. Errors are DeviceError naming the call and the code.
#include "runtime/opencl.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include <algorithm>
#include <mutex>
#include <sstream>

#include <CL/cl_ext.h>

#include "core/error.h"

namespace coopjit::opencl {
namespace {

// Every core entry point coopjit calls; the table holds one pointer of the header's type each.
#define COOPJIT_CL_FUNCTIONS(X)                                                                    \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext) \
  X(clReleaseContext) X(clCreateCommandQueueWithProperties) X(clReleaseCommandQueue) X(clFinish)  \
  X(clCreateProgramWithIL) X(clBuildProgram) X(clGetProgramBuildInfo) X(clReleaseProgram)         \
  X(clCreateKernel) X(clReleaseKernel) X(clSetKernelArg) X(clSetKernelArgSVMPointer)              \
  X(clSetKernelExecInfo) X(clEnqueueNDRangeKernel) X(clSVMAlloc) X(clSVMFree)                      \
  X(clGetExtensionFunctionAddressForPlatform)

struct Api {
#define COOPJIT_CL_FIELD(name) decltype(&::name) name = nullptr;
  COOPJIT_CL_FUNCTIONS(COOPJIT_CL_FIELD)
#undef COOPJIT_CL_FIELD
  void* lib = nullptr;
  std::string error;  // why the library is unusable; empty when loaded
};

const Api& api() {
  static Api a = [] {
    Api t;
    // $COOPJIT_OPENCL_LIBRARY names another loader (or, in tests, a missing one).
    const char* env = std::getenv("COOPJIT_OPENCL_LIBRARY");
    const std::string library = env && *env ? env : "libOpenCL.so.1";
    t.lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!t.lib) {
      const char* e = ::dlerror();
      t.error = cat(library, " not loaded (", e ? e : "?", "): install an OpenCL ICD loader (Debian: ocl-icd-libopencl1)");
      return t;
    }
#define COOPJIT_CL_LOAD(name)                                                       \
  t.name = reinterpret_cast<decltype(&::name)>(::dlsym(t.lib, #name));              \
  if (!t.name && t.error.empty()) t.error = library + " has no " #name " (an OpenCL loader older than 2.1)";
    COOPJIT_CL_FUNCTIONS(COOPJIT_CL_LOAD)
#undef COOPJIT_CL_LOAD
    return t;
  }();
  return a;
}

const Api& loaded() {
  const Api& a = api();
  if (!a.error.empty()) throw DeviceError("OpenCL: " + a.error);
  return a;
}

void check(cl_int rc, const char* call, const std::string& what = "") {
  if (rc != CL_SUCCESS)
    throw DeviceError(cat(call, " failed with ", error_name(rc), what.empty() ? "" : " (", what, what.empty() ? "" : ")"));
}

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (api().clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  api().clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

template <typename T>
T device_value(cl_device_id d, cl_device_info what, T fallback = T{}) {
  T v{};
  return api().clGetDeviceInfo(d, what, sizeof(T), &v, nullptr) == CL_SUCCESS ? v : fallback;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

DeviceProps read_props(cl_platform_id p, cl_device_id d) {
  DeviceProps r;
  r.name = device_string(d, CL_DEVICE_NAME);
  r.vendor = device_string(d, CL_DEVICE_VENDOR);
  r.version = device_string(d, CL_DEVICE_VERSION);
  r.driver_version = device_string(d, CL_DRIVER_VERSION);
  size_t n = 0;
  if (api().clGetPlatformInfo(p, CL_PLATFORM_NAME, 0, nullptr, &n) == CL_SUCCESS && n > 0) {
    r.platform.resize(n);
    api().clGetPlatformInfo(p, CL_PLATFORM_NAME, n, r.platform.data(), nullptr);
    r.platform.resize(r.platform.find('\0') == std::string::npos ? n : r.platform.find('\0'));
  }
  auto type = device_value<cl_device_type>(d, CL_DEVICE_TYPE);
  r.type = type & CL_DEVICE_TYPE_GPU ? "gpu" : type & CL_DEVICE_TYPE_CPU ? "cpu" : "accelerator";
  r.extensions = device_string(d, CL_DEVICE_EXTENSIONS);
  r.il_versions = split(device_string(d, CL_DEVICE_IL_VERSION));
  if (r.has_extension("cl_khr_spirv_queries")) {  // an array of C strings
    constexpr cl_device_info kSpirvExtensions = 0x12BA;  // CL_DEVICE_SPIRV_EXTENSIONS_KHR
    if (api().clGetDeviceInfo(d, kSpirvExtensions, 0, nullptr, &n) == CL_SUCCESS && n >= sizeof(const char*)) {
      std::vector<const char*> names(n / sizeof(const char*));
      if (api().clGetDeviceInfo(d, kSpirvExtensions, n, names.data(), nullptr) == CL_SUCCESS)
        for (const char* e : names)
          if (e) r.spirv_extensions.emplace_back(e);
    }
  }
  if (api().clGetDeviceInfo(d, CL_DEVICE_SUB_GROUP_SIZES_INTEL, 0, nullptr, &n) == CL_SUCCESS && n > 0) {
    std::vector<size_t> sizes(n / sizeof(size_t));
    api().clGetDeviceInfo(d, CL_DEVICE_SUB_GROUP_SIZES_INTEL, n, sizes.data(), nullptr);
    r.subgroup_sizes.assign(sizes.begin(), sizes.end());
  }
  r.max_work_group_size = static_cast<int64_t>(device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE));
  r.local_mem_bytes = static_cast<int64_t>(device_value<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE));
  r.global_mem_bytes = static_cast<int64_t>(device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE));
  r.compute_units = device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS);
  r.svm_capabilities = device_value<cl_device_svm_capabilities>(d, CL_DEVICE_SVM_CAPABILITIES);
  r.usm_shared = r.has_extension("cl_intel_unified_shared_memory") &&
                 (device_value<cl_bitfield>(d, CL_DEVICE_SINGLE_DEVICE_SHARED_MEM_CAPABILITIES_INTEL) &
                  CL_UNIFIED_SHARED_MEMORY_ACCESS_INTEL);
  return r;
}

}  // namespace

bool available(std::string* why) {
  const Api& a = api();
  if (why) *why = a.error;
  return a.error.empty();
}

std::string error_name(cl_int code) {
  switch (code) {
#define COOPJIT_CL_ERR(e) case e: return #e;
    COOPJIT_CL_ERR(CL_SUCCESS) COOPJIT_CL_ERR(CL_DEVICE_NOT_FOUND) COOPJIT_CL_ERR(CL_DEVICE_NOT_AVAILABLE)
    COOPJIT_CL_ERR(CL_COMPILER_NOT_AVAILABLE) COOPJIT_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    COOPJIT_CL_ERR(CL_OUT_OF_RESOURCES) COOPJIT_CL_ERR(CL_OUT_OF_HOST_MEMORY)
    COOPJIT_CL_ERR(CL_BUILD_PROGRAM_FAILURE) COOPJIT_CL_ERR(CL_INVALID_VALUE)
    COOPJIT_CL_ERR(CL_INVALID_DEVICE_TYPE) COOPJIT_CL_ERR(CL_INVALID_PLATFORM) COOPJIT_CL_ERR(CL_INVALID_DEVICE)
    COOPJIT_CL_ERR(CL_INVALID_CONTEXT) COOPJIT_CL_ERR(CL_INVALID_QUEUE_PROPERTIES)
    COOPJIT_CL_ERR(CL_INVALID_COMMAND_QUEUE) COOPJIT_CL_ERR(CL_INVALID_MEM_OBJECT)
    COOPJIT_CL_ERR(CL_INVALID_BINARY) COOPJIT_CL_ERR(CL_INVALID_BUILD_OPTIONS) COOPJIT_CL_ERR(CL_INVALID_PROGRAM)
    COOPJIT_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE) COOPJIT_CL_ERR(CL_INVALID_KERNEL_NAME)
    COOPJIT_CL_ERR(CL_INVALID_KERNEL_DEFINITION) COOPJIT_CL_ERR(CL_INVALID_KERNEL)
    COOPJIT_CL_ERR(CL_INVALID_ARG_INDEX) COOPJIT_CL_ERR(CL_INVALID_ARG_VALUE) COOPJIT_CL_ERR(CL_INVALID_ARG_SIZE)
    COOPJIT_CL_ERR(CL_INVALID_KERNEL_ARGS) COOPJIT_CL_ERR(CL_INVALID_WORK_DIMENSION)
    COOPJIT_CL_ERR(CL_INVALID_WORK_GROUP_SIZE) COOPJIT_CL_ERR(CL_INVALID_WORK_ITEM_SIZE)
    COOPJIT_CL_ERR(CL_INVALID_GLOBAL_OFFSET) COOPJIT_CL_ERR(CL_INVALID_EVENT_WAIT_LIST)
    COOPJIT_CL_ERR(CL_INVALID_OPERATION) COOPJIT_CL_ERR(CL_INVALID_BUFFER_SIZE)
    COOPJIT_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE) COOPJIT_CL_ERR(CL_INVALID_PROPERTY)
    COOPJIT_CL_ERR(CL_INVALID_COMPILER_OPTIONS) COOPJIT_CL_ERR(CL_INVALID_LINKER_OPTIONS)
    COOPJIT_CL_ERR(CL_INVALID_DEVICE_QUEUE) COOPJIT_CL_ERR(CL_INVALID_SPEC_ID)
    COOPJIT_CL_ERR(CL_PLATFORM_NOT_FOUND_KHR)
#undef COOPJIT_CL_ERR
    default: return cat("CL error ", code);
  }
}

bool DeviceProps::has_extension(const std::string& ext) const {
  for (const auto& e : split(extensions))
    if (e == ext) return true;
  return false;
}

bool DeviceProps::takes_spirv() const { return !spirv_version().empty(); }

std::string DeviceProps::spirv_version() const {
  std::string best;
  for (const auto& v : il_versions)
    if (v.rfind("SPIR-V_", 0) == 0 && v.substr(7) > best) best = v.substr(7);
  return best;
}

std::vector<DeviceRef> all_devices() {
  std::vector<DeviceRef> out;
  if (!available()) return out;
  const Api& a = api();
  cl_uint np = 0;
  if (a.clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return out;  // no ICD: no platform
  std::vector<cl_platform_id> platforms(np);
  a.clGetPlatformIDs(np, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (a.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> devs(nd);
    a.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr);
    for (cl_device_id d : devs) out.push_back({p, d, read_props(p, d)});
  }
  return out;
}

std::string unusable_reason(const DeviceProps& p) {
  if (!p.takes_spirv()) return "no SPIR-V in CL_DEVICE_IL_VERSION";
  if (!p.has_extension("cl_intel_subgroups")) return "no cl_intel_subgroups";
  if (p.subgroup_sizes.empty()) return "no CL_DEVICE_SUB_GROUP_SIZES_INTEL";
  if (!p.usm_shared && !(p.svm_capabilities & CL_DEVICE_SVM_FINE_GRAIN_BUFFER))
    return "neither USM shared memory nor fine-grain SVM";
  return "";
}

std::vector<DeviceRef> usable_devices() {
  std::vector<DeviceRef> out;
  for (auto& d : all_devices())
    if (unusable_reason(d.props).empty()) out.push_back(d);
  return out;
}

// ---- Context --------------------------------------------------------------------------------

std::shared_ptr<Context> Context::create(const DeviceRef& device) {
  return std::shared_ptr<Context>(new Context(device));
}

bool Context::foreign() const { return ::getpid() != pid_; }

Context::Context(const DeviceRef& device) : device_(device), pid_(::getpid()) {
  const Api& a = loaded();
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device.platform), 0};
  cl_int rc = CL_SUCCESS;
  ctx_ = a.clCreateContext(props, 1, &device_.device, nullptr, nullptr, &rc);
  check(rc, "clCreateContext", device.props.name);
  queue_ = a.clCreateCommandQueueWithProperties(ctx_, device_.device, nullptr, &rc);
  if (rc != CL_SUCCESS) {
    a.clReleaseContext(ctx_);
    check(rc, "clCreateCommandQueueWithProperties", device.props.name);
  }
  if (device.props.usm_shared) {
    auto addr = [&](const char* fn) { return a.clGetExtensionFunctionAddressForPlatform(device.platform, fn); };
    shared_alloc_ = addr("clSharedMemAllocINTEL");
    mem_free_ = addr("clMemBlockingFreeINTEL");
    set_arg_ptr_ = addr("clSetKernelArgMemPointerINTEL");
    usm_ = shared_alloc_ && mem_free_ && set_arg_ptr_;
  }
}

Context::~Context() {
  if (foreign()) return;  // created before fork(): the parent's to release
  const Api& a = api();
  if (queue_) a.clReleaseCommandQueue(queue_);
  if (ctx_) a.clReleaseContext(ctx_);
}

void* Context::alloc_shared(size_t bytes, size_t alignment) {
  const Api& a = api();
  bytes = std::max<size_t>(bytes, 1);
  void* p = nullptr;
  if (usm_) {
    cl_int rc = CL_SUCCESS;
    p = reinterpret_cast<clSharedMemAllocINTEL_fn>(shared_alloc_)(ctx_, device_.device, nullptr, bytes,
                                                                  static_cast<cl_uint>(alignment), &rc);
    check(rc, "clSharedMemAllocINTEL", cat(bytes, " bytes"));
  } else {
    p = a.clSVMAlloc(ctx_, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, bytes, static_cast<cl_uint>(alignment));
  }
  if (!p) throw DeviceError(cat("OpenCL: cannot allocate ", bytes, " bytes of ", memory_kind(), " memory on ", device_.props.name));
  return p;
}

void Context::free_shared(void* ptr) {
  if (!ptr || foreign()) return;
  if (usm_)
    reinterpret_cast<clMemBlockingFreeINTEL_fn>(mem_free_)(ctx_, ptr);
  else
    api().clSVMFree(ctx_, ptr);
}

void Context::finish() { check(loaded().clFinish(queue_), "clFinish", device_.props.name); }

std::shared_ptr<Program> Context::build(const std::string& spirv, const std::string& options) {
  const Api& a = loaded();
  cl_int rc = CL_SUCCESS;
  cl_program prog = a.clCreateProgramWithIL(ctx_, spirv.data(), spirv.size(), &rc);
  check(rc, "clCreateProgramWithIL", cat(spirv.size(), " bytes of SPIR-V"));
  rc = a.clBuildProgram(prog, 1, &device_.device, options.c_str(), nullptr, nullptr);
  std::string log;
  size_t n = 0;
  if (a.clGetProgramBuildInfo(prog, device_.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) == CL_SUCCESS && n > 1) {
    log.resize(n);
    a.clGetProgramBuildInfo(prog, device_.device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    log.resize(log.find('\0') == std::string::npos ? n : log.find('\0'));
  }
  if (rc != CL_SUCCESS) {
    a.clReleaseProgram(prog);
    throw DeviceError(cat("clBuildProgram failed with ", error_name(rc), " on ", device_.props.name,
                          " (", device_.props.platform, "); build log:\n", log.empty() ? "(empty)" : log));
  }
  return std::make_shared<Program>(shared_from_this(), prog, log);
}

// ---- Program and Kernel ---------------------------------------------------------------------

Program::Program(std::shared_ptr<Context> ctx, cl_program program, std::string build_log)
    : ctx_(std::move(ctx)), program_(program), log_(std::move(build_log)) {}

Program::~Program() {
  if (!ctx_->foreign()) api().clReleaseProgram(program_);
}

std::shared_ptr<Kernel> Program::kernel(const std::string& name) {
  cl_int rc = CL_SUCCESS;
  cl_kernel k = loaded().clCreateKernel(program_, name.c_str(), &rc);
  check(rc, "clCreateKernel", name);
  return std::make_shared<Kernel>(shared_from_this(), k, name);
}

Kernel::Kernel(std::shared_ptr<Program> program, cl_kernel kernel, std::string name)
    : program_(std::move(program)), kernel_(kernel), name_(std::move(name)) {
  if (program_->context()->uses_usm()) {  // shared allocations reached through pointers in memory
    cl_bool yes = CL_TRUE;
    api().clSetKernelExecInfo(kernel_, CL_KERNEL_EXEC_INFO_INDIRECT_SHARED_ACCESS_INTEL, sizeof yes, &yes);
  }
}

Kernel::~Kernel() {
  if (!program_->context()->foreign()) api().clReleaseKernel(kernel_);
}

void Kernel::set_pointer(unsigned index, void* ptr) {
  const Context& c = *program_->context();
  cl_int rc = c.usm_ ? reinterpret_cast<clSetKernelArgMemPointerINTEL_fn>(c.set_arg_ptr_)(kernel_, index, ptr)
                     : api().clSetKernelArgSVMPointer(kernel_, index, ptr);
  check(rc, c.usm_ ? "clSetKernelArgMemPointerINTEL" : "clSetKernelArgSVMPointer", cat(name_, " argument ", index));
}

void Kernel::set_value(unsigned index, const void* data, size_t bytes) {
  check(api().clSetKernelArg(kernel_, index, bytes, data), "clSetKernelArg", cat(name_, " argument ", index));
}

void Kernel::launch(int dims, const std::array<size_t, 3>& global, const std::array<size_t, 3>& local) {
  bool any_local = local[0] || local[1] || local[2];
  check(loaded().clEnqueueNDRangeKernel(program_->context()->queue(), kernel_, static_cast<cl_uint>(dims), nullptr,
                                        global.data(), any_local ? local.data() : nullptr, 0, nullptr, nullptr),
        "clEnqueueNDRangeKernel",
        cat(name_, " global ", global[0], "x", global[1], "x", global[2], " local ", local[0], "x", local[1], "x", local[2]));
}

}  // namespace coopjit::opencl
