// The device layer (devices.h): one table of runtimes (OpenCL, Level Zero, CUDA) that discovers,
// names and opens their devices, and one adapter template that puts either SPIR-V runtime's
// Context / Program / Kernel behind Device (CUDA's Device is cuda.cpp's).
#include "runtime/devices.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>

#include <unistd.h>

#include "core/error.h"
#include "runtime/cuda.h"
#include "runtime/fork.h"
#include "runtime/level_zero.h"
#include "runtime/opencl.h"

namespace coopjit {
namespace {

std::atomic<int64_t> g_live_allocations{0};

class DeviceRuntime;

// ---- the runtimes behind Device: one table ------------------------------------------------------
// Each kind of GPU device is a runtime here: the prefix of its devices' names, what messages call
// it, and its discovery, which gives a DeviceRuntime (below) holding the devices found and opening
// them. Adding a kind of device is a DeviceRuntime and a line in kRuntimes; names, lookups,
// messages and open_device follow the table.
struct RuntimeKind {
  const char* backend;  // "opencl": devices "opencl:0", ...
  const char* display;  // "OpenCL"
  bool spirv;           // its devices take SPIR-V (spirv_devices() lists them)
  std::unique_ptr<DeviceRuntime> (*discover)(const RuntimeKind&);
};
std::unique_ptr<DeviceRuntime> discover_opencl(const RuntimeKind& kind);
std::unique_ptr<DeviceRuntime> discover_level_zero(const RuntimeKind& kind);
std::unique_ptr<DeviceRuntime> discover_cuda(const RuntimeKind& kind);
// In the order coopjit.devices() lists their devices: SPIR-V ones first, then CUDA's.
constexpr RuntimeKind kRuntimes[] = {
    {"opencl", "OpenCL", true, discover_opencl},
    {"level_zero", "Level Zero", true, discover_level_zero},
    {"cuda", "CUDA", false, discover_cuda},
};

const RuntimeKind* find_runtime(const std::string& backend) {
  for (const RuntimeKind& k : kRuntimes)
    if (backend == k.backend) return &k;
  return nullptr;
}

std::string runtime_display(const std::string& backend) {
  const RuntimeKind* k = find_runtime(backend);
  return k ? k->display : backend;
}

// A device (and what was made on it) used in a child of fork(): the runtime's threads and the
// driver's state stay in the parent, so the context cannot work here (Intel's OpenCL runtime
// would wait forever for its worker threads).
void check_process(const std::string& device, const std::string& backend, long owner) {
  if (::getpid() == owner) return;
  throw DeviceError(cat(device, ": its ", runtime_display(backend),
                        " context was created before fork() (in process ", owner, "), and this forked child (process ",
                        static_cast<long>(::getpid()), ") cannot use it. Open devices in the child only (before it, the parent may "
                        "only list them), or start worker processes with multiprocessing's 'spawn' or 'forkserver' method"));
}

DeviceInfo from_opencl(const opencl::DeviceProps& p, int index) {
  DeviceInfo d;
  d.name = cat("opencl:", index);
  d.backend = "opencl";
  d.device_name = p.name;
  d.vendor = p.vendor;
  d.driver_version = p.driver_version;
  d.platform = p.platform;
  d.type = p.type;
  d.spirv_version = p.spirv_version();
  d.memory = p.usm_shared ? "usm_shared" : "svm_fine_grain";
  d.subgroup_sizes = p.subgroup_sizes;
  d.max_work_group_size = p.max_work_group_size;
  d.local_memory_bytes = p.local_mem_bytes;
  d.global_memory_bytes = p.global_mem_bytes;
  d.compute_units = p.compute_units;
  d.extensions = {};
  std::string e;
  for (char c : p.extensions + " ") {
    if (c != ' ') e += c;
    else if (!e.empty()) d.extensions.push_back(e), e.clear();
  }
  // OpenCL reports no DPAS as such; Intel's matrix-multiply-accumulate extension is the sign.
  d.dpas = p.has_extension("cl_intel_subgroup_matrix_multiply_accumulate") ? 1 : (p.type == "gpu" ? -1 : 0);
  d.block2d = p.has_extension("cl_intel_subgroup_2d_block_io") ? 1 : (p.type == "gpu" ? -1 : 0);
  d.spirv_extensions = p.spirv_extensions;
  return d;
}

DeviceInfo from_level_zero(const level_zero::DeviceProps& p, int index) {
  DeviceInfo d;
  d.name = cat("level_zero:", index);
  d.backend = "level_zero";
  d.device_name = p.name;
  d.vendor = cat("0x", std::hex, p.vendor_id);
  d.driver_version = p.driver_version;
  d.platform = "Level Zero";
  d.type = "gpu";
  d.spirv_version = p.spirv_version;
  d.memory = "usm_shared";
  d.subgroup_sizes = p.subgroup_sizes;
  d.max_work_group_size = p.max_group_size;
  d.local_memory_bytes = p.shared_local_memory;
  d.global_memory_bytes = p.global_mem_bytes;
  d.compute_units = p.compute_units;
  d.dpas = p.dpas;
  // Level Zero does not report 2-D block I/O; the GPUs that have it (Xe-HPC, Xe2) are those
  // with DPAS whose smallest subgroup is 16 (Xe-HPG's DPAS is SIMD8 and it has no 2-D blocks).
  const bool sg16 = !p.subgroup_sizes.empty() && *std::min_element(p.subgroup_sizes.begin(), p.subgroup_sizes.end()) == 16;
  d.block2d = p.dpas == 1 && sg16 ? 1 : -1;
  return d;
}

DeviceInfo from_cuda(const cuda::DeviceProps& p, int driver, int index) {
  DeviceInfo d;
  d.name = cat("cuda:", index);
  d.backend = "cuda";
  d.device_name = p.name;
  d.vendor = "NVIDIA";
  d.driver_version = cat(driver / 1000, ".", (driver % 1000) / 10);
  d.platform = "CUDA";
  d.type = "gpu";
  d.memory = "device";
  d.subgroup_sizes = {p.warp_size};
  d.max_work_group_size = p.max_threads_per_block;
  d.local_memory_bytes = p.shared_per_block_optin > 0 ? p.shared_per_block_optin : p.shared_per_block;
  d.global_memory_bytes = p.total_memory;
  d.compute_units = p.sms;
  d.dpas = 0;
  d.block2d = 0;
  d.arch = p.arch();
  d.compute_capability = cat(p.cc_major, ".", p.cc_minor);
  d.shared_memory_per_sm_bytes = p.shared_per_sm;
  d.registers_per_block = p.registers_per_block;
  d.l2_bytes = p.l2_bytes;
  d.clock_khz = p.clock_khz;
  d.memory_clock_khz = p.memory_clock_khz;
  d.memory_bus_bits = p.memory_bus_bits;
  return d;
}

// ---- one adapter for both runtimes ----------------------------------------------------------

const char* backend_of(const opencl::Context&) { return "opencl"; }
const char* backend_of(const level_zero::Context&) { return "level_zero"; }

template <class Kern>
class KernelAdapter : public DeviceKernel {
 public:
  KernelAdapter(std::shared_ptr<Kern> k, std::function<void()> sync, std::string device, std::string backend, long owner)
      : k_(std::move(k)), sync_(std::move(sync)), device_(std::move(device)), backend_(std::move(backend)), owner_(owner) {}
  void launch(const std::vector<KernelArg>& args, int dims, const std::array<size_t, 3>& global,
              const std::array<size_t, 3>& local) override {
    // Before mu_, which a parent's thread may have held at the fork.
    check_process(device_, backend_, owner_);
    if (dims < 1 || dims > 3) throw UserError(cat("a launch has 1 to 3 dimensions, not ", dims));
    std::lock_guard<std::mutex> lock(mu_);  // arguments and launch belong together
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].is_pointer)
        k_->set_pointer(static_cast<unsigned>(i), args[i].pointer);
      else
        k_->set_value(static_cast<unsigned>(i), args[i].value.data(), args[i].value.size());
    }
    k_->launch(dims, global, local);
    sync_();
  }

 private:
  std::shared_ptr<Kern> k_;
  std::function<void()> sync_;
  std::string device_, backend_;
  long owner_;
  std::mutex mu_;
};

