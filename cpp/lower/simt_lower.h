// The SIMT lowering: kernel IR -> LLVM IR of one OpenCL kernel for spirv64, written per
// work-item. A subgroup-scope coopmatrix is spread over the lanes of a subgroup exactly as the
// coopmatrix layout of seeds/001 says (cpp/layout/coopmatrix_layout.h: I, J, K1, K2, V, omega,
// VNNI): each work-item holds its V (x omega) components. Scalars are uniform per subgroup;
// mul_add, reductions and use changes move components between lanes with subgroup broadcasts and
// shuffles (SPV_INTEL_subgroups); loads and stores follow the seeds' SIMT pseudo-code.
#pragma once

#include <array>
#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "ir/ir.h"

namespace coopjit {

/// Lowers `f` into a new spirv64 module holding the OpenCL kernel `f.name` (spir_kernel calling
/// convention). Kernel parameter i is IR parameter i: pointers as global (addrspace 1) pointers,
/// index as i64, integers as their width, f32 / f64 as float / double, f16 / bf16 as float.
/// The function's attribute "subgroup_size" (required) becomes the kernel's required subgroup
/// size; "subgroups_per_group" (default 1), the required work-group size; "dpas" and "block2d"
/// (0 off, default; 1 on: OpSubgroupMatrixMultiplyAccumulateINTEL / SPV_INTEL_2d_block_io where the
/// operands allow; 2: the same operands, the instructions emulated per their specification, so the
/// module runs on devices without them). Throws UserError for an
/// operation or matrix the SIMT lowering does not support (naming it), InternalError for a
/// broken invariant.
///
/// `target`: "spirv64" (the default), or "nvptx64:sm_XX" for NVIDIA GPUs (simt_target.h): the
/// same lowering for PTX kernels (ptx_kernel calling convention) in warps of 32 lanes; there the
/// Intel-only operations (dpas, block2d, block reads) are refused or not used.
std::unique_ptr<llvm::Module> lower_simt(const ir::Function& f, llvm::LLVMContext& ctx,
                                         const std::string& target = "spirv64");

/// The launch shape lower_simt() gives a function: subgroup size and work-group size (work-items).
struct SimtShape {
  int subgroup_size = 16;
  int work_group_size = 16;
};
SimtShape simt_shape(const ir::Function& f);

}  // namespace coopjit
