// The Level Zero runtime through dlopen (level_zero.h): the entry-point table, result names,
// discovery and the Context / Program / Kernel wrappers. Errors are DeviceError naming the call.
#include "runtime/level_zero.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/error.h"

namespace coopjit::level_zero {
namespace {

// Intel's driver extension reporting dot-product support (compute-runtime's ze_intel_gpu.h),
// not in Debian's headers: chained to ze_device_module_properties_t when the driver has it.
constexpr const char* kDpExtension = "ZE_intel_experimental_device_module_dp_properties";
constexpr uint32_t kDpPropertiesStype = 0x00030013;
constexpr uint32_t kDp4a = 1u << 0, kDpas = 1u << 1;
struct IntelDpProperties {
  uint32_t stype;
  void* pNext;
  uint32_t flags;
};

#define COOPJIT_ZE_FUNCTIONS(X)                                                                   \
  X(zeInit) X(zeDriverGet) X(zeDriverGetProperties) X(zeDriverGetExtensionProperties)              \
  X(zeDeviceGet) X(zeDeviceGetProperties) X(zeDeviceGetComputeProperties)                          \
  X(zeDeviceGetModuleProperties) X(zeDeviceGetMemoryProperties)                                    \
  X(zeDeviceGetCommandQueueGroupProperties) X(zeContextCreate) X(zeContextDestroy)                \
  X(zeCommandListCreateImmediate) X(zeCommandListDestroy) X(zeCommandListAppendLaunchKernel)       \
  X(zeCommandListAppendBarrier) X(zeEventPoolCreate) X(zeEventPoolDestroy) X(zeEventCreate)       \
  X(zeEventDestroy) X(zeEventHostSynchronize) X(zeEventHostReset) X(zeModuleCreate)               \
  X(zeModuleDestroy) X(zeModuleBuildLogGetString) X(zeModuleBuildLogDestroy) X(zeKernelCreate)    \
  X(zeKernelDestroy) X(zeKernelSetGroupSize) X(zeKernelSuggestGroupSize)                          \
  X(zeKernelSetArgumentValue) X(zeKernelSetIndirectAccess) X(zeMemAllocShared) X(zeMemFree)

struct Api {
#define COOPJIT_ZE_FIELD(name) decltype(&::name) name = nullptr;
  COOPJIT_ZE_FUNCTIONS(COOPJIT_ZE_FIELD)
#undef COOPJIT_ZE_FIELD
  std::string error;
};

const Api& api() {
  static Api a = [] {
    Api t;
    // $COOPJIT_LEVEL_ZERO_LIBRARY names another loader (or, in tests, a missing one).
    const char* env = std::getenv("COOPJIT_LEVEL_ZERO_LIBRARY");
    const std::string library = env && *env ? env : "libze_loader.so.1";
    void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = ::dlerror();
      t.error = cat(library, " not loaded (", e ? e : "?", "): install the Level Zero loader (Debian: libze1)");
      return t;
    }
#define COOPJIT_ZE_LOAD(name)                                          \
  t.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, #name));   \
  if (!t.name && t.error.empty()) t.error = library + " has no " #name;
    COOPJIT_ZE_FUNCTIONS(COOPJIT_ZE_LOAD)
#undef COOPJIT_ZE_LOAD
    return t;
  }();
  return a;
}

void check(ze_result_t r, const char* call, const std::string& what = "") {
  if (r != ZE_RESULT_SUCCESS)
    throw DeviceError(cat(call, " failed with ", result_name(r), what.empty() ? "" : " (", what, what.empty() ? "" : ")"));
}

std::string version_string(uint32_t v) { return cat(ZE_MAJOR_VERSION(v), ".", ZE_MINOR_VERSION(v)); }

bool driver_has_extension(ze_driver_handle_t d, const char* name) {
  uint32_t n = 0;
  if (api().zeDriverGetExtensionProperties(d, &n, nullptr) != ZE_RESULT_SUCCESS || n == 0) return false;
  std::vector<ze_driver_extension_properties_t> ext(n);
  if (api().zeDriverGetExtensionProperties(d, &n, ext.data()) != ZE_RESULT_SUCCESS) return false;
  for (const auto& e : ext)
    if (std::strcmp(e.name, name) == 0) return true;
  return false;
}

DeviceProps read_props(ze_driver_handle_t drv, ze_device_handle_t dev) {
  const Api& a = api();
  DeviceProps r;
  ze_device_properties_t dp{};
  dp.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  check(a.zeDeviceGetProperties(dev, &dp), "zeDeviceGetProperties");
  r.name = dp.name;
  r.vendor_id = dp.vendorId;
  r.device_id = dp.deviceId;
  r.compute_units = int64_t(dp.numSlices) * dp.numSubslicesPerSlice * dp.numEUsPerSubslice;
  for (uint8_t b : dp.uuid.id) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", b);
    r.uuid += hex;
  }
  ze_driver_properties_t drvp{};
  drvp.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
  if (a.zeDriverGetProperties(drv, &drvp) == ZE_RESULT_SUCCESS) r.driver_version = cat(drvp.driverVersion);
  ze_device_compute_properties_t cp{};
  cp.stype = ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES;
  check(a.zeDeviceGetComputeProperties(dev, &cp), "zeDeviceGetComputeProperties");
  r.max_group_size = cp.maxTotalGroupSize;
  r.max_group_size_xyz = {cp.maxGroupSizeX, cp.maxGroupSizeY, cp.maxGroupSizeZ};
  r.shared_local_memory = cp.maxSharedLocalMemory;
  for (uint32_t i = 0; i < cp.numSubGroupSizes && i < ZE_SUBGROUPSIZE_COUNT; ++i) r.subgroup_sizes.push_back(cp.subGroupSizes[i]);
  ze_device_module_properties_t mp{};
  mp.stype = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES;
  IntelDpProperties dpas{kDpPropertiesStype, nullptr, 0};
  bool has_dp = driver_has_extension(drv, kDpExtension);
  if (has_dp) mp.pNext = &dpas;
  check(a.zeDeviceGetModuleProperties(dev, &mp), "zeDeviceGetModuleProperties");
  r.spirv_version = mp.spirvVersionSupported ? version_string(mp.spirvVersionSupported) : "";
  r.dp4a = has_dp ? bool(dpas.flags & kDp4a) : (mp.flags & ZE_DEVICE_MODULE_FLAG_DP4A ? 1 : -1);
  r.dpas = has_dp ? bool(dpas.flags & kDpas) : -1;
  uint32_t nmem = 0;
  if (a.zeDeviceGetMemoryProperties(dev, &nmem, nullptr) == ZE_RESULT_SUCCESS && nmem > 0) {
    std::vector<ze_device_memory_properties_t> mem(nmem);
    for (auto& m : mem) m.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
    if (a.zeDeviceGetMemoryProperties(dev, &nmem, mem.data()) == ZE_RESULT_SUCCESS)
      for (const auto& m : mem) r.global_mem_bytes += static_cast<int64_t>(m.totalSize);
  }
  return r;
}