template <class Prog>
class ModuleAdapter : public DeviceModule {
 public:
  ModuleAdapter(std::shared_ptr<Prog> p, std::function<void()> sync, std::string device)
      : p_(std::move(p)), sync_(std::move(sync)), device_(std::move(device)) {}
  std::shared_ptr<DeviceKernel> kernel(const std::string& name) override {
    const auto& ctx = *p_->context();
    check_process(device_, backend_of(ctx), ctx.owner_pid());
    return std::make_shared<KernelAdapter<typename decltype(p_->kernel(name))::element_type>>(
        p_->kernel(name), sync_, device_, backend_of(ctx), ctx.owner_pid());
  }
  std::string build_log() const override { return p_->build_log(); }

 private:
  std::shared_ptr<Prog> p_;
  std::function<void()> sync_;
  std::string device_;
};

void wait(opencl::Context& c) { c.finish(); }
void wait(level_zero::Context& c) { c.synchronize(); }

template <class Ctx>
class DeviceAdapter : public Device {
 public:
  DeviceAdapter(DeviceInfo info, std::shared_ptr<Ctx> ctx) : info_(std::move(info)), ctx_(std::move(ctx)) {}
  const DeviceInfo& info() const override { return info_; }
  void* alloc_shared(size_t bytes, size_t alignment) override {
    check();
    return ctx_->alloc_shared(bytes, alignment);
  }
  void free_shared(void* ptr) override { ctx_->free_shared(ptr); }  // a no-op in a forked child
  std::shared_ptr<DeviceModule> load_spirv(const std::string& spirv) override {
    check();
    auto prog = ctx_->build(spirv);
    auto ctx = ctx_;
    return std::make_shared<ModuleAdapter<typename decltype(prog)::element_type>>(prog, [ctx] { wait(*ctx); },
                                                                                  info_.name);
  }
  void synchronize() override {
    check();
    wait(*ctx_);
  }
  void check() const override { check_process(info_.name, info_.backend, ctx_->owner_pid()); }

