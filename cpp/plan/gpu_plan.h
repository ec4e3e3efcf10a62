// Plans for SPIR-V devices (Intel GPUs; Intel's CPU OpenCL runtime in tests): how a GEMM or a
// reduction is spread over work-groups, subgroups and the lanes' registers. Plain values,
// printable and comparable like GemmPlan.
//
// The figures come from Intel's published descriptions of Xe-HPC (Data Center GPU Max,
// "Ponte Vecchio"; oneAPI GPU Optimization Guide, chapter "Intel Xe GPU Architecture", and the
// Data Center GPU Max Series technical overview): an Xe-core has 8 vector engines of 512 bits
// (SIMD16 for 32- and 64-bit floats: 256 FP32 or FP64 FMA lanes per clock per Xe-core) with 8
// hardware threads each; a thread has 128 general registers of 64 bytes (8 KiB; 256 registers in
// large-GRF mode); shared local memory is 128 KiB per Xe-core. Xe2 (Lunar Lake, Battlemage) keeps
// SIMD16 as the native width. So:
//   - subgroup size 16: one 64-byte register holds one f32 component of every lane (two
//     registers for f64), and 16 is the DPAS width of Xe-HPC / Xe2;
//   - register budget: at most ~96 of the 128 registers hold matrix data (the rest: addresses,
//     loop state, the compiler's temporaries), so no spills in the default GRF mode:
//       f32: C 32 x 32 (64 regs) + A 32 x 8 (16) + B 8 x 32 (16) = 96
//       f64: C 32 x 16 (64 regs) + A 32 x 4 (16) + B 4 x 16 (8)  = 88;
//   - work-group: 2 x 2 subgroups (64 work-items, 4 hardware threads of one Xe-core, a 64 x 64
//     f32 macro tile whose A and B rows the four threads share through the L1 cache), fewer
//     where the matrix is smaller than the macro tile;
//   - split: an Xe-core runs 8 x 8 = 64 hardware threads, so 64 / (sg_m sg_n) work-groups at a
//     time: workers = compute units (Xe-cores) x that. Data-parallel (one work-group per macro
//     tile) unless the last wave of tiles would leave more than a quarter of the workers idle
//     and there are at least two K tiles to share: then 2-tile Stream-K + DP (seeds/004), or
//     plain Stream-K when there are fewer tiles than workers. K tile kt = 8 kb.
// DPAS (Intel XMX, SPV_INTEL_subgroup_matrix_multiply_accumulate), for f16 / bf16 -> f32 and
// i8 / u8 -> i32 on devices whose smallest subgroup is 16 (Xe-HPC, Xe2): the instruction is
// M (1..8) x N 16 x K (16 for 16-bit, 32 for 8-bit inputs: 8 systolic stages of 32-bit
// channels), and the Data Center GPU Max 1550's published peaks (52 TFLOP/s FP32 vector,
// 839 TFLOP/s FP16 / BF16 and 1678 TOP/s INT8 on the matrix engines) make it 16x (32x for
// int8) the vector FMA path, so the plan takes it whenever the device has it. Tile: the same
// 32 x 32 accumulator (64 registers) with kb = one instruction's K: A 32 x 16 f16 or 32 x 32
// i8 is 16 registers, B as much: 96 registers, as above; each mul_add is 2 x 4 DPAS calls of
// M 8. 2-D block loads and stores (SPV_INTEL_2d_block_io, the same devices) read and write
// those tiles when the layout allows (lanes along unit-stride rows); loads of the next K step's
// blocks are prefetched.
// Speed on Intel GPUs cannot be measured here; these choices are unmeasured defaults.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/types.h"
#include "plan/gemm_plan.h"
#include "spec/gemm_spec.h"
#include "spec/reduce_spec.h"

