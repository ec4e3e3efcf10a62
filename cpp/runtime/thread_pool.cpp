// The persistent worker pool (thread_pool.h).
#include "runtime/thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "runtime/fork.h"

namespace coopjit {

int affinity_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {
// The launch trace (thread_pool.h): one stamp slot per worker, a cache line each.
std::atomic<bool> g_trace{[] {
  const char* e = std::getenv("COOPJIT_TRACE");
  return e && *e && *e != '0';
}()};
struct alignas(64) Stamp {
  std::atomic<int64_t> start{0}, end{0}, cpu_time{0};
  std::atomic<int> slept{0}, cpu{-1}, cpu_end{-1}, thread{-1}, moved{0};
};
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int64_t thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// Pinning (set_pool_pin): the setting's generation (odd: on), and each thread's applied one.
std::atomic<int> g_pin{0};
thread_local int t_pin_applied = 0;
void apply_pin(int thread) {
  const int want = g_pin.load(std::memory_order_relaxed);
  if (want == t_pin_applied) return;
  t_pin_applied = want;
  static const std::vector<int> order = pin_order();  // the mask when first pinned
  cpu_set_t set;
  CPU_ZERO(&set);
  if (want & 1) {
    CPU_SET(order[static_cast<size_t>(thread) % order.size()], &set);
  } else {
    for (int c : order) CPU_SET(c, &set);
  }
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// Waiting: spin (with pause) for up to kSpin before sleeping on a condition variable. A worker
// woken from a futex sleep starts tens of microseconds late on a loaded or virtual machine, which
// is the whole run time of a small kernel and undoes Stream-K's balance (the owner of a split
// tile waits for the late worker); a launch that follows another within kSpin finds its workers
// still spinning. The cost: up to kSpin of a core after each launch.
constexpr auto kSpin = std::chrono::microseconds(200);
// While the launch a thread took part in is still running (a slower worker's share: 1.2-1.6x the
// median on the 16-core Emerald Rapids host), its kSpin starts over, up to kHold: a worker that
// finished 300 us before the slowest one otherwise slept, and the next launch woke it from the
// futex 20-40 us late (the launch trace, session 17: 1x4096x4096 f32 b2b, 12 workers, 58% of
// them woken from sleep, starts median 20 us; f32 1024^3 with one share a worker, 81%, 36 us).
// The caller, waiting for the last worker, likewise. Not with more workers than the CPUs the
// process may run on (each spinning thread would hold a core another worker needs).
constexpr auto kHold = std::chrono::microseconds(5000);
std::atomic<bool> g_hold{true};  // set_pool_hold: for A/B runs

// A pool thread on its caller's CPU (spread): the scheduler may wake a pool thread onto the CPU of
// the thread that woke it, and a thread that spins between launches (kSpin, kHold) is always
// runnable, so the two can share one CPU call after call while another CPU runs something else or
// nothing: the launch's shares then run one after the other. On the 2-core Zen 4 (session 21,
// loaded by other processes' builds) every launch of a fresh process's 2-worker bf16 256^3 had
// both workers on one CPU (the launch trace: each worker 80 us of CPU time, the call 169 us;
// pinned, 97 us). A pool thread that finds itself on the caller's CPU when it starts a launch moves
// to another CPU of its affinity mask (one not taken by another thread that moved in this launch,
// when there is one): its affinity set to that CPU, which migrates it at once, then its mask
// restored, so that the kernel may move it again later. Two system calls, only then.
std::atomic<bool> g_spread{true};  // set_pool_spread: for A/B runs
thread_local bool t_moved = false;  // this thread moved at the start of its current launch (the trace's `moved`, its first share)

template <class Ready, class Busy>
bool spin_until(const Ready& ready, const Busy& busy) {
  const auto start = std::chrono::steady_clock::now();
  auto end = start + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63) {
      const auto now = std::chrono::steady_clock::now();
      if (now < start + kHold && busy()) end = now + kSpin;
      if (now > end) return false;
      // Give the core to a thread that is waiting for it (a syscall of well under a microsecond
      // when none is). With the cores oversubscribed, or a woken worker placed on its waker's
      // core, a spinning thread otherwise holds the core that the caller needs for its own share
      // until kSpin ends: 60x32x8192 f32 Stream-K on 2 cores then took 350 us a call, the two
      // shares run one after the other with the spin between them, instead of 70.
      sched_yield();
    }
  }
}

}  // namespace

