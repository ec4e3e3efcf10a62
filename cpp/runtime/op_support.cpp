// Operation support by target (op_support.h).
#include "runtime/op_support.h"

#include "build/op_probes.h"
#include "core/error.h"
#include "runtime/device_program.h"
#include "runtime/kernel.h"

namespace coopjit {

std::string op_support(const std::string& probe, const std::string& target) {
  if (target != "cpu" && target != "spirv" && target != "ptx")
    throw UserError(cat("unknown target '", target, "' (known: cpu, spirv, ptx)"));
  auto f = build_op_probe(probe, target == "ptx" ? 32 : 16);  // NVIDIA: warps of 32
  f->name = "probe_" + probe;
  try {
    if (target == "cpu")
      cached_kernel(*f);
    else
      device_program(target == "ptx" ? "target:sm_90" : "target:generic", *f);
  } catch (const UserError& e) {  // the verifier's or a lowering's refusal
    return e.what();
  }
  return "";
}

}  // namespace coopjit
