// The Hopper warpgroup pipeline's epilogue (simt_wgmma.cpp has the K loop): the accumulators kept
// in wgmma's D fragment order (Frag) through the epilogue's steps (frag_op / frag_like: scale,
// conversion, the bias; per_element_step: an activation or the user's function on each component
// where it is, pending until its store box), then stored from the fragment: stmatrix into the
// staged buffers and TMA stores of C (tma_store), the lanes' own stores at edges (frag_store), or
// Stream-K's partial tiles in the fragment's own order (native_at).
#include <llvm/IR/InlineAsm.h>

#include <functional>
#include <optional>

#include "lower/ir_to_llvm.h"
#include "lower/simt_lowering.h"

namespace coopjit {

llvm::Value* SimtLowering::frag_at(const Frag& f, size_t q) {
  llvm::Value* v = f.d.at(q);
  for (const auto& step : f.pending) v = step(v, q);
  return v;
}

std::vector<llvm::Value*> SimtLowering::frag_values(const Frag& f) {
  if (f.pending.empty()) return f.d;
  std::vector<llvm::Value*> out(f.d.size());
  for (size_t q = 0; q < out.size(); ++q) out[q] = frag_at(f, q);
  return out;
}

// A fused epilogue's activation (or the user's function) on each component where it is: the
// region with the element's row and column in the 16 x NR tile (D[ni 4 + i] of lane 4 g + t:
// (g + 8 (i / 2), 8 ni + 2 t + i % 2)). Gathering the fragment into the coopmatrix layout first
// (mat()) cost 1024 shuffles a tile's epilogue and kept both copies live (ptxas: ~3 KB of spill
// stores a thread in the Hopper kernel's bias + GELU epilogue, session 20).
std::optional<std::function<llvm::Value*(llvm::Value*, size_t)>> SimtLowering::per_element_step(const Op& o, const Frag& f,
                                                                                                  int depth) {
  std::vector<std::vector<llvm::Value*>> mats(o.operands.size());
  std::vector<llvm::Value*> scalars(o.operands.size(), nullptr);
  for (size_t e = 1; e < o.operands.size(); ++e) {
    if (!o.operands[e]->type.is_matrix()) {
      scalars[e] = scalar(o.operands[e]);
      continue;
    }
    auto x = frag_like(o.operands[e], f, depth + 1);
    if (!x) return std::nullopt;
    mats[e] = *x;
  }
  const Op* op = &o;
  return [this, op, mats, scalars](llvm::Value* v, size_t q) {
    llvm::Type* i64 = b_.getInt64Ty();
    llvm::Value* g = b_.CreateZExt(b_.CreateLShr(lane(), b_.getInt32(2)), i64);
    llvm::Value* t2 = b_.CreateZExt(b_.CreateMul(b_.CreateAnd(lane(), b_.getInt32(3)), b_.getInt32(2)), i64);
    const int64_t ni = static_cast<int64_t>(q / 4), i = static_cast<int64_t>(q % 4);
    std::vector<llvm::Value*> args{b_.CreateAdd(g, b_.getInt64(8 * (i / 2))), b_.CreateAdd(t2, b_.getInt64(8 * ni + i % 2)), v};
    for (size_t e = 1; e < op->operands.size(); ++e) args.push_back(scalars[e] ? scalars[e] : mats[e][q]);
    return lower_region(*op->regions[0], args);
  };
}

std::vector<llvm::Value*> SimtLowering::frag_layout(const Frag& f) {
  // D[ni 4 + i] is c_i of the m16n8 block ni: element (g + 8 (i / 2), ni 8 + 2 t + i % 2) on lane 4 g + t.
  auto frag_owner = [](int64_t r, int64_t c) -> std::pair<int, int> {
    return {static_cast<int>(4 * (r % 8) + (c % 8) / 2), static_cast<int>((c / 8) * 4 + 2 * (r / 8) + c % 2)};
  };
  return gather_from(frag_values(f), lanes_of(f.type), f.type.scalar, frag_owner);
}

void SimtLowering::frag_elements(const Access& a, int64_t cols, bool checked,
                                 const std::function<void(size_t, llvm::Value*, llvm::Value*, llvm::Value*)>& each) {
  llvm::Value* g = b_.CreateZExt(b_.CreateLShr(lane(), b_.getInt32(2)), b_.getInt64Ty());
  llvm::Value* tq2 = b_.CreateZExt(b_.CreateMul(b_.CreateAnd(lane(), b_.getInt32(3)), b_.getInt32(2)), b_.getInt64Ty());
  for (int h = 0; h < 2; ++h) {
    llvm::Value* row = b_.CreateAdd(a.row, b_.CreateAdd(g, b_.getInt64(8 * h)));
    llvm::Value* row_ok = checked ? b_.CreateICmpULT(row, a.rows) : b_.getTrue();
    llvm::Value* row_at = b_.CreateMul(row, a.sr);
    for (int64_t ni = 0; ni < cols / 8; ++ni)
      for (int j = 0; j < 2; ++j) {
        llvm::Value* col = b_.CreateAdd(a.col, b_.CreateAdd(tq2, b_.getInt64(8 * ni + j)));
        llvm::Value* ok = checked ? b_.CreateAnd(row_ok, b_.CreateICmpULT(col, a.cols)) : b_.getTrue();
        each(static_cast<size_t>(ni * 4 + 2 * h + j), ok, row_at, col);
      }
  }
}

// frag_native accesses (frag_like, frag_store): an unchecked 16 x NR fragment, NR / 2 components a
// lane in whole 16-byte groups.
static bool native_shape(const Op& o, const Type& t, size_t components) {
  return !o.int_attr("checked") && t.rows == 16 && components % 4 == 0 && static_cast<int64_t>(components) == t.cols / 2;
}

std::optional<std::vector<llvm::Value*>> SimtLowering::frag_like(const Value* v, const Frag& f, int depth) {
  if (auto it = frags_.find(v); it != frags_.end()) return frag_values(it->second);
  const Type& t = v->type;
  if (!v->def || depth > 4 || !t.is_matrix() || t.scope != f.type.scope || t.rows != f.type.rows || t.cols != f.type.cols) return std::nullopt;
  const Op& o = *v->def;
  switch (o.kind) {
    case OpKind::mat_scale: {
      auto x = frag_like(o.operands[0], f, depth + 1);
      if (!x) return std::nullopt;
      llvm::Value* s = scalar(o.operands[1]);
      for (llvm::Value*& e : *x) e = scalar_bin(BinOp::mul, t.scalar, e, s);
      return x;
    }
    case OpKind::mat_convert: {
      const Type& m = o.operands[0]->type;
      if (m.use != t.use) return std::nullopt;
      auto x = frag_like(o.operands[0], f, depth + 1);
      if (!x) return std::nullopt;
      for (llvm::Value*& e : *x) e = convert_value(e, m.scalar, t.scalar);
      return x;
    }
    case OpKind::mat_per_element: {
      auto x = frag_like(o.operands[0], f, depth + 1);
      auto step = x ? per_element_step(o, f, depth) : std::nullopt;
      if (!step) return std::nullopt;
      for (size_t q = 0; q < x->size(); ++q) (*x)[q] = (*step)((*x)[q], q);
      return x;
    }
    case OpKind::mat_load: {  // C's old values for beta: each lane loads the elements it holds
      if (o.operands[0]->type.is_groupshared() || o.int_attr("vnni", 1) != 1) return std::nullopt;
      if (auto le = load_epoch_.find(v); le == load_epoch_.end() || le->second != mem_epoch_) return std::nullopt;  // a store since
      const Access a = access(o, 0);
      if (o.int_attr("frag_native", 0)) {  // what frag_store wrote in the fragment's own order
        if (!native_shape(o, t, f.d.size())) return std::nullopt;
        native_loads_.erase(v);
        if (o.int_attr("stage_read", 0)) return ws_stage_read(a, t, f.d.size(), o.int_attr("pair_read", 0) != 0);  // through the stage slots (simt_tma_ws.cpp)
        std::vector<llvm::Value*> out(f.d.size());
        for (size_t q = 0; q < f.d.size() / 4; ++q) {
          llvm::Value* x = b_.CreateAlignedLoad(llvm::FixedVectorType::get(scalar_ty(t.scalar), 4), native_at(a, t, q), llvm::Align(16));
          for (int i = 0; i < 4; ++i) out[q * 4 + i] = b_.CreateExtractElement(x, uint64_t(i));
        }
        return out;
      }
      llvm::Type* et = scalar_ty(t.scalar);
      std::vector<llvm::Value*> out(f.d.size());
      frag_elements(a, t.cols, o.int_attr("checked") != 0, [&](size_t q, llvm::Value* ok, llvm::Value* row_at, llvm::Value* col) {
        llvm::Value* ptr = b_.CreateGEP(et, a.ptr, b_.CreateAdd(row_at, b_.CreateMul(col, a.sc)));
        out[q] = guarded_load(ok, et, ptr, align(t.scalar));
      });
      return out;
    }
    default:
      return std::nullopt;
  }
}

bool SimtLowering::frag_op(const Op& o) {
  if (o.operands.empty()) return false;
  auto it = frags_.find(o.operands[0]);
  if (o.kind == OpKind::mat_binary && it == frags_.end()) it = frags_.find(o.operands[1]);
  if (it == frags_.end()) return false;
  const Frag& f = it->second;
  using Step = std::function<llvm::Value*(llvm::Value*, size_t)>;
  // From a per-element function on, the steps wait in Frag::pending for the store (frag_at).
  auto defer = [&](const Step& step) {
    Frag r = f;
    r.type = o.result()->type;
    r.pending.push_back(step);
    frags_[o.result()] = std::move(r);
    return true;
  };
  switch (o.kind) {
    case OpKind::mat_scale: case OpKind::mat_convert: case OpKind::mat_per_element: {  // alpha, the output type, an activation
      if (o.kind == OpKind::mat_per_element) {
        auto step = per_element_step(o, f, 0);
        return step && defer(*step);
      }
      if (!f.pending.empty()) {
        const ScalarType from = o.operands[0]->type.scalar, to = o.result()->type.scalar;
        if (o.kind == OpKind::mat_scale) {
          llvm::Value* s = scalar(o.operands[1]);
          return defer([this, s, to](llvm::Value* v, size_t) { return scalar_bin(BinOp::mul, to, v, s); });
        }
        if (o.operands[0]->type.use != o.result()->type.use) return false;
        return defer([this, from, to](llvm::Value* v, size_t) { return convert_value(v, from, to); });
      }
      auto x = frag_like(o.result(), f);  // (its definition: this op)
      if (!x) return false;
      Frag r = f;
      r.type = o.result()->type;
      r.d = *x;
      frags_[o.result()] = r;
      return true;
    }
    case OpKind::mat_binary: {  // + beta C: C's old values loaded at the fragment's positions
      const bool first = frags_.count(o.operands[0]) != 0;  // the fragment is the left operand
      if (!f.pending.empty() && !frags_.count(o.operands[first ? 1 : 0])) {  // a residual after an activation
        auto y = frag_like(o.operands[first ? 1 : 0], f);
        if (!y) return false;
        const BinOp op = static_cast<BinOp>(o.sub);
        const ScalarType T = o.result()->type.scalar;
        return defer([this, op, T, first, ys = *y](llvm::Value* v, size_t q) {
          return first ? scalar_bin(op, T, v, ys[q]) : scalar_bin(op, T, ys[q], v);
        });
      }
      auto x = frag_like(o.operands[0], f), y = x ? frag_like(o.operands[1], f) : std::nullopt;
      if (!x || !y) return false;
      Frag r = f;
      r.type = o.result()->type;
      for (size_t i = 0; i < r.d.size(); ++i) r.d[i] = scalar_bin(static_cast<BinOp>(o.sub), r.type.scalar, (*x)[i], (*y)[i]);
      frags_[o.result()] = r;
      return true;
    }
    case OpKind::mat_store:
      if (o.operands[1]->type.is_groupshared()) return false;
      return frag_store(f, o);
    default:
      return false;
  }
}

// stmatrix (sm_90) of the 16-bit fragment's columns ni and ni + 1 at shared address `addr` (i32):
// four 8 x 8 blocks, (ni, 0), (ni, 1), (ni + 1, 0), (ni + 1, 1), a lane's pair of elements a block,
// lane 8 i + j naming row j of block i (`trans`: the blocks transposed, row j is then column j).
void SimtLowering::stmatrix_x4(llvm::Value* addr, bool trans, const std::vector<llvm::Value*>& d, int64_t ni) {
  llvm::Type* i32 = b_.getInt32Ty();
  auto packed = [&](int64_t n, int h) {
    llvm::Value* lo = d.at(n * 4 + 2 * h);
    llvm::Value* v = b_.CreateInsertElement(llvm::PoisonValue::get(llvm::FixedVectorType::get(lo->getType(), 2)), lo, uint64_t(0));
    return b_.CreateBitCast(b_.CreateInsertElement(v, d.at(n * 4 + 2 * h + 1), uint64_t(1)), i32);
  };
  auto* ty = llvm::FunctionType::get(b_.getVoidTy(), {i32, i32, i32, i32, i32}, false);
  auto* stm = llvm::InlineAsm::get(ty, cat("stmatrix.sync.aligned.m8n8.x4", trans ? ".trans" : "", ".shared.b16 [$0], {$1, $2, $3, $4};"),
                                   "r,r,r,r,r,~{memory}", /*hasSideEffects=*/true);
  b_.CreateCall(ty, stm, {addr, packed(ni, 0), packed(ni, 1), packed(ni + 1, 0), packed(ni + 1, 1)});
}

// A fragment in its own order (attribute frag_native: Stream-K's partial tiles, written and read
// only by the same warp position of this kernel): the warp's 16 x NR elements at ptr + row NR +
// col sc, D[4 q .. 4 q + 3] of lane l in 16 bytes at element 4 (32 q + l), so that each of a
// lane's NR / 8 vector accesses covers 512 contiguous bytes of the warp (the strided form costs
// a 4-byte access an element: ncu, session 17).
llvm::Value* SimtLowering::native_at(const Access& a, const Type& t, size_t q) {
  llvm::Type* et = scalar_ty(t.scalar);
  llvm::Value* base = b_.CreateAdd(b_.CreateMul(a.row, b_.getInt64(t.cols)), b_.CreateMul(a.col, a.sc));
  llvm::Value* l = b_.CreateZExt(lane(), b_.getInt64Ty());
  llvm::Value* at = b_.CreateAdd(base, b_.CreateMul(b_.CreateAdd(l, b_.getInt64(static_cast<int64_t>(32 * q))), b_.getInt64(4)));
  return b_.CreateGEP(et, a.ptr, at);
}

// The epilogue's store of a warp's whole 16 x NR tile (unchecked; C with a unit stride along its
// rows or its columns, the other stride, the base and the tile's offset along the unit-stride
// dimension multiples of 16 bytes: one uniform test) through the warp's own region of shared
// memory (Frag::epi_bytes; no other warp touches it), P columns at a time (then 32, 16 or 8 for
// what is left of an N tile that is not a multiple of P: 136 = 64 + 64 + 8):
//   - each lane writes its D components: with unit-stride columns as pairs (2 consecutive columns
//     of a row, rows of P elements padded by 16 / 32 bytes so that the 32 lanes' pairs fall in
//     distinct banks), with unit-stride rows element by element into columns of 16 rows padded
//     to 48 / 80 bytes (the same, for the lanes' columns 2 t, 2 t + 1); 16-bit C with stmatrix
//     (.trans for unit-stride rows), four 8 x 8 blocks a call, on the same padded rows / columns;
//   - bar.warp.sync; then the 32 lanes read consecutive 16-byte chunks of the region and store
//     them to C, consecutive lanes on consecutive chunks (a row's P elements, or a column's 16
//     rows: whole 32-byte sectors); bar.warp.sync before the region takes the next P columns.
// Edge tiles (checked) and C the test refuses: each lane stores its own components where they
// go, one element a store. (Before: a gather of each component into the coopmatrix layout,
// shuffles and selects, and one 2- or 4-byte store per component: on the H100, one wave of
// 128 x 256 tiles at K = 64 ran ~2400 instructions a warp and spilled.)
bool SimtLowering::frag_store(const Frag& f, const Op& o) {
  const Type& t = o.operands[0]->type;
  const int64_t esz = size_in_bytes(t.scalar), NR = t.cols;
  if (o.int_attr("frag_native", 0)) {
    if (!native_shape(o, t, f.d.size())) return false;
    const Access a = access(o, 1);
    if (o.int_attr("pair_send", 0)) {  // into the cluster partner's stage slots (sk_pair, simt_tma_ws.cpp)
      ws_pair_send(a, t, f.d);
      return true;
    }
    if (o.int_attr("stage_store", 0)) {  // through the stage slots, stored by the producer (simt_tma_ws.cpp)
      ws_stage_store(a, t, f.d);
      return true;
    }
    for (size_t q = 0; q < f.d.size() / 4; ++q) {
      llvm::Value* x = llvm::PoisonValue::get(llvm::FixedVectorType::get(scalar_ty(t.scalar), 4));
      for (int i = 0; i < 4; ++i) x = b_.CreateInsertElement(x, frag_at(f, q * 4 + i), uint64_t(i));
      b_.CreateAlignedStore(x, native_at(a, t, q), llvm::Align(16));
    }
    return true;
  }
  if (!f.epi_bytes || t.rows != 16 || NR % 8 || static_cast<int64_t>(f.d.size()) != NR / 2) return false;
  const Access a = access(o, 1);
  llvm::Type* et = scalar_ty(t.scalar);
  // Each lane's own components where they go, one element a store, inside rows x cols when
  // checked: the edge tiles and C that the staging does not take (no gather, no shuffles).
  auto direct = [&](bool checked) {
    frag_elements(a, NR, checked, [&](size_t q, llvm::Value* ok, llvm::Value* row_at, llvm::Value* col) {
      guarded(ok, [&] {
        llvm::Value* ptr = b_.CreateGEP(et, a.ptr, b_.CreateAdd(row_at, b_.CreateMul(col, a.sc)));
        b_.CreateAlignedStore(frag_at(f, q), ptr, align(t.scalar));
      });
    });
  };
  // C's columns contiguous (by_row; a column stride that is not the constant 1 is tested at run
  // time with the alignment) or its rows (by_col: the row stride the constant 1).
  const bool by_col = is_index_const(a.sr_ir, 1) && !is_index_const(a.sc_ir, 1);
  const bool by_row = !by_col;
  // This kernel's C may go out in TMA boxes (tma_store below) only in tiles of whole boxes: an N
  // tile of 136 or 200 never does, whatever the plan's tma_store says.
  const bool tma_boxes = f.tma_store && (esz == 2 || esz == 4) && fn_->arg_size() == f_.params.size() + 3 && NR % (128 / esz) == 0;
  if (o.int_attr("tma_store", 0) && tma_boxes) {
    tma_store(f, o, a, by_col);
    return true;
  }
  const int64_t row_pad = esz == 4 ? 32 : 16, col_pitch = esz == 2 ? 48 : 80;
  auto region = [&](int64_t P) { return by_row ? 16 * (P * esz + row_pad) : P * col_pitch; };
  // P: the widest piece (64, 32 or 16 columns) whose region fits; NR in pieces of P, then what
  // is left in pieces of 32, 16 and 8 columns (N tiles of any multiple of 8: 136 = 64 + 64 + 8;
  // an 8-column piece of 16-bit C is 16 chunks, half the lanes' reads).
  int64_t P = 0;
  if ((esz == 2 || esz == 4) && !o.int_attr("checked"))
    for (int64_t c : {64, 32, 16})
      if (c <= NR && (c * esz) % 32 == 0 && region(c) <= f.epi_bytes) {
        P = c;
        break;
      }
  std::vector<std::pair<int64_t, int64_t>> pieces;  // (first column, columns)
  for (int64_t c0 = 0; P && c0 < NR;) {
    int64_t w = P;
    while (w > NR - c0) w /= 2;
    pieces.emplace_back(c0, w);
    c0 += w;
  }
  if (!P) {
    direct(o.int_attr("checked") != 0);
    return true;
  }
  const int64_t pitch = by_row ? P * esz + row_pad : col_pitch;  // bytes a row (by_row) or a column
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* i8t = b_.getInt8Ty();
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  auto i64v = [&](int64_t v) { return b_.getInt64(v); };
  llvm::Value* stride = by_row ? a.sr : a.sc;  // the other dimension's, in elements
  llvm::Value* unit_off = by_row ? a.col : a.row;
  llvm::Value* bits = b_.CreateOr(b_.CreatePtrToInt(a.ptr, i64), b_.CreateMul(b_.CreateOr(stride, unit_off), i64v(esz)));
  llvm::Value* ok = b_.CreateICmpEQ(b_.CreateAnd(bits, i64v(15)), i64v(0), "epi_aligned");
  if (by_row && !is_index_const(a.sc_ir, 1)) ok = b_.CreateAnd(ok, b_.CreateICmpEQ(a.sc, i64v(1)), "epi_unit");
  auto warp_sync = [&] {
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
    b_.CreateCall(fty, llvm::InlineAsm::get(fty, "bar.warp.sync -1;", "~{memory}", /*hasSideEffects=*/true));
  };
  either_path(ok, [&] {
    // A TMA store of C may still be reading the region (tma_store below). Only then: the
    // warpgroup's barrier below is met by its warps of full tiles alone, and a warp of an edge tile
    // (the checked store: full is decided a warp at a time) never comes to it (a 128 x 136 tile
    // with 104 rows of C left hung its warpgroup on the H100, session 23).
    if (tma_boxes) {
      auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
      b_.CreateCall(fty, llvm::InlineAsm::get(fty, "cp.async.bulk.wait_group.read 0;", "~{memory}", /*hasSideEffects=*/true));
      if (f.tma_store == 2) {  // (boxes of a warpgroup: its first warp's store may be reading this warp's region)
        llvm::Value* w = b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), b_.getInt32Ty());
        auto* bty = llvm::FunctionType::get(b_.getVoidTy(), {b_.getInt32Ty()}, false);
        b_.CreateCall(bty, llvm::InlineAsm::get(bty, "bar.sync $0, 128;", "r,~{memory}", /*hasSideEffects=*/true),
                      {b_.CreateAdd(b_.CreateLShr(w, b_.getInt32(2)), b_.getInt32(1))});
      }
      warp_sync();
    }
    llvm::Value* sg = b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), i32);
    llvm::Value* region_at = b_.CreateAdd(b_.CreateAdd(f.pad, c32(f.epi_off)), b_.CreateMul(sg, c32(f.epi_bytes)), "epi_region");
    auto smem = [&](llvm::Value* off) { return b_.CreateGEP(i8t, stage_mem_, {b_.CreateAdd(region_at, off)}); };
    llvm::Value* g = b_.CreateLShr(lane(), c32(2));
    llvm::Value* tq = b_.CreateAnd(lane(), c32(3));
    auto* pair_ty = llvm::FixedVectorType::get(et, 2);
    auto* chunk_ty = llvm::FixedVectorType::get(i32, 4);
    // 16-bit C: stmatrix (sm_90) writes four 8 x 8 blocks of the fragment a call, lane 8 i + j
    // naming row j of block i (transposed for unit-stride rows: row j is then column j).
    llvm::Value* region_addr = esz == 2 ? b_.CreateAdd(b_.CreateTrunc(b_.CreatePtrToInt(stage_mem_, i64), i32), region_at) : nullptr;
    llvm::Value* blk = b_.CreateLShr(lane(), c32(3));  // this lane's block of four, and row in it
    llvm::Value* blk_row = b_.CreateAnd(lane(), c32(7));
    llvm::Value* blk_h = b_.CreateAnd(blk, c32(1));     // blocks (ni, h): 0 (2 jj, 0), 1 (2 jj, 1), 2 (2 jj + 1, 0), 3 (2 jj + 1, 1)
    llvm::Value* blk_n = b_.CreateLShr(blk, c32(1));
    std::vector<llvm::Value*> d(f.d.size());
    for (const auto& piece : pieces) {
      const int64_t c0 = piece.first, w = piece.second;  // (not a structured binding: a lambda below captures them)
      for (int64_t q = c0 / 2; q < (c0 + w) / 2; ++q) d[q] = frag_at(f, q);  // the piece's components (pending steps here)
      // 16-bit C: stmatrix for each pair of 8-column blocks, the pair path below for an odd last one
      const int64_t paired = esz == 2 ? w / 16 * 2 : 0;
      for (int64_t nl = 0; nl < paired; nl += 2) {
        const int64_t ni = c0 / 8 + nl;
        // this lane's row: block (nl + blk_n, blk_h), row blk_row
        llvm::Value* cols = b_.CreateAdd(c32(8 * nl), b_.CreateMul(blk_n, c32(8)));  // the block's first column in the piece
        llvm::Value* rows = b_.CreateMul(blk_h, c32(8));                              // and first row
        llvm::Value* off = by_row ? b_.CreateAdd(b_.CreateMul(b_.CreateAdd(rows, blk_row), c32(pitch)), b_.CreateMul(cols, c32(2)))
                                  : b_.CreateAdd(b_.CreateMul(b_.CreateAdd(cols, blk_row), c32(pitch)), b_.CreateMul(rows, c32(2)));
        stmatrix_x4(b_.CreateAdd(region_addr, off), !by_row, d, ni);
      }
      for (int64_t nl = paired; nl < w / 8; ++nl) {
        const int64_t ni = c0 / 8 + nl;
        llvm::Value* col = b_.CreateAdd(c32(8 * nl), b_.CreateMul(tq, c32(2)));  // the pair's first column in the piece
        for (int h = 0; h < 2; ++h) {
          llvm::Value* row = b_.CreateAdd(g, c32(8 * h));
          llvm::Value *v0 = d.at(ni * 4 + 2 * h), *v1 = d.at(ni * 4 + 2 * h + 1);
          if (by_row) {
            llvm::Value* pair = b_.CreateInsertElement(b_.CreateInsertElement(llvm::PoisonValue::get(pair_ty), v0, uint64_t(0)), v1, uint64_t(1));
            llvm::Value* off = b_.CreateAdd(b_.CreateMul(row, c32(pitch)), b_.CreateMul(col, c32(esz)));
            b_.CreateAlignedStore(pair, smem(off), llvm::Align(2 * esz));
          } else {
            llvm::Value* off = b_.CreateAdd(b_.CreateMul(col, c32(pitch)), b_.CreateMul(row, c32(esz)));
            b_.CreateAlignedStore(v0, smem(off), llvm::Align(esz));
            b_.CreateAlignedStore(v1, smem(b_.CreateAdd(off, c32(pitch))), llvm::Align(esz));
          }
        }
      }
      warp_sync();
      const int64_t per = by_row ? w * esz / 16 : esz;  // chunks a row (by_row) or a column
      const int64_t chunks = w * esz;                    // the piece's 16-byte chunks (16 rows of w elements)
      for (int64_t it = 0; it * 32 < chunks; ++it) {
        llvm::Value* q = b_.CreateAdd(c32(it * 32), lane());
        auto copy = [&] {
          llvm::Value* major = b_.CreateUDiv(q, c32(per));  // the row (by_row) or the column in the piece
          llvm::Value* minor = b_.CreateURem(q, c32(per));  // the chunk along it
          llvm::Value* v = b_.CreateAlignedLoad(chunk_ty, smem(b_.CreateAdd(b_.CreateMul(major, c32(pitch)), b_.CreateMul(minor, c32(16)))),
                                                llvm::Align(16));
          llvm::Value* maj64 = b_.CreateZExt(major, i64);
          llvm::Value* min64 = b_.CreateMul(b_.CreateZExt(minor, i64), i64v(16 / esz));
          llvm::Value* elem = by_row ? b_.CreateAdd(b_.CreateMul(b_.CreateAdd(a.row, maj64), a.sr), b_.CreateAdd(a.col, b_.CreateAdd(i64v(c0), min64)))
                                     : b_.CreateAdd(b_.CreateAdd(a.row, min64), b_.CreateMul(b_.CreateAdd(a.col, b_.CreateAdd(i64v(c0), maj64)), a.sc));
          b_.CreateAlignedStore(v, b_.CreateGEP(i8t, a.ptr, {b_.CreateMul(elem, i64v(esz))}), llvm::Align(16));
        };
        if ((it + 1) * 32 <= chunks) copy();
        else guarded(b_.CreateICmpULT(q, c32(chunks)), copy);  // (an 8-column piece of 16-bit C: 16 chunks)
      }
      warp_sync();
    }
    return std::vector<llvm::Value*>{};
  }, [&] {
    direct(false);
    return std::vector<llvm::Value*>{};
  }, "epi");
  return true;
}

