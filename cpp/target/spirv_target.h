// SPIR-V out of LLVM: an llvm::Module of OpenCL kernels (triple spirv64-unknown-unknown) compiled
// to a SPIR-V binary by LLVM 22's SPIR-V backend with an explicit list of SPIR-V extensions and FP
// contraction enabled. No LLVM types cross this header (llvm::Module is only forward-declared),
// so the Python bindings can include it.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

namespace llvm {
class Function;
class Module;
}  // namespace llvm

namespace coopjit {

/// The triple every SPIR-V module is compiled for: 64-bit pointers, OpenCL kernels, SPIR-V 1.4
/// (LLVM's default version, which Intel's GPU driver and CPU OpenCL runtime both accept).
inline constexpr const char* kSpirvTriple = "spirv64-unknown-unknown";

/// The SPIR-V extensions coopjit lets LLVM use, each for a reason (see spirv_target.cpp). Never
/// "all": LLVM 22 then uses SPV_KHR_float_controls2 (capability FloatControls2, execution mode
/// FPFastMathDefault), which Intel's runtimes reject.
const std::vector<std::string>& default_spirv_extensions();

/// What a kernel requires of its launch; 0 means "no requirement".
struct KernelShape {
  int subgroup_size = 0;                      // !intel_reqd_sub_group_size -> ExecutionMode SubgroupSize
  std::array<int, 3> work_group_size{0, 0, 0};  // !reqd_work_group_size -> ExecutionMode LocalSize
};

struct SpirvOptions {
  /// Extensions LLVM may use; it declares in the module only those the code needs.
  std::vector<std::string> extensions = default_spirv_extensions();
  /// 0: no IR optimization; 1..3: LLVM's O1..O3 pipeline (vectorizers off: SIMT code is scalar
  /// per work-item) with the SPIR-V TargetMachine, then codegen at the same level.
  int opt_level = 3;
  /// Kernels to mark with mark_spirv_kernel() before compiling, by function name.
  std::map<std::string, KernelShape> kernel_shapes;
};

struct SpirvResult {
  std::string binary;        // the SPIR-V module: little-endian 32-bit words
  std::string optimized_ir;  // the LLVM IR handed to the SPIR-V backend
};

/// Compiles the OpenCL kernels of `module` to SPIR-V. An empty triple becomes kSpirvTriple; any
/// other architecture than spirv64 is refused. Marks options.kernel_shapes and adds
/// !opencl.enable.FP_CONTRACT (so the backend emits no ContractionOff) when missing; the IR
/// pipeline and the backend run in a forked child (see spirv_target.cpp: LLVM 22's backend keeps
/// state between modules), so `module` is not optimized in place. Thread-safe (LLVM's extension
/// list is process-global, so compilations are serialized). Throws UserError for an unknown
/// extension or "all", InternalError if the module is invalid or the backend fails (including
/// LLVM's fatal errors, such as an instruction that needs an extension outside the list).
SpirvResult compile_spirv(llvm::Module& module, const SpirvOptions& options = {});

/// The same for a module given as LLVM IR text (tests, the bindings, debugging).
SpirvResult compile_spirv_ir(const std::string& llvm_ir, const SpirvOptions& options = {});

/// Makes `kernel` an OpenCL kernel entry point (spir_kernel calling convention) and attaches
/// the metadata the SPIR-V backend turns into execution modes.
void mark_spirv_kernel(llvm::Function& kernel, const KernelShape& shape);

}  // namespace coopjit