Discovery run_discovery() {
  Discovery d;
  const Api& a = api();
  if (!a.error.empty()) {
    d.status = a.error;
    return d;
  }
  ze_result_t r = a.zeInit(ZE_INIT_FLAG_GPU_ONLY);
  if (r != ZE_RESULT_SUCCESS) {
    d.status = cat("zeInit returned ", result_name(r),
                   ": the Level Zero loader (libze_loader.so.1) is installed but found no GPU driver; an "
                   "Intel GPU needs the Level Zero driver of Intel's compute runtime, libze_intel_gpu.so.1 "
                   "(Intel's packages intel-level-zero-gpu / libze-intel-gpu1; Debian 12 ships only the "
                   "OpenCL part, intel-opencl-icd)");
    return d;
  }
  uint32_t nd = 0;
  if ((r = a.zeDriverGet(&nd, nullptr)) != ZE_RESULT_SUCCESS || nd == 0) {
    d.status = cat("zeDriverGet found no driver (", result_name(r), ")");
    return d;
  }
  std::vector<ze_driver_handle_t> drivers(nd);
  a.zeDriverGet(&nd, drivers.data());
  try {
    for (ze_driver_handle_t drv : drivers) {
      uint32_t n = 0;
      if (a.zeDeviceGet(drv, &n, nullptr) != ZE_RESULT_SUCCESS || n == 0) continue;
      std::vector<ze_device_handle_t> devs(n);
      a.zeDeviceGet(drv, &n, devs.data());
      for (ze_device_handle_t dev : devs) {
        ze_device_properties_t p{};
        p.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
        if (a.zeDeviceGetProperties(dev, &p) == ZE_RESULT_SUCCESS && p.type == ZE_DEVICE_TYPE_GPU)
          d.devices.push_back({drv, dev, read_props(drv, dev)});
      }
    }
  } catch (const DeviceError& e) {
    d.status = e.what();
  }
  if (d.devices.empty() && d.status.empty()) d.status = cat(nd, " Level Zero driver(s) but no GPU device");
  return d;
}

}  // namespace

