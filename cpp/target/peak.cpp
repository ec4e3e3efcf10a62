// Peak microbenchmarks (peak.h): compute loops written in LLVM IR with IRBuilder and compiled
// by jit_compile for the host, a memcpy loop, and a runner that pins one thread per core.
#include "target/peak.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Triple.h>

#include "core/error.h"
#include "target/cpu_info.h"
#include "target/cpu_jit.h"

namespace coopjit {
namespace {

// ---- The compute kernels: void kernel(i64 iters, ptr in, ptr out), loops of independent chains.

using PeakFn = void (*)(int64_t iters, const void* in, void* out);

struct KernelModule {
  std::unique_ptr<llvm::LLVMContext> ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module;
  std::string symbol;
  std::string needs;  // extra target features the kernel needs ("+amx-tile,...")
};

// Emits `do { body(accs) } while (++i < iters)` at the builder's position, with the
// accumulators as loop phis, and leaves the builder after the loop; returns the final values.
std::vector<llvm::Value*> emit_loop(llvm::IRBuilder<>& b, llvm::Value* iters, const std::vector<llvm::Value*>& init,
                                    const std::function<void(std::vector<llvm::Value*>&)>& body) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  llvm::BasicBlock* loop = llvm::BasicBlock::Create(b.getContext(), "loop", f);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(b.getContext(), "exit", f);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, "i");
  std::vector<llvm::PHINode*> phis;
  std::vector<llvm::Value*> accs;
  for (llvm::Value* v : init) {
    phis.push_back(b.CreatePHI(v->getType(), 2, "acc"));
    phis.back()->addIncoming(v, pre);
    accs.push_back(phis.back());
  }
  body(accs);
  llvm::Value* next = b.CreateAdd(i, b.getInt64(1));
  i->addIncoming(b.getInt64(0), pre);
  i->addIncoming(next, loop);
  for (size_t k = 0; k < phis.size(); ++k) phis[k]->addIncoming(accs[k], loop);
  b.CreateCondBr(b.CreateICmpSLT(next, iters), loop, exit);
  b.SetInsertPoint(exit);
  return accs;
}

// A module with one function void symbol(i64, ptr, ptr) and the builder at its entry.
KernelModule start_kernel(const std::string& symbol, std::unique_ptr<llvm::IRBuilder<>>& b) {
  KernelModule k;
  k.symbol = symbol;
  k.module = std::make_unique<llvm::Module>(symbol, *k.ctx);
  llvm::LLVMContext& c = *k.ctx;
  auto* ptr = llvm::PointerType::getUnqual(c);
  auto* fty = llvm::FunctionType::get(llvm::Type::getVoidTy(c), {llvm::Type::getInt64Ty(c), ptr, ptr}, false);
  auto* f = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, symbol, *k.module);
  b = std::make_unique<llvm::IRBuilder<>>(llvm::BasicBlock::Create(c, "entry", f));
  return k;
}

// `chains` accumulators acc_j = splat(s + j), distinct so that no two chains can be merged.
std::vector<llvm::Value*> distinct_accs(llvm::IRBuilder<>& b, llvm::Value* s, int lanes, int chains) {
  std::vector<llvm::Value*> accs;
  for (int j = 0; j < chains; ++j)
    accs.push_back(b.CreateVectorSplat(lanes, b.CreateFAdd(s, llvm::ConstantFP::get(s->getType(), j))));
  return accs;
}

// Sums the accumulators and stores the vector to out, so that the loop's results are used.
void store_sum(llvm::IRBuilder<>& b, const std::vector<llvm::Value*>& accs, llvm::Value* out) {
  llvm::Value* sum = accs[0];
  for (size_t j = 1; j < accs.size(); ++j) sum = b.CreateFAdd(sum, accs[j]);
  b.CreateStore(sum, out);
  b.CreateRetVoid();
}

