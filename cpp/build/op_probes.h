// Operation probes: for each operation of SPV_NV_cooperative_matrix2 (seeds/002) and HLSL 0035
// (seeds/003) that the kernel IR expresses, a tiny kernel that uses it, so that whether a target
// supports the operation is answered by its lowering itself (coopjit.conformance compiles each
// probe for the CPU, SPIR-V and NVPTX; the README's operation table is checked against that).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace coopjit {

/// The probes' names, in the order of the documents.
const std::vector<std::string>& op_probe_names();

/// The kernel of probe `name` for subgroup size `subgroup_size` (16 for the CPU and SPIR-V, 32 for
/// NVIDIA); UserError for an unknown name.
std::unique_ptr<ir::Function> build_op_probe(const std::string& name, int subgroup_size);

}  // namespace coopjit
