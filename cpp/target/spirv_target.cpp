// SPIR-V out of LLVM (spirv_target.h): the extension list, the SPIR-V TargetMachine, an IR
// pipeline and LLVM's SPIR-V backend writing the binary.
#include "target/spirv_target.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <iostream>
#include <cctype>
#include <mutex>

#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include "core/error.h"
#include "runtime/fork.h"
#include "runtime/kernel.h"
#include "target/spirv_tools.h"

namespace coopjit {

const std::vector<std::string>& default_spirv_extensions() {
  static const std::vector<std::string> list = {
      "SPV_INTEL_subgroups",                // intel_sub_group_shuffle*, block reads/writes
      "SPV_INTEL_bfloat16_conversion",      // f32 <-> bf16 conversions
      "SPV_INTEL_subgroup_matrix_multiply_accumulate",  // DPAS on Intel GPUs (used only when asked)
      "SPV_INTEL_2d_block_io",              // 2-D block loads / stores / prefetches (used only when asked)
      "SPV_KHR_no_integer_wrap_decoration", // nsw/nuw kept as decorations
      "SPV_KHR_expect_assume",              // llvm.assume / llvm.expect kept, not dropped
  };
  return list;
}

namespace {

std::mutex& backend_mutex() {
  static std::mutex m;
  return m;
}

void init_spirv_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeSPIRVTargetInfo();
    LLVMInitializeSPIRVTarget();
    LLVMInitializeSPIRVTargetMC();
    LLVMInitializeSPIRVAsmPrinter();
  });
}

/// LLVM 22 reads the allowed extensions from its "spirv-ext" option when the SPIR-V subtarget is
/// built (with the TargetMachine). Each occurrence replaces the whole set, so the list is exactly
/// the one given. Called with backend_mutex() held.
void set_llvm_extensions(const std::vector<std::string>& extensions) {
  std::string value;
  for (const std::string& e : extensions) {
    bool ok = e.size() > 4 && e.compare(0, 4, "SPV_") == 0;
    for (char c : e) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!ok)
      throw UserError(cat("SPIR-V extension '", e, "' is not a single SPV_* name (lists such as \"all\" are refused: coopjit names every extension it allows)"));
    value += (value.empty() ? "+" : ",+") + e;
  }
  auto& options = llvm::cl::getRegisteredOptions();
  auto it = options.find("spirv-ext");
  if (it == options.end())
    throw InternalError("LLVM has no spirv-ext option: is this LLVM 22 with the SPIR-V target?");
  llvm::cl::Option* opt = it->second;
  opt->reset();
  if (opt->addOccurrence(0, "spirv-ext", value))
    throw UserError(cat("LLVM ", LLVM_VERSION_STRING, " refuses the SPIR-V extension list ", value,
                        " (see the message above: an unknown extension name)"));
}

[[noreturn]] void throw_backend_error(void*, const char* reason, bool) {
  throw InternalError(cat("LLVM's SPIR-V backend failed: ", reason,
                          " (the module may need a SPIR-V extension that is not in the allowed list)"));
}

llvm::CodeGenOptLevel codegen_level(int opt_level) {
  switch (opt_level) {
    case 0: return llvm::CodeGenOptLevel::None;
    case 1: return llvm::CodeGenOptLevel::Less;
    case 2: return llvm::CodeGenOptLevel::Default;
    default: return llvm::CodeGenOptLevel::Aggressive;
  }
}

std::unique_ptr<llvm::TargetMachine> spirv_machine(const llvm::Triple& triple, int opt_level) {
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) throw InternalError("LLVM has no SPIR-V target: " + err);
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;  // FP contraction: a * b + c may become an fma
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, "", "", options, std::nullopt, std::nullopt, codegen_level(opt_level)));
  if (!tm) throw InternalError("cannot create the SPIR-V TargetMachine for " + triple.str());
  return tm;
}

void optimize(llvm::Module& m, llvm::TargetMachine& tm, int opt_level) {
  llvm::OptimizationLevel level = opt_level == 1   ? llvm::OptimizationLevel::O1
                                  : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                   : llvm::OptimizationLevel::O3;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = false;  // a work-item is scalar; the SIMT lowering writes its vectors
  pto.SLPVectorization = false;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(level).run(m, mam);
}

SpirvResult codegen(llvm::Module& module, const llvm::Triple& triple, const SpirvOptions& options) {
  set_llvm_extensions(options.extensions);
  auto tm = spirv_machine(triple, options.opt_level);
  module.setDataLayout(tm->createDataLayout());
  if (options.opt_level > 0) optimize(module, *tm, options.opt_level);

  SpirvResult r;
  llvm::raw_string_ostream ir(r.optimized_ir);
  module.print(ir, nullptr);

  llvm::SmallString<16384> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    throw InternalError("the SPIR-V TargetMachine cannot emit an object file");
  {
    // The SPIR-V backend reports what it cannot write (an instruction that needs an extension
    // outside the list, say) with report_fatal_error, which would end the process: turn it into
    // an exception (LLVM's frames are left without cleanup; the module is discarded).
    llvm::ScopedFatalErrorHandler on_fatal(&throw_backend_error, nullptr);
    pm.run(module);
  }
  r.binary.assign(out.begin(), out.end());
  if (r.binary.size() < 20 || r.binary.size() % 4 != 0 || r.binary.compare(0, 4, "\x03\x02\x23\x07") != 0)
    throw InternalError(cat("the SPIR-V backend wrote no valid module (", r.binary.size(), " bytes)"));
  return r;
}

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