// in: float {x, y, s}; out: float[lanes]. Each iteration: acc_j = fma(acc_j, x, y) for each chain.
KernelModule f32_fma_kernel(int lanes, int chains) {
  std::unique_ptr<llvm::IRBuilder<>> bp;
  KernelModule k = start_kernel("coopjit_peak_f32_fma", bp);
  llvm::IRBuilder<>& b = *bp;
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::Value* in = f->getArg(1);
  auto* f32 = b.getFloatTy();
  llvm::Value* x = b.CreateVectorSplat(lanes, b.CreateLoad(f32, in));
  llvm::Value* y = b.CreateVectorSplat(lanes, b.CreateLoad(f32, b.CreateConstGEP1_64(f32, in, 1)));
  llvm::Value* s = b.CreateLoad(f32, b.CreateConstGEP1_64(f32, in, 2));
  auto accs = emit_loop(b, f->getArg(0), distinct_accs(b, s, lanes, chains), [&](std::vector<llvm::Value*>& a) {
    for (auto& acc : a) acc = b.CreateIntrinsic(llvm::Intrinsic::fma, {acc->getType()}, {acc, x, y});
  });
  store_sum(b, accs, f->getArg(2));
  return k;
}

// in: bf16 a[32], bf16 b[32], float s; out: float[16]. Each iteration: one vdpbf16ps per chain
// (16 lanes x 2 products = 64 flops).
KernelModule bf16_dot_kernel(int chains) {
  std::unique_ptr<llvm::IRBuilder<>> bp;
  KernelModule k = start_kernel("coopjit_peak_bf16_dot", bp);
  k.needs = "+avx512f,+avx512bf16";
  llvm::IRBuilder<>& b = *bp;
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::Value* in = f->getArg(1);
  auto* v32bf16 = llvm::FixedVectorType::get(b.getBFloatTy(), 32);
  llvm::Value* va = b.CreateLoad(v32bf16, in);
  llvm::Value* vb = b.CreateLoad(v32bf16, b.CreateConstGEP1_64(b.getInt8Ty(), in, 64));
  llvm::Value* s = b.CreateLoad(b.getFloatTy(), b.CreateConstGEP1_64(b.getInt8Ty(), in, 128));
  auto accs = emit_loop(b, f->getArg(0), distinct_accs(b, s, 16, chains), [&](std::vector<llvm::Value*>& a) {
    for (auto& acc : a) acc = b.CreateIntrinsic(llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512, {}, {acc, va, vb});
  });
  store_sum(b, accs, f->getArg(2));
  return k;
}

// in: a 64-byte tile config, then A0, A1, B0, B1 (1 KiB each); out: C0..C3 (1 KiB each).
// Tiles 0-3 accumulate, 4-5 hold A, 6-7 hold B; each iteration is 4 tile products `dot`:
// tdpbf16ps (16x16x32 bf16 pairs into f32) or tdpbssd (16x16x64 s8 quads into i32).
KernelModule amx_kernel(const char* name, const char* needs, llvm::Intrinsic::ID dot) {
  std::unique_ptr<llvm::IRBuilder<>> bp;
  KernelModule k = start_kernel(name, bp);
  k.needs = needs;
  llvm::IRBuilder<>& b = *bp;
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::Value* in = f->getArg(1);
  llvm::Value* out = f->getArg(2);
  auto at = [&](llvm::Value* p, int64_t bytes) { return b.CreateConstGEP1_64(b.getInt8Ty(), p, bytes); };
  auto call = [&](llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) { b.CreateIntrinsic(id, {}, args); };
  call(llvm::Intrinsic::x86_ldtilecfg, {in});
  for (int t = 0; t < 4; ++t) call(llvm::Intrinsic::x86_tilezero, {b.getInt8(t)});
  for (int t = 0; t < 4; ++t) call(llvm::Intrinsic::x86_tileloadd64, {b.getInt8(4 + t), at(in, 64 + 1024 * t), b.getInt64(64)});
  emit_loop(b, f->getArg(0), {}, [&](std::vector<llvm::Value*>&) {
    for (int t = 0; t < 4; ++t) call(dot, {b.getInt8(t), b.getInt8(4 + t / 2), b.getInt8(6 + t % 2)});
  });
  for (int t = 0; t < 4; ++t) call(llvm::Intrinsic::x86_tilestored64, {b.getInt8(t), at(out, 1024 * t), b.getInt64(64)});
  call(llvm::Intrinsic::x86_tilerelease, {});
  b.CreateRetVoid();
  return k;
}

