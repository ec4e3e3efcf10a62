// The warp-specialized form of the Hopper wgmma + TMA pipeline (plan field ws; simt_wgmma.cpp and
// simt_tma.cpp hold the shared parts): the work-group is the IR's sg_m x sg_n consumer warps
// (warpgroups of 4) and then the producer warps (function attribute producer_warps: one warp, or a
// warpgroup of 4 so that setmaxnreg can move registers to the consumers). The K loop's attribute
// persistent promises that block g's K loops are those of the output tiles g, g + grid, ... in the
// recipe's order (group_m names it), every one running the same bounds; the recipe launches one
// block a tile (grid = tiles: one tile a block), since its persistent loop over tiles measured
// slower (H100: ~25 us more a tile, whatever K, the cause not found;
// benchmarks/recorded/issue16-h100-session10.md). With the loop attribute stream_k_kt (Stream-K
// plans, gemm_recipe_gpu.cpp) the walk is block g's Stream-K parts (the K tiles of kt elements
// [g I / W, (g + 1) I / W) of the first sk_iters (tile, K tile) pairs, tile by tile; kernel
// parameters workers, sk_iters, tiles_k) and then the DP tiles sk_tiles + g, + grid, ...; with
// stream_k_down (plan field sk_down) each Stream-K part's K steps are copied from its last down to
// its first, so that the blocks streaming at once are at K offsets of one or two phases (going up,
// each block's offset is where its range starts inside a tile: as many phases as blocks). With
// stream_k_stage_read (plan field sk_stage) a part that has a successor is followed by pseudo steps:
// stage slots the producer hands over, empty, for the successor's partial (ws_stage_read, below);
// with stream_k_stage_store (plan field sk_stage_store) a part after a tile's head is followed by
// pseudo steps into which the consumers write the part's sum (ws_stage_store), which the producer
// then stores to the workspace with cp.async.bulk before it sets the part's flags (ws_tma_loop).
//   - the kernel's entry branches to ws.init, which the first such K loop fills: work-item 0 makes
//     the stage slots' mbarriers, full[s] (one arrival, the producer's, with the slot's bytes
//     expected as transactions) and empty[s] (one arrival per consumer warp), a block barrier, then
//     the producer warps go to their own code (ws.producer) and the consumers to the IR's;
//   - a producer warpgroup gives registers back (setmaxnreg.dec) and two consumer warpgroups take
//     them (setmaxnreg.inc; below);
//   - lane 0 of the first producer warp walks every tile of the block and every K step of each (a
//     step count s over the whole walk: slot s % stages, use s / stages), waits for the slot's
//     previous use to be released (empty, parity of use - 1) and issues the step's
//     cp.async.bulk.tensor copies; it never waits for a wgmma and runs ahead into the next tile
//     while the consumers are still in this tile's last steps and its epilogue; the other
//     producer lanes return at once. Its code is the kernel's entry's and its own only (the
//     extents and K bounds are kernel parameters or constants: checked);
//   - the consumer warps count the steps they have taken across the walk (a function-level
//     variable, which LLVM keeps in registers), wait for full (parity of the use), issue the
//     step's wgmmas, wait until the previous step's wgmmas have retired (wgmma.wait_group 1: one
//     group stays in flight) and release that step's slot (lane 0 of each warp); after the loop
//     the last step's wgmmas are waited for and its slot released.
// Clusters of 2 (function attribute cluster; plan field cluster): the two blocks take tiles at
// the same N and adjacent M (the recipe's walk and the planner's conditions: an even grid, tiles
// along M even, bands of even rows), so they read the same B panels. Each block's producer copies
// its A panel and half of B's boxes (rank h .. rank h + h - 1), the latter multicast into both
// blocks' slot (.multicast::cluster, counted on both blocks' full barrier, which expects the whole
// stage as before); empty[s] counts both blocks' consumer warps, each of which arrives on both
// (mapa), since either producer writes into both blocks' slot. ws.init
// ends in a cluster barrier (the barriers made before the other block uses them) and every thread
// waits at one before returning (no block leaves while the other may arrive on its barriers).
// No block-wide barrier after ws.init: the epilogue and the next tile need none, and the producer
// warps are gone. The mbarriers are not invalidated (their memory is not reused before the block
// ends).
#include <llvm/IR/InlineAsm.h>

#include "lower/ir_to_llvm.h"
#include "lower/simt_lowering.h"

namespace coopjit {

namespace {
// setmaxnreg (sm_90a), which the ws kernels' warpgroups run at their start: with two consumer
// warpgroups (384 work-items, which ptxas gives 168 registers each) 2 x 128 x 224 + 128 x 56 =
// 64512 of the SM's 65536. (The consumers' code takes 175 without warp specialization, the
// producer's some 40; one consumer warpgroup needs none: 256 work-items may have 255 each.)
constexpr int kProducerRegs = 56, kConsumerRegs = 224;
void set_max_registers(llvm::IRBuilder<>& b, bool inc, int regs) {
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {}, false);
  const std::string text = cat("setmaxnreg.", inc ? "inc" : "dec", ".sync.aligned.u32 ", regs, ";");
  b.CreateCall(fty, llvm::InlineAsm::get(fty, text, "~{memory}", /*hasSideEffects=*/true));
}
}  // namespace

void SimtLowering::ws_begin() {
  ws_init_ = llvm::BasicBlock::Create(ctx_, "ws.init", fn_);
  ws_prod_ = llvm::BasicBlock::Create(ctx_, "ws.producer", fn_);
  ws_main_ = llvm::BasicBlock::Create(ctx_, "ws.main", fn_);
  b_.CreateBr(ws_init_);
  b_.SetInsertPoint(ws_main_);
}

void SimtLowering::ws_end() {
  // No persistent K loop filled them: the producer warps return, the consumers run the IR's code.
  if (!ws_init_->getTerminator()) {
    b_.SetInsertPoint(ws_init_);
    llvm::Value* warp = b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), b_.getInt32Ty());
    b_.CreateCondBr(b_.CreateICmpUGE(warp, b_.getInt32(static_cast<uint32_t>(sgs_))), ws_prod_, ws_main_);
  }
  if (!ws_prod_->getTerminator()) {
    b_.SetInsertPoint(ws_prod_);
    b_.CreateRetVoid();
  }
  // Clusters: no block leaves while the other may still arrive on its empty barriers (or copy
  // into its slots): every thread waits at a cluster barrier before each return.
  if (cluster_ || sk_pair_)
    for (llvm::BasicBlock& bb : *fn_)
      if (auto* ret = llvm::dyn_cast_or_null<llvm::ReturnInst>(bb.getTerminator())) {
        llvm::IRBuilder<> rb(ret);
        target_.cluster_sync(rb);
      }
}

llvm::Value* SimtLowering::param_named(const std::string& hint) {
  for (size_t i = 0; i < f_.params.size(); ++i)
    if (f_.params[i]->hint == hint) return fn_->getArg(static_cast<unsigned>(i));
  throw InternalError(cat("SIMT lowering: the kernel has no parameter '", hint, "'"));
}

