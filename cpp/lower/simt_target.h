// The target of the SIMT lowering: what differs between a SPIR-V device (OpenCL built-ins,
// SPV_INTEL_subgroups) and an NVIDIA GPU (nvptx64, llvm.nvvm.* intrinsics) behind one small
// interface, so that one lowering (simt_*.cpp) writes both: the triple and kernel marking, the
// lane / subgroup / work-group ids, shuffles and broadcasts across a subgroup, the work-group
// barrier and shared memory's address space, and the few scalar functions whose spelling differs
// (exp, log, tanh, sqrt, fabs, rounding, f32 -> bf16). Intel-only paths (1-D and 2-D block I/O,
// DPAS) ask intel_subgroups() and call SPIR-V built-ins themselves. Private to cpp/lower/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "ir/ir.h"

namespace coopjit {

class SimtTarget {
 public:
  virtual ~SimtTarget() = default;
  /// "spirv64" or "nvptx64:sm_90".
  virtual std::string name() const = 0;
  virtual std::string triple() const = 0;
  /// Whether subgroup size S is one the target runs (NVPTX: a warp, 32).
  virtual bool subgroup_ok(int S) const = 0;
  /// Makes `f` a kernel entry point launched in work-groups of work_group_size work-items in
  /// subgroups of subgroup_size.
  virtual void mark_kernel(llvm::Function& f, int subgroup_size, int work_group_size) const = 0;
  /// The lane in the subgroup (i32).
  virtual llvm::Value* lane_id(llvm::IRBuilder<>& b) const = 0;
  /// Subgroup in the work-group, subgroups per work-group, work-group and work-groups along dim:
  /// WorkId's ids other than the lane, as i64.
  virtual llvm::Value* work_id(llvm::IRBuilder<>& b, ir::WorkId which, int dim) const = 0;
  /// x of lane src_lane (i32, any value per lane) on each lane; convergent.
  virtual llvm::Value* shuffle(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* src_lane) const = 0;
  /// x of lane (p ^ mask) on each lane p.
  virtual llvm::Value* shuffle_xor(llvm::IRBuilder<>& b, llvm::Value* x, int mask) const = 0;
  /// x of lane src_lane (a constant) on every lane.
  virtual llvm::Value* broadcast(llvm::IRBuilder<>& b, llvm::Value* x, int src_lane) const = 0;
  /// A work-group barrier that also orders shared (work-group) memory.
  virtual void barrier(llvm::IRBuilder<>& b) const = 0;
  /// The IR's barrier op (HLSL GroupMemoryBarrierWithGroupSync): a work-group barrier that orders
  /// shared and global memory.
  virtual void group_barrier(llvm::IRBuilder<>& b) const { barrier(b); }
  /// The address space of work-group shared memory (SPIR-V Workgroup, PTX .shared: both 3) and
  /// of global memory (both 1).
  virtual unsigned shared_addrspace() const { return 3; }
  virtual unsigned global_addrspace() const { return 1; }
  /// Read-only tables (the lane tables of general shuffles): SPIR-V UniformConstant 2, PTX .const 4.
  virtual unsigned constant_addrspace() const = 0;
  /// fabs / exp / log / tanh / sqrt of a float scalar of type t (f16, f32, f64).
  virtual llvm::Value* math(llvm::IRBuilder<>& b, ir::UnOp u, ir::ScalarType t, llvm::Value* x) const = 0;
  /// 1 / x (f32) by the hardware's approximate reciprocal for a divisor in [1, inf] (binary div's
  /// attribute recip_approx); nullptr: none, IEEE division.
  virtual llvm::Value* recip_approx(llvm::IRBuilder<>&, llvm::Value*) const { return nullptr; }
  /// erf x (f32) to an absolute error near f32's epsilon, for a sum 1 + erf x (unary erf's attribute
  /// erf_absolute, GELU in gemm_epilogue.cpp); nullptr: none, math's erf.
  virtual llvm::Value* erf_absolute(llvm::IRBuilder<>&, llvm::Value*) const { return nullptr; }
  /// x (f32) rounded to the nearest integer, ties to even.
  virtual llvm::Value* round_even(llvm::IRBuilder<>& b, llvm::Value* x) const = 0;
  /// The bf16 bits (i16) of x (f32), rounded to nearest even.
  virtual llvm::Value* f32_to_bf16(llvm::IRBuilder<>& b, llvm::Value* x) const = 0;
  /// Whether the target adds floats of type t to global memory atomically (atomicrmw fadd);
  /// otherwise accumulate uses a compare-exchange loop.
  virtual bool float_atomic_add(ir::ScalarType) const { return false; }
  // ---- flags between work-groups (the IR's flag.set / flag.wait; Stream-K's partial tiles) -------
  /// A store of v (i32) to the flag at p (global memory) that releases this work-item's earlier
  /// writes at device scope, as a read-modify-write (an exchange): when every work-item of a
  /// subgroup sets the flag, an acquire that reads the last value synchronizes with all of them
  /// (read-modify-writes continue a release's sequence). The default: LLVM's atomicrmw xchg
  /// release (SPIR-V: OpAtomicExchange; LLVM 22's SPIR-V backend writes atomic stores as plain ones).
  virtual void flag_store_release(llvm::IRBuilder<>& b, llvm::Value* p, llvm::Value* v) const;
  /// flag_store_release by the work-item whose `lane` (i32) is 0 only, after a subgroup barrier
  /// (flag.set's one_lane); the default: every work-item's (the same flag, released by all).
  virtual void flag_store_release_first(llvm::IRBuilder<>& b, llvm::Value* p, llvm::Value* v, llvm::Value* lane) const {
    (void)lane;
    flag_store_release(b, p, v);
  }
  /// A load of the flag at p (i32) that acquires at device scope. Default: atomicrmw or 0, acquire.
  virtual llvm::Value* flag_load_acquire(llvm::IRBuilder<>& b, llvm::Value* p) const;
  /// A pause between polls of a spin loop (NVPTX: nanosleep); default none.
  virtual void spin_pause(llvm::IRBuilder<>&) const {}
  /// Every work-item of the subgroup reaches this point before any goes on; convergent.
  virtual void subgroup_sync(llvm::IRBuilder<>& b) const = 0;
  /// Ends the kernel with an error the launch reports (NVPTX: trap); the default refuses with a UserError.
  virtual void trap(llvm::IRBuilder<>& b) const;
  /// cp.async.bulk.prefetch.L2 (sm_90): `bytes` (i32, a multiple of 16) at global address `addr` (i64, 16-byte
  /// aligned) fetched into L2; the default refuses with an InternalError (only sm_90 plans ask for it).
  virtual void prefetch_l2_bulk(llvm::IRBuilder<>& b, llvm::Value* addr, llvm::Value* bytes) const;
  /// flag.set's trace forms (debug: Stream-K's sk_trace): this SM's cycle counter (`global` false)
  /// or the device's nanosecond timer (true), the low 32 bits (i32); the default refuses with a UserError.
  virtual llvm::Value* trace_clock(llvm::IRBuilder<>& b, bool global) const;
  /// SPV_INTEL_subgroups' block reads / writes, DPAS and 2-D block I/O are available.
  virtual bool intel_subgroups() const { return false; }
  /// mma.sync m16n8k16 (NVIDIA tensor cores, sm_80 and newer).
  virtual bool tensor_cores() const { return false; }