struct ThreadPool::Impl {
  std::mutex launch;  // one launch at a time
  // Only sleepers (and the errors) take mu: a launch's workers read it lock-free. With one mutex
  // taken by every worker at the start and the end of each launch, 15 workers queued on it.
  std::mutex mu;
  std::condition_variable wake, done;
  std::vector<std::thread> threads;
  int size = 1;
  int cpus = 1;  // affinity_cpus() when the pool was made
  // The current launch: its generation and worker count in one word (generation << 32 |
  // workers), published after fn; pending counts the pool workers still running it. fn may be
  // read by a worker of this launch only: the next launch rewrites it after every one of them
  // has finished, but a worker outside the launch may still be reading the word.
  // Bit 31 of the worker count marks an independent launch (run's `independent`, at most 32
  // workers): `claim` holds its generation << 32 | a bit per worker index already taken. Each
  // thread first takes its own index (so that a worker keeps the share whose data its caches
  // hold from the last call), then any index not yet taken (a worker that has not started).
  // (With the shares handed out in arrival order, a bench run on the 16-core Emerald Rapids host
  // measured 3000x500x200 f32 at 3.6 ms where session 10 measured 0.9; with own indices first, an
  // A/B there against ordinary launches: 0.92-0.97 against 1.07-1.11 ms.) `left` counts the indices not yet done; a thread
  // reads fn only after taking an index of the current generation (so the caller, waiting for
  // that index, has not returned).
  // Bit 30 of the worker count (with bit 31) marks a launch of shares (run_shares): `ranges`
  // holds, per thread, generation << 32 | its next share << 16 | the end of its range; a
  // share is taken by a compare-and-swap that checks the generation.
  static constexpr int kMaxRanges = 1024;
  struct alignas(64) Range {
    std::atomic<uint64_t> word{0};
  };
  std::unique_ptr<Range[]> ranges{new Range[kMaxRanges]};
  std::atomic<const std::function<void(int)>*> fn{nullptr};
  std::atomic<uint64_t> state{0};
  std::atomic<int> pending{0};
  std::atomic<uint64_t> claim{0};
  std::atomic<int> left{0};
  std::exception_ptr error;  // under mu
  // The trace of the current launch (g_trace): its start, and each worker's stamps.
  std::atomic<bool> tracing{false};
  // Whether this launch's threads keep spinning while it runs (kHold): g_hold, and no more
  // workers than CPUs.
  std::atomic<bool> hold{false};
  bool running() const {  // the current launch's pool workers / shares not all done
    return hold.load(std::memory_order_relaxed) &&
           (pending.load(std::memory_order_relaxed) > 0 || left.load(std::memory_order_relaxed) > 0);
  }
  // spread: the CPU the caller started this launch on (-1: unknown), and the CPUs (below 64) taken
  // in this launch by the caller and the threads that moved.
  std::atomic<int> caller_cpu{-1};
  std::atomic<uint64_t> spread_taken{0};
  bool spread();
  int64_t t0 = 0;
  std::unique_ptr<Stamp[]> stamps;
  int stamp_slots = 0;
  LaunchTrace last;
  std::vector<LaunchTrace> recent;  // take_launch_traces (at most kRecent)
  static constexpr size_t kRecent = 64;

  void ensure_threads(int n) {  // n - 1 pool threads (worker 0 is the caller)
    while (static_cast<int>(threads.size()) < n - 1) {
      int index = static_cast<int>(threads.size()) + 1;
      // Called before the launch is published: the thread has seen every earlier generation.
      const uint64_t seen = state.load(std::memory_order_relaxed) >> 32;
      threads.emplace_back([this, index, seen] { loop(index, seen); });
      threads.back().detach();  // lives as long as the process
    }
  }

  void claim_and_run(uint64_t gen, int workers, int own, bool spun);
  void claim_shares(uint64_t gen, int threads, int own, bool spun);

  void loop(int index, uint64_t seen) {
    bool took_part = false;  // in the last launch (threads past its worker count only wait for the next)
    for (;;) {
      uint64_t now = 0;
      auto launched = [&] {
        now = state.load(std::memory_order_acquire);
        return (now >> 32) != seen;
      };
      const bool spun = spin_until(launched, [&] { return took_part && running(); });
      if (!spun) {
        std::unique_lock<std::mutex> g(mu);
        wake.wait(g, launched);
      }
      seen = now >> 32;
      const int n = static_cast<int>(now & 0x3fffffffu);
      took_part = index < n;
      if (index >= n) continue;
      t_moved = spread();
      apply_pin(index);
      if (now & 0x40000000u) {
        claim_shares(seen, n, index, spun);
        continue;
      }
      if (now & 0x80000000u) {
        claim_and_run(seen, n, index, spun);
        continue;
      }
      run_one(*fn.load(std::memory_order_relaxed), index, spun, pending, index);
    }
  }