 private:
  DeviceInfo info_;
  std::shared_ptr<Ctx> ctx_;
};

// ---- the runtimes -------------------------------------------------------------------------------

/// One runtime's devices, as discovered (once per process): their DeviceInfos ("<backend>:N" in
/// order), why there are not more (status), and how to open the N-th.
class DeviceRuntime {
 public:
  explicit DeviceRuntime(const RuntimeKind& kind) : status{kind.backend, 0, "", {}} {}
  virtual ~DeviceRuntime() = default;
  virtual std::shared_ptr<Device> open(size_t index) const = 0;
  std::vector<DeviceInfo> infos;
  BackendStatus status;
};

/// The runtimes whose devices share the adapters above (a Context per device).
template <class Ctx, class Ref>
class AdaptedRuntime : public DeviceRuntime {
 public:
  using DeviceRuntime::DeviceRuntime;
  std::shared_ptr<Device> open(size_t index) const override {
    return std::make_shared<DeviceAdapter<Ctx>>(infos.at(index), Ctx::create(refs.at(index)));
  }
  std::vector<Ref> refs;  // the runtime's handle of each device, in the order of infos
};

std::unique_ptr<DeviceRuntime> discover_opencl(const RuntimeKind& kind) {
  auto rt = std::make_unique<AdaptedRuntime<opencl::Context, opencl::DeviceRef>>(kind);
  BackendStatus& cls = rt->status;
  opencl::available(&cls.status);
  for (auto& d : opencl::all_devices()) {
    std::string why = opencl::unusable_reason(d.props);
    if (!why.empty()) {
      cls.rejected.push_back(d.props.name + " (" + d.props.platform + "): " + why);
      continue;
    }
    rt->infos.push_back(from_opencl(d.props, static_cast<int>(rt->refs.size())));
    rt->refs.push_back(d);
  }
  if (cls.status.empty() && rt->refs.empty() && cls.rejected.empty())
    cls.status = "the OpenCL ICD loader lists no platform (no ICD registered in /etc/OpenCL/vendors or $OCL_ICD_VENDORS)";
  return rt;
}