// Independent chains per kernel: enough to cover FMA latency x pipes on current x86 cores
// (4-5 cycles x 2 pipes), without spilling the vector registers.
int chains() { return host_cpu().vector_registers * 3 / 4; }
int f32_lanes() { return host_cpu().has("avx512f") ? 16 : 8; }

KernelModule build_kernel(const std::string& name) {
  if (name == "f32_fma") return f32_fma_kernel(f32_lanes(), chains());
  if (name == "bf16_dot") return bf16_dot_kernel(chains());
  if (name == "amx_bf16") return amx_kernel("coopjit_peak_amx_bf16", "+amx-tile,+amx-bf16", llvm::Intrinsic::x86_tdpbf16ps);
  if (name == "amx_int8") return amx_kernel("coopjit_peak_amx_int8", "+amx-tile,+amx-int8", llvm::Intrinsic::x86_tdpbssd);
  throw UserError(cat("unknown peak kernel '", name, "' (known: f32_fma, bf16_dot, amx_bf16, amx_int8)"));
}

PeakFn compiled(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, PeakFn> done;
  std::lock_guard<std::mutex> g(mu);
  auto it = done.find(name);
  if (it != done.end()) return it->second;
  KernelModule k = build_kernel(name);
  auto fn = reinterpret_cast<PeakFn>(jit_compile(std::move(k.module), std::move(k.ctx), k.symbol).entry);
  return done[name] = fn;
}

// ---- Threads: one per core, pinned, released together.

// One CPU of each physical core in the affinity mask (SMT siblings share the FMA units).
std::vector<int> core_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {0};
  std::set<std::string> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    std::ifstream pkg(base + "physical_package_id"), core(base + "core_id");
    std::string p, id;
    std::string key = (pkg >> p && core >> id) ? p + ":" + id : "cpu" + std::to_string(c);
    if (cores.insert(key).second) cpus.push_back(c);
  }
  return cpus.empty() ? std::vector<int>{0} : cpus;
}

// Runs work(t) on one thread per CPU of `cpus`, each pinned; returns the seconds from the
// common start to the last finish.
double run_pinned(const std::vector<int>& cpus, const std::function<void(int)>& work) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < cpus.size(); ++t) {
    threads.emplace_back([&, t] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus[t], &set);
      pthread_setaffinity_np(pthread_self(), sizeof set, &set);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      work(static_cast<int>(t));
    });
  }
  while (ready.load() < static_cast<int>(cpus.size())) std::this_thread::yield();
  auto t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Units of work per second over all threads of `cpus`: each thread calls work(t, chunk) until
// `seconds` have passed, with `chunk` about a millisecond of work (so that a thread that another
// process delays only loses the time it lost); the best of `runs` runs.
double best_rate(const std::vector<int>& cpus, const std::function<void(int, int64_t)>& work, double seconds,
                 int runs = 5) {
  using clock = std::chrono::steady_clock;
  int64_t chunk = 1;
  for (;;) {
    auto t0 = clock::now();
    work(0, chunk);
    if (clock::now() - t0 >= std::chrono::milliseconds(1) || chunk >= (int64_t(1) << 40)) break;
    chunk *= 2;
  }
  const auto length = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    std::vector<int64_t> done(cpus.size());
    double wall = run_pinned(cpus, [&](int t) {
      const auto end = clock::now() + length;
      do {
        work(t, chunk);
        done[t] += chunk;
      } while (clock::now() < end);
    });
    double units = 0;
    for (int64_t d : done) units += static_cast<double>(d);
    best = std::max(best, units / wall);
  }
  return best;
}

