// The SIMD lowering of AMX tiles (see simd_lowering.h): tile loads, the tile dot products
// (tdpbf16ps, tdpfp16ps, tdpb[su][su]d) and accumulators kept in tiles, as the instructions
// (attr amx = 1) or as calls to their emulation (attr amx = 2, target/amx_emulation.h).
#include "lower/simd_lowering.h"

#include <cmath>

#include "target/amx_emulation.h"

namespace coopjit {

namespace {

constexpr int kTileRows = 16, kTileBytes = 64;

// The tile instruction's operand kind for A x B (AmxKind of amx_emulation.h), or -1.
int dp_kind(ScalarType a, ScalarType b, ScalarType c) {
  auto byte = [](ScalarType t) { return t == ScalarType::i8 || t == ScalarType::u8; };
  if (a == ScalarType::bf16 && b == ScalarType::bf16 && c == ScalarType::f32) return kAmxBf16;
  if (a == ScalarType::f16 && b == ScalarType::f16 && c == ScalarType::f32) return kAmxFp16;
  if (byte(a) && byte(b) && c == ScalarType::i32) {
    const bool ua = a == ScalarType::u8, ub = b == ScalarType::u8;
    return ua ? (ub ? kAmxUU : kAmxUS) : (ub ? kAmxSU : kAmxSS);
  }
  return -1;
}

}  // namespace

bool SimdLowering::tile_form(const Type& t) const {
  return amx_ && S_ == 16 && t.is_matrix() && t.use == Use::acc && size_in_bytes(t.scalar) == 4 &&
         t.rows % kTileRows == 0 && t.cols % 16 == 0 && (t.rows / kTileRows) * (t.cols / 16) <= 4;
}

// The mul_adds that go to tiles: tile-form accumulators, operands loaded unchecked from
// unit-column memory (A row-major, B VNNI-packed in the instruction's group) in whole tiles, and
// those loads used by nothing else.
void SimdLowering::find_tile_loads() {
  std::unordered_map<const Value*, int> uses, tile_uses;
  std::vector<const Op*> candidates;
  auto plain_load = [&](const Value* v, int vnni) {
    const Op* d = v->def;
    return d && d->kind == OpKind::mat_load && !d->int_attr("checked") && d->int_attr("vnni", 1) == vnni &&
           is_const(d->operands[4], 1);
  };
  std::function<void(const Block&)> walk = [&](const Block& blk) {
    for (const auto& op : blk.ops) {
      for (const Value* v : op->operands) ++uses[v];
      for (const auto& r : op->regions) walk(*r);
      if (op->kind != OpKind::mat_mul_add) continue;
      const Type &ta = op->operands[0]->type, &tb = op->operands[1]->type, &tc = op->operands[2]->type;
      const int kind = dp_kind(ta.scalar, tb.scalar, tc.scalar);
      if (kind < 0 || !tile_form(tc) || !tile_form(op->result()->type)) continue;
      const int ea = size_in_bytes(ta.scalar), group = 4 / ea;
      if (ta.use != Use::a || tb.use != Use::b || ta.rows % kTileRows || (ta.cols * ea) % kTileBytes) continue;
      if (!plain_load(op->operands[0], 1) || !plain_load(op->operands[1], group)) continue;
      candidates.push_back(op.get());
      ++tile_uses[op->operands[0]];
      ++tile_uses[op->operands[1]];
    }
  };
  walk(f_.body);
  for (const Op* op : candidates) {
    const Value *a = op->operands[0], *b = op->operands[1];
    if (uses[a] == tile_uses[a] && uses[b] == tile_uses[b]) {
      tile_loads_.insert(a);
      tile_loads_.insert(b);
      for (const Value* v : {a, b})
        if (uses[v] == 1) single_use_.insert(v);
    }
  }
  // An accumulator a tile loop starts from, loaded unchecked from unit-column memory and used by
  // nothing else (a partial sum continued), loads straight into its tiles.
  std::function<void(const Block&)> inits = [&](const Block& blk) {
    for (const auto& op : blk.ops) {
      for (const auto& r : op->regions) inits(*r);
      if (op->kind != OpKind::for_) continue;
      const std::vector<bool> carried = tile_carried(*op);
      for (size_t i = 0; i < carried.size(); ++i) {
        const Value* v = op->operands[3 + i];
        const Op* d = v->def;
        if (carried[i] && d && d->kind == OpKind::mat_load && !d->int_attr("checked") && d->int_attr("vnni", 1) == 1 &&
            is_const(d->operands[4], 1) && tile_form(v->type) && uses[v] == 1)
          tile_loads_.insert(v);
      }
    }
  };
  inits(f_.body);
}

std::vector<bool> SimdLowering::tile_carried(const Op& o) const {
  const Block& region = *o.regions[0];
  std::vector<bool> out(o.operands.size() - 3, false);
  if (!amx_ || region.ops.empty() || region.ops.back()->kind != OpKind::yield) return out;
  const Op& y = *region.ops.back();
  for (size_t i = 0; i < out.size(); ++i) {
    const Value* v = y.operands[i];
    out[i] = tile_form(v->type) && v->def && v->def->kind == OpKind::mat_mul_add && tile_mul_add(*v->def) &&
             v->def->operands[2] == region.args[i + 1];
  }
  return out;
}

bool SimdLowering::tile_mul_add(const Op& o) const {
  return amx_ && tile_loads_.count(o.operands[0]) && tile_loads_.count(o.operands[1]);
}

llvm::Value* SimdLowering::tile_load(llvm::Value* ptr, llvm::Value* stride_bytes) {
  auto* vt = llvm::FixedVectorType::get(b_.getInt32Ty(), 256);
  if (amx_ == 1) {
    llvm::Value* t = b_.CreateIntrinsic(llvm::Intrinsic::x86_tileloadd64_internal, {},
                                        {b_.getInt16(kTileRows), b_.getInt16(kTileBytes), ptr, stride_bytes});
    return b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_tile_to_vector, {vt}, {t});
  }
  // tileloadd's definition: row r of the tile is the 64 bytes at ptr + r * stride.
  auto* row_t = llvm::FixedVectorType::get(b_.getInt32Ty(), 16);
  std::vector<llvm::Value*> rows;
  for (int r = 0; r < kTileRows; ++r)
    rows.push_back(b_.CreateAlignedLoad(
        row_t, b_.CreateGEP(b_.getInt8Ty(), ptr, b_.CreateMul(stride_bytes, b_.getInt64(r))), llvm::Align(1)));
  return concat_vectors(b_, rows);
}

