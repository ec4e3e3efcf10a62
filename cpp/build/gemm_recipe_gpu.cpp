// The GEMM recipe for SPIR-V devices (gemm_recipe_gpu.h).
#include "build/gemm_recipe_gpu.h"

#include "build/gemm_epilogue.h"
#include "ir/builder.h"

namespace coopjit {

using namespace ir;

namespace {
// The in-kernel Stream-K fix-up's waits (sk_flags plans) trap after this many polls (each an L2
// round trip and a 32 ns nanosleep: tens of seconds, where a wait lasts at most one part's K
// loop, or a chain of them) rather than hang.
constexpr int64_t kFlagSpinLimit = int64_t(1) << 26;
}  // namespace

std::unique_ptr<Function> build_gemm_gpu(const GpuGemmPlan& p, const std::string& name, GpuGemmPart part) {
  auto fp = std::make_unique<Function>();
  Function& f = *fp;
  f.name = name;
  f.attrs["subgroup_size"] = int64_t(p.subgroup_size);
  f.attrs["subgroups_per_group"] = int64_t(p.sg_m * p.sg_n);
  if (p.dpas) f.attrs["dpas"] = int64_t(p.dpas);
  if (p.block2d) f.attrs["block2d"] = int64_t(p.block2d);
  if (p.mma) f.attrs["mma"] = int64_t(p.mma);
  if (p.stages) {  // the pipeline's stages beyond the static 48 KiB: dynamic shared memory
    const int64_t bytes = ((int64_t(p.mr) * p.sg_m + int64_t(p.nr) * p.sg_n) * p.kb * size_in_bytes(p.a_type) + fma_stage_pad(p)) * p.stages +
                          (p.wgmma ? 1024 : 0) +  // wgmma: the slots aligned to 1024 bytes
                          (p.tma ? 16 * p.stages : 0) +  // tma: two mbarriers a stage
                          (p.sk_pair ? 32 : 0) +  // sk_pair: the pair's mbarriers and mailbox (simt_tma_ws.cpp)
                          (p.epi_alias ? 0 :  // epi_alias: the staging in the stage slots
                           int64_t(p.sg_m) * p.sg_n * p.epi_smem +  // the epilogue's staging, a region a warp
                           (p.tma_store ? 1024 : 0));  // tma_store: the regions 1024-byte aligned
    if (bytes > 48 * 1024) f.attrs["dynamic_shared"] = bytes;
  }
  if (p.wgmma) f.attrs["wgmma"] = int64_t(1);  // compiled for sm_90a (device_program.cpp)
  // A's and B's (and C's for TMA stores), kernel parameters after the IR's (simt_lower.cpp)
  if (p.tma) f.attrs["tensor_maps"] = int64_t(p.tma_store ? 3 : 2);
  // ws: the TMA producer warp (ws 1) or warpgroup (ws 2) after the IR's subgroups (simt_tma_ws.cpp)
  // (the Stream-K fix-up has no K loop: no producers, the consumers' registers a thread)
  if (p.ws && part != GpuGemmPart::fixup) f.attrs["producer_warps"] = int64_t(p.ws == 2 ? 4 : 1);
  // clusters of blocks sharing B's panels (simt_tma_ws.cpp): the walk below pairs them (the planner's conditions)
  if (p.cluster && part != GpuGemmPart::fixup) f.attrs["cluster"] = int64_t(p.cluster);
  // sk_pair: clusters of 2 blocks (no multicast) passing a partial tile through distributed shared memory
  if (p.sk_pair && part != GpuGemmPart::fixup) f.attrs["sk_pair"] = int64_t(1);
  const ScalarType T = p.dtype;
  const bool stream_k = p.split != "dp";
  auto idx = [&](const char* n) { return f.add_param(Type::index(), n); };
  Value* A = f.add_param(Type::pointer(p.a_type), "A");
  Value* B = f.add_param(Type::pointer(p.b_type), "B");
  Value* C = f.add_param(Type::pointer(p.c_type), "C");
  Value *M = idx("M"), *N = idx("N"), *K = idx("K");
  Value *sa_r_p = idx("sa_r"), *sa_c_p = idx("sa_c"), *sb_r_p = idx("sb_r"), *sb_c = idx("sb_c");
  Value *sc_r_p = idx("sc_r"), *sc_c = idx("sc_c");
  Value *batch1 = idx("batch1"), *batch2 = idx("batch2");
  Value *sa_b1 = idx("sa_b1"), *sb_b1 = idx("sb_b1"), *sc_b1 = idx("sc_b1");
  Value *sa_b2 = idx("sa_b2"), *sb_b2 = idx("sb_b2"), *sc_b2 = idx("sc_b2");
  Value* alpha = f.add_param(Type::of(T), "alpha");
  Value* beta = f.add_param(Type::of(T), "beta");
  (void)batch1;
  // The fused epilogue's vectors and residual (GemmEpilogue), when the plan has one.
  const bool fused = p.epilogue.any();
  EpilogueOperands epi;
  if (fused) {
    epi = add_epilogue_params(f, p.epilogue);
    epi.M = M;
    epi.N = N;
    epi.col = p.layout == "col";
  }
  // Stream-K: the workspace (two partial macro tiles per worker, in the accumulator type), the
  // number of Stream-K workers, the Stream-K iterations (K tiles of the first output tiles) and
  // the K tiles per output tile, of kt elements.
  // sk_flags plans: the flags of the in-kernel fix-up, one a consumer warp of each worker (i32,
  // zero between launches: each is set once and reset by the warp that waited for it).
  Value *WS = nullptr, *workers = nullptr, *sk_iters = nullptr, *tiles_k = nullptr, *FL = nullptr;
  if (stream_k) {
    WS = f.add_param(Type::pointer(T), "WS");
    workers = idx("workers");
    sk_iters = idx("sk_iters");
    tiles_k = idx("tiles_k");
    if (p.sk_flags) FL = f.add_param(Type::pointer(ScalarType::i32), "FL");
  }

  Builder b(f);
  Value* one = b.index(1, "c1");
  Value* zero = b.index(0, "c0");
  // Unit row strides are constants: the SIMT lowering turns them into subgroup block reads/writes.
  Value* sa_r = p.unit_a ? one : sa_r_p;
  Value* sa_c = p.unit_ak ? one : sa_c_p;
  Value* sb_r = p.unit_b ? one : sb_r_p;
  Value* sb_cv = p.stages && p.unit_bn ? one : sb_c;  // the pipeline reads an n-contiguous B with ldmatrix.trans
  Value* sc_r = p.unit_c ? one : sc_r_p;
  Value* MR = b.index(p.mr, "MR");
  Value* NR = b.index(p.nr, "NR");
  Value* KB = b.index(p.kb, "KB");
  Value* KT = b.index(p.kt, "KT");
  Value* MT = b.index(int64_t(p.mr) * p.sg_m, "MT");
  Value* NT = b.index(int64_t(p.nr) * p.sg_n, "NT");
  Value* fzero = b.constant(0.0, T, "zero");
  auto ceil_div = [&](Builder& x, Value* n, Value* d, const char* h) { return x.div(x.add(n, x.sub(d, one)), d, h); };
  Value* tiles_m = ceil_div(b, M, MT, "tiles_m");
  Value* tiles_n = ceil_div(b, N, NT, "tiles_n");
  Value* g = b.work_id(WorkId::group, 0, "group");
  Value* sg = b.work_id(WorkId::subgroup, 0, "sg");
  Value* SGM = b.index(p.sg_m, "SGM");
  Value* sg_row = b.mul(b.rem(sg, SGM), MR, "sg_row");  // this subgroup's tile inside the macro tile
  Value* sg_col = b.mul(b.div(sg, SGM), NR, "sg_col");
  Value* k_main = b.sub(K, b.rem(K, KB), "k_main");

  const Type acc_t = Type::matrix(T, p.mr, p.nr, Use::acc, Scope::subgroup);
  const Type a_t = Type::matrix(p.a_type, p.mr, p.kb, Use::a, Scope::subgroup);
  const Type b_t = Type::matrix(p.b_type, p.kb, p.nr, Use::b, Scope::subgroup);
  const Type c_t = Type::matrix(p.c_type, p.mr, p.nr, Use::acc, Scope::subgroup);

  // Output tile t of the flattened batch x M x N tile space (consecutive tiles walk down M: they
  // share B's panel): this subgroup's corner and the batch's A, B, C.
  struct Tile {
    Value *m0, *n0, *At, *Bt, *Ct, *live, *full, *Rt;
  };
  // The pipeline (p.stages) runs barriers: every subgroup of a work-group must take the same
  // branches around it, so a tile is live for all of them when the work-group's corner is inside.
  const bool pipe = p.stages > 0;
  // group_m > 0: the tiles of each batch walk bands of group_m M tiles (the last band what is
  // left), down M inside a band and across N band by band, so that the work-groups resident at
  // once share A panels as well as B panels in L2.
  auto tile = [&](Builder& x, Value* t) {
    Value *mt, *nt, *bi;
    if (p.group_m > 0) {
      Value* per = x.mul(tiles_m, tiles_n);
      bi = x.div(t, per, "bi");
      Value* r = x.rem(t, per);
      Value* G = x.index(p.group_m);
      Value* first = x.mul(x.div(r, x.mul(G, tiles_n)), G, "band_m");
      Value* gm = x.min(G, x.sub(tiles_m, first), "band_rows");
      Value* w = x.sub(r, x.mul(first, tiles_n));
      mt = x.add(first, x.rem(w, gm), "mt");
      nt = x.div(w, gm, "nt");
    } else {
      mt = x.rem(t, tiles_m, "mt");
      Value* rest = x.div(t, tiles_m);
      nt = x.rem(rest, tiles_n, "nt");
      bi = x.div(rest, tiles_n, "bi");
    }
    Value* b2 = x.rem(bi, batch2, "b2");
    Value* b1 = x.div(bi, batch2, "b1");
    auto at = [&](Value* base, Value* s1, Value* s2, const char* n) {
      return x.ptr_offset(base, x.add(x.mul(b1, s1), x.mul(b2, s2)), n);
    };
    Tile r;
    r.m0 = x.add(x.mul(mt, MT), sg_row, "m0");
    r.n0 = x.add(x.mul(nt, NT), sg_col, "n0");
    r.At = at(A, sa_b1, sa_b2, "At");
    r.Bt = at(B, sb_b1, sb_b2, "Bt");
    r.Ct = at(C, sc_b1, sc_b2, "Ct");
    r.Rt = fused && p.epilogue.residual ? at(epi.residual, sc_b1, sc_b2, "Rt") : nullptr;  // C's strides
    r.live = pipe ? x.bin(BinOp::and_, x.cmp(CmpPred::lt, x.mul(mt, MT), M), x.cmp(CmpPred::lt, x.mul(nt, NT), N), "live")
                  : x.bin(BinOp::and_, x.cmp(CmpPred::lt, r.m0, M), x.cmp(CmpPred::lt, r.n0, N), "live");
    r.full = x.bin(BinOp::and_, x.cmp(CmpPred::le, x.add(r.m0, MR), M), x.cmp(CmpPred::le, x.add(r.n0, NR), N), "full");
    return r;
  };
  // acc over K in [k_lo, k_hi) (k_lo a multiple of kb; k_hi one too, or K): a loop of mul_add
  // (loads checked only in edge tiles), then the K tail (checked).
  // init: the accumulators' initial values (zero when null; the pipelines only).
  auto k_range = [&](Builder& x, const Tile& tl, Value* k_lo, Value* k_hi, Value* init = nullptr) {
    // With 2-D block loads, each load also names the next K step's blocks (A: kb columns on, B:
    // kb rows down) for the lowering's prefetch.
    auto step = [&](Builder& kb, Value* k, Value* acc_in, bool chk) {
      Value* a = kb.load(a_t, {tl.At, tl.m0, k, sa_r, sa_c, M, K}, chk, "a");
      Value* bm = kb.load(b_t, {tl.Bt, k, tl.n0, sb_r, sb_cv, K, N}, chk, "b");
      if (p.block2d) {
        a->def->attrs["prefetch_row"] = int64_t(0), a->def->attrs["prefetch_col"] = int64_t(p.kb);
        bm->def->attrs["prefetch_row"] = int64_t(p.kb), bm->def->attrs["prefetch_col"] = int64_t(0);
      }
      return kb.mul_add(a, bm, acc_in, "acc");
    };
    if (pipe) {  // one loop over [k_lo, k_hi), checked loads (zero fill), as the work-group's pipeline
      Value* acc = init ? init : x.splat(acc_t, fzero, "acc");
      Value* r = x.for_(k_lo, k_hi, KB, {acc}, [&](Builder& kb, Value* k, const std::vector<Value*>& it) {
        return std::vector<Value*>{step(kb, k, it[0], true)};
      }, "k")[0];
      r->def->attrs["mma_pipeline"] = int64_t(p.stages);
      r->def->attrs["sg_m"] = int64_t(p.sg_m);
      if (p.wgmma) r->def->attrs["wgmma"] = int64_t(1);
      if (p.epi_smem) r->def->attrs["epi_smem"] = int64_t(p.epi_smem);  // each warp's staging region (simt_wgmma.cpp)
      if (p.tma_store) r->def->attrs["tma_store"] = int64_t(p.tma_store);  // the regions aligned for TMA boxes
      if (p.epi_alias) r->def->attrs["epi_alias"] = int64_t(1);  // the staging in the stage slots (ws, one tile a block)
      if (p.tma) {  // the panels from tensor maps 0 (A) and 1 (B), boxes of these rows (K-contiguous operands)
        r->def->attrs["tma"] = int64_t(1);
        r->def->attrs["tma_box_a"] = int64_t(p.tma_box_rows(true));
        r->def->attrs["tma_box_b"] = int64_t(p.tma_box_rows(false));
      }
      if (p.ws) {  // the work-group's tile g: the producer warps walk tiles g, g + grid, ... with grid = the tiles (simt_tma_ws.cpp)
        r->def->attrs["persistent"] = int64_t(1);
        r->def->attrs["group_m"] = int64_t(p.group_m);
        // Stream-K: the producer walks the block's Stream-K iterations, then its DP tiles (below)
        if (stream_k) r->def->attrs["stream_k_kt"] = int64_t(p.kt);
        if (stream_k && p.sk_down) r->def->attrs["stream_k_down"] = int64_t(1);  // the parts' K steps from the top down
        if (stream_k && p.sk_prefetch)  // the successor's partial into L2 (a macro tile of T)
          r->def->attrs["stream_k_prefetch"] = int64_t(p.mr) * p.sg_m * p.nr * p.sg_n * int64_t(size_in_bytes(T));
        if (stream_k && p.sk_stage)  // a successor's partial read through the stage slots (its bytes)
          r->def->attrs["stream_k_stage_read"] = int64_t(p.mr) * p.sg_m * p.nr * p.sg_n * int64_t(size_in_bytes(T));
        if (stream_k && p.sk_stage_store)  // a part's partial for its predecessor stored through the stage slots (its bytes)
          r->def->attrs["stream_k_stage_store"] = int64_t(p.mr) * p.sg_m * p.nr * p.sg_n * int64_t(size_in_bytes(T));
        if (stream_k && p.sk_stage_store == 2) r->def->attrs["stream_k_stage_store_groups"] = int64_t(2);  // a bulk group a slot
        if (stream_k && p.sk_pair) r->def->attrs["stream_k_pair"] = int64_t(1);  // the pair's seam through distributed shared memory
      }
      return r;
    }
    Value* k_end = x.min(k_hi, k_main, "k_end");
    auto k_loop = [&](Builder& y, bool checked) {
      Value* acc = y.splat(acc_t, fzero, "acc");
      return std::vector<Value*>{y.for_(k_lo, k_end, KB, {acc}, [&](Builder& kb, Value* k, const std::vector<Value*>& it) {
        return std::vector<Value*>{step(kb, k, it[0], checked)};
      }, "k")[0]};
    };
    Value* acc = x.if_(tl.full, {acc_t}, [&](Builder& y) { return k_loop(y, false); },
                       [&](Builder& y) { return k_loop(y, true); })[0];
    Value* tail = x.bin(BinOp::and_, x.cmp(CmpPred::lt, k_main, k_hi), x.cmp(CmpPred::lt, k_lo, k_hi), "k_tail");
    return x.if_(tail, {acc_t}, [&](Builder& z) { return std::vector<Value*>{step(z, k_main, acc, true)}; },
                 [&](Builder&) { return std::vector<Value*>{acc}; })[0];
  };
  // C = alpha acc (+ beta C), checked in edge tiles: applied once per output element.
  auto epilogue = [&](Builder& x, const Tile& tl, Value* acc) {
    auto body = [&](Builder& y, bool checked) {
      Builder::Access c_at{tl.Ct, tl.m0, tl.n0, sc_r, sc_c, M, N};
      Value* result = y.scale(acc, alpha, "result");
      if (fused) {
        Builder::Access r_at = c_at;
        r_at.ptr = tl.Rt;
        result = apply_epilogue(y, p.epilogue, epi, result, tl.m0, tl.n0, p.mr, p.nr, checked,
                                [&](Builder& z, Value* r, const Type& e_t) {
                                  if (!p.accumulate) return r;
                                  Value* c_old = z.load(c_t, c_at, checked, "c");
                                  if (p.c_type != e_t.scalar) c_old = z.convert_matrix(c_old, e_t);
                                  return z.mat_bin(BinOp::add, r, z.scale(c_old, beta), "result");
                                }, tl.Rt ? &r_at : nullptr);
      } else if (p.accumulate) {
        Value* c_old = y.load(c_t, c_at, checked, "c");
        if (p.c_type != T) c_old = y.convert_matrix(c_old, acc_t);
        result = y.mat_bin(BinOp::add, result, y.scale(c_old, beta), "result");
      }
      if (p.c_type != result->type.scalar) result = y.convert_matrix(result, c_t, false, "out");
      Op* st = y.store(result, c_at, checked);
      // C (never the Stream-K workspace) by TMA stores from the staging: tensor map 2 (simt_wgmma.cpp)
      if (p.tma_store && part != GpuGemmPart::fixup) st->attrs["tma_store"] = int64_t(p.tma_store);
      return std::vector<Value*>{};
    };
    x.if_(tl.full, {}, [&](Builder& y) { return body(y, false); }, [&](Builder& y) { return body(y, true); });
  };
  auto whole_tile = [&](Builder& x, Value* t) {
    Tile tl = tile(x, t);
    x.if_(tl.live, {}, [&](Builder& y) {
      epilogue(y, tl, k_range(y, tl, zero, K));
      return std::vector<Value*>{};
    }, {});
  };
  if (!stream_k && p.persistent) {
    // A persistent grid (plan field persistent; ws plans): block g takes tiles g, g + grid, ... of
    // the unbatched product, every K loop [0, K): the sequence the producer warps walk (the loop's
    // attributes persistent and group_m promise it, simt_tma_ws.cpp).
    Value* tiles = b.mul(tiles_m, tiles_n, "tiles");
    b.for_(g, tiles, b.work_id(WorkId::groups, 0, "groups"), {}, [&](Builder& x, Value* t, const std::vector<Value*>&) {
      whole_tile(x, t);
      return std::vector<Value*>{};
    }, "t");
    return fp;
  }
  if (!stream_k) {
    whole_tile(b, g);
    return fp;
  }

  // ---- Stream-K (seeds/004) ----------------------------------------------------------------------
  // Worker w owns the iterations [begin(w), begin(w + 1)) of the first sk_iters (output tile, K
  // tile) pairs, begin(w) = w sk_iters / workers. A tile it covers whole goes to C; a part of a
  // tile goes to the workspace: slot 0 when it is the worker's first part, slot 1 otherwise
  // (at most one of each). The fix-up launch (GpuGemmPart::fixup) adds the parts of each such
  // tile in worker order and applies alpha / beta once, so the result does not depend on timing.
  // Why a second launch rather than the seeds' flags: OpenCL does not promise that the
  // work-groups of one launch are resident together, so a work-group spinning on a flag that a
  // not-yet-scheduled work-group would set can wait forever; the end of a launch is the only
  // ordering between work-groups that every runtime guarantees.
  Value* TK = b.mul(MT, NT, "tile_elems");
  auto begin = [&](Builder& x, Value* w) { return x.div(x.mul(w, sk_iters), workers, "begin"); };
  auto slot = [&](Builder& x, Value* w, Value* s) { return x.ptr_offset(WS, x.mul(x.add(x.mul(w, x.index(2)), s), TK), "slot"); };
  auto part_at = [&](Builder& x, Value* w, Value* s, const Tile& tl) -> Builder::Access {
    // A macro tile in the workspace: column-major MT x NT (lanes along unit-stride rows).
    (void)tl;
    return {slot(x, w, s), sg_row, sg_col, one, MT, MT, NT};
  };
  Value* sk_tiles = b.div(sk_iters, tiles_k, "sk_tiles");
  if (part == GpuGemmPart::fixup) {
    // Group t: Stream-K tile t, when more than one worker has a part of it.
    Value* first = b.mul(g, tiles_k, "first_iter");
    Value* last = b.sub(b.add(first, tiles_k), one, "last_iter");
    // The worker holding iteration i: the largest w with begin(w) <= i.
    auto owner = [&](Builder& x, Value* i) {
      return x.sub(ceil_div(x, x.mul(x.add(i, one), workers), sk_iters, "w"), one);
    };
    Value* w_lo = owner(b, first);
    Value* w_hi = owner(b, last);
    Tile tl = tile(b, g);
    Value* split_tile = b.bin(BinOp::and_, b.cmp(CmpPred::lt, w_lo, w_hi), tl.live, "split_tile");
    b.if_(split_tile, {}, [&](Builder& x) {
      Value* acc = x.splat(acc_t, fzero, "acc");
      acc = x.for_(w_lo, x.add(w_hi, one), one, {acc}, [&](Builder& y, Value* w, const std::vector<Value*>& it) {
        Value* bw = begin(y, w);
        Value* nonempty = y.cmp(CmpPred::lt, bw, begin(y, y.add(w, one)), "nonempty");
        Value* s = y.select(y.cmp(CmpPred::ge, bw, first), zero, one, "s");
        return y.if_(nonempty, {acc_t}, [&](Builder& z) {
          Value* part_acc = z.load(acc_t, part_at(z, w, s, tl), false, "part");
          return std::vector<Value*>{z.mat_bin(BinOp::add, it[0], part_acc, "acc")};
        }, [&](Builder&) { return std::vector<Value*>{it[0]}; });
      }, "w")[0];
      epilogue(x, tl, acc);
      return std::vector<Value*>{};
    }, {});
    return fp;
  }
  // Groups [0, workers): Stream-K workers; the rest: one data-parallel tile each. ws plans: a
  // persistent grid, each block its Stream-K iterations (if any) and then the DP tiles sk_tiles + g,
  // sk_tiles + g + grid, ... (the walk the producer warps take, simt_tma_ws.cpp).
  // The iterations [lo, hi) of tile t (its first t_first) of worker g, whose own first is it_lo:
  // C when they are all of the tile's, else the worker's workspace slot 0 (its first part) or 1.
  // sk_trace (debug, gpu_plan.h): each consumer warp's clock at unit u's boundaries, entry
  // ((g U + min(u, U - 1)) S + e) SGS + sg after the flags' (workers + 1) SGS; `form` 2: the SM's
  // clock, 3: the device's timer (entry e and e + 1 take both: `clock_at`), 1: the i32 value v.
  auto trace = [&](Builder& x, Value* unit, int64_t e, int64_t form, Value* v = nullptr) {
    if (!p.sk_trace || !unit) return;
    Value* SGS = x.index(int64_t(p.sg_m) * p.sg_n, "SGS");
    Value* uu = x.min(unit, x.index(GpuGemmPlan::kSkTraceUnits - 1), "trace_unit");
    Value* row = x.add(x.mul(x.add(x.mul(g, x.index(GpuGemmPlan::kSkTraceUnits)), uu), x.index(GpuGemmPlan::kSkTraceSlots)), x.index(e));
    Value* at = x.add(x.mul(x.add(workers, one), SGS), x.add(x.mul(row, SGS), sg), "trace_at");
    x.flag_set(FL, at, v)->attrs["trace"] = form;
  };
  auto clock_at = [&](Builder& x, Value* unit, int64_t e) {
    trace(x, unit, e, 2);
    trace(x, unit, e + 1, 3);
  };
  // sk_pair: whether this block is odd, and which way its seam with the other pair goes (the ws walk's set-up)
  Value *pair_odd = nullptr, *pair_swap = nullptr;
  auto sk_part = [&](Builder& y, Value* t, Value* t_first, Value* lo, Value* hi, Value* it_lo, Value* unit = nullptr) {
    Tile tl = tile(y, t);
    Value* k_lo = y.mul(y.sub(lo, t_first), KT, "k_lo");
    Value* k_hi = y.min(y.mul(y.sub(hi, t_first), KT), K, "k_hi");
    y.if_(y.bin(BinOp::and_, tl.live, y.cmp(CmpPred::lt, lo, hi)), {}, [&](Builder& z) {
      clock_at(z, unit, 0);  // (sk_trace) the unit's start
      Value* acc = k_range(z, tl, k_lo, k_hi);
      clock_at(z, unit, 2);  // its K loop's end
      if (p.sk_flags) {
        // The fix-up in the kernel (plan field sk_flags; blocks resident together): the rest of
        // the tile after these iterations, when it has any, is worker g + 1's first part (its
        // iterations start at hi), which that worker's warp sg leaves in its workspace slot with
        // everything after it added, then sets flag (g + 1, sg). The K loop is the plain one
        // (from zero); only after it does a part with a successor wait for that flag and add
        // the successor's sum to its accumulators (the first form of session 13 loaded it as
        // the loop's initial accumulators: ptxas spilled 572 bytes against the fix-up launch's
        // 88, the part's bounds and flags live across the loop). The worker with the tile's
        // first iterations writes C; any other stores its sum and sets its own flag. Waits go
        // only to higher workers (no cycle); the waiter resets the flag (re-armed for the next
        // launch). With parts of a tile or more (2-tile SK + DP: the planner's default,
        // gpu_plan_split.cpp) only a worker's last part (the tile's head) waits, for its successor's
        // first, which was done long before; with shorter ones (the parts of a tile form a
        // chain) the waits serialize the chain. Four branches, so that no sum flows out of a
        // branch (the accumulators stay in wgmma's fragments): the epilogue is built twice.
        // Everything here is computed after the loop from the unit's bounds (nothing more live
        // across it than with the fix-up launch). The parts are in the fragments' own order
        // (frag_native, simt_wgmma.cpp: 16-byte accesses; only the same warp position of this
        // kernel reads them), not the fix-up launch's column-major tile.
        Value* SGS = z.index(int64_t(p.sg_m) * p.sg_n, "SGS");
        auto with_next = [&](Builder& u, Value* partner = nullptr) {  // acc + the successor's (partner's) sum, its flag reset
          Value* next = partner ? partner : u.add(g, one, "next");
          Value* next_flag = u.add(u.mul(next, SGS), sg, "next_flag");
          clock_at(u, unit, 4);  // (sk_trace) the wait's start and end
          u.flag_wait(FL, next_flag, kFlagSpinLimit);
          clock_at(u, unit, 6);
          Value* part = u.load(acc_t, part_at(u, next, zero, tl), false, "part");
          part->def->attrs["frag_native"] = int64_t(1);
          if (p.sk_stage) part->def->attrs["stage_read"] = int64_t(1);  // through the stage slots (simt_tma_ws.cpp)
          Value* sum = u.mat_bin(BinOp::add, acc, part, "acc");
          return std::make_pair(sum, next_flag);
        };
        auto unset = [&](Builder& u, Value* i) {
          Op* o = u.flag_set(FL, i, u.constant(0.0, ScalarType::i32, "unset"));
          if (p.sk_one_release) o->attrs["one_lane"] = int64_t(1);
        };
        Value* has_next = z.cmp(CmpPred::lt, hi, z.add(t_first, tiles_k, "t_end"), "has_next");
        Value* head = z.cmp(CmpPred::eq, lo, t_first, "head");
        if (p.sk_trace) {  // the unit: its tile, whether it is the tile's head and has a successor; its K tiles
          Value* kind = z.add(z.mul(t, z.index(4)), z.add(z.mul(z.select(head, one, zero), z.index(2)), z.select(has_next, one, zero)));
          trace(z, unit, 12, 1, z.convert(kind, ScalarType::i32, "trace_kind"));
          trace(z, unit, 13, 1, z.convert(z.sub(hi, lo), ScalarType::i32, "trace_tiles"));
        }
        // sk_pair (gpu_plan.h): an even block's successor is its cluster partner, whose sum arrives
        // in the stage slots handed over for it (ws_stage_read, pair_read); an odd block's tail
        // goes there (ws_pair_send). Other seams: the workspace and flags.
        // The seam between pairs (odd block g, even g + 1) goes whichever way leaves no wait
        // (pair_swap, below the walk's set-up): the odd block's head adds the even one's tail,
        // done first, or (swapped) the even block's tail, walked just before its last part, adds
        // the odd one's head, done first.
        Value* odd = pair_odd;
        auto head_with_next = [&](Builder& v) {
          auto [sum, next_flag] = with_next(v);
          epilogue(v, tl, sum);
          clock_at(v, unit, 8);  // (sk_trace) C written (its stores issued)
          unset(v, next_flag);
          return std::vector<Value*>{};
        };
        z.if_(head, {}, [&](Builder& u) {
          u.if_(has_next, {}, [&](Builder& v) {
            if (!p.sk_pair) return head_with_next(v);
            return v.if_(odd, {}, [&](Builder& w) {
              return w.if_(pair_swap, {}, [&](Builder& x) {  // swapped: the sum for the even block g + 1, which adds it
                Op* st = x.store(acc, part_at(x, g, zero, tl), false);
                st->attrs["frag_native"] = int64_t(1);
                Op* own = x.flag_set(FL, x.add(x.mul(g, SGS), sg, "own_flag"));
                if (p.sk_one_release) own->attrs["one_lane"] = int64_t(1);
                return std::vector<Value*>{};
              }, head_with_next);
            }, [&](Builder& w) {
              Value* part = w.load(acc_t, part_at(w, w.add(g, one), zero, tl), false, "part");
              part->def->attrs["frag_native"] = int64_t(1);
              part->def->attrs["stage_read"] = int64_t(1);
              part->def->attrs["pair_read"] = int64_t(1);  // written there by the partner (simt_tma_ws.cpp)
              epilogue(w, tl, w.mat_bin(BinOp::add, acc, part, "acc"));
              return std::vector<Value*>{};
            });
          }, [&](Builder& v) {
            epilogue(v, tl, acc);
            clock_at(v, unit, 8);
            return std::vector<Value*>{};
          });
          return std::vector<Value*>{};
        }, [&](Builder& u) {
          // sk_stage_store: the sum into the stage slots the producer handed over, which stores
          // them to the workspace and sets the flags (simt_tma_ws.cpp ws_stage_store)
          auto own_part = [&](Builder& v, Value* s) {
            Op* st = v.store(s, part_at(v, g, zero, tl), false);
            st->attrs["frag_native"] = int64_t(1);
            if (p.sk_stage_store) st->attrs["stage_store"] = int64_t(1);
          };
          auto own_flag = [&](Builder& v) {
            if (p.sk_stage_store) return;
            Op* own = v.flag_set(FL, v.add(v.mul(g, SGS), sg, "own_flag"));
            if (p.sk_one_release) own->attrs["one_lane"] = int64_t(1);  // one work-item's release after a warp barrier
          };
          u.if_(has_next, {}, [&](Builder& v) {
            auto [sum, next_flag] = with_next(v);
            own_part(v, sum);
            unset(v, next_flag);
            if (p.sk_pair) own_flag(v);  // (sk_pair plans have no such part: each split tile has two parts)
            return std::vector<Value*>{};
          }, [&](Builder& v) {
            if (!p.sk_pair) {
              own_part(v, acc);
              return std::vector<Value*>{};
            }
            // sk_pair: an odd block's tail into its partner's stage slots (no flag); an even block's to the workspace
            return v.if_(odd, {}, [&](Builder& w) {
              Op* st = w.store(acc, part_at(w, g, zero, tl), false);
              st->attrs["frag_native"] = int64_t(1);
              st->attrs["pair_send"] = int64_t(1);
              return std::vector<Value*>{};
            }, [&](Builder& w) {
              return w.if_(pair_swap, {}, [&](Builder& x) {  // swapped: the odd block g - 1's head added here, C written
                auto [sum, prev_flag] = with_next(x, x.sub(g, one, "prev"));
                epilogue(x, tl, sum);
                unset(x, prev_flag);
                return std::vector<Value*>{};
              }, [&](Builder& x) {
                own_part(x, acc);
                own_flag(x);
                return std::vector<Value*>{};
              });
            });
          });
          clock_at(u, unit, 8);  // (sk_trace) the partial's stores issued (sk_stage_store: written to the slots)
          if (!p.sk_pair) own_flag(u);
          clock_at(u, unit, 10);  // and released (sk_stage_store: the slots handed back)
          return std::vector<Value*>{};
        });
        return std::vector<Value*>{};
      }
      Value* whole = z.bin(BinOp::and_, z.cmp(CmpPred::eq, lo, t_first), z.cmp(CmpPred::eq, hi, z.add(t_first, tiles_k)), "whole");
      z.if_(whole, {}, [&](Builder& u) {
        epilogue(u, tl, acc);
        return std::vector<Value*>{};
      }, [&](Builder& u) {
        Value* s = u.select(u.cmp(CmpPred::eq, lo, it_lo), zero, one, "s");
        u.store(acc, part_at(u, g, s, tl), false);
        return std::vector<Value*>{};
      });
      return std::vector<Value*>{};
    }, {});
  };
  if (p.ws) {
    // ws plans: a persistent grid; block g's units are its Stream-K parts (tiles t_lo .. t_hi - 1
    // when g < workers) and then the DP tiles sk_tiles + g, sk_tiles + g + grid, ...: one loop,
    // so that the kernel has one K loop and one epilogue (two spilled at the consumers' 168
    // registers); the producer warps walk the same units (simt_tma_ws.cpp).
    Value* grid = b.work_id(WorkId::groups, 0, "groups");
    Value* tiles = b.mul(tiles_m, tiles_n, "tiles");
    Value* is_w = b.cmp(CmpPred::lt, g, workers, "sk_worker");
    Value* wk = b.bin(BinOp::max, workers, one, "wk");  // (workers 0: no Stream-K part; no division by 0)
    Value* it_lo = b.select(is_w, b.div(b.mul(g, sk_iters), wk), zero, "it_lo");
    Value* it_hi = b.select(is_w, b.div(b.mul(b.add(g, one), sk_iters), wk), zero, "it_hi");
    Value* t_lo = b.div(it_lo, tiles_k, "t_lo");
    Value* n_sk = b.sub(ceil_div(b, it_hi, tiles_k, "t_hi"), t_lo, "n_sk");
    if (p.sk_pair) {
      // The seam between odd block o and even o + 1: o's head (b K tiles) first and the even
      // block's tail added to it just before its last part (at L_e - p_e, p_e its last part's K tiles)
      // when b <= L_e - p_e (swapped), else the even block's tail first, added to o's head, which o
      // walks just before its tail. One of the two never waits (the parts of the two blocks sum
      // to the tile, plus whole tiles). Both blocks compute it from the same bounds.
      auto swap_of = [&](Value* o) {
        auto at = [&](Value* w) { return b.div(b.mul(w, sk_iters), wk); };
        Value* hi_o = at(b.add(o, one));
        Value* hi_e = at(b.add(o, b.index(2)));
        Value* bx = b.rem(hi_o, tiles_k);
        Value* room = b.sub(b.sub(hi_e, hi_o), b.rem(hi_e, tiles_k));
        return b.bin(BinOp::and_, b.cmp(CmpPred::lt, b.add(o, one), workers), b.bin(BinOp::and_, b.cmp(CmpPred::gt, bx, zero), b.cmp(CmpPred::le, bx, room)));
      };
      pair_odd = b.cmp(CmpPred::eq, b.rem(g, b.index(2)), one, "pair_odd");
      Value* o = b.select(pair_odd, g, b.sub(g, one));  // (even block 0: o = -1, no seam: its range starts at 0)
      pair_swap = b.bin(BinOp::and_, b.bin(BinOp::and_, is_w, b.cmp(CmpPred::ge, o, zero)), swap_of(b.bin(BinOp::max, o, zero)), "pair_swap");
    }
    Value* dp0 = b.add(sk_tiles, g, "dp0");
    Value* n_dp = b.select(b.cmp(CmpPred::lt, dp0, tiles), ceil_div(b, b.sub(tiles, dp0), grid, "n_dp"), zero, "n_dp");
    b.for_(zero, b.add(n_sk, n_dp), one, {}, [&](Builder& y, Value* u, const std::vector<Value*>&) {
      Value* sk = y.cmp(CmpPred::lt, u, n_sk, "sk");
      Value* su = u;
      if (p.sk_pair) {
        // the parts' order (as the producer's, simt_tma_ws.cpp): both parts of the pair's tile
        // last (they end together); of the seam with the other pair, the part that adds the other's
        // sum walked just before it (last where the block has no pair part), the one whose sum is
        // stored first. Odd block: (head, ..., tail) swapped, else (..., head, tail); even:
        // (..., tail, head) swapped, else the parts' own order.
        // (a block whose range starts on a tile has no tail: an odd one keeps its order; one whose
        // range ends on a tile has no head part with a successor: an even one walks its tail last)
        Value* last = y.sub(n_sk, one);
        Value* rot = y.rem(y.add(u, one), y.bin(BinOp::max, n_sk, one));
        Value* tail0 = y.cmp(CmpPred::ne, y.rem(it_lo, tiles_k), zero);
        Value* head_last = y.cmp(CmpPred::ne, y.rem(it_hi, tiles_k), zero);
        Value* odd_part = y.select(pair_swap, y.select(y.cmp(CmpPred::eq, u, zero), last, y.select(y.cmp(CmpPred::eq, u, last), zero, u)),
                                   y.select(tail0, rot, u));
        Value* before_head = y.select(y.cmp(CmpPred::lt, u, y.sub(last, one)), y.add(u, one), y.select(y.cmp(CmpPred::eq, u, last), last, zero));
        Value* even_part = y.select(pair_swap, y.select(head_last, before_head, rot), u);
        su = y.select(pair_odd, odd_part, even_part, "su");
      }
      Value* t = y.select(sk, y.add(t_lo, su), y.add(dp0, y.mul(y.sub(u, n_sk), grid)), "t");
      Value* t_first = y.mul(t, tiles_k, "t_first");
      Value* t_end = y.add(t_first, tiles_k, "t_end");
      Value* lo = y.select(sk, y.bin(BinOp::max, it_lo, t_first), t_first, "lo");
      Value* hi = y.select(sk, y.min(it_hi, t_end), t_end, "hi");
      sk_part(y, t, t_first, lo, hi, it_lo, u);
      return std::vector<Value*>{};
    }, "u");
    return fp;
  }
  auto sk_worker = [&](Builder& x) {
    Value* it_lo = begin(x, g);
    Value* it_hi = begin(x, x.add(g, one));
    Value* t_lo = x.div(it_lo, tiles_k, "t_lo");
    Value* t_hi = ceil_div(x, it_hi, tiles_k, "t_hi");
    x.for_(t_lo, t_hi, one, {}, [&](Builder& y, Value* t, const std::vector<Value*>&) {
      Value* t_first = y.mul(t, tiles_k, "t_first");
      sk_part(y, t, t_first, y.bin(BinOp::max, it_lo, t_first, "lo"), y.min(it_hi, y.add(t_first, tiles_k), "hi"), it_lo);
      return std::vector<Value*>{};
    }, "t");
    return std::vector<Value*>{};
  };
  b.if_(b.cmp(CmpPred::lt, g, workers), {}, sk_worker, [&](Builder& x) {
    whole_tile(x, x.add(sk_tiles, x.sub(g, workers)));
    return std::vector<Value*>{};
  });
  return fp;
}

}  // namespace coopjit
