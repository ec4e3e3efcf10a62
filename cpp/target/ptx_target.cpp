// PTX out of LLVM (ptx_target.h): the NVPTX TargetMachine, the O3 pipeline and the backend.
#include "target/ptx_target.h"

#include <mutex>

#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include "core/error.h"
#include "core/xxh64.h"
#include "runtime/disk_cache.h"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace coopjit {
namespace {

void init_nvptx() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

[[noreturn]] void throw_nvptx_error(void*, const char* reason, bool) {
  throw InternalError(cat("LLVM's NVPTX backend failed: ", reason));
}

}  // namespace

int min_ptx_version_for_sm(const std::string& sm) {
  const int n = sm.size() > 3 ? std::atoi(sm.c_str() + 3) : 0;
  if (n >= 120) return 87;
  if (n >= 100) return 86;
  if (n >= 90) return sm.back() == 'a' ? 80 : 78;  // sm_90a (wgmma, setmaxnreg): PTX ISA 8.0
  if (n >= 89) return 78;
  if (n >= 87) return 74;
  if (n >= 86) return 71;
  return 70;
}

int max_ptx_version_for_driver(int driver) {
  const int major = driver / 1000, minor = (driver % 1000) / 10;
  if (major >= 13) return 90 + minor;
  if (major == 12) return minor >= 9 ? 88 : 80 + minor;
  if (major == 11) return 70 + minor;
  return 0;
}

PtxResult compile_ptx(llvm::Module& module, const PtxOptions& o) {
  init_nvptx();
  static std::mutex mu;  // one backend run at a time (option state, as for SPIR-V)
  std::lock_guard<std::mutex> lock(mu);
  const llvm::Triple triple(kNvptxTriple);
  module.setTargetTriple(triple);
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) throw InternalError("LLVM has no NVPTX target: " + err);
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;  // a * b + c may become an fma
  const std::string features = o.ptx_version > 0 ? cat("+ptx", o.ptx_version) : std::string();
  const llvm::CodeGenOptLevel cg = o.opt_level == 0   ? llvm::CodeGenOptLevel::None
                                   : o.opt_level == 1 ? llvm::CodeGenOptLevel::Less
                                   : o.opt_level == 2 ? llvm::CodeGenOptLevel::Default
                                                      : llvm::CodeGenOptLevel::Aggressive;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, o.sm, features, options, std::nullopt, std::nullopt, cg));
  if (!tm) throw InternalError(cat("cannot create the NVPTX TargetMachine for ", o.sm));
  module.setDataLayout(tm->createDataLayout());
  std::string verr;
  llvm::raw_string_ostream vos(verr);
  if (llvm::verifyModule(module, &vos)) throw InternalError("the NVPTX module is invalid: " + verr);
  if (o.opt_level > 0) {
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = false;  // a lane is scalar; the SIMT lowering writes its vectors
    pto.SLPVectorization = false;
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm.get(), pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(o.opt_level == 1   ? llvm::OptimizationLevel::O1
                                     : o.opt_level == 2 ? llvm::OptimizationLevel::O2
                                                        : llvm::OptimizationLevel::O3)
        .run(module, mam);
  }
  PtxResult r;
  llvm::raw_string_ostream ir(r.optimized_ir);
  module.print(ir, nullptr);
  llvm::SmallString<65536> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    throw InternalError("the NVPTX TargetMachine cannot emit PTX");
  {
    llvm::ScopedFatalErrorHandler on_fatal(&throw_nvptx_error, nullptr);
    pm.run(module);
  }
  r.ptx.assign(out.begin(), out.end());
  return r;
}

PtxResult compile_ptx_ir(const std::string& llvm_ir, const PtxOptions& options) {
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(llvm_ir, diag, ctx);
  if (!m) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    diag.print("kernel.ll", os, false);
    throw UserError("cannot parse the LLVM IR: " + msg);
  }
  return compile_ptx(*m, options);
}

namespace {
std::mutex cache_mu;
PtxCacheStats cache_stats;

bool load_ptx_entry(const std::string& key, PtxResult& r) {
  auto e = disk_cache::load("ptx", key);
  if (!e || !e->blobs.count("ptx")) return false;
  r.ptx = e->blobs["ptx"];
  r.optimized_ir = e->blobs["llvm"];
  return true;
}
}  // namespace

PtxResult cached_ptx(const std::string& llvm_ir, const PtxOptions& o) {
  const std::string key = cat("ptx ", o.sm, " isa ", o.ptx_version, " O", o.opt_level, " ir ", xxh64_hex(llvm_ir, 0),
                              xxh64_hex(llvm_ir, 1), ":", llvm_ir.size());
  PtxResult r;
  bool from_disk = load_ptx_entry(key, r);
  if (!from_disk) {
    disk_cache::CompileLock lock("ptx", key, disk_cache::lock_timeout());
    from_disk = lock.held() && load_ptx_entry(key, r);
    if (!from_disk) {
      r = compile_ptx_ir(llvm_ir, o);
      disk_cache::store("ptx", key, {{{"kind", "PTX module"}, {"target", o.sm}}, {{"ptx", r.ptx}, {"llvm", r.optimized_ir}}});
    }
  }
  std::lock_guard<std::mutex> g(cache_mu);
  ++(from_disk ? cache_stats.disk_loads : cache_stats.compiles);
  return r;
}

PtxCacheStats ptx_cache_stats() {
  std::lock_guard<std::mutex> g(cache_mu);
  return cache_stats;
}

}  // namespace coopjit