  // ---- the multi-stage tensor-core pipeline (simt_mma_pipeline.cpp) ------------------------------
  /// Asynchronous copies from global to shared memory in commit groups (cp.async, sm_80) and
  /// warp-wide loads of 8 x 8 matrices from shared memory (ldmatrix). SPIR-V has neither: its
  /// implementations refuse with a UserError, and the lowering does not ask for them there.
  virtual bool async_copies() const { return false; }
  /// Starts a copy of 16 bytes from src (global, 16-byte aligned) to dst (shared, 16-byte
  /// aligned); where `valid` (i1) is false, dst gets 16 zero bytes and src is not read.
  virtual void async_copy16(llvm::IRBuilder<>& b, llvm::Value* dst, llvm::Value* src, llvm::Value* valid) const;
  /// The same for 4 bytes (4-byte aligned src and dst), through L1 (cp.async.ca).
  virtual void async_copy4(llvm::IRBuilder<>& b, llvm::Value* dst, llvm::Value* src, llvm::Value* valid) const;
  /// Closes the group of the copies this work-item started since the last commit.
  virtual void async_commit(llvm::IRBuilder<>& b) const;
  /// Waits until at most `pending` of this work-item's committed groups are unfinished.
  virtual void async_wait(llvm::IRBuilder<>& b, int pending) const;
  /// Four 8 x 8 matrices of 16-bit elements from shared memory (ldmatrix.x4): lane l gives the
  /// address of row l % 8 of matrix l / 8 (16 contiguous bytes); lane p receives, in word j,
  /// row p / 4, elements 2 (p % 4) and 2 (p % 4) + 1 of matrix j (of its transpose: `trans`).
  virtual std::vector<llvm::Value*> load_matrix_x4(llvm::IRBuilder<>& b, llvm::Value* row, bool trans) const;