void SimdLowering::tile_store(llvm::Value* ptr, llvm::Value* stride_bytes, llvm::Value* tile) {
  if (amx_ == 1) {
    auto* vt = llvm::FixedVectorType::get(b_.getInt32Ty(), 256);
    llvm::Value* t = b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_vector_to_tile, {vt}, {tile});
    b_.CreateIntrinsic(llvm::Intrinsic::x86_tilestored64_internal, {},
                       {b_.getInt16(kTileRows), b_.getInt16(kTileBytes), ptr, stride_bytes, t});
    return;
  }
  // tilestored's definition: row r of the tile goes to the 64 bytes at ptr + r * stride.
  for (int r = 0; r < kTileRows; ++r) {
    std::vector<int> sel;
    for (int l = 0; l < 16; ++l) sel.push_back(r * 16 + l);
    b_.CreateAlignedStore(b_.CreateShuffleVector(tile, sel),
                          b_.CreateGEP(b_.getInt8Ty(), ptr, b_.CreateMul(stride_bytes, b_.getInt64(r))), llvm::Align(1));
  }
}

bool SimdLowering::store_tiles(const Op& o) {
  const Value* v = o.operands[0];
  const Type& t = v->type;
  auto it = tiles_.find(v);
  if (!amx_ || it == tiles_.end() || !tile_form(t) || o.int_attr("checked") || o.int_attr("vnni", 1) != 1 ||
      !is_const(o.operands[5], 1))
    return false;
  Addr a = addr(o, 1);
  llvm::Type* et = scalar_ty(t.scalar);
  llvm::Value* stride = b_.CreateMul(a.sr, b_.getInt64(size_in_bytes(t.scalar)));
  const int64_t J = t.cols / 16;
  for (size_t i = 0; i < it->second.size(); ++i) {
    const int64_t ti = static_cast<int64_t>(i) / J, j = static_cast<int64_t>(i) % J;
    llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(ti * kTileRows));
    llvm::Value* c = b_.CreateAdd(a.col, b_.getInt64(j * 16));
    tile_store(b_.CreateGEP(et, a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), c)), stride, it->second[i]);
  }
  return true;
}

