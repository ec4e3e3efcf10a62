// GEMM launch on the CPU (gemm.h).
#include "runtime/gemm.h"

#include "build/gemm_recipe.h"
#include "core/error.h"
#include "target/cpu_info.h"

namespace coopjit {

GemmKernel gemm_kernel(const GemmSpec& spec, const PlanOverrides& overrides) {
  const CpuInfo& cpu = host_cpu();
  CpuTargetInfo t{cpu.vector_bytes, cpu.vector_registers};
  GemmKernel k{spec, plan_gemm(spec, t, overrides), nullptr};
  GemmPlan plan = k.plan;
  k.code = cached_kernel(plan.key(), [plan](const std::string& symbol) { return build_gemm(plan, symbol); });
  return k;
}

void run_gemm(const GemmKernel& k, const GemmSpec& spec, const void* a, const void* b, void* c, double alpha,
              double beta) {
  GemmArgs g = gemm_args(spec, k.plan);
  if (g.M == 0 || g.N == 0) return;
  const void* ka = g.swap_ab ? b : a;
  const void* kb = g.swap_ab ? a : b;
  void* ptrs[3] = {const_cast<void*>(ka), const_cast<void*>(kb), c};
  int64_t ints[11] = {g.M, g.N, g.K, g.sa_r, g.sa_c, g.sb_r, g.sb_c, g.sc_r, g.sc_c, 0, g.tiles()};
  double fps[2] = {alpha, beta};
  k.code->entry(ptrs, ints, fps);
}

}  // namespace coopjit