std::vector<llvm::Value*> SimtLowering::ws_tma_loop(const std::vector<llvm::Value*>& acc, const StepFn& multiply, const TmaLoop& t,
                                                    llvm::Value* hi, llvm::Value* M, llvm::Value* N, int64_t group_m, int64_t sk_kt,
                                                    bool sk_down, int64_t sk_prefetch, int64_t sk_stage, int64_t sk_stage_store,
                                                    int64_t sk_store_groups, bool sk_pair) {
  if (!ws_init_)
    throw InternalError("SIMT lowering: a persistent wgmma loop in a kernel without producer warps (function attribute producer_warps)");
  if (cluster_ && sk_kt)
    throw InternalError("SIMT lowering: a Stream-K walk in a kernel of clusters (the blocks of a cluster walk the same K steps)");
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* i64 = b_.getInt64Ty();
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  auto i64v = [&](int64_t v) { return b_.getInt64(v); };
  auto none = [] { return std::vector<llvm::Value*>{}; };
  const int64_t S = t.stages;
  // sk_stage / sk_stage_store: the pseudo steps of a partial tile read or stored through the
  // slots (ws_stage_read, ws_stage_store); the partial tile's bytes
  const int64_t part_bytes = std::max(sk_stage, sk_stage_store);
  if (sk_stage && sk_stage_store && sk_stage != sk_stage_store)
    throw InternalError(cat("SIMT lowering: partial tiles of ", sk_stage, " bytes read and ", sk_stage_store, " stored"));
  const int64_t pseudo = part_bytes ? (part_bytes + t.stage_bytes - 1) / t.stage_bytes : 0;
  if (pseudo > S) throw InternalError(cat("SIMT lowering: a partial tile of ", part_bytes, " bytes in ", S, " stage slots of ", t.stage_bytes));
  if (sk_stage_store && (!sk_kt || part_bytes % 16 || t.stage_bytes % 16))
    throw InternalError("SIMT lowering: stream_k_stage_store outside a Stream-K walk, or a partial tile or stage slot not of 16-byte multiples");
  ws_stage_pseudo_ = pseudo, ws_stage_slots_ = S, ws_stage_bytes_ = t.stage_bytes;
  ws_stage_read_ = sk_stage != 0, ws_stage_store_ = sk_stage_store != 0;
  if (sk_pair && (!sk_pair_ || !sk_kt || !sk_stage || sk_stage_store))
    throw InternalError("SIMT lowering: stream_k_pair needs a kernel of attribute sk_pair and a Stream-K walk with stream_k_stage_read only");
  ws_pair_ = sk_pair;
  const int64_t read_pseudo = sk_stage ? pseudo : 0;
  // The stages' shared-window address (as simt_wgmma.cpp: the first 1024-byte boundary of the
  // stage memory), made where it is used: ws.init and the producer's code see only the entry's values.
  auto stages_base = [&] {
    llvm::Value* mem = b_.CreateTrunc(b_.CreatePtrToInt(stage_mem_, i64), i32);
    return b_.CreateAnd(b_.CreateAdd(mem, c32(1023)), c32(~int64_t(1023)), "ws_base");
  };
  llvm::Value* base = t.base;
  auto bars = [&] { return b_.CreateAdd(base, c32(S * t.stage_bytes), "mbars"); };
  auto full = [&](llvm::Value* slot) { return b_.CreateAdd(bars(), b_.CreateMul(slot, c32(8))); };
  auto empty = [&](llvm::Value* slot) { return b_.CreateAdd(bars(), b_.CreateMul(b_.CreateAdd(slot, c32(S)), c32(8))); };
  auto slot_of = [&](llvm::Value* step) { return b_.CreateTrunc(b_.CreateURem(step, i64v(S)), i32); };
  auto parity_of = [&](llvm::Value* step) { return b_.CreateTrunc(b_.CreateAnd(b_.CreateUDiv(step, i64v(S)), i64v(1)), i32); };
  auto stage_at = [&](llvm::Value* slot) { return b_.CreateAdd(base, b_.CreateMul(slot, c32(t.stage_bytes))); };
  // The producer's claim of step s's slot: from the second use on (s >= S), the wait for use
  // s / S - 1 of it to be released (its empty barrier's phase); returns the slot.
  auto claim = [&](llvm::Value* s) {
    llvm::Value* slot = slot_of(s);
    emit_if(b_, fn_, b_.CreateICmpSGE(s, i64v(S)), [&] {
      mbarrier_wait(empty(slot), b_.CreateXor(parity_of(s), c32(1)));
      return none();
    }, none);
    return slot;
  };

  if (!ws_init_->getTerminator()) {  // the first persistent loop: ws.init and the producer's code
    // (Stream-K: the producer computes each part's bounds itself from the kernel's parameters.)
    for (llvm::Value* v : sk_kt ? std::vector<llvm::Value*>{M, N} : std::vector<llvm::Value*>{hi, M, N, t.lo})
      if (!llvm::isa<llvm::Argument>(v) && !llvm::isa<llvm::Constant>(v))
        throw InternalError("SIMT lowering: the persistent wgmma loop's bounds and extents must be kernel parameters or constants");
    const auto saved = b_.saveIP();
    llvm::Value* const loop_base = base;
    b_.SetInsertPoint(ws_init_);
    base = stages_base();
    llvm::Value* warp = b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), i32, "warp");
    llvm::Value* tid = b_.CreateAdd(lane(), b_.CreateMul(warp, c32(32)), "tid");
    emit_if(b_, fn_, b_.CreateICmpEQ(tid, c32(0)), [&] {
      // sk_pair: the ready barrier (one arrival: the partner's producer) after the stage barriers
      // and the partial's (an arrival of each consumer work-item of the partner, ws_pair_send), 16 bytes on
      if (sk_pair) {
        target_.mbarrier_init(b_, b_.CreateAdd(bars(), c32(16 * S)), 1);
        target_.mbarrier_init(b_, b_.CreateAdd(bars(), c32(16 * S + 16)), 32 * sgs_);
      }
      init_stage_barriers(bars(), S, cluster_ ? cluster_ : 1);  // clusters: empty[s] counts both blocks' consumer warps
      return none();
    }, none);
    // every warp, the producers too (clusters: both blocks' barriers made before either copies
    // into the other or arrives on its barriers; sk_pair: before either writes into the other)
    if (cluster_ || sk_pair) target_.cluster_sync(b_);
    else target_.barrier(b_);
    b_.CreateCondBr(b_.CreateICmpUGE(warp, c32(sgs_)), ws_prod_, ws_main_);

    b_.SetInsertPoint(ws_prod_);
    base = stages_base();
    if (producer_warps_ == 4 && sgs_ == 8) set_max_registers(b_, false, kProducerRegs);
    llvm::Value* rank = cluster_ ? target_.cluster_rank(b_) : nullptr;
    llvm::Value* ptid = b_.CreateAdd(lane(), b_.CreateMul(b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), i32), c32(32)));
    emit_if(b_, fn_, b_.CreateICmpEQ(ptid, c32(32 * sgs_)), [&] {
      auto steps = [&](llvm::Value* lo, llvm::Value* end) {  // K steps of [lo, end)
        return b_.CreateSelect(b_.CreateICmpSLT(lo, end), b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(end, lo), i64v(t.KB - 1)), i64v(t.KB)),
                               i64v(0), "nk");
      };
      // The copies of K step k (i64) from K index lo of the tile at (m0, n0) (i32) into `slot`, on its full barrier.
      auto issue = [&](llvm::Value* lo, llvm::Value* k, llvm::Value* slot, llvm::Value* m0, llvm::Value* n0) {
        llvm::Value* stage = stage_at(slot);
        TmaLoop at = t;
        at.lo = lo;
        tma_copy_step(at, stage, full(slot), k, m0, n0, rank);
      };
      // The walk: tiles block, block + grid, ... in the recipe's order (one batch).
      llvm::Value* grid = target_.work_id(b_, WorkId::groups, 0);
      llvm::Value* first_tile = target_.work_id(b_, WorkId::group, 0);
      llvm::Value* tiles_m = b_.CreateSDiv(b_.CreateAdd(M, i64v(t.MT - 1)), i64v(t.MT), "tiles_m");
      llvm::Value* tiles_n = b_.CreateSDiv(b_.CreateAdd(N, i64v(t.NT - 1)), i64v(t.NT), "tiles_n");
      llvm::Value* tiles = b_.CreateMul(tiles_m, tiles_n, "tiles");
      // sk_stage_store: the walk's state is {step count, store_due, flags_due} (else {step count}).
      // A part that leaves its sum for its predecessor hands over `pseudo` slots after its steps
      // (steps h .. h + pseudo - 1), into which the consumers write it; store_due = h + S, the
      // first step that reuses one of them. Before the slot use of step s >= store_due (the next
      // part's first S - pseudo steps are issued before, on slots of the part's last steps) the
      // producer waits for the consumers' writes (the pseudo steps' empty barriers), stores the
      // slots to the block's workspace slot 0 with cp.async.bulk (one bulk group) and waits until
      // they are read (wait_group.read); flags_due = s + S. At the slot use of step s >= flags_due
      // (or the walk's end) it waits for the stores' completion (wait_group 0: the writes
      // performed), orders them before its generic accesses (fence.proxy.async.global) and sets the
      // block's flags (sg_m sg_n of them: the predecessor's warps each wait for their own) with
      // release exchanges. A worker has one such part at most (only its first part can start
      // inside a tile): one store pending at a time. The flags wait only on the walk's progress,
      // which waits only on higher workers' flags (no cycle).
      const bool store = sk_kt && sk_stage_store;
      const bool per_slot = sk_store_groups > 1;  // a bulk group a slot, each slot reused once its group is read
      llvm::Value* SB = i64v(t.stage_bytes);
      auto* v_ty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
      auto ptx0 = [&](const std::string& text) { b_.CreateCall(v_ty, llvm::InlineAsm::get(v_ty, text, "~{memory}", true)); };
      auto store_now = [&](llvm::Value* due) {
        llvm::Value* h = b_.CreateSub(due, i64v(S), "sst_first");
        for (int64_t j = 0; j < pseudo; ++j) {  // the consumers' fragments written
          llvm::Value* sj = b_.CreateAdd(h, i64v(j));
          mbarrier_wait(empty(slot_of(sj)), parity_of(sj));
        }
        llvm::Value* ws = b_.CreateAdd(b_.CreatePtrToInt(param_named("WS"), i64),
                                       b_.CreateMul(target_.work_id(b_, WorkId::group, 0), i64v(2 * part_bytes)), "sst_ws");
        auto* cp_ty = llvm::FunctionType::get(b_.getVoidTy(), {i64, i32, i32}, false);
        auto* cp = llvm::InlineAsm::get(cp_ty, "cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], $2;", "l,r,r,~{memory}", true);
        for (int64_t j = 0; j < pseudo; ++j) {
          b_.CreateCall(cp_ty, cp, {b_.CreateAdd(ws, b_.CreateMul(i64v(j), SB)), stage_at(slot_of(b_.CreateAdd(h, i64v(j)))),
                                    c32(std::min(t.stage_bytes, part_bytes - j * t.stage_bytes))});
          if (per_slot) ptx0("cp.async.bulk.commit_group;");
        }
        if (!per_slot) {
          ptx0("cp.async.bulk.commit_group;");
          ptx0("cp.async.bulk.wait_group.read 0;");
        }
      };
      auto flags_now = [&] {
        ptx0("cp.async.bulk.wait_group 0;");
        ptx0("fence.proxy.async.global;");
        llvm::Value* fl = param_named("FL");
        llvm::Value* own = b_.CreateMul(target_.work_id(b_, WorkId::group, 0), i64v(sgs_), "sst_flags");
        for (int64_t w = 0; w < sgs_; ++w)
          target_.flag_store_release(b_, b_.CreateGEP(i32, fl, b_.CreateAdd(own, i64v(w))), c32(1));
      };
      // the state after what is due at the slot use of step s
      // (per_slot, sk_stage_store 2: the state's st[3] says the stores are issued; the slot of
      // step store_due + j is reused once group j is read: wait_group.read pseudo - 1 - j)
      auto guard = [&](llvm::Value* s, const std::vector<llvm::Value*>& st) {
        if (st.size() < 3) return st;
        llvm::Value* pend = b_.CreateICmpNE(st[1], i64v(0));
        llvm::Value* sd = b_.CreateAnd(pend, b_.CreateICmpSGE(s, st[1]), "sst_store_due");
        if (per_slot) sd = b_.CreateAnd(sd, b_.CreateICmpEQ(st[3], i64v(0)));
        emit_if(b_, fn_, sd, [&] {
          store_now(st[1]);
          return none();
        }, none);
        llvm::Value* done = sd;  // the slots all read
        llvm::Value* issued = nullptr;
        if (per_slot) {
          issued = b_.CreateOr(sd, b_.CreateICmpNE(st[3], i64v(0)));
          llvm::Value* k = b_.CreateSub(s, st[1]);
          for (int64_t j = 0; j + 1 < pseudo; ++j)
            emit_if(b_, fn_, b_.CreateAnd(issued, b_.CreateICmpEQ(k, i64v(j))), [&] {
              ptx0(cat("cp.async.bulk.wait_group.read ", pseudo - 1 - j, ";"));
              return none();
            }, none);
          done = b_.CreateAnd(issued, b_.CreateICmpSGE(k, i64v(pseudo - 1)));
          emit_if(b_, fn_, done, [&] {
            ptx0("cp.async.bulk.wait_group.read 0;");
            return none();
          }, none);
        }
        // (per_slot: the flags 4 S steps later, where waiting for the stores' completion, ~5,000
        // cycles for 128 KiB, S steps after they are read stalled the next part's copies)
        llvm::Value* due = b_.CreateSelect(done, b_.CreateAdd(s, i64v(per_slot ? 4 * S : S)), st[2]);
        llvm::Value* fd = b_.CreateAnd(b_.CreateICmpNE(due, i64v(0)), b_.CreateICmpSGE(s, due), "sst_flags_due");
        emit_if(b_, fn_, fd, [&] {
          flags_now();
          return none();
        }, none);
        std::vector<llvm::Value*> out{st[0], b_.CreateSelect(done, i64v(0), st[1]), b_.CreateSelect(fd, i64v(0), due)};
        if (per_slot) out.push_back(b_.CreateSelect(done, i64v(0), b_.CreateZExt(issued, i64)));
        return out;
      };
      const std::vector<llvm::Value*> state0 = !store ? std::vector<llvm::Value*>{i64v(0)}
                                               : std::vector<llvm::Value*>(per_slot ? 4 : 3, i64v(0));
      // The steps of K range [lo, end) of tile `tile`, the walk's step count s_in[0] on entry;
      // `down`: from the range's last step to its first (the consumers take the stages in the
      // order they fill: the sum's order changes, nothing else).
      auto tile_steps = [&](llvm::Value* tile, llvm::Value* lo, llvm::Value* end, const std::vector<llvm::Value*>& s_in,
                            bool down = false) {
        llvm::Value *mt, *nt;
        if (group_m > 0) {  // bands of group_m M tiles, down M inside a band
          llvm::Value* G = i64v(group_m);
          llvm::Value* first = b_.CreateMul(b_.CreateSDiv(tile, b_.CreateMul(G, tiles_n)), G, "band_m");
          llvm::Value* left = b_.CreateSub(tiles_m, first);
          llvm::Value* rows = b_.CreateSelect(b_.CreateICmpSLT(G, left), G, left, "band_rows");
          llvm::Value* w = b_.CreateSub(tile, b_.CreateMul(first, tiles_n));
          mt = b_.CreateAdd(first, b_.CreateSRem(w, rows), "mt");
          nt = b_.CreateSDiv(w, rows, "nt");
        } else {
          mt = b_.CreateSRem(tile, tiles_m, "mt");
          nt = b_.CreateSRem(b_.CreateSDiv(tile, tiles_m), tiles_n, "nt");
        }
        llvm::Value* m0 = b_.CreateTrunc(b_.CreateMul(mt, i64v(t.MT)), i32, "m0");
        llvm::Value* n0 = b_.CreateTrunc(b_.CreateMul(nt, i64v(t.NT)), i32, "n0");
        llvm::Value* nk = steps(lo, end);
        return emit_for(b_, fn_, i64v(0), nk, i64v(1), s_in, [&](llvm::Value* k, const std::vector<llvm::Value*>& sv) {
          llvm::Value* s = sv[0];
          std::vector<llvm::Value*> st = guard(s, sv);
          if (down) k = b_.CreateSub(b_.CreateSub(nk, i64v(1)), k, "k_down");
          llvm::Value* slot = claim(s);
          issue(lo, k, slot, m0, n0);
          st[0] = b_.CreateAdd(s, i64v(1));
          return st;
        });
      };
      if (!sk_kt) {
        emit_for(b_, fn_, first_tile, tiles, grid, state0, [&](llvm::Value* tile, const std::vector<llvm::Value*>& s_in) {
          return tile_steps(tile, t.lo, hi, s_in);
        });
        return none();
      }
      // Stream-K (gemm_recipe_gpu.cpp): worker g < workers takes iterations [begin(g), begin(g + 1))
      // of the first sk_iters (tile, K tile) pairs, begin(w) = w sk_iters / workers, tile by tile
      // (K tiles of sk_kt), then every block the DP tiles sk_tiles + g, + grid, ... over all of K.
      llvm::Value* workers = param_named("workers");
      llvm::Value* sk_iters = param_named("sk_iters");
      llvm::Value* tiles_k = param_named("tiles_k");
      llvm::Value* K = param_named("K");
      llvm::Value* KT = i64v(sk_kt);
      auto begin = [&](llvm::Value* w) { return b_.CreateSDiv(b_.CreateMul(w, sk_iters), workers); };
      std::vector<llvm::Value*> s0 = emit_if(b_, fn_, b_.CreateICmpSLT(first_tile, workers), [&] {
        llvm::Value* it_lo = begin(first_tile);
        llvm::Value* it_hi = begin(b_.CreateAdd(first_tile, i64v(1)));
        llvm::Value* t_lo = b_.CreateSDiv(it_lo, tiles_k);
        llvm::Value* t_hi = b_.CreateSDiv(b_.CreateAdd(it_hi, b_.CreateSub(tiles_k, i64v(1))), tiles_k);
        llvm::Value *odd = nullptr, *swap = nullptr;
        if (sk_pair) {
          // The seam between odd block o and even o + 1 (the recipe's pair_swap, gemm_recipe_gpu.cpp):
          // swapped when o's head (b K tiles) is no longer than the even block's range less its
          // last part (b <= L_e - p_e); then the even block's tail adds o's head.
          odd = b_.CreateICmpEQ(b_.CreateSRem(first_tile, i64v(2)), i64v(1), "pair_odd");
          llvm::Value* o = b_.CreateSelect(odd, first_tile, b_.CreateSub(first_tile, i64v(1)));
          llvm::Value* oc = b_.CreateSelect(b_.CreateICmpSGE(o, i64v(0)), o, i64v(0));
          llvm::Value* hi_o = begin(b_.CreateAdd(oc, i64v(1)));
          llvm::Value* hi_e = begin(b_.CreateAdd(oc, i64v(2)));
          llvm::Value* bx = b_.CreateSRem(hi_o, tiles_k);
          llvm::Value* room = b_.CreateSub(b_.CreateSub(hi_e, hi_o), b_.CreateSRem(hi_e, tiles_k));
          swap = b_.CreateAnd(b_.CreateAnd(b_.CreateICmpSGE(o, i64v(0)), b_.CreateICmpSLT(b_.CreateAdd(oc, i64v(1)), workers)),
                              b_.CreateAnd(b_.CreateICmpSGT(bx, i64v(0)), b_.CreateICmpSLE(bx, room)), "pair_swap");
        }
        return emit_for(b_, fn_, t_lo, t_hi, i64v(1), state0, [&](llvm::Value* tile, const std::vector<llvm::Value*>& s_in) {
          if (sk_pair) {
            // the parts' order (the recipe's): odd (head, ..., tail) swapped, else (..., head, tail)
            // (a range that starts on a tile: its own order); even (..., tail, head) swapped (a range
            // that ends on a tile: the tail last), else their own order
            llvm::Value* u = b_.CreateSub(tile, t_lo);
            llvm::Value* last = b_.CreateSub(b_.CreateSub(t_hi, t_lo), i64v(1));
            llvm::Value* rot = b_.CreateSRem(b_.CreateAdd(u, i64v(1)), b_.CreateAdd(last, i64v(1)));
            llvm::Value* tail0 = b_.CreateICmpNE(b_.CreateSRem(it_lo, tiles_k), i64v(0));
            llvm::Value* head_last = b_.CreateICmpNE(b_.CreateSRem(it_hi, tiles_k), i64v(0));
            llvm::Value* odd_u = b_.CreateSelect(swap, b_.CreateSelect(b_.CreateICmpEQ(u, i64v(0)), last, b_.CreateSelect(b_.CreateICmpEQ(u, last), i64v(0), u)),
                                                 b_.CreateSelect(tail0, rot, u));
            llvm::Value* before_head = b_.CreateSelect(b_.CreateICmpSLT(u, b_.CreateSub(last, i64v(1))), b_.CreateAdd(u, i64v(1)),
                                                       b_.CreateSelect(b_.CreateICmpEQ(u, last), last, i64v(0)));
            llvm::Value* even_u = b_.CreateSelect(swap, b_.CreateSelect(head_last, before_head, rot), u);
            tile = b_.CreateAdd(t_lo, b_.CreateSelect(odd, odd_u, even_u), "pair_tile");
          }
          llvm::Value* t_first = b_.CreateMul(tile, tiles_k);
          llvm::Value* lo = b_.CreateSelect(b_.CreateICmpSGT(it_lo, t_first), it_lo, t_first);
          llvm::Value* t_end = b_.CreateAdd(t_first, tiles_k);
          llvm::Value* end = b_.CreateSelect(b_.CreateICmpSLT(it_hi, t_end), it_hi, t_end);
          llvm::Value* k_lo = b_.CreateMul(b_.CreateSub(lo, t_first), KT);
          llvm::Value* k_hi = b_.CreateMul(b_.CreateSub(end, t_first), KT);
          k_hi = b_.CreateSelect(b_.CreateICmpSLT(k_hi, K), k_hi, K);
          // (a part the recipe skips, lo == end, has no steps: steps() is 0)
          std::vector<llvm::Value*> s_out = emit_if(b_, fn_, b_.CreateICmpSLT(lo, end), [&] { return tile_steps(tile, k_lo, k_hi, s_in, sk_down); },
                                                    [&] { return s_in; });
          if (sk_prefetch) {
            // A tile's head with a successor (lo at the tile's first K tile, end before its last) adds
            // the successor's partial (workspace slot 0 of block + 1) after its K loop: its copies
            // are issued some stages before the consumers finish, so the partial (written by then,
            // or being written: L2 is where the writes land) is fetched into L2 meanwhile, should
            // it have been evicted since (plan field sk_prefetch).
            llvm::Value* head = b_.CreateAnd(b_.CreateICmpEQ(lo, t_first), b_.CreateICmpSLT(end, t_end));
            emit_if(b_, fn_, b_.CreateAnd(head, b_.CreateICmpSLT(lo, end)), [&] {
              llvm::Value* slot = b_.CreateMul(b_.CreateMul(b_.CreateAdd(first_tile, i64v(1)), i64v(2)), i64v(sk_prefetch));
              llvm::Value* at = b_.CreateAdd(b_.CreatePtrToInt(param_named("WS"), i64), slot);
              target_.prefetch_l2_bulk(b_, at, c32(sk_prefetch));
              return none();
            }, none);
          }
          if (read_pseudo) {
            // sk_stage: a part with a successor (end before the tile's last K tile) reads its
            // partial through `pseudo` slots after its own steps: pseudo steps for which the
            // producer waits as for a copy (the slot's previous use released) and then arrives on
            // the slot's full barrier with no bytes (the consumers' ws_stage_read takes them).
            llvm::Value* has_next = b_.CreateAnd(b_.CreateICmpSLT(end, t_end), b_.CreateICmpSLT(lo, end));
            // sk_pair: the parts that add another's sum: a head with a successor (not an odd
            // block's swapped head, which stores its sum), and an even block's swapped tail
            llvm::Value* reads = has_next;
            llvm::Value* pair_recv = nullptr;
            if (sk_pair) {
              llvm::Value* head = b_.CreateICmpEQ(lo, t_first);
              llvm::Value* even_tail = b_.CreateAnd(b_.CreateAnd(b_.CreateNot(odd), swap),
                                                    b_.CreateAnd(b_.CreateICmpSGT(lo, t_first), b_.CreateICmpSLT(lo, end)));
              reads = b_.CreateOr(b_.CreateAnd(b_.CreateAnd(has_next, head), b_.CreateOr(b_.CreateNot(odd), b_.CreateNot(swap))),
                                  b_.CreateAnd(even_tail, b_.CreateNot(has_next)));
              pair_recv = b_.CreateAnd(b_.CreateAnd(has_next, head), b_.CreateNot(odd));
            }
            s_out = emit_if(b_, fn_, reads, [&] {
              // (sk_stage_store: what is due by the last of them, done before the first)
              std::vector<llvm::Value*> st = guard(b_.CreateAdd(s_out[0], i64v(pseudo - 1)), s_out);
              if (sk_pair) {
                // sk_pair: an even block's successor is its partner (rank + 1), whose consumers
                // write the partial into these slots (ws_pair_send) once they are claimed: the
                // first pseudo step goes to the partner's mailbox, then an arrival (release,
                // cluster scope) on its ready barrier. An odd block's successor is the next
                // pair's: the workspace, as without pairs.
                llvm::Value* h = st[0];
                for (int64_t i = 0; i < pseudo; ++i) target_.mbarrier_arrive(b_, full(claim(b_.CreateAdd(h, i64v(i)))));
                emit_if(b_, fn_, pair_recv, [&] {
                  llvm::Value* ready = b_.CreateAdd(bars(), c32(16 * S));
                  auto* ty4 = llvm::FunctionType::get(b_.getVoidTy(), {i32, i32, i32, i32}, false);
                  auto* send4 = llvm::InlineAsm::get(ty4,
                                                     "{\n.reg .b32 rm, rb;\nmapa.shared::cluster.u32 rm, $0, $2;\n"
                                                     "mapa.shared::cluster.u32 rb, $1, $2;\n"
                                                     "st.shared::cluster.u32 [rm], $3;\n"
                                                     "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [rb];\n}",
                                                     "r,r,r,r,~{memory}", /*hasSideEffects=*/true);
                  b_.CreateCall(ty4, send4, {b_.CreateAdd(ready, c32(8)), ready, b_.CreateXor(target_.cluster_rank(b_), c32(1)),
                                             b_.CreateTrunc(h, i32)});
                  return none();
                }, none);
                st[0] = b_.CreateAdd(h, i64v(pseudo));
                return st;
              }
              for (int64_t i = 0; i < pseudo; ++i) {
                llvm::Value* sv = st[0];
                target_.mbarrier_arrive(b_, full(claim(sv)));
                st[0] = b_.CreateAdd(sv, i64v(1));
              }
              return st;
            }, [&] { return s_out; });
          }
          if (store) {
            // sk_stage_store: a part after the tile's head (its first K tile past the tile's
            // first) hands over `pseudo` slots for its sum (ws_stage_store), as for a read;
            // stored at the slot use of step store_due (guard). (No guard here: no store is
            // pending, and a flags' wait left over would only be later.)
            llvm::Value* tail = b_.CreateAnd(b_.CreateICmpSGT(lo, t_first), b_.CreateICmpSLT(lo, end));
            s_out = emit_if(b_, fn_, tail, [&] {
              std::vector<llvm::Value*> st = s_out;
              llvm::Value* h = st[0];
              for (int64_t i = 0; i < pseudo; ++i) {
                llvm::Value* sv = b_.CreateAdd(h, i64v(i));
                target_.mbarrier_arrive(b_, full(claim(sv)));
              }
              st[0] = b_.CreateAdd(h, i64v(pseudo));
              st[1] = b_.CreateAdd(h, i64v(S));
              return st;
            }, [&] { return s_out; });
          }
          return s_out;
        });
      }, [&] { return state0; });
      llvm::Value* sk_tiles = b_.CreateSDiv(sk_iters, tiles_k, "sk_tiles");
      std::vector<llvm::Value*> s_end = emit_for(b_, fn_, b_.CreateAdd(sk_tiles, first_tile), tiles, grid, s0,
                                                 [&](llvm::Value* tile, const std::vector<llvm::Value*>& s_in) {
        return tile_steps(tile, i64v(0), K, s_in);
      });
      if (store) {  // the walk's end: a store still pending (per_slot: or not yet issued), or its flags
        llvm::Value* unissued = b_.CreateICmpNE(s_end[1], i64v(0));
        if (per_slot) unissued = b_.CreateAnd(unissued, b_.CreateICmpEQ(s_end[3], i64v(0)));
        emit_if(b_, fn_, unissued, [&] {
          store_now(s_end[1]);
          return none();
        }, none);
        emit_if(b_, fn_, b_.CreateOr(b_.CreateICmpNE(s_end[1], i64v(0)), b_.CreateICmpNE(s_end[2], i64v(0))), [&] {
          flags_now();
          return none();
        }, none);
      }
      return none();
    }, none);
    b_.CreateRetVoid();

    if (producer_warps_ == 4 && sgs_ == 8) {  // the consumers take the producer warpgroup's registers
      llvm::IRBuilder<> mb(ws_main_, ws_main_->getFirstInsertionPt());
      set_max_registers(mb, true, kConsumerRegs);
    }
    llvm::BasicBlock& entry = fn_->getEntryBlock();
    llvm::IRBuilder<> eb(&entry, entry.begin());
    ws_steps_ = eb.CreateAlloca(i64, nullptr, "ws_steps");
    eb.CreateStore(i64v(0), ws_steps_);
    b_.restoreIP(saved);
    base = loop_base;
  }

  // A consumer warp's release of a slot: its empty barrier; in a cluster, both blocks' (each
  // block's producer copies half of B into both blocks' slot).
  auto release = [&](llvm::Value* bar) {
    if (!cluster_) return target_.mbarrier_arrive(b_, bar);
    for (int r = 0; r < cluster_; ++r) target_.mbarrier_arrive_cluster(b_, bar, c32(r));
  };
  llvm::Value* taken = b_.CreateLoad(i64, ws_steps_, "ws_taken");
  // The loop and its last wait inside `nk > 0`: the accumulators of a loop that does not run
  // (the initial values) merge after wgmma.wait_group 0, outside every wgmma pipeline stage
  // (else ptxas serializes the wgmmas, C7515).
  std::vector<llvm::Value*> D = emit_if(b_, fn_, b_.CreateICmpSGT(t.nk, i64v(0)), [&] {
    std::vector<llvm::Value*> out = emit_for(b_, fn_, i64v(0), t.nk, i64v(1), acc, [&](llvm::Value* i, const std::vector<llvm::Value*>& in) {
      llvm::Value* s = b_.CreateAdd(taken, i, "step");
      mbarrier_wait(full(slot_of(s)), parity_of(s));  // step s has landed
      std::vector<llvm::Value*> r = multiply(stage_at(slot_of(s)), in);
      target_.wgmma_wait(b_, 1);  // this warpgroup's wgmmas of step s - 1 have retired: release its slot
      emit_if(b_, fn_, b_.CreateAnd(b_.CreateICmpSGT(i, i64v(0)), b_.CreateICmpEQ(lane(), c32(0))), [&] {
        release(empty(slot_of(b_.CreateSub(s, i64v(1)))));
        return none();
      }, none);
      return r;
    });
    target_.wgmma_wait(b_, 0);
    // The accumulators are read only after the wait (as simt_wgmma.cpp does after its loop): f32,
    // or s32 for 8-bit inputs.
    for (llvm::Value*& v : out) {
      llvm::Type* dt = v->getType();
      auto* fty = llvm::FunctionType::get(dt, {dt}, false);
      auto* keep = llvm::InlineAsm::get(fty, "", dt->isIntegerTy() ? "=r,0" : "=f,0", /*hasSideEffects=*/true);
      v = b_.CreateCall(fty, keep, {v});
    }
    emit_if(b_, fn_, b_.CreateICmpEQ(lane(), c32(0)), [&] {
      release(empty(slot_of(b_.CreateSub(b_.CreateAdd(taken, t.nk), i64v(1)))));
      return none();
    }, none);
    return out;
  }, [&] { return acc; });
  b_.CreateStore(b_.CreateAdd(taken, t.nk), ws_steps_);
  return D;
}