llvm::Value* SimdLowering::scratch_tile(int i) {
  if (!scratch_tiles_[i]) {
    llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    auto* a = eb.CreateAlloca(llvm::ArrayType::get(eb.getInt32Ty(), 256), nullptr, cat("amx.scratch.", i));
    a->setAlignment(llvm::Align(64));
    scratch_tiles_[i] = a;
  }
  return scratch_tiles_[i];
}

llvm::Value* SimdLowering::tile_dp(int kind, llvm::Value* c, llvm::Value* a, llvm::Value* b) {
  auto* vt = llvm::FixedVectorType::get(b_.getInt32Ty(), 256);
  if (amx_ == 1) {
    static const llvm::Intrinsic::ID ids[] = {
        llvm::Intrinsic::x86_tdpbf16ps_internal, llvm::Intrinsic::x86_tdpfp16ps_internal,
        llvm::Intrinsic::x86_tdpbssd_internal,   llvm::Intrinsic::x86_tdpbsud_internal,
        llvm::Intrinsic::x86_tdpbusd_internal,   llvm::Intrinsic::x86_tdpbuud_internal};
    auto tile = [&](llvm::Value* v) { return b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_vector_to_tile, {vt}, {v}); };
    llvm::Value* r = b_.CreateIntrinsic(ids[kind], {},
                                        {b_.getInt16(kTileRows), b_.getInt16(kTileBytes), b_.getInt16(kTileBytes),
                                         tile(c), tile(a), tile(b)});
    return b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_tile_to_vector, {vt}, {r});
  }
  llvm::Value *pc = scratch_tile(0), *pa = scratch_tile(1), *pb = scratch_tile(2);
  b_.CreateAlignedStore(c, pc, llvm::Align(64));
  b_.CreateAlignedStore(a, pa, llvm::Align(64));
  b_.CreateAlignedStore(b, pb, llvm::Align(64));
  auto* ptr = b_.getPtrTy();
  auto fn = mod_->getOrInsertFunction(kAmxEmulationSymbol,
                                      llvm::FunctionType::get(b_.getVoidTy(), {b_.getInt32Ty(), ptr, ptr, ptr}, false));
  b_.CreateCall(fn, {b_.getInt32(kind), pc, pa, pb});
  return b_.CreateAlignedLoad(vt, pc, llvm::Align(64));
}

