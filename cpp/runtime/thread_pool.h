// The persistent worker pool of the CPU runtime: one thread per core of the affinity mask
// (COOPJIT_NUM_THREADS or set_size() override it), started once, reused by every launch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace coopjit {

/// The opt-in launch trace (COOPJIT_TRACE=1 in the environment, or set_launch_trace): steady_clock
/// stamps of the last multi-worker launch, in nanoseconds after its start. Off, a launch pays one
/// relaxed load of a flag.
struct LaunchTrace {
  int workers = 0;
  std::vector<int64_t> start, end;  // per worker: fn(w) entered / returned (worker 0: the caller)
  std::vector<int> slept;           // per pool worker: it waited on the condition variable (spin ran out)
  std::vector<int> cpu;             // per worker: the CPU fn(w) started on (-1: unknown)
  std::vector<int> cpu_end;         // per worker: the CPU it returned on (another one: it migrated)
  std::vector<int> moved;           // per worker: its pool thread found itself on the caller's CPU and moved (spread)
  std::vector<int> thread;          // per worker: the pool thread that ran it (0: the caller)
  std::vector<int64_t> cpu_time;    // per worker: the thread's CPU time in fn(w) (CLOCK_THREAD_CPUTIME_ID)
  int64_t join = 0;                 // the caller saw every worker done
  int64_t origin = 0;               // the launch's start (steady_clock ns): the gap between launches
};
void set_launch_trace(bool on);
/// Whether a launch's threads keep spinning while it runs (thread_pool.cpp's kHold; on by
/// default): off gives the earlier waits, for A/B runs (coopjit._core._set_pool_hold).
void set_pool_hold(bool on);
/// Pins the pool's threads (coopjit._core._set_pool_pin, for A/B runs; off by default): thread t
/// (the caller is thread 0) to the t-th CPU of the affinity mask in pin_order() (one CPU of each
/// physical core first, then their SMT siblings); off gives each thread the whole mask back.
/// Applied by each thread at its next launch. COOPJIT_PIN_THREADS=1 in the environment: on from the start.
void set_pool_pin(bool on);
/// Whether a pool thread that starts a launch's share on the CPU its caller runs on moves itself to
/// another CPU of its affinity mask first (thread_pool.cpp's spread; on by default, never for pinned
/// threads): off for A/B runs (coopjit._core._set_pool_spread).
void set_pool_spread(bool on);
/// The affinity mask's CPUs, one of each physical core first (by core), then the other SMT
/// threads: the order pinned threads take.
std::vector<int> pin_order();
bool launch_trace_on();
/// The last traced launch (workers 0 when none was).
LaunchTrace last_launch_trace();
/// The traced launches since the last call (up to 64, oldest first), then forgets them: a call
/// of several launches (a packing launch, then the shares of the blocked nest) as its phases.
std::vector<LaunchTrace> take_launch_traces();

class ThreadPool {
 public:
  static ThreadPool& get();
  /// Workers available to one launch (the calling thread included).
  int size() const;
  /// The most workers a pool may have: a plan's `threads` field takes 1..kMaxThreads too. A
  /// larger size made the first big launch start threads until the system refused one
  /// (COOPJIT_NUM_THREADS=99999999999: "Resource temporarily unavailable", the user's process
  /// limit spent).
  static constexpr int kMaxThreads = 1024;
  /// Changes the size (1..kMaxThreads; UserError naming n otherwise); threads start lazily, on
  /// the next launch that needs them.
  void set_size(int64_t n);
  /// An environment variable's number of threads: 1..kMaxThreads (larger values taken as
  /// kMaxThreads, with a warning), or 0 when it is not a whole number of at least 1 (warned,
  /// except OMP_NUM_THREADS=0, which other libraries read too). OMP_NUM_THREADS: its first number.
  static int parse_threads(const char* name, const char* text);
  /// Runs fn(0) .. fn(workers - 1) at the same time, fn(0) on the calling thread, and returns
  /// when all are done. Launches are serialized: Stream-K workers wait for each other, so all
  /// of one launch's workers must run together.
  /// `independent`: no fn(w) waits for another, so any thread of the launch may run any w: each
  /// thread takes its own index, then any index not yet taken, and the call returns once every
  /// index has run, without waiting for a thread that has not started (descheduled on a busy
  /// machine, a woken thread can start hundreds of microseconds late). Up to 32 workers (more:
  /// an ordinary launch).
  void run(int workers, const std::function<void(int)>& fn, bool independent = false);
  /// Runs fn(0) .. fn(shares - 1), independent of each other, on up to `threads` threads (the
  /// caller one of them) and returns when all are done. Thread t owns the shares [t * per,
  /// (t + 1) * per), per = ceil(shares / threads), and runs them in order; a thread with none
  /// left takes the next share of another thread's range. So a thread that runs slower (a core
  /// shared with another task, a lower clock) hands its later shares to the others instead of
  /// holding up the call, while each share still goes first to the thread whose caches hold its
  /// data from the last call.
  void run_shares(int threads, int shares, const std::function<void(int)>& fn);
  /// In a forked child (runtime/fork.h): forgets the parent's threads and launch state.
  void after_fork_in_child();

 private:
  friend LaunchTrace last_launch_trace();
  friend std::vector<LaunchTrace> take_launch_traces();
  ThreadPool();
  void launch(int workers, int shares, const std::function<void(int)>& fn, int mode);
  struct Impl;
  Impl* impl_;
};

/// The number of CPUs in this process's affinity mask.
int affinity_cpus();

}  // namespace coopjit
