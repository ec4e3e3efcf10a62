// The x86 back end (cpu_jit.h).
#include "target/cpu_jit.h"

#include <atomic>
#include <mutex>

#include <llvm/AsmParser/Parser.h>
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
#include "target/cpu_info.h"

namespace coopjit {
namespace {

std::string to_string(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return s;
}

llvm::orc::JITTargetMachineBuilder host_machine() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
  const CpuInfo& cpu = host_cpu();
  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(cpu.triple)};
  jtmb.setCPU(cpu.name);
  std::vector<std::string> feats;
  for (const auto& [k, v] : cpu.features) feats.push_back((v ? "+" : "-") + k);
  jtmb.addFeatures(feats);
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  return jtmb;
}

std::unique_ptr<llvm::TargetMachine> target_machine() {
  auto tm = host_machine().createTargetMachine();
  if (!tm) throw InternalError("cannot create the host TargetMachine: " + to_string(tm.takeError()));
  return std::move(*tm);
}

llvm::orc::LLJIT& jit() {
  static std::unique_ptr<llvm::orc::LLJIT> instance = [] {
    auto j = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(host_machine()).create();
    if (!j) throw InternalError("cannot create the ORC LLJIT: " + to_string(j.takeError()));
    // Kernels may call runtime helpers LLVM emits on its own (for example __truncdfhf2): resolve
    // them from the process (libgcc, libm).
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess((*j)->getDataLayout().getGlobalPrefix());
    if (!gen) throw InternalError("cannot search the process for symbols: " + to_string(gen.takeError()));
    (*j)->getMainJITDylib().addGenerator(std::move(*gen));
    return std::move(*j);
  }();
  return *instance;
}

void optimize(llvm::Module& m, llvm::TargetMachine& tm) {
  const CpuInfo& cpu = host_cpu();
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

}  // namespace

JitResult jit_compile(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> ctx,
                      const std::string& symbol) {
  auto tm = target_machine();
  module->setDataLayout(tm->createDataLayout());
  module->setTargetTriple(tm->getTargetTriple());
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(*module, &es)) throw InternalError("the lowering produced invalid LLVM IR: " + err);
  optimize(*module, *tm);
  JitResult r;
  llvm::raw_string_ostream os(r.optimized_ir);
  module->print(os, nullptr);
  {
    llvm::SmallString<16384> obj;
    llvm::raw_svector_ostream objs(obj);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, objs, nullptr, llvm::CodeGenFileType::ObjectFile))
      throw InternalError("the host TargetMachine cannot emit an object file");
    pm.run(*module);
    r.object.assign(obj.begin(), obj.end());
  }
  module.reset();  // before its context
  ctx.reset();
  r.entry = jit_load_object(r.object, symbol);
  return r;
}

void* jit_load_object(const std::string& object, const std::string& symbol) {
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

std::string emit_assembly(const std::string& llvm_ir) {
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic diag;
  auto m = llvm::parseAssemblyString(llvm_ir, diag, ctx);
  if (!m) throw InternalError("cannot re-parse the kernel's LLVM IR: " + diag.getMessage().str());
  auto tm = target_machine();
  llvm::SmallString<4096> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    throw InternalError("the host TargetMachine cannot emit assembly");
  pm.run(*m);
  return std::string(out.str());
}

}  // namespace coopjit
