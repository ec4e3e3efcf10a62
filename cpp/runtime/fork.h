// coopjit across fork(): pthread_atfork handlers that leave a forked child a usable coopjit.
//
// A child of fork() has one thread, the one that called fork(), and a copy of the parent's
// memory: the worker pool's threads are gone, and any mutex another thread held at that moment
// stays locked forever. So:
//   prepare (in the parent, before fork): takes the locks whose state the child needs consistent,
//     in the order the code takes them: the CPU compile lock (so that no thread is inside LLVM's
//     ORC JIT or halfway through a cache insert), the JIT's lock, the SPIR-V backend's lock, and
//     the locks held only briefly and around no other (the maps of the in-memory caches, device
//     programs and open devices, device discovery's (a discovery under way finishes first), the
//     SPIR-V cache's, the tuned plans', the GEMM memo's, the disk cache's state); fork.cpp lists
//     the order. The worker pool's locks are not taken: a fork during a launch does not
//     wait for it. A fork thus waits at most for one compile (bounded by the disk cache's lock
//     timeout when another process compiles the same key).
//   parent (after fork, in the parent): releases them.
//   child (after fork, in the child): releases them; gives the pool a fresh state (no threads: they
//     start on the first multi-worker launch), closes the disk cache's compile-lock descriptors
//     inherited from the parent (an flock lock belongs to the open file description, shared with
//     the parent: the parent keeps its lock, the child no longer pins it), and gives the device
//     program cache fresh launch / compile locks. OpenCL and Level Zero contexts are not touched:
//     each remembers the process that created it and refuses (DeviceError) to work in another.
// The SPIR-V backend's own fork (spirv_target.cpp: a child that only runs the backend and calls
// _exit) is marked with InternalFork, and the handlers leave it alone (its thread holds some of
// the locks above).
#pragma once

namespace coopjit::fork_safety {

/// Registers the handlers (once; the extension module calls it at import).
void install();

/// While one lives on a thread, a fork() from that thread runs none of coopjit's handlers.
class InternalFork {
 public:
  InternalFork();
  ~InternalFork();
  InternalFork(const InternalFork&) = delete;
  InternalFork& operator=(const InternalFork&) = delete;
};

enum class Phase { prepare, parent, child };

}  // namespace coopjit::fork_safety

namespace coopjit {
// Each subsystem's part, in its own file; install() calls them in the order above for prepare
// and in the reverse order for parent and child.
void kernel_cache_fork(fork_safety::Phase phase);    // kernel_cache.cpp: compile lock, then the map's
void jit_fork(fork_safety::Phase phase);             // cpu_jit.cpp: the ORC JIT's lock
void spirv_backend_fork(fork_safety::Phase phase);   // spirv_target.cpp: the SPIR-V backend's lock
void device_program_fork(fork_safety::Phase phase);  // device_program.cpp
void devices_fork(fork_safety::Phase phase);         // devices.cpp: the open devices' map
void spirv_cache_fork(fork_safety::Phase phase);     // spirv_cache.cpp
void tuned_plans_fork(fork_safety::Phase phase);     // tuned_plans.cpp
void gemm_memo_fork(fork_safety::Phase phase);       // gemm.cpp
void disk_cache_fork(fork_safety::Phase phase);      // disk_cache.cpp: state, inherited lock fds
void thread_pool_fork(fork_safety::Phase phase);     // thread_pool.cpp: a fresh pool in the child
}  // namespace coopjit
