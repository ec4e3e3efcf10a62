// GEMM launch on the CPU (gemm.h).
#include "runtime/gemm.h"

#include "build/gemm_recipe.h"
#include "core/error.h"
#include "runtime/thread_pool.h"
#include "target/cpu_info.h"

#include <cstdlib>
#include <memory>
#include <vector>

namespace coopjit {

GemmKernel gemm_kernel(const GemmSpec& spec, const PlanOverrides& overrides) {
  const CpuInfo& cpu = host_cpu();
  CpuTargetInfo t{cpu.vector_bytes, cpu.vector_registers, ThreadPool::get().size()};
  GemmKernel k{spec, plan_gemm(spec, t, overrides), nullptr};
  GemmPlan plan = k.plan;
  k.code = cached_kernel(plan.key(), [plan](const std::string& symbol) { return build_gemm(plan, symbol); });
  return k;
}

void run_gemm(const GemmKernel& k, const GemmSpec& spec, const void* a, const void* b, void* c, double alpha,
              double beta) {
  GemmArgs g = gemm_args(spec, k.plan);
  if (g.M == 0 || g.N == 0 || g.batch1 == 0 || g.batch2 == 0) return;
  const void* ka = g.swap_ab ? b : a;
  const void* kb = g.swap_ab ? a : b;
  const int64_t tiles_mn = g.tiles_mn(), tiles_k = g.tiles_k();
  const int workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(k.plan.threads, tiles_mn * tiles_k)));
  const int64_t n_sk = stream_k_tiles(k.plan.split, tiles_mn, tiles_k, workers);
  // Stream-K partials: one mr x nr tile and one flag per worker, fresh for each launch.
  const size_t tile_bytes = size_t(k.plan.mr) * k.plan.nr * ir::size_in_bytes(k.plan.dtype);
  std::unique_ptr<char[]> ws(n_sk ? new char[tile_bytes * workers + 64] : nullptr);
  std::vector<int32_t> flags(workers, 0);
  void* ptrs[5] = {const_cast<void*>(ka), const_cast<void*>(kb), c, ws.get(), flags.data()};
  double fps[2] = {alpha, beta};
  const KernelEntry entry = k.code->entry;
  ThreadPool::get().run(workers, [&](int w) {
    int64_t ints[23] = {g.M, g.N, g.K, g.sa_r, g.sa_c, g.sb_r, g.sb_c, g.sc_r, g.sc_c,
                        g.batch1, g.batch2, g.sa_b1, g.sb_b1, g.sc_b1, g.sa_b2, g.sb_b2, g.sc_b2,
                        w, workers, g.kt, n_sk};
    entry(ptrs, ints, fps);
  });
}

}  // namespace coopjit
