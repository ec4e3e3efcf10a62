// The SIMT lowering of coopmatrix loads and stores as 2-D block loads and stores
// (SPV_INTEL_2d_block_io: OpSubgroup2DBlockLoadINTEL, OpSubgroup2DBlockLoadTransformINTEL,
// OpSubgroup2DBlockStoreINTEL, OpSubgroup2DBlockPrefetchINTEL) at subgroup size 16.
//
// A block of W = 16 elements by H rows of a row-major 2-D region gives lane p the element in
// column p of each block row (the extension's "Mapping Block Data to Invocations"; with the
// VNNI transform, lane p gets column p of 2 or 4 consecutive rows packed into 32 bits, the lower
// row in the lower bits). A coopmatrix whose lanes run down its rows (I == S) with unit row
// stride is such a region seen from the side: the matrix's rows are the region's columns, its
// columns the region's rows (pitch = column stride). So every 16-row slab of the matrix is one
// block per up to 32 columns (8 for stores), and matrix_a's VNNI channels (omega = 2, 4) are
// exactly what the transform packs.
//
// The extension's restrictions are checked at run time, once per access, uniformly: base
// address 64-byte aligned, region width 64 bytes to 2^24, height 1 to 2^24 rows, pitch a
// multiple of 16 bytes (the SPIR-V extension asks 8; Intel's OpenCL cl_intel_subgroup_2d_block_io
// and the Xe-HPC block messages want 16) and no smaller than the width, the column coordinate a
// multiple of 4 / element size. Otherwise the access takes the other path (1-D block or per-lane
// accesses). Blocks reaching past the region read zero and drop their stores (the extension's
// out-of-bounds rule), which is the IR's bounds rule: checked accesses take this path too.
// Mode 2 ("emulated") computes each block from the same operands with per-lane accesses, so the
// blocks' shapes, coordinates and packing run (and are tested) on devices without the extension.
#include "lower/simt_lowering.h"

