// The SIMT lowering's state and helpers, shared by its files: simt_lower.cpp (the kernel, values,
// control flow, the op dispatch), simt_scalar.cpp (scalar arithmetic and conversions),
// simt_lanes.cpp (where components live and how they move between lanes), simt_memory.cpp
// (loads and stores) and simt_matrix.cpp (matrix arithmetic, reductions, use conversions).
// Private to cpp/lower/.
#pragma once

#include <functional>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>

#include "core/error.h"
#include "lower/simt_lower.h"
#include "lower/simt_target.h"
#include "lower/tensor_addressing.h"

namespace coopjit {

using namespace ir;

/// Where the components of a subgroup-scope matrix live, from layout::CoopMatrixLayout: lane p's
/// component n = v * chan + c (slot v, VNNI channel c) holds element
///   (p % I + row_off[n], (p / I) * chan + col_off[n])
/// when that is inside the M x N matrix, and zero (padding) otherwise. With I == S every
/// component of every lane is inside; with I < S a component is inside on the lanes whose column
/// is below N.
struct LaneMap {
  int64_t M = 0, N = 0, S = 1, I = 1, chan = 1, V = 0;
  std::vector<int64_t> row_off, col_off;

  static LaneMap of(const Type& t, int S);
  int64_t comps() const { return V * chan; }
  /// Element (row, col) of lane p's component n, or (-1, -1) for padding.
  std::pair<int64_t, int64_t> at(int64_t p, int64_t n) const;
  /// The lane and component holding element (row, col).
  std::pair<int64_t, int64_t> owner(int64_t row, int64_t col) const;
  /// Whether component n is inside the matrix: 0 on no lane, 1 on every lane, 2 on some.
  int inside(int64_t n) const;
  bool same_as(const LaneMap& o) const {
    return M == o.M && N == o.N && S == o.S && I == o.I && chan == o.chan && V == o.V && row_off == o.row_off &&
           col_off == o.col_off;
  }
};

/// Whether v is an IR constant equal to c.
bool is_index_const(const Value* v, int64_t c);
/// Whether a scalar is known to differ between the lanes of a subgroup (simt_matrix.cpp).
bool lane_varying(const Value* v, int depth = 0);
/// A coopmatrix of workgroup scope (simt_workgroup.cpp).
bool is_workgroup_matrix(const Type& t);

class SimtLowering {
 public:
  SimtLowering(const Function& f, llvm::LLVMContext& ctx, const SimtTarget& target);
  std::unique_ptr<llvm::Module> run();

 private:
  // ---- types (simt_lower.cpp) ---------------------------------------------------------------
  llvm::Type* scalar_ty(ScalarType t);     // the per-work-item type of a component or scalar
  llvm::Type* param_ty(const Type& t);     // the kernel parameter type
  llvm::PointerType* global_ptr() { return llvm::PointerType::get(ctx_, 1); }
  llvm::Align align(ScalarType t) { return llvm::Align(size_in_bytes(t)); }
  LaneMap lanes_of(const Type& t);
  void require_subgroup(const Op& o, const Type& t);

  // ---- values -------------------------------------------------------------------------------
  llvm::Value* scalar(const Value* v);
  const std::vector<llvm::Value*>& mat(const Value* v);
  std::vector<llvm::Value*> flat(const Value* v);
  std::vector<llvm::Value*> flat_all(const std::vector<Value*>& vs, size_t from = 0);
  void bind(const std::vector<Value*>& vs, const std::vector<llvm::Value*>& flat);
  size_t parts(const Type& t);

