// Which targets build each operation of SPV_NV_cooperative_matrix2 and HLSL 0035: the operation's
// probe kernel (build/op_probes.h) verified, lowered and compiled for the target, all the way to
// machine code (CPU: the JIT; SPIR-V: the module, spirv-val; NVIDIA: PTX from the NVPTX backend).
// The answer comes from the lowerings themselves, not from a list kept by hand; the README's
// operation table is checked against it (tests/test_conformance_table.py).
#pragma once

#include <string>

namespace coopjit {

/// "" when `target` ("cpu", "spirv" or "ptx") builds probe `probe`, else why not (the lowering's
/// or the verifier's message). UserError for an unknown probe or target.
std::string op_support(const std::string& probe, const std::string& target);

}  // namespace coopjit
