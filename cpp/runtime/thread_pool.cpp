// The persistent worker pool (thread_pool.h).
#include "runtime/thread_pool.h"

#include <sched.h>

#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"

namespace coopjit {

int affinity_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

struct ThreadPool::Impl {
  std::mutex launch;  // one launch at a time
  std::mutex mu;
  std::condition_variable wake, done;
  std::vector<std::thread> threads;
  int size = 1;
  // The current launch.
  const std::function<void(int)>* fn = nullptr;
  int workers = 0;
  long generation = 0;
  int pending = 0;
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
        std::unique_lock<std::mutex> g(mu);
        wake.wait(g, [&] { return generation != seen; });
        seen = generation;
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
      if (--pending == 0) done.notify_all();
    }
  }
};

ThreadPool::ThreadPool() : impl_(new Impl) {
  impl_->size = affinity_cpus();
  if (const char* env = std::getenv("COOPJIT_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n >= 1) impl_->size = n;
  }
}

ThreadPool& ThreadPool::get() {
  static ThreadPool* pool = new ThreadPool();  // never destroyed: its threads are detached
  return *pool;
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
    impl_->pending = workers - 1;
    impl_->error = nullptr;
    ++impl_->generation;
  }
  impl_->wake.notify_all();
  std::exception_ptr mine;
  try {
    fn(0);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> g(impl_->mu);
  impl_->done.wait(g, [&] { return impl_->pending == 0; });
  if (mine) std::rethrow_exception(mine);
  if (impl_->error) std::rethrow_exception(impl_->error);
}

}  // namespace coopjit