// Memory aligned to 4 KiB and filled with ones: every page is touched (no page fault is timed)
// and none is the kernel's shared zero page (which reads from cache).
std::unique_ptr<char, decltype(&std::free)> buffer(size_t bytes) {
  bytes = (bytes + 4095) / 4096 * 4096;
  char* p = static_cast<char*>(std::aligned_alloc(4096, bytes));
  if (!p) throw InternalError(cat("cannot allocate ", bytes, " bytes for a peak benchmark"));
  std::memset(p, 1, bytes);
  return {p, &std::free};
}


// ---- The measurements.

// Measures a compute kernel doing `flops_per_iter` per loop iteration: GFLOP/s.
void measure_kernel(PeakMeasurement& r, PeakFn fn, const void* in, size_t out_bytes, double flops_per_iter,
                    double seconds) {
  std::vector<int> cpus = core_cpus();
  std::vector<std::unique_ptr<char, decltype(&std::free)>> outs;
  for (size_t t = 0; t < cpus.size(); ++t) outs.push_back(buffer(out_bytes));
  auto work = [&](int t, int64_t units) { fn(units, in, outs[t].get()); };
  r.single = best_rate({cpus[0]}, work, seconds) * flops_per_iter / 1e9;
  r.all = best_rate(cpus, work, seconds) * flops_per_iter / 1e9;
  r.threads = static_cast<int>(cpus.size());
  r.available = true;
}

void measure_f32_fma(PeakMeasurement& r, double seconds) {
  const float in[3] = {0.999f, 0.001f, 0.5f};  // acc -> acc * x + y converges to 1: no overflow
  const int lanes = f32_lanes(), n = chains();
  measure_kernel(r, compiled("f32_fma"), in, 64 * sizeof(float), 2.0 * lanes * n, seconds);
  r.note = cat(n, " chains of <", lanes, " x float> llvm.fma");
}

void measure_bf16_dot(PeakMeasurement& r, double seconds) {
  if (!host_cpu().has("avx512bf16")) {
    r.note = "no AVX512-BF16 on this CPU";
    return;
  }
  alignas(64) unsigned char in[192] = {};
  for (int i = 0; i < 64; ++i) reinterpret_cast<uint16_t*>(in)[i] = 0x3c80;  // bf16 1/64
  const float s = 0.5f;
  std::memcpy(in + 128, &s, sizeof s);
  measure_kernel(r, compiled("bf16_dot"), in, 64 * sizeof(float), 64.0 * chains(), seconds);
  r.note = cat(chains(), " chains of vdpbf16ps zmm (llvm.x86.avx512bf16.dpbf16ps.512)");
}

// The AMX peaks: `kernel` (amx_kernel: 4 tile products an iteration) on tiles whose operands
// `fill` sets; `ops` per iteration. Palette 1; tiles 0-7: 16 rows of 64 bytes.
void measure_amx(PeakMeasurement& r, double seconds, const char* feature, const char* kernel,
                 void (*fill)(unsigned char* data, size_t bytes), double ops, const char* note) {
  if (!host_cpu().has(feature) || !host_cpu().has("amx-tile")) {
    r.note = "no AMX on this CPU";
    return;
  }
  if (!amx_permitted()) {
    r.note = "the kernel refused AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM failed)";
    return;
  }
  auto in = buffer(64 + 4 * 1024);
  unsigned char* cfg = reinterpret_cast<unsigned char*>(in.get());
  std::memset(cfg, 0, 64);  // reserved bytes must be zero
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    uint16_t colsb = 64;
    std::memcpy(cfg + 16 + 2 * t, &colsb, 2);
    cfg[48 + t] = 16;
  }
  fill(reinterpret_cast<unsigned char*>(in.get()) + 64, 4 * 1024);
  measure_kernel(r, compiled(kernel), in.get(), 4 * 1024, ops, seconds);
  r.note = note;
}

