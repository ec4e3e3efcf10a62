// GEMM on a SPIR-V device (gpu_gemm.h).
#include "runtime/gpu_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "build/gemm_recipe_gpu.h"
#include "build/kmajor_copy.h"
#include "core/error.h"
#include "runtime/cuda.h"

namespace coopjit {

GpuGemmKernel gpu_gemm_kernel(const GemmSpec& spec, const std::string& device, const PlanOverrides& overrides) {
  GpuGemmKernel k{spec, plan_gpu_gemm(spec, gpu_target(device), overrides), overrides, device, nullptr, nullptr, nullptr};
  const GpuGemmPlan plan = k.plan;
  k.code = device_program(device, plan.code_key(), [plan](const std::string& symbol) { return build_gemm_gpu(plan, symbol); });
  if (plan.split != "dp" && !plan.sk_flags)  // (sk_flags: the fix-up is in the kernel)
    k.fixup = device_program(device, plan.code_key() + ".fixup", [plan](const std::string& symbol) {
      return build_gemm_gpu(plan, symbol, GpuGemmPart::fixup);
    });
  if (plan.kmajor) k.copy = device_program(device, "kmajor_copy.u8", [](const std::string& symbol) { return build_kmajor_copy(symbol); });
  return k;
}

namespace {
// The plan without the warp-specialized kernel (operands that the TMA copies or the pipeline cannot
// take run it): the fields that only that kernel has go with it, a user's overrides too (sk_flags,
// the in-kernel fix-up's options, sk_down, cluster: the plan without ws refuses them).
void drop_ws(PlanOverrides& o) {
  o["ws"] = 0;
  o["persistent"] = 0;
  for (const char* f : {"sk_flags", "sk_down", "sk_trace", "sk_prefetch", "sk_stage", "sk_one_release", "sk_stage_store", "sk_pair", "cluster"}) o.erase(f);
}

// The K-major copies of a kmajor plan (gpu_plan.h): operand x (0 op(A), 1 op(B)) is K rows of
// M (N) contiguous bytes, its rows `ss` bytes apart; its copy M (N) rows of K, kmajor_ld(K) apart,
// at a 256-byte aligned offset of the workspace.
struct KmajorGeometry {
  int64_t rows = 0, cols = 0, ss = 0, offset = 0;
};
std::vector<KmajorGeometry> kmajor_geometry(const GemmSpec& spec, int km, int64_t* bytes) {
  std::vector<KmajorGeometry> g(2);
  int64_t off = 0;
  for (int x = 0; x < 2; ++x) {
    if (!(km & (1 << x))) continue;
    g[x] = x == 0 ? KmajorGeometry{spec.K, spec.M, spec.sa_c, off} : KmajorGeometry{spec.K, spec.N, spec.sb_r, off};
    off += (g[x].cols * kmajor_ld(spec.K) + 255) / 256 * 256;
  }
  *bytes = std::max<int64_t>(off, 256);
  return g;
}

// A workspace (`what`: the K-major copies, or Stream-K's partial tiles), kept per thread, device
// and stream (a launch and the next one reading or reusing it are ordered on their stream), grown
// as needed.
uint8_t* stream_workspace(const char* what, const std::string& device, uintptr_t stream, int64_t bytes) {
  thread_local std::map<std::tuple<std::string, std::string, uintptr_t>, std::unique_ptr<SharedAllocation>> spaces;
  auto& ws = spaces[{what, device, stream}];
  if (!ws || ws->bytes() < static_cast<size_t>(bytes))
    ws.reset(), ws = std::make_unique<SharedAllocation>(open_device(device), static_cast<size_t>(bytes), 256);
  return static_cast<uint8_t*>(ws->data());
}

// The in-kernel Stream-K fix-up's flags (plan field sk_flags), kept as the workspaces are: zero
// when made, and every launch leaves them zero (each flag is reset by the warp that waited for it),
// so that no launch clears them first.
std::map<std::tuple<std::string, uintptr_t>, std::unique_ptr<SharedAllocation>>& stream_k_flag_spaces() {
  thread_local std::map<std::tuple<std::string, uintptr_t>, std::unique_ptr<SharedAllocation>> spaces;
  return spaces;
}
SharedAllocation* stream_k_flags_allocation(const std::string& device, uintptr_t stream) {
  auto it = stream_k_flag_spaces().find({device, stream});
  return it == stream_k_flag_spaces().end() ? nullptr : it->second.get();
}
int32_t* stream_k_flags(const std::string& device, uintptr_t stream, int64_t bytes) {
  auto& fl = stream_k_flag_spaces()[{device, stream}];
  if (!fl || fl->bytes() < static_cast<size_t>(bytes)) {
    fl.reset();
    fl = std::make_unique<SharedAllocation>(open_device(device), static_cast<size_t>(bytes), 256);
    const std::vector<uint8_t> zeros(static_cast<size_t>(bytes), 0);
    fl->upload(zeros.data(), zeros.size());
  }
  return static_cast<int32_t*>(fl->data());
}

// Launches the copies of the operands `km` names (a, b: op(A), op(B)); returns the pointers the
// product reads. `sync`: launch and wait (coopjit's stream), else queue on `stream`.
std::pair<const void*, const void*> kmajor_copies(const DeviceProgram& copy, const std::string& device, const GemmSpec& spec,
                                                  int km, const void* a, const void* b, uintptr_t stream, bool sync) {
  int64_t bytes = 0;
  const std::vector<KmajorGeometry> geo = kmajor_geometry(spec, km, &bytes);
  uint8_t* ws = stream_workspace("kmajor", device, sync ? 0 : stream, bytes);
  const void* out[2] = {a, b};
  const ir::Type idx = ir::Type::index();
  for (int x = 0; x < 2; ++x) {
    if (!(km & (1 << x))) continue;
    const KmajorGeometry& g = geo[x];
    void* dst = ws + g.offset;
    const int64_t c4 = g.cols / 4, groups = ((g.rows + 3) / 4 + 31) / 32 * ((c4 + kKmajorCopyGroup / 32 - 1) / (kKmajorCopyGroup / 32));
    std::vector<KernelArg> args{pointer_arg(const_cast<void*>(out[x])), pointer_arg(dst)};
    for (int64_t v : {g.rows, c4, g.ss / 4, kmajor_ld(spec.K) / 4}) args.push_back(scalar_arg(idx, v, 0.0));
    if (sync) {
      copy.launch(args, groups);
    } else {
      uint64_t slots[6];
      void* params[6];
      slots[0] = reinterpret_cast<uintptr_t>(out[x]);
      slots[1] = reinterpret_cast<uintptr_t>(dst);
      for (size_t i = 2; i < 6; ++i) std::memcpy(&slots[i], args[i].value.data(), std::min<size_t>(8, args[i].value.size()));
      for (size_t i = 0; i < 6; ++i) params[i] = &slots[i];
      copy.launch_on_stream(params, groups, stream);
    }
    out[x] = dst;
  }
  return {out[0], out[1]};
}

// The product on the copies: the same kernel without the copy step.
GpuGemmKernel without_copies(const GpuGemmKernel& k) {
  GpuGemmKernel inner = k;
  inner.plan.kmajor = 0;
  inner.overrides.erase("kmajor");
  inner.copy = nullptr;
  return inner;
}

// The Stream-K launch of a plan over `tiles` output tiles and K (gemm_recipe_gpu.cpp): the split of
// seeds/004 (the CPU path's formula), a workspace of two macro tiles per worker, the product's
// work-groups (ws plans: a persistent grid of at most the SMs, p.workers, one block an SM that its
// shared memory allows; blocks [0, workers) streaming, every block walking DP tiles after that)
// and the fix-up's (the streamed tiles; 0 when nothing streams).
struct StreamKLaunch {
  int64_t tiles_k = 1, sk_iters = 0, workers = 0, ws_bytes = 0, groups = 0, fixup_groups = 0, flags_bytes = 0;
};
StreamKLaunch stream_k_launch(const GpuGemmPlan& p, int64_t tiles, int64_t K) {
  StreamKLaunch s;
  s.tiles_k = std::max<int64_t>(1, (K + p.kt - 1) / p.kt);
  s.sk_iters = stream_k_tiles(p.split, tiles, s.tiles_k, p.workers);
  s.workers = s.sk_iters > 0 ? std::min(p.workers, s.sk_iters) : 0;
  s.ws_bytes = std::max<int64_t>(1, s.workers) * 2 * int64_t(p.mr) * p.sg_m * p.nr * p.sg_n * ir::size_in_bytes(p.dtype);
  const int64_t dp_tiles = tiles - s.sk_iters / s.tiles_k;
  s.groups = p.ws ? std::max<int64_t>(1, std::max(s.workers, std::min(p.workers, dp_tiles))) : s.workers + dp_tiles;
  s.fixup_groups = s.workers > 0 && !p.sk_flags ? s.sk_iters / s.tiles_k : 0;
  // sk_flags: a flag a consumer warp of each worker and of worker `workers` (never set: the last
  // worker's next, which it never waits for). The allocation is zero between launches (each
  // launch resets the flags it set), so plans of other sizes on the same stream may share it.
  // sk_trace (debug): the blocks' trace entries after the flags (gpu_plan.h).
  const int64_t trace = p.sk_trace ? s.groups * GpuGemmPlan::kSkTraceUnits * GpuGemmPlan::kSkTraceSlots : 0;
  if (p.sk_flags) s.flags_bytes = ((std::max<int64_t>(1, s.workers) + 1 + trace) * p.sg_m * p.sg_n * 4 + 255) / 256 * 256;
  return s;
}

// A tensor map's rows are 16-byte multiples apart, its extents 1 to 2^32 elements.
TmaGeometry tma_geometry(const GpuGemmPlan& p, const GemmArgs& g) {
  TmaGeometry t;
  t.esz = ir::size_in_bytes(p.a_type);
  t.a_rows = p.unit_ak ? g.sa_r * t.esz : g.sa_c * t.esz;
  t.b_rows = p.unit_b ? g.sb_c * t.esz : g.sb_r * t.esz;
  const int64_t lim = int64_t(1) << 32;
  t.ok = g.batch1 * g.batch2 == 1 && t.a_rows > 0 && t.b_rows > 0 && t.a_rows % 16 == 0 && t.b_rows % 16 == 0 &&
         t.a_rows < (int64_t(1) << 40) && t.b_rows < (int64_t(1) << 40) && g.K >= 1 && g.K <= lim && g.M <= lim &&
         g.N <= lim && cuda::tensor_maps_available();
  if (p.tma_store) {  // C's map: unit stride along its lines (rows; columns when unit_c), lines 16-byte multiples apart
    t.c_esz = ir::size_in_bytes(p.c_type);
    const int64_t unit = p.unit_c ? g.sc_r : g.sc_c, other = p.unit_c ? g.sc_c : g.sc_r;
    t.c_lines = other * t.c_esz;
    const int64_t lim31 = int64_t(1) << 31;  // the store's coordinates are signed 32-bit
    t.c_ok = t.ok && unit == 1 && t.c_lines > 0 && t.c_lines % 16 == 0 && t.c_lines < (int64_t(1) << 40) && g.M < lim31 &&
             g.N < lim31;
  }
  return t;
}

// The two maps (three with tma_store: C's), in the orientation the lowering takes from the plan;
// they go after all of the IR's parameters (simt_lower.cpp), Stream-K's too.
std::vector<KernelArg> tma_maps(const GpuGemmPlan& p, const GemmArgs& g, const TmaGeometry& t, const std::string& device,
                                const void* ka, const void* kb, const void* c) {
  const int e = static_cast<int>(t.esz);
  std::vector<KernelArg> maps(p.tma_store ? 3 : 2);
  if (p.tma_store) {  // boxes of 16 rows x 128 bytes (swizzle 128), or of 16-row columns (32 / 64 bytes: swizzle 32 / 64)
    const int ce = static_cast<int>(t.c_esz), P = 128 / ce;
    // tma_store 2, 16-bit C with contiguous rows: a box of a warpgroup's 64 rows (128 bytes, swizzle
    // 128; simt_wgmma.cpp, tma_store) where each warp's region has room for two warps' boxes
    const bool wg = p.tma_store == 2 && p.unit_c && ce == 2 && p.epi_smem >= 4096;
    maps[2].value = wg         ? cuda::tensor_map_2d(device, c, ce, g.M, g.N, t.c_lines, 64, P, 3)
                  : p.unit_c ? cuda::tensor_map_2d(device, c, ce, g.M, g.N, t.c_lines, 16, P, ce == 2 ? 1 : 2)
                             : cuda::tensor_map_2d(device, c, ce, g.N, g.M, t.c_lines, P, 16, 3);
  }
  const int row = 128 / e;  // a K-contiguous box row: 128 bytes of K (the plan's kb); M- / N-contiguous: 64 (16-bit only)
  maps[0].value = p.unit_ak ? cuda::tensor_map_2d(device, ka, e, g.K, g.M, t.a_rows, row, p.tma_box_rows(true))  // M rows of K
                            : cuda::tensor_map_2d(device, ka, e, g.M, g.K, t.a_rows, 64, 64);                      // K rows of M
  maps[1].value = p.unit_b ? cuda::tensor_map_2d(device, kb, e, g.K, g.N, t.b_rows, row, p.tma_box_rows(false))  // N rows of K
                           : cuda::tensor_map_2d(device, kb, e, g.N, g.K, t.b_rows, 64, 64);                       // K rows of N
  return maps;
}

}  // namespace

bool tma_store_ok(const TmaGeometry& t, const void* c) { return t.c_ok && (reinterpret_cast<uintptr_t>(c) & 15) == 0; }

void run_gpu_gemm(const GpuGemmKernel& k, const GemmSpec& spec, const void* a, const void* b, void* c, double alpha,
                  double beta, const EpilogueArgs* epilogue) {
  const GpuGemmPlan& p = k.plan;
  if (p.kmajor) {  // the K-major copies first (operands not 16-byte aligned: the plan without them)
    if ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15) {
      PlanOverrides o = k.overrides;
      o["kmajor"] = 0;
      run_gpu_gemm(gpu_gemm_kernel(spec, k.device, o), spec, a, b, c, alpha, beta, epilogue);
      return;
    }
    if (spec.M == 0 || spec.N == 0) return;
    const auto [ka, kb] = kmajor_copies(*k.copy, k.device, spec, p.kmajor, a, b, 0, true);
    run_gpu_gemm(without_copies(k), kmajor_spec(spec, p.kmajor), ka, kb, c, alpha, beta, epilogue);
    return;
  }
  const GemmArgs g = gemm_args(spec, p.as_cpu_plan());
  if (g.M == 0 || g.N == 0 || g.batch1 == 0 || g.batch2 == 0) return;
  const void* ka = g.swap_ab ? b : a;
  const void* kb = g.swap_ab ? a : b;
  // The tensor-core pipeline copies 16-byte chunks: operands that are not 16-byte aligned run the
  // plan without it.
  if (p.stages && ((reinterpret_cast<uintptr_t>(ka) | reinterpret_cast<uintptr_t>(kb)) & 15)) {
    PlanOverrides o = k.overrides;
    o["stages"] = 0;
    o["wgmma"] = 0;
    o["tma"] = 0;
    o["tma_store"] = 0;
    drop_ws(o);
    run_gpu_gemm(gpu_gemm_kernel(spec, k.device, o), spec, a, b, c, alpha, beta, epilogue);
    return;
  }
  const TmaGeometry tma = p.tma ? tma_geometry(p, g) : TmaGeometry{};
  if (p.tma && !tma.ok) {
    PlanOverrides o = k.overrides;
    o["tma"] = 0;
    o["tma_store"] = 0;
    drop_ws(o);
    run_gpu_gemm(gpu_gemm_kernel(spec, k.device, o), spec, a, b, c, alpha, beta, epilogue);
    return;
  }
  if (p.tma_store && !tma_store_ok(tma, c)) {  // C a tensor map cannot describe: stored from the staging by the lanes
    PlanOverrides o = k.overrides;
    o["tma_store"] = 0;
    run_gpu_gemm(gpu_gemm_kernel(spec, k.device, o), spec, a, b, c, alpha, beta, epilogue);
    return;
  }
  const int64_t mt = int64_t(p.mr) * p.sg_m, nt = int64_t(p.nr) * p.sg_n;
  const int64_t tiles = g.batch1 * g.batch2 * ((g.M + mt - 1) / mt) * ((g.N + nt - 1) / nt);
  const ir::Type idx = ir::Type::index(), acc = ir::Type::of(p.dtype);
  std::vector<KernelArg> args{pointer_arg(const_cast<void*>(ka)), pointer_arg(const_cast<void*>(kb)), pointer_arg(c)};
  for (int64_t v : {g.M, g.N, g.K, g.sa_r, g.sa_c, g.sb_r, g.sb_c, g.sc_r, g.sc_c, g.batch1, g.batch2, g.sa_b1, g.sb_b1,
                    g.sc_b1, g.sa_b2, g.sb_b2, g.sc_b2})
    args.push_back(scalar_arg(idx, v, 0.0));
  const bool int_scalars = !ir::is_float(p.dtype);
  args.push_back(scalar_arg(acc, int_scalars ? integer_scalar(alpha, "alpha") : 0, alpha));
  args.push_back(scalar_arg(acc, int_scalars ? integer_scalar(beta, "beta") : 0, beta));
  if (p.epilogue.any()) {
    const GemmEpilogue& e = p.epilogue;
    if (!epilogue || (e.scale && !epilogue->scale) || (e.row_scale && !epilogue->row_scale) || (e.bias && !epilogue->bias) ||
        (e.residual && !epilogue->residual))
      throw InternalError("the kernel's epilogue needs operands that were not given");
    // Absent steps' parameters get C (never read): a valid device pointer on every runtime.
    for (const void* q : {epilogue->scale, epilogue->row_scale, epilogue->bias, epilogue->residual})
      args.push_back(pointer_arg(const_cast<void*>(q ? q : c)));
  }
  const std::vector<KernelArg> maps = p.tma ? tma_maps(p, g, tma, k.device, ka, kb, c) : std::vector<KernelArg>{};
  if (p.split == "dp") {
    args.insert(args.end(), maps.begin(), maps.end());
    k.code->launch(args, p.persistent ? p.persistent_grid(tiles) : tiles);  // persistent: a grid of the SMs
    return;
  }
  // Stream-K: the main launch, then the fix-up of the split tiles. The workspace is kept per
  // thread and device, grown as needed: an allocation per call (and its free, which waits for the
  // device) cost more than a small Stream-K GEMM.
  const StreamKLaunch s = stream_k_launch(p, tiles, g.K);
  args.push_back(pointer_arg(stream_workspace("stream_k", k.device, 0, s.ws_bytes)));
  for (int64_t v : {s.workers, s.sk_iters, s.tiles_k}) args.push_back(scalar_arg(idx, v, 0.0));
  if (p.sk_flags) args.push_back(pointer_arg(stream_k_flags(k.device, 0, s.flags_bytes)));
  args.insert(args.end(), maps.begin(), maps.end());
  k.code->launch(args, s.groups);
  if (s.fixup_groups > 0) k.fixup->launch(args, s.fixup_groups);
}

