// The x86 back end (cpu_jit.h).
#include "target/cpu_jit.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>

#include <llvm/AsmParser/Parser.h>
#include <llvm/ExecutionEngine/Orc/AbsoluteSymbols.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "core/error.h"
#include "runtime/fork.h"
#include "target/amx_emulation.h"
#include "target/cpu_info.h"

namespace coopjit {
namespace {

std::string to_string(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return s;
}

llvm::orc::JITTargetMachineBuilder host_machine(const CpuInfo& cpu = host_cpu()) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(cpu.triple)};
  jtmb.setCPU(cpu.name);
  std::vector<std::string> feats;
  for (const auto& [k, v] : cpu.features) feats.push_back((v ? "+" : "-") + k);
  jtmb.addFeatures(feats);
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  return jtmb;
}

std::unique_ptr<llvm::TargetMachine> target_machine(const CpuInfo& cpu = host_cpu()) {
  auto tm = host_machine(cpu).createTargetMachine();
  if (!tm) throw InternalError("cannot create the host TargetMachine: " + to_string(tm.takeError()));
  return std::move(*tm);
}

// bf16 rounding helpers LLVM calls where the CPU has no instruction for it (without
// AVX512-BF16, every bfloat value that passes through a register is widened to float and
// rounded back with __truncsfbf2). libgcc 12 has none. Round to nearest even, NaN quieted; the
// result is returned, as the x86-64 psABI passes __bf16, in the low 16 bits of xmm0.
float bf16_bits_as_float(uint32_t bf16) {
  float f;
  std::memcpy(&f, &bf16, 4);
  return f;
}
uint32_t bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x40u;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
extern "C" float coopjit_truncsfbf2(float x) { return bf16_bits_as_float(bf16_round(x)); }
// From double in one rounding: to float rounding to odd (exact below float's 24 bits keeps the
// sticky information bf16's 8 bits need), then to bf16 to nearest even.
extern "C" float coopjit_truncdfbf2(double x) {
  if (std::isnan(x)) return coopjit_truncsfbf2(static_cast<float>(x));
  float f = static_cast<float>(x);
  if (static_cast<double>(f) != x && std::isfinite(x)) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u |= 1u;
    std::memcpy(&f, &u, 4);
  }
  return coopjit_truncsfbf2(f);
}

// IEEE half helpers LLVM calls where the CPU has no instruction for the conversion: f64 -> f16
// always (only AVX512-FP16 has one), f32 <-> f16 without F16C (COOPJIT_CPU_LEVEL=sse). libgcc 12
// exports none of them to the process. Each rounds once, to nearest even, straight from the
// source's bits (never through f32 first: that would round twice); NaN stays NaN (quieted, sign
// and top payload bits kept), overflow goes to infinity. Halves travel as the x86-64 psABI passes
// _Float16: the low 16 bits of xmm0.
uint16_t half_from_double_bits(uint64_t u) {
  const uint16_t sign = static_cast<uint16_t>((u >> 48) & 0x8000u);
  const uint64_t a = u & 0x7FFFFFFFFFFFFFFFull;
  if (a > 0x7FF0000000000000ull) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 42) & 0x1FFu));
  if (a == 0x7FF0000000000000ull) return static_cast<uint16_t>(sign | 0x7C00u);
  const int e = static_cast<int>(a >> 52) - 1023;
  if (e > 15) return static_cast<uint16_t>(sign | 0x7C00u);
  uint64_t sig = a & ((1ull << 52) - 1);
  int shift;  // bits of sig below the half's last mantissa bit
  uint64_t base;
  if (e >= -14) {  // normal: 10 mantissa bits kept
    shift = 42;
    base = static_cast<uint64_t>(e + 15) << 10;
  } else {  // subnormal (or zero): multiples of 2^-24
    if (a == 0) return sign;
    sig |= 1ull << 52;  // the implicit bit; the value is sig * 2^(e - 52)
    shift = 28 - e;     // sig >> shift counts units of 2^-24
    base = 0;
    if (shift >= 64) return sign;  // below 2^-25: rounds to zero
  }
  const uint64_t q = sig >> shift, rem = sig & ((1ull << shift) - 1), halfway = 1ull << (shift - 1);
  uint64_t r = base + q;  // a mantissa carry moves into the exponent (up to infinity), as it should
  if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}
float half_bits_as_float(uint16_t h) {
  uint32_t u = h;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
extern "C" float coopjit_truncdfhf2(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  return half_bits_as_float(half_from_double_bits(u));
}
extern "C" float coopjit_truncsfhf2(float x) { return coopjit_truncdfhf2(static_cast<double>(x)); }  // exact widening
extern "C" float coopjit_extendhfsf2(float h_in_low_bits) {
  uint32_t u;
  std::memcpy(&u, &h_in_low_bits, 4);
  const uint32_t h = u & 0xFFFFu, sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  float f;
  if (e == 0x1F) {
    u = sign | 0x7F800000u | (m << 13);
  } else if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float
    f = std::ldexp(static_cast<float>(m), -24);
    std::memcpy(&u, &f, 4);
    u |= sign;
  } else {
    u = sign | ((e + 112) << 23) | (m << 13);
  }
  std::memcpy(&f, &u, 4);
  return f;
}

// Held while the JIT is created or links an object, and across fork() (runtime/fork.h), so that a
// child never inherits the ORC session halfway through a link.
std::mutex& jit_mutex() {
  static std::mutex m;
  return m;
}