void measure_amx_bf16(PeakMeasurement& r, double seconds) {
  auto fill = [](unsigned char* data, size_t bytes) {  // bf16 1/64: small, finite sums
    for (size_t i = 0; i < bytes / 2; ++i) reinterpret_cast<uint16_t*>(data)[i] = 0x3c80;
  };
  measure_amx(r, seconds, "amx-bf16", "amx_bf16", fill, 4 * 2.0 * 16 * 16 * 32, "4 accumulator tiles of tdpbf16ps 16x16x32");
}

void measure_amx_int8(PeakMeasurement& r, double seconds) {
  auto fill = [](unsigned char* data, size_t bytes) {  // int8 ones: sums grow by 64 per tdpbssd, far from overflow
    std::memset(data, 1, bytes);
  };
  measure_amx(r, seconds, "amx-int8", "amx_int8", fill, 4 * 2.0 * 16 * 16 * 64,
              "4 accumulator tiles of tdpbssd 16x16x64 (integer ops)");
}

// memcpy of a buffer 8x the size of a large L3, split between the threads: GB/s counting the
// bytes read and the bytes written (the STREAM convention).
void measure_copy(PeakMeasurement& r, double seconds) {
  const size_t bytes = size_t(256) << 20;
  auto src = buffer(bytes), dst = buffer(bytes);
  std::vector<int> cpus = core_cpus();
  auto rate = [&](const std::vector<int>& use) {
    const size_t chunk = bytes / use.size();
    auto work = [&](int t, int64_t units) {
      for (int64_t u = 0; u < units; ++u) std::memcpy(dst.get() + t * chunk, src.get() + t * chunk, chunk);
    };
    return best_rate(use, work, seconds) * 2.0 * chunk / 1e9;
  };
  r.single = rate({cpus[0]});
  r.all = rate(cpus);
  r.threads = static_cast<int>(cpus.size());
  r.available = true;
  r.note = "memcpy of 256 MiB (split between the threads); bytes read + bytes written";
}

}  // namespace

std::vector<std::string> peak_names() { return {"f32_fma", "bf16_dot", "amx_bf16", "amx_int8", "copy"}; }

PeakMeasurement measure_peak(const std::string& name, double seconds) {
  if (!(seconds > 0 && seconds <= 10)) throw UserError(cat("peak seconds must be in (0, 10], got ", seconds));
  PeakMeasurement r;
  r.name = name;
  r.unit = name == "copy" ? "GB/s" : name == "amx_int8" ? "GOP/s" : "GFLOP/s";
  r.threads = static_cast<int>(core_cpus().size());
  if (name == "f32_fma") measure_f32_fma(r, seconds);
  else if (name == "bf16_dot") measure_bf16_dot(r, seconds);
  else if (name == "amx_bf16") measure_amx_bf16(r, seconds);
  else if (name == "amx_int8") measure_amx_int8(r, seconds);
  else if (name == "copy") measure_copy(r, seconds);
  else throw UserError(cat("unknown peak '", name, "' (known: f32_fma, bf16_dot, amx_bf16, amx_int8, copy)"));
  return r;
}

std::string peak_kernel_assembly(const std::string& name) {
  KernelModule k = build_kernel(name);
  std::string features = host_cpu().feature_string();
  if (!k.needs.empty()) features += "," + k.needs;  // the later entry of a feature wins
  for (llvm::Function& f : *k.module) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", host_cpu().name);
    f.addFnAttr("target-features", features);
  }
  k.module->setTargetTriple(llvm::Triple(host_cpu().triple));
  std::string ir;
  llvm::raw_string_ostream os(ir);
  k.module->print(os, nullptr);
  return emit_assembly(ir);
}

}  // namespace coopjit