  // ---- control flow and scalars (simt_lower.cpp) ----------------------------------------------
  std::vector<llvm::Value*> block(const Block& blk);
  void for_loop(const Op& o);
  void if_op(const Op& o);
  void op(const Op& o);
  llvm::Value* work_id(const Op& o);
  void flag_op(const Op& o);
  llvm::Value* scalar_bin(BinOp op, ScalarType t, llvm::Value* x, llvm::Value* y);
  llvm::Value* scalar_cmp(CmpPred p, ScalarType t, llvm::Value* x, llvm::Value* y);
  llvm::Value* unary_value(UnOp u, ScalarType t, llvm::Value* x);
  llvm::Value* convert_value(llvm::Value* x, ScalarType from, ScalarType to);
  llvm::Value* fp8_to_f32(llvm::Value* bits, ScalarType from);
  llvm::Value* f32_to_fp8(llvm::Value* x, ScalarType to);
  llvm::Value* zero(ScalarType t) { return llvm::Constant::getNullValue(scalar_ty(t)); }
  /// Calls an OpenCL / SPIR-V built-in function (declared on first use): Intel-only paths.
  llvm::Value* builtin(const std::string& name, llvm::Type* ret, const std::vector<llvm::Value*>& args,
                       bool convergent = false);
  /// The scalar function of a region (combine, per-element) on the given arguments.
  llvm::Value* lower_region(const Block& region, const std::vector<llvm::Value*>& args);

  // ---- lanes (simt_lanes.cpp) -----------------------------------------------------------------
  llvm::Value* lane() { return lane_; }      // the lane in the subgroup (SimtTarget::lane_id), i32
  llvm::Value* lane64() { return lane64_; }  // the same as i64
  /// Lane p's row and column of component n (i64, inside the matrix or not) and whether the
  /// component is inside (i1 constant or value).
  llvm::Value* row_of(const LaneMap& m, int64_t n);
  llvm::Value* col_of(const LaneMap& m, int64_t n);
  llvm::Value* inside(const LaneMap& m, int64_t n);
  /// True on the lanes whose bit is set in `mask` (bit p: lane p).
  llvm::Value* lane_in(uint64_t mask);
  /// Value x of lane src[p] on each lane p (src[p] < 0: any). Recognizes the identity, a
  /// broadcast and an xor pattern; otherwise a shuffle with the source lanes from a table.
  llvm::Value* move(llvm::Value* x, const std::vector<int>& src);
  /// On each lane p, component slot[p] of lane src[p] of `vals` (slot[p] < 0: zero, any lane).
  /// One move per distinct slot, selected per lane.
  llvm::Value* gather(const std::vector<llvm::Value*>& vals, const std::vector<int>& src, const std::vector<int>& slot);
  /// The components of layout `dst` gathered from per-lane registers `d` of another order (a tensor
  /// core's fragments): owner(row, col) is the lane and the index in d holding element (row, col);
  /// components outside the matrix on every lane are zero of `s` (simt_mma_pipeline.cpp, frag_layout).
  std::vector<llvm::Value*> gather_from(const std::vector<llvm::Value*>& d, const LaneMap& dst, ScalarType s,
                                        const std::function<std::pair<int, int>(int64_t, int64_t)>& owner);
  llvm::Value* shuffle(llvm::Value* x, llvm::Value* src_lane);
  llvm::Value* shuffle_xor(llvm::Value* x, int mask);
  llvm::Value* broadcast(llvm::Value* x, int src_lane);
  /// The components of matrix `from` (map src) rearranged into map dst: dst component n of lane
  /// p gets the source element at dst.at(p, n) (zero for padding); used for use and shape-keeping
  /// conversions, transposes (transpose=true reads element (col, row)).
  std::vector<llvm::Value*> relayout(const std::vector<llvm::Value*>& from, const LaneMap& src, const LaneMap& dst,
                                     bool transpose = false);

