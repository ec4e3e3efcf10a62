// The CUDA driver (cuda.h), through the driver API's C entry points resolved with dlsym. The
// few types and enum values used are declared here as the CUDA headers define them.
#include "runtime/cuda.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "target/ptx_target.h"

namespace coopjit::cuda {
namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;

// CUdevice_attribute values (cuda.h)
enum : int {
  kMaxThreadsPerBlock = 1, kSharedPerBlock = 8, kWarpSize = 10, kRegsPerBlock = 12, kClockRate = 13, kSMs = 16,
  kMemClock = 36, kBusWidth = 37, kL2 = 38, kCCMajor = 75, kCCMinor = 76, kSharedPerSM = 81, kSharedOptin = 97,
};
// CUjit_option values
enum : int { kJitInfoLog = 3, kJitInfoLogSize = 4, kJitErrorLog = 5, kJitErrorLogSize = 6, kJitLogVerbose = 12 };

struct Api {
  void* lib = nullptr;
  CUresult (*Init)(unsigned) = nullptr;
  CUresult (*DriverGetVersion)(int*) = nullptr;
  CUresult (*DeviceGetCount)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*DeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*DeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*DeviceTotalMem)(size_t*, CUdevice) = nullptr;
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*CtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*CtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*CtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*ModuleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**) = nullptr;
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*FuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void**, void**) = nullptr;
  CUresult (*StreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*StreamSynchronize)(CUstream) = nullptr;
  CUresult (*MemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*MemFree)(CUdeviceptr) = nullptr;
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*GetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*GetErrorString)(CUresult, const char**) = nullptr;
  // CUDA 12 and newer (the Tensor Memory Accelerator's tensor maps); optional: nullptr without it.
  CUresult (*TensorMapEncodeTiled)(void*, int, unsigned, void*, const uint64_t*, const uint64_t*, const unsigned*,
                                   const unsigned*, int, int, int, int) = nullptr;
};

// Loads the library and every entry point; "" on success, else why not.
std::string load(Api& a) {
  const char* env = std::getenv("COOPJIT_CUDA_LIBRARY");
  const std::string path = env && *env ? env : "libcuda.so.1";
  a.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!a.lib) {
    const char* e = dlerror();
    return cat("the CUDA driver (", path, ") is not installed: ", e ? e : "dlopen failed");
  }
  std::string missing;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(a.lib, name));
    if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  sym(a.Init, "cuInit");
  sym(a.DriverGetVersion, "cuDriverGetVersion");
  sym(a.DeviceGetCount, "cuDeviceGetCount");
  sym(a.DeviceGet, "cuDeviceGet");
  sym(a.DeviceGetName, "cuDeviceGetName");
  sym(a.DeviceGetAttribute, "cuDeviceGetAttribute");
  sym(a.DeviceTotalMem, "cuDeviceTotalMem_v2");
  sym(a.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  sym(a.CtxPushCurrent, "cuCtxPushCurrent_v2");
  sym(a.CtxPopCurrent, "cuCtxPopCurrent_v2");
  sym(a.CtxGetCurrent, "cuCtxGetCurrent");
  sym(a.ModuleLoadDataEx, "cuModuleLoadDataEx");
  sym(a.ModuleGetFunction, "cuModuleGetFunction");
  sym(a.FuncSetAttribute, "cuFuncSetAttribute");
  sym(a.LaunchKernel, "cuLaunchKernel");
  sym(a.StreamCreate, "cuStreamCreate");
  sym(a.StreamSynchronize, "cuStreamSynchronize");
  sym(a.MemAlloc, "cuMemAlloc_v2");
  sym(a.MemFree, "cuMemFree_v2");
  sym(a.MemcpyHtoD, "cuMemcpyHtoD_v2");
  sym(a.MemcpyDtoH, "cuMemcpyDtoH_v2");
  sym(a.GetErrorName, "cuGetErrorName");
  sym(a.GetErrorString, "cuGetErrorString");
  if (!missing.empty()) return cat("the CUDA driver ", path, " lacks ", missing);
  a.TensorMapEncodeTiled = reinterpret_cast<decltype(a.TensorMapEncodeTiled)>(dlsym(a.lib, "cuTensorMapEncodeTiled"));
  return "";
}

Api& api() {
  static Api a;
  return a;
}

std::string error_text(CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (api().GetErrorName) api().GetErrorName(r, &name);
  if (api().GetErrorString) api().GetErrorString(r, &text);
  return cat(name ? name : "CUDA error", " (", r, ")", text ? std::string(": ") + text : std::string());
}

void cu_check(CUresult r, const char* what) {
  if (r != 0) throw DeviceError(cat("CUDA: ", what, " failed: ", error_text(r)));
}