SimtLowering::StageRegion SimtLowering::ws_stage_region(const Access& a, const Type& t, const char* prefix) {
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* i64 = b_.getInt64Ty();
  const std::string pre = prefix;
  llvm::Value* mem = b_.CreateTrunc(b_.CreatePtrToInt(stage_mem_, i64), i32);
  llvm::Value* base = b_.CreateAnd(b_.CreateAdd(mem, b_.getInt32(1023)), b_.getInt32(~uint32_t(1023)), pre + "_base");
  llvm::Value* bars = b_.CreateAdd(base, b_.getInt32(static_cast<uint32_t>(ws_stage_slots_ * ws_stage_bytes_)));
  llvm::Value* taken = b_.CreateLoad(i64, ws_steps_, pre + "_taken");
  llvm::Value* r0 = b_.CreateMul(b_.CreateAdd(b_.CreateMul(a.row, b_.getInt64(t.cols)), b_.CreateMul(a.col, a.sc)), b_.getInt64(4));
  llvm::Value* step = b_.CreateAdd(taken, b_.CreateUDiv(r0, b_.getInt64(ws_stage_bytes_)), pre + "_step");
  return {base, bars, taken, r0, ws_stage_slot(step)};
}

llvm::Value* SimtLowering::ws_stage_slot(llvm::Value* step) {
  return b_.CreateTrunc(b_.CreateURem(step, b_.getInt64(ws_stage_slots_)), b_.getInt32Ty());
}

