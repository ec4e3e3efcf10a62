// The SIMD lowering's state and helpers, shared by its three files: simd_lower.cpp (values,
// control flow, scalars, the op dispatch), simd_memory.cpp (loads, stores, tensor addressing)
// and simd_matrix.cpp (matrix arithmetic). Private to cpp/lower/.
#pragma once

#include <functional>
#include <map>
#include <unordered_set>
#include <unordered_map>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include "core/error.h"
#include "lower/simd_lower.h"
#include "lower/tensor_addressing.h"

namespace coopjit {

using namespace ir;

/// Equal-width vectors (a power-of-two count), one after the other, as one vector.
llvm::Value* concat_vectors(llvm::IRBuilder<>& b, std::vector<llvm::Value*> parts);

class SimdLowering {
 public:
  SimdLowering(const Function& f, llvm::LLVMContext& ctx, const CpuInfo& cpu)
      : f_(f), ctx_(ctx), cpu_(cpu), mod_(std::make_unique<llvm::Module>(f.name, ctx)), b_(ctx) {
    auto it = f.attrs.find("subgroup_size");
    COOPJIT_INTERNAL_ASSERT(it != f.attrs.end(), "the function needs a subgroup_size");
    S_ = static_cast<int>(std::get<int64_t>(it->second));
    if (auto a = f.attrs.find("amx"); a != f.attrs.end()) amx_ = static_cast<int>(std::get<int64_t>(a->second));
    if (auto a = f.attrs.find("amx_feed"); a != f.attrs.end()) amx_feed_ = static_cast<int>(std::get<int64_t>(a->second));
  }

  std::unique_ptr<llvm::Module> run();

 private:
  // ---- types -------------------------------------------------------------------------------
  llvm::Type* scalar_ty(ScalarType t);
  llvm::FixedVectorType* vec_ty(ScalarType t) { return llvm::FixedVectorType::get(scalar_ty(t), S_); }
  static bool vector_layout(const Type& t) { return t.use != Use::a; }
  int chunks(const Type& t) const { return static_cast<int>((t.cols + S_ - 1) / S_); }
  // The number of LLVM values an aggregate IR value is held in.
  size_t parts(const Type& t) const;
  llvm::Align align(ScalarType t) { return llvm::Align(size_in_bytes(t)); }

  // ---- values ------------------------------------------------------------------------------
  std::vector<llvm::Value*> flat(const Value* v);
  llvm::Value* scalar(const Value* v);
  const std::vector<llvm::Value*>& mat(const Value* v);
  // Binds the values `vs` to the ir values, consuming parts from `flat` in order.
  void bind(const std::vector<Value*>& vs, const std::vector<llvm::Value*>& flat);
  std::vector<llvm::Value*> flat_all(const std::vector<Value*>& vs, size_t from = 0);
  static bool is_const(const Value* v, int64_t c);
  static int64_t const_value(const Value* v);  // v's value when it is an integer constant, else 0

  void unpack_params();

  // ---- blocks and control flow -----------------------------------------------------------------
  // Lowers the ops of a block; returns the flattened operands of its yield (if any).
  std::vector<llvm::Value*> block(const Block& blk);

  void for_loop(const Op& o);

  void if_op(const Op& o);

  // ---- scalars -----------------------------------------------------------------------------------
  llvm::Value* scalar_bin(BinOp op, ScalarType t, llvm::Value* x, llvm::Value* y);

  llvm::Value* scalar_cmp(CmpPred p, ScalarType t, llvm::Value* x, llvm::Value* y);

  // ---- matrices ----------------------------------------------------------------------------------
  llvm::Value* lanes();
  // Lanes [0, n) set: the in-matrix lanes of a chunk.
  llvm::Value* lane_mask(int n);
  llvm::GlobalVariable* zero_global(ScalarType t);

  struct Addr {
    llvm::Value *ptr, *row, *col, *sr, *sc, *rows, *cols;
    bool unit_col;
    int64_t sc_const;  // the column stride when the kernel fixes it (a constant), else 0
  };
  Addr addr(const Op& o, size_t base);