/// The process that initialized the driver: CUDA does not survive fork(), so a child refuses.
pid_t& driver_pid() {
  static pid_t pid = 0;
  return pid;
}

/// Makes a context current on this thread for a scope.
void check_not_forked() {
  if (getpid() != driver_pid())
    throw DeviceError("CUDA: this process was forked from the one that initialized the CUDA driver; the driver "
                      "cannot be used in a forked child (start the child with the 'spawn' method)");
}

class Current {
 public:
  explicit Current(CUcontext c) {
    check_not_forked();
    CUcontext now = nullptr;  // already current (PyTorch's thread, a launch after another): nothing to push
    if (api().CtxGetCurrent(&now) == 0 && now == c) return;
    cu_check(api().CtxPushCurrent(c), "cuCtxPushCurrent");
    pushed_ = true;
  }
  ~Current() {
    if (!pushed_) return;
    CUcontext c;
    api().CtxPopCurrent(&c);
  }
  Current(const Current&) = delete;
  Current& operator=(const Current&) = delete;

 private:
  bool pushed_ = false;
};

std::mutex image_mu;
ImageCacheStats image_stats;
void count_image() {
  std::lock_guard<std::mutex> g(image_mu);
  ++image_stats.compiles;
}

class CudaKernel : public DeviceKernel {
 public:
  CudaKernel(CUcontext ctx, CUstream stream, CUfunction f, std::shared_ptr<void> module)
      : ctx_(ctx), stream_(stream), f_(f), module_(std::move(module)) {}
  void launch(const std::vector<KernelArg>& args, int dims, const std::array<size_t, 3>& global,
              const std::array<size_t, 3>& local) override {
    if (dims < 1 || dims > 3) throw UserError(cat("a launch has 1 to 3 dimensions, not ", dims));
    std::array<unsigned, 3> grid{1, 1, 1}, block{1, 1, 1};
    for (int d = 0; d < dims; ++d) {
      if (local[d] == 0) throw UserError("a CUDA launch needs the work-group (block) size");
      if (global[d] % local[d] != 0)
        throw UserError(cat("global size ", global[d], " is not a multiple of the work-group size ", local[d]));
      block[d] = static_cast<unsigned>(local[d]);
      grid[d] = static_cast<unsigned>(global[d] / local[d]);
    }
    // Each parameter's bytes, kept in place while the driver reads them.
    std::vector<std::vector<uint8_t>> values(args.size());
    std::vector<void*> params(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].is_pointer) {
        const uint64_t p = reinterpret_cast<uintptr_t>(args[i].pointer);
        values[i].resize(8);
        std::memcpy(values[i].data(), &p, 8);
      } else {
        values[i] = args[i].value;
      }
      params[i] = values[i].data();
    }
    Current cur(ctx_);
    cu_check(api().LaunchKernel(f_, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_, stream_, params.data(),
                             nullptr),
          "cuLaunchKernel");
    cu_check(api().StreamSynchronize(stream_), "the kernel (cuStreamSynchronize)");
  }
  void launch_on_stream(void** params, size_t groups, size_t local, uintptr_t stream) override {
    if (groups == 0) return;
    if (groups > 0x7fffffffu || local == 0 || local > 1024)
      throw UserError(cat("a CUDA launch of ", groups, " blocks of ", local, " threads is out of range"));
    Current cur(ctx_);
    cu_check(api().LaunchKernel(f_, static_cast<unsigned>(groups), 1, 1, static_cast<unsigned>(local), 1, 1, shared_,
                                reinterpret_cast<CUstream>(stream), params, nullptr),
             "cuLaunchKernel");
  }
  void set_dynamic_shared(size_t bytes) override {
    if (bytes > 48 * 1024) {  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (8): the opt-in above 48 KiB
      Current cur(ctx_);
      cu_check(api().FuncSetAttribute(f_, 8, static_cast<int>(bytes)), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    }
    shared_ = static_cast<unsigned>(bytes);
  }

 private:
  CUcontext ctx_;
  CUstream stream_;
  CUfunction f_;
  unsigned shared_ = 0;           // dynamic shared memory bytes a block
  std::shared_ptr<void> module_;  // keeps the module loaded
};

class CudaModule : public DeviceModule {
 public:
  CudaModule(CUcontext ctx, CUstream stream, CUmodule m, std::string log)
      : ctx_(ctx), stream_(stream), m_(m), holder_(m, [](void*) {}), log_(std::move(log)) {}
  std::shared_ptr<DeviceKernel> kernel(const std::string& name) override {
    CUfunction f = nullptr;
    Current cur(ctx_);
    cu_check(api().ModuleGetFunction(&f, m_, name.c_str()), cat("cuModuleGetFunction(", name, ")").c_str());
    return std::make_shared<CudaKernel>(ctx_, stream_, f, holder_);
  }
  std::string build_log() const override { return log_; }

