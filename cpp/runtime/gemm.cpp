// GEMM launch on the CPU (gemm.h).
#include "runtime/gemm.h"

#include "build/gemm_recipe.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lower/simd_lower.h"
#include "target/cpu_jit.h"
#include "core/error.h"
#include "runtime/fork.h"
#include "runtime/thread_pool.h"
#include "runtime/tuned_plans.h"
#include "target/cpu_info.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <sys/mman.h>
#include <memory>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#else
#include <chrono>
#endif

namespace coopjit {

CpuTargetInfo target_info(const CpuInfo& cpu, int threads, bool amx_usable) {
  CpuTargetInfo t;
  t.vector_bytes = cpu.vector_bytes;
  t.vector_registers = cpu.vector_registers;
  t.max_threads = threads;
  // The dot instructions the SIMD lowering uses (simd_vnni.cpp), on 16-lane (AVX-512) vectors.
  t.dot_bf16 = cpu.vector_bytes == 64 && cpu.has("avx512bf16");
  t.dot_i8 = (cpu.vector_bytes == 64 && cpu.has("avx512vnni") && cpu.has("avx512bw")) ||
             (cpu.vector_bytes == 32 && cpu.has("avxvnni"));  // AVX-VNNI: 256-bit VEX vpdpbusd
  // AMX tiles (simd_amx.cpp).
  const bool amx = cpu.vector_bytes == 64 && amx_usable && cpu.has("amx-tile");
  t.amx_bf16 = amx && cpu.has("amx-bf16");
  t.amx_int8 = amx && cpu.has("amx-int8");
  t.amx_fp16 = amx && cpu.has("amx-fp16");
  t.cldemote = cpu.has("cldemote");
  t.name = cpu.name;
  return t;
}

// One core's L2 as Linux reports it (cpu0's unified level-2 cache), else 1 MiB.
static int64_t host_l2_bytes() {
  static const int64_t bytes = [] {
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
      std::ifstream level(dir + "level"), size(dir + "size");
      int lv = 0;
      std::string text;
      if (!(level >> lv) || !(size >> text)) break;
      if (lv != 2 || text.empty()) continue;
      const char unit = text.back();
      const int64_t n = std::atoll(text.c_str());
      const int64_t b = unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : n;
      if (b >= (64 << 10)) return b;
    }
    return int64_t(1) << 20;
  }();
  return bytes;
}

CpuTargetInfo host_target() {
  CpuTargetInfo t = target_info(host_cpu(), ThreadPool::get().size(), amx_permitted());
  t.l2_bytes = host_l2_bytes();
  return t;
}

CrossCompiled cross_compile_gemm(const GemmSpec& spec, const std::string& cpu_name, int threads,
                                 const PlanOverrides& overrides, bool code) {
  const CpuInfo cpu = cpu_info_for(cpu_name);
  CrossCompiled r;
  r.plan = plan_gemm(spec, target_info(cpu, threads, true), overrides);
  std::unique_ptr<ir::Function> f = build_gemm(r.plan, "coopjit_gemm");
  r.ir = ir::print(*f);
  ir::verify(*f);
  if (!code) return r;  // the plan and the kernel's IR only: no lowering, no code generation
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto mod = lower_simd(*f, *ctx, cpu);
  r.assembly = compile_assembly(std::move(mod), cpu, r.llvm_ir);
  return r;
}

GemmKernel gemm_kernel(const GemmSpec& spec, const PlanOverrides& overrides) {
  GemmKernel k{spec, plan_gemm(spec, host_target(), overrides), nullptr};
  GemmPlan plan = k.plan;
  k.code = cached_kernel(plan.key(), [plan](const std::string& symbol) { return build_gemm(plan, symbol); });
  return k;
}

namespace {
struct MemoKey {
  int64_t M, N, K, batch;
  int dtype, flags, threads, types;
  int64_t tuned;  // the tuned-plan table's generation: a new tuned plan takes effect at once
  std::array<int64_t, 14> strides;  // small products only (GemmPlan::fixed): strides and batch split
  std::string overrides;            // the plan fields the caller gave ("k=v;" each), usually none
  bool operator==(const MemoKey& o) const {
    return M == o.M && N == o.N && K == o.K && batch == o.batch && dtype == o.dtype && flags == o.flags &&
           threads == o.threads && types == o.types && tuned == o.tuned && strides == o.strides &&
           overrides == o.overrides;
  }
};
struct MemoHash {
  size_t operator()(const MemoKey& k) const {
    size_t h = std::hash<int64_t>()(k.M);
    for (int64_t v : {k.N, k.K, k.batch, int64_t(k.dtype), int64_t(k.flags), int64_t(k.threads), int64_t(k.types),
                      k.tuned})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    for (int64_t v : k.strides) h = h * 1000003u ^ std::hash<int64_t>()(v);
    if (!k.overrides.empty()) h = h * 1000003u ^ std::hash<std::string>()(k.overrides);
    return h;
  }
};
std::mutex& memo_mutex() {
  static std::mutex mu;
  return mu;
}
std::atomic<int64_t> g_memo_generation{0};  // gemm_memo_forget: part of every key
}  // namespace