void SimdLowering::load_tiles(const Op& o) {
  const Type& t = o.result()->type;
  Addr a = addr(o, 0);
  const int e = size_in_bytes(t.scalar);
  llvm::Value* stride = b_.CreateMul(a.sr, b_.getInt64(e));
  llvm::Type* et = scalar_ty(t.scalar);
  std::vector<llvm::Value*> out;
  if (t.use == Use::acc) {  // tile (i, j): rows 16i.., columns 16j.. (a partial sum continued)
    for (int64_t i = 0; i < t.rows / kTileRows; ++i)
      for (int64_t j = 0; j < t.cols / 16; ++j) {
        llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(i * kTileRows));
        llvm::Value* c = b_.CreateAdd(a.col, b_.getInt64(j * 16));
        out.push_back(tile_load(b_.CreateGEP(et, a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), c)), stride));
      }
  }
  // attr prefetch_far (GemmPlan::amx_prefetch 6): `prefetch_far` lines from the first tile's
  // address plus operand 7's bytes (a later micro kernel's cold panel) go to L2 (prefetcht1).
  if (t.use != Use::acc && o.operands.size() == 8 && o.int_attr("prefetch_far", 0) > 0) {
    llvm::Value* p0 = t.use == Use::a ? b_.CreateGEP(et, a.ptr, b_.CreateAdd(b_.CreateMul(a.row, a.sr), a.col))
                                      : vnni_element_ptr(t, a, 0, 0);
    llvm::Value* far = b_.CreateGEP(b_.getInt8Ty(), p0, scalar(o.operands[7]));
    for (int64_t l = 0; l < o.int_attr("prefetch_far"); ++l)
      b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                         {b_.CreateConstGEP1_64(b_.getInt8Ty(), far, uint64_t(l) * 64), b_.getInt32(0), b_.getInt32(2),
                          b_.getInt32(1)});
  }
  if (t.use == Use::a) {  // tile (i, kk): rows 16i.., K elements kk * 64 / e.., row-major
    // attr prefetch: the rows `prefetch` bytes past each tile row go to L1 (prefetcht0).
    // attr prefetch_l2: the same `prefetch_l2` bytes further on, into L2 (prefetcht1).
    const int64_t ahead = o.int_attr("prefetch", 0), ahead_l2 = o.int_attr("prefetch_l2", 0);
    for (int64_t i = 0; i < t.rows / kTileRows; ++i)
      for (int64_t kk = 0; kk < t.cols * e / kTileBytes; ++kk) {
        llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(i * kTileRows));
        llvm::Value* c = b_.CreateAdd(a.col, b_.getInt64(kk * kTileBytes / e));
        llvm::Value* p = b_.CreateGEP(et, a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), c));
        if (ahead > 0) prefetch_rows(p, stride, ahead);
        if (ahead_l2 > 0) prefetch_rows(p, stride, ahead_l2, 2);
        out.push_back(tile_load(p, stride));
      }
  } else if (t.use == Use::b) {  // tile (kk, j): 16 VNNI rows of 4 / e K elements from K row kk * 64 / e, columns 16j..
    const int group = 4 / e;
    // attr tile_cols (B panels in 1 KiB tiles, GemmPlan::amx_feed 2): the column tiles of one
    // K step lie that many bytes apart, each 16 VNNI rows at the access's row stride (64 bytes).
    const int64_t apart = o.int_attr("tile_cols", 0);
    COOPJIT_INTERNAL_ASSERT(!apart || t.rows * e == kTileBytes, "tile_cols needs one tile row of K per load");
    const int64_t ahead = o.int_attr("prefetch", 0), ahead_l2 = o.int_attr("prefetch_l2", 0);  // as A's
    for (int64_t kk = 0; kk < t.rows * e / kTileBytes; ++kk)
      for (int64_t j = 0; j < t.cols / 16; ++j) {
        llvm::Value* p = apart ? b_.CreateGEP(b_.getInt8Ty(), vnni_element_ptr(t, a, 0, 0), b_.getInt64(j * apart))
                               : vnni_element_ptr(t, a, j * 16, kk * kTileRows * group);
        if (ahead > 0) prefetch_rows(p, stride, ahead);
        if (ahead_l2 > 0) prefetch_rows(p, stride, ahead_l2, 2);
        out.push_back(tile_load(p, stride));
      }
  }
  tiles_[o.result()] = out;
}

// The 16 tile rows at p + r * stride, `ahead` bytes further on, into L1 (locality 3: prefetcht0)
// or L2 (locality 2: prefetcht1).
void SimdLowering::prefetch_rows(llvm::Value* p, llvm::Value* stride, int64_t ahead, int locality) {
  for (int row = 0; row < kTileRows; ++row)
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                       {b_.CreateGEP(b_.getInt8Ty(), p, b_.CreateAdd(b_.getInt64(ahead), b_.CreateMul(stride, b_.getInt64(row)))),
                        b_.getInt32(0), b_.getInt32(locality), b_.getInt32(1)});
}