std::unique_ptr<DeviceRuntime> discover_level_zero(const RuntimeKind& kind) {
  auto rt = std::make_unique<AdaptedRuntime<level_zero::Context, level_zero::DeviceRef>>(kind);
  const level_zero::Discovery& z = level_zero::discover();
  for (auto& d : z.devices) {
    rt->infos.push_back(from_level_zero(d.props, static_cast<int>(rt->refs.size())));
    rt->refs.push_back(d);
  }
  rt->status.status = z.status;
  return rt;
}

class CudaRuntime : public DeviceRuntime {
 public:
  using DeviceRuntime::DeviceRuntime;
  std::shared_ptr<Device> open(size_t index) const override { return cuda::open(infos.at(index), ordinals.at(index)); }
  std::vector<int> ordinals;  // the driver's ordinal of each device (devices older than sm_80 are left out)
};

std::unique_ptr<DeviceRuntime> discover_cuda(const RuntimeKind& kind) {
  auto rt = std::make_unique<CudaRuntime>(kind);
  const cuda::Discovery& cu = cuda::discover();
  for (const auto& p : cu.devices) {
    rt->infos.push_back(from_cuda(p, cu.driver_version, static_cast<int>(rt->infos.size())));
    rt->ordinals.push_back(p.ordinal);
  }
  rt->status.status = cu.status;
  return rt;
}

struct Registry {
  std::vector<std::unique_ptr<DeviceRuntime>> runtimes;  // as kRuntimes
  std::vector<DeviceInfo> spirv_infos;                    // the SPIR-V runtimes' devices
};

Registry discover_devices() {
  Registry reg;
  for (const RuntimeKind& k : kRuntimes) {
    reg.runtimes.push_back(k.discover(k));
    DeviceRuntime& rt = *reg.runtimes.back();
    rt.status.usable = static_cast<int>(rt.infos.size());
    if (k.spirv) reg.spirv_infos.insert(reg.spirv_infos.end(), rt.infos.begin(), rt.infos.end());
  }
  return reg;
}

// Discovery runs once, under this lock rather than a function-local static's guard, so that
// fork() can wait for a discovery under way in another thread (devices_fork) instead of leaving
// the child a guard that never opens.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::atomic<const Registry*> g_registry{nullptr};

const Registry& registry() {
  if (const Registry* r = g_registry.load(std::memory_order_acquire)) return *r;
  std::lock_guard<std::mutex> g(registry_mutex());
  if (!g_registry.load(std::memory_order_relaxed)) g_registry.store(new Registry(discover_devices()), std::memory_order_release);
  return *g_registry.load(std::memory_order_relaxed);
}

/// Parses "<backend>:N" ("opencl:0", "level_zero:1", "cuda:0") into its runtime and N.
std::pair<const RuntimeKind*, size_t> parse_name(const std::string& name) {
  auto colon = name.find(':');
  std::string backend = name.substr(0, colon);
  std::string index = colon == std::string::npos ? "" : name.substr(colon + 1);
  bool digits = !index.empty() && index.size() < 6 && index.find_first_not_of("0123456789") == std::string::npos;
  if (name == "cpu")
    throw UserError("device 'cpu' runs kernels through the ORC JIT, not SPIR-V: it has no SPIR-V device object");
  const RuntimeKind* kind = find_runtime(backend);
  if (!kind || !digits) {
    std::string expected = "'cpu'";
    const size_t n = std::size(kRuntimes);
    for (size_t i = 0; i < n; ++i) expected += cat(i + 1 < n ? ", '" : " or '", kRuntimes[i].backend, ":N'");
    throw UserError(cat("unknown device '", name, "': expected ", expected));
  }
  return {kind, std::stoul(index)};
}