  // fn(i) of the current launch (its trace stamps; the first error kept), then one less in
  // `counter`: the thread that brings it to zero wakes the caller.
  void run_one(const std::function<void(int)>& job, int i, bool spun, std::atomic<int>& counter, int thread) {
    const bool trace = tracing.load(std::memory_order_relaxed);
    int64_t cpu0 = 0;
    if (trace) {
      stamps[i].start.store(now_ns(), std::memory_order_relaxed);
      stamps[i].slept.store(spun ? 0 : 1, std::memory_order_relaxed);
      stamps[i].cpu.store(sched_getcpu(), std::memory_order_relaxed);
      stamps[i].thread.store(thread, std::memory_order_relaxed);
      stamps[i].moved.store(t_moved ? 1 : 0, std::memory_order_relaxed);
      cpu0 = thread_cpu_ns();
    }
    t_moved = false;
    std::exception_ptr err;
    try {
      job(i);
    } catch (...) {
      err = std::current_exception();
    }
    if (trace) {
      stamps[i].end.store(now_ns(), std::memory_order_relaxed);
      stamps[i].cpu_time.store(thread_cpu_ns() - cpu0, std::memory_order_relaxed);
      stamps[i].cpu_end.store(sched_getcpu(), std::memory_order_relaxed);
    }
    if (err) {
      std::lock_guard<std::mutex> g(mu);
      if (!error) error = err;
    }
    if (counter.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> g(mu);  // (a caller that stopped spinning waits on done under mu)
      done.notify_all();
    }
  }
};

// An independent launch of generation gen: takes index `own` (-1: none) if it is still free,
// then any free index, running each; the thread that finishes the last one wakes the caller.
// Returns at once for an older generation.
void ThreadPool::Impl::claim_and_run(uint64_t gen, int workers, int own, bool spun) {
  const int thread = own;
  const uint64_t all = workers >= 32 ? 0xffffffffull : (uint64_t(1) << workers) - 1;
  for (;;) {
    uint64_t c = claim.load(std::memory_order_acquire);
    int i = -1;
    for (;;) {
      if ((c >> 32) != gen) break;
      const uint64_t free = ~c & all;
      if (!free) break;
      const int want = own >= 0 && (free >> own & 1) ? own : __builtin_ctzll(free);
      if (claim.compare_exchange_weak(c, c | (uint64_t(1) << want), std::memory_order_acq_rel, std::memory_order_acquire)) {
        i = want;
        break;
      }
    }
    own = -1;
    if (i < 0) return;
    run_one(*fn.load(std::memory_order_acquire), i, spun, left, thread);
  }
}

// A launch of shares of generation gen (run_shares): the shares left in thread `own`'s range,
// in order, then those of the other threads' ranges (from the next thread on), each taken by a
// compare-and-swap of its range's word that checks the generation. Returns at once for an older
// generation.
void ThreadPool::Impl::claim_shares(uint64_t gen, int threads, int own, bool spun) {
  for (int r = 0; r < threads; ++r) {
    Range& range = ranges[(own + r) % threads];
    for (;;) {
      uint64_t c = range.word.load(std::memory_order_acquire);
      if ((c >> 32) != gen) return;  // a later launch has begun: this one's shares are all done
      const int next = static_cast<int>(c >> 16 & 0xffffu), end = static_cast<int>(c & 0xffffu);
      if (next >= end) break;
      if (!range.word.compare_exchange_weak(c, c + (uint64_t(1) << 16), std::memory_order_acq_rel,
                                            std::memory_order_acquire))
        continue;
      run_one(*fn.load(std::memory_order_acquire), next, spun, left, own);
    }
  }
}