  // ---- memory (simt_memory.cpp) ---------------------------------------------------------------
  struct Access {
    llvm::Value *ptr, *row, *col, *sr, *sc, *rows, *cols;
    const Value* sc_ir;  // the column stride as IR value (unit stride detection)
    const Value* sr_ir;
  };
  Access access(const Op& o, size_t base);
  void load(const Op& o);
  std::vector<llvm::Value*> thread_load(const Type& t, const Access& a, bool checked);
  void store(const Op& o);
  /// Runs body() only where cond holds (cond a constant: no branch).
  void guarded(llvm::Value* cond, const std::function<void()>& body);
  llvm::Value* guarded_load(llvm::Value* cond, llvm::Type* ty, llvm::Value* ptr, llvm::Align a);
  bool block_io(const Type& t, const LaneMap& m, const Access& a, bool checked);
  void load_blocks(const Type& t, const LaneMap& m, const Access& a, std::vector<llvm::Value*>& out);
  std::vector<llvm::Value*> lane_loads(const Type& t, const LaneMap& m, const Access& a, bool checked);
  std::vector<llvm::Value*> channel_loads(const Type& t, const LaneMap& m, const Access& a);
  /// The components per vector load when each lane's components are runs of a row (I == S,
  /// unit column stride, unchecked): a power of two of at most 16 bytes dividing every run's
  /// first column and length; 1 when there is no such path.
  int64_t vector_width(const Type& t, const LaneMap& m, const Access& a, bool checked);
  std::vector<llvm::Value*> vector_loads(const Type& t, const LaneMap& m, const Access& a, int64_t w);
  std::vector<llvm::Value*> element_loads(const Type& t, const LaneMap& m, const Access& a, bool checked);
  void lane_stores(const Type& t, const LaneMap& m, const Access& a, bool checked, const std::vector<llvm::Value*>& vals);
  void store_blocks(const Type& t, const LaneMap& m, const Access& a, const std::vector<llvm::Value*>& vals);
  void accumulate(const Op& o);
  /// *ptr += v atomically in component type t (any type; simt_memory.cpp says how).
  void atomic_add(ScalarType t, llvm::Value* ptr, llvm::Value* v);
  void cas_loop(llvm::Value* ptr, llvm::Type* ity, const std::function<llvm::Value*(llvm::Value*)>& update);
  void vector_access(const Op& o);
  /// coopmatrix.load_tensor / store_tensor: each component's element through the layout and view
  /// (tensor_addressing.h, on scalars), its decode function (if any) where the access is kept.
  void tensor_access(const Op& o);
  struct TensorOp {  // the operands of a load_tensor / store_tensor, lowered
    bool load = false, has_view = false;
    const Value* matrix = nullptr;  // the object (load) or the stored matrix
    llvm::Value *ptr = nullptr, *extent = nullptr, *clamp = nullptr;  // clamp: the clamp value (loads)
    LayoutParts layout;
    ViewParts view;
  };
  TensorOp tensor_op(const Op& o);
  /// Matrix element (row, col), where `in` holds: a load's new value (old: the object's), or the
  /// store of `old` (nullptr returned).
  llvm::Value* tensor_element_access(const Op& o, const TensorOp& t, llvm::Value* row, llvm::Value* col,
                                     llvm::Value* in, llvm::Value* old);

  // ---- 2-D block I/O (simt_block2d.cpp) --------------------------------------------------------
  struct Block2d {       // one block: matrix rows row..row+15 (the region's columns), columns col..col+rows-1
    int64_t row = 0, col = 0;
    int rows = 0;        // block height (the region's rows)
    int transform = 1;   // VNNI: rows packed per 32-bit word (1: none)
    std::vector<int64_t> comps;  // the component of block row h
  };
  struct Region2d {      // the extension's operands; ok: its restrictions hold (uniform)
    llvm::Value *ok, *base, *width, *height, *pitch, *x, *y;
    int64_t elem;
  };
  std::optional<std::vector<Block2d>> block2d_plan(const Type& t, const LaneMap& m, const Access& a, bool store);
  Region2d region2d(const Type& t, const Access& a);
  llvm::AllocaInst* entry_alloca(llvm::Type* t, int64_t n);
  llvm::Value* slot(llvm::AllocaInst* buf, int64_t i);
  llvm::Value* coord2d(const Region2d& r, const Block2d& b, int64_t dx = 0, int64_t dy = 0);
  std::pair<llvm::Value*, llvm::Value*> element2d(const Region2d& r, const Block2d& b, int64_t h);
  std::vector<llvm::Value*> block2d_load(const Type& t, const LaneMap& m, const Region2d& r,
                                         const std::vector<Block2d>& blocks, const Op& o);
  void block2d_store(const Type& t, const Region2d& r, const std::vector<Block2d>& blocks,
                     const std::vector<llvm::Value*>& vals);
  /// fast() where cond holds, else slow(); their values merged (one uniform branch).
  std::vector<llvm::Value*> either_path(llvm::Value* cond, const std::function<std::vector<llvm::Value*>()>& fast,
                                        const std::function<std::vector<llvm::Value*>()>& slow, const char* name);