// Defers the tileloadd of an operand tile load (amx_feed_): its addresses now, its loads in
// mul_add_tiles, each just before the first dot product that reads it (see there).
bool SimdLowering::defer_tiles(const Op& o) {
  const Type& t = o.result()->type;
  if (amx_feed_ < 1 || t.use == Use::acc || !single_use_.count(o.result())) return false;
  llvm::BasicBlock* here = b_.GetInsertBlock();
  load_tiles(o);  // addresses and loads; the loads are taken back out below
  std::vector<llvm::Value*>& tiles = tiles_[o.result()];
  std::vector<std::pair<llvm::Value*, llvm::Value*>> where;
  for (llvm::Value*& v : tiles) {
    // amx_ 1: cast_tile_to_vector(tileloadd64_internal(rows, cols, ptr, stride)); 2: the row loads.
    auto* cast = llvm::dyn_cast<llvm::CallInst>(v);
    auto* load = cast ? llvm::dyn_cast<llvm::CallInst>(cast->getArgOperand(0)) : nullptr;
    if (amx_ != 1 || !load || load->getParent() != here) return false;  // (emulated: kept in place)
    where.emplace_back(load->getArgOperand(2), load->getArgOperand(3));
  }
  for (llvm::Value*& v : tiles) {
    auto* cast = llvm::cast<llvm::CallInst>(v);
    auto* load = llvm::cast<llvm::CallInst>(cast->getArgOperand(0));
    cast->eraseFromParent();
    load->eraseFromParent();
    v = nullptr;
  }
  deferred_[o.result()] = std::move(where);
  return true;
}

llvm::Value* SimdLowering::operand_tile(const Value* v, size_t i) {
  llvm::Value*& t = tiles_.at(v)[i];
  if (!t) {
    const auto& [ptr, stride] = deferred_.at(v)[i];
    t = tile_load(ptr, stride);
  }
  return t;
}

void SimdLowering::mul_add_tiles(const Op& o) {
  const Type &ta = o.operands[0]->type, &tb = o.operands[1]->type, &tc = o.operands[2]->type;
  const int kind = dp_kind(ta.scalar, tb.scalar, tc.scalar);
  COOPJIT_INTERNAL_ASSERT(kind >= 0, "no AMX instruction for these operand types");
  std::vector<llvm::Value*> c = tiles_of(o.operands[2]);
  const int64_t I = tc.rows / kTileRows, J = tc.cols / 16, KK = ta.cols * size_in_bytes(ta.scalar) / kTileBytes;
  for (int64_t kk = 0; kk < KK; ++kk)
    for (int64_t i = 0; i < I; ++i)
      for (int64_t j = 0; j < J; ++j) {
        llvm::Value*& acc = c[static_cast<size_t>(i * J + j)];
        llvm::Value* ta_ = operand_tile(o.operands[0], static_cast<size_t>(i * KK + kk));
        llvm::Value* tb_ = operand_tile(o.operands[1], static_cast<size_t>(kk * J + j));
        // A deferred A tile of the next row is loaded before the last dot product of this row
        // (A0 B0 T00 B1 A1 T01 T10 T11): with A0 still live, the register allocator gives A1 a
        // register of its own, so its load need not wait for T01 to read A0.
        if (j + 1 == J && i + 1 < I) operand_tile(o.operands[0], static_cast<size_t>((i + 1) * KK + kk));
        acc = tile_dp(kind, acc, ta_, tb_);
      }
  tiles_[o.result()] = c;
}

bool SimdLowering::splat_tiles(const Op& o) {
  const Type& t = o.result()->type;
  if (!tile_form(t)) return false;
  const Op* d = o.operands[0]->def;
  if (!d || d->kind != OpKind::constant) return false;
  const bool zero = is_float(t.scalar) ? d->float_attr("value") == 0.0 && !std::signbit(d->float_attr("value"))
                                       : std::get<int64_t>(d->attrs.at("value")) == 0;
  if (!zero) return false;
  auto* vt = llvm::FixedVectorType::get(b_.getInt32Ty(), 256);
  std::vector<llvm::Value*> out;
  for (int64_t i = 0; i < (t.rows / kTileRows) * (t.cols / 16); ++i) {
    if (amx_ == 1) {
      llvm::Value* z = b_.CreateIntrinsic(llvm::Intrinsic::x86_tilezero_internal, {},
                                          {b_.getInt16(kTileRows), b_.getInt16(kTileBytes)});
      out.push_back(b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_tile_to_vector, {vt}, {z}));
    } else {
      out.push_back(llvm::Constant::getNullValue(vt));
    }
  }
  tiles_[o.result()] = out;
  return true;
}