std::vector<int32_t> read_stream_k_flags(const std::string& device, uintptr_t stream, bool clear) {
  std::vector<int32_t> out;
  for (uintptr_t st : {stream, uintptr_t(0)}) {  // (the synchronous path's allocation: stream 0)
    SharedAllocation* fl = stream_k_flags_allocation(device, st);
    if (!fl) continue;
    out.resize(fl->bytes() / 4);
    fl->download(out.data(), out.size() * 4);
    if (clear) {
      const std::vector<uint8_t> zeros(fl->bytes(), 0);
      fl->upload(zeros.data(), zeros.size());
    }
    return out;
  }
  return out;
}

std::shared_ptr<const GpuGemmLaunch> prepare_gpu_gemm_launch(const GpuGemmKernel& kernel, const GemmSpec& spec,
                                                              bool aligned) {
  if (kernel.plan.split != "dp" && !kernel.plan.ws) return nullptr;
  if (kernel.plan.kmajor) {  // the copies, then the launch of the product on them
    if (!aligned) {
      PlanOverrides o = kernel.overrides;
      o["kmajor"] = 0;
      return prepare_gpu_gemm_launch(gpu_gemm_kernel(spec, kernel.device, o), spec, aligned);
    }
    std::shared_ptr<const GpuGemmLaunch> in = prepare_gpu_gemm_launch(without_copies(kernel), kmajor_spec(spec, kernel.plan.kmajor), true);
    if (!in) return nullptr;
    auto l = std::make_shared<GpuGemmLaunch>(*in);
    l->kmajor = kernel.plan.kmajor;
    l->spec = spec;
    l->copy = kernel.copy;
    return l;
  }
  auto l = std::make_shared<GpuGemmLaunch>();
  l->k = kernel;
  if (!aligned && kernel.plan.stages) {  // as run_gpu_gemm: the plan without the 16-byte cp.async copies
    PlanOverrides o = kernel.overrides;
    o["stages"] = 0;
    o["wgmma"] = 0;
    o["tma"] = 0;
    o["tma_store"] = 0;
    drop_ws(o);
    l->k = gpu_gemm_kernel(spec, kernel.device, o);
    if (l->k.plan.split != "dp") return nullptr;
  }
  if (l->k.plan.tma) {  // as run_gpu_gemm: strides a tensor map cannot describe take the plan without TMA
    const TmaGeometry t = tma_geometry(l->k.plan, gemm_args(spec, l->k.plan.as_cpu_plan()));
    if (!t.ok) {
      PlanOverrides o = l->k.overrides;
      o["tma"] = 0;
      o["tma_store"] = 0;
      drop_ws(o);
      l->k = gpu_gemm_kernel(spec, kernel.device, o);
      if (l->k.plan.split != "dp") return nullptr;
    }
  }
  if (l->k.plan.tma_store && !tma_geometry(l->k.plan, gemm_args(spec, l->k.plan.as_cpu_plan())).c_ok) {  // C's strides
    PlanOverrides o = l->k.overrides;
    o["tma_store"] = 0;
    l->k = gpu_gemm_kernel(spec, kernel.device, o);
  }
  const GpuGemmPlan& p = l->k.plan;
  const GemmArgs g = gemm_args(spec, p.as_cpu_plan());
  l->g = g;
  l->kspec = spec;
  l->kaligned = aligned;
  if (p.tma) l->tma = tma_geometry(p, g);
  l->swap_ab = g.swap_ab;
  const int64_t mt = int64_t(p.mr) * p.sg_m, nt = int64_t(p.nr) * p.sg_n;
  const int64_t tiles = g.batch1 * g.batch2 * ((g.M + mt - 1) / mt) * ((g.N + nt - 1) / nt);
  l->groups = p.persistent ? p.persistent_grid(tiles) : tiles;  // persistent: a grid of the SMs
  l->acc = p.dtype;
  l->int_scalars = !ir::is_float(p.dtype);
  const ir::Type idx = ir::Type::index();
  l->slots.assign(3, 0);  // a, b, c
  for (int64_t v : {g.M, g.N, g.K, g.sa_r, g.sa_c, g.sb_r, g.sb_c, g.sc_r, g.sc_c, g.batch1, g.batch2, g.sa_b1, g.sb_b1,
                    g.sc_b1, g.sa_b2, g.sb_b2, g.sc_b2}) {
    const KernelArg a = scalar_arg(idx, v, 0.0);
    uint64_t bytes = 0;
    std::memcpy(&bytes, a.value.data(), std::min<size_t>(8, a.value.size()));
    l->slots.push_back(bytes);
  }
  l->alpha_slot = l->slots.size();
  l->slots.push_back(0);  // alpha
  l->slots.push_back(0);  // beta
  if (p.epilogue.any()) {  // the epilogue's four operands (scale, row_scale, bias, residual), set per launch
    l->epi_slot = l->slots.size();
    l->epilogue = p.epilogue;
    l->slots.insert(l->slots.end(), 4, 0);
  }
  if (p.split != "dp") {  // Stream-K ws plans: the workspace (per call, launch_gpu_gemm), workers, sk_iters, tiles_k
    const StreamKLaunch s = stream_k_launch(p, tiles, g.K);
    l->ws_slot = l->slots.size();
    l->slots.push_back(0);
    for (int64_t v : {s.workers, s.sk_iters, s.tiles_k}) {
      const KernelArg a = scalar_arg(idx, v, 0.0);
      uint64_t bytes = 0;
      std::memcpy(&bytes, a.value.data(), std::min<size_t>(8, a.value.size()));
      l->slots.push_back(bytes);
    }
    if (p.sk_flags) {  // FL (launch_gpu_gemm)
      l->flags_slot = l->slots.size();
      l->slots.push_back(0);
      l->flags_bytes = s.flags_bytes;
    }
    l->ws_bytes = s.ws_bytes;
    l->groups = s.groups;
    l->fixup_groups = s.fixup_groups;
  }
  const int64_t maps = p.tma ? (p.tma_store ? 3 : 2) : 0;
  if (l->slots.size() != l->k.code->params.size() || l->k.code->tensor_maps != maps)
    throw InternalError(cat("the GEMM kernel takes ", l->k.code->params.size(), " parameters and ", l->k.code->tensor_maps,
                            " tensor maps, not ", l->slots.size(), " and ", maps));
  return l;
}