/// Runs `fn` in a forked child and brings back its result, or its exception as UserError /
/// InternalError; a child that dies (LLVM calling exit or abort) is an InternalError.
SpirvResult run_in_child(const std::function<SpirvResult()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) throw InternalError(cat("compile_spirv: pipe failed: ", std::strerror(errno)));
  pid_t pid;
  {
    fork_safety::InternalFork internal;  // the child only runs the backend: coopjit's fork handlers stay out
    pid = ::fork();
  }
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw InternalError(cat("compile_spirv: fork failed: ", std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    try {
      SpirvResult r = fn();
      uint64_t n = r.binary.size();
      out = "O" + std::string(reinterpret_cast<const char*>(&n), sizeof n) + r.binary + r.optimized_ir;
    } catch (const UserError& e) {
      out = std::string("U") + e.what();
    } catch (const std::exception& e) {
      out = std::string("I") + e.what();
    } catch (...) {
      out = "Iunknown exception";
    }
    write_all(fds[1], out);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string in;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (in.empty())
    throw InternalError(cat("LLVM's SPIR-V backend ended its process (",
                            WIFSIGNALED(status) ? cat("signal ", WTERMSIG(status)) : cat("exit ", WEXITSTATUS(status)),
                            "; see its message on stderr)"));
  if (in[0] == 'U') throw UserError(in.substr(1));
  if (in[0] != 'O' || in.size() < 1 + sizeof(uint64_t)) throw InternalError(in.substr(1));
  uint64_t n = 0;
  std::memcpy(&n, in.data() + 1, sizeof n);
  SpirvResult r;
  r.binary = in.substr(1 + sizeof n, n);
  r.optimized_ir = in.substr(1 + sizeof n + n);
  return r;
}

}  // namespace

SpirvResult compile_spirv(llvm::Module& module, const SpirvOptions& options) {
  std::lock_guard<std::mutex> lock(backend_mutex());
  init_spirv_target();
  if (module.getTargetTriple().str().empty()) module.setTargetTriple(llvm::Triple(kSpirvTriple));
  const llvm::Triple triple = module.getTargetTriple();
  if (triple.getArch() != llvm::Triple::spirv64)
    throw InternalError(cat("compile_spirv: module '", module.getModuleIdentifier(), "' has triple ",
                            triple.str(), ", not spirv64"));
  for (const auto& [name, shape] : options.kernel_shapes) {
    llvm::Function* f = module.getFunction(name);
    if (!f || f->isDeclaration())
      throw UserError(cat("compile_spirv: no kernel '", name, "' defined in module '", module.getModuleIdentifier(), "'"));
    mark_spirv_kernel(*f, shape);
  }
  if (!module.getNamedMetadata("opencl.enable.FP_CONTRACT"))
    module.getOrInsertNamedMetadata("opencl.enable.FP_CONTRACT");

  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(module, &es)) throw InternalError("invalid LLVM IR for SPIR-V: " + err);

  // In a child process: LLVM 22's SPIR-V backend keeps module state in a static
  // (SPIRVModuleAnalysis::MAI) that leaks from one compilation to the next, so that a process that
  // compiles many modules gets some with ids defined twice (spirv-val: "Id 2 is defined more than
  // once"; about one module in four after a few dozen). A forked child starts from the parent's
  // state, which never ran the backend. Measured cost: a few milliseconds per module.
  SpirvResult r = run_in_child([&] { return codegen(module, triple, options); });
  if (debug_enabled("llvm")) std::cerr << "[coopjit] LLVM IR for SPIR-V after O" << options.opt_level << ":\n" << r.optimized_ir;
  if (debug_enabled("spirv")) std::cerr << "[coopjit] SPIR-V:\n" << spirv_disassemble(r.binary);
  return r;
}

void spirv_backend_fork(fork_safety::Phase phase) {  // runtime/fork.h
  if (phase == fork_safety::Phase::prepare)
    backend_mutex().lock();
  else
    backend_mutex().unlock();
}

SpirvResult compile_spirv_ir(const std::string& llvm_ir, const SpirvOptions& options) {
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic diag;
  auto m = llvm::parseAssemblyString(llvm_ir, diag, ctx);
  if (!m) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    diag.print("kernel.ll", os, false);
    throw UserError("cannot parse the LLVM IR: " + msg);
  }
  return compile_spirv(*m, options);
}

void mark_spirv_kernel(llvm::Function& kernel, const KernelShape& shape) {
  llvm::LLVMContext& ctx = kernel.getContext();
  auto i32 = [&](int v) {
    return llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), v));
  };
  kernel.setCallingConv(llvm::CallingConv::SPIR_KERNEL);
  if (shape.subgroup_size > 0)
    kernel.setMetadata("intel_reqd_sub_group_size", llvm::MDNode::get(ctx, {i32(shape.subgroup_size)}));
  const auto& w = shape.work_group_size;
  if (w[0] > 0)
    kernel.setMetadata("reqd_work_group_size",
                       llvm::MDNode::get(ctx, {i32(w[0]), i32(std::max(w[1], 1)), i32(std::max(w[2], 1))}));
}

}  // namespace coopjit
