// The SIMD lowering: kernel IR -> LLVM IR for a CPU. A subgroup is one vector register of S
// lanes (the function's subgroup_size); matrices of use b and acc live as rows of S-lane
// vectors, matrices of use a as scalars that mul_add broadcasts (an outer-product microkernel).
#pragma once

#include <memory>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "ir/ir.h"
#include "target/cpu_info.h"

namespace coopjit {

/// Lowers `f` into a new module holding `void f.name(ptr ptrs, ptr ints, ptr fps)`: parameter
/// i of f is read from the next slot of ptrs (pointers), ints (index and integers, as int64) or
/// fps (floats, as double), in parameter order. `cpu` is the CPU the code is for: the
/// instructions the lowering picks (the dot products, vrange) are those it has.
std::unique_ptr<llvm::Module> lower_simd(const ir::Function& f, llvm::LLVMContext& ctx, const CpuInfo& cpu = host_cpu());

}  // namespace coopjit