void launch_gpu_gemm(const GpuGemmLaunch& l, const void* a, const void* b, void* c, double alpha, double beta,
                     uintptr_t stream, const EpilogueArgs* epilogue) {
  constexpr size_t kMax = 40;
  const size_t n = l.slots.size();
  if (n + 3 > kMax) throw InternalError("a GEMM kernel with more than 37 parameters");
  if (l.epi_slot) {
    const GemmEpilogue& e = l.epilogue;
    if (!epilogue || (e.scale && !epilogue->scale) || (e.row_scale && !epilogue->row_scale) || (e.bias && !epilogue->bias) ||
        (e.residual && !epilogue->residual))
      throw InternalError("the launch's epilogue needs operands that were not given");
  }
  uint64_t slots[kMax];
  void* params[kMax];
  if (l.kmajor) std::tie(a, b) = kmajor_copies(*l.copy, l.k.device, l.spec, l.kmajor, a, b, stream, false);
  if (l.k.plan.tma_store && !tma_store_ok(l.tma, c)) {  // C not 16-byte aligned: the launch without TMA stores
    std::shared_ptr<const GpuGemmLaunch> fb;
    {
      std::lock_guard<std::mutex> lock(l.no_tma_store.m);
      if (!l.no_tma_store.l) {
        PlanOverrides o = l.k.overrides;
        o["tma_store"] = 0;
        o.erase("kmajor");  // (the kernel's spec is that of the copies, already made)
        l.no_tma_store.l = prepare_gpu_gemm_launch(gpu_gemm_kernel(l.kspec, l.k.device, o), l.kspec, l.kaligned);
        if (!l.no_tma_store.l || l.no_tma_store.l->k.plan.tma_store || l.no_tma_store.l->kmajor)
          throw InternalError(cat("no launch without TMA stores for ", l.k.plan.key()));
      }
      fb = l.no_tma_store.l;
    }
    launch_gpu_gemm(*fb, a, b, c, alpha, beta, stream, epilogue);
    return;
  }
  std::memcpy(slots, l.slots.data(), n * sizeof(uint64_t));
  const void* ka = l.swap_ab ? b : a;
  const void* kb = l.swap_ab ? a : b;
  slots[0] = reinterpret_cast<uintptr_t>(ka);
  slots[1] = reinterpret_cast<uintptr_t>(kb);
  slots[2] = reinterpret_cast<uintptr_t>(c);
  const ir::Type acc = ir::Type::of(l.acc);
  for (size_t j = 0; j < 2; ++j) {
    const double v = j ? beta : alpha;
    const KernelArg s = scalar_arg(acc, l.int_scalars ? integer_scalar(v, j ? "beta" : "alpha") : 0, v);
    slots[l.alpha_slot + j] = 0;
    std::memcpy(&slots[l.alpha_slot + j], s.value.data(), std::min<size_t>(8, s.value.size()));
  }
  if (l.epi_slot) {  // absent steps' parameters get C (never read), as run_gpu_gemm's
    const void* q[4] = {epilogue->scale, epilogue->row_scale, epilogue->bias, epilogue->residual};
    for (size_t i = 0; i < 4; ++i) slots[l.epi_slot + i] = reinterpret_cast<uintptr_t>(q[i] ? q[i] : c);
  }
  for (size_t i = 0; i < n; ++i) params[i] = &slots[i];
  // TMA plans: the tensor maps describe the operands' addresses, so they are made for a call on
  // other operands than the last one's (a host-side encoding in the device's context), passed by
  // value after the other parameters.
  alignas(64) uint8_t maps[3][128];
  if (l.k.plan.tma) {
    const bool st = l.k.plan.tma_store != 0;
    std::lock_guard<std::mutex> lock(l.map_cache.m);
    if (!l.map_cache.a || l.map_cache.a != ka || l.map_cache.b != kb || (st && l.map_cache.c != c)) {
      const std::vector<KernelArg> made = tma_maps(l.k.plan, l.g, l.tma, l.k.device, ka, kb, c);
      for (size_t i = 0; i < made.size(); ++i) {
        if (made[i].value.size() != 128) throw InternalError(cat("a tensor map of ", made[i].value.size(), " bytes"));
        std::memcpy(l.map_cache.maps[i], made[i].value.data(), 128);
      }
      l.map_cache.a = ka, l.map_cache.b = kb, l.map_cache.c = st ? c : nullptr;
    }
    std::memcpy(maps, l.map_cache.maps, sizeof maps);
    params[n] = maps[0];
    params[n + 1] = maps[1];
    if (st) params[n + 2] = maps[2];
  }
  if (l.ws_slot) slots[l.ws_slot] = reinterpret_cast<uintptr_t>(stream_workspace("stream_k", l.k.device, stream, l.ws_bytes));
  if (l.flags_slot) slots[l.flags_slot] = reinterpret_cast<uintptr_t>(stream_k_flags(l.k.device, stream, l.flags_bytes));
  l.k.code->launch_on_stream(params, l.groups, stream);
  if (l.fixup_groups > 0) l.k.fixup->launch_on_stream(params, l.fixup_groups, stream);  // after it, on the same stream
}

}  // namespace coopjit
