// The K loop of the Hopper wgmma pipeline (simt_wgmma.cpp) fed by the Tensor Memory Accelerator
// (plan field tma): each K step's A and B panels come into a stage slot by
// cp.async.bulk.tensor.2d from the tensor maps the host made for this call (kernel parameters
// after the IR's, read in place: nvvm.grid_constant), 128-byte swizzled by the copy engine in the
// very layout the cp.async path writes by hand (rows of 128 bytes, chunk c of row r at c ^ (r % 8),
// the slots 1024-byte aligned), so the wgmmas and their descriptors are the same.
//   - two mbarriers a slot: full[s] (one arrival, the producer's, with the slot's bytes expected
//     as transactions; the copies complete it) and empty[s] (one arrival per warp, lane 0, once
//     its warpgroup's wgmmas of the step in the slot are done);
//   - the producer is work-item 0: it fills slots stages - 1 steps ahead; at step i, after its
//     own warpgroup's wgmmas of step i - 1 are done, it waits for empty[(i - 1) % stages] (every
//     warp done with step i - 1) and issues step i + stages - 1 into that slot;
//   - every warp waits for full[i % stages] (parity: the slot's use count i / stages, mod 2),
//     issues its 4 wgmmas, waits for step i - 1's (wgmma.wait_group 1) and arrives on its empty.
// No block-wide barrier inside the loop: one before it (the slots and barriers free; barriers
// initialized by work-item 0 and fenced) and one after it (the barriers invalidated). The lanes
// of a warp leave the waits and the producer's branch at structured joins, where they reconverge
// before wgmma's .aligned instructions. An explicit bar.warp.sync after them cost 6-9% (H200, bf16
// 4096^3 / 8192^3 in one run: 443 / 509 TFLOP/s with one after each, 438-448 / 515-520 with the
// producer's only, 478-483 / 534-550 with none).
// Out-of-range rows and columns (edge tiles, the K tail) are zero-filled by the copy engine, and
// their bytes count toward the transaction, so every step expects the whole stage.
#include "lower/ir_to_llvm.h"
#include "lower/simt_lowering.h"