  // ---- Hopper warpgroup matrices (simt_wgmma.cpp; NVIDIA sm_90a) ----------------------------------
  /// wgmma.mma_async and its fences: a warpgroup (4 consecutive warps) multiplies operands in
  /// shared memory named by matrix descriptors. SPIR-V and NVIDIA targets other than sm_90a have
  /// none: the defaults refuse with a UserError.
  virtual bool warpgroup_mma() const { return false; }
  /// D (n / 2 f32 per work-item, the instruction's D fragment) += A (64 x 16) B (16 x n), A and B
  /// bf16 (`bf16`) or f16 in shared memory described by desc_a / desc_b (i64); trans_a / trans_b:
  /// the operand is M- / N-major rather than K-major. Returns the new D; asynchronous until
  /// wgmma_wait.
  virtual std::vector<llvm::Value*> wgmma(llvm::IRBuilder<>& b, const std::vector<llvm::Value*>& d, llvm::Value* desc_a,
                                          llvm::Value* desc_b, int n, bool bf16, bool trans_a, bool trans_b) const;
  /// The 8-bit form: D (n / 2 s32 per work-item, the same fragment) += A (64 x 32) B (32 x n), A
  /// s8 (`a_signed`) or u8, B s8 (`b_signed`) or u8, both K-major (PTX ISA: 8-bit wgmma has no
  /// transpose). Exact (wrapping) s32 sums.
  virtual std::vector<llvm::Value*> wgmma_int8(llvm::IRBuilder<>& b, const std::vector<llvm::Value*>& d, llvm::Value* desc_a,
                                               llvm::Value* desc_b, int n, bool a_signed, bool b_signed) const;
  /// wgmma.fence (before the first wgmma of a group), commit_group, wait_group(pending).
  virtual void wgmma_fence(llvm::IRBuilder<>& b) const;
  virtual void wgmma_commit(llvm::IRBuilder<>& b) const;
  virtual void wgmma_wait(llvm::IRBuilder<>& b, int pending) const;
  /// fence.proxy.async.shared::cta: this work-item's completed shared-memory writes become visible
  /// to the asynchronous proxy (the tensor cores' reads of wgmma).
  virtual void async_proxy_fence(llvm::IRBuilder<>& b) const;