llvm::Value* SimtLowering::ws_stage_parity(llvm::Value* step) {
  return b_.CreateTrunc(b_.CreateAnd(b_.CreateUDiv(step, b_.getInt64(ws_stage_slots_)), b_.getInt64(1)), b_.getInt32Ty());
}

// sk_stage (gemm_recipe_gpu.cpp): the successor's partial, a warp's 16 x NR fragment in its own
// order (frag_native, simt_wgmma.cpp), through the stage slots that the producer handed over as
// pseudo steps after the part's copies (ws_tma_loop): the warp's region of the partial tile (its
// element offset, as native_at's) lies in pseudo step i = bytes / slot bytes; the warp waits for
// the pseudo steps' full barriers, each lane copies its 16-byte groups there with cp.async (all in flight
// at once, no registers held: a lane's 32 ld.global.v4 were latency-bound, ~9,000 cycles a part
// on the H100, session 20), waits for them, reads them back from shared memory; then every warp
// releases all the pseudo steps (empty barriers count every consumer warp) and counts them taken.
std::vector<llvm::Value*> SimtLowering::ws_stage_read(const Access& a, const Type& t, size_t components, bool pair) {
  if (pair && !ws_pair_) throw InternalError("SIMT lowering: a pair_read load without a persistent wgmma loop of stream_k_pair before it");
  if (!ws_steps_ || !ws_stage_read_)
    throw InternalError("SIMT lowering: a stage_read load without a persistent wgmma loop of stream_k_stage_read before it");
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* f32 = b_.getFloatTy();
  if (scalar_ty(t.scalar) != f32) throw InternalError("SIMT lowering: a stage_read load of a type other than f32");
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  const int64_t S = ws_stage_slots_, SB = ws_stage_bytes_;
  const StageRegion region = ws_stage_region(a, t, "stg");
  llvm::Value *base = region.base, *bars = region.bars, *taken = region.taken, *r0 = region.r0, *slot = region.slot;
  auto slot_of = [&](llvm::Value* step) { return ws_stage_slot(step); };
  auto parity_of = [&](llvm::Value* step) { return ws_stage_parity(step); };
  // every pseudo step handed over (not only this warp's): its arrivals on their empty barriers
  // below then count toward the pseudo uses, never a previous use another warp has yet to release
  for (int64_t j = 0; j < ws_stage_pseudo_; ++j) {
    llvm::Value* sj = b_.CreateAdd(taken, b_.getInt64(j));
    mbarrier_wait(b_.CreateAdd(bars, b_.CreateMul(slot_of(sj), c32(8))), parity_of(sj));
  }
  llvm::Value* dst0 = b_.CreateAdd(b_.CreateAdd(base, b_.CreateMul(slot, c32(SB))), b_.CreateTrunc(b_.CreateURem(r0, b_.getInt64(SB)), i32));
  llvm::Value* l16 = b_.CreateMul(lane(), c32(16));
  auto* cp_ty = llvm::FunctionType::get(b_.getVoidTy(), {i32, i64}, false);
  auto* cp = llvm::InlineAsm::get(cp_ty, "cp.async.cg.shared.global [$0], [$1], 16;", "r,l,~{memory}", /*hasSideEffects=*/true);
  const size_t groups = components / 4;
  std::vector<llvm::Value*> at(groups);
  for (size_t q = 0; q < groups; ++q) {
    at[q] = b_.CreateAdd(dst0, b_.CreateAdd(l16, c32(static_cast<int64_t>(512 * q))));
    if (!pair) b_.CreateCall(cp_ty, cp, {at[q], b_.CreatePtrToInt(native_at(a, t, q), i64)});
  }
  auto* wait_ty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
  if (!pair) {
    b_.CreateCall(wait_ty, llvm::InlineAsm::get(wait_ty, "cp.async.wait_all;", "~{memory}", /*hasSideEffects=*/true));
  } else {
    // pair: the partner's work-items have written the partial here (ws_pair_send) once each has
    // arrived (release, cluster scope) on the pair's data barrier: one use a launch, parity 0
    auto* w_ty = llvm::FunctionType::get(b_.getVoidTy(), {i32}, false);
    b_.CreateCall(w_ty, llvm::InlineAsm::get(w_ty,
                                             "{\n.reg .pred p;\npair_data${:uid}:\n"
                                             "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [$0], 0;\n"
                                             "@!p bra pair_data${:uid};\n}",
                                             "r,~{memory}", /*hasSideEffects=*/true),
                  {b_.CreateAdd(bars, c32(16 * S + 16))});
  }
  auto* v4 = llvm::StructType::get(ctx_, {f32, f32, f32, f32});
  auto* ld_ty = llvm::FunctionType::get(v4, {i32}, false);
  auto* ld = llvm::InlineAsm::get(ld_ty, "ld.shared.v4.f32 {$0, $1, $2, $3}, [$4];", "=f,=f,=f,=f,r,~{memory}", /*hasSideEffects=*/true);
  std::vector<llvm::Value*> out(components);
  for (size_t q = 0; q < groups; ++q) {
    llvm::Value* x = b_.CreateCall(ld_ty, ld, {at[q]});
    for (unsigned i = 0; i < 4; ++i) out[q * 4 + i] = b_.CreateExtractValue(x, {i});
  }
  target_.subgroup_sync(b_);  // every lane's reads done before lane 0 releases the slots
  emit_if(b_, fn_, b_.CreateICmpEQ(lane(), c32(0)), [&] {
    for (int64_t j = 0; j < ws_stage_pseudo_; ++j)
      target_.mbarrier_arrive(b_, b_.CreateAdd(bars, b_.CreateMul(b_.CreateAdd(slot_of(b_.CreateAdd(taken, b_.getInt64(j))), c32(S)), c32(8))));
    return std::vector<llvm::Value*>{};
  }, [] { return std::vector<llvm::Value*>{}; });
  b_.CreateStore(b_.CreateAdd(taken, b_.getInt64(ws_stage_pseudo_)), ws_steps_);
  return out;
}

