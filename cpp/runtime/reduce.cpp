// Reductions on the CPU (reduce.h).
#include "runtime/reduce.h"

#include "build/reduce_recipe.h"
#include "runtime/kernel.h"
#include "runtime/thread_pool.h"
#include "target/cpu_info.h"

namespace coopjit {

namespace {
std::shared_ptr<const CompiledKernel> reduce_code(const ReduceSpec& s, const ReducePlan& p) {
  return cached_kernel(p.key(s), [&](const std::string& symbol) { return build_reduce(s, p, symbol); });
}
}  // namespace

void run_reduce(const ReduceSpec& s, const void* x, void* y, int threads_override) {
  ReducePlan p = plan_reduce(s, host_cpu().vector_bytes, ThreadPool::get().size());
  if (threads_override > 0) p.threads = threads_override;
  if (s.rows == 0 || s.cols == 0) return;
  auto code = reduce_code(s, p);
  void* ptrs[2] = {const_cast<void*>(x), y};
  const KernelEntry entry = code->entry;
  const int workers = p.threads;
  ThreadPool::get().run(workers, [&](int w) {
    int64_t ints[8] = {s.rows, s.cols, s.sx_r, s.sx_c, s.sy_r, s.sy_c, w, workers};
    entry(ptrs, ints, nullptr);
  });
}

std::string reduce_ir(const ReduceSpec& s) {
  ReducePlan p = plan_reduce(s, host_cpu().vector_bytes, ThreadPool::get().size());
  return reduce_code(s, p)->ir_text;
}

}  // namespace coopjit
