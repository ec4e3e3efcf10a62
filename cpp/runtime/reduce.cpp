// Reductions on the CPU (reduce.h).
#include "runtime/reduce.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "build/reduce_recipe.h"
#include "core/error.h"
#include "runtime/kernel.h"
#include "runtime/thread_pool.h"
#include "target/cpu_info.h"

namespace coopjit {

namespace {
std::shared_ptr<const CompiledKernel> reduce_code(const ReduceSpec& s, const ReducePlan& p) {
  return cached_kernel(p.key(s), [&](const std::string& symbol) { return build_reduce(s, p, symbol); });
}

// set_reduce_plan_overrides: read by every reduction (a copy under the lock; none when empty).
std::mutex overrides_mutex;
std::shared_ptr<const std::map<std::string, int64_t>> overrides_map;
std::atomic<bool> overrides_set{false};

std::shared_ptr<const std::map<std::string, int64_t>> current_overrides() {
  if (!overrides_set.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(overrides_mutex);
  return overrides_map;
}

// The override of `field` for `form`: "form.field", else "field", else `fallback`.
int64_t overridden(const std::map<std::string, int64_t>* o, const std::string& form, const char* field,
                   int64_t fallback) {
  if (!o) return fallback;
  auto it = o->find(form + "." + field);
  if (it != o->end()) return it->second;
  it = o->find(field);
  return it != o->end() ? it->second : fallback;
}

void apply_overrides(const std::map<std::string, int64_t>* o, const ReduceSpec& s, ReducePlan& p) {
  if (!o) return;
  p.tile_rows = static_cast<int>(overridden(o, s.form, "tile_rows", p.tile_rows));
  p.tile_cols = static_cast<int>(overridden(o, s.form, "tile_cols", p.tile_cols));
  p.block_cols = static_cast<int>(overridden(o, s.form, "block_cols", p.block_cols));
  p.prefetch = static_cast<int>(overridden(o, s.form, "prefetch", p.prefetch));
  p.read_past = overridden(o, s.form, "read_past", p.read_past) != 0;
  p.threads = static_cast<int>(overridden(o, s.form, "threads", p.threads));
  if (s.form != "column_rows") p.shares = static_cast<int>(overridden(o, s.form, "shares", p.shares));
  p.sum_block = static_cast<int>(overridden(o, s.form, "sum_block", p.sum_block));
  // (stream_y: asked for or not, then only where the planner's conditions but the sizes hold)
  const bool stream = overridden(o, s.form, "stream_y", p.stream_y) != 0;
  p.sum_levels = static_cast<int>(overridden(o, s.form, "sum_levels", p.sum_levels));
  if (s.form != "row" || s.op != "sum" || !ir::is_float(s.acc) || !p.sum_block || !p.sum_levels)
    p.sum_block = p.sum_levels = 0;  // (a row form's float sum only; both or neither)
  if (p.tile_cols % p.simd_width || (s.form == "2x2" && p.tile_rows % 2) ||
      (s.form == "column_rows" && p.block_cols % p.tile_cols) || (p.segments && p.tile_rows != 1))
    throw UserError(cat("reduce plan overrides give a ", s.form, " tile of ", p.tile_rows, " x ", p.tile_cols,
                        " (block_cols ", p.block_cols, "): the columns must be a multiple of the vector's ", p.simd_width,
                        " lanes, column_rows blocks a multiple of the tile's columns"));
  p.stream_y = stream && s.form == "column" && p.unit_y &&
               (int64_t(p.tile_cols) * ir::size_in_bytes(s.out)) % 64 == 0;
}
}  // namespace

void set_reduce_plan_overrides(const std::map<std::string, int64_t>& overrides) {
  static const char* fields[] = {"tile_rows", "tile_cols", "block_cols", "prefetch",
                                 "read_past", "threads", "shares", "split", "sum_block", "sum_levels", "stream_y"};
  for (const auto& [key, v] : overrides) {
    const size_t dot = key.find('.');
    const std::string field = dot == std::string::npos ? key : key.substr(dot + 1);
    bool known = false;
    for (const char* f : fields) known = known || field == f;
    // (column_rows: each worker's index is its row of partials, so its shares are its workers)
    if (!known || (field == "split" && key != "column.split") || key == "column_rows.shares")
      throw UserError(cat("unknown reduce plan override '", key, "' (known: [form.]tile_rows, tile_cols, block_cols, "
                          "prefetch, read_past, threads, shares (not column_rows), sum_block, sum_levels, "
                          "stream_y; "
                          "column.split)"));
    const int64_t hi = field == "prefetch" ? 1 << 20 : field == "block_cols" ? 1 << 24 : field == "tile_cols" ? 1024
                       : field == "shares" ? 4096 : field == "sum_levels" ? 8 : field == "stream_y" ? 1 : 256;
    const int64_t lo = field == "tile_rows" || field == "tile_cols" || field == "threads" ? 1 : 0;
    if (v < lo || v > hi)
      throw UserError(cat("reduce plan override ", key, "=", v, " is out of range [", lo, ", ", hi, "]"));
  }
  std::lock_guard<std::mutex> lock(overrides_mutex);
  overrides_map = overrides.empty() ? nullptr : std::make_shared<const std::map<std::string, int64_t>>(overrides);
  overrides_set.store(!overrides.empty(), std::memory_order_release);
}

void run_reduce(const ReduceSpec& s, const void* x, void* y, int threads_override) {
  const auto ov = current_overrides();
  ReducePlan p = plan_reduce(s, host_cpu().vector_bytes, ThreadPool::get().size());
  if (threads_override > 0) p.threads = threads_override;
  apply_overrides(ov.get(), s, p);
  if (s.rows == 0 || s.cols == 0) return;
  // Down the columns of rows longer than a tile (2 KiB runs per row would be all the column walk
  // reads) and enough of them to share: the rows are split among the workers, each reducing its
  // share into a row of partials in long runs of whole rows ("column_rows"), then the column
  // form reduces the workers' partials.
  if (s.form == "column" && p.unit && s.rows >= 8 * int64_t(p.threads) && overridden(ov.get(), "column", "split", 1) &&
      s.cols > p.tile_cols && s.cols * ir::size_in_bytes(s.in) > 2048) {
    ReduceSpec s1 = s;
    s1.form = "column_rows";
    s1.out = s.acc;
    s1.sy_r = s.cols;
    s1.sy_c = 1;
    ReducePlan p1 = plan_reduce(s1, host_cpu().vector_bytes, ThreadPool::get().size());
    p1.threads = p.threads;
    apply_overrides(ov.get(), s1, p1);
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
  // Plan stream_y: the kernel's Y starts on a 64-byte boundary (its full tiles' streaming stores
  // are aligned); the columns before it are reduced by a call of their own (ordinary stores).
  const int64_t ys = ir::size_in_bytes(s.out);
  if (p.stream_y && reinterpret_cast<uintptr_t>(y) % ys) p.stream_y = false;
  if (p.stream_y && reinterpret_cast<uintptr_t>(y) % 64) {
    const int64_t h = int64_t((64 - reinterpret_cast<uintptr_t>(y) % 64) / ys);
    if (h >= s.cols) {
      p.stream_y = false;
    } else {
      ReduceSpec sh = s;
      sh.cols = h;
      run_reduce(sh, x, y, 0);
      ReduceSpec rest = s;
      rest.cols = s.cols - h;
      run_reduce(rest, static_cast<const unsigned char*>(x) + h * s.sx_c * ir::size_in_bytes(s.in),
                 static_cast<unsigned char*>(y) + h * ys, threads_override);
      return;
    }
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
  // Plan shares: more shares than threads, handed out by run_shares.
  const int shares = p.shares > workers ? p.shares : workers;
  auto share = [&](int w) {
    int64_t ints[9] = {s.rows, s.cols, s.sx_r, s.sx_c, s.sy_r, s.sy_c, w, shares, head};
    entry(ptrs, ints, nullptr);
    // Streaming stores are weakly ordered: fenced on the thread that made them, before its share
    // is reported done.
    if (p.stream_y) std::atomic_thread_fence(std::memory_order_seq_cst);
  };
  if (shares > workers)
    ThreadPool::get().run_shares(workers, shares, share);
  else
    ThreadPool::get().run(workers, share, true);
}

ReducePlan planned_reduce(const ReduceSpec& s, int vector_bytes, int max_threads) {
  if (vector_bytes < 0 || max_threads < 0 || max_threads > ThreadPool::kMaxThreads)
    throw UserError(cat("reduce_plan: vector_bytes must be >= 0 and threads in [0, ", ThreadPool::kMaxThreads,
                        "] (0: this CPU's), got ", vector_bytes, " and ", max_threads));
  if (vector_bytes && vector_bytes != 16 && vector_bytes != 32 && vector_bytes != 64)
    throw UserError(cat("reduce_plan: vector_bytes must be 16, 32 or 64 (0: this CPU's), got ", vector_bytes));
  return plan_reduce(s, vector_bytes ? vector_bytes : host_cpu().vector_bytes,
                     max_threads ? max_threads : ThreadPool::get().size());
}

std::string reduce_ir(const ReduceSpec& s) {
  ReducePlan p = plan_reduce(s, host_cpu().vector_bytes, ThreadPool::get().size());
  apply_overrides(current_overrides().get(), s, p);
  return reduce_code(s, p)->ir_text;
}

}  // namespace coopjit