  // ---- workgroup-scope matrices (simt_workgroup.cpp) -----------------------------------------
  // A workgroup-scope matrix value is one pointer (mats_: a single part): its row-major buffer
  // in work-group shared memory.
  void wg_setup();                                   // wg_tid_, when the kernel has such matrices
  llvm::Value* wg_buffer(const Type& t);             // a new buffer for a matrix of type t
  /// body(e) for the elements e = wg_tid_, wg_tid_ + W, ... below count (W: work-items a group).
  void wg_each(int64_t count, const std::function<void(llvm::Value*)>& body);
  llvm::Value* wg_get(llvm::Value* buf, ScalarType t, llvm::Value* e);
  void wg_set(llvm::Value* buf, ScalarType t, llvm::Value* e, llvm::Value* v);
  /// The elements each work-item holds of a matrix of type t (HLSL's Length): ceil(M N / W).
  int64_t wg_slots(const Type& t) const;
  /// The values `vals` (flat, of `results`) with each workgroup-scope matrix copied into its own
  /// buffer in `carriers` (made on the first call): what loops and branches carry.
  std::vector<llvm::Value*> wg_carry(const std::vector<Value*>& results, const std::vector<llvm::Value*>& vals,
                                     std::vector<llvm::Value*>& carriers);
  void workgroup_op(const Op& o);
  // Shared memory the workgroup-scope matrices and groupshared arrays of one kernel may use:
  // 32 KiB, OpenCL's least CL_DEVICE_LOCAL_MEM_SIZE and below CUDA's 48 KiB of static shared memory.
  static constexpr int64_t kWorkgroupBytes = 32 * 1024;
  llvm::Value* wg_tid_ = nullptr;  // the work-item in the work-group (i64)
  int64_t wg_bytes_ = 0;           // shared memory the buffers take

  // ---- groupshared arrays (simt_groupshared.cpp) --------------------------------------------------
  void shared_alloc(const Op& o);
  /// A subgroup-scope matrix load / store addressing a groupshared array, converting elements.
  void shared_access(const Op& o);

  // ---- DPAS (simt_dpas.cpp) ---------------------------------------------------------------------
  struct DpasShape {
    int kdim = 16, bits = 16, m = 8;  // K of one instruction, bits of an input, M (columns of C per call)
    uint32_t flags = 0;               // Matrix Multiply Accumulate Operands
  };
  std::optional<DpasShape> dpas_shape(const Type& ta, const Type& tb, const Type& tc) const;
  /// mul_add as DPAS instructions when the operands' layouts allow (true), into C.
  bool dpas_mul_add(const Op& o, std::vector<llvm::Value*>& C);
  llvm::Value* dpas_emulated(const DpasShape& d, llvm::Value* a, llvm::Value* b, llvm::Value* c);