// Tile (ti, tj) of a tile-form matrix is rows 16 ti.. of its column chunk tj (16 lanes of 4
// bytes: one tile row per vector).
const std::vector<llvm::Value*>& SimdLowering::rows_of_tiles(const Value* v) {
  auto key = std::make_pair(v, b_.GetInsertBlock());
  if (auto it = rows_cache_.find(key); it != rows_cache_.end()) return it->second;
  const Type& t = v->type;
  const auto& tiles = tiles_.at(v);
  const int64_t J = t.cols / 16;
  std::vector<llvm::Value*> rows;
  auto* row_t = llvm::FixedVectorType::get(b_.getInt32Ty(), 16);
  if (amx_ == 1) {
    // Through memory, by tilestored: LLVM's AMX passes keep a tile in its register across the
    // loop phis only when every user of the phi is a cast back to a tile.
    std::vector<llvm::Value*> rows(static_cast<size_t>(t.rows * J));
    llvm::Value* slot = scratch_tile(0);
    auto* vt = llvm::FixedVectorType::get(b_.getInt32Ty(), 256);
    for (size_t i = 0; i < tiles.size(); ++i) {
      COOPJIT_INTERNAL_ASSERT(tiles[i] && tiles[i]->getType() == vt, "a tile of the wrong type");
      llvm::Value* tile = b_.CreateIntrinsic(llvm::Intrinsic::x86_cast_vector_to_tile, {vt}, {tiles[i]});
      b_.CreateIntrinsic(llvm::Intrinsic::x86_tilestored64_internal, {},
                         {b_.getInt16(kTileRows), b_.getInt16(kTileBytes), slot, b_.getInt64(kTileBytes), tile});
      const int64_t ti = static_cast<int64_t>(i) / J, j = static_cast<int64_t>(i) % J;
      for (int r = 0; r < kTileRows; ++r) {
        llvm::Value* p = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), slot, uint64_t(r) * kTileBytes);
        rows[static_cast<size_t>((ti * kTileRows + r) * J + j)] =
            b_.CreateBitCast(b_.CreateAlignedLoad(row_t, p, llvm::Align(64)), vec_ty(t.scalar));
      }
    }
    return rows_cache_[key] = rows;
  }
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t j = 0; j < J; ++j) {
      std::vector<int> sel;
      for (int l = 0; l < 16; ++l) sel.push_back(static_cast<int>((r % kTileRows) * 16 + l));
      llvm::Value* x = b_.CreateShuffleVector(tiles[static_cast<size_t>((r / kTileRows) * J + j)], sel);
      rows.push_back(b_.CreateBitCast(x, vec_ty(t.scalar)));
    }
  return rows_cache_[key] = rows;
}

const std::vector<llvm::Value*>& SimdLowering::tiles_of(const Value* v) {
  if (auto it = tiles_.find(v); it != tiles_.end()) return it->second;
  auto key = std::make_pair(v, b_.GetInsertBlock());
  if (auto it = tiles_cache_.find(key); it != tiles_cache_.end()) return it->second;
  const Type& t = v->type;
  const auto& rows = mat(v);
  const int64_t J = t.cols / 16;
  auto* row_t = llvm::FixedVectorType::get(b_.getInt32Ty(), 16);
  std::vector<llvm::Value*> out;
  for (int64_t ti = 0; ti < t.rows / kTileRows; ++ti)
    for (int64_t j = 0; j < J; ++j) {
      std::vector<llvm::Value*> cur;
      for (int r = 0; r < kTileRows; ++r)
        cur.push_back(b_.CreateBitCast(rows[static_cast<size_t>((ti * kTileRows + r) * J + j)], row_t));
      if (amx_ == 1) {  // through memory, by tileloadd (see rows_of_tiles)
        llvm::Value* slot = scratch_tile(0);
        for (int r = 0; r < kTileRows; ++r)
          b_.CreateAlignedStore(cur[static_cast<size_t>(r)],
                                b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), slot, uint64_t(r) * kTileBytes),
                                llvm::Align(64));
        out.push_back(tile_load(slot, b_.getInt64(kTileBytes)));
        continue;
      }
      out.push_back(concat_vectors(b_, cur));
    }
  return tiles_cache_[key] = out;
}

}  // namespace coopjit
