// The planners for SPIR-V devices (gpu_plan.h): subgroup size, tiles and work-group shape from
// the spec and the published Xe-HPC figures.
#include "plan/gpu_plan.h"

#include <algorithm>

#include "core/error.h"
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

namespace {
// Whether sm_90 plans take the wgmma pipeline by default (the plan field wgmma chooses either way).
constexpr bool kWgmmaDefault = true;
// Whether wgmma plans take the Tensor Memory Accelerator by default (the plan field tma chooses).
constexpr bool kTmaDefault = true;
// The warp-specialized kernel data-parallel TMA plans take by default (plan field ws): 0 none, 1 a
// producer warp, 2 a producer warpgroup with setmaxnreg. On the H100, bf16 4096^3: 553 TFLOP/s
// with 2 against 474 without (benchmarks/recorded/issue16-h100-session10.md).
constexpr int kWsDefault = 2;
// 8-bit (s8 / u8 -> s32) TMA plans take it too (2 with two consumer warpgroups, else 1), and a
// persistent grid where the tiles take more than a wave: on the H100 (CUDA graphs,
// benchmarks/recorded/issue16-h100-int8-session13.md) 128 x 256 blocks of two warpgroups, 2048^3
// 16.5 us with ws 2 against 17.1 without, 4096^3 103 (99 persistent) against 105, 8192^3 760 (750)
// against 775; 1024^3 in 64 x 128 blocks (one warpgroup) 5.0 with ws 1 against 5.9.
constexpr bool kWsInt8 = true;
// The epilogue staged through shared memory (plan field epi_smem) by default on wgmma plans.
constexpr bool kEpiSmemDefault = true;
// wgmma TMA plans: C written by TMA stores from the staging (plan field tma_store) by default, 2:
// boxes of a warpgroup where C's rows are contiguous (16-bit C), else of a warp. On the H100 (CUDA
// graphs, benchmarks/recorded/issue16-h100-tmastore-session14.md) 1 against the lanes' stores:
// 1.09-1.16x on products whose epilogue is a large share, 1.02-1.04x with edge tiles, 0.98-1.01x
// elsewhere; 2 against 1: 1.01-1.03x (bf16 / f16 2048^3 1.03x, 4096^3 with the persistent walk 1.03x).
constexpr int kTmaStoreDefault = 2;
// ws plans: a persistent grid (plan field persistent) by default where the tiles take more than a
// wave (the producer loads the block's next tile under this one's epilogue). On the H100 (CUDA
// graphs, bf16, benchmarks/recorded/issue16-h100-tiles-session16.md) against one tile a block:
// 128 x 256 tiles 4224^3 1.07x (683 against 641 TFLOP/s), 4096^3 1.02x, 6144^3 1.03x, 8192^3
// 1.02x, 4224x4224x8192 1.02x; 192 x 192 tiles 1.01-1.03x; one wave 1.00-1.01x.
constexpr bool kPersistentDefault = true;
// ws Stream-K plans: the fix-up in the kernel, after flags (plan field sk_flags), by default (where
// every worker's part is a tile or more). On the H100 (benchmarks/recorded/issue16-h100-streamk-session14.md,
// CUDA graphs, bf16) SK + DP with the flags ran 1.03-1.13x the same split with the fix-up launch
// (133 tiles: 615 against 566 TFLOP/s; 4224^2 x 8192 0.99x) since the part with a successor adds
// its sum after the plain K loop (ptxas: 108 bytes of spills with bf16 C against the fix-up
// kernel's 156). Session 13's form, the sum loaded as the K loop's initial accumulators, spilled
// 572-736 bytes and ran 0.83-0.92x the fix-up launch.
constexpr int kSkFlagsDefault = 1;
// ws Stream-K plans of 16-bit inputs: each part's K tiles from its last down to its first (plan
// field sk_down), by default: the blocks streaming at once then read the K panels of one or two
// offsets, not of one an SM. On the H100 (benchmarks/recorded/issue16-h100-streamk-session14.md,
// CUDA graphs, bf16, SK + DP with flags) against K upward: 133 tiles 1.03x, 136 1.01x, 144 1.83x,
// 152 1.07-1.18x, 165 1.07x, 198 1.05x, 266 1.08x, 270 1.27x, 400 1.01x, 512 1.05x, 540 1.01x,
// 561 1.03-1.18x. (Measured
// with the flags; the fix-up launch's plans take it too, the walk being the same.)
constexpr int kSkDownDefault = 1;
// 16-bit warp-specialized TMA plans: the orientation (layout row / col: which of the product's
// M and N the kernel's 128-row side runs along) whose tiles carry less work over their waves, by
// default (a plan that names layout or a tile keeps it). The layout by the strides alone
// (C row-major: col) cut 4224x1024 into 8 x 17 tiles of 128 x 256 (136: two waves; 192 x 192 the
// planner's way out, one wave of 132 at 0.9 of cuBLAS), where the other orientation cuts it into 33 x
// 4 = 132, one wave, as cuBLAS does (nvjet 256 x 128 tiles, 128 along the 4224; session 18,
// benchmarks/recorded/issue16-h100-single-wave-session18.md). On the H100 one wave of 128 whole
// 128 x 256 tiles (4096x1024x8192) ran 779-794 TFLOP/s against cuBLAS's 791-804, and the row layout
// ran the same products at 1.00-1.02x of col (session 11, issue16-h100-session11.md); 4224x1024x4096
// / x8192 now run at 742-761 / 791-796 TFLOP/s against cuBLAS's 752-762 / 789-794 (1.00x; the 192 x 192
// plan before: 671-676 / 710-717). Whole tiles only (see plan_gpu_gemm).
constexpr bool kOrientByWaves = true;
// ws plans of 8-bit inputs given ws: 2-tile SK + DP where the last wave's tiles are at most 1 /
// this of the SMs after one or two full waves (16-bit inputs: plan_gpu_gemm's rule).
constexpr int64_t kWsStreamKLast = 16;
// 16-bit ws plans: N tiles of any multiple of 8 (128..256) chosen so that the tiles fill their
// waves (plan_gpu_gemm, issue 16 session 18). Measured on the H100 with the plan's nr override:
// 128 x 136 ran 4352x1024x4096 / x8192 at 620 / 666 TFLOP/s against the automatic SK + DP plan's 529 /
// 652 (cuBLAS 681 / 696), 128 x 144 4608x1024x8192 at 724 against 648 (cuBLAS 749). Off until the other
// shapes it would change are measured (1024x4864, 2816x1920, 5632x1152 (128 x 128), 2816x3456, and
// 4224^3 / 4864x1792, which run at 0.99-1.00x cuBLAS today).
constexpr bool kNTileByWaves = false;
bool pow2(int64_t x) { return x >= 1 && (x & (x - 1)) == 0; }

// 16 when the device has it (Xe-HPC, Xe2: the native width), else the nearest it has.
int choose_subgroup(const GpuTargetInfo& t) {
  const auto& s = t.subgroup_sizes;
  if (s.empty() || std::find(s.begin(), s.end(), 16) != s.end()) return 16;
  if (std::find(s.begin(), s.end(), 32) != s.end()) return 32;
  return static_cast<int>(*std::max_element(s.begin(), s.end()));
}
}  // namespace