  // For chunk j of row i of a vector-layout matrix: the first element's address, the vector of
  // lane addresses (strided access only) and the mask (null when every lane is accessed).
  struct Chunk {
    llvm::Value* base;
    llvm::Value* ptrs;
    llvm::Value* mask;
  };
  llvm::Value* in_bounds(llvm::Value* r, llvm::Value* c, const Addr& a);
  Chunk chunk(const Type& t, const Addr& a, llvm::Value* i, int j, bool checked);

  llvm::Value* load_chunk(const Type& t, const Addr& a, llvm::Value* i, int j, bool checked);
  static constexpr int64_t kMaxShuffledStride = 16;  // constant strides up to this load as vectors + a pick
  llvm::Value* strided_chunk(ScalarType t, llvm::Value* base, int64_t s);
  bool segment_tile(const Op& o, const Type& t, const Addr& a, std::vector<llvm::Value*>& out);
  bool column_tile(const Op& o, const Type& t, const Addr& a, std::vector<llvm::Value*>& out);
  void store_chunk(const Type& t, const Addr& a, llvm::Value* i, int j, bool checked, llvm::Value* v,
                   bool nontemporal = false);

  void load(const Op& o);

  void store(const Op& o);

  // ---- VNNI-packed memory and the dot-product instructions (simd_vnni.cpp) ----------------------
  // Loads and stores with attr vnni (builder.h): the matrix keeps its usual parts (B's rows,
  // A's scalars), and the load also records the packed form it read (raw_): for a matrix_b, per
  // group of vnni rows and chunk, one vector of vnni * S components as the dot instructions take
  // them; for a matrix_a, per row and group, the 32-bit channel. mul_add uses the packed form
  // when it has one and interleaves the rows (packs the scalars) on the fly otherwise.
  void load_vnni(const Op& o);
  void store_vnni(const Op& o);
  // The dot-product instruction for this mul_add's types on this CPU (AVX512-BF16 vdpbf16ps,
  // AVX512-VNNI vpdpbusd), with its group size; kind none when it has none.
  enum class Dot { none, bf16, u8s8, s8u8 };
  Dot dot_kind(const Type& ta, const Type& tb, const Type& tc) const;
  std::vector<llvm::Value*> mul_add_dot(const Op& o, Dot kind);
  llvm::Value* vnni_element_ptr(const Type& t, const Addr& a, int64_t x, int64_t k);
  llvm::Value* interleave(const std::vector<llvm::Value*>& rows);
  std::unordered_map<const Value*, std::vector<llvm::Value*>> raw_;