llvm::orc::LLJIT& jit() {
  static std::unique_ptr<llvm::orc::LLJIT> instance = [] {
    auto j = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(host_machine()).create();
    if (!j) throw InternalError("cannot create the ORC LLJIT: " + to_string(j.takeError()));
    // Kernels may call runtime helpers LLVM emits on its own (libm's functions): resolve them
    // from the process; the conversion helpers libgcc 12 lacks are defined below.
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess((*j)->getDataLayout().getGlobalPrefix());
    if (!gen) throw InternalError("cannot search the process for symbols: " + to_string(gen.takeError()));
    (*j)->getMainJITDylib().addGenerator(std::move(*gen));
    llvm::orc::SymbolMap helpers;
    const auto flags = llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable;
    helpers[(*j)->mangleAndIntern("__truncsfbf2")] = {llvm::orc::ExecutorAddr::fromPtr(&coopjit_truncsfbf2), flags};
    helpers[(*j)->mangleAndIntern("__truncdfbf2")] = {llvm::orc::ExecutorAddr::fromPtr(&coopjit_truncdfbf2), flags};
    helpers[(*j)->mangleAndIntern("__truncdfhf2")] = {llvm::orc::ExecutorAddr::fromPtr(&coopjit_truncdfhf2), flags};
    helpers[(*j)->mangleAndIntern("__truncsfhf2")] = {llvm::orc::ExecutorAddr::fromPtr(&coopjit_truncsfhf2), flags};
    helpers[(*j)->mangleAndIntern("__extendhfsf2")] = {llvm::orc::ExecutorAddr::fromPtr(&coopjit_extendhfsf2), flags};
    // Kernels built with emulated AMX tiles (plan amx=2) call this for each tile instruction.
    helpers[(*j)->mangleAndIntern(kAmxEmulationSymbol)] = {llvm::orc::ExecutorAddr::fromPtr(&coopjit_amx_tile_dp), flags};
    if (auto err = (*j)->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(helpers))))
      throw InternalError("cannot define the JIT's runtime helpers: " + to_string(std::move(err)));
    return std::move(*j);
  }();
  return *instance;
}

void optimize(llvm::Module& m, llvm::TargetMachine& tm, const CpuInfo& cpu = host_cpu()) {
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", cpu.name);
    f.addFnAttr("target-features", cpu.feature_string());
  }
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(m, mam);
}

// Verifies `module`, runs the O3 pipeline for `cpu` on it and returns its TargetMachine; the
// optimized IR as text into `optimized_ir`.
std::unique_ptr<llvm::TargetMachine> optimize_for(llvm::Module& module, const CpuInfo& cpu, std::string& optimized_ir) {
  auto tm = target_machine(cpu);
  module.setDataLayout(tm->createDataLayout());
  module.setTargetTriple(tm->getTargetTriple());
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(module, &es)) throw InternalError("the lowering produced invalid LLVM IR: " + err);
  optimize(module, *tm, cpu);
  llvm::raw_string_ostream os(optimized_ir);
  module.print(os, nullptr);
  return tm;
}

// The module's code as an object file or as assembly text.
std::string emit(llvm::Module& module, llvm::TargetMachine& tm, llvm::CodeGenFileType type) {
  llvm::SmallString<16384> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    throw InternalError(cat("the TargetMachine for ", tm.getTargetCPU().str(), " cannot emit ",
                            type == llvm::CodeGenFileType::ObjectFile ? "an object file" : "assembly"));
  pm.run(module);
  return std::string(out.begin(), out.end());
}

}  // namespace

JitResult jit_compile(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> ctx,
                      const std::string& symbol) {
  JitResult r;
  auto tm = optimize_for(*module, host_cpu(), r.optimized_ir);
  r.object = emit(*module, *tm, llvm::CodeGenFileType::ObjectFile);
  module.reset();  // before its context
  ctx.reset();
  r.entry = jit_load_object(r.object, symbol);
  return r;
}

void* jit_load_object(const std::string& object, const std::string& symbol) {
  std::lock_guard<std::mutex> lock(jit_mutex());
  auto& j = jit();
  // One library per object: a kernel linked again after cache_clear(), or objects of other
  // processes that chose the same symbol, never collide.
  static std::atomic<int64_t> serial{0};
  auto jd = j.createJITDylib("coopjit_kernel_" + std::to_string(serial++));
  if (!jd) throw InternalError("cannot create a JIT library: " + to_string(jd.takeError()));
  jd->addToLinkOrder(j.getMainJITDylib());
  auto buf = llvm::MemoryBuffer::getMemBufferCopy(object, symbol);
  if (auto e = j.addObjectFile(*jd, std::move(buf)))
    throw InternalError("cannot add the object to the JIT: " + to_string(std::move(e)));
  auto addr = j.lookup(*jd, symbol);
  if (!addr) throw InternalError("JIT lookup of " + symbol + " failed: " + to_string(addr.takeError()));
  return addr->toPtr<void*>();
}

void jit_fork(fork_safety::Phase phase) {
  if (phase == fork_safety::Phase::prepare)
    jit_mutex().lock();
  else
    jit_mutex().unlock();
}

std::string emit_assembly(const std::string& llvm_ir) {
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic diag;
  auto m = llvm::parseAssemblyString(llvm_ir, diag, ctx);
  if (!m) throw InternalError("cannot re-parse the kernel's LLVM IR: " + diag.getMessage().str());
  return emit(*m, *target_machine(), llvm::CodeGenFileType::AssemblyFile);
}

std::string compile_assembly(std::unique_ptr<llvm::Module> module, const CpuInfo& cpu, std::string& optimized_ir) {
  auto tm = optimize_for(*module, cpu, optimized_ir);
  return emit(*module, *tm, llvm::CodeGenFileType::AssemblyFile);
}

}  // namespace coopjit