namespace coopjit {

namespace {
constexpr int kLoadRows = 32, kStoreRows = 8;  // Xe-HPC's 2-D block messages: loads 32 rows, stores 8
constexpr int64_t kLimit = int64_t(1) << 24;

const char* kLoad = "_Z32__spirv_Subgroup2DBlockLoadINTELiiiiPU3AS1KviiiDv2_iPv";
const char* kLoadTransform = "_Z41__spirv_Subgroup2DBlockLoadTransformINTELiiiiPU3AS1KviiiDv2_iPv";
const char* kStore = "_Z33__spirv_Subgroup2DBlockStoreINTELiiiiPKvPU3AS1viiiDv2_i";
const char* kPrefetch = "_Z36__spirv_Subgroup2DBlockPrefetchINTELiiiiPU3AS1KviiiDv2_i";
}  // namespace

std::optional<std::vector<SimtLowering::Block2d>> SimtLowering::block2d_plan(const Type& t, const LaneMap& m,
                                                                           const Access& a, bool store) {
  const int64_t e = size_in_bytes(t.scalar);
  if (block2d_mode_ == 0 || S_ != 16 || m.I != S_ || (e != 1 && e != 2 && e != 4) || !is_index_const(a.sr_ir, 1))
    return std::nullopt;
  const bool transform = m.chan > 1;
  if (transform && (store || m.chan * e != 4)) return std::nullopt;
  // Components by slab (row offset) and column offset; each slab must cover a range of columns once.
  std::map<int64_t, std::map<int64_t, int64_t>> slabs;
  for (int64_t n = 0; n < m.comps(); ++n) {
    if (m.inside(n) != 1 || m.row_off[n] % S_ != 0) return std::nullopt;
    if (!slabs[m.row_off[n]].emplace(m.col_off[n], n).second) return std::nullopt;
  }
  std::vector<Block2d> blocks;
  const int max_rows = store ? kStoreRows : kLoadRows;
  for (const auto& [ro, cols] : slabs) {
    const int64_t lo = cols.begin()->first, count = static_cast<int64_t>(cols.size());
    if (cols.rbegin()->first != lo + count - 1) return std::nullopt;
    if (transform && (lo % m.chan != 0 || count % m.chan != 0)) return std::nullopt;
    for (int64_t h0 = 0; h0 < count; h0 += max_rows) {
      Block2d b;
      b.row = ro;
      b.col = lo + h0;
      b.rows = static_cast<int>(std::min<int64_t>(max_rows, count - h0));
      b.transform = transform ? static_cast<int>(m.chan) : 1;
      for (int h = 0; h < b.rows; ++h) b.comps.push_back(cols.at(b.col + h));
      blocks.push_back(std::move(b));
    }
  }
  return blocks;
}

// The region: the matrix's rows are the region's columns (x), its columns the region's rows (y).
SimtLowering::Region2d SimtLowering::region2d(const Type& t, const Access& a) {
  llvm::Type* i32 = b_.getInt32Ty();
  const int64_t e = size_in_bytes(t.scalar);
  llvm::Value* width = b_.CreateMul(a.rows, b_.getInt64(e));
  llvm::Value* pitch = b_.CreateMul(a.sc, b_.getInt64(e));
  llvm::Value* addr = b_.CreatePtrToInt(a.ptr, b_.getInt64Ty());
  auto in = [&](llvm::Value* v, int64_t lo, int64_t hi) {
    return b_.CreateAnd(b_.CreateICmpSGE(v, b_.getInt64(lo)), b_.CreateICmpSLE(v, b_.getInt64(hi)));
  };
  llvm::Value* ok = b_.CreateICmpEQ(b_.CreateAnd(addr, b_.getInt64(63)), b_.getInt64(0));
  ok = b_.CreateAnd(ok, in(width, 64, kLimit));
  ok = b_.CreateAnd(ok, in(a.cols, 1, kLimit));
  ok = b_.CreateAnd(ok, in(pitch, 16, kLimit));
  ok = b_.CreateAnd(ok, b_.CreateICmpEQ(b_.CreateAnd(pitch, b_.getInt64(15)), b_.getInt64(0)));
  ok = b_.CreateAnd(ok, b_.CreateICmpSGE(pitch, width));
  ok = b_.CreateAnd(ok, in(a.row, 0, kLimit - 64));
  ok = b_.CreateAnd(ok, in(a.col, 0, kLimit - 64));
  if (e < 4) ok = b_.CreateAnd(ok, b_.CreateICmpEQ(b_.CreateAnd(a.row, b_.getInt64(4 / e - 1)), b_.getInt64(0)));
  return {ok, a.ptr, b_.CreateTrunc(width, i32), b_.CreateTrunc(a.cols, i32), b_.CreateTrunc(pitch, i32), a.row, a.col, e};
}

// Per-lane storage (Function storage class) for a block: an array in the entry block.
llvm::AllocaInst* SimtLowering::entry_alloca(llvm::Type* t, int64_t n) {
  llvm::BasicBlock& entry = fn_->getEntryBlock();
  llvm::IRBuilder<> eb(&entry, entry.getFirstInsertionPt());
  return eb.CreateAlloca(llvm::ArrayType::get(t, static_cast<uint64_t>(n)));
}

llvm::Value* SimtLowering::slot(llvm::AllocaInst* buf, int64_t i) {
  return b_.CreateInBoundsGEP(buf->getAllocatedType(), buf, {b_.getInt32(0), b_.getInt32(static_cast<uint32_t>(i))});
}

llvm::Value* SimtLowering::coord2d(const Region2d& r, const Block2d& b, int64_t dx, int64_t dy) {
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Value* x = b_.CreateTrunc(b_.CreateAdd(r.x, b_.getInt64(b.row + dx)), i32);
  llvm::Value* y = b_.CreateTrunc(b_.CreateAdd(r.y, b_.getInt64(b.col + dy)), i32);
  llvm::Value* v = llvm::PoisonValue::get(llvm::FixedVectorType::get(i32, 2));
  return b_.CreateInsertElement(b_.CreateInsertElement(v, x, b_.getInt32(0)), y, b_.getInt32(1));
}

// Lane p's element (x + p, y + h) of the region: its address and whether it is inside.
std::pair<llvm::Value*, llvm::Value*> SimtLowering::element2d(const Region2d& r, const Block2d& b, int64_t h) {
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Value* x = b_.CreateAdd(b_.CreateAdd(r.x, b_.getInt64(b.row)), lane64());
  llvm::Value* y = b_.CreateAdd(r.y, b_.getInt64(b.col + h));
  llvm::Value* inside = b_.CreateAnd(b_.CreateICmpULT(b_.CreateMul(x, b_.getInt64(r.elem)), b_.CreateZExt(r.width, i64)),
                                     b_.CreateICmpULT(y, b_.CreateZExt(r.height, i64)));
  llvm::Value* off = b_.CreateAdd(b_.CreateMul(y, b_.CreateZExt(r.pitch, i64)), b_.CreateMul(x, b_.getInt64(r.elem)));
  return {b_.CreateGEP(b_.getInt8Ty(), r.base, off), inside};
}

std::vector<llvm::Value*> SimtLowering::block2d_load(const Type& t, const LaneMap& m, const Region2d& r,
                                                     const std::vector<Block2d>& blocks, const Op& o) {
  llvm::Type* ty = scalar_ty(t.scalar);
  llvm::Type* ety = b_.getIntNTy(static_cast<unsigned>(r.elem * 8));
  llvm::Type* i32 = b_.getInt32Ty();
  std::vector<llvm::Value*> out(m.comps());
  for (const Block2d& b : blocks) {
    const int words = b.rows / b.transform;  // per lane: one element per row, or one word per omega rows
    llvm::Type* wty = b.transform > 1 ? i32 : ety;
    llvm::AllocaInst* buf = entry_alloca(wty, words);
    if (block2d_mode_ == 2) {
      for (int w = 0; w < words; ++w) {
        llvm::Value* word = nullptr;
        for (int t2 = 0; t2 < b.transform; ++t2) {
          auto [ptr, inside] = element2d(r, b, int64_t(w) * b.transform + t2);
          llvm::Value* v = guarded_load(inside, ety, ptr, llvm::Align(r.elem));
          if (b.transform > 1) {
            v = b_.CreateShl(b_.CreateZExt(v, i32), t2 * r.elem * 8);
            word = word ? b_.CreateOr(word, v) : v;
          } else {
            word = v;
          }
        }
        b_.CreateStore(word, slot(buf, w));
      }
    } else {
      builtin(b.transform > 1 ? kLoadTransform : kLoad, b_.getVoidTy(),
              {b_.getInt32(r.elem), b_.getInt32(S_), b_.getInt32(b.rows), b_.getInt32(1), r.base, r.width, r.height,
               r.pitch, coord2d(r, b), buf},
              true);
    }
    for (int h = 0; h < b.rows; ++h) {
      llvm::Value* word = b_.CreateLoad(wty, slot(buf, h / b.transform));
      if (b.transform > 1) word = b_.CreateTrunc(b_.CreateLShr(word, (h % b.transform) * r.elem * 8), ety);
      out[b.comps[h]] = ty == ety ? word : b_.CreateBitCast(word, ty);
    }
  }
  // A hint for the next K step (the recipe names it): the same blocks further on.
  if (block2d_mode_ == 1 && o.attrs.count("prefetch_row") && o.attrs.count("prefetch_col")) {
    const int64_t dx = o.int_attr("prefetch_row"), dy = o.int_attr("prefetch_col");
    for (const Block2d& b : blocks)
      builtin(kPrefetch, b_.getVoidTy(),
              {b_.getInt32(r.elem), b_.getInt32(S_), b_.getInt32(b.rows), b_.getInt32(1), r.base, r.width, r.height,
               r.pitch, coord2d(r, b, dx, dy)},
              true);
  }
  return out;
}

void SimtLowering::block2d_store(const Type& t, const Region2d& r, const std::vector<Block2d>& blocks,
                                 const std::vector<llvm::Value*>& vals) {
  llvm::Type* ety = b_.getIntNTy(static_cast<unsigned>(r.elem * 8));
  (void)t;
  for (const Block2d& b : blocks) {
    llvm::AllocaInst* buf = entry_alloca(ety, b.rows);
    for (int h = 0; h < b.rows; ++h) {
      llvm::Value* v = vals[b.comps[h]];
      b_.CreateStore(v->getType() == ety ? v : b_.CreateBitCast(v, ety), slot(buf, h));
    }
    if (block2d_mode_ == 2) {
      for (int h = 0; h < b.rows; ++h) {
        auto [ptr, inside] = element2d(r, b, h);
        llvm::Value* v = b_.CreateLoad(ety, slot(buf, h));
        llvm::Value* p = ptr;  // a lambda captures no structured binding before C++20
        guarded(inside, [&] { b_.CreateAlignedStore(v, p, llvm::Align(r.elem)); });
      }
    } else {
      builtin(kStore, b_.getVoidTy(),
              {b_.getInt32(r.elem), b_.getInt32(S_), b_.getInt32(b.rows), b_.getInt32(1), buf, r.base, r.width,
               r.height, r.pitch, coord2d(r, b)},
              true);
    }
  }
}

}  // namespace coopjit