std::string GpuGemmPlan::code_key() const {
  return cat("gpugemm.", ir::name(a_type), "x", ir::name(b_type), "to", ir::name(c_type), ".", ir::name(dtype), ".",
             layout, ".s", subgroup_size, ".m", mr, "n", nr, "k", kb, ".wg", sg_m, "x", sg_n, unit_a ? ".ua" : ".ga", unit_ak ? ".uak" : "", unit_b ? ".ub" : "",
             unit_c ? ".uc" : ".gc", accumulate ? ".acc" : "", dpas ? cat(".dpas", dpas) : "",
             block2d ? cat(".b2d", block2d) : "", mma ? ".mma" : "", stages ? cat(".pipe", stages, unit_bn ? "n" : "k") : "",
             wgmma ? ".wgmma" : "", tma ? ".tma" : "", ws ? cat(".ws", ws) : "", epi_smem ? cat(".epi", epi_smem) : "", tma_store ? cat(".tmast", tma_store == 2 ? "2" : "") : "", persistent ? ".pers" : "",
             sk_flags ? ".flags" : "", sk_down ? ".down" : "", group_m ? cat(".gm", group_m) : "", cluster ? cat(".cl", cluster) : "",
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
          {"persistent", persistent ? "yes: a grid of min(tiles, SMs) blocks walking the tiles" : "no"},
          {"sk_flags", sk_flags ? "yes: the split tiles' parts added in the kernel, after flags (release / acquire)"
                       : split == "dp" ? "no" : "no: a fix-up launch adds the split tiles' parts"},
          {"sk_down", sk_down ? "yes: each Stream-K part's K tiles from its last down to its first" : "no"},
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

namespace {
// Which 8-bit operands to copy K-major (GpuGemmPlan::kmajor; plan override kmajor): on sm_90, an
// unbatched int8 / uint8 product whose op(A) is contiguous along M or op(B) along N, in 16-byte
// rows (positive strides and contiguous extents multiples of 16, K too: the pipeline's conditions on the
// copy), and the other operand K-major or copied too. By default where the wgmma pipeline would
// be planned (M and N 64 or more); the product on the copies must then plan wgmma.
int kmajor_choice(const GemmSpec& spec, const GpuTargetInfo& target, const PlanOverrides& overrides) {
  auto it = overrides.find("kmajor");
  if (it != overrides.end() && it->second != 0 && it->second != 1)
    throw UserError(cat("plan override kmajor=", it->second, " must be 0 or 1"));
  if (it != overrides.end() && it->second == 0) return 0;
  auto byte = [](ir::ScalarType t) { return t == ir::ScalarType::i8 || t == ir::ScalarType::u8; };
  const bool int8 = byte(spec.a_type) && byte(spec.b_type) && spec.dtype == ir::ScalarType::i32;
  const bool a_m = spec.sa_r == 1 && spec.sa_c != 1, b_n = spec.sb_c == 1 && spec.sb_r != 1;
  const int want = (a_m ? 1 : 0) | (b_n ? 2 : 0);
  const bool a_ok = a_m ? spec.sa_c > 0 && spec.sa_c % 16 == 0 && spec.M % 16 == 0 : spec.sa_c == 1;
  const bool b_ok = b_n ? spec.sb_r > 0 && spec.sb_r % 16 == 0 && spec.N % 16 == 0 : spec.sb_r == 1;
  const bool ok = target.wgmma && int8 && want && spec.batch1 * spec.batch2 == 1 && spec.K % 16 == 0 && a_ok && b_ok;
  if (it != overrides.end()) {
    if (!ok)
      throw UserError(cat("plan override kmajor=1: the K-major copies are for int8 / uint8 products on an sm_90 target (",
                          target.device, ") whose op(A) is contiguous along M or op(B) along N, unbatched, with strides, M / N and K ",
                          "multiples of 16 (", spec.str(), ")"));
    return want;
  }
  return ok && spec.M >= 64 && spec.N >= 64 ? want : 0;
}
}  // namespace

double gpu_tile_work(const GpuGemmPlan& p, const GemmSpec& spec) {
  const bool col = p.layout == "col";
  const int64_t M = col ? spec.N : spec.M, N = col ? spec.M : spec.N;
  const int64_t mt = int64_t(p.mr) * p.sg_m, nt = int64_t(p.nr) * p.sg_n, workers = std::max<int64_t>(1, p.workers);
  const int64_t tiles = spec.batch1 * spec.batch2 * ((M + mt - 1) / mt) * ((N + nt - 1) / nt);
  if (p.split != "dp") return double(tiles) * double(mt * nt) / double(workers);
  return double((tiles + workers - 1) / workers) * double(mt * nt);
}

GpuGemmPlan plan_gpu_gemm(const GemmSpec& spec, const GpuTargetInfo& target, const PlanOverrides& overrides) {
  spec.validate();
  if (const int km = kmajor_choice(spec, target, overrides)) {
    PlanOverrides o = overrides;
    o.erase("kmajor");
    GpuGemmPlan p = plan_gpu_gemm(kmajor_spec(spec, km), target, o);
    if (p.wgmma) {
      p.kmajor = km;
      return p;
    }
    if (overrides.count("kmajor"))
      throw UserError(cat("plan override kmajor=1: the product on the K-major copies does not plan the wgmma pipeline (", p.key(), ")"));
  }
  // The orientation (kOrientByWaves): both layouts planned, the other taken where it is a DP plan
  // whose waves carry less tile area than this one's (this one's Stream-K split counted as perfect).
  if (kOrientByWaves && target.wgmma && !overrides.count("layout") && !overrides.count("mr") && !overrides.count("nr") &&
      !overrides.count("sg_m") && !overrides.count("sg_n")) {
    const int by_strides = (spec.sc_c == 1) + (spec.sb_c == 1) >= (spec.sc_r == 1) + (spec.sa_r == 1) ? 1 : 0;  // 1: col
    PlanOverrides o = overrides;
    o["layout"] = by_strides;
    GpuGemmPlan p0 = plan_gpu_gemm(spec, target, o);
    // (full tiles only, 128 x 256 or 192 x 192: the rate a tile element measured alike; the smaller
    // tiles of small products keep the strides' layout)
    auto orientable = [](const GpuGemmPlan& q) {
      return q.wgmma && q.tma && q.ws && !q.kmajor && ir::size_in_bytes(q.a_type) == 2 && !q.cluster &&
             int64_t(q.mr) * q.sg_m * q.nr * q.sg_n >= (kNTileByWaves ? 128 * 128 : 128 * 256);
    };
    if (!orientable(p0)) return p0;
    o["layout"] = 1 - by_strides;
    GpuGemmPlan p1;
    try {
      p1 = plan_gpu_gemm(spec, target, o);
    } catch (const UserError&) {
      return p0;
    }
    // (and only whole tiles: 4200x1000 took row's 132 tiles with edges both ways and ran them at 468
    // TFLOP/s against the strides' 192 x 192 plan's 563 on the H100, session 18, where 4224x1024's
    // whole tiles ran at cuBLAS's rate)
    auto whole = [&](const GpuGemmPlan& q) {
      const bool col = q.layout == "col";
      return (col ? spec.N : spec.M) % (int64_t(q.mr) * q.sg_m) == 0 && (col ? spec.M : spec.N) % (int64_t(q.nr) * q.sg_n) == 0;
    };
    return orientable(p1) && whole(p1) && p1.split == "dp" && gpu_tile_work(p1, spec) < gpu_tile_work(p0, spec) ? p1 : p0;
  }
  GpuGemmPlan p;
  p.dtype = spec.dtype;
  p.accumulate = spec.accumulate;
  p.epilogue = spec.epilogue;
  // Layout: the lanes of a subgroup run down the kernel's rows; score each orientation by how
  // many of (C, the kernel's A) have unit stride along them.
  const int row_score = (spec.sc_r == 1) + (spec.sa_r == 1);
  const int col_score = (spec.sc_c == 1) + (spec.sb_c == 1);
  p.layout = col_score >= row_score ? "col" : "row";
  if (auto it = overrides.find("layout"); it != overrides.end()) {
    if (it->second != 0 && it->second != 1)
      throw UserError(cat("plan override layout=", it->second, " must be 0 (row) or 1 (col)"));
    p.layout = it->second ? "col" : "row";
  }
  const bool col = p.layout == "col";
  p.a_type = col ? spec.b_type : spec.a_type;
  p.b_type = col ? spec.a_type : spec.b_type;
  p.c_type = spec.c_type;
  const int64_t M = col ? spec.N : spec.M, N = col ? spec.M : spec.N;
  p.unit_a = (col ? spec.sb_c : spec.sa_r) == 1;
  p.unit_b = (col ? spec.sa_c : spec.sb_r) == 1;
  p.unit_ak = !p.unit_a && (col ? spec.sb_r : spec.sa_c) == 1;
  p.unit_c = (col ? spec.sc_c : spec.sc_r) == 1;

  p.subgroup_size = choose_subgroup(target);
  const int S = p.subgroup_size;
  const bool wide = ir::size_in_bytes(spec.dtype) >= 8;  // f64: two registers per component
  // The tile (see gpu_plan.h for the register budget), no taller or wider than the matrix needs.
  p.mr = 2 * S;
  if (M <= S) p.mr = S;
  p.nr = wide ? 16 : 32;
  if (N <= 8) p.nr = 8;
  else if (N <= 16) p.nr = 16;
  p.kb = wide ? 4 : 8;
  p.sg_m = M > p.mr ? 2 : 1;
  p.sg_n = N > p.nr ? 2 : 1;

  // DPAS: the matrix engines' K; the instruction's M is 8 of the tile's columns.
  const bool dpas_types = (p.a_type == p.b_type && (p.a_type == ir::ScalarType::f16 || p.a_type == ir::ScalarType::bf16) &&
                           p.dtype == ir::ScalarType::f32) ||
                          ((p.a_type == ir::ScalarType::i8 || p.a_type == ir::ScalarType::u8) &&
                           (p.b_type == ir::ScalarType::i8 || p.b_type == ir::ScalarType::u8) && p.dtype == ir::ScalarType::i32);
  const int dpas_k = ir::size_in_bytes(p.a_type) == 1 ? 32 : 16;
  auto mode = [&](const char* key, bool has, const char* what) {
    auto it = overrides.find(key);
    if (it == overrides.end()) return has ? 1 : 0;
    if (it->second < 0 || it->second > 2)
      throw UserError(cat("plan override ", key, "=", it->second, " must be 0 (off), 1 (on) or 2 (emulated)"));
    if (it->second == 1 && !has)
      throw UserError(cat("plan override ", key, "=1: ", target.device, " does not report ", what,
                          " (", key, "=2 emulates it; coopjit.spirv.compile_gemm(..., target='xe-hpc') generates it)"));
    return static_cast<int>(it->second);
  };
  p.dpas = mode("dpas", target.dpas && dpas_types && S == 16, "DPAS at subgroup size 16 (cl_intel_subgroup_matrix_multiply_accumulate)");
  p.block2d = mode("block2d", target.block2d && S == 16, "2-D block I/O at subgroup size 16 (cl_intel_subgroup_2d_block_io)");
  if (p.dpas && !dpas_types)
    throw UserError(cat("plan dpas=", p.dpas, ": DPAS takes f16 or bf16 inputs with f32 accumulators, or i8 / u8 inputs with "
                        "i32 accumulators, not ", ir::name(p.a_type), " x ", ir::name(p.b_type), " -> ", ir::name(p.dtype)));
  if (p.dpas) p.kb = dpas_k;
  // NVIDIA tensor cores for bf16 / f16 -> f32: K steps of one instruction's K (16).
  const bool mma_types = p.a_type == p.b_type && (p.a_type == ir::ScalarType::f16 || p.a_type == ir::ScalarType::bf16) &&
                         p.dtype == ir::ScalarType::f32;
  p.nvidia = target.mma;
  // A product of one 16 x 16 x 16 step at most (stacks of tiny matrices): FMAs on CUDA cores, whose
  // kernel is shorter than the tensor-core path's (measured on the H200, 4096 stacked bf16 16^3
  // products: 22.2 us with mma.sync and the pipeline, 65 us with mma.sync alone, 10.4 us on FMAs;
  // torch.bmm 16.6 us; benchmarks/recorded/issue15-h200-device-arrays.md).
  const bool tiny = M <= 16 && N <= 16 && spec.K <= 16;
  p.mma = target.mma && mma_types && S == 32 && !tiny ? 1 : 0;
  if (auto it = overrides.find("mma"); it != overrides.end()) {
    if (it->second != 0 && it->second != 1) throw UserError(cat("plan override mma=", it->second, " must be 0 or 1"));
    if (it->second == 1 && !(target.mma && mma_types))
      throw UserError(cat("plan override mma=1: mma.sync needs an NVIDIA target (", target.device,
                          ") and bf16 or f16 inputs with f32 accumulators"));
    p.mma = static_cast<int>(it->second);
  }
  // The accumulator S x nr (not 2S): the fragment moves of simt_mma.cpp then fit in registers
  // (ptxas for sm_90: 179 registers, no spills at 32 x 32, spills at 64 x 32).
  if (p.mma) p.kb = 16, p.mr = S;
  // The pipeline (gpu_plan.h) where the operands allow it: warp tiles up to 64 x 64 (128 f32
  // accumulators a lane), 2 x 2 warps a block (a 128 x 128 tile), K steps of 32, 3 stages of
  // 16 KiB (48 KiB: the static shared memory limit).
  {
    const int64_t K = spec.K;
    const int64_t a_rs = col ? spec.sb_c : spec.sa_r, a_cs = col ? spec.sb_r : spec.sa_c;  // kernel A (M x K)
    const int64_t b_rs = col ? spec.sa_c : spec.sb_r, b_cs = col ? spec.sa_r : spec.sb_c;  // kernel B (K x N)
    p.unit_bn = b_cs == 1 && b_rs != 1;
    // 8-bit integers (mma.sync m16n8k32 s8 / u8 -> s32): ldmatrix without .trans, so both
    // operands contiguous along K.
    const bool int8 = (p.a_type == ir::ScalarType::i8 || p.a_type == ir::ScalarType::u8) &&
                      (p.b_type == ir::ScalarType::i8 || p.b_type == ir::ScalarType::u8) && p.dtype == ir::ScalarType::i32;
    // f32 / f64 (no TF32): the same staging, FMAs on CUDA cores from shared memory.
    const bool fma = target.mma && S == 32 && p.a_type == p.b_type && p.a_type == p.dtype &&
                     (p.dtype == ir::ScalarType::f32 || p.dtype == ir::ScalarType::f64);
    const int64_t e = 16 / ir::size_in_bytes(p.a_type);  // elements a 16-byte chunk
    const bool a_ok = (a_rs == 1 && a_cs % e == 0 && M % e == 0 && !int8) || (a_cs == 1 && a_rs % e == 0 && K % e == 0);
    const bool b_ok = (b_rs == 1 && b_cs % e == 0 && K % e == 0) || (b_cs == 1 && b_rs % e == 0 && N % e == 0 && !int8);
    const bool batch_ok = spec.sa_b1 % e == 0 && spec.sa_b2 % e == 0 && spec.sb_b1 % e == 0 && spec.sb_b2 % e == 0;
    auto ov = overrides.find("stages");
    auto mo = overrides.find("mma");
    const bool int8_mma = int8 && target.mma && S == 32 && (mo == overrides.end() || mo->second != 0);
    if ((p.mma || int8_mma || fma) && a_ok && b_ok && batch_ok && (ov == overrides.end() || ov->second != 0)) {
      const int64_t most = p.dtype == ir::ScalarType::f64 ? 32 : 64;  // f64: 32 x 32 (64 registers of accumulators)
      auto warp_tile = [&](int64_t n) { return std::min<int64_t>(most, n <= 16 ? 16 : n <= 32 ? 32 : 64); };
      p.mma = fma ? 0 : 1;
      p.stages = 3;
      p.mr = warp_tile(M), p.nr = warp_tile(N);
      if (fma && p.dtype == ir::ScalarType::f32) p.mr = std::max(p.mr, 32);  // 8 lanes of 4-element vectors down M
      p.sg_m = M > p.mr ? 2 : 1, p.sg_n = N > p.nr ? 2 : 1;
      p.kb = static_cast<int>((K <= 16 || p.dtype == ir::ScalarType::f64 ? 16 : 32) * (int8 ? 2 : 1));  // K steps of 32 (64) bytes
      // 4 stages where the block may have their shared memory (64 KiB at 128 x 128 x 32: dynamic
      // shared memory beyond the static 48 KiB), else 3.
      const int64_t stage = (int64_t(p.mr) * p.sg_m + int64_t(p.nr) * p.sg_n) * p.kb * ir::size_in_bytes(p.a_type);
      p.stages = 4 * stage <= target.shared_bytes ? 4 : 3;
      // FMA: f32 K steps of 8 (ptxas: 255 registers, no spills; 16 spill), 4 stages of 8 KiB;
      // f64 32 x 32 warp tiles, K steps of 16, 3 stages of 16 KiB.
      if (fma && p.dtype == ir::ScalarType::f32) p.kb = 8, p.stages = 4;
      if (fma && p.dtype == ir::ScalarType::f64) p.stages = 3;
    }
  }
  // Hopper (gpu_plan.h): bf16 / f16 pipelines on warpgroups, 128 x 256 blocks of 2 warpgroups
  // (64 x 256 each, 128 f32 accumulators a work-item), K steps of 64, 4 stages of 48 KiB; smaller
  // blocks where the matrix is smaller.
  bool tiles192 = false;  // 16-bit TMA plans: 192 x 192 tiles (below)
  {
    // 8-bit operands (s8 / u8 -> s32, wgmma m64nNk32) where the pipeline is planned: both
    // operands contiguous along K (the int8 pipeline's condition; 8-bit wgmma has no transpose).
    const bool wg_int8 = (p.a_type == ir::ScalarType::i8 || p.a_type == ir::ScalarType::u8) &&
                         (p.b_type == ir::ScalarType::i8 || p.b_type == ir::ScalarType::u8) && p.dtype == ir::ScalarType::i32;
    const bool wg_ok = target.wgmma && p.mma && p.stages && S == 32 &&
                       ((p.a_type == p.b_type && p.dtype == ir::ScalarType::f32 &&
                         (p.a_type == ir::ScalarType::bf16 || p.a_type == ir::ScalarType::f16)) ||
                        wg_int8);
    auto wo = overrides.find("wgmma");
    auto so = overrides.find("stages");
    if (wo != overrides.end() && wo->second != 0 && wo->second != 1)
      throw UserError(cat("plan override wgmma=", wo->second, " must be 0 or 1"));
    if (wo != overrides.end() && wo->second == 1 && (!wg_ok || (so != overrides.end() && so->second == 0)))
      throw UserError(cat("plan override wgmma=1: wgmma needs an sm_90 target (", target.device,
                          ") and bf16 or f16 inputs with f32 accumulators, or int8 / uint8 inputs with int32 accumulators, "
                          "whose strides allow the pipeline (stages)"));
    // By default where the matrix fills a warpgroup's 64 x 64 at least (mma.sync's smaller tiles
    // waste less on smaller ones).
    const bool on = wo != overrides.end() ? wo->second == 1
                                          : wg_ok && kWgmmaDefault && M >= 64 && N >= 64 && (so == overrides.end() || so->second != 0);
    if (on) {
      p.wgmma = 1;
      p.mr = 16, p.sg_m = M > 64 ? 8 : 4;
      p.nr = N > 128 ? 256 : N > 64 ? 128 : 64, p.sg_n = 1;
      p.kb = wg_int8 ? 128 : 64;  // K-major rows of 128 bytes either way
      // 8-bit: N tiles of 256 as for 16-bit (a warp's B 128 x 256 = 32 KiB: the verifier's limits
      // on 8-bit matrices are twice the elements), 128 s32 accumulators a work-item. Before (session
      // 10-12) two warpgroups of 64 x 128 side by side (4 warpgroups, sg_n 2, 64 accumulators): on
      // the H100 (CUDA graphs, benchmarks/recorded/issue16-h100-int8-session13.md) 4096^3 114 us
      // against 103 with the warp-specialized kernel (99 persistent), 8192^3 816 against 760 (750).
      // 8-bit products of few 128 x 256 tiles (under half the SMs): the largest smaller block that
      // gives at least half the SMs a tile, 64 x 256 or 64 x 128 (one warpgroup). There, 1024^3 on
      // the ws kernel ran 5.0 us in 64 x 128 blocks (128 tiles), 6.3 in 64 x 256 (64), 10.5 in
      // 128 x 256 (32; `torch._int_mm` 6.0).
      const bool shaped = overrides.count("mr") || overrides.count("nr") || overrides.count("sg_m") || overrides.count("sg_n");
      auto tiles_of = [&](int64_t mt, int64_t nt) { return spec.batch1 * spec.batch2 * ((M + mt - 1) / mt) * ((N + nt - 1) / nt); };
      if (wg_int8 && !shaped && p.sg_m == 8 && 2 * tiles_of(128, p.nr) < target.compute_units) {
        if (p.nr == 256 && 2 * tiles_of(64, 256) >= target.compute_units) p.sg_m = 4;
        else p.sg_m = 4, p.nr = std::min(p.nr, 128);
      }
      // 16-bit products whose 192 x 192 tiles (three consumer warpgroups of 64 x 192, the
      // warp-specialized kernel below) carry less work a block than 128 x 256 tiles over their
      // waves: waves x tile area, the 192 x 192 kernel's taken as 2% more (it ran at 0.97-0.99 of the
      // 128 x 256 kernel's rate a tile element where their waves carry the same work: 4096^3,
      // 6144^3, 8192^3), as cuBLAS takes 192 x 192 there (TMA plans: the kernel without producers
      // has not run them). On the H100 (CUDA graphs, bf16, both persistent; session 15
      // benchmarks/recorded/issue16-h100-tiles-session15.md, session 16 issue16-h100-tiles-session16.md):
      // 896x4864x8192 (2 waves -> 1) 439 (SK + DP) -> 719-727 TFLOP/s, cuBLAS 720-735;
      // 3072x3072x8192 (3 -> 2) 692 (SK + DP) -> 780, cuBLAS 799; 4864x1792x8192 (3 -> 2) 704 (SK +
      // DP) -> 738, cuBLAS 738; 4224^3 (5 -> 4) 683 -> 736, cuBLAS 741. Kept 128 x 256: 4096^3 (4
      // waves either way) 771 against 684, 8192^3 (16 -> 15) 742 against 686, 6144^3 (9 -> 8, the
      // same work) 777 against 768, 2048^3 (1 wave either way) 672 against 604.
      // (Plans that ask for the kernel without producers or for clusters keep 128 x 256.)
      const auto ws_o = overrides.find("ws"), cl_o = overrides.find("cluster");
      const int64_t sms = std::max<int64_t>(1, target.compute_units);
      const int64_t waves256 = (tiles_of(128, 256) + sms - 1) / sms, waves192 = (tiles_of(192, 192) + sms - 1) / sms;
      if (!wg_int8 && !shaped && p.sg_m == 8 && p.nr == 256 && spec.batch1 * spec.batch2 == 1 &&
          (ws_o == overrides.end() || ws_o->second != 0) && (cl_o == overrides.end() || cl_o->second == 0) &&
          102 * 192 * 192 * waves192 < 100 * 128 * 256 * waves256)
        tiles192 = true;  // (TMA plans only: set below, once tma is decided)
      const int64_t stage = (16 * int64_t(p.sg_m) + int64_t(p.nr) * p.sg_n) * 128;
      p.stages = 4 * stage + 1024 <= target.shared_bytes ? 4 : 3;
    }
  }
  {
    auto to = overrides.find("tma");
    if (to != overrides.end() && to->second != 0 && to->second != 1)
      throw UserError(cat("plan override tma=", to->second, " must be 0 or 1"));
    if (to != overrides.end() && to->second == 1 && !p.wgmma)
      throw UserError("plan override tma=1: the Tensor Memory Accelerator feeds the wgmma pipeline (an sm_90 target, bf16 / f16 "
                      "inputs whose strides allow it, wgmma not turned off)");
    // Batched products keep cp.async (a 2-D tensor map describes one matrix).
    p.tma = p.wgmma && (to != overrides.end() ? to->second == 1 : kTmaDefault && spec.batch1 * spec.batch2 == 1);
    if (tiles192 && p.tma) {
      p.sg_m = 12, p.nr = 192;
      p.stages = 4 * (16 * int64_t(p.sg_m) + p.nr) * 128 + 1024 <= target.shared_bytes ? 4 : 3;
    }
    // kNTileByWaves (off by default): 16-bit ws plans whose 128 x 256 / 192 x 192 tiles leave the
    // last wave partly empty take the tile of 128 x nt (nt a multiple of 8, 128..232) or 192 x 192
    // whose waves carry the least tile area (192-row tiles counted 2% more, as above), where that
    // cuts it by 3% or more. (ptxas, bf16 4352x1024: 128 x nt up to 232 spill 0-24 bytes, 240 and
    // 248 104-116, 256 88; 192 x nt other than 192 (128 registers a work-item) 16-364, 192 none.)
    const bool shaped = overrides.count("mr") || overrides.count("nr") || overrides.count("sg_m") || overrides.count("sg_n");
    const auto ws_o = overrides.find("ws"), cl_o = overrides.find("cluster");
    if (kNTileByWaves && p.tma && p.unit_b && !shaped && ir::size_in_bytes(p.a_type) == 2 && p.sg_n == 1 && p.mr == 16 &&
        ((p.sg_m == 8 && p.nr == 256) || (p.sg_m == 12 && p.nr == 192)) && spec.batch1 * spec.batch2 == 1 &&
        (ws_o == overrides.end() || ws_o->second != 0) && (cl_o == overrides.end() || cl_o->second == 0)) {
      const int64_t sms = std::max<int64_t>(1, target.compute_units);
      auto cost = [&](int64_t mt, int64_t nt) {
        const int64_t tiles = ((M + mt - 1) / mt) * ((N + nt - 1) / nt);
        return double((tiles + sms - 1) / sms) * double(mt * nt) * (mt == 192 ? 1.02 : 1.0);
      };
      const int64_t mt0 = 16 * int64_t(p.sg_m), nt0 = p.nr;
      const int64_t tiles0 = ((M + mt0 - 1) / mt0) * ((N + nt0 - 1) / nt0);
      double best = cost(mt0, nt0);
      int64_t bm = 0, bn = 0;
      if (tiles0 % sms)
        for (int64_t mt : {128, 192})
          for (int64_t nt = mt == 192 ? 192 : 128; nt <= (mt == 192 ? 192 : 232); nt += 8)
            if (const double c = cost(mt, nt); c < 0.97 * cost(mt0, nt0) && c < best) best = c, bm = mt, bn = nt;
      if (bm) {
        p.sg_m = static_cast<int>(bm / 16), p.nr = static_cast<int>(bn);
        p.stages = 4 * (bm + bn) * 128 + 1024 <= target.shared_bytes ? 4 : 3;
      }
    }
  }
  if (auto it = overrides.find("group_m"); it != overrides.end()) {
    if (it->second < 0 || it->second > 256)
      throw UserError(cat("plan override group_m=", it->second, " is out of range [0, 256] (0: the tiles walk down M)"));
    p.group_m = static_cast<int>(it->second);
  }
  if (auto it = overrides.find("stages"); it != overrides.end()) {
    if (it->second != 0 && (it->second < 2 || it->second > 8))
      throw UserError(cat("plan override stages=", it->second, ": 0 (no pipeline) or 2..8 on an mma plan whose operands allow it"));
    if (it->second != 0 && !p.stages)
      throw UserError(cat("plan override stages=", it->second, ": the pipeline needs unit-stride operands whose other strides and "
                          "contiguous extents are multiples of 8 elements"));
    p.stages = static_cast<int>(it->second);
  }

  for (const auto& [k, v] : overrides) {
    if (k == "layout" || k == "dpas" || k == "block2d" || k == "mma" || k == "split" || k == "workers" || k == "stages" || k == "wgmma" ||
        k == "tma" || k == "group_m" || k == "ws" || k == "kmajor" || k == "epi_smem" || k == "persistent" || k == "sk_flags" ||
        k == "tma_store" || k == "sk_down" || k == "cluster")
      continue;
    int* field = k == "mr" ? &p.mr : k == "nr" ? &p.nr : k == "kb" ? &p.kb : k == "sg_m" ? &p.sg_m
               : k == "sg_n" ? &p.sg_n : k == "subgroup_size" ? &p.subgroup_size : k == "kt" ? &p.kt : nullptr;
    if (!field)
      throw UserError(cat("unknown GPU plan override '", k, "' (known: layout, subgroup_size, mr, nr, kb, sg_m, sg_n, dpas, block2d, mma, stages, wgmma, tma, ws, epi_smem, tma_store, persistent, sk_flags, sk_down, group_m, cluster, kmajor, split, kt, workers)"));
    if (v < 1 || v > 256) throw UserError(cat("plan override ", k, "=", v, " is out of range [1, 256]"));
    *field = static_cast<int>(v);
  }
  if (!pow2(p.subgroup_size) ||
      (!target.subgroup_sizes.empty() &&
       std::find(target.subgroup_sizes.begin(), target.subgroup_sizes.end(), p.subgroup_size) == target.subgroup_sizes.end()))
    throw UserError(cat("plan subgroup_size=", p.subgroup_size, " is not one of ", target.device, "'s subgroup sizes"));
  if (!pow2(p.mr)) throw UserError(cat("plan mr=", p.mr, " must be a power of two (the coopmatrix layout's M)"));
  if (p.kb < 4 || p.kb > 128 || !pow2(p.kb))
    throw UserError(cat("plan kb=", p.kb, " must be a power of two in [4, 128] (the K rule of subgroup scope matrices)"));
  if ((p.dpas || p.block2d) && p.subgroup_size != 16)
    throw UserError(cat("plan dpas / block2d need subgroup_size 16, not ", p.subgroup_size));
  if (p.dpas && (p.mr % 16 != 0 || p.kb % dpas_k != 0 || (p.nr % 8 != 0 && p.nr != 1 && p.nr != 2 && p.nr != 4)))
    throw UserError(cat("plan dpas: mr=", p.mr, " must be a multiple of 16, kb=", p.kb, " of ", dpas_k,
                        ", nr=", p.nr, " a multiple of 8 or 1, 2, 4 (the instruction's N, K and M)"));
  if (p.mma && (p.subgroup_size != 32 || p.mr % 16 != 0 || p.nr % 8 != 0 || p.kb % 16 != 0))
    throw UserError(cat("plan mma: subgroup_size 32, mr a multiple of 16, nr of 8 and kb of 16 (the instruction's M, N, K), not ",
                        p.subgroup_size, ", ", p.mr, ", ", p.nr, ", ", p.kb));
  if (p.stages) {
    const int64_t threads = 32 * int64_t(p.sg_m) * p.sg_n, panels = (int64_t(p.mr) * p.sg_m + int64_t(p.nr) * p.sg_n) * p.kb;
    const int64_t esz = ir::size_in_bytes(p.a_type);
    // (TMA plans' copies are not split among the work-items: B's panel any multiple of 8 rows, below)
    const bool chunks = !(p.wgmma && p.tma);
    if (p.mr % 16 || (chunks && p.nr % 16) || (p.mma && p.kb % (32 / esz)) || (chunks && (int64_t(p.mr) * p.sg_m * p.kb * esz / 16) % threads) ||
        (chunks && (int64_t(p.nr) * p.sg_n * p.kb * esz / 16) % threads) || panels * esz * p.stages > std::max<int64_t>(48 * 1024, target.shared_bytes))
      throw UserError(cat("plan stages=", p.stages, ": mr=", p.mr, ", nr=", p.nr, " multiples of 16, kb=", p.kb,
                          " of 16, the panels whole 16-byte chunks per work-item, and ", p.stages,
                          " stages of them within ", std::max<int64_t>(48 * 1024, target.shared_bytes), " bytes of shared memory"));
  }
  if (p.wgmma) {
    const int64_t esz = ir::size_in_bytes(p.a_type), kb_want = 128 / esz;  // kb: 64 (16-bit), 128 (8-bit)
    const int64_t bytes = (16 * int64_t(p.sg_m) + int64_t(p.nr) * p.sg_n) * p.kb * esz * p.stages + 1024 + (p.tma ? 16 * p.stages : 0);
    // nr: wgmma's n, a multiple of 64 (B's N-major panels: atoms of 64 columns); with TMA and a
    // K-major B (unit_b) any multiple of 8 (wgmma's n; B's boxes of nr rows, C's epilogue stores
    // staged in pieces of 16 columns or lane by lane, simt_wgmma.cpp)
    // (128-row tiles or fewer: 192-row ones have 128 registers a work-item, and 192 x 216 did not
    // assemble (ptxas: insufficient registers), 192 x 200 spilled 364 bytes and ran at 0.99x 192 x 192)
    const int nr_unit = p.tma && p.unit_b && p.sg_n == 1 && p.sg_m <= 8 ? 8 : 64;
    if (p.mr != 16 || p.sg_m % 4 || p.nr % nr_unit || p.nr > 256 || p.kb != kb_want || p.stages < 2 ||
        bytes > std::max<int64_t>(48 * 1024, target.shared_bytes))
      throw UserError(cat("plan wgmma: mr=16, sg_m a multiple of 4, nr a multiple of 64 (of 8 with TMA, K-major B, sg_n 1 and sg_m up to 8) up to 256, kb=", kb_want, " and 2..8 stages "
                          "within ", std::max<int64_t>(48 * 1024, target.shared_bytes), " bytes of shared memory, not mr=", p.mr,
                          ", sg_m=", p.sg_m, ", nr=", p.nr, ", kb=", p.kb, ", stages=", p.stages, " (", bytes, " bytes)"));
  }
  if (!overrides.count("kt")) p.kt = 8 * p.kb;
  if (p.kt % p.kb != 0)
    throw UserError(cat("plan kt=", p.kt, " must be a multiple of kb=", p.kb, " (a K tile is whole K steps)"));
  // The split (gpu_plan.h): workers from the compute units, DP unless the last wave is poor.
  p.workers = target.compute_units * std::max(1, 64 / (p.sg_m * p.sg_n));
  // NVIDIA: a persistent grid of the blocks resident at once; the pipeline's 48 KiB of shared
  // memory and ~230 registers a thread leave room for 2 blocks of 4 warps an SM (65536 registers).
  if (p.stages) p.workers = target.compute_units * std::max(1, 8 / (p.sg_m * p.sg_n));
  if (p.wgmma) p.workers = target.compute_units;  // 97-193 KiB of shared memory: one block an SM
  if (auto it = overrides.find("workers"); it != overrides.end()) {
    if (it->second < 1 || it->second > (int64_t(1) << 20))
      throw UserError(cat("plan override workers=", it->second, " is out of range [1, 2^20]"));
    p.workers = it->second;
  }
  const int64_t batch = spec.batch1 * spec.batch2;
  const int64_t tiles_mn = batch * ((M + int64_t(p.mr) * p.sg_m - 1) / (int64_t(p.mr) * p.sg_m)) *
                           ((N + int64_t(p.nr) * p.sg_n - 1) / (int64_t(p.nr) * p.sg_n));
  const int64_t tiles_k = std::max<int64_t>(1, (spec.K + p.kt - 1) / p.kt);
  const int64_t waves = (tiles_mn + p.workers - 1) / std::max<int64_t>(1, p.workers);
  // Hopper's warpgroup plans keep DP when the tiles fill a wave: on the H100 (whole-program
  // machine code, session 10) 152 tiles of 128 x 256 on 132 SMs ran 1.06x faster DP than SK + DP,
  // the shape most favourable to Stream-K (a second wave 15% full).
  // The warp-specialized kernel (ws, below: TMA plans of one product of 16-bit inputs) streams
  // inside its persistent grid instead (simt_tma_ws.cpp), where it measured faster: 2-tile SK + DP
  // after one or two full waves (the rule and its figures below, ws_sk). On the H100 in session 12
  // (benchmarks/recorded/issue16-h100-streamk-session12.md, kernel times, the fix-up launch) 133
  // tiles on 132 SMs ran 1.32x faster so (110 us + 17 us fix-up against 168); 266 tiles 1.09x;
  // 152 tiles, 561 (4224^2) and 32 (1024^2, Stream-K) slower with any split than DP.
  const bool sk_dp = !p.wgmma;
  // The ws level a TMA plan of one product takes by default: 16-bit inputs with two consumer
  // warpgroups (128-row blocks) or three (192 x 192 tiles), the shapes measured; with one, setmaxnreg has no registers to
  // move (256 work-items may have 255 each). 8-bit inputs: kWsInt8.
  const bool sixteen_bit = ir::size_in_bytes(p.a_type) == 2;
  // (8-bit shapes that the rule below streams keep the kernel without producers, as measured before)
  const bool sk_rule = tiles_k >= 2 && tiles_mn > 0 && 4 * tiles_mn < 3 * waves * p.workers && (tiles_mn < p.workers || sk_dp);
  const int ws_default = !(p.wgmma && p.tma && batch == 1) ? 0
                         : sixteen_bit                       ? (p.sg_m * p.sg_n == 8 || p.sg_m * p.sg_n == 12 ? kWsDefault : 0)
                         : kWsInt8 && !sk_rule               ? (p.sg_m * p.sg_n == 8 ? 2 : 1)
                                                             : 0;
  const auto ws_o = overrides.find("ws");
  // (8-bit plans stay DP by default: on the H100 their 2-tile SK + DP inside the ws kernel ran
  // 1.15x DP on 133 tiles of 128 x 256 but 0.86x on 136, benchmarks/recorded/issue16-h100-int8-session13.md)
  const bool ws_sk = p.wgmma && p.tma && batch == 1 && (ws_o != overrides.end() ? ws_o->second != 0 : sixteen_bit && ws_default != 0);
  if (ws_sk) {
    const int64_t full = tiles_mn / p.workers, last = tiles_mn % p.workers;  // full waves, the last wave's tiles
    // 16-bit inputs (the in-kernel fix-up and the downward parts by default, below): after one full
    // wave where the second is at most half full, or after two where the third is at most a
    // quarter full. On the H100 (benchmarks/recorded/issue16-h100-streamk-session14.md, CUDA
    // graphs, bf16, SK + DP with flags and sk_down against DP, runs 2 and 3): 133 tiles
    // 1.48-1.54x, 136 1.23-1.24x, 144 1.39-1.41x, 152 1.35-1.37x (1.02-1.04x with edge tiles: 896 x
    // 4864), 165 1.30-1.31x, 198 1.12-1.13x, 266 1.24x, 270 1.17-1.18x, 297 1.14x; a second wave
    // 3/4 full (231 tiles) 0.95x; after three or more full waves no gain: 400 tiles 1.04-1.05x,
    // 540 1.00x, 561 (4224^2) 0.91-1.01x, 512 (4096^2) 0.86x. (Session 13, the fix-up launch and
    // K upward: 133 1.35x, 136 1.09x, 266 1.10x, 400 0.96x, 152 0.87-1.06x: one or two full
    // waves, the last at most 1 / kWsStreamKLast full, which 8-bit plans given ws keep.)
    const bool streams = sixteen_bit ? (full == 1 && 2 * last <= p.workers) || (full == 2 && 4 * last <= p.workers)
                                     : (full == 1 || full == 2) && last * kWsStreamKLast <= p.workers;
    // 192 x 192 tiles stay DP: their SK + DP (flags, K up or down) ran 0.74-0.89x of persistent DP
    // on the H100 where the last wave is partly empty (4224^3, 3072x3072x8192, 4864x1792x8192;
    // benchmarks/recorded/issue16-h100-tiles-session16.md).
    if (tiles_k >= 2 && last > 0 && streams && p.sg_m * p.sg_n != 12) p.split = "sk+dp";
  } else if (sk_rule) {
    p.split = tiles_mn < p.workers ? "sk" : "sk+dp";
  }
  if (auto it = overrides.find("split"); it != overrides.end()) {
    if (it->second < 0 || it->second > 3)
      throw UserError(cat("plan override split=", it->second, " must be 0 (dp), 1 (sk), 2 (sk+dp) or 3 (dp+sk)"));
    static const char* names[] = {"dp", "sk", "sk+dp", "dp+sk"};
    p.split = names[it->second];
  }
  {
    auto wo = overrides.find("ws");
    if (wo != overrides.end() && (wo->second < 0 || wo->second > 2))
      throw UserError(cat("plan override ws=", wo->second, " must be 0 (no), 1 (a producer warp) or 2 (a producer warpgroup)"));
    // bf16 / f16 -> f32 or s8 / u8 -> s32 (the wgmma plans' types; Stream-K splits too: a
    // persistent grid of the SMs, gemm_recipe_gpu.cpp, simt_tma_ws.cpp)
    const bool ws_ok = p.tma && batch == 1;
    if (wo != overrides.end() && wo->second != 0 && !ws_ok)
      throw UserError(cat("plan override ws=", wo->second, ": the warp-specialized kernel needs a TMA plan (sm_90, wgmma, tma) of one "
                          "unbatched product of bf16 / f16 or int8 / uint8 inputs, not tma=", p.tma, ", batch=", batch, ", inputs ",
                          ir::name(p.a_type)));
    p.ws = static_cast<int>(wo != overrides.end() ? wo->second : ws_default);
    auto po = overrides.find("persistent");
    if (po != overrides.end() && (po->second < 0 || po->second > 1))
      throw UserError(cat("plan override persistent=", po->second, " must be 0 (no) or 1 (yes)"));
    if (po != overrides.end() && po->second == 1 && !p.ws)
      throw UserError(cat("plan override persistent=1: the persistent grid is the warp-specialized kernel's (ws 1 or 2), not ws=", p.ws));
    // Stream-K ws plans are persistent: each block its Stream-K iterations, then DP tiles g, g + grid, ...
    if (po != overrides.end() && po->second == 0 && p.ws && p.split != "dp")
      throw UserError(cat("plan override persistent=0: the warp-specialized Stream-K kernel (split ", p.split,
                          ") is a persistent grid of the SMs"));
    // (8-bit: kWsInt8's figures; 16-bit: kPersistentDefault's)
    const bool waves = tiles_mn > p.workers && (!sixteen_bit || kPersistentDefault);
    p.persistent = po != overrides.end() ? static_cast<int>(po->second) : p.ws && (p.split != "dp" || waves) ? 1 : 0;
    // The in-kernel fix-up spins on flags that other blocks of the launch set: only where every
    // block is resident at once (a grid of at most p.workers blocks, here at most the SMs, each
    // taking one SM: the ws kernels' 97-217 KiB of shared memory leave room for one).
    auto fo = overrides.find("sk_flags");
    if (fo != overrides.end() && (fo->second < 0 || fo->second > 1))
      throw UserError(cat("plan override sk_flags=", fo->second, " must be 0 (a fix-up launch) or 1 (flags in the kernel)"));
    // (16-bit inputs: the flags were built and tested before the ws kernel took 8-bit ones)
    const bool co_resident = p.ws && p.persistent && p.split != "dp" && p.workers <= target.compute_units && sixteen_bit;
    if (fo != overrides.end() && fo->second == 1 && !co_resident)
      throw UserError(cat("plan override sk_flags=1: the in-kernel Stream-K fix-up needs a warp-specialized Stream-K plan (ws, split not dp) "
                          "of bf16 / f16 inputs whose grid of workers=", p.workers, " blocks fits ", target.compute_units,
                          " SMs, not ws=", p.ws, ", split ", p.split, ", inputs ", ir::name(p.a_type)));
    // By default only where every worker's part is a tile or more (2-tile SK + DP): then the only
    // wait is a worker's last part's, for its successor's first, done long before; shorter parts
    // form chains whose waits serialize them (the fix-up launch adds them in parallel).
    const int64_t sk_it = co_resident ? stream_k_tiles(p.split, tiles_mn, tiles_k, p.workers) : 0;
    const bool whole_parts = sk_it > 0 && sk_it >= std::min(p.workers, sk_it) * tiles_k;
    p.sk_flags = fo != overrides.end() ? static_cast<int>(fo->second) : co_resident && whole_parts ? kSkFlagsDefault : 0;
    auto dn = overrides.find("sk_down");
    if (dn != overrides.end() && (dn->second < 0 || dn->second > 1))
      throw UserError(cat("plan override sk_down=", dn->second, " must be 0 (K upward) or 1 (each Stream-K part's K tiles downward)"));
    const bool ws_stream_k = p.ws && p.split != "dp";
    if (dn != overrides.end() && dn->second == 1 && !ws_stream_k)
      throw UserError(cat("plan override sk_down=1: the Stream-K parts' K order is the warp-specialized kernel's producer's (ws, split not dp), "
                          "not ws=", p.ws, ", split ", p.split));
    p.sk_down = dn != overrides.end() ? static_cast<int>(dn->second) : ws_stream_k && sixteen_bit ? kSkDownDefault : 0;
  }
  {  // clusters of 2 blocks sharing B's panels (plan field cluster): off by default. On the H100
     // (benchmarks/recorded/issue16-h100-cluster-session15.txt, CUDA graphs, bf16) against the same
     // plan without them: 0.95-0.98x one tile a block, 0.98-1.00x persistent (4096^3, 8192^3,
     // 4864x1792x8192, 896x4864x8192, 1024x4352x4096).
    auto co = overrides.find("cluster");
    if (co != overrides.end() && co->second != 0 && co->second != 2)
      throw UserError(cat("plan override cluster=", co->second, " must be 0 (no clusters) or 2 (pairs of blocks sharing B's panels)"));
    if (co != overrides.end() && co->second == 2) {
      const int64_t mt = int64_t(p.mr) * p.sg_m, nt = int64_t(p.nr) * p.sg_n, tiles_m = (M + mt - 1) / mt;
      // B's boxes must halve: K-contiguous B in boxes of nt / 2 rows (at most 256), else nt / 64 columns
      if (!p.ws || p.split != "dp" || tiles_m % 2 || (p.group_m % 2) || nt % 128 || (p.persistent && p.workers < 2))
        throw UserError(cat("plan override cluster=2: clusters need a warp-specialized DP plan (ws, split dp) whose tiles along M "
                            "are even (M=", M, " in tiles of ", mt, ": ", tiles_m, "), group_m 0 or even, N tiles a multiple of 128 "
                            "and 2 workers or more, not ws=", p.ws, ", split ", p.split, ", group_m=", p.group_m, ", N tile ", nt,
                            ", workers=", p.workers));
      p.cluster = 2;
    }
  }
  {  // the epilogue's staging: each warp's region, the largest of 3072, 1536, 768 bytes that fits after the stages
    auto eo = overrides.find("epi_smem");
    if (eo != overrides.end() && (eo->second < 0 || eo->second > 1))
      throw UserError(cat("plan override epi_smem=", eo->second, " must be 0 (no) or 1 (yes)"));
    auto so = overrides.find("tma_store");
    if (so != overrides.end() && (so->second < 0 || so->second > 2))
      throw UserError(cat("plan override tma_store=", so->second, " must be 0 (no), 1 (yes) or 2 (boxes of a warpgroup)"));
    const bool staged = eo != overrides.end() ? eo->second != 0 : kEpiSmemDefault;
    int fit = 0, fit_tma = 0;
    const int64_t limit = std::max<int64_t>(48 * 1024, target.shared_bytes);
    if (p.wgmma) {
      const int64_t esz = ir::size_in_bytes(p.a_type), warps = int64_t(p.sg_m) * p.sg_n;
      const int64_t used = (16 * int64_t(p.sg_m) + int64_t(p.nr) * p.sg_n) * p.kb * esz * p.stages + 1024 + (p.tma ? 16 * p.stages : 0);
      for (int e : {3072, 1536, 768})
        if (used + warps * e <= limit) {
          fit = e;
          break;
        }
      // TMA stores: one or two boxes of 2048 bytes a warp, the regions 1024-byte aligned (up to
      // 1024 bytes more); C of 2- or 4-byte elements, the staged epilogue alone (alpha / beta).
      const int64_t c_bytes = ir::size_in_bytes(p.c_type);
      const bool c_ok = (c_bytes == 2 || c_bytes == 4) && p.c_type != ir::ScalarType::i16 && p.c_type != ir::ScalarType::u16 &&
                        p.c_type != ir::ScalarType::u32;
      if (p.tma && c_ok && !p.epilogue.any() && spec.batch1 * spec.batch2 == 1)
        for (int e : {4096, 2048})
          if (used + 1024 + warps * e <= limit) {
            fit_tma = e;
            break;
          }
    }
    if (eo != overrides.end() && eo->second == 1 && !fit)
      throw UserError(cat("plan override epi_smem=1: the epilogue's staging needs a wgmma plan (sm_90) with at least 768 bytes a warp "
                          "of shared memory left after its ", p.stages, " stages, not wgmma=", p.wgmma));
    if (so != overrides.end() && so->second >= 1 && (!fit_tma || !staged))
      throw UserError(cat("plan override tma_store=", so->second, ": TMA stores of C need a wgmma TMA plan (sm_90, tma) of one unbatched product ",
                          "whose epilogue is staged (epi_smem, ", staged ? "on" : "off", ") with 2048 bytes a warp of shared memory "
                          "left after its ", p.stages, " stages, alpha / beta only (no fused epilogue), and C of bf16, f16, f32 or "
                          "int32, not wgmma=", p.wgmma, ", tma=", p.tma, ", batch=", spec.batch1 * spec.batch2, ", C ",
                          ir::name(p.c_type), p.epilogue.any() ? ", a fused epilogue" : ""));
    p.tma_store = staged && fit_tma ? (so != overrides.end() ? static_cast<int>(so->second) : kTmaStoreDefault) : 0;
    p.epi_smem = staged ? (p.tma_store ? fit_tma : fit) : 0;
  }
  if (p.work_group_size() + (p.ws == 2 ? 128 : p.ws ? 32 : 0) > target.max_work_group_size)
    throw UserError(cat("plan work-group of ", p.sg_m, " x ", p.sg_n, " subgroups of ", p.subgroup_size, " = ",
                        p.work_group_size(), " work-items exceeds ", target.device, "'s maximum ", target.max_work_group_size));
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