  // ---- AMX tiles (simd_amx.cpp; functions with attr amx: 1 the tile instructions, 2 emulated) ----
  // A tile is one <256 x i32> value (16 rows of 64 bytes), as Clang holds __tile1024i: the
  // hardware form wraps each instruction in casts from and to x86_amx, which LLVM's AMX passes
  // fold away (tiles stay in tile registers across the K loop's phis). Accumulators of 4-byte
  // elements, 16-row and 16-column multiples, up to 4 tiles (tile_form) are tiles only inside
  // the loop that accumulates them (tile_carried: its phis hold tiles); every other operation,
  // and every other phi, gets them as rows (mat(), converted by tilestored in the block that
  // needs them). LLVM's phi folding fails on webs of phis that reach past the K loop, and a tile
  // then goes through memory at each step. A matrix_a / matrix_b load whose only uses are tile
  // mul_adds (find_tile_loads) loads tiles: tileloadd rows of 64 bytes, A's rows (K contiguous)
  // and B's VNNI rows (pairs / quads of K per column); an accumulator a tile loop continues
  // (a partial sum loaded whole from unit-column memory) loads tiles too, and a matrix held in
  // tiles stored whole to unit-column memory is stored by tilestored.
  int amx_ = 0;
  // GemmPlan::amx_feed: 1 or more defers each operand tile's tileloadd of a load used by one
  // mul_add to just before its first dot product (mul_add_tiles), so that a tile register is
  // reloaded as soon as its last reader has issued.
  int amx_feed_ = 0;
  // The launch grid of a KernelBuilder kernel on the CPU: the ints slot after the parameters'
  // holds the work-group id (dimension 0), the next one the number of work-groups.
  llvm::Value* grid_ints_ = nullptr;
  int grid_base_ = 0;
  bool tile_form(const Type& t) const;
  // Per value a for loop carries: whether it is carried in tiles (a tile-form accumulator the
  // body yields from a tile mul_add).
  std::vector<bool> tile_carried(const Op& for_op) const;
  const std::vector<bool>* yield_tiles_ = nullptr;  // for the next block() lowered: its yield's tile flags
  void find_tile_loads();
  bool is_tile_load(const Op& o) const { return tile_loads_.count(o.result()) != 0; }
  bool tile_mul_add(const Op& o) const;
  const std::vector<llvm::Value*>& tiles_of(const Value* v);     // tile form (converting rows)
  const std::vector<llvm::Value*>& rows_of_tiles(const Value* v);  // rows (converting tiles)
  void load_tiles(const Op& o);
  bool defer_tiles(const Op& o);
  void demote_lines(const Op& o, int64_t bytes);  // CLDEMOTE of a store's lines (simd_memory.cpp)
  void prefetch_rows(llvm::Value* p, llvm::Value* stride, int64_t ahead, int locality = 3);
  llvm::Value* operand_tile(const Value* v, size_t i);  // a tile of an operand load (loads a deferred one)
  void mul_add_tiles(const Op& o);
  bool splat_tiles(const Op& o);
  llvm::Value* tile_load(llvm::Value* ptr, llvm::Value* stride_bytes);
  void tile_store(llvm::Value* ptr, llvm::Value* stride_bytes, llvm::Value* tile);
  // A store of a matrix held in tiles to unit-column memory, unchecked: tilestored (false: not one).
  bool store_tiles(const Op& o);
  llvm::Value* tile_dp(int kind, llvm::Value* c, llvm::Value* a, llvm::Value* b);
  llvm::Value* scratch_tile(int i);  // a 1 KiB, 64-byte aligned stack slot (entry block)
  std::unordered_set<const Value*> tile_loads_;
  std::unordered_set<const Value*> single_use_;  // operand tile loads with one use (deferrable)
  std::unordered_map<const Value*, std::vector<llvm::Value*>> tiles_;
  // Deferred operand tiles (amx_feed_): per load, each tile's address and row stride; its entry
  // of tiles_ stays null until mul_add_tiles loads it.
  std::unordered_map<const Value*, std::vector<std::pair<llvm::Value*, llvm::Value*>>> deferred_;
  // Conversions, per value and block: a conversion made in one branch does not dominate another.
  std::map<std::pair<const Value*, llvm::BasicBlock*>, std::vector<llvm::Value*>> rows_cache_, tiles_cache_;
  llvm::Value* scratch_tiles_[3] = {nullptr, nullptr, nullptr};

  // ---- matrices held in memory -----------------------------------------------------------------
  // A matrix of more than kMemoryParts vectors lives in a stack slot, and the operations that
  // support it (load, store, load_tensor, store_tensor) walk it with a runtime loop over rows:
  // as SSA values, thousands of vectors and their memory operations in one block make LLVM's
  // compile time grow quadratically. Other operations read it back into values (mat()).
  static constexpr size_t kMemoryParts = 64;
  bool in_memory(const Type& t) const { return vector_layout(t) && parts(t) > kMemoryParts; }
  llvm::ArrayType* slots_ty(const Type& t);
  llvm::Value* new_slots(const Type& t);
  llvm::Value* slot(const Type& t, llvm::Value* slots, llvm::Value* i, int j);
  // The stack slot holding v (stored there from its values when it has none yet).
  llvm::Value* mem_of(const Value* v);
  void copy_slots(const Type& t, llvm::Value* dst, llvm::Value* src);
  // for (i = 0; i < rows; ++i) body(i), kept a loop (unrolling a long body multiplies compile time).
  void row_loop(int64_t rows, const std::function<void(llvm::Value*)>& body);

