// The x86 back end: an O3 pipeline with the host TargetMachine, then ORC LLJIT; and assembly
// text on demand for kernel.source("asm").
#pragma once

#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

namespace coopjit {

struct JitResult {
  void* entry = nullptr;
  std::string optimized_ir;  // the LLVM IR after the O3 pipeline
};

/// Optimizes `module` for the host and adds it to the process's JIT; returns the address of
/// `symbol`. Thread-safe.
JitResult jit_compile(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> ctx,
                      const std::string& symbol);

/// Assembly of a module given as LLVM IR text, for the host CPU.
std::string emit_assembly(const std::string& llvm_ir);

}  // namespace coopjit