// sk_stage_store (gemm_recipe_gpu.cpp): a part's sum for its predecessor, the warp's 16 x NR
// fragment in its own order (frag_native), into the stage slots that the producer handed over as
// pseudo steps after the part (ws_tma_loop): at the same place as ws_stage_read's (the warp's
// region in pseudo step bytes / slot bytes, the slots an image of the workspace's partial tile).
// The warp waits for every pseudo step's full barrier (so that its releases below count toward
// the pseudo uses), each lane writes its 16-byte groups with st.shared.v4 and orders them before
// the async proxy's reads (fence.proxy.async.shared::cta: the producer's cp.async.bulk reads the
// slots), the warp synchronizes and lane 0 releases every pseudo step; the warp goes on to its
// next part (no global stores, no flag: the producer stores the slots and sets the flags).
void SimtLowering::ws_stage_store(const Access& a, const Type& t, const std::vector<llvm::Value*>& d) {
  if (!ws_steps_ || !ws_stage_store_)
    throw InternalError("SIMT lowering: a stage_store store without a persistent wgmma loop of stream_k_stage_store before it");
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* f32 = b_.getFloatTy();
  if (scalar_ty(t.scalar) != f32 || d.size() % 4) throw InternalError("SIMT lowering: a stage_store store of a type other than f32");
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  const int64_t S = ws_stage_slots_, SB = ws_stage_bytes_;
  const StageRegion region = ws_stage_region(a, t, "sst");
  llvm::Value *base = region.base, *bars = region.bars, *taken = region.taken, *r0 = region.r0, *slot = region.slot;
  auto slot_of = [&](llvm::Value* step) { return ws_stage_slot(step); };
  auto parity_of = [&](llvm::Value* step) { return ws_stage_parity(step); };
  // (each wait a loop inside one inline PTX block: with mbarrier_wait's loop of LLVM blocks here,
  // the 128 sums live across it, ptxas spilled 520-640 bytes where the kernel without spills 64)
  auto* w_ty = llvm::FunctionType::get(b_.getVoidTy(), {i32, i32}, false);
  auto* wait = llvm::InlineAsm::get(w_ty,
                                    "{\n.reg .pred p;\nsst_wait${:uid}:\nmbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n"
                                    "@!p bra sst_wait${:uid};\n}",
                                    "r,r,~{memory}", /*hasSideEffects=*/true);
  for (int64_t j = 0; j < ws_stage_pseudo_; ++j) {
    llvm::Value* sj = b_.CreateAdd(taken, b_.getInt64(j));
    b_.CreateCall(w_ty, wait, {b_.CreateAdd(bars, b_.CreateMul(slot_of(sj), c32(8))), parity_of(sj)});
  }
  llvm::Value* dst0 = b_.CreateAdd(b_.CreateAdd(base, b_.CreateMul(slot, c32(SB))), b_.CreateTrunc(b_.CreateURem(r0, b_.getInt64(SB)), i32));
  // (LLVM's stores through one shared-window pointer: st.shared.v4.f32 at immediate offsets; an
  // inline st.shared a group took an address register each, and ptxas spilled 636 bytes)
  llvm::Value* at = b_.CreateIntToPtr(b_.CreateAdd(dst0, b_.CreateMul(lane(), c32(16))), llvm::PointerType::get(ctx_, 3), "sst_at");
  auto* v4 = llvm::FixedVectorType::get(f32, 4);
  for (size_t q = 0; q < d.size() / 4; ++q) {
    llvm::Value* x = llvm::PoisonValue::get(v4);
    for (int i = 0; i < 4; ++i) x = b_.CreateInsertElement(x, d[q * 4 + i], uint64_t(i));
    b_.CreateAlignedStore(x, b_.CreateConstGEP1_64(b_.getInt8Ty(), at, static_cast<int64_t>(512 * q)), llvm::Align(16));
  }
  auto* v_ty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
  b_.CreateCall(v_ty, llvm::InlineAsm::get(v_ty, "fence.proxy.async.shared::cta;", "~{memory}", /*hasSideEffects=*/true));
  target_.subgroup_sync(b_);  // every lane's writes (and fence) before lane 0 releases the slots
  emit_if(b_, fn_, b_.CreateICmpEQ(lane(), c32(0)), [&] {
    for (int64_t j = 0; j < ws_stage_pseudo_; ++j)
      target_.mbarrier_arrive(b_, b_.CreateAdd(bars, b_.CreateMul(b_.CreateAdd(slot_of(b_.CreateAdd(taken, b_.getInt64(j))), c32(S)), c32(8))));
    return std::vector<llvm::Value*>{};
  }, [] { return std::vector<llvm::Value*>{}; });
  b_.CreateStore(b_.CreateAdd(taken, b_.getInt64(ws_stage_pseudo_)), ws_steps_);
}