// spread (see g_spread): a pool thread at the start of a launch; whether it moved.
bool ThreadPool::Impl::spread() {
  if (!g_spread.load(std::memory_order_relaxed) || (g_pin.load(std::memory_order_relaxed) & 1)) return false;
  const int caller = caller_cpu.load(std::memory_order_relaxed);
  if (caller < 0 || sched_getcpu() != caller) return false;
  cpu_set_t mask;
  if (pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) != 0 || CPU_COUNT(&mask) < 2) return false;
  // The first CPU of the mask that is not the caller's nor taken by another moved thread; else
  // the first one after the caller's (wrapping), so that movers spread over the mask.
  int target = -1, fallback = -1;
  uint64_t taken = spread_taken.load(std::memory_order_relaxed);
  for (int k = 1; k < CPU_SETSIZE && target < 0; ++k) {
    const int c = (caller + k) % CPU_SETSIZE;
    if (c == caller || !CPU_ISSET(c, &mask)) continue;
    if (fallback < 0) fallback = c;
    if (c >= 64) {
      target = c;
      break;
    }
    while (!(taken >> c & 1)) {
      if (spread_taken.compare_exchange_weak(taken, taken | uint64_t(1) << c, std::memory_order_relaxed)) {
        target = c;
        break;
      }
    }
  }
  if (target < 0) target = fallback;
  if (target < 0) return false;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(target, &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) return false;
  pthread_setaffinity_np(pthread_self(), sizeof mask, &mask);  // (the kernel may move it again later)
  return true;
}

