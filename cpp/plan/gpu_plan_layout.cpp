// The GPU planner's first phases (gpu_plan_internal.h): 8-bit operands copied K-major (the plan of
// the product on the copies), and the orientation by the strides with the kernel's types and unit
// strides.
#include "core/error.h"
#include "plan/gpu_plan_internal.h"

namespace coopjit {

namespace {
// Which 8-bit operands to copy K-major (GpuGemmPlan::kmajor; plan override kmajor): on sm_90, an
// unbatched int8 / uint8 product whose op(A) is contiguous along M or op(B) along N, in 16-byte
// rows (positive strides and contiguous extents multiples of 16, K too: the pipeline's conditions on the
// copy), and the other operand K-major or copied too. By default where the wgmma pipeline would
// be planned (M and N 64 or more); the product on the copies must then plan wgmma.
int kmajor_choice(const GemmSpec& spec, const GpuTargetInfo& target, const PlanOverrides& overrides) {
  auto it = overrides.find("kmajor");
  if (it != overrides.end() && it->second != 0 && it->second != 1)
    throw UserError(cat("plan override kmajor=", it->second, " must be 0 or 1"));
  if (it != overrides.end() && it->second == 0) return 0;
  auto byte = [](ir::ScalarType t) { return t == ir::ScalarType::i8 || t == ir::ScalarType::u8; };
  const bool int8 = byte(spec.a_type) && byte(spec.b_type) && spec.dtype == ir::ScalarType::i32;
  const bool a_m = spec.sa_r == 1 && spec.sa_c != 1, b_n = spec.sb_c == 1 && spec.sb_r != 1;
  const int want = (a_m ? 1 : 0) | (b_n ? 2 : 0);
  const bool a_ok = a_m ? spec.sa_c > 0 && spec.sa_c % 16 == 0 && spec.M % 16 == 0 : spec.sa_c == 1;
  const bool b_ok = b_n ? spec.sb_r > 0 && spec.sb_r % 16 == 0 && spec.N % 16 == 0 : spec.sb_r == 1;
  const bool ok = target.wgmma && int8 && want && spec.batch1 * spec.batch2 == 1 && spec.K % 16 == 0 && a_ok && b_ok;
  if (it != overrides.end()) {
    if (!ok)
      throw UserError(cat("plan override kmajor=1: the K-major copies are for int8 / uint8 products on an sm_90 target (",
                          target.device, ") whose op(A) is contiguous along M or op(B) along N, unbatched, with strides, M / N and K ",
                          "multiples of 16 (", spec.str(), ")"));
    return want;
  }
  return ok && spec.M >= 64 && spec.N >= 64 ? want : 0;
}
}  // namespace

// The plan of the product on the K-major copies, where kmajor_choice copies operands and that
// product plans the wgmma pipeline; nothing (plan this product) otherwise.
std::optional<GpuGemmPlan> plan_gpu_kmajor(const GemmSpec& spec, const GpuTargetInfo& target, const PlanOverrides& overrides) {
  if (const int km = kmajor_choice(spec, target, overrides)) {
    PlanOverrides o = overrides;
    o.erase("kmajor");
    GpuGemmPlan p = plan_gpu_gemm(kmajor_spec(spec, km), target, o);
    if (p.wgmma) {
      p.kmajor = km;
      return p;
    }
    if (overrides.count("kmajor"))
      throw UserError(cat("plan override kmajor=1: the product on the K-major copies does not plan the wgmma pipeline (", p.key(), ")"));
  }
  return std::nullopt;
}

GpuPlanContext plan_gpu_orientation(const GemmSpec& spec, const GpuTargetInfo& target, const PlanOverrides& overrides,
                                    GpuGemmPlan& p) {
  p.dtype = spec.dtype;
  p.accumulate = spec.accumulate;
  p.epilogue = spec.epilogue;
  // Layout: the lanes of a subgroup run down the kernel's rows; score each orientation by how
  // many of (C, the kernel's A) have unit stride along them.
  const int row_score = (spec.sc_r == 1) + (spec.sa_r == 1);
  const int col_score = (spec.sc_c == 1) + (spec.sb_c == 1);
  p.layout = col_score >= row_score ? "col" : "row";
  if (auto it = overrides.find("layout"); it != overrides.end()) {
    if (it->second != 0 && it->second != 1)
      throw UserError(cat("plan override layout=", it->second, " must be 0 (row) or 1 (col)"));
    p.layout = it->second ? "col" : "row";
  }
  const bool col = p.layout == "col";
  p.a_type = col ? spec.b_type : spec.a_type;
  p.b_type = col ? spec.a_type : spec.b_type;
  p.c_type = spec.c_type;
  const int64_t M = col ? spec.N : spec.M, N = col ? spec.M : spec.N;
  p.unit_a = (col ? spec.sb_c : spec.sa_r) == 1;
  p.unit_b = (col ? spec.sa_c : spec.sb_r) == 1;
  p.unit_ak = !p.unit_a && (col ? spec.sb_r : spec.sa_c) == 1;
  p.unit_c = (col ? spec.sc_c : spec.sc_r) == 1;
  return GpuPlanContext{spec, target, overrides, col, M, N};
}

}  // namespace coopjit
