// The persistent worker pool of the CPU runtime: one thread per core of the affinity mask
// (COOPJIT_NUM_THREADS or set_size() override it), started once, reused by every launch.
#pragma once

#include <functional>

namespace coopjit {

class ThreadPool {
 public:
  static ThreadPool& get();
  /// Workers available to one launch (the calling thread included).
  int size() const;
  /// Changes the size (>= 1); threads start lazily, on the next launch that needs them.
  void set_size(int n);
  /// Runs fn(0) .. fn(workers - 1) at the same time, fn(0) on the calling thread, and returns
  /// when all are done. Launches are serialized: Stream-K workers wait for each other, so all
  /// of one launch's workers must run together.
  void run(int workers, const std::function<void(int)>& fn);
  /// In a forked child (runtime/fork.h): forgets the parent's threads and launch state.
  void after_fork_in_child();

 private:
  ThreadPool();
  struct Impl;
  Impl* impl_;
};

/// The number of CPUs in this process's affinity mask.
int affinity_cpus();

}  // namespace coopjit