  std::vector<llvm::Value*> splat(const Op& o);
  // The operation set beyond GEMM (simd_matrix.cpp): reduce, per-element, convert, transpose,
  // get/set, sum_accumulate, outer_product, accumulate, vector x matrix, vector load/store.
  void matrix_op(const Op& o);
  void fp8_atomic_add(ScalarType t, llvm::Value* p, llvm::Value* v);  // accumulate of fp8 (simd_matrix.cpp)
  std::vector<llvm::Value*> elems(const Value* v);  // rows * cols scalars, row-major
  std::vector<llvm::Value*> from_elems(const Type& t, const std::vector<llvm::Value*>& e);
  llvm::Value* convert_value(llvm::Value* x, ScalarType from, ScalarType to);
  llvm::Value* to_f32_sticky(llvm::Value* x, ScalarType from);
  llvm::Value* unary_value(UnOp u, ScalarType t, llvm::Value* x);
  llvm::Value* combine(const Op& o, ScalarType t, llvm::Value* x, llvm::Value* y);
  // mat_reduce along rows as a tree of vector ops where the combine allows it (simd_matrix.cpp).
  bool row_tree(const Op& o, const Type& m, const Type& r, std::vector<llvm::Value*>& out);
  bool segment_rows(const Op& o, const Type& m, const Type& r, std::vector<llvm::Value*>& out);
  // Two vectors of 2^level rows of S_ >> level lanes each -> one of twice the rows, half the lanes
  // (x's rows, then y's), combined by op: a level of row_tree's and segment_rows' trees.
  llvm::Value* halve_rows(BinOp op, ScalarType t, llvm::Value* x, llvm::Value* y, int level);
  // One more row vector into a tree kept as a binary counter (a vector a level: few live at a
  // time): equal levels are halved together as they meet.
  void push_row(std::vector<std::pair<int, llvm::Value*>>& stack, llvm::Value* acc, BinOp op, ScalarType t);
  llvm::Value* fp8_to_f32(llvm::Value* bits, ScalarType from);
  llvm::Value* f32_to_fp8(llvm::Value* x, ScalarType to);
  llvm::Value* f32_to_bf16(llvm::Value* x);
  llvm::Value* lower_region(const Block& region, const std::vector<llvm::Value*>& args);
  std::vector<llvm::Value*> per_element(const Op& o);

  llvm::Value* fma(ScalarType t, llvm::Value* x, llvm::Value* y, llvm::Value* acc);

  std::vector<llvm::Value*> mul_add(const Op& o);

  std::vector<llvm::Value*> elementwise(const Op& o);

  // ---- tensor addressing -------------------------------------------------------------------------
  // A matrix as rows of S-lane vectors, whatever its use (use a is held as scalars).
  std::vector<llvm::Value*> as_vectors(const Type& t, const std::vector<llvm::Value*>& p);
  std::vector<llvm::Value*> from_vectors(const Type& t, const std::vector<llvm::Value*>& v);

  llvm::Value* convert_clamp_value(llvm::Value* d, ScalarType t);

  // coopmatrix.load_tensor / store_tensor: a runtime loop over the matrix rows (the address
  // calculation is long: unrolling it over every row would bloat the code), the row's chunks
  // unrolled, the matrix kept in a stack slot in between.
  void tensor_access(const Op& o);

  // ---- groupshared arrays (simd_groupshared.cpp) --------------------------------------------------
  void shared_alloc(const Op& o);
  // A matrix load / store between a groupshared array and a matrix of another component type,
  // converted element by element; false (nothing emitted) for any other op.
  bool converting_shared_access(const Op& o);

  void op(const Op& o);

  const Function& f_;
  llvm::LLVMContext& ctx_;
  const CpuInfo& cpu_;  // the CPU the code is for (the host, or cross_compile's)
  std::unique_ptr<llvm::Module> mod_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  int S_ = 1;
  std::unordered_map<const Value*, llvm::Value*> scalars_;
  std::unordered_map<const Value*, std::vector<llvm::Value*>> mats_;  // aggregates as values
  std::unordered_map<const Value*, llvm::Value*> mems_;                 // large matrices in memory
  // Segment tiles (segment_tile): each chunk's n whole vectors of X, for a column reduce that
  // combines them row by row instead of through the picks.
  std::unordered_map<const Value*, std::vector<std::vector<llvm::Value*>>> segs_;
  llvm::Value* lane_mask_ = nullptr;  // inside a decode function: scalars are vectors of lanes

  // A scalar as the current mode needs it: itself, or splat over the lanes in a decode function.
  llvm::Value* lanev(llvm::Value* x);
};

}  // namespace coopjit
