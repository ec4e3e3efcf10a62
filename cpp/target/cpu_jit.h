// The x86 back end: an O3 pipeline with the host TargetMachine, codegen to an ELF object, and
// the object linked into the process by ORC LLJIT (the same object is what the disk cache
// stores, so a later process links it without running LLVM's codegen); and assembly text on
// demand for kernel.source("asm").
#pragma once

#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

namespace coopjit {

struct JitResult {
  void* entry = nullptr;
  std::string optimized_ir;  // the LLVM IR after the O3 pipeline
  std::string object;        // the relocatable object the entry was linked from
};

/// Optimizes `module` for the host, compiles it to an object and links that into the process's
/// JIT; returns the address of `symbol`. Thread-safe.
JitResult jit_compile(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> ctx,
                      const std::string& symbol);

/// Links an object made by jit_compile (in this or an earlier process) into the JIT, each in a
/// library of its own, and returns the address of `symbol`; no code generation. Thread-safe.
void* jit_load_object(const std::string& object, const std::string& symbol);

/// Assembly of a module given as LLVM IR text, for the host CPU.
std::string emit_assembly(const std::string& llvm_ir);

struct CpuInfo;
/// Optimizes `module` as jit_compile does but for `cpu` (any x86 CPU LLVM knows: cpu_info_for),
/// and returns its assembly (and the optimized IR); nothing is linked or run.
std::string compile_assembly(std::unique_ptr<llvm::Module> module, const CpuInfo& cpu, std::string& optimized_ir);

}  // namespace coopjit