std::string result_name(ze_result_t r) {
  switch (r) {
#define COOPJIT_ZE_RES(e) case e: return #e;
    COOPJIT_ZE_RES(ZE_RESULT_SUCCESS) COOPJIT_ZE_RES(ZE_RESULT_NOT_READY) COOPJIT_ZE_RES(ZE_RESULT_ERROR_DEVICE_LOST)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY) COOPJIT_ZE_RES(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE) COOPJIT_ZE_RES(ZE_RESULT_ERROR_MODULE_LINK_FAILURE)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_UNINITIALIZED) COOPJIT_ZE_RES(ZE_RESULT_ERROR_UNSUPPORTED_VERSION)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE) COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_ARGUMENT)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_NULL_HANDLE) COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_NULL_POINTER)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_SIZE) COOPJIT_ZE_RES(ZE_RESULT_ERROR_UNSUPPORTED_SIZE)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT) COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_ENUMERATION)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_NATIVE_BINARY) COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_KERNEL_NAME)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX) COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION) COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION)
    COOPJIT_ZE_RES(ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED) COOPJIT_ZE_RES(ZE_RESULT_ERROR_UNKNOWN)
#undef COOPJIT_ZE_RES
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "ze_result_t 0x%x", static_cast<unsigned>(r));
      return buf;
    }
  }
}

const Discovery& discover() {
  static const Discovery d = run_discovery();
  return d;
}

// ---- Context --------------------------------------------------------------------------------

std::shared_ptr<Context> Context::create(const DeviceRef& device) {
  return std::shared_ptr<Context>(new Context(device));
}

bool Context::foreign() const { return ::getpid() != pid_; }

Context::Context(const DeviceRef& device) : device_(device), pid_(::getpid()) {
  const Api& a = api();
  ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
  check(a.zeContextCreate(device.driver, &cd, &ctx_), "zeContextCreate", device.props.name);
  try {
    uint32_t ngroups = 0;
    check(a.zeDeviceGetCommandQueueGroupProperties(device.device, &ngroups, nullptr), "zeDeviceGetCommandQueueGroupProperties");
    std::vector<ze_command_queue_group_properties_t> groups(ngroups);
    for (auto& g : groups) g.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
    check(a.zeDeviceGetCommandQueueGroupProperties(device.device, &ngroups, groups.data()), "zeDeviceGetCommandQueueGroupProperties");
    uint32_t ordinal = ngroups;
    for (uint32_t i = 0; i < ngroups && ordinal == ngroups; ++i)
      if (groups[i].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE) ordinal = i;
    if (ordinal == ngroups) throw DeviceError(cat("Level Zero device ", device.props.name, " has no compute queue group"));
    ze_command_queue_desc_t qd{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, ordinal, 0, 0,
                               ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    check(a.zeCommandListCreateImmediate(ctx_, device.device, &qd, &list_), "zeCommandListCreateImmediate");
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, ZE_EVENT_POOL_FLAG_HOST_VISIBLE, 1};
    ze_device_handle_t dev = device.device;
    check(a.zeEventPoolCreate(ctx_, &pd, 1, &dev, &pool_), "zeEventPoolCreate");
    ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, 0, ZE_EVENT_SCOPE_FLAG_HOST, ZE_EVENT_SCOPE_FLAG_HOST};
    check(a.zeEventCreate(pool_, &ed, &done_), "zeEventCreate");
  } catch (...) {
    release();
    throw;
  }
}

Context::~Context() {
  if (!foreign()) release();  // created before fork(): the parent's to release
}

void Context::release() {
  const Api& a = api();
  if (done_) a.zeEventDestroy(done_), done_ = nullptr;
  if (pool_) a.zeEventPoolDestroy(pool_), pool_ = nullptr;
  if (list_) a.zeCommandListDestroy(list_), list_ = nullptr;
  if (ctx_) a.zeContextDestroy(ctx_), ctx_ = nullptr;
}