void gemm_memo_forget() { g_memo_generation.fetch_add(1, std::memory_order_relaxed); }

void gemm_memo_fork(fork_safety::Phase phase) {  // runtime/fork.h: the memo consistent in the child
  if (phase == fork_safety::Phase::prepare)
    memo_mutex().lock();
  else
    memo_mutex().unlock();
}

const GemmKernel& gemm_kernel_cached(const GemmSpec& s, const PlanOverrides& overrides) {
  std::mutex& mu = memo_mutex();
  static std::unordered_map<MemoKey, GemmKernel, MemoHash> memo;
  // Exactly what plan_gemm looks at besides the values passed at run time.
  // (Bits 7-14: each of A's and B's strides a multiple of 4 KiB in bytes, 4 KiB or 8 KiB and more:
  // rows that alias in L1 cap the tile's rows on few cores and pack skinny products on many.)
  auto alias = [](int64_t elems, ir::ScalarType t) {
    const int64_t bytes = elems * ir::size_in_bytes(t);
    return bytes == 0 || bytes % 4096 ? 0 : (bytes >= 8192 || bytes <= -8192) ? 2 : 1;
  };
  const int flags = (s.sa_r == 1) | (s.sb_c == 1) << 1 | (s.sc_c == 1) << 2 | (s.sc_r == 1) << 3 |
                    int(s.accumulate) << 4 | (s.sa_c == 1) << 5 | (s.sb_r == 1) << 6 | alias(s.sa_r, s.a_type) << 7 |
                    alias(s.sa_c, s.a_type) << 9 | alias(s.sb_r, s.b_type) << 11 | alias(s.sb_c, s.b_type) << 13;
  MemoKey key{s.M, s.N, s.K, s.batch1 * s.batch2, int(s.dtype), flags, ThreadPool::get().size(),
              int(s.a_type) | int(s.b_type) << 8 | int(s.c_type) << 16,
              tuned_generation() + (g_memo_generation.load(std::memory_order_relaxed) << 40), {}, {}};
  // The plan may fix the strides (GemmPlan::fixed): small products, or any that plan fields shape.
  for (const auto& [name, value] : overrides) key.overrides += cat(name, "=", value, ";");
  if (std::max({s.M, s.N, s.K}) <= 64 || !overrides.empty())
    key.strides = {s.sa_r, s.sa_c, s.sb_r, s.sb_c, s.sc_r, s.sc_c, s.batch1, s.sa_b1, s.sb_b1, s.sc_b1,
                   s.sa_b2, s.sb_b2, s.sc_b2, 0};
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = memo.find(key);
    if (it != memo.end()) return it->second;
  }
  GemmKernel k = overrides.empty() ? gemm_kernel_tuned(s) : gemm_kernel(s, overrides);
  std::lock_guard<std::mutex> g(mu);
  if (memo.size() >= 4096) {
    // Bounded, and never erased: other threads may be running a kernel they got from it. Past
    // the bound, the caller's own copy (valid until this thread's next call) is returned.
    thread_local GemmKernel last;
    last = std::move(k);
    return last;
  }
  return memo.emplace(key, std::move(k)).first->second;
}