  // ---- tensor cores (simt_mma.cpp) ----------------------------------------------------------
  /// mul_add as mma.sync m16n8k16 (bf16 / f16 -> f32) when the types and shapes allow (true), into C.
  bool mma_mul_add(const Op& o, std::vector<llvm::Value*>& C);
  /// A K loop of load A, load B, mul_add with attribute mma_pipeline as the work-group's
  /// cp.async / ldmatrix / mma.sync pipeline (simt_mma_pipeline.cpp); false: not that loop.
  bool mma_pipeline(const Op& o);
  /// The same loop with attribute wgmma as a Hopper warpgroup pipeline (simt_wgmma.cpp): cp.async
  /// (or, with attribute tma, TMA: simt_tma.cpp) staging into the 128-byte swizzled layout of
  /// wgmma's matrix descriptors, wgmma.mma_async.
  bool wgmma_pipeline(const Op& o);
  /// The K loop of the wgmma pipeline fed by the Tensor Memory Accelerator (simt_tma.cpp).
  struct TmaLoop {
    llvm::Value *lo, *m_wg, *n_wg, *nk;  // K start, the work-group's first row / column, K steps (i64)
    llvm::Value *base, *tid;             // the stages' shared-window address, the work-item (i32)
    int64_t stage_bytes, stages, MT, NT, KB, b_offset, box_a, box_b;
    bool a_k, b_k;                       // the operand is K-contiguous
  };
  /// Initializes the S stages' mbarriers at `bars` (full[s] at bars + 8 s, one arrival; empty[s]
  /// at bars + 8 (S + s), one a consumer warp) and fences them (simt_tma.cpp; both TMA loops).
  void init_stage_barriers(llvm::Value* bars, int64_t S, int empty_blocks = 1);
  /// The TMA copies of K step `step` (i64) of the tile at (m0, n0) (i32) into the slot at `stage`,
  /// counted on its full barrier `bar` (simt_tma.cpp; both TMA loops issue them).
  /// rank (i32, cluster plans): this block's rank in a cluster of 2 sharing the B panel; it copies
  /// half of B's boxes, multicast to both blocks (the other half comes from the other block).
  void tma_copy_step(const TmaLoop& t, llvm::Value* stage, llvm::Value* bar, llvm::Value* step, llvm::Value* m0, llvm::Value* n0,
                     llvm::Value* rank = nullptr);
  using StepFn = std::function<std::vector<llvm::Value*>(llvm::Value* stage, std::vector<llvm::Value*> acc)>;
  /// acc after the loop's K steps, each step's wgmmas issued by `multiply` on its stage.
  std::vector<llvm::Value*> tma_loop(const std::vector<llvm::Value*>& acc, const StepFn& multiply, const TmaLoop& t);
  /// The same loop as one tile of a warp-specialized persistent walk (simt_tma_ws.cpp; loop
  /// attribute persistent): the producer warp's TMA copies of every tile of the work-group, the
  /// consumer warps' waits, wgmmas and releases. M, N: the kernel's extents (i64). sk_down: the
  /// Stream-K parts' K steps copied from the part's last down to its first. sk_prefetch: the bytes
  /// of a partial tile in the workspace (kernel parameter WS), which the producer prefetches into L2
  /// for a part that adds its successor's, after that part's copies (0: none).
  std::vector<llvm::Value*> ws_tma_loop(const std::vector<llvm::Value*>& acc, const StepFn& multiply, const TmaLoop& t,
                                        llvm::Value* hi, llvm::Value* M, llvm::Value* N, int64_t group_m, int64_t sk_kt = 0,
                                        bool sk_down = false, int64_t sk_prefetch = 0, int64_t sk_stage = 0,
                                        int64_t sk_stage_store = 0, int64_t sk_store_groups = 1, bool sk_pair = false);
  /// sk_stage (the loop's stream_k_stage_read: a partial tile's bytes): the frag_native load of a
  /// successor's partial (attribute stage_read) through the stage slots, as pseudo K steps the
  /// producer hands over after the part's copies: each lane's 16-byte groups by cp.async into the
  /// warp's part of them, read back from shared memory, the slots released (simt_tma_ws.cpp).
  /// pair (sk_pair's pair_read): the partial was written into the slots by the cluster partner
  /// (ws_pair_send), whose st.async completed on their full barriers: no copy, only the reads.
  std::vector<llvm::Value*> ws_stage_read(const Access& a, const Type& t, size_t components, bool pair = false);
  /// sk_pair (the loop's stream_k_pair; a store's pair_send): an odd block's tail partial, the
  /// warp's frag_native fragment, written with st.async into the stage slots its cluster partner's
  /// producer handed over (the first pseudo step in this block's mailbox, after its ready barrier).
  void ws_pair_send(const Access& a, const Type& t, const std::vector<llvm::Value*>& d);
  /// sk_stage_store (the loop's stream_k_stage_store: a partial tile's bytes): the frag_native
  /// store of a part's sum for its predecessor (attribute stage_store) into the stage slots that
  /// the producer handed over as pseudo K steps after the part: each lane's 16-byte groups by
  /// st.shared, a proxy fence, the slots released; the producer stores them to the workspace with
  /// cp.async.bulk and sets the flags (simt_tma_ws.cpp).
  void ws_stage_store(const Access& a, const Type& t, const std::vector<llvm::Value*>& d);
  /// ws_stage_read / ws_stage_store's stage slots: their 1024-byte aligned shared base, their
  /// barriers' address (after the slots), the steps taken before the pseudo steps, the warp's
  /// region of the partial (bytes from its start, native_at's element offset) and the slot where
  /// that region starts; `prefix` names the values (stg, sst).
  struct StageRegion {
    llvm::Value *base, *bars, *taken, *r0, *slot;
  };
  StageRegion ws_stage_region(const Access& a, const Type& t, const char* prefix);
  /// A step's stage slot (step mod ws_stage_slots_) and barrier parity ((step / slots) mod 2), i32.
  llvm::Value* ws_stage_slot(llvm::Value* step);
  llvm::Value* ws_stage_parity(llvm::Value* step);
  int64_t ws_stage_pseudo_ = 0, ws_stage_slots_ = 0, ws_stage_bytes_ = 0;  // ws_tma_loop's: pseudo steps, S, a slot's bytes
  bool ws_stage_read_ = false, ws_stage_store_ = false;  // ws_tma_loop's: pseudo steps for reads, for stores
  bool ws_pair_ = false;  // ws_tma_loop's stream_k_pair: the ready barrier and mailbox after the stage barriers
  /// The kernel parameter the IR names `hint` (InternalError when there is none).
  llvm::Value* param_named(const std::string& hint);
  /// Kernels with producer warps: the entry branches to ws_init_ (filled by the first persistent
  /// loop: the barriers, then the producer warps to ws_prod_, the consumers to the IR's code);
  /// ws_end() completes what no loop filled.
  void ws_begin();
  void ws_end();
  llvm::BasicBlock *ws_init_ = nullptr, *ws_prod_ = nullptr, *ws_main_ = nullptr;
  llvm::AllocaInst* ws_steps_ = nullptr;  // ws_tma_loop: K steps the consumers have taken
  int producer_warps_ = 0;                // function attribute producer_warps: warps after the IR's subgroups
  bool sk_pair_ = false;  // function attribute sk_pair: clusters of 2 without multicast (ws_pair_send)
  int cluster_ = 0;                       // function attribute cluster: blocks a cluster (2) sharing B's panels
  /// Waits until the phase of parity `parity` (i32) of the mbarrier at `bar` has completed.
  void mbarrier_wait(llvm::Value* bar, llvm::Value* parity);
  llvm::GlobalVariable* stage_mem_ = nullptr;  // its shared-memory stages, one per kernel
  // A wgmma pipeline's accumulators kept in the order of wgmma's D fragment (simt_wgmma.cpp)
  // until something needs the coopmatrix layout: scales, element conversions, element-wise
  // arithmetic with loads at the fragment's positions and per-element functions (a fused
  // epilogue's bias and activation) stay in that order, a store of the whole tile goes through
  // shared memory (epilogue staging), and any other use gathers the components into the layout
  // (mat(): what the lowering did before).
  struct Frag {
    std::vector<llvm::Value*> d;  // D[ni 4 + i]: element (lane / 4 + 8 (i / 2), 8 ni + 2 (lane % 4) + i % 2)
    Type type;                    // the 16 x NR subgroup-scope matrix it stands for
    llvm::Value* pad = nullptr;   // the stages' 1024-byte aligned base, bytes after stage_mem_'s start (i32)
    int64_t epi_off = 0;          // the warps' staging regions, bytes after that base
    int64_t epi_bytes = 0;        // each warp's region (0: no staging, the old path)
    int tma_store = 0;            // the regions 1024-byte aligned for TMA stores: loop attribute tma_store (1, 2)
    // Steps not yet applied to d, in order (from a per-element function on: a fused epilogue's
    // activation and what follows it): component q is d[q] through each, emitted where a store
    // takes it (frag_at), so that a box's math sits next to its writes to the staging instead of
    // all 128 components' math before the first (ptxas: spills with SiLU / GELU, session 21).
    std::vector<std::function<llvm::Value*(llvm::Value*, size_t)>> pending;
  };
  bool tma_stores_ = false;  // a TMA store was issued: the kernel waits for their reads before it returns
  std::unordered_map<const Value*, Frag> frags_;
  std::deque<std::vector<llvm::Value*>> frag_views_;  // the gathered layouts mat() hands out
  std::map<std::pair<const Value*, llvm::BasicBlock*>, size_t> frag_view_at_;
  // Ops that may write memory lowered so far (op()), and the count when each mat_load was lowered:
  // frag_like loads again only what nothing can have written since.
  int64_t mem_epoch_ = 0;
  std::unordered_map<const Value*, int64_t> load_epoch_;
  /// One operand's panel of a K step, copied by cp.async (simt_mma_pipeline.cpp, simt_wgmma.cpp):
  /// `outer` rows of `cpr` 16-byte chunks; element (outer, inner) of `base` at outer * stride +
  /// inner; K is the inner dimension when k_inner (else the outer), `origin` the tile's corner
  /// along M / N; when checked, chunks outside outer_lim x inner_lim are zero-filled.
  struct CpPanel {
    int64_t outer, cpr;
    bool k_inner;
    llvm::Value *base, *stride, *origin, *outer_lim, *inner_lim;
    bool checked;
  };
  /// Issues the copies of a panel from K index k0: work-item tid (i32) of `threads` copies chunks
  /// tid, tid + threads, ... (EPC elements of esz bytes each) to dst(r, c), the shared-memory
  /// address of chunk c of row r (i32 values) in the stage slot.
  void cp_async_panel(const CpPanel& p, llvm::Value* k0, llvm::Value* tid, int64_t threads, int64_t EPC, int64_t esz,
                      const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& dst);
  /// The coopmatrix components of a fragment-order value (a gather of each component).
  std::vector<llvm::Value*> frag_layout(const Frag& f);
  /// Each lane's own elements of a 16 x cols fragment in D's order at access `a` (D[ni 4 + 2 h + j]
  /// is element (g + 8 h, 8 ni + 2 t + j) on lane 4 g + t), for the lanes' direct loads and stores:
  /// each(q, ok, row_at, col) with q the index in D, ok whether the element is inside a's rows x
  /// cols (true when not checked), row_at its row times a.sr, col its column (i64; the caller
  /// addresses it: a.ptr + row_at + col a.sc).
  void frag_elements(const Access& a, int64_t cols, bool checked,
                     const std::function<void(size_t, llvm::Value*, llvm::Value*, llvm::Value*)>& each);
  /// Component q of f with its pending steps applied here (emitted once per call: call it once
  /// per component and path).
  llvm::Value* frag_at(const Frag& f, size_t q);
  /// Every component of f, its pending steps applied here.
  std::vector<llvm::Value*> frag_values(const Frag& f);
  /// A per-element function on a value in f's order as a step of Frag::pending (nullopt: an
  /// operand is not in f's order).
  std::optional<std::function<llvm::Value*(llvm::Value*, size_t)>> per_element_step(const Op& o, const Frag& f, int depth);
  /// mat_scale / mat_convert / mat_binary / mat_per_element / mat_store on a fragment-order value;
  /// false: not this form.
  bool frag_op(const Op& o);
  /// v's components in the order of f's (a fragment-order value, or a scale, element
  /// conversion, per-element function or plain load of one shaped like it: the load issued again
  /// at f's positions, the layout's load left unused); nullopt for anything else.
  std::optional<std::vector<llvm::Value*>> frag_like(const Value* v, const Frag& f, int depth = 0);
  /// Lane-interleaved 16-byte group q of a frag_native access (frag_store).
  llvm::Value* native_at(const Access& a, const Type& t, size_t q);
  /// frag_native loads not yet read through frag_like (any left at the end: an internal error)
  std::unordered_set<const Value*> native_loads_;
  /// The whole tile's store through the warp's shared-memory region: 16-byte chunks along C's
  /// unit-stride dimension, consecutive lanes on consecutive chunks; false where it does not apply.
  /// frag_store's TMA path (store attribute tma_store): the boxes through the warp's staging
  /// buffers, cp.async.bulk.tensor shared -> global from tensor map 2 (simt_wgmma.cpp).
  void tma_store(const Frag& f, const Op& o, const Access& a, bool by_col);
  void stmatrix_x4(llvm::Value* addr, bool trans, const std::vector<llvm::Value*>& d, int64_t ni);
  bool frag_store(const Frag& f, const Op& o);
  // The kernel's stage memory of `total` bytes aligned to `align` (simt_mma_pipeline.cpp): static
  // shared memory up to 48 KiB, beyond it the dynamic shared memory the function's attribute
  // dynamic_shared asks the launch for. False when the kernel cannot have it.
  bool stage_memory(int64_t total, unsigned align);

