// The device kernel cache (device_program.h): one SPIR-V program per (device, key) in memory; the
// SPIR-V modules also on disk (runtime/spirv_cache.h).
#include "runtime/device_program.h"

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <new>

#include <llvm/Config/llvm-config.h>
#include <llvm/Support/raw_ostream.h>

#include "core/error.h"
#include "runtime/fork.h"
#include "ir/norm_types.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lower/simt_lower.h"
#include "runtime/kernel.h"
#include "runtime/spirv_cache.h"
#include "target/ptx_target.h"
#include "target/spirv_target.h"
#include "target/spirv_tools.h"

namespace coopjit {
namespace {

struct Cache {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const DeviceProgram>> entries;
  std::mutex compile_mu;
  std::mutex launch_mu;  // an OpenCL kernel object holds its arguments: one launch at a time
  DeviceCacheStats stats;
};
Cache& cache() {
  static Cache c;
  return c;
}

std::string symbol_for(const std::string& key, int64_t serial) {
  std::string s = "coopjit_";
  for (char c : key) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.size() > 120) s.resize(120);
  return s + "_" + std::to_string(serial);
}

std::shared_ptr<const DeviceProgram> lookup_or_build(const std::string& device, const std::string& plan_key,
                                                     const std::function<ir::Function*(const std::string&)>& get) {
  const std::string key = device + "|" + plan_key + "|llvm" + LLVM_VERSION_STRING;
  Cache& c = cache();
  auto find = [&]() -> std::shared_ptr<const DeviceProgram> {
    std::lock_guard<std::mutex> g(c.mu);
    auto it = c.entries.find(key);
    if (it == c.entries.end()) return nullptr;
    ++c.stats.hits;
    return it->second;
  };
  if (auto p = find()) return p;
  std::lock_guard<std::mutex> compile(c.compile_mu);
  if (auto p = find()) return p;
  {
    std::lock_guard<std::mutex> g(c.mu);
    ++c.stats.misses;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto p = std::make_shared<DeviceProgram>();
  p->key = key;
  p->device = device;
  p->name = symbol_for(plan_key, c.stats.misses);
  ir::Function* f = get(p->name);
  p->ir_text = ir::print(*f);
  if (debug_enabled("plan")) std::cerr << "[coopjit] " << device << " plan " << plan_key << "\n";
  if (debug_enabled("ir")) std::cerr << "[coopjit] kernel IR:\n" << p->ir_text;
  ir::verify(*f);
  for (const ir::Value* v : f->params) p->params.push_back(v->type);
  const SimtShape shape = simt_shape(*f);
  p->subgroup_size = shape.subgroup_size;
  p->work_group_size = shape.work_group_size;
  if (auto it = f->attrs.find("dynamic_shared"); it != f->attrs.end()) p->dynamic_shared = std::get<int64_t>(it->second);
  if (auto it = f->attrs.find("tensor_maps"); it != f->attrs.end()) p->tensor_maps = std::get<int64_t>(it->second);
  // The SIMT target: named targets "target:sm_XX" and CUDA devices lower to NVPTX.
  const bool named = device.rfind("target:", 0) == 0;
  std::shared_ptr<Device> dev;
  if (named) p->target = device.rfind("target:sm_", 0) == 0 ? "nvptx64:" + device.substr(7) : "spirv64";
  else p->target = (dev = open_device(device))->simt_target();
  // Hopper's wgmma (simt_wgmma.cpp) is in sm_90a, the architecture-specific variant of sm_90.
  if (f->attrs.count("wgmma")) {
    if (p->target != "nvptx64:sm_90")
      throw UserError(cat("a wgmma plan needs an NVIDIA sm_90 (Hopper) target, not ", device, " (", p->target, ")"));
    p->target += "a";
  }
  llvm::LLVMContext ctx;
  auto normed = ir::lower_norm_types(*f);  // SNorm / UNorm matrices: float ones, clamped where produced
  auto mod = lower_simt(normed ? *normed : *f, ctx, p->target);
  std::string text;  // the lowered module, handed to the NVPTX or the SPIR-V backend
  {
    llvm::raw_string_ostream os(text);
    mod->print(os, nullptr);
    os.flush();
  }
  if (p->target.rfind("nvptx64:", 0) == 0) {
    PtxOptions po;
    po.sm = p->target.substr(8);
    if (dev) {  // the lowest PTX ISA version for the architecture, which the driver must take
      const std::string& dv = dev->info().driver_version;
      const int driver = std::atoi(dv.c_str()) * 1000 + (dv.find('.') != std::string::npos ? std::atoi(dv.c_str() + dv.find('.') + 1) * 10 : 0);
      const int need = min_ptx_version_for_sm(po.sm), have = max_ptx_version_for_driver(driver);
      if (have < need)
        throw DeviceError(cat(device, ": its CUDA driver ", dv, " takes PTX ISA up to ", have / 10, ".", have % 10, "; ",
                              po.sm, " code needs ", need / 10, ".", need % 10, " (update the driver)"));
    }
    if (debug_enabled("lower")) std::cerr << "[coopjit] NVPTX lowering:\n" << text;
    PtxResult r = cached_ptx(text, po);  // through the disk cache (kind "ptx")
    p->ptx = std::move(r.ptx);
    p->llvm_ir = std::move(r.optimized_ir);
    if (debug_enabled("asm")) std::cerr << "[coopjit] PTX:\n" << p->ptx;
    if (dev) {
      p->module = dev->load_ptx(p->ptx);
      p->kernel = p->module->kernel(p->name);
      if (p->dynamic_shared) p->kernel->set_dynamic_shared(static_cast<size_t>(p->dynamic_shared));
    }
  } else {
    // LLVM IR -> SPIR-V through the disk cache (kind "spirv": the module does not depend on the
    // device); the driver's build below is per process.
    SpirvResult r = cached_spirv(text);
    p->spirv = std::move(r.binary);
    p->llvm_ir = std::move(r.optimized_ir);
    if (named) {  // a named target (gpu_plan.h) has no device: generated and validated only
      const SpirvValidation v = spirv_validate(p->spirv);
      if (!v.ok) throw InternalError(cat("spirv-val rejects the module for ", device, " (", v.command, "):\n", v.message));
    } else {
      p->module = dev->load_spirv(p->spirv);
      p->kernel = p->module->kernel(p->name);
    }
  }
  p->compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> g(c.mu);
  c.entries[key] = p;
  c.stats.entries = static_cast<int64_t>(c.entries.size());
  return p;
}

}  // namespace

std::string DeviceProgram::source(const std::string& kind) const {
  if (kind == "ir") return ir_text;
  if (kind == "llvm") return llvm_ir;
  const bool nv = !ptx.empty();
  if (kind == "spirv" && !nv) return spirv_disassemble(spirv);
  if (kind == "ptx" && nv) return ptx;
  throw UserError(cat("unknown source kind '", kind, "' for a ", device, " kernel (known: ir, llvm, ", nv ? "ptx" : "spirv", ")"));
}

void DeviceProgram::launch(const std::vector<KernelArg>& args, int64_t groups) const {
  if (args.size() != params.size() + static_cast<size_t>(tensor_maps))
    throw InternalError(cat("kernel ", name, " takes ", params.size() + tensor_maps, " arguments, got ", args.size()));
  for (size_t i = params.size(); i < args.size(); ++i)  // the tensor maps come last, 128 bytes by value each
    if (args[i].is_pointer || args[i].value.size() != 128)
      throw InternalError(cat("kernel ", name, ": argument ", i, " must be a 128-byte tensor map"));
  if (!kernel)
    throw UserError(cat("kernel ", name, " was generated for ", device.substr(7), ptx.empty() ? " and validated with spirv-val" : "",
                        ", but there is no such device here to run it on"));
  if (groups < 0) throw UserError(cat("kernel ", name, ": groups=", groups, " must not be negative"));
  if (groups == 0) return;
  // The launch limit: 2^32 - 1 work-items (Level Zero's 32-bit group counts, 32-bit global ids).
  // Beyond it a launch would not finish in any useful time (a CPU OpenCL runtime runs 2^40
  // work-groups for days), so it is refused here rather than hang.
  constexpr int64_t kMaxWorkItems = (int64_t(1) << 32) - 1;
  if (groups > kMaxWorkItems / work_group_size)
    throw UserError(cat("kernel ", name, ": groups=", groups, " work-groups of ", work_group_size,
                        " work-items exceed the launch limit of ", kMaxWorkItems, " (2^32 - 1) work-items: at most ",
                        kMaxWorkItems / work_group_size, " work-groups"));
  const size_t wg = static_cast<size_t>(work_group_size);
  std::lock_guard<std::mutex> g(cache().launch_mu);
  kernel->launch(args, 1, {static_cast<size_t>(groups) * wg, 1, 1}, {wg, 1, 1});
}

void DeviceProgram::launch_on_stream(void** params, int64_t groups, uintptr_t stream) const {
  if (!kernel)
    throw UserError(cat("kernel ", name, " was generated for ", device.substr(7), ", but there is no such device here to run it on"));
  if (groups < 0) throw UserError(cat("kernel ", name, ": groups=", groups, " must not be negative"));
  // No launch lock: cuLaunchKernel takes the arguments by value and is thread-safe.
  kernel->launch_on_stream(params, static_cast<size_t>(groups), static_cast<size_t>(work_group_size), stream);
}

std::shared_ptr<const DeviceProgram> device_program(
    const std::string& device, const std::string& key,
    const std::function<std::unique_ptr<ir::Function>(const std::string& symbol)>& build) {
  std::unique_ptr<ir::Function> holder;
  return lookup_or_build(device, key, [&](const std::string& symbol) {
    holder = build(symbol);
    return holder.get();
  });
}

std::shared_ptr<const DeviceProgram> device_program(const std::string& device, ir::Function& f) {
  ir::verify(f);  // user programs: errors before anything is cached
  const std::string key = "custom:" + ir::print(f);
  return lookup_or_build(device, key, [&](const std::string& symbol) {
    f.name = symbol;
    return &f;
  });
}

KernelArg scalar_arg(const ir::Type& t, int64_t i, double d) {
  KernelArg a;
  auto put = [&](const void* p, size_t n) { a.value.assign(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); };
  using ir::ScalarType;
  switch (t.scalar) {
    case ScalarType::f64: put(&d, 8); break;
    case ScalarType::f32: case ScalarType::f16: case ScalarType::bf16: {
      float f = static_cast<float>(d);
      put(&f, 4);
      break;
    }
    case ScalarType::i1: case ScalarType::i8: case ScalarType::u8: {
      uint8_t v = static_cast<uint8_t>(i);
      put(&v, 1);
      break;
    }
    case ScalarType::i16: case ScalarType::u16: {
      uint16_t v = static_cast<uint16_t>(i);
      put(&v, 2);
      break;
    }
    case ScalarType::i32: case ScalarType::u32: {
      uint32_t v = static_cast<uint32_t>(i);
      put(&v, 4);
      break;
    }
    default: put(&i, 8); break;
  }
  return a;
}

std::vector<std::shared_ptr<const DeviceProgram>> device_programs() {
  std::lock_guard<std::mutex> g(cache().mu);
  std::vector<std::shared_ptr<const DeviceProgram>> out;
  for (const auto& [key, p] : cache().entries) out.push_back(p);
  return out;
}

// runtime/fork.h. The map consistent across fork(); the child gets new compile and launch locks
// instead of waiting for those of the parent's threads (held across a SPIR-V compile or a device
// launch, which the fork does not wait for): they guard no data, only take turns.
void device_program_fork(fork_safety::Phase phase) {
  Cache& c = cache();
  if (phase == fork_safety::Phase::prepare) {
    c.mu.lock();
    return;
  }
  if (phase == fork_safety::Phase::child) {
    new (&c.compile_mu) std::mutex();
    new (&c.launch_mu) std::mutex();
  }
  c.mu.unlock();
}

DeviceCacheStats device_cache_stats() {
  std::lock_guard<std::mutex> g(cache().mu);
  return cache().stats;
}

}  // namespace coopjit