 private:
  CUcontext ctx_;
  CUstream stream_;
  CUmodule m_;
  // Modules are not unloaded: they live as long as the process's kernel cache, and at exit the
  // driver may already be gone.
  std::shared_ptr<void> holder_;
  std::string log_;
};

class CudaDevice : public Device {
 public:
  CudaDevice(DeviceInfo info, int ordinal) : info_(std::move(info)) {
    CUdevice dev;
    cu_check(api().DeviceGet(&dev, ordinal), "cuDeviceGet");
    cu_check(api().DevicePrimaryCtxRetain(&ctx_, dev), "cuDevicePrimaryCtxRetain");
    Current cur(ctx_);
    cu_check(api().StreamCreate(&stream_, 0), "cuStreamCreate");  // ordered with the legacy default stream
  }
  const DeviceInfo& info() const override { return info_; }
  void check() const override { check_not_forked(); }
  bool host_visible() const override { return false; }
  CUcontext context() const { return ctx_; }
  std::string simt_target() const override { return "nvptx64:" + info_.arch; }
  void* alloc_shared(size_t bytes, size_t alignment) override {
    // cuMemAlloc aligns to at least 256 bytes.
    CUdeviceptr p = 0;
    Current cur(ctx_);
    cu_check(api().MemAlloc(&p, std::max<size_t>(bytes, 1)), cat("cuMemAlloc(", bytes, " bytes)").c_str());
    return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  }
  void free_shared(void* ptr) override {
    if (!ptr) return;
    Current cur(ctx_);
    api().MemFree(reinterpret_cast<uintptr_t>(ptr));  // errors at exit (driver shut down) are ignored
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    Current cur(ctx_);
    cu_check(api().StreamSynchronize(stream_), "cuStreamSynchronize");
    cu_check(api().MemcpyHtoD(reinterpret_cast<uintptr_t>(dst), src, bytes), "cuMemcpyHtoD");
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    Current cur(ctx_);
    cu_check(api().StreamSynchronize(stream_), "cuStreamSynchronize");
    cu_check(api().MemcpyDtoH(dst, reinterpret_cast<uintptr_t>(src), bytes), "cuMemcpyDtoH");
  }
  std::shared_ptr<DeviceModule> load_spirv(const std::string&) override {
    throw UserError(cat(info_.name, " is an NVIDIA GPU: it takes PTX, not SPIR-V"));
  }
  // The driver compiles each PTX module as one whole program (cuModuleLoadDataEx). Not through
  // cuLinkCreate / cuLinkAddData / cuLinkComplete, which would hand back an image to keep: the
  // linker compiles PTX as a relocatable object, and there ptxas ignores setmaxnreg and serializes
  // every wgmma ("to maintain compatibility across compilation units"; on the H100 the
  // warp-specialized bf16 kernel spilled 328 bytes a work-item and waited for each wgmma, against
  // 24 bytes and one group in flight as a whole program). The driver's own JIT cache keeps the
  // machine code across processes (CUDA_CACHE_PATH, CUDA_CACHE_MAXSIZE); coopjit's disk cache
  // keeps the PTX. The verbose JIT log (registers, stack, spills) is the module's build_log.
  std::shared_ptr<DeviceModule> load_ptx(const std::string& ptx) override {
    Current cur(ctx_);
    std::vector<char> info_log(1 << 14, 0), error_log(1 << 14, 0);
    int opts[] = {kJitInfoLog, kJitInfoLogSize, kJitErrorLog, kJitErrorLogSize, kJitLogVerbose};
    void* vals[] = {info_log.data(), reinterpret_cast<void*>(uintptr_t(info_log.size())), error_log.data(),
                    reinterpret_cast<void*>(uintptr_t(error_log.size())), reinterpret_cast<void*>(uintptr_t(1))};
    CUmodule m = nullptr;
    const CUresult r = api().ModuleLoadDataEx(&m, ptx.c_str(), 5, opts, vals);
    if (r != 0)
      throw DeviceError(cat("CUDA: the driver's PTX JIT (cuModuleLoadDataEx) failed on ", info_.name, ": ", error_text(r),
                            "\n", error_log.data(), info_log.data()));
    count_image();
    return std::make_shared<CudaModule>(ctx_, stream_, m, info_log.data());
  }
  void synchronize() override {
    Current cur(ctx_);
    cu_check(api().StreamSynchronize(stream_), "cuStreamSynchronize");
  }

 private:
  DeviceInfo info_;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
};

}  // namespace

ImageCacheStats image_cache_stats() {
  std::lock_guard<std::mutex> g(image_mu);
  return image_stats;
}