namespace coopjit {

void SimtLowering::mbarrier_wait(llvm::Value* bar, llvm::Value* parity) {
  auto* loop = llvm::BasicBlock::Create(ctx_, "mbar.wait", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "mbar.done", fn_);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  b_.CreateCondBr(target_.mbarrier_try_wait(b_, bar, parity), done, loop);
  b_.SetInsertPoint(done);
}

void SimtLowering::init_stage_barriers(llvm::Value* bars, int64_t S, int empty_blocks) {
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  for (int64_t s = 0; s < S; ++s) {
    target_.mbarrier_init(b_, b_.CreateAdd(bars, b_.CreateMul(c32(s), c32(8))), 1);
    target_.mbarrier_init(b_, b_.CreateAdd(bars, b_.CreateMul(b_.CreateAdd(c32(s), c32(S)), c32(8))), sgs_ * empty_blocks);
  }
  target_.mbarrier_init_fence(b_);
}

void SimtLowering::tma_copy_step(const TmaLoop& t, llvm::Value* stage, llvm::Value* bar, llvm::Value* step, llvm::Value* m0,
                                 llvm::Value* n0, llvm::Value* rank) {
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  llvm::Value* map_a = fn_->getArg(static_cast<unsigned>(f_.params.size()));
  llvm::Value* map_b = fn_->getArg(static_cast<unsigned>(f_.params.size() + 1));
  target_.mbarrier_arrive_expect_tx(b_, bar, c32(t.stage_bytes));
  llvm::Value* k0 = b_.CreateTrunc(b_.CreateAdd(t.lo, b_.CreateMul(step, b_.getInt64(t.KB))), b_.getInt32Ty(), "k0");
  // K-contiguous: boxes of `box` rows x KB (box 128 bytes a row); else boxes of KB rows x 64
  // (one column of 8192-byte atoms).
  auto panel = [&](llvm::Value* map, llvm::Value* at, llvm::Value* first, int64_t rows, int64_t box, bool k_inner) {
    if (k_inner)
      for (int64_t j = 0; j < rows / box; ++j)
        target_.tensor_load_2d(b_, b_.CreateAdd(at, c32(j * box * 128)), map, k0, b_.CreateAdd(first, c32(j * box)), bar);
    else
      for (int64_t j = 0; j < rows / 64; ++j)
        target_.tensor_load_2d(b_, b_.CreateAdd(at, c32(j * t.KB * 128)), map, b_.CreateAdd(first, c32(j * 64)), k0, bar);
  };
  panel(map_a, stage, m0, t.MT, t.box_a, t.a_k);
  if (!rank) {
    panel(map_b, b_.CreateAdd(stage, c32(t.b_offset)), n0, t.NT, t.box_b, t.b_k);
    return;
  }
  // A cluster of 2 sharing B's panel: this block's part of its boxes, each written to both blocks'
  // slot and counted on both blocks' full barriers. An even count halves (boxes rank h .. rank h +
  // h - 1 of 2 h); an odd one (128 x 320 blocks with B N-major: five boxes of 64 columns) splits
  // h + 1 and h, the block that takes h + 1 alternating with the step (rank ^ step's parity 0:
  // boxes 0 .. h, else h + 1 .. 2 h), so that each block reads as much of B from L2 over the loop.
  const int64_t box = t.b_k ? t.box_b : 64, boxes = t.NT / box, step_bytes = t.b_k ? box * 128 : t.KB * 128;
  if (t.NT % box || boxes < 2)
    throw InternalError(cat("SIMT lowering: a cluster's B panel of ", t.NT, " rows in boxes of ", box, " does not split in two"));
  const int64_t h = boxes / 2, odd = boxes % 2;
  llvm::Value* mask = b_.getInt16(3);
  auto copy_box = [&](llvm::Value* jj) {
    llvm::Value* dst = b_.CreateAdd(b_.CreateAdd(stage, c32(t.b_offset)), b_.CreateMul(jj, c32(step_bytes)));
    llvm::Value* row = b_.CreateAdd(n0, b_.CreateMul(jj, c32(box)));
    if (t.b_k) target_.tensor_load_2d_multicast(b_, dst, map_b, k0, row, bar, mask);
    else target_.tensor_load_2d_multicast(b_, dst, map_b, row, k0, bar, mask);
  };
  // the first of this block's boxes: rank h (even), or 0 / h + 1 (odd: `lead` takes the h + 1)
  llvm::Value* lead = nullptr;
  llvm::Value* first = b_.CreateMul(rank, c32(h), "box0");
  if (odd) {
    llvm::Value* parity = b_.CreateTrunc(b_.CreateAnd(step, b_.getInt64(1)), b_.getInt32Ty());
    lead = b_.CreateICmpEQ(b_.CreateXor(rank, parity), c32(0), "box_lead");
    first = b_.CreateSelect(lead, c32(0), c32(h + 1), "box0");
  }
  for (int64_t j = 0; j < h; ++j) copy_box(b_.CreateAdd(first, c32(j), "box"));
  if (odd)
    emit_if(b_, fn_, lead, [&] {
      copy_box(c32(h));
      return std::vector<llvm::Value*>{};
    }, [] { return std::vector<llvm::Value*>{}; });
}

std::vector<llvm::Value*> SimtLowering::tma_loop(const std::vector<llvm::Value*>& acc, const StepFn& multiply, const TmaLoop& t) {
  llvm::Type* i32 = b_.getInt32Ty();
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  auto i64v = [&](int64_t v) { return b_.getInt64(v); };
  auto none = [] { return std::vector<llvm::Value*>{}; };
  const int64_t S = t.stages;
  llvm::Value* bars = b_.CreateAdd(t.base, c32(S * t.stage_bytes), "mbars");
  auto full = [&](llvm::Value* slot) { return b_.CreateAdd(bars, b_.CreateMul(slot, c32(8))); };
  auto empty = [&](llvm::Value* slot) { return b_.CreateAdd(bars, b_.CreateMul(b_.CreateAdd(slot, c32(S)), c32(8))); };
  auto slot_of = [&](llvm::Value* step) { return b_.CreateTrunc(b_.CreateURem(step, i64v(S)), i32); };
  auto parity_of = [&](llvm::Value* step) { return b_.CreateTrunc(b_.CreateAnd(b_.CreateUDiv(step, i64v(S)), i64v(1)), i32); };
  llvm::Value* producer = b_.CreateICmpEQ(t.tid, c32(0), "producer");
  llvm::Value* m0 = b_.CreateTrunc(t.m_wg, i32), *n0 = b_.CreateTrunc(t.n_wg, i32);

  // The copies of K step `step` (i64) into its slot, counted on the slot's full barrier.
  auto issue = [&](llvm::Value* step) {
    llvm::Value* slot = slot_of(step);
    llvm::Value* stage = b_.CreateAdd(t.base, b_.CreateMul(slot, c32(t.stage_bytes)));
    tma_copy_step(t, stage, full(slot), step, m0, n0);
  };

  // The slots and barriers may still be in use by a previous loop.
  target_.barrier(b_);
  emit_if(b_, fn_, producer, [&] {
    init_stage_barriers(bars, S);
    return none();
  }, none);
  target_.barrier(b_);
  emit_if(b_, fn_, producer, [&] {
    for (int64_t s = 0; s + 1 < S; ++s)
      emit_if(b_, fn_, b_.CreateICmpSLT(i64v(s), t.nk), [&] {
        issue(i64v(s));
        return none();
      }, none);
    return none();
  }, none);

  std::vector<llvm::Value*> D = emit_for(b_, fn_, i64v(0), t.nk, i64v(1), acc, [&](llvm::Value* i, const std::vector<llvm::Value*>& in) {
    mbarrier_wait(full(slot_of(i)), parity_of(i));  // step i has landed
    std::vector<llvm::Value*> out = multiply(b_.CreateAdd(t.base, b_.CreateMul(slot_of(i), c32(t.stage_bytes))), in);
    target_.wgmma_wait(b_, 1);  // this warpgroup's wgmmas of step i - 1 are done: its slot is free here
    llvm::Value* prev_slot = slot_of(b_.CreateAdd(i, i64v(S - 1)));  // (i - 1) % S
    emit_if(b_, fn_, b_.CreateAnd(b_.CreateICmpSGT(i, i64v(0)), b_.CreateICmpEQ(lane(), c32(0))), [&] {
      target_.mbarrier_arrive(b_, empty(prev_slot));
      return none();
    }, none);
    llvm::Value* next = b_.CreateAdd(i, i64v(S - 1), "next");
    emit_if(b_, fn_, b_.CreateAnd(producer, b_.CreateICmpSLT(next, t.nk)), [&] {
      // The slot's previous step (next - S) released by every warp: its use number next / S - 1.
      emit_if(b_, fn_, b_.CreateICmpSGE(next, i64v(S)), [&] {
        mbarrier_wait(empty(prev_slot), b_.CreateXor(parity_of(next), c32(1)));
        return none();
      }, none);
      issue(next);
      return none();
    }, none);
    return out;
  });
  target_.wgmma_wait(b_, 0);
  // Every warp past its last wait: the barriers can go.
  target_.barrier(b_);
  emit_if(b_, fn_, producer, [&] {
    for (int64_t s = 0; s < S; ++s) {
      target_.mbarrier_inval(b_, full(c32(s)));
      target_.mbarrier_inval(b_, empty(c32(s)));
    }
    return none();
  }, none);
  return D;
}

}  // namespace coopjit
