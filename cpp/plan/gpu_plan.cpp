// The planners for SPIR-V and NVIDIA devices (gpu_plan.h): the targets, GpuGemmPlan's text forms,
// plan_gpu_gemm as the list of its phases (gpu_plan_internal.h; one file each group), and
// plan_gpu_reduce.
#include "plan/gpu_plan.h"

#include <algorithm>

#include "core/error.h"
#include "plan/gpu_plan_internal.h"
#include "runtime/devices.h"

namespace coopjit {

GpuTargetInfo gpu_target(const std::string& device) {
  if (device.rfind("target:", 0) == 0) return named_gpu_target(device.substr(7));
  const DeviceInfo& d = device_info(device);
  GpuTargetInfo t;
  t.device = device;
  t.subgroup_sizes = d.subgroup_sizes;
  t.max_work_group_size = d.max_work_group_size;
  t.is_gpu = d.type == "gpu";
  t.compute_units = std::max<int64_t>(1, d.compute_units);
  // The subgroup-16 forms of DPAS and 2-D block I/O are those of devices whose smallest subgroup
  // is 16 (cl_intel_subgroup_matrix_multiply_accumulate; Xe-HPG's DPAS is SIMD8).
  const bool sg16 = !d.subgroup_sizes.empty() && *std::min_element(d.subgroup_sizes.begin(), d.subgroup_sizes.end()) == 16;
  t.dpas = d.dpas == 1 && sg16;
  t.block2d = d.block2d == 1 && sg16;
  t.mma = d.backend == "cuda";  // cuda devices are sm_80 or newer (runtime/cuda.h)
  if (t.mma && d.local_memory_bytes > 0) t.shared_bytes = d.local_memory_bytes;  // the opt-in limit
  t.wgmma = t.mma && d.arch == "sm_90";  // Hopper (compute capability 9.0)
  return t;
}

GpuTargetInfo named_gpu_target(const std::string& name) {
  GpuTargetInfo t;
  t.device = "target:" + name;
  if (name == "xe-hpc" || name == "xe2") {
    t.subgroup_sizes = {16, 32};
    t.max_work_group_size = 1024;
    t.dpas = t.block2d = true;
    t.compute_units = name == "xe-hpc" ? 128 : 20;  // Data Center GPU Max 1550; Arc B580
  } else if (name == "sm_80" || name == "sm_90") {  // NVIDIA A100 / H100 SXM: warps of 32, 1024 threads a block
    t.subgroup_sizes = {32};
    t.max_work_group_size = 1024;
    t.compute_units = name == "sm_80" ? 108 : 132;
    t.mma = true;
    t.shared_bytes = name == "sm_80" ? 166912 : 232448;  // A100 163 KiB, H100 227 KiB a block (opt-in)
    t.wgmma = name == "sm_90";
  } else if (name == "generic") {
    t.subgroup_sizes = {16};
  } else {
    throw UserError(cat("unknown GPU target '", name, "' (known: xe-hpc, xe2, generic, sm_80, sm_90)"));
  }
  return t;
}

std::string GpuGemmPlan::code_key() const {
  return cat("gpugemm.", ir::name(a_type), "x", ir::name(b_type), "to", ir::name(c_type), ".", ir::name(dtype), ".",
             layout, ".s", subgroup_size, ".m", mr, "n", nr, "k", kb, ".wg", sg_m, "x", sg_n, unit_a ? ".ua" : ".ga", unit_ak ? ".uak" : "", unit_b ? ".ub" : "",
             unit_c ? ".uc" : ".gc", accumulate ? ".acc" : "", dpas ? cat(".dpas", dpas) : "",
             block2d ? cat(".b2d", block2d) : "", mma ? ".mma" : "", stages ? cat(".pipe", stages, unit_bn ? "n" : "k") : "",
             wgmma ? ".wgmma" : "", tma ? ".tma" : "", ws ? cat(".ws", ws) : "", epi_smem ? cat(".epi", epi_smem) : "", epi_alias ? ".epia" : "", tma_store ? cat(".tmast", tma_store == 2 ? "2" : "") : "", persistent ? ".pers" : "",
             sk_flags ? ".flags" : "", sk_down ? ".down" : "", sk_trace ? ".trace" : "", sk_prefetch ? ".pf" : "", sk_stage ? ".stg" : "", sk_stage_store ? (sk_stage_store == 2 ? ".sst2" : ".sst") : "", sk_one_release ? ".rel1" : "", sk_pair ? ".pair" : "", group_m ? cat(".gm", group_m) : "", cluster ? cat(".cl", cluster) : "",
             split == "dp" ? std::string() : cat(".streamk.kt", kt), epilogue.key());
}

std::string GpuGemmPlan::key() const {
  const std::string k = kmajor ? cat(code_key(), ".kmajor", kmajor) : code_key();  // the copies: same code, another launch
  return split == "dp" ? k : cat(k, ".", split == "sk" ? "sk" : split == "sk+dp" ? "skdp" : "dpsk", ".w", workers);
}

std::map<std::string, std::string> GpuGemmPlan::fields() const {
  return {{"dtype", std::string(ir::name(dtype))},
          {"a_type", std::string(ir::name(a_type))},
          {"b_type", std::string(ir::name(b_type))},
          {"c_type", std::string(ir::name(c_type))},
          {"layout", layout},
          {"subgroup_size", std::to_string(subgroup_size)},
          {"simd_width", std::to_string(subgroup_size)},
          {"mr", std::to_string(mr)},
          {"nr", std::to_string(nr)},
          {"kb", std::to_string(kb)},
          {"sg_m", std::to_string(sg_m)},
          {"sg_n", std::to_string(sg_n)},
          {"work_group_size", std::to_string(work_group_size() + (ws == 2 ? 128 : ws ? 32 : 0))},  // ws: the producers too
          {"macro_tile", cat(mr * sg_m, "x", nr * sg_n)},
          {"unit_stride_a", unit_a ? "true" : "false"},
          {"unit_stride_a_k", unit_ak ? "true" : "false"},
          {"unit_stride_b", unit_b ? "true" : "false"},
          {"unit_stride_c", unit_c ? "true" : "false"},
          {"accumulate", accumulate ? "true" : "false"},
          {"split", split},
          {"kt", std::to_string(kt)},
          {"workers", std::to_string(workers)},
          {"dpas", dpas == 0 ? "no" : dpas == 1 ? "yes" : "emulated"},
          {"block2d", block2d == 0 ? "no" : block2d == 1 ? "yes" : "emulated"},
          {"mma", mma ? (ir::size_in_bytes(a_type) == 1 ? "yes: mma.sync m16n8k32 (tensor cores)" : "yes: mma.sync m16n8k16 (tensor cores)") : "no"},
          {"stages", std::to_string(stages)},
          {"group_m", std::to_string(group_m)},
          {"cluster", cluster ? cat(cluster, ": clusters of blocks at the same N, B's panels multicast by TMA (half copied by each)") : "no"},
          {"ws", ws == 0 ? "no"
                 : ws == 1 ? "yes: a producer warp (TMA) and consumer warpgroups (wgmma)"
                           : "2: a producer warpgroup (TMA) and consumer warpgroups (wgmma), setmaxnreg"},
          {"epi_smem", epi_smem ? cat(epi_smem, ": bytes of shared memory a warp to stage the accumulators; C written in 16-byte chunks")
                                : "no"},
          {"tma_store", tma_store == 2 ? "2: C written from the staging by cp.async.bulk.tensor, a box a warpgroup where C's rows are contiguous (16-bit C)"
                        : tma_store ? "yes: C written from the staging by cp.async.bulk.tensor (a tensor map for C)" : "no"},
          {"epi_alias", epi_alias ? "yes: the epilogue's staging in the stage slots, after a barrier of the consumer warps (one tile a block)" : "no"},
          {"persistent", persistent ? "yes: a grid of min(tiles, SMs) blocks walking the tiles" : "no"},
          {"sk_flags", sk_flags ? "yes: the split tiles' parts added in the kernel, after flags (release / acquire)"
                       : split == "dp" ? "no" : "no: a fix-up launch adds the split tiles' parts"},
          {"sk_down", sk_down ? "yes: each Stream-K part's K tiles from its last down to its first" : "no"},
          {"sk_prefetch", sk_prefetch ? "yes: the producer prefetches into L2 the successor's partial tile a tile's head adds" : "no"},
          {"sk_stage", sk_stage ? "yes: the successor's partial tile read through the stage slots (cp.async), handed over as pseudo K steps" : "no"},
          {"sk_stage_store", sk_stage_store == 2 ? "2: the partial tile for the predecessor written through the stage slots, stored by the producer (cp.async.bulk, a group a slot, each slot reused once read), which sets the flags"
                             : sk_stage_store ? "yes: the partial tile for the predecessor written through the stage slots, stored by the producer (cp.async.bulk), which sets the flags" : "no"},
          {"sk_one_release", sk_one_release ? "yes: each flag set by one work-item of the warp after a warp barrier" : "no"},
          {"sk_pair", sk_pair ? "yes: clusters of 2 blocks passing the partial of the tile they share through distributed shared memory (st.async), not the workspace" : "no"},
          {"sk_trace", sk_trace ? "yes (debug): the consumer warps' clock at each unit's boundaries, after the flags" : "no"},
          {"tma", tma ? "yes: cp.async.bulk.tensor (tensor maps) completing on mbarriers" : "no"},
          {"kmajor", kmajor ? cat("yes: ", kmajor == 1 ? "op(A)" : kmajor == 2 ? "op(B)" : "op(A) and op(B)",
                                  " copied K-major into a workspace first (8-bit wgmma reads K-major operands)")
                          : "no"},
          {"wgmma", wgmma ? (ir::size_in_bytes(a_type) == 1 ? "yes: wgmma.mma_async m64nNk32 s8 / u8 -> s32 on warpgroups (sm_90a)"
                                                             : "yes: wgmma.mma_async m64nNk16 on warpgroups (sm_90a)")
                          : "no"},
          {"vnni", dpas      ? "yes: matrix_a in 32-bit channels (omega K values) as DPAS takes it"
                   : unit_ak ? "loads: matrix_a's 32-bit channels read as words, widened for the FMAs"
                             : "no: low-precision inputs are widened on load"},
          {"source", nvidia ? std::string(mma ? "NVIDIA: warps of 32, mma.sync m16n8k16 fragments per the PTX ISA; tiles are the SIMT defaults, not yet sized from the SMs"
                                              : "NVIDIA: warps of 32, FMAs; tiles are the SIMT defaults, not yet sized from the SMs")
                   : dpas ? "Xe-HPC published figures: DPAS M<=8 x N 16 x K 16 (8-bit: 32), 839 TFLOP/s BF16 vs 52 FP32 (see gpu_plan.h)"
                          : "Xe-HPC published figures: SIMD16, 128 x 64-byte registers per thread (see gpu_plan.h)"}};
}

GemmPlan GpuGemmPlan::as_cpu_plan() const {
  GemmPlan p;
  p.dtype = dtype;
  p.a_type = a_type;
  p.b_type = b_type;
  p.c_type = c_type;
  p.layout = layout;
  p.mr = mr * sg_m;
  p.nr = nr * sg_n;
  p.kb = kb;
  return p;
}

GemmSpec kmajor_spec(const GemmSpec& spec, int kmajor) {
  GemmSpec s = spec;
  const int64_t ld = kmajor_ld(spec.K);
  if (kmajor & 1) s.sa_r = ld, s.sa_c = 1;  // op(A): M rows of K
  if (kmajor & 2) s.sb_r = 1, s.sb_c = ld;  // op(B): N columns of K
  return s;
}

double gpu_tile_work(const GpuGemmPlan& p, const GemmSpec& spec) {
  const bool col = p.layout == "col";
  const int64_t M = col ? spec.N : spec.M, N = col ? spec.M : spec.N;
  const int64_t mt = int64_t(p.mr) * p.sg_m, nt = int64_t(p.nr) * p.sg_n, workers = std::max<int64_t>(1, p.workers);
  const int64_t tiles = spec.batch1 * spec.batch2 * ((M + mt - 1) / mt) * ((N + nt - 1) / nt);
  // (the tile's measured rate where there is one; 2-tile SK + DP as measured, other splits as perfect)
  const double rate = p.epi_alias && nt == 320 ? kRate320OneTile : ntile_rate(mt, nt) > 0 ? ntile_rate(mt, nt) : 1.0;
  if (p.split == "sk+dp" && tiles > workers) return sk_waves(tiles, workers) * double(mt * nt) / rate;
  if (p.split != "dp") return double(tiles) * double(mt * nt) / double(workers) / rate;
  return double((tiles + workers - 1) / workers) * double(mt * nt) / rate;
}

// The planner: its phases in order (gpu_plan_internal.h), each on the plan the earlier ones left.
GpuGemmPlan plan_gpu_gemm(const GemmSpec& spec, const GpuTargetInfo& target, const PlanOverrides& overrides) {
  spec.validate();
  if (auto copies = plan_gpu_kmajor(spec, target, overrides)) return *copies;           // the product on K-major copies
  if (auto oriented = plan_gpu_orient_by_waves(spec, target, overrides)) return *oriented;  // the layout whose waves carry less
  GpuGemmPlan p;
  const GpuPlanContext c = plan_gpu_orientation(spec, target, overrides, p);  // layout, types, unit strides
  plan_gpu_simt_tile(p, c);              // subgroup size, mr x nr, kb, sg_m x sg_n
  plan_gpu_dpas(p, c);                   // Intel: DPAS, 2-D block I/O
  plan_gpu_mma(p, c);                    // NVIDIA: mma.sync
  plan_gpu_pipeline(p, c);               // NVIDIA: the multi-stage pipeline (stages) and its tile
  plan_gpu_wgmma(p, c);                  // Hopper: wgmma on warpgroups
  plan_gpu_tma(p, c);                    // Hopper: the Tensor Memory Accelerator
  plan_gpu_hopper_tile(p, c);            // Hopper: the tile for the waves (8-bit, 192 x 192, N tiles), stages
  apply_gpu_overrides(p, c);             // the caller's tile fields in place of the defaults so far
  check_gpu_tile(p, c);                  // the tile against the instructions and the shared memory
  const GpuTileCounts t = plan_gpu_split(p, c);  // kt, workers, split (DP / Stream-K)
  plan_gpu_ws(p, c, t);                  // the warp-specialized kernel, persistent, sk_flags, sk_down
  plan_gpu_cluster(p, c);                // clusters of blocks sharing B's panels
  plan_gpu_epilogue(p, c);               // the epilogue's staging, TMA stores of C
  check_gpu_work_group(p, c);            // the work-group fits the target
  return p;
}

std::string GpuReducePlan::key(const ReduceSpec& s) const {
  return cat("gpureduce.", s.op, ".", s.form, ".", ir::name(s.in), ".", ir::name(s.acc), ".", ir::name(s.out), ".s",
             subgroup_size, ".t", tile_rows, "x", tile_cols, ".wg", subgroups, unit ? ".u" : ".g", parts > 1 ? ".split" : "");
}

GpuReducePlan plan_gpu_reduce(const ReduceSpec& s, const GpuTargetInfo& target) {
  s.validate();
  GpuReducePlan p;
  p.subgroup_size = choose_subgroup(target);
  const int S = p.subgroup_size;
  p.unit = s.sx_c == 1;
  // Lanes along X's unit-stride dimension: along the columns (a 1 x 4S tile, 4 components per
  // lane) when the columns are contiguous, else down the rows (an S x S tile); the 2x2 form
  // needs even tiles: 2 x 2S, or S x S.
  if (s.form == "2x2") {
    p.tile_rows = p.unit ? 2 : S;
    p.tile_cols = p.unit ? 2 * S : S;
  } else {
    p.tile_rows = p.unit ? 1 : S;
    p.tile_cols = p.unit ? 4 * S : S;
  }
  p.subgroups = 4;
  // Narrow arrays (a few columns) in the row and column forms: a tile of k*S whole rows x all the
  // columns. With I == S (seeds/001) lane p holds rows p, p + S, ... each with its columns as
  // consecutive components, so a warp reads k runs of S consecutive rows (contiguous when X is
  // row-major: the lowering's vector loads; one coalesced load per column when X is column-major);
  // the row form reduces in the lanes and stores S consecutive sums per run, the column form
  // accumulates k*cols values a lane and shuffles once at the end. About 64 bytes a lane per
  // tile; at most 256 bytes of accumulator a lane (64 f32 columns). The 1 x 4S tile of the wide
  // form left all but `cols` of its 4S columns empty: a 2^26 x 4 f32 row sum read 105 GB/s on an
  // H200, the column sum 472 (copy: 2087).
  const int64_t acc_bytes = ir::size_in_bytes(s.acc);
  if (s.form != "2x2" && s.cols >= 1 && s.cols <= 64 && s.cols * acc_bytes <= 256 && s.rows >= S) {
    const int64_t row_bytes = s.cols * std::max<int64_t>(ir::size_in_bytes(s.in), 1);
    int64_t k = 1;
    while (k < 16 && 2 * k * row_bytes <= 64 && 2 * k * S <= s.rows) k *= 2;
    p.tile_rows = static_cast<int>(k * S);
    p.tile_cols = static_cast<int>(s.cols);
  }
  // Enough subgroups to fill the device: about 32 per compute unit (an SM keeps up to 64 warps).
  // One subgroup per tile gives a 16384^2 f32 column sum 128 warps on an H200 (501 GB/s against
  // 3213 for the row sum) and 4 long rows 4 warps (20 GB/s). Parts keep at least 64 rows (column
  // form; 8 tiles of a narrow plan's rows) or 16 tiles of columns (row form) per worker.
  if (s.form != "2x2") {
    const bool row = s.form == "row";
    const int64_t tiles = row ? (s.rows + p.tile_rows - 1) / p.tile_rows : (s.cols + p.tile_cols - 1) / p.tile_cols;
    const int64_t len = row ? s.cols : s.rows;
    const int64_t min_chunk = row ? 16 * int64_t(p.tile_cols) : std::max<int64_t>(64, 8 * int64_t(p.tile_rows));
    const int64_t want = 32 * target.compute_units;
    if (tiles > 0 && tiles < want && len >= 2 * min_chunk)
      p.parts = std::min((want + tiles - 1) / tiles, len / min_chunk);
  }
  return p;
}

}  // namespace coopjit
