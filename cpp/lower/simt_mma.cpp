// The SIMT lowering of mul_add on NVIDIA tensor cores: mma.sync.aligned.m16n8k16.row.col.f32
// with bf16 or f16 inputs (llvm.nvvm.mma.m16n8k16.row.col.bf16 / .f32.f32), sm_80 and newer.
// The instruction takes its operands in fixed per-lane fragments (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"; lane p, group g = p / 4, t = p % 4):
//   A 16 x 16, four 32-bit registers of two elements: a_i at row g + 8 ((i / 2) % 2), column
//     2t + i % 2 + 8 (i / 4);
//   B 16 x 8, two registers: b_i at row 2t + i % 2 + 8 (i / 2), column g;
//   C, D 16 x 8 f32: c_i at row g + 8 (i / 2), column 2t + i % 2.
// The coopmatrix operands keep the seeds' lane layout (LaneMap), so each fragment element is
// gathered from the lane and component that hold it (simt_lanes.cpp: moves between lanes), the
// accumulator tile likewise before the K steps and back after them. Correct for any layout; the
// moves cost what they cost (a layout that matches the fragments, with ldmatrix from shared
// memory, is the next step of issue 15).
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "lower/simt_lowering.h"

namespace coopjit {

bool SimtLowering::mma_mul_add(const Op& o, std::vector<llvm::Value*>& C) {
  const Type &ta = o.operands[0]->type, &tb = o.operands[1]->type, &tc = o.operands[2]->type;
  const bool bf = ta.scalar == ScalarType::bf16;
  if (ta.scalar != tb.scalar || (!bf && ta.scalar != ScalarType::f16) || tc.scalar != ScalarType::f32) return false;
  if (S_ != 32 || tc.rows % 16 != 0 || tc.cols % 8 != 0 || ta.cols % 16 != 0) return false;
  const LaneMap La = lanes_of(ta), Lb = lanes_of(tb), Lc = lanes_of(tc);
  const auto& A = mat(o.operands[0]);
  const auto& B = mat(o.operands[1]);
  const int64_t MT = tc.rows / 16, NT = tc.cols / 8, KT = ta.cols / 16;

  // On each lane p, the element (row(p), col(p)) of a matrix held in layout L.
  auto pick = [&](const std::vector<llvm::Value*>& vals, const LaneMap& L, const auto& at) {
    std::vector<int> src(S_), slot(S_);
    for (int p = 0; p < S_; ++p) {
      auto [r, c] = at(p / 4, p % 4);
      auto [q, n] = L.owner(r, c);
      src[p] = static_cast<int>(q);
      slot[p] = static_cast<int>(n);
    }
    return gather(vals, src, slot);
  };
  auto bits16 = [&](llvm::Value* v) { return bf ? v : b_.CreateBitCast(v, b_.getInt16Ty()); };
  // Two 16-bit elements in one register: the first in the low half.
  auto pack = [&](llvm::Value* lo, llvm::Value* hi) {
    llvm::Value* w = b_.CreateOr(b_.CreateZExt(bits16(lo), b_.getInt32Ty()),
                                 b_.CreateShl(b_.CreateZExt(bits16(hi), b_.getInt32Ty()), 16));
    return bf ? w : b_.CreateBitCast(w, llvm::FixedVectorType::get(b_.getHalfTy(), 2));
  };
  std::vector<std::vector<llvm::Value*>> afrag(MT * KT), bfrag(KT * NT);
  for (int64_t mi = 0; mi < MT; ++mi)
    for (int64_t ki = 0; ki < KT; ++ki)
      for (int j = 0; j < 4; ++j) {
        llvm::Value* e[2];
        for (int h = 0; h < 2; ++h) {
          const int i = 2 * j + h;
          e[h] = pick(A, La, [&](int64_t g, int64_t t) {
            return std::make_pair(mi * 16 + g + 8 * ((i / 2) % 2), ki * 16 + 2 * t + i % 2 + 8 * (i / 4));
          });
        }
        afrag[mi * KT + ki].push_back(pack(e[0], e[1]));
      }
  for (int64_t ki = 0; ki < KT; ++ki)
    for (int64_t ni = 0; ni < NT; ++ni)
      for (int j = 0; j < 2; ++j) {
        llvm::Value* e[2];
        for (int h = 0; h < 2; ++h) {
          const int i = 2 * j + h;
          e[h] = pick(B, Lb, [&](int64_t g, int64_t t) {
            return std::make_pair(ki * 16 + 2 * t + i % 2 + 8 * (i / 2), ni * 8 + g);
          });
        }
        bfrag[ki * NT + ni].push_back(pack(e[0], e[1]));
      }
  const llvm::Intrinsic::ID id =
      bf ? llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16 : llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32;
  std::vector<llvm::Value*> D;  // tile (mi, ni)'s c_i at D[(mi * NT + ni) * 4 + i]
  for (int64_t mi = 0; mi < MT; ++mi)
    for (int64_t ni = 0; ni < NT; ++ni) {
      llvm::Value* c[4];
      for (int i = 0; i < 4; ++i)
        c[i] = pick(C, Lc, [&](int64_t g, int64_t t) {
          return std::make_pair(mi * 16 + g + 8 * (i / 2), ni * 8 + 2 * t + i % 2);
        });
      for (int64_t ki = 0; ki < KT; ++ki) {
        std::vector<llvm::Value*> args(afrag[mi * KT + ki]);
        args.insert(args.end(), bfrag[ki * NT + ni].begin(), bfrag[ki * NT + ni].end());
        args.insert(args.end(), c, c + 4);
        llvm::Value* r = b_.CreateIntrinsic(id, llvm::ArrayRef<llvm::Type*>(), llvm::ArrayRef<llvm::Value*>(args));
        for (int i = 0; i < 4; ++i) c[i] = b_.CreateExtractValue(r, {static_cast<unsigned>(i)});
      }
      D.insert(D.end(), c, c + 4);
    }
  // Back into the accumulator's layout: component n of lane p is element at(p, n) of tile
  // (row / 16, col / 8), held by lane 4 (row % 8) + (col % 8) / 2 as c_i, i = 2 ((row % 16) / 8) + col % 2.
  for (int64_t n = 0; n < Lc.comps(); ++n) {
    if (Lc.inside(n) == 0) continue;
    std::vector<int> src(S_, -1), slot(S_, -1);
    for (int p = 0; p < S_; ++p) {
      auto [r, c] = Lc.at(p, n);
      if (r < 0) continue;
      src[p] = static_cast<int>(4 * (r % 8) + (c % 8) / 2);
      slot[p] = static_cast<int>(((r / 16) * NT + c / 8) * 4 + 2 * ((r % 16) / 8) + c % 2);
    }
    C[n] = gather(D, src, slot);
  }
  return true;
}

}  // namespace coopjit