const DeviceRuntime& runtime_of(const RuntimeKind* kind) {
  return *registry().runtimes.at(static_cast<size_t>(kind - kRuntimes));
}

std::string missing_device(const std::string& name, const RuntimeKind& kind, const DeviceRuntime& rt) {
  const BackendStatus& s = rt.status;
  std::string msg = cat("no device '", name, "': ", rt.infos.size(), " usable ", kind.display, " device(s)");
  if (!s.status.empty()) msg += "; " + s.status;
  for (const auto& r : s.rejected) msg += "; rejected " + r;
  return msg;
}

}  // namespace

const std::vector<DeviceInfo>& spirv_devices() { return registry().spirv_infos; }

std::vector<DeviceInfo> gpu_devices() {
  std::vector<DeviceInfo> out;
  for (const auto& rt : registry().runtimes) out.insert(out.end(), rt->infos.begin(), rt->infos.end());
  return out;
}

void Device::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void Device::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
std::shared_ptr<DeviceModule> Device::load_ptx(const std::string&) {
  throw UserError(cat(info().name, " takes SPIR-V, not PTX"));
}

std::vector<BackendStatus> backend_status() {
  std::vector<BackendStatus> out;
  for (const auto& rt : registry().runtimes) out.push_back(rt->status);
  return out;
}

const DeviceInfo& device_info(const std::string& name) {
  auto [kind, index] = parse_name(name);
  const DeviceRuntime& rt = runtime_of(kind);
  for (const auto& d : rt.infos)
    if (d.name == name) return d;
  throw DeviceError(missing_device(name, *kind, rt));
}

namespace {
std::mutex& open_mutex() {
  static std::mutex mu;
  return mu;
}
}  // namespace

// runtime/fork.h: discovery finished and the map of open devices consistent in the child (a
// context being created in another thread: the fork waits for it).
void devices_fork(fork_safety::Phase phase) {
  if (phase == fork_safety::Phase::prepare) {
    registry_mutex().lock();  // a discovery under way (it runs the runtimes' loaders)
    open_mutex().lock();
  } else {
    open_mutex().unlock();
    registry_mutex().unlock();
  }
}

std::shared_ptr<Device> open_device(const std::string& name) {
  // Never destroyed: at process exit the runtimes may already be gone (objects that Python still
  // holds then are left to the operating system).
  static auto& open = *new std::map<std::string, std::shared_ptr<Device>>();
  const DeviceInfo& info = device_info(name);  // throws for a bad or missing name
  std::lock_guard<std::mutex> lock(open_mutex());
  auto& slot = open[name];
  if (slot) {
    slot->check();  // opened before a fork(): DeviceError in the child
    return slot;
  }
  auto [kind, index] = parse_name(info.name);
  slot = runtime_of(kind).open(index);
  return slot;
}

SharedAllocation::SharedAllocation(std::shared_ptr<Device> device, size_t bytes, size_t alignment)
    : device_(std::move(device)), bytes_(bytes) {
  ptr_ = device_->alloc_shared(bytes, alignment);
  ++g_live_allocations;
}

SharedAllocation::~SharedAllocation() {
  device_->free_shared(ptr_);
  --g_live_allocations;
}

void SharedAllocation::upload(const void* src, size_t bytes, size_t offset) {
  if (offset > bytes_ || bytes > bytes_ - offset)
    throw UserError(cat("copy of ", bytes, " bytes at offset ", offset, " into an allocation of ", bytes_, " bytes"));
  device_->copy_to_device(static_cast<char*>(ptr_) + offset, src, bytes);
}

void SharedAllocation::download(void* dst, size_t bytes, size_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset)
    throw UserError(cat("copy of ", bytes, " bytes at offset ", offset, " out of an allocation of ", bytes_, " bytes"));
  device_->copy_to_host(dst, static_cast<const char*>(ptr_) + offset, bytes);
}

int64_t live_shared_allocations() { return g_live_allocations.load(); }

}  // namespace coopjit
