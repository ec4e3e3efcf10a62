// The table of tuned plans (tuned_plans.h).
#include "runtime/tuned_plans.h"

#include <atomic>
#include <iostream>
#include <mutex>

#include "core/error.h"
#include "runtime/fork.h"
#include "runtime/kernel.h"
#include "runtime/thread_pool.h"

namespace coopjit {
namespace {

struct Table {
  std::mutex mu;
  std::map<std::string, PlanOverrides> plans;
  std::atomic<int64_t> generation{0};
  std::atomic<bool> empty{true};
};
Table& table() {
  static Table t;
  return t;
}

}  // namespace

std::string gemm_signature(const GemmSpec& s) {
  std::string unit;
  for (auto [name, stride] : {std::pair{"a_r", s.sa_r}, {"b_c", s.sb_c}, {"c_r", s.sc_r}, {"c_c", s.sc_c}})
    if (stride == 1) unit += (unit.empty() ? "" : ",") + std::string(name);
  const std::string types = s.a_type == s.c_type && s.b_type == s.c_type
                                ? std::string(ir::name(s.c_type))
                                : cat(ir::name(s.a_type), "x", ir::name(s.b_type), "->", ir::name(s.c_type));
  return cat("gemm ", types, " ", s.M, "x", s.N, "x", s.K, " batch ", s.batch1 * s.batch2, " unit ",
             unit.empty() ? "none" : unit, s.accumulate ? " beta" : "", " pool ", ThreadPool::get().size());
}

void tuned_plans_fork(fork_safety::Phase phase) {
  if (phase == fork_safety::Phase::prepare)
    table().mu.lock();
  else
    table().mu.unlock();
}

void set_tuned_plan(const std::string& signature, const PlanOverrides& overrides) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  if (overrides.empty()) t.plans.erase(signature);
  else t.plans[signature] = overrides;
  t.empty = t.plans.empty();
  ++t.generation;
}

std::map<std::string, PlanOverrides> tuned_plans() {
  std::lock_guard<std::mutex> g(table().mu);
  return table().plans;
}

void clear_tuned_plans() {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  t.plans.clear();
  t.empty = true;
  ++t.generation;
}

int64_t tuned_generation() { return table().generation.load(std::memory_order_relaxed); }

GemmKernel gemm_kernel_tuned(const GemmSpec& spec, PlanOverrides* used) {
  PlanOverrides o;
  if (!table().empty) {
    const std::string sig = gemm_signature(spec);
    std::lock_guard<std::mutex> g(table().mu);
    auto it = table().plans.find(sig);
    if (it != table().plans.end()) o = it->second;
  }
  if (!o.empty()) {
    try {
      GemmKernel k = gemm_kernel(spec, o);
      if (used) *used = o;
      return k;
    } catch (const UserError& e) {  // a plan this build no longer accepts: the default instead
      if (debug_enabled("plan")) std::cerr << "[coopjit] tuned plan ignored: " << e.what() << "\n";
    }
  }
  if (used) used->clear();
  return gemm_kernel(spec);
}

}  // namespace coopjit