namespace coopjit {

/// What the planner needs to know about a SPIR-V device.
struct GpuTargetInfo {
  std::string device;                   // "opencl:0"
  std::vector<int64_t> subgroup_sizes;  // supported subgroup sizes
  int64_t max_work_group_size = 256;
  bool is_gpu = true;
  bool dpas = false;     // OpSubgroupMatrixMultiplyAccumulateINTEL at subgroup 16
  bool block2d = false;  // SPV_INTEL_2d_block_io
  int64_t compute_units = 1;  // Xe-cores (OpenCL: CL_DEVICE_MAX_COMPUTE_UNITS); SMs on NVIDIA GPUs
  bool mma = false;      // NVIDIA tensor cores: mma.sync m16n8k16 (sm_80 and newer)
  int64_t shared_bytes = 48 * 1024;  // shared memory a work-group may have (NVIDIA: the opt-in limit)
  bool wgmma = false;    // NVIDIA sm_90 (Hopper): wgmma.mma_async, compiled for sm_90a
};

/// From the device's properties (DeviceError when there is no such device); "target:<name>"
/// gives named_gpu_target(name).
GpuTargetInfo gpu_target(const std::string& device);

/// A GPU described by name, for generating (and validating) SPIR-V without one: "xe-hpc" (Data
/// Center GPU Max), "xe2" (Lunar Lake, Battlemage): subgroups 16 / 32, DPAS and 2-D block I/O;
/// "generic": subgroup 16, neither. UserError for another name.
GpuTargetInfo named_gpu_target(const std::string& name);

struct GpuGemmPlan {
  ir::ScalarType dtype = ir::ScalarType::f32;  // accumulator
  ir::ScalarType a_type = ir::ScalarType::f32, b_type = ir::ScalarType::f32, c_type = ir::ScalarType::f32;
  // "row" computes C = A B; "col" computes C^T = B^T A^T, so that the kernel's rows (the lanes
  // of a subgroup) run along the unit-stride dimension of C and of the kernel's A.
  std::string layout = "col";
  int subgroup_size = 16;
  int mr = 32, nr = 32, kb = 8;  // the subgroup's tile: acc mr x nr, K step kb
  int sg_m = 2, sg_n = 2;        // subgroups per work-group along M and N
  bool unit_a = false;  // the kernel's A has row stride 1 (block reads)
  bool unit_b = false;  // the kernel's B has row stride 1 (2-D block reads)
  bool unit_ak = false; // the kernel's A has column stride 1 (not unit_a): VNNI channels load as 32-bit words
  bool unit_c = false;  // the kernel's C has row stride 1 (block reads and writes)
  bool accumulate = false;
  int dpas = 0;     // mul_add: 0 vector FMAs, 1 DPAS, 2 DPAS emulated (runs without matrix engines)
  int block2d = 0;  // loads / stores: 0 1-D blocks or per lane, 1 2-D blocks, 2 2-D blocks emulated
  bool nvidia = false;  // planned for an NVIDIA GPU (cuda:N, target:sm_XX): warps of 32
  int mma = 0;      // mul_add on NVIDIA tensor cores (mma.sync m16n8k16, bf16 / f16 -> f32): 0 off, 1 on
  // The multi-stage tensor-core pipeline (mma plans; simt_mma_pipeline.cpp): 0 off, else the
  // K steps in flight. The work-group's A / B panels go through shared memory (cp.async, swizzled,
  // ldmatrix); planned only when both operands have a unit-stride dimension, their other strides
  // and contiguous extents are multiples of 8 elements (16-byte chunks); the host runs a plan
  // without it when a pointer is not 16-byte aligned.
  int stages = 0;
  bool unit_bn = false;  // the kernel's B has column stride 1 (the pipeline reads it with ldmatrix.trans)
  // Hopper's warpgroup pipeline (simt_wgmma.cpp; sm_90 devices, bf16 / f16 -> f32, the same
  // operand conditions as `stages`): warps of 16 x nr tiles, sg_m a multiple of 4 (warpgroups of
  // 64 rows), nr 64 / 128 / 256, kb 64, wgmma.mma_async on 128-byte swizzled shared memory.
  // 0 off, 1 on. The module is compiled for sm_90a.
  int wgmma = 0;
  // The Tensor Memory Accelerator on wgmma plans (simt_wgmma.cpp): the A / B panels come in by
  // cp.async.bulk.tensor from tensor maps the host makes per call (cuTensorMapEncodeTiled, two
  // 128-byte kernel parameters after the IR's), completing on mbarriers, one per stage and
  // direction. 0 off, 1 on; the host runs the plan without it where a tensor map cannot describe
  // the operands (batched calls, bases not 16-byte aligned).
  int tma = 0;
  // 8-bit products on sm_90 whose op(A) is contiguous along M or op(B) along N: those operands are
  // first copied, transposed, into a workspace whose rows run along K (kmajor_copy.h), so that the
  // wgmma pipeline (which reads 8-bit operands only K-major) takes them. Bit 1: op(A), bit 2:
  // op(B) (the caller's operands); 0 none. The plan's other fields are those of the product on the
  // copies (kmajor_spec), whose K-major rows are kmajor_ld(K) elements apart.
  int kmajor = 0;
  // Warp specialization (TMA plans of one unbatched product, bf16 / f16 or 8-bit inputs, any split; simt_tma_ws.cpp): producer warps after the
  // sg_m x sg_n consumer warps, whose elected lane issues every K step's TMA copies as soon as the
  // step's slot is released; the consumers only wait for full slots, issue the wgmmas and release
  // the slots when those wgmmas have retired. One tile a block (the lowering's walk over tiles
  // block, block + grid, ... is one tile here: a persistent loop in the recipe measured slower).
  // 0 off, 1 one producer warp, 2 a producer warpgroup (4 warps, one of which works) so that
  // setmaxnreg can move registers from it to the consumers.
  int ws = 0;
  // The epilogue through shared memory (wgmma plans; simt_wgmma.cpp, frag_store): each warp's
  // region of this many bytes after the stages, where its accumulators are staged so that C is
  // written in 16-byte chunks, consecutive lanes on consecutive chunks, instead of one element a
  // lane and store after a gather into the coopmatrix layout. 0 off; by default the largest of
  // 3072, 1536, 768 that fits the shared memory (plan override epi_smem: 0 / 1).
  int epi_smem = 0;
  // wgmma TMA plans whose epilogue goes through the staging (alpha / beta and fused steps, whose
  // activations stay on the wgmma fragments since session 21; C of bf16 / f16 / f32 / s32): C written from each warp's staging by the Tensor Memory Accelerator
  // (cp.async.bulk.tensor shared -> global, simt_wgmma.cpp), from a third tensor map the host makes
  // for C; edge tiles clipped by the copy engine. Each warp's region then holds one or two boxes
  // of 16 x (128 / C's element bytes) (epi_smem 4096 or 2048, the regions 1024-byte aligned), so
  // that a warp's store of one box runs while it writes the next (and, in a persistent walk, the
  // next tile's K loop). The host runs the plan without it where C's base or strides are not
  // 16-byte multiples. 0 off, 1 on, 2 (the default) boxes of a warpgroup (64 rows of 128 bytes)
  // where C is 16-bit with contiguous rows (layout col), else as 1 (plan override tma_store: 0 / 1 / 2).
  int tma_store = 0;
  // ws DP plans of one tile a block (not persistent, no cluster): the epilogue's staging (epi_smem)
  // placed in the stage slots, from their first byte, instead of after them. The consumer warps
  // meet at a barrier once their last wgmmas have retired (every TMA copy of the block's one tile
  // has landed by then and the producer issues no more), before any warp writes its region. The
  // shared memory then holds one stage more: 128 x 320 blocks take 4 stages of 56 KiB (224 KiB)
  // with their staging and TMA stores (kWideFourStages). 0 off, 1 on (plan override epi_alias).
  int epi_alias = 0;
  // ws plans: a persistent grid of min(tiles, SMs) blocks, block g taking tiles g, g + grid, ...
  // (the recipe's loop over tiles; the producer walks the same tiles), so that the copies of a
  // block's next tile run while its consumers write this one's C. 0 one tile a block. Stream-K
  // ws plans are always persistent (their Stream-K parts, then their DP tiles).
  int persistent = 0;
  // Stream-K ws plans: the split tiles' fix-up inside the kernel (gemm_recipe_gpu.cpp): a block
  // that has a later part of a tile writes it to the workspace and sets its flag; the block with
  // the tile's first K tiles (its last part) waits for those flags, adds the parts and writes C.
  // Only where the blocks are resident together (a persistent grid of at most the SMs, one block
  // an SM); 0: a second launch adds the parts (plan override sk_flags: 0 / 1).
  int sk_flags = 0;
  // Stream-K ws plans: each Stream-K part's K steps walked from its last down to its first (the
  // producer's copies, simt_tma_ws.cpp), so that the blocks streaming at once work on K panels of
  // one or two offsets rather than one an SM (L2 reuse); 0 upward (plan override sk_down: 0 / 1).
  int sk_down = 0;
  // Debug (plan override sk_trace: 0 / 1; never chosen by the planner): sk_flags plans whose
  // consumer warps write %clock / %globaltimer_lo at the boundaries of each unit of the walk
  // (part start, K loop end, flag wait, partial stored, epilogue end) into the flags' allocation
  // after the flags (gemm_recipe_gpu.cpp; read back with _core.gpu_stream_k_flags).
  int sk_trace = 0;
  // sk_flags plans: the producer prefetches into L2 the successor's partial tile that a tile's
  // head adds, once it has issued that part's copies (simt_tma_ws.cpp; plan override sk_prefetch: 0 / 1).
  int sk_prefetch = 0;
  // sk_flags plans: the successor's partial tile read through the pipeline's stage slots, which
  // the producer hands over as pseudo K steps after the part's copies: cp.async into shared
  // memory, then read back (simt_tma_ws.cpp ws_stage_read; plan override sk_stage: 0 / 1). Only
  // where each warp's 16 x NR f32 region lies in one slot and the partial fits the slots; there by
  // default (kSkStageDefault).
  int sk_stage = 0;
  // sk_flags plans: the partial tile that a part without the tile's head leaves for its
  // predecessor written through the stage slots as well (simt_tma_ws.cpp ws_stage_store): the
  // producer hands them over as pseudo K steps after the part, the consumers write their
  // fragments there (st.shared) and go on to their next part, and the producer stores the tile to
  // the workspace with cp.async.bulk and sets the flags once it has landed (plan override
  // sk_stage_store: 0 / 1; 2: a bulk group a slot, each slot reused once its group is read;
  // where sk_stage fits; kSkStageStoreDefault).
  int sk_stage_store = 0;
  // sk_flags plans: each flag set by one work-item of the warp after a warp barrier, not by all 32
  // with their own release exchanges (plan override sk_one_release: 0 / 1; sk_flags plans' default,
  // kSkOneReleaseDefault).
  int sk_one_release = 0;
  // sk_stage plans: blocks 2c and 2c + 1 launched as a cluster of 2 (no multicast: each block its
  // own copies) that pass the partial of the tile they share through distributed shared memory,
  // not L2 (simt_tma_ws.cpp ws_pair_send): block 2c + 1 walks its first part (the tile's tail)
  // last, its consumers write its sum (st.shared::cluster) into the stage slots that block 2c's
  // producer handed over for its head's successor and arrive on a barrier there (release, cluster
  // scope), and block 2c adds it from its own shared memory: no workspace, no flag for that seam. The seams between pairs
  // (block 2c + 1's head, block 2c + 2's tail) keep the workspace and flags, each going the way
  // that leaves no wait: the part walked first stores its sum, the other (walked just before the
  // block's pair part) adds it and writes C (gemm_recipe_gpu.cpp pair_swap). Needs every worker's
  // range a tile or more (each split tile in two parts), an even number of workers, sk_stage and
  // neither sk_stage_store, sk_prefetch nor sk_trace (plan override sk_pair: 0 / 1; kSkPairDefault).
  int sk_pair = 0;
  // sk_trace's layout: i32 entry ((g kSkTraceUnits + min(u, kSkTraceUnits - 1)) kSkTraceSlots + e)
  // sg_m sg_n + warp of block g's unit u, after the flags' (workers + 1) sg_m sg_n entries.
  static constexpr int kSkTraceUnits = 8, kSkTraceSlots = 16;
  // The tile walk: 0 down M (tile t at M index t % tiles_m); g > 0: bands of g M tiles, down M
  // inside a band, band by band across N (gemm_recipe_gpu.cpp). The planner's own: 16 on large
  // persistent 16-bit and 8-bit 128 x 256 DP plans (kTileBands, kTileBandsInt8,
  // gpu_plan_internal.h), else 0.
  int group_m = 0;
  // ws DP plans: clusters of this many blocks (2) that share B's panels (simt_tma_ws.cpp): block
  // pairs take tiles at the same N and adjacent M; each block copies its A panel and half of the B
  // panel, multicast by TMA to both, so that L2 sends B's panels once a pair. 0 off. Needs tiles
  // along M even, group_m 0 or even and split dp (plan override cluster: 0 / 2).
  int cluster = 0;
  std::string split = "dp";  // "dp", "sk" or "sk+dp" (seeds/004), or "dp+sk": DP waves, the last wave's tiles streamed
  int kt = 64;               // the Stream-K K tile (a multiple of kb)
  int64_t workers = 1;       // Stream-K work-groups
  GemmEpilogue epilogue;     // fused steps before the store (gemm_spec.h); part of the code key