// sk_pair (gemm_recipe_gpu.cpp): an odd block's tail partial for its cluster partner (rank ^ 1),
// whose head adds it (ws_stage_read, pair): the partner's producer handed over pseudo steps for it
// (ws_tma_loop) and put the first one in this block's mailbox before its arrival (release,
// cluster scope) on this block's ready barrier. The warp waits for that barrier (acquire, cluster
// scope; one use a launch: parity 0), reads the mailbox, and each lane writes its 16-byte groups
// at the places ws_stage_read reads them in the partner's slots (the warp's region in pseudo step
// bytes / slot bytes) with st.shared::cluster, then arrives (release, cluster scope) on the
// partner's data barrier, which counts every consumer work-item. (st.async with complete_tx
// needs PTX ISA 8.1; the kernels are 8.0.) Nothing is left to wait for here: the partner waits
// for the arrivals, and no block leaves before the cluster barrier at its end.
void SimtLowering::ws_pair_send(const Access& a, const Type& t, const std::vector<llvm::Value*>& d) {
  if (!ws_steps_ || !ws_pair_)
    throw InternalError("SIMT lowering: a pair_send store without a persistent wgmma loop of stream_k_pair before it");
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* f32 = b_.getFloatTy();
  if (scalar_ty(t.scalar) != f32 || d.size() % 4) throw InternalError("SIMT lowering: a pair_send store of a type other than f32");
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  const int64_t S = ws_stage_slots_, SB = ws_stage_bytes_;
  llvm::Value* mem = b_.CreateTrunc(b_.CreatePtrToInt(stage_mem_, i64), i32);
  llvm::Value* base = b_.CreateAnd(b_.CreateAdd(mem, c32(1023)), c32(~int64_t(1023)), "pair_base");
  llvm::Value* bars = b_.CreateAdd(base, c32(S * SB));
  llvm::Value* ready = b_.CreateAdd(bars, c32(16 * S), "pair_ready");
  // the wait and the mailbox's read in one inline block (a loop of LLVM blocks with the 128 sums
  // live across it spilled in ws_stage_store, which see)
  auto* w_ty = llvm::FunctionType::get(i32, {i32}, false);
  auto* wait = llvm::InlineAsm::get(w_ty,
                                    "{\n.reg .pred p;\npair_wait${:uid}:\n"
                                    "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [$1], 0;\n"
                                    "@!p bra pair_wait${:uid};\nld.shared.u32 $0, [$1+8];\n}",
                                    "=r,r,~{memory}", /*hasSideEffects=*/true);
  llvm::Value* h = b_.CreateZExt(b_.CreateCall(w_ty, wait, {ready}), i64, "pair_first");
  llvm::Value* r0 = b_.CreateMul(b_.CreateAdd(b_.CreateMul(a.row, b_.getInt64(t.cols)), b_.CreateMul(a.col, a.sc)), b_.getInt64(4));
  llvm::Value* slot = ws_stage_slot(b_.CreateAdd(h, b_.CreateUDiv(r0, b_.getInt64(SB))));
  llvm::Value* dst0 = b_.CreateAdd(b_.CreateAdd(base, b_.CreateMul(slot, c32(SB))), b_.CreateTrunc(b_.CreateURem(r0, b_.getInt64(SB)), i32));
  llvm::Value* partner = b_.CreateXor(target_.cluster_rank(b_), c32(1), "partner");
  auto* m_ty = llvm::FunctionType::get(i32, {i32, i32}, false);
  auto* mapa = llvm::InlineAsm::get(m_ty, "mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r", /*hasSideEffects=*/false);
  llvm::Value* rdst = b_.CreateCall(m_ty, mapa, {b_.CreateAdd(dst0, b_.CreateMul(lane(), c32(16))), partner}, "pair_dst");
  auto* s_ty = llvm::FunctionType::get(b_.getVoidTy(), {i32, f32, f32, f32, f32}, false);
  auto* st = llvm::InlineAsm::get(s_ty, "st.shared::cluster.v4.f32 [$0], {$1, $2, $3, $4};", "r,f,f,f,f,~{memory}", /*hasSideEffects=*/true);
  for (size_t q = 0; q < d.size() / 4; ++q)
    b_.CreateCall(s_ty, st, {b_.CreateAdd(rdst, c32(static_cast<int64_t>(512 * q))), d[q * 4], d[q * 4 + 1], d[q * 4 + 2], d[q * 4 + 3]});
  auto* a_ty = llvm::FunctionType::get(b_.getVoidTy(), {i32, i32}, false);
  b_.CreateCall(a_ty, llvm::InlineAsm::get(a_ty,
                                           "{\n.reg .b32 rb;\nmapa.shared::cluster.u32 rb, $0, $1;\n"
                                           "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [rb];\n}",
                                           "r,r,~{memory}", /*hasSideEffects=*/true),
                {b_.CreateAdd(bars, c32(16 * S + 16)), partner});
}

}  // namespace coopjit
