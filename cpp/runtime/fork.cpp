// The pthread_atfork handlers (fork.h).
#include "runtime/fork.h"

#include <pthread.h>

#include <cstring>
#include <mutex>

#include "core/error.h"

namespace coopjit::fork_safety {
namespace {

thread_local int internal_forks = 0;

using Part = void (*)(Phase);
// The order prepare takes the locks in (outer before inner); parent and child go backwards.
constexpr Part kParts[] = {kernel_cache_fork, jit_fork,         spirv_backend_fork, device_program_fork,
                           devices_fork,      spirv_cache_fork, tuned_plans_fork,   gemm_memo_fork,
                           disk_cache_fork,   thread_pool_fork};
constexpr int kCount = sizeof(kParts) / sizeof(kParts[0]);

void prepare() {
  if (internal_forks) return;
  for (int i = 0; i < kCount; ++i) kParts[i](Phase::prepare);
}
void parent() {
  if (internal_forks) return;
  for (int i = kCount - 1; i >= 0; --i) kParts[i](Phase::parent);
}
void child() {
  if (internal_forks) return;
  for (int i = kCount - 1; i >= 0; --i) kParts[i](Phase::child);
}

}  // namespace

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (int rc = ::pthread_atfork(prepare, parent, child))
      throw InternalError(cat("pthread_atfork failed: ", std::strerror(rc)));
  });
}

InternalFork::InternalFork() { ++internal_forks; }
InternalFork::~InternalFork() { --internal_forks; }

}  // namespace coopjit::fork_safety