  int work_group_size() const { return subgroup_size * sg_m * sg_n; }
  /// The blocks of a persistent grid over `tiles` tiles: min(tiles, workers), even with clusters.
  int64_t persistent_grid(int64_t tiles) const {
    const int64_t g = std::min(tiles, workers);
    return cluster && g > 1 ? g - g % cluster : sk_pair && g > 1 ? g - g % 2 : g;
  }
  /// tma plans: the rows (along M for A, N for B) of one tensor-map box of an operand whose
  /// contiguous dimension is K: the largest of 256, 128, 64 that divides the block's rows (a
  /// box has at most 256 rows), else (N tiles a multiple of 8, not of 64) the block's rows when at
  /// most 256. Operands contiguous along M / N take boxes of 64 x kb.
  int tma_box_rows(bool a) const {
    const int rows = a ? mr * sg_m : (cluster ? nr * sg_n / cluster : nr * sg_n);  // clusters: a block copies its part of B
    return rows % 256 == 0 ? 256 : rows % 128 == 0 ? 128 : rows % 64 == 0 || rows > 256 ? 64 : rows;
  }
  std::string key() const;
  /// What the kernel's code depends on (key() less the Stream-K launch: sk or sk+dp, workers).
  std::string code_key() const;
  std::string str() const { return key(); }
  std::map<std::string, std::string> fields() const;
  /// The same orientation as a CPU GemmPlan, for gemm_args().
  GemmPlan as_cpu_plan() const;
};

// The f32 FMA pipeline's padding a stage (simt_mma_pipeline.cpp): a K-contiguous A or B is stored
// [k][m] / [k][n] with rows one 16-byte chunk longer than the panel, so the block's transposing
// copies fall in distinct banks. Counted for every f32 FMA pipeline plan (the lowering pads only
// the K-contiguous panels): kb chunks a panel a stage.
inline int64_t fma_stage_pad(const GpuGemmPlan& p) {
  return p.stages && !p.mma && !p.wgmma && !p.dpas && p.a_type == ir::ScalarType::f32 && p.dtype == ir::ScalarType::f32
             ? 2 * int64_t(p.kb) * 16 : 0;
}

/// The spec of the product on the K-major copies of the operands `kmajor` names (GpuGemmPlan::kmajor).
GemmSpec kmajor_spec(const GemmSpec& spec, int kmajor);
/// The copies' row stride in elements: K rounded up to 16 (16-byte rows for the tensor maps).
inline int64_t kmajor_ld(int64_t K) { return (K + 15) / 16 * 16; }

/// overrides: layout (0 row, 1 col), subgroup_size, mr, nr, kb, sg_m, sg_n, dpas, block2d (0, 1,
/// 2 as in GpuGemmPlan; 1 needs a target that has it), mma (0, 1; NVIDIA), split (0 dp, 1 sk,
/// 2 sk+dp, 3 dp+sk), kt, workers, wgmma (0, 1; sm_90 targets), tma (0, 1; wgmma plans), group_m (0..256), kmajor (0, 1: int8
/// operands copied K-major on sm_90).
/// UserError for an unknown or illegal one.
GpuGemmPlan plan_gpu_gemm(const GemmSpec& spec, const GpuTargetInfo& target, const PlanOverrides& overrides = {});
/// The tile area a block of `p` computes over the product's waves: whole waves of its tiles (DP),
/// or the tiles' area shared evenly among the workers (Stream-K splits); the planner compares the
/// two orientations of a Hopper plan by it.
double gpu_tile_work(const GpuGemmPlan& p, const GemmSpec& spec);

struct GpuReducePlan {
  int subgroup_size = 16;
  int tile_rows = 1, tile_cols = 64;  // the accumulator tile of one subgroup
  int subgroups = 4;                   // per work-group
  bool unit = true;                    // X's column stride is 1
  // Parts of the reduced dimension (row / column forms): with few tiles (few long rows, or the
  // columns of a wide-enough array reduced down few tile columns) each tile's rows or columns are
  // split among `parts` workers, whose partials (a workspace in the accumulator type) a second
  // pass reduces. 1: one worker walks the whole dimension.
  int64_t parts = 1;
  std::string key(const ReduceSpec& s) const;
};

GpuReducePlan plan_gpu_reduce(const ReduceSpec& spec, const GpuTargetInfo& target);

}  // namespace coopjit