const Discovery& discover() {
  static const Discovery d = [] {
    Discovery out;
    Api& a = api();
    out.status = load(a);
    if (!out.status.empty()) return out;
    driver_pid() = getpid();
    if (CUresult r = a.Init(0); r != 0) {
      out.status = "cuInit failed: " + error_text(r);
      return out;
    }
    a.DriverGetVersion(&out.driver_version);
    int n = 0;
    if (CUresult r = a.DeviceGetCount(&n); r != 0) {
      out.status = "cuDeviceGetCount failed: " + error_text(r);
      return out;
    }
    std::string rejected;
    for (int i = 0; i < n; ++i) {
      CUdevice dev;
      if (a.DeviceGet(&dev, i) != 0) continue;
      DeviceProps p;
      p.ordinal = i;
      char name[256] = {0};
      a.DeviceGetName(name, sizeof name - 1, dev);
      p.name = name;
      auto attr = [&](int which) {
        int v = 0;
        a.DeviceGetAttribute(&v, which, dev);
        return v;
      };
      p.cc_major = attr(kCCMajor);
      p.cc_minor = attr(kCCMinor);
      p.sms = attr(kSMs);
      p.warp_size = attr(kWarpSize);
      p.max_threads_per_block = attr(kMaxThreadsPerBlock);
      p.registers_per_block = attr(kRegsPerBlock);
      p.shared_per_block = attr(kSharedPerBlock);
      p.shared_per_block_optin = attr(kSharedOptin);
      p.shared_per_sm = attr(kSharedPerSM);
      p.l2_bytes = attr(kL2);
      p.clock_khz = attr(kClockRate);
      p.memory_clock_khz = attr(kMemClock);
      p.memory_bus_bits = attr(kBusWidth);
      size_t mem = 0;
      a.DeviceTotalMem(&mem, dev);
      p.total_memory = static_cast<int64_t>(mem);
      if (p.cc_major < 8 || p.warp_size != 32) {
        rejected += cat(rejected.empty() ? "" : "; ", "CUDA device ", i, " (", p.name, ", ", p.arch(),
                        "): coopjit needs sm_80 or newer");
        continue;
      }
      out.devices.push_back(p);
    }
    if (out.devices.empty()) out.status = n == 0 ? "the CUDA driver lists no device" : rejected;
    return out;
  }();
  return d;
}

std::shared_ptr<Device> open(const DeviceInfo& info, int ordinal) { return std::make_shared<CudaDevice>(info, ordinal); }

bool tensor_maps_available() { return discover().status.empty() && api().TensorMapEncodeTiled != nullptr; }

std::vector<uint8_t> tensor_map_2d(const std::string& device, const void* base, int elem_bytes, int64_t inner, int64_t outer,
                                   int64_t outer_stride_bytes, int box_inner, int box_outer, int swizzle) {
  if (!tensor_maps_available()) throw DeviceError("CUDA: this driver has no cuTensorMapEncodeTiled (CUDA 12 or newer)");
  // CU_TENSOR_MAP_DATA_TYPE_UINT8 / UINT16 / UINT32 (the bits are copied as they are).
  const int dtype = elem_bytes == 1 ? 0 : elem_bytes == 2 ? 1 : elem_bytes == 4 ? 2 : -1;
  if (dtype < 0) throw InternalError(cat("a tensor map of ", elem_bytes, "-byte elements"));
  // The driver makes the map in the device's context (CUDA_ERROR_INVALID_CONTEXT without one).
  const std::shared_ptr<Device> dev = open_device(device);
  const auto* cd = dynamic_cast<const CudaDevice*>(dev.get());
  if (!cd) throw InternalError(cat("a tensor map for ", device, ", not a CUDA device"));
  Current cur(cd->context());
  alignas(64) uint8_t map[128] = {};
  const uint64_t dims[2] = {static_cast<uint64_t>(inner), static_cast<uint64_t>(outer)};
  const uint64_t strides[1] = {static_cast<uint64_t>(outer_stride_bytes)};
  const unsigned box[2] = {static_cast<unsigned>(box_inner), static_cast<unsigned>(box_outer)};
  const unsigned elem_strides[2] = {1, 1};
  if (swizzle < 1 || swizzle > 3) throw InternalError(cat("a tensor map with swizzle mode ", swizzle));
  // Interleave none (0), swizzle 128 / 64 / 32 bytes (3 / 2 / 1), L2 promotion of 256 bytes (3), zero fill (0).
  cu_check(api().TensorMapEncodeTiled(map, dtype, 2, const_cast<void*>(base), dims, strides, box, elem_strides, 0, swizzle, 3, 0),
           cat("cuTensorMapEncodeTiled(", inner, " x ", outer, ", row stride ", outer_stride_bytes, " bytes, box ", box_inner,
               " x ", box_outer, ", swizzle ", swizzle, ")").c_str());
  return std::vector<uint8_t>(map, map + 128);
}

}  // namespace coopjit::cuda