ThreadPool::ThreadPool() : impl_(new Impl) {
  impl_->size = impl_->cpus = affinity_cpus();
  // COOPJIT_PIN_THREADS=1: the pool's threads pinned from the start (set_pool_pin).
  if (const char* pin = std::getenv("COOPJIT_PIN_THREADS"); pin && *pin && *pin != '0') set_pool_pin(true);
  // COOPJIT_NUM_THREADS, else OMP_NUM_THREADS as NumPy's BLAS and PyTorch read it (its first
  // number: "4,2" asks for 4 at the outer level). A value that is not a whole number of at least 1
  // is passed over with a warning (atoi read "3abc" as 3, "1e3" as 1, and "99999999999" overflowed
  // into a pool of 1.2e9); one above kMaxThreads is taken as kMaxThreads (README).
  for (const char* name : {"COOPJIT_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* env = std::getenv(name);
    if (!env || !*env) continue;
    const int n = parse_threads(name, env);
    if (n >= 1) {
      impl_->size = n;
      break;
    }
  }
}

int ThreadPool::parse_threads(const char* name, const char* text) {
  const std::string s(text);
  const bool omp = std::string(name) == "OMP_NUM_THREADS";
  const std::string first = omp ? s.substr(0, s.find(',')) : s;
  size_t a = 0, b = first.size();
  while (a < b && std::isspace(static_cast<unsigned char>(first[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(first[b - 1]))) --b;
  const std::string digits = first.substr(a, b - a);
  bool ok = !digits.empty() && digits.size() <= 18;
  for (char c : digits) ok = ok && c >= '0' && c <= '9';
  const long long v = ok ? std::stoll(digits) : 0;
  if (!ok || v < 1) {
    if (!omp || !ok) {
      std::fprintf(stderr, "coopjit: %s='%s' is not a number of threads (a whole number, at least 1); ignoring it\n",
                   name, text);
    }
    return 0;
  }
  if (v > kMaxThreads) {
    std::fprintf(stderr, "coopjit: %s=%s is more than the %d threads a pool may have; using %d\n", name, text,
                 kMaxThreads, kMaxThreads);
    return kMaxThreads;
  }
  return static_cast<int>(v);
}

namespace {
std::atomic<ThreadPool*> g_pool{nullptr};  // for the fork handler: the pool, once created
}

ThreadPool& ThreadPool::get() {
  static ThreadPool* pool = [] {
    auto* p = new ThreadPool();  // never destroyed: its threads are detached
    g_pool.store(p, std::memory_order_release);
    return p;
  }();
  return *pool;
}

void ThreadPool::after_fork_in_child() {
  // The child has none of the pool's threads, and the old state may be mid-launch: its mutexes
  // held by threads that do not exist here, pending counting workers that will never finish.
  // Leave it (leaked: a few hundred bytes per fork) and start from a fresh one; the threads
  // start on the first launch that needs them. The size (set_num_threads) carries over.
  Impl* fresh = new Impl;
  fresh->size = impl_->size;  // read without mu: no other thread exists in the child
  fresh->cpus = impl_->cpus;
  impl_ = fresh;
}

void thread_pool_fork(fork_safety::Phase phase) {
  // Nothing before the fork, nor in the parent: a fork does not wait for a running launch.
  if (phase != fork_safety::Phase::child) return;
  if (ThreadPool* p = g_pool.load(std::memory_order_acquire)) p->after_fork_in_child();
}

int ThreadPool::size() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->size;
}

void ThreadPool::set_size(int64_t n) {
  if (n < 1) throw UserError(cat("the number of threads must be at least 1, got ", n));
  if (n > kMaxThreads) throw UserError(cat("the number of threads must be in [1, ", kMaxThreads, "], got ", n));
  std::lock_guard<std::mutex> g(impl_->mu);
  impl_->size = static_cast<int>(n);
}

void ThreadPool::run_shares(int threads, int shares, const std::function<void(int)>& fn) {
  threads = std::max(1, std::min(threads, shares));
  if (threads <= 1 || threads > Impl::kMaxRanges || shares > 0xffff) {
    // One thread, or more than the range words hold: each thread its own range, in order.
    const int per = (shares + threads - 1) / threads;
    run(threads, [&](int t) {
      for (int i = t * per; i < std::min(shares, (t + 1) * per); ++i) fn(i);
    });
    return;
  }
  launch(threads, shares, fn, 2);
}

void ThreadPool::run(int workers, const std::function<void(int)>& fn, bool independent) {
  if (workers <= 1) {
    fn(0);
    return;
  }
  if (workers > 32) independent = false;  // (the claim word has a bit per worker)
  launch(workers, workers, fn, independent ? 1 : 0);
}

// mode 0: an ordinary launch of `workers` (= shares) workers; 1: independent (run's); 2: shares
// over `workers` threads (run_shares).
void ThreadPool::launch(int workers, int shares, const std::function<void(int)>& fn, int mode) {
  const bool independent = mode != 0;
  std::lock_guard<std::mutex> one_launch(impl_->launch);  // one launch at a time
  const bool trace = g_trace.load(std::memory_order_relaxed);
  uint64_t gen = 0;
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_threads(workers);
    impl_->tracing.store(trace, std::memory_order_relaxed);
    impl_->hold.store(g_hold.load(std::memory_order_relaxed) && workers <= impl_->cpus, std::memory_order_relaxed);
    if (trace) {
      if (impl_->stamp_slots < shares) {
        impl_->stamps.reset(new Stamp[static_cast<size_t>(shares)]);
        impl_->stamp_slots = shares;
      }
      impl_->t0 = now_ns();
    }
    impl_->fn.store(&fn, std::memory_order_relaxed);
    {
      const int cpu = g_spread.load(std::memory_order_relaxed) ? sched_getcpu() : -1;
      impl_->caller_cpu.store(cpu, std::memory_order_relaxed);
      impl_->spread_taken.store(cpu >= 0 && cpu < 64 ? uint64_t(1) << cpu : 0, std::memory_order_relaxed);
    }
    impl_->pending.store(independent ? 0 : workers - 1, std::memory_order_relaxed);
    impl_->error = nullptr;
    gen = ((impl_->state.load(std::memory_order_relaxed) >> 32) + 1) & 0xffffffffu;  // (wraps as the word does)
    if (independent) {
      impl_->left.store(shares, std::memory_order_relaxed);
      impl_->claim.store(gen << 32, std::memory_order_release);
    }
    if (mode == 2) {
      const int per = (shares + workers - 1) / workers;
      for (int t = 0; t < workers; ++t) {
        const uint64_t lo = uint64_t(std::min(shares, t * per)), hi = uint64_t(std::min(shares, (t + 1) * per));
        impl_->ranges[t].word.store(gen << 32 | lo << 16 | hi, std::memory_order_release);
      }
    }
    impl_->state.store(gen << 32 | (independent ? 0x80000000u : 0u) | (mode == 2 ? 0x40000000u : 0u) |
                           static_cast<uint64_t>(workers),
                       std::memory_order_release);
  }
  impl_->wake.notify_all();
  apply_pin(0);
  std::exception_ptr mine;
  if (mode == 2) {
    impl_->claim_shares(gen, workers, 0, true);  // (the caller is thread 0)
  } else if (independent) {
    // The caller claims indices like every pool thread (its errors go to impl_->error).
    impl_->claim_and_run(gen, workers, 0, true);
  } else {
    if (trace) {
      impl_->stamps[0].start.store(now_ns(), std::memory_order_relaxed);
      impl_->stamps[0].cpu.store(sched_getcpu(), std::memory_order_relaxed);
      impl_->stamps[0].thread.store(0, std::memory_order_relaxed);
      impl_->stamps[0].moved.store(0, std::memory_order_relaxed);
    }
    const int64_t cpu0 = trace ? thread_cpu_ns() : 0;
    try {
      fn(0);
    } catch (...) {
      mine = std::current_exception();
    }
    if (trace) {
      impl_->stamps[0].end.store(now_ns(), std::memory_order_relaxed);
      impl_->stamps[0].cpu_time.store(thread_cpu_ns() - cpu0, std::memory_order_relaxed);
      impl_->stamps[0].cpu_end.store(sched_getcpu(), std::memory_order_relaxed);
    }
  }
  auto finished = [&] {
    return independent ? impl_->left.load(std::memory_order_acquire) == 0
                       : impl_->pending.load(std::memory_order_acquire) == 0;
  };
  const bool hold = impl_->hold.load(std::memory_order_relaxed);
  const bool spun = spin_until(finished, [hold] { return hold; });
  std::unique_lock<std::mutex> g(impl_->mu);
  if (!spun) impl_->done.wait(g, finished);
  if (trace) {
    LaunchTrace& t = impl_->last;
    const int64_t t0 = impl_->t0;
    t.workers = shares;
    t.start.assign(static_cast<size_t>(shares), 0);
    t.end.assign(static_cast<size_t>(shares), 0);
    t.slept.assign(static_cast<size_t>(shares), 0);
    t.cpu.assign(static_cast<size_t>(shares), -1);
    t.cpu_end.assign(static_cast<size_t>(shares), -1);
    t.thread.assign(static_cast<size_t>(shares), -1);
    t.moved.assign(static_cast<size_t>(shares), 0);
    t.cpu_time.assign(static_cast<size_t>(shares), 0);
    for (int w = 0; w < shares; ++w) {
      t.cpu[w] = impl_->stamps[w].cpu.load(std::memory_order_relaxed);
      t.cpu_end[w] = impl_->stamps[w].cpu_end.load(std::memory_order_relaxed);
      t.thread[w] = impl_->stamps[w].thread.load(std::memory_order_relaxed);
      t.moved[w] = impl_->stamps[w].moved.load(std::memory_order_relaxed);
      t.cpu_time[w] = impl_->stamps[w].cpu_time.load(std::memory_order_relaxed);

      t.start[w] = impl_->stamps[w].start.load(std::memory_order_relaxed) - t0;
      t.end[w] = impl_->stamps[w].end.load(std::memory_order_relaxed) - t0;
      t.slept[w] = impl_->stamps[w].slept.load(std::memory_order_relaxed);
    }
    t.join = now_ns() - t0;
    t.origin = t0;
    if (impl_->recent.size() < Impl::kRecent) impl_->recent.push_back(t);
  }
  if (mine) std::rethrow_exception(mine);
  if (impl_->error) std::rethrow_exception(impl_->error);
}

void set_pool_hold(bool on) { g_hold.store(on, std::memory_order_relaxed); }

void set_pool_spread(bool on) { g_spread.store(on, std::memory_order_relaxed); }

void set_pool_pin(bool on) {
  int g = g_pin.load(std::memory_order_relaxed);
  if (bool(g & 1) != on) g_pin.store(g + 1, std::memory_order_relaxed);
}

std::vector<int> pin_order() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {0};
  // Per CPU: its (package, core) from sysfs; the first CPU of each core goes first.
  std::map<std::pair<int, int>, int> seen;
  std::vector<int> first, rest;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    std::ifstream pkg(base + "physical_package_id"), core(base + "core_id");
    int p = -1, id = -1;
    if (!(pkg >> p && core >> id)) id = 1000000 + c;  // unknown: a core of its own
    if (seen.emplace(std::make_pair(p, id), c).second) first.push_back(c);
    else rest.push_back(c);
  }
  first.insert(first.end(), rest.begin(), rest.end());
  return first.empty() ? std::vector<int>{0} : first;
}

void set_launch_trace(bool on) { g_trace.store(on, std::memory_order_relaxed); }
bool launch_trace_on() { return g_trace.load(std::memory_order_relaxed); }

LaunchTrace last_launch_trace() {
  ThreadPool::Impl* impl = ThreadPool::get().impl_;
  std::lock_guard<std::mutex> g(impl->mu);
  return impl->last;
}

std::vector<LaunchTrace> take_launch_traces() {
  ThreadPool::Impl* impl = ThreadPool::get().impl_;
  std::lock_guard<std::mutex> g(impl->mu);
  std::vector<LaunchTrace> out;
  out.swap(impl->recent);
  return out;
}

}  // namespace coopjit