namespace {
// bf16 bits <-> f32 as the kernels convert them: round to nearest even, NaN kept quiet with its sign.
float bf16_to_f32(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// Memory for the packed panels, kept per calling thread between launches: fresh pages for
// every call cost a page fault per 4 KiB (about 1 ms for 2 x 2 MiB of panels, a quarter of a
// 1024^3 bf16 product). 2 MiB aligned and advised as huge pages (fewer TLB misses while the
// tiles stream through the panels). Grows to the largest need up to kKeepBytes; larger needs
// get a buffer of their own for the call.
class PanelMemory {
 public:
  static constexpr size_t kKeepBytes = size_t(256) << 20;
  char* get(size_t bytes) {
    if (bytes <= size_) return ptr_.get();
    Ptr p = allocate(bytes);
    char* raw = p.get();
    if (bytes <= kKeepBytes) {
      ptr_ = std::move(p);
      size_ = bytes;
    } else {
      oversize_ = std::move(p);
    }
    return raw;
  }
  void release_oversize() { oversize_.reset(); }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  using Ptr = std::unique_ptr<char, Free>;
  static Ptr allocate(size_t bytes) {
    constexpr size_t kHuge = size_t(2) << 20;
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = nullptr;
    if (posix_memalign(&p, kHuge, rounded) != 0) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return Ptr(static_cast<char*>(p));
  }
  Ptr ptr_, oversize_;
  size_t size_ = 0;
};
}  // namespace

int64_t read_tsc() {
#if defined(__x86_64__) || defined(__i386__)
  return static_cast<int64_t>(__rdtsc());
#else
  return std::chrono::steady_clock::now().time_since_epoch().count();
#endif
}

namespace {
// plan.cycles: the counters (gemm_cycles), guarded by the mutex for a whole call.
struct CycleCounters {
  std::mutex mu;
  GemmCycles c;
};
CycleCounters& cycle_counters() {
  static CycleCounters* c = new CycleCounters;  // (never destroyed: pool threads may outlive statics)
  return *c;
}
}  // namespace

GemmCycles gemm_cycles(bool reset) {
  CycleCounters& cc = cycle_counters();
  std::lock_guard<std::mutex> g(cc.mu);
  GemmCycles out = cc.c;
  if (reset) cc.c = GemmCycles{};
  return out;
}

// Where C is not finite: its elements of a float type (f8 outputs hold no product's overflow here:
// not checked).
static bool all_finite(const GemmSpec& s, const void* c) {
  auto scan = [&](auto zero, auto finite) {
    using E = decltype(zero);
    const E* p = static_cast<const E*>(c);
    for (int64_t m = 0; m < s.M; ++m) {
      const E* row = p + m * s.sc_r;
      bool ok = true;
      if (s.sc_c == 1)
        for (int64_t n = 0; n < s.N; ++n) ok &= finite(row[n]);
      else
        for (int64_t n = 0; n < s.N; ++n) ok &= finite(row[n * s.sc_c]);
      if (!ok) return false;
    }
    return true;
  };
  switch (s.c_type) {
    case ir::ScalarType::f32: return scan(0.0f, [](float x) { return x - x == 0.0f; });
    case ir::ScalarType::f64: return scan(0.0, [](double x) { return x - x == 0.0; });
    case ir::ScalarType::bf16: return scan(uint16_t(0), [](uint16_t h) { return (h & 0x7f80u) != 0x7f80u; });
    case ir::ScalarType::f16: return scan(uint16_t(0), [](uint16_t h) { return (h & 0x7c00u) != 0x7c00u; });
    default: return true;
  }
}

// C's elements copied out (to == true) or back, by element size and C's strides.
static void copy_c(const GemmSpec& s, void* c, std::vector<char>& saved, bool out) {
  const size_t es = ir::size_in_bytes(s.c_type);
  if (out) saved.resize(size_t(s.M) * size_t(s.N) * es);
  char* base = static_cast<char*>(c);
  char* keep = saved.data();
  const size_t row = size_t(s.N) * es;
  for (int64_t m = 0; m < s.M; ++m) {
    char* e = base + m * s.sc_r * int64_t(es);
    char* k = keep + size_t(m) * row;
    if (s.sc_c == 1) {  // (rows of contiguous elements: one copy a row)
      if (out) std::memcpy(k, e, row);
      else std::memcpy(e, k, row);
      continue;
    }
    auto each = [&](auto zero) {
      using E = decltype(zero);
      E* x = reinterpret_cast<E*>(e);
      E* y = reinterpret_cast<E*>(k);
      for (int64_t n = 0; n < s.N; ++n) {
        if (out) std::memcpy(y + n, x + n * s.sc_c, sizeof(E));
        else std::memcpy(x + n * s.sc_c, y + n, sizeof(E));
      }
    };
    if (es == 8) each(uint64_t(0));
    else if (es == 4) each(uint32_t(0));
    else if (es == 2) each(uint16_t(0));
    else each(uint8_t(0));
  }
}

static void run_gemm_once(const GemmKernel& k, const GemmSpec& spec, const void* a, const void* b, void* c,
                          double alpha, double beta, const void* prepacked_b, const EpilogueArgs* epilogue);

void run_gemm(const GemmKernel& k, const GemmSpec& spec, const void* a, const void* b, void* c, double alpha,
              double beta, const void* prepacked_b, const EpilogueArgs* epilogue, bool* scaled_once) {
  if (scaled_once) *scaled_once = false;
  // (as the kernels' K loops: the parts of a split K, the K tiles past kt, the 2048-K blocks of the
  // tile walk; NaN alpha or beta compares false: nothing to check; alpha = +-inf never reaches here)
  const bool large = std::abs(alpha) > 1.0 || (spec.accumulate && beta != 0.0 && std::abs(beta) > 1.0);
  if (!scaled_once || !large || !ir::is_float(k.plan.dtype) || k.plan.epilogue.any() || spec.M == 0 || spec.N == 0 ||
      spec.batch1 * spec.batch2 != 1 || !(spec.K > std::min<int64_t>(k.plan.kt, 2048) || k.plan.ksplit > 1)) {
    run_gemm_once(k, spec, a, b, c, alpha, beta, prepacked_b, epilogue);
    return;
  }
  // C's values before (beta != 0): kept in this thread's buffer between calls (a fresh one a call
  // cost its pages: gemm 256^3 with C copied in Python, session 28), released past 16 MiB.
  thread_local std::vector<char> saved;
  struct Release {
    std::vector<char>& v;
    ~Release() {
      if (v.capacity() > (size_t(16) << 20)) std::vector<char>().swap(v);
    }
  } release{saved};
  const bool read_c = spec.accumulate && beta != 0.0;
  if (read_c) {
    try {
      copy_c(spec, c, saved, true);
    } catch (const std::bad_alloc&) {
      const size_t bytes = size_t(spec.M) * size_t(spec.N) * ir::size_in_bytes(spec.c_type);
      throw OutOfMemory(cat("gemm: cannot allocate ", bytes, " bytes (", bytes >> 20, " MiB) for a copy of C (", spec.M,
                            " x ", spec.N, "), kept while alpha = ", alpha, " / beta = ", beta,
                            " scale the K split's parts"));
    }
  }
  run_gemm_once(k, spec, a, b, c, alpha, beta, prepacked_b, epilogue);
  if (all_finite(spec, c)) return;
  if (read_c) copy_c(spec, c, saved, false);
  *scaled_once = true;
}

static void run_gemm_once(const GemmKernel& k, const GemmSpec& spec, const void* a, const void* b, void* c,
                          double alpha, double beta, const void* prepacked_b, const EpilogueArgs* epilogue) {
  GemmArgs g = gemm_args(spec, k.plan);
  if (g.M == 0 || g.N == 0 || g.batch1 == 0 || g.batch2 == 0) return;
  // plan.cycles: the counters held for the call (one such call at a time), its ticks added at its end.
  std::unique_lock<std::mutex> cycles_lock;
  struct CallTicks {
    GemmCycles* c = nullptr;
    int64_t t0 = 0;
    ~CallTicks() {
      if (c) c->call_ticks += read_tsc() - t0, ++c->calls;
    }
  } call_ticks;
  int64_t* cycle_slots = nullptr;
  if (k.plan.cycles) {
    CycleCounters& cc = cycle_counters();
    cycles_lock = std::unique_lock<std::mutex>(cc.mu);
    // Worker indices: the workers', or a launch of shares' workers x shares (at most).
    const int64_t slots = std::max<int64_t>(1, int64_t(std::max(1, k.plan.threads)) * std::max(1, k.plan.shares));
    if (cc.c.slots < slots) {
      cc.c.counters.resize(size_t(slots * kCycleFields), 0);
      cc.c.slots = slots;
    }
    cycle_slots = cc.c.counters.data();
    call_ticks.c = &cc.c;
    call_ticks.t0 = read_tsc();
  }
  const void* ka = g.swap_ab ? b : a;
  const void* kb = g.swap_ab ? a : b;
  // Packed panels: ceil(M / mr) * mr x Kp and Kp x ceil(N / nr) * nr elements, 64-byte aligned.
  thread_local PanelMemory panel_memory;
  struct ReleaseOversize {
    PanelMemory& m;
    ~ReleaseOversize() { m.release_oversize(); }
  } release{panel_memory};
  // Scratch from panel_memory; one that cannot be allocated is a MemoryError naming it and its
  // size (was "std::bad_alloc": plan ksplit=512 of 2048^2 f32, 511 blocks of 16 MiB; session 28).
  auto memory = [&](size_t bytes, const auto& what) -> char* {
    try {
      return panel_memory.get(bytes);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory(cat("gemm: cannot allocate ", bytes, " bytes (", bytes >> 20, " MiB) for ", what()));
    }
  };
  auto blocks_of = [&](int64_t count) {
    return cat("the K split's ", count, " blocks of partial sums of ", g.M, " x ", g.N, " (plan ksplit=", k.plan.ksplit,
               "; a smaller ksplit needs less)");
  };
  // The dot walk reads B's column (the vector) with unit stride: another stride (x[::2], a column
  // of a wider matrix, reversed) is gathered first into a contiguous copy, one a distinct vector
  // of the batch (a broadcast one once), and the kernel reads that (see plan_gemv).
  if (k.plan.order == "dot" && g.sb_r != 1 && g.K > 0) {
    const size_t es = ir::size_in_bytes(k.plan.b_type);
    const int64_t n1 = g.sb_b1 ? g.batch1 : 1, n2 = g.sb_b2 ? g.batch2 : 1;
    char* raw = memory(size_t(n1 * n2 * g.K) * es + 64, [&] { return cat("a copy of B's column (the vector, K = ", g.K, ")"); });
    char* dst = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + 63) & ~uintptr_t(63));
    auto gather = [&](auto zero) {
      using E = decltype(zero);
      E* out = reinterpret_cast<E*>(dst);
      for (int64_t i1 = 0; i1 < n1; ++i1)
        for (int64_t i2 = 0; i2 < n2; ++i2) {
          const E* x = static_cast<const E*>(kb) + i1 * g.sb_b1 + i2 * g.sb_b2;
          for (int64_t kk = 0; kk < g.K; ++kk) *out++ = x[kk * g.sb_r];
        }
    };
    if (es == 1) gather(uint8_t(0));
    else if (es == 2) gather(uint16_t(0));
    else if (es == 4) gather(uint32_t(0));
    else gather(uint64_t(0));
    kb = dst;
    g.sb_r = 1;
    g.sb_b2 = g.sb_b2 ? g.K : 0;
    g.sb_b1 = g.sb_b1 ? n2 * g.K : 0;
  }
  const int64_t tiles_mn = g.tiles_mn(), tiles_k = g.tiles_k();
  const int workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(k.plan.threads, tiles_mn * tiles_k)));
  const int64_t n_sk = stream_k_tiles(k.plan.split, tiles_mn, tiles_k, workers);
  if (n_sk > 0 && !k.plan.streams())
    throw InternalError(cat("a launch with ", n_sk, " Stream-K tiles of a kernel built without Stream-K: ", k.plan.str()));
  // Stream-K partials: one mr x nr tile and one flag per worker, fresh for each launch.
  const size_t tile_bytes = size_t(k.plan.mr) * k.plan.nr * ir::size_in_bytes(k.plan.dtype);
  std::unique_ptr<char[]> ws(n_sk ? new char[tile_bytes * workers + 64] : nullptr);
  void* ws_ptr = ws.get();
  // Two flags per worker: Stream-K partials, then the packing barrier.
  int32_t small_flags[128] = {};
  std::unique_ptr<int32_t[]> big_flags(workers > 64 ? new int32_t[2 * workers]() : nullptr);
  int32_t* flags = workers > 64 ? big_flags.get() : small_flags;
  void* pa = nullptr;
  void* pb = nullptr;
  void* cs = nullptr;
  if (k.plan.pack) {
    const int64_t kp = (g.K + k.plan.kb - 1) / k.plan.kb * k.plan.kb;
    size_t a_bytes = size_t((g.M + g.mr - 1) / g.mr * g.mr) * kp * ir::size_in_bytes(packed_a_type(k.plan));
    // own_a: a copy of A's panels a worker, 64-byte multiples apart (as the recipe's pack() addresses them).
    if (k.plan.own_a) a_bytes = (a_bytes + 63) / 64 * 64 * size_t(workers);
    size_t b_bytes = packed_b_bytes(k.plan, g.K, g.N);
    // inline_b: each worker's slot holds its column panels' slices of one K tile (and their
    // column sums), cols_per = ceil(tiles_n / workers) panels a worker (see the recipe).
    size_t slot_sums_at = 0;
    // With shares (session 29), a slot a share: threads x shares of them.
    if (k.plan.inline_b) {
      const size_t n = size_t(workers) * size_t(k.plan.shares > 1 && n_sk == 0 && workers > 1 ? k.plan.shares : 1);
      const size_t slots = n * ((size_t((g.N + g.nr - 1) / g.nr) + n - 1) / n);
      slot_sums_at = (slots * g.nr * size_t(g.kt) * ir::size_in_bytes(packed_b_type(k.plan)) + 63) / 64 * 64;
      b_bytes = std::max(b_bytes, slot_sums_at + slots * g.nr * 4);
    }
    // The blocked nest's partial sums when C's type is not the accumulator's (gemm_recipe.cpp).
    // So do those of a fused epilogue, which applies once, to the whole sum.
    // AMX plans keep them there always (tile loads and stores of the partial sums).
    const bool scratch =
        n_sk == 0 && (k.plan.c_type != k.plan.dtype || k.plan.epilogue.any() || k.plan.amx) && tiles_k > 1;
    const size_t s_bytes = scratch ? size_t((g.M + g.mr - 1) / g.mr * g.mr) * ((g.N + g.nr - 1) / g.nr * g.nr) *
                                         ir::size_in_bytes(k.plan.dtype)
                                   : 0;
    char* packed = memory(a_bytes + b_bytes + s_bytes + 256, [&] {
      return cat("the packed panels of A and B of ", g.M, " x ", g.N, " x ", g.K, " (plan pack=1)");
    });
    auto align64 = [](char* p) { return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63)); };
    pa = align64(packed);
    pb = align64(static_cast<char*>(pa) + a_bytes);
    if (scratch) ws_ptr = align64(static_cast<char*>(pb) + b_bytes);  // before a prepacked B replaces pb
    if (k.plan.prepacked_b) {
      // (plan prepacked_b=1 named on a call whose B is an array: refused naming it; it was an
      // internal RuntimeError, session 29's audit)
      if (!prepacked_b)
        throw UserError("plan prepacked_b=1 reads B as coopjit.prepack's panels: pass b = coopjit.prepack(b) "
                        "(gemm / matmul), or leave prepacked_b out of the plan");
      pb = const_cast<void*>(prepacked_b);
    }
    if (needs_column_sums(k.plan))
      cs = static_cast<char*>(pb) + (k.plan.inline_b ? slot_sums_at : packed_b_panel_bytes(k.plan, g.K, g.N));
  } else if (k.plan.order == "k_outer" && (k.plan.c_type != k.plan.dtype || k.plan.epilogue.any()) && n_sk == 0 &&
             tiles_k > 1) {
    // The unpacked blocked nest keeps its partial sums in the scratch matrix too (C in another type
    // than the accumulator's, or a fused epilogue).
    const size_t s_bytes = size_t((g.M + g.mr - 1) / g.mr * g.mr) * ((g.N + g.nr - 1) / g.nr * g.nr) *
                           ir::size_in_bytes(k.plan.dtype);
    char* raw = memory(s_bytes + 64, [&] { return cat("the partial sums of ", g.M, " x ", g.N, " (plan order='k_outer')"); });
    ws_ptr = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + 63) & ~uintptr_t(63));
  }
  if (k.plan.epilogue.any()) {
    const GemmEpilogue& e = k.plan.epilogue;
    if (!epilogue || (e.scale && !epilogue->scale) || (e.row_scale && !epilogue->row_scale) || (e.bias && !epilogue->bias) ||
        (e.residual && !epilogue->residual))
      throw InternalError("the kernel's epilogue needs operands that were not given");
  }
  const EpilogueArgs none{};
  const EpilogueArgs& ep = epilogue ? *epilogue : none;
  // (the 13th: plan.cycles's counters; kernels without the plan field have 12 pointer parameters)
  void* ptrs[13] = {const_cast<void*>(ka), const_cast<void*>(kb), c, ws_ptr, flags, pa, pb, cs,
                    const_cast<void*>(ep.scale), const_cast<void*>(ep.row_scale), const_cast<void*>(ep.bias),
                    const_cast<void*>(ep.residual), cycle_slots};
  // alpha and beta have the accumulator's type: floats in the fps slots, integers after n_sk.
  const bool int_scalars = !ir::is_float(k.plan.dtype);
  // Integer products take alpha and beta as integers (float products leave the slots unused).
  const int64_t ialpha = int_scalars ? integer_scalar(alpha, "alpha") : 0;
  const int64_t ibeta = int_scalars ? integer_scalar(beta, "beta") : 0;
  const KernelEntry entry = k.code->entry;
  // One kernel call, worker w of n: the whole product's K, operands, C strides and beta, or (the
  // ksplit walk below) one K range of it into its own row of partial sums without beta.
  auto launch = [&](void* const* p, int64_t K, int64_t sc_r, int64_t sc_c, bool with_beta, int64_t w, int64_t n,
                    int64_t phase, int64_t shares) {
    const int64_t ints[25] = {g.M, g.N, K, g.sa_r, g.sa_c, g.sb_r, g.sb_c, sc_r, sc_c,
                              g.batch1, g.batch2, g.sa_b1, g.sb_b1, g.sc_b1, g.sa_b2, g.sb_b2, g.sc_b2,
                              w, n, g.kt, n_sk, phase, shares, ialpha, with_beta ? ibeta : 0};
    const double f[2] = {alpha, with_beta ? beta : 0.0};
    entry(p, ints, int_scalars ? nullptr : f);
  };
  auto call = [&](int64_t w, int64_t n, int64_t phase, int64_t shares) {
    launch(ptrs, g.K, g.sc_r, g.sc_c, true, w, n, phase, shares);
  };
  // The K split's parts (GemmPlan::ksplit): at most ksplit of them, whole K tiles each (the step);
  // a part's kernel call takes A's and B's pointers advanced to its first K element k0.
  auto ksplit_step = [&] {
    const int64_t want = std::min<int64_t>(k.plan.ksplit, (g.K + g.kt - 1) / g.kt);
    return ((g.K + want - 1) / want + g.kt - 1) / g.kt * g.kt;
  };
  // The parts run on the plan's threads: one part a thread as an independent launch, or, with more
  // parts than threads (plan ksplit above threads), as shares (ThreadPool::run_shares: each thread
  // its own run of parts in K order, then any part a slower thread has not started). A launch of
  // every part gave each its own pool thread (ksplit 8 of 2 threads: 8 threads on 2 cores).
  auto run_parts = [&](int parts, const std::function<void(int)>& fn) {
    const int threads = std::max(1, std::min(parts, k.plan.threads));
    if (parts > threads) ThreadPool::get().run_shares(threads, parts, fn);
    else ThreadPool::get().run(parts, fn, true);
  };
  auto part_operands = [&](void** p, int64_t k0) {
    std::copy(ptrs, ptrs + 13, p);
    p[0] = static_cast<char*>(p[0]) + k0 * g.sa_c * int64_t(ir::size_in_bytes(k.plan.a_type));
    p[1] = static_cast<char*>(p[1]) + k0 * g.sb_r * int64_t(ir::size_in_bytes(k.plan.b_type));
  };
  // K split among the workers (GemmPlan::ksplit, the k_outer walk or the tile walk): part w runs the kernel on its K
  // range over all of C (every row and column panel, as one worker), part 0 into C (beta applied
  // there), the others into zeroed M x N blocks of partial sums, added into C here once all are
  // done. One row of C (a vector times a matrix) or a small M x N block of few tiles for the workers
  // and a long K (session 26: 64x64x8192 f32 on 16 cores).
  // bf16 C (f32 sums): every part runs as phase 3, its sums left in its own scratch (in f32), and
  // the caller writes C = bf16(alpha * (the parts' sum) + beta * C) (one rounding).
  // The parts' sums are added on the plan's threads when there is enough to add (`bytes` of parts:
  // 64 KiB or more, a second launch), each thread a range of [0, n) of whole `align` elements (C's
  // rows, or the scratch's elements); else here, in one range.
  auto split_range = [&](int64_t n, int64_t align, size_t bytes, const std::function<void(int64_t, int64_t)>& fn) {
    const int64_t pieces = (n + align - 1) / align;
    const int threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(k.plan.threads, pieces)));
    if (threads > 1 && bytes >= (size_t(64) << 10)) {
      const int64_t step = (pieces + threads - 1) / threads * align;
      ThreadPool::get().run(threads, [&](int t) {
        const int64_t i0 = t * step, i1 = std::min(n, i0 + step);
        if (i0 < i1) fn(i0, i1);
      }, true);
    } else {
      fn(0, n);
    }
  };
  auto add_rows = [&](int parts, size_t block_bytes, const std::function<void(int64_t, int64_t)>& fn) {
    split_range(g.M, 1, block_bytes * size_t(parts), fn);
  };
  // A fused epilogue: the parts but the last K tile run as phase 3 (sums in their own scratch,
  // in the accumulator type), the caller adds the scratches into the first, and a phase 4 launch
  // of the last K tile on the plan's workers adds that sum to its own and applies alpha, beta
  // and the epilogue once (C rounded once where it is bf16).
  if (k.plan.epilogue.any() && k.plan.ksplit > 1 && k.plan.order == "k_outer" && !k.plan.pack && n_sk == 0 &&
      g.K > g.kt && g.batch1 * g.batch2 == 1) {
    const int64_t k_last = (g.K - 1) / g.kt * g.kt;  // the last K tile: [k_last, K)
    const int64_t want = std::min<int64_t>(k.plan.ksplit - 1, k_last / g.kt);
    const int64_t step = std::max<int64_t>(1, ((k_last + want - 1) / want + g.kt - 1) / g.kt) * g.kt;
    const int parts = static_cast<int>((k_last + step - 1) / step);
    const size_t es = ir::size_in_bytes(k.plan.dtype);
    const size_t elems = size_t((g.M + g.mr - 1) / g.mr * g.mr) * size_t((g.N + g.nr - 1) / g.nr * g.nr);
    const size_t part_bytes = (elems * es + 63) / 64 * 64;
    char* raw = memory(part_bytes * size_t(parts) + 64, [&] { return blocks_of(parts); });
    char* sums = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + 63) & ~uintptr_t(63));
    run_parts(parts, [&](int w) {
      const int64_t k0 = w * step, kw = std::min(k_last, k0 + step) - k0;
      void* p[13];
      part_operands(p, k0);
      p[3] = sums + size_t(w) * part_bytes;
      launch(p, kw, g.sc_r, g.sc_c, false, 0, 1, 3, 1);
    });
    auto add = [&](auto zero) {
      using T = decltype(zero);
      T* total = reinterpret_cast<T*>(sums);
      split_range(int64_t(elems), 16, part_bytes * size_t(parts), [&](int64_t e0, int64_t e1) {
        for (int w = 1; w < parts; ++w) {
          const T* part = reinterpret_cast<const T*>(sums + size_t(w) * part_bytes);
          for (int64_t e = e0; e < e1; ++e) total[e] += part[e];
        }
      });
    };
    if (k.plan.dtype == ir::ScalarType::f32) add(0.0f);
    else if (k.plan.dtype == ir::ScalarType::i32) add(uint32_t(0));  // (int32 sums wrap as the kernel's do)
    else add(0.0);
    void* p[13];
    part_operands(p, k_last);
    p[3] = sums;
    ThreadPool::get().run(workers, [&](int w) { launch(p, g.K - k_last, g.sc_r, g.sc_c, true, w, workers, 4, 1); }, true);
    return;
  }
  const bool ksplit_bf16 = k.plan.c_type == ir::ScalarType::bf16 && k.plan.dtype == ir::ScalarType::f32 &&
                           !k.plan.epilogue.any();
  if (ksplit_bf16 && k.plan.ksplit > 1 && k.plan.order == "k_outer" && !k.plan.pack && n_sk == 0 && g.K > 0 &&
      g.batch1 * g.batch2 == 1) {
    const int64_t step = ksplit_step();
    const int parts = static_cast<int>((g.K + step - 1) / step);
    // A part's scratch as the kernel addresses it: ceil(M / mr) * mr rows of ceil(N / nr) * nr.
    const size_t cols = size_t((g.N + g.nr - 1) / g.nr * g.nr);
    const size_t part_bytes = (size_t((g.M + g.mr - 1) / g.mr * g.mr) * cols * sizeof(float) + 63) / 64 * 64;
    char* raw = memory(part_bytes * size_t(parts) + 64, [&] { return blocks_of(parts); });
    char* sums = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + 63) & ~uintptr_t(63));
    run_parts(parts, [&](int w) {
      const int64_t k0 = w * step, kw = std::min(g.K, k0 + step) - k0;
      void* p[13];
      part_operands(p, k0);
      p[3] = sums + size_t(w) * part_bytes;
      launch(p, kw, g.sc_r, g.sc_c, false, 0, 1, 3, 1);
    });
    uint16_t* cc = static_cast<uint16_t*>(c);
    const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
    add_rows(parts, part_bytes, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t n = 0; n < g.N; ++n) {
          float s = 0.0f;
          for (int w = 0; w < parts; ++w)
            s += reinterpret_cast<const float*>(sums + size_t(w) * part_bytes)[size_t(m) * cols + size_t(n)];
          float r = fa * s;
          uint16_t& out = cc[m * g.sc_r + n * g.sc_c];
          if (k.plan.accumulate && beta != 0.0) r += fb * bf16_to_f32(out);  // (beta 0: C is not read)
          out = f32_to_bf16(r);
        }
    });
    return;
  }
  if (k.plan.ksplit > 1 && (k.plan.order == "k_outer" || k.plan.order == "m_inner") && !k.plan.pack && n_sk == 0 &&
      g.K > 0 && g.batch1 * g.batch2 == 1 && !k.plan.epilogue.any() &&
      (k.plan.dtype == ir::ScalarType::f32 || k.plan.dtype == ir::ScalarType::f64 || k.plan.dtype == ir::ScalarType::i32) &&
      k.plan.c_type == k.plan.dtype) {
    const int64_t step = ksplit_step();
    const int parts = static_cast<int>((g.K + step - 1) / step);
    const size_t es = ir::size_in_bytes(k.plan.dtype);
    const size_t row = (size_t(g.N) * es + 63) / 64 * 64;  // a block's row, 64-byte multiples apart
    const size_t block = row * size_t(g.M);
    char* raw = parts > 1 ? memory(block * size_t(parts - 1) + 64, [&] { return blocks_of(parts - 1); }) : nullptr;
    char* blocks = raw ? reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + 63) & ~uintptr_t(63)) : nullptr;
    const int64_t ld = static_cast<int64_t>(row / es);
    run_parts(parts, [&](int w) {
      const int64_t k0 = w * step, kw = std::min(g.K, k0 + step) - k0;
      void* p[13];
      part_operands(p, k0);
      if (w > 0) {
        p[2] = blocks + size_t(w - 1) * block;
        std::memset(p[2], 0, block);  // (zeroed, as the one-row form's rows were)
      }
      launch(p, kw, w ? ld : g.sc_r, w ? 1 : g.sc_c, w == 0, 0, 1, 0, 1);
    });
    auto add = [&](auto zero) {
      using T = decltype(zero);
      T* cc = static_cast<T*>(c);
      add_rows(parts, block, [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          T* out = cc + m * g.sc_r;
          for (int w = 1; w < parts; ++w) {
            const T* part = reinterpret_cast<const T*>(blocks + size_t(w - 1) * block + size_t(m) * row);
            if (g.sc_c == 1)
              for (int64_t n = 0; n < g.N; ++n) out[n] += part[n];
            else
              for (int64_t n = 0; n < g.N; ++n) out[n * g.sc_c] += part[n];
          }
        }
      });
    };
    if (k.plan.dtype == ir::ScalarType::f32) add(0.0f);
    else if (k.plan.dtype == ir::ScalarType::i32) add(uint32_t(0));  // (int32 sums wrap as the kernel's do)
    else add(0.0);
    return;
  }
  // Packed plans with shares (GemmPlan::shares): the workers pack (one launch: its end is the
  // barrier), then the blocked nest runs as shares handed out by ThreadPool::run_shares.
  // inline_b (session 29): the workers pack A only, and each share packs its own column panels'
  // slices of B into its own slot (no packing launch where A is read in place, direct_a).
  const int shares = k.plan.shares;
  if (shares > 1 && k.plan.pack && n_sk == 0 && workers > 1) {
    ThreadPool& pool = ThreadPool::get();
    const bool b_ready = k.plan.prepacked_b || k.plan.inline_b;
    if (!(b_ready && k.plan.direct_a)) pool.run(workers, [&](int w) { call(w, workers, 1, 1); }, true);
    pool.run_shares(workers, workers * shares, [&](int v) { call(v, int64_t(workers) * shares, 2, shares); });
    return;
  }
  // The unpacked dot / m_inner walks with shares: workers x shares row blocks, each thread its own
  // first, then the next of a slower thread's (the blocks are independent).
  if (shares > 1 && !k.plan.pack && (k.plan.order == "dot" || k.plan.order == "m_inner") && n_sk == 0 && workers > 1) {
    ThreadPool::get().run_shares(workers, workers * shares, [&](int v) { call(v, int64_t(workers) * shares, 0, 1); });
    return;
  }
  // Workers wait for each other only at the packing barrier and for Stream-K partials; without
  // either, any thread of the pool may run any worker's share (ThreadPool::run's independent).
  // own_a: no packing barrier (each worker reads only the panels it packed).
  ThreadPool::get().run(workers, [&](int w) { call(w, workers, 0, 1); }, (!k.plan.pack || k.plan.own_a) && n_sk == 0);
}

}  // namespace coopjit