  // ---- matrices (simt_matrix.cpp) -------------------------------------------------------------
  std::vector<llvm::Value*> splat(const Op& o);
  std::vector<llvm::Value*> mul_add(const Op& o);
  std::vector<llvm::Value*> elementwise(const Op& o);
  std::vector<llvm::Value*> per_element(const Op& o);
  std::vector<llvm::Value*> reduce(const Op& o);
  llvm::Value* combine(const Op& o, ScalarType t, llvm::Value* x, llvm::Value* y);
  void matrix_op(const Op& o);
  llvm::Value* select_component(const std::vector<llvm::Value*>& comps, llvm::Value* i);

  const Function& f_;
  const SimtTarget& target_;
  llvm::LLVMContext& ctx_;
  std::unique_ptr<llvm::Module> mod_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  int S_ = 16;
  int sgs_ = 1;  // subgroups per work-group
  int dpas_mode_ = 0;     // function attribute "dpas": 0 none, 1 the instruction, 2 emulated
  int block2d_mode_ = 0;  // function attribute "block2d": the same for 2-D block I/O
  int mma_mode_ = 0;      // function attribute "mma": 1 NVIDIA tensor cores (mma.sync)
  llvm::Value* lane_ = nullptr;
  llvm::Value* lane64_ = nullptr;
  std::unordered_map<const Value*, llvm::Value*> scalars_;
  std::unordered_map<const Value*, std::vector<llvm::Value*>> mats_;
  std::map<std::vector<int>, llvm::GlobalVariable*> tables_;  // lane tables of general shuffles
  std::map<int64_t, llvm::Value*> lane_mod_, lane_div_;       // p % I, p / I (i64)
  std::map<std::string, LaneMap> lane_maps_;                  // by matrix type
};

}  // namespace coopjit