// The epilogue's store of a warp's 16 x NR tile by the Tensor Memory Accelerator (loop and store
// attribute tma_store; the host passes C's tensor map after A's and B's: dims (N, M) with unit-
// stride columns, (M, N) with unit-stride rows, boxes of 16 x P or P x 16, P = 128 / element bytes):
// P columns at a time, each a box of 2048 bytes in one of the warp's one or two buffers (Frag:
// the regions 1024-byte aligned), laid out as the copy engine reads it: lines of the box's inner
// dimension (a row of P elements, 128 bytes, or a column of 16 rows, 32 / 64 bytes) one after
// another, swizzled as the map says (16-byte chunk c of line l at c ^ (l' % W / 16), l' counting
// 128-byte lines: CU_TENSOR_MAP_SWIZZLE_128B / 64B / 32B for W = 128 / 64 / 32), which keeps the
// lanes' writes in distinct banks:
//   - wait until this warp's store of the box that last used the buffer has read it
//     (cp.async.bulk.wait_group.read: one group at most in flight with two buffers), bar.warp.sync;
//   - each lane writes its D components (16-bit C: stmatrix, .trans with unit-stride rows; else
//     pairs / elements), fence.proxy.async.shared::cta (generic-proxy writes, async-proxy reads),
//     bar.warp.sync;
//   - lane 0 issues cp.async.bulk.tensor.2d.global.shared::cta.bulk_group and commits it.
// The last box's store stays in flight: the next tile's epilogue (or the kernel's end, simt_lower.cpp)
// waits for it, so it runs under the next tile's K loop. Out-of-range rows and columns (edge tiles)
// are clipped by the copy engine: no checked path.
// tma_store 2, 16-bit C with contiguous rows (by_col) and regions of 4096 bytes: boxes of a
// warpgroup's 64 rows (lines of 128 bytes, swizzle 128) in the four warps' regions, which are
// consecutive (8 KiB a buffer, two buffers), warp w's rows at bytes 32 w.. of each line; the four
// warps meet at the warpgroup's named barrier (bar.sync 1 + warpgroup, 128) where a warp would
// bar.warp.sync, and lane 0 of its first warp waits, issues and commits.
void SimtLowering::tma_store(const Frag& f, const Op& o, const Access& a, bool by_col) {
  const Type& t = o.operands[0]->type;
  const int64_t esz = size_in_bytes(t.scalar), NR = t.cols, P = 128 / esz;
  const bool wg = o.int_attr("tma_store", 0) == 2 && by_col && esz == 2 && f.epi_bytes >= 4096;
  const int64_t W = wg ? 128 : by_col ? 16 * esz : 128;  // bytes a line of the box
  const int64_t box = wg ? 8192 : 2048;
  const int64_t pieces = NR / P, bufs = f.epi_bytes >= 4096 && pieces % 2 == 0 ? 2 : 1;
  tma_stores_ = true;
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* i8t = b_.getInt8Ty();
  llvm::Type* et = scalar_ty(t.scalar);
  auto c32 = [&](int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); };
  auto asm0 = [&](const std::string& text) {
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {}, false);
    b_.CreateCall(fty, llvm::InlineAsm::get(fty, text, "~{memory}", /*hasSideEffects=*/true));
  };
  auto swz = [&](llvm::Value* off) {  // the map's swizzle of a byte offset in a 1024-byte aligned box
    return b_.CreateXor(off, b_.CreateShl(b_.CreateAnd(b_.CreateLShr(off, c32(7)), c32(W / 16 - 1)), c32(4)));
  };
  llvm::Value* sg = b_.CreateTrunc(target_.work_id(b_, WorkId::subgroup, 0), i32);
  llvm::Value* wq = b_.CreateAnd(sg, c32(3));  // the warp in its warpgroup
  // (wg: the warpgroup's first warp's region)
  llvm::Value* region_at = b_.CreateAdd(b_.CreateAdd(f.pad, c32(f.epi_off)), b_.CreateMul(wg ? b_.CreateSub(sg, wq) : sg, c32(f.epi_bytes)),
                                        "epi_region");
  llvm::Value* mem_addr = b_.CreateTrunc(b_.CreatePtrToInt(stage_mem_, i64), i32);
  llvm::Value* in_line = wg ? b_.CreateMul(wq, c32(32)) : c32(0);  // wg: this warp's rows in a line
  auto sync = [&] {
    if (!wg) {
      asm0("bar.warp.sync -1;");
      return;
    }
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {i32}, false);
    b_.CreateCall(fty, llvm::InlineAsm::get(fty, "bar.sync $0, 128;", "r,~{memory}", /*hasSideEffects=*/true),
                  {b_.CreateAdd(b_.CreateLShr(sg, c32(2)), c32(1))});
  };
  llvm::Value* g = b_.CreateLShr(lane(), c32(2));
  llvm::Value* tq = b_.CreateAnd(lane(), c32(3));
  llvm::Value* blk = b_.CreateLShr(lane(), c32(3));  // stmatrix: this lane's block of four, and row in it
  llvm::Value* blk_row = b_.CreateAnd(lane(), c32(7));
  llvm::Value* blk_h = b_.CreateAnd(blk, c32(1));
  llvm::Value* blk_n = b_.CreateLShr(blk, c32(1));
  auto* pair_ty = llvm::FixedVectorType::get(et, 2);
  auto* st_ty = llvm::FunctionType::get(b_.getVoidTy(), {i64, i32, i32, i32}, false);
  auto* st = llvm::InlineAsm::get(st_ty, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];",
                                  "l,r,r,r,~{memory}", /*hasSideEffects=*/true);
  llvm::Value* map = b_.CreatePtrToInt(fn_->getArg(static_cast<unsigned>(f_.params.size() + 2)), i64);
  llvm::Value* row0 = b_.CreateTrunc(a.row, i32, "tma_row");
  if (wg) row0 = b_.CreateSub(row0, b_.CreateMul(wq, c32(16)));  // the warpgroup's first row
  llvm::Value* col0 = b_.CreateTrunc(a.col, i32, "tma_col");
  std::vector<llvm::Value*> d(f.d.size());
  for (int64_t p = 0; p < pieces; ++p) {
    // the piece's components (a fused epilogue's pending steps: computed while the buffer's last box is read)
    for (int64_t q = p * P / 2; q < (p + 1) * P / 2; ++q) d[q] = frag_at(f, q);
    llvm::Value* buf = b_.CreateAdd(region_at, c32((p % bufs) * box), "tma_buf");  // bytes after stage_mem_'s start
    asm0(cat("cp.async.bulk.wait_group.read ", bufs - 1, ";"));  // the buffer's previous box read (lane 0's groups)
    sync();
    if (esz == 2) {
      for (int64_t nl = 0; nl < P / 8; nl += 2) {
        const int64_t ni = p * P / 8 + nl;
        llvm::Value* cols = b_.CreateAdd(c32(8 * nl), b_.CreateMul(blk_n, c32(8)));  // the block's first column in the piece
        llvm::Value* rows = b_.CreateMul(blk_h, c32(8));                              // and first row
        llvm::Value* off = by_col ? b_.CreateAdd(b_.CreateMul(b_.CreateAdd(cols, blk_row), c32(W)), b_.CreateAdd(in_line, b_.CreateMul(rows, c32(2))))
                                  : b_.CreateAdd(b_.CreateMul(b_.CreateAdd(rows, blk_row), c32(W)), b_.CreateMul(cols, c32(2)));
        stmatrix_x4(b_.CreateAdd(b_.CreateAdd(mem_addr, buf), swz(off)), by_col, d, ni);
      }
    } else {
      for (int64_t nl = 0; nl < P / 8; ++nl) {
        const int64_t ni = p * P / 8 + nl;
        llvm::Value* col = b_.CreateAdd(c32(8 * nl), b_.CreateMul(tq, c32(2)));  // the pair's first column in the piece
        for (int h = 0; h < 2; ++h) {
          llvm::Value* row = b_.CreateAdd(g, c32(8 * h));
          llvm::Value *v0 = d.at(ni * 4 + 2 * h), *v1 = d.at(ni * 4 + 2 * h + 1);
          auto at = [&](llvm::Value* off) { return b_.CreateGEP(i8t, stage_mem_, {b_.CreateAdd(buf, swz(off))}); };
          if (!by_col) {
            llvm::Value* pair = b_.CreateInsertElement(b_.CreateInsertElement(llvm::PoisonValue::get(pair_ty), v0, uint64_t(0)), v1, uint64_t(1));
            b_.CreateAlignedStore(pair, at(b_.CreateAdd(b_.CreateMul(row, c32(W)), b_.CreateMul(col, c32(esz)))), llvm::Align(2 * esz));
          } else {
            llvm::Value* off = b_.CreateAdd(b_.CreateMul(col, c32(W)), b_.CreateMul(row, c32(esz)));
            b_.CreateAlignedStore(v0, at(off), llvm::Align(esz));
            b_.CreateAlignedStore(v1, at(b_.CreateAdd(off, c32(W))), llvm::Align(esz));
          }
        }
      }
    }
    target_.async_proxy_fence(b_);  // the writes visible to the copy engine
    sync();
    llvm::Value* along = b_.CreateAdd(col0, c32(p * P));
    llvm::Value* issuer = b_.CreateICmpEQ(lane(), c32(0));
    if (wg) issuer = b_.CreateAnd(issuer, b_.CreateICmpEQ(wq, c32(0)));
    emit_if(b_, fn_, issuer, [&] {
      b_.CreateCall(st_ty, st, {map, by_col ? row0 : along, by_col ? along : row0, b_.CreateAdd(mem_addr, buf)});
      asm0("cp.async.bulk.commit_group;");
      return std::vector<llvm::Value*>{};
    }, [] { return std::vector<llvm::Value*>{}; });
  }
}

}  // namespace coopjit
