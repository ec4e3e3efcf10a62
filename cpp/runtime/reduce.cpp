// Reductions on the CPU (reduce.h).
#include "runtime/reduce.h"

#include <cstdint>
#include <vector>

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
  // Down the columns of rows longer than a tile (2 KiB runs per row would be all the column walk
  // reads) and enough of them to share: the rows are split among the workers, each reducing its
  // share into a row of partials in long runs of whole rows ("column_rows"), then the column
  // form reduces the workers' partials.
  if (s.form == "column" && p.unit && s.rows >= 8 * int64_t(p.threads) &&
      s.cols > p.tile_cols && s.cols * ir::size_in_bytes(s.in) > 2048) {
    ReduceSpec s1 = s;
    s1.form = "column_rows";
    s1.out = s.acc;
    s1.sy_r = s.cols;
    s1.sy_c = 1;
    ReducePlan p1 = plan_reduce(s1, host_cpu().vector_bytes, ThreadPool::get().size());
    p1.threads = p.threads;
    // The partials start half a page away from X modulo 4 KiB: a row of X whose stride is a
    // multiple of 4 KiB would otherwise sit at the partials' page offsets, and each load of X
    // would wait on the store to the partial at the same offset (4K aliasing: 0.6x measured).
    std::vector<unsigned char> partials(size_t(p1.threads) * s.cols * ir::size_in_bytes(s.acc) + 4096 + 64);
    const uintptr_t base = (reinterpret_cast<uintptr_t>(partials.data()) + 63) & ~uintptr_t(63);
    const uintptr_t want = (reinterpret_cast<uintptr_t>(x) + 2048) & 4095 & ~uintptr_t(63);
    void* ws = reinterpret_cast<void*>(base + ((want - (base & 4095)) & 4095));
    run_reduce(s1, x, ws, p1.threads);
    ReduceSpec s2 = s;
    s2.in = s.acc;
    s2.rows = p1.threads;
    s2.sx_r = s.cols;
    s2.sx_c = 1;
    run_reduce(s2, ws, y, 0);
    return;
  }
  auto code = reduce_code(s, p);
  void* ptrs[2] = {const_cast<void*>(x), y};
  const KernelEntry entry = code->entry;
  const int workers = p.threads;
  // Rows that all start at the same offset into a cache line (a stride of whole lines, or one
  // row), long enough: the row form's full tiles start at the row's first 64-byte boundary, so
  // that no vector load straddles two lines (NumPy's large arrays start 16 bytes into one). One
  // Zen 5 thread, CPU time, sum along the rows of 4096 x 4096 f32: 41 GB/s at offset 16, 48
  // aligned.
  const int64_t es = ir::size_in_bytes(s.in);
  int64_t head = 0;
  if (s.form == "row" && p.unit && (s.rows == 1 || (s.sx_r * es) % 64 == 0) && s.cols * es >= 1024) {
    // (Below a tile's width: the one tile at column 0 covers the elements before it. Tiles of
    // fewer than 64 bytes, u8 into u64, start at a boundary of their own size.)
    head = int64_t((64 - reinterpret_cast<uintptr_t>(x) % 64) % 64) / es % p.tile_cols;
    if (reinterpret_cast<uintptr_t>(x) % es || head >= s.cols) head = 0;
  }
  // The workers' shares are independent (no worker waits for another): any thread may run any.
  ThreadPool::get().run(workers, [&](int w) {
    int64_t ints[9] = {s.rows, s.cols, s.sx_r, s.sx_c, s.sy_r, s.sy_c, w, workers, head};
    entry(ptrs, ints, nullptr);
  }, true);
}

std::string reduce_ir(const ReduceSpec& s) {
  ReducePlan p = plan_reduce(s, host_cpu().vector_bytes, ThreadPool::get().size());
  return reduce_code(s, p)->ir_text;
}

}  // namespace coopjit
