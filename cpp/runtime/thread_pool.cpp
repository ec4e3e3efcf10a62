// The persistent worker pool (thread_pool.h).
#include "runtime/thread_pool.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
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
// Waiting: spin (with pause) for up to kSpin before sleeping on a condition variable. A worker
// woken from a futex sleep starts tens of microseconds late on a loaded or virtual machine, which
// is the whole run time of a small kernel and undoes Stream-K's balance (the owner of a split
// tile waits for the late worker); a launch that follows another within kSpin finds its workers
// still spinning. The cost: up to kSpin of a core after each launch.
constexpr auto kSpin = std::chrono::microseconds(200);

template <class Ready>
bool spin_until(const Ready& ready) {
  const auto end = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > end) return false;
  }
}
}  // namespace

struct ThreadPool::Impl {
  std::mutex launch;  // one launch at a time
  std::mutex mu;
  std::condition_variable wake, done;
  std::vector<std::thread> threads;
  int size = 1;
  // The current launch (fn, workers and error under mu; generation and pending also read
  // without it while spinning).
  const std::function<void(int)>* fn = nullptr;
  int workers = 0;
  std::atomic<long> generation{0};
  std::atomic<int> pending{0};
  std::exception_ptr error;

  void ensure_threads(int n) {  // n - 1 pool threads (worker 0 is the caller)
    while (static_cast<int>(threads.size()) < n - 1) {
      int index = static_cast<int>(threads.size()) + 1;
      threads.emplace_back([this, index] { loop(index); });
      threads.back().detach();  // lives as long as the process
    }
  }

  void loop(int index) {
    long seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      {
        auto launched = [&] { return generation.load(std::memory_order_acquire) != seen; };
        bool spun = spin_until(launched);
        std::unique_lock<std::mutex> g(mu);
        if (!spun) wake.wait(g, launched);
        seen = generation.load(std::memory_order_relaxed);
        if (index >= workers) continue;
        job = fn;
      }
      std::exception_ptr err;
      try {
        (*job)(index);
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard<std::mutex> g(mu);
      if (err && !error) error = err;
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) done.notify_all();
    }
  }
};

ThreadPool::ThreadPool() : impl_(new Impl) {
  impl_->size = affinity_cpus();
  // COOPJIT_NUM_THREADS, else OMP_NUM_THREADS as NumPy's BLAS and PyTorch read it (its first
  // number: "4,2" asks for 4 at the outer level).
  for (const char* name : {"COOPJIT_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* env = std::getenv(name);
    const int n = env ? std::atoi(env) : 0;
    if (n >= 1) {
      impl_->size = n;
      break;
    }
  }
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

void ThreadPool::set_size(int n) {
  if (n < 1) throw UserError(cat("the number of threads must be at least 1, got ", n));
  std::lock_guard<std::mutex> g(impl_->mu);
  impl_->size = n;
}

void ThreadPool::run(int workers, const std::function<void(int)>& fn) {
  if (workers <= 1) {
    fn(0);
    return;
  }
  std::lock_guard<std::mutex> launch(impl_->launch);
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_threads(workers);
    impl_->fn = &fn;
    impl_->workers = workers;
    impl_->pending.store(workers - 1, std::memory_order_relaxed);
    impl_->error = nullptr;
    impl_->generation.fetch_add(1, std::memory_order_release);
  }
  impl_->wake.notify_all();
  std::exception_ptr mine;
  try {
    fn(0);
  } catch (...) {
    mine = std::current_exception();
  }
  auto finished = [&] { return impl_->pending.load(std::memory_order_acquire) == 0; };
  const bool spun = spin_until(finished);
  std::unique_lock<std::mutex> g(impl_->mu);
  if (!spun) impl_->done.wait(g, finished);
  if (mine) std::rethrow_exception(mine);
  if (impl_->error) std::rethrow_exception(impl_->error);
}

}  // namespace coopjit