void* Context::alloc_shared(size_t bytes, size_t alignment) {
  ze_device_mem_alloc_desc_t dd{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
  ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
  void* p = nullptr;
  check(api().zeMemAllocShared(ctx_, &dd, &hd, bytes ? bytes : 1, alignment, device_.device, &p), "zeMemAllocShared",
        cat(bytes, " bytes on ", device_.props.name));
  return p;
}

void Context::free_shared(void* ptr) {
  if (ptr && !foreign()) api().zeMemFree(ctx_, ptr);
}

void Context::synchronize() {
  const Api& a = api();
  check(a.zeCommandListAppendBarrier(list_, done_, 0, nullptr), "zeCommandListAppendBarrier");
  check(a.zeEventHostSynchronize(done_, UINT64_MAX), "zeEventHostSynchronize");
  check(a.zeEventHostReset(done_), "zeEventHostReset");
}

std::shared_ptr<Program> Context::build(const std::string& spirv, const std::string& flags) {
  const Api& a = api();
  ze_module_desc_t md{ZE_STRUCTURE_TYPE_MODULE_DESC, nullptr, ZE_MODULE_FORMAT_IL_SPIRV, spirv.size(),
                      reinterpret_cast<const uint8_t*>(spirv.data()), flags.c_str(), nullptr};
  ze_module_handle_t module = nullptr;
  ze_module_build_log_handle_t log_handle = nullptr;
  ze_result_t r = a.zeModuleCreate(ctx_, device_.device, &md, &module, &log_handle);
  std::string log;
  if (log_handle) {
    size_t n = 0;
    if (a.zeModuleBuildLogGetString(log_handle, &n, nullptr) == ZE_RESULT_SUCCESS && n > 1) {
      log.resize(n);
      a.zeModuleBuildLogGetString(log_handle, &n, log.data());
      log.resize(log.find('\0') == std::string::npos ? n : log.find('\0'));
    }
    a.zeModuleBuildLogDestroy(log_handle);
  }
  if (r != ZE_RESULT_SUCCESS)
    throw DeviceError(cat("zeModuleCreate failed with ", result_name(r), " on ", device_.props.name,
                          "; build log:\n", log.empty() ? "(empty)" : log));
  return std::make_shared<Program>(shared_from_this(), module, log);
}

// ---- Program and Kernel ---------------------------------------------------------------------

Program::Program(std::shared_ptr<Context> ctx, ze_module_handle_t module, std::string build_log)
    : ctx_(std::move(ctx)), module_(module), log_(std::move(build_log)) {}

Program::~Program() {
  if (!ctx_->foreign()) api().zeModuleDestroy(module_);
}

std::shared_ptr<Kernel> Program::kernel(const std::string& name) {
  ze_kernel_desc_t kd{ZE_STRUCTURE_TYPE_KERNEL_DESC, nullptr, 0, name.c_str()};
  ze_kernel_handle_t k = nullptr;
  check(api().zeKernelCreate(module_, &kd, &k), "zeKernelCreate", name);
  return std::make_shared<Kernel>(shared_from_this(), k, name);
}

Kernel::Kernel(std::shared_ptr<Program> program, ze_kernel_handle_t kernel, std::string name)
    : program_(std::move(program)), kernel_(kernel), name_(std::move(name)) {
  api().zeKernelSetIndirectAccess(kernel_, ZE_KERNEL_INDIRECT_ACCESS_FLAG_SHARED);
}

Kernel::~Kernel() {
  if (!program_->context()->foreign()) api().zeKernelDestroy(kernel_);
}

void Kernel::set_pointer(unsigned index, void* ptr) { set_value(index, &ptr, sizeof ptr); }

void Kernel::set_value(unsigned index, const void* data, size_t bytes) {
  check(api().zeKernelSetArgumentValue(kernel_, index, bytes, data), "zeKernelSetArgumentValue", cat(name_, " argument ", index));
}

void Kernel::launch(int dims, const std::array<size_t, 3>& global, const std::array<size_t, 3>& local) {
  const Api& a = api();
  std::array<uint32_t, 3> g{1, 1, 1}, l{1, 1, 1};
  for (int i = 0; i < dims; ++i) g[i] = static_cast<uint32_t>(global[i]);
  if (local[0] || local[1] || local[2]) {
    for (int i = 0; i < dims; ++i) l[i] = static_cast<uint32_t>(local[i] ? local[i] : 1);
  } else {
    check(a.zeKernelSuggestGroupSize(kernel_, g[0], g[1], g[2], &l[0], &l[1], &l[2]), "zeKernelSuggestGroupSize", name_);
  }
  for (int i = 0; i < 3; ++i)
    if (g[i] % l[i] != 0)
      throw UserError(cat("Level Zero launch of ", name_, ": global size ", g[i], " in dimension ", i,
                          " is not a multiple of the work-group size ", l[i]));
  check(a.zeKernelSetGroupSize(kernel_, l[0], l[1], l[2]), "zeKernelSetGroupSize", name_);
  ze_group_count_t count{g[0] / l[0], g[1] / l[1], g[2] / l[2]};
  check(a.zeCommandListAppendLaunchKernel(program_->context()->list(), kernel_, &count, nullptr, 0, nullptr),
        "zeCommandListAppendLaunchKernel", name_);
}

}  // namespace coopjit::level_zero