  // ---- the Tensor Memory Accelerator and mbarriers (simt_wgmma.cpp; NVIDIA sm_90) ----------------
  /// cp.async.bulk.tensor and mbarrier transaction counts; the defaults refuse with a UserError.
  /// Barriers and destinations are addresses in the shared-memory window (i32).
  virtual bool async_bulk_copies() const { return false; }
  /// mbarrier.init with `count` arrivals a phase; mbarrier.inval; fence.mbarrier_init (the
  /// inits visible to the other threads' and the copy engine's accesses, with a barrier after it).
  virtual void mbarrier_init(llvm::IRBuilder<>& b, llvm::Value* bar, int count) const;
  virtual void mbarrier_inval(llvm::IRBuilder<>& b, llvm::Value* bar) const;
  virtual void mbarrier_init_fence(llvm::IRBuilder<>& b) const;
  /// One arrival; one arrival that also expects `bytes` (i32) of transactions in this phase.
  virtual void mbarrier_arrive(llvm::IRBuilder<>& b, llvm::Value* bar) const;
  virtual void mbarrier_arrive_expect_tx(llvm::IRBuilder<>& b, llvm::Value* bar, llvm::Value* bytes) const;
  /// mbarrier.try_wait.parity: whether the phase of parity `parity` (i32, 0 / 1) has completed (i1).
  virtual llvm::Value* mbarrier_try_wait(llvm::IRBuilder<>& b, llvm::Value* bar, llvm::Value* parity) const;
  /// cp.async.bulk.tensor.2d: the box at coordinates (x, y) (i32, x the contiguous dimension)
  /// of the tensor map at generic address `map` into shared memory at `dst`, its bytes counted
  /// on the mbarrier `bar`.
  virtual void tensor_load_2d(llvm::IRBuilder<>& b, llvm::Value* dst, llvm::Value* map, llvm::Value* x, llvm::Value* y,
                              llvm::Value* bar) const;

  // ---- thread-block clusters (simt_tma_ws.cpp, plan field cluster; NVIDIA sm_90) -----------------
  /// The kernel launched in clusters of `ctas` blocks along x (.reqnctapercluster ctas, 1, 1).
  virtual void mark_cluster(llvm::Function& f, int ctas) const;
  /// This block's rank in its cluster (i32).
  virtual llvm::Value* cluster_rank(llvm::IRBuilder<>& b) const;
  /// Every thread of the cluster: barrier.cluster.arrive.release then wait.acquire (threads may
  /// reach it apart: not .aligned).
  virtual void cluster_sync(llvm::IRBuilder<>& b) const;
  /// One arrival on the mbarrier at `bar` (this block's shared-window
  /// address) in the shared memory of the cluster's block `rank` (i32; mapa).
  virtual void mbarrier_arrive_cluster(llvm::IRBuilder<>& b, llvm::Value* bar, llvm::Value* rank) const;
  /// tensor_load_2d into the same shared-window address `dst` and completing on the same mbarrier
  /// offset `bar` in each block of the cluster whose bit is set in `mask` (i16; .multicast::cluster).
  virtual void tensor_load_2d_multicast(llvm::IRBuilder<>& b, llvm::Value* dst, llvm::Value* map, llvm::Value* x, llvm::Value* y,
                                        llvm::Value* bar, llvm::Value* mask) const;
};

/// The SPIR-V target (OpenCL kernels for spirv64, Intel's subgroup built-ins).
std::unique_ptr<SimtTarget> spirv_simt_target();
/// The NVPTX target for one SM architecture ("sm_80", "sm_90"): warps of 32 lanes.
std::unique_ptr<SimtTarget> nvptx_simt_target(const std::string& sm);
/// By name: "spirv64", or "nvptx64:sm_XX"; UserError for another.
std::unique_ptr<SimtTarget> simt_target(const std::string& name);

/// Calls an OpenCL / SPIR-V built-in function (declared on first use, spir_func calling
/// convention); convergent ones are marked so, the others as reading no memory.
llvm::Value* spirv_builtin(llvm::IRBuilder<>& b, const std::string& name, llvm::Type* ret,
                           const std::vector<llvm::Value*>& args, bool convergent = false);

}  // namespace coopjit
