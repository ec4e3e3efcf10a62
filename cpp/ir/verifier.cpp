// The kernel IR verifier (verifier.h).
#include "ir/verifier.h"

#include <unordered_set>

#include "core/error.h"
#include "ir/printer.h"

namespace coopjit::ir {
namespace {

// HLSL 0035's scope table: the scopes each matrix operation accepts. Thread-scope matrices are
// read-only: they can be loaded (and, later, accumulated into memory and used by vector x
// matrix products), not stored, splatted, set or multiplied as matrices.
constexpr unsigned kThread = 1u << static_cast<int>(Scope::thread);
constexpr unsigned kSubgroup = 1u << static_cast<int>(Scope::subgroup);
constexpr unsigned kWorkgroup = 1u << static_cast<int>(Scope::workgroup);
constexpr unsigned kUniform = kSubgroup | kWorkgroup;
constexpr unsigned kAnyScope = kThread | kUniform;

unsigned allowed_scopes(OpKind k) {
  switch (k) {
    case OpKind::mat_load: return kAnyScope;
    case OpKind::mat_load_tensor: case OpKind::mat_outer_product: case OpKind::mat_accumulate:
      return kAnyScope;
    case OpKind::vec_matrix_mul: return kThread;  // HLSL 0035: vector x matrix needs thread scope
    case OpKind::mat_reduce: case OpKind::mat_per_element: case OpKind::mat_convert: case OpKind::mat_transpose:
    case OpKind::mat_length: case OpKind::mat_get: case OpKind::mat_set: case OpKind::mat_coord:
    case OpKind::mat_sum_accumulate:
      return kUniform;
    case OpKind::mat_store_tensor:
    case OpKind::mat_store: case OpKind::mat_splat: case OpKind::mat_mul_add: case OpKind::mat_scale:
    case OpKind::mat_binary:
      return kUniform;
    default: return kAnyScope;
  }
}

std::string scope_list(unsigned mask) {
  std::string s;
  for (Scope sc : {Scope::thread, Scope::subgroup, Scope::workgroup})
    if (mask & (1u << static_cast<int>(sc))) s += (s.empty() ? "" : " or ") + std::string(name(sc));
  return s;
}

bool is_int8(ScalarType t) { return t == ScalarType::i8 || t == ScalarType::u8; }
// Whether float accumulator type c holds every value of float type x exactly: f64 every float,
// f32 itself and the 16- and 8-bit floats.
bool float_holds(ScalarType c, ScalarType x) {
  if (!is_float(x)) return false;
  if (c == ScalarType::f64) return true;
  return c == ScalarType::f32 && x != ScalarType::f64;
}
// A x B + C component types (HLSL 0035 Multiply<OutTy>, whose A and B "potentially mismatched
// element types"; SPV_KHR_cooperative_matrix): one type throughout; i8 / u8 into i32; or float
// inputs, of one type or two, into an f32 or f64 accumulator that holds them exactly (f16 x fp8
// -> f32, f32 x f32 -> f64): the inputs are converted to the accumulator's type, exactly, and
// multiplied and added there.
bool products_allowed(ScalarType a, ScalarType b, ScalarType c) {
  if (is_int8(a) && is_int8(b)) return c == ScalarType::i32;
  if (a == b && a == c) return true;
  return float_holds(c, a) && float_holds(c, b);
}
// HLSL 0035's 8-bit component types (I8, U8, F8_E4M3, F8_E5M2: ComponentTypeTraits'
// ElementsPerScalar 4), whose matrices may be "4 times the valid size for a scalar element".
bool is_packed_8bit(ScalarType t) { return is_int8(t) || t == ScalarType::f8_e4m3 || t == ScalarType::f8_e5m2; }

class Verifier {
 public:
  explicit Verifier(const Function& f) : f_(f) {}

  void run() {
    for (Value* p : f_.params) {
      if (p->type.is_groupshared())
        throw VerifyError(cat("IR verifier: parameter ", p->hint, " has type ", p->type.str(),
                              ": a groupshared array is declared in the kernel (groupshared.alloc), not passed"));
      defined_.insert(p);
    }
    block(f_.body, /*is_region=*/false);
  }

 private:
  [[noreturn]] void fail(const Op& op, const std::string& rule) {
    throw VerifyError(cat("IR verifier: ", mnemonic(op), ": ", rule, "\n  in: ", print_op(f_, op)));
  }

  void require(bool cond, const Op& op, const std::string& rule) {
    if (!cond) fail(op, rule);
  }

  // The values of a region (its arguments and its ops' results) are visible inside it only: they
  // leave defined_ when it ends (a loop body's value used after the loop reached LLVM's verifier
  // as "Instruction does not dominate all uses!"). seen_ keeps every value defined so far, to
  // tell such a use from a use before the definition.
  void block(const Block& b, bool is_region) {
    std::vector<Value*> local;
    auto define = [&](Value* v) {
      defined_.insert(v);
      seen_.insert(v);
      local.push_back(v);
    };
    for (Value* a : b.args) define(a);
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const Op& o = *b.ops[i];
      bool last = i + 1 == b.ops.size();
      if (o.kind == OpKind::yield) require(is_region && last, o, "yield must end a region");
      for (size_t k = 0; k < o.operands.size(); ++k) {
        Value* v = o.operands[k];
        if (defined_.count(v)) continue;
        fail(o, seen_.count(v) ? cat("operand ", k, " is used outside the region that defines it (a "
                                     "loop body's, a branch's or a function region's values are visible inside it "
                                     "only: yield it as a result)")
                               : cat("operand ", k, " is used before it is defined"));
      }
      check(o);
      const bool wg = o.kind == OpKind::for_ && o.int_attr("wgmma", 0) != 0;
      wgmma_loops_ += wg;
      for (const auto& r : o.regions) block(*r, true);
      wgmma_loops_ -= wg;
      for (Value* r : o.results) define(r);
    }
    if (is_region) {
      require(!b.ops.empty() && b.ops.back()->kind == OpKind::yield, *b.parent,
              "a region must end with yield");
      for (Value* v : local) defined_.erase(v);
    }
  }

  static std::string types(const std::vector<Value*>& vs) {
    std::string s;
    for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + vs[i]->type.str();
    return s;
  }

  void yields_match(const Op& o, const Block& region) {
    const Op& y = *region.ops.back();
    require(y.operands.size() == o.results.size(), o,
            cat("the region yields ", y.operands.size(), " values (", types(y.operands), ") but the op has ",
                o.results.size(), " results"));
    for (size_t i = 0; i < o.results.size(); ++i)
      require(y.operands[i]->type == o.results[i]->type, o,
              cat("yielded value ", i, " has type ", y.operands[i]->type.str(), " but result ", i,
                  " has type ", o.results[i]->type.str()));
  }

  void access(const Op& o, size_t base, const Type& m) {
    const auto& v = o.operands;
    // A load with attr prefetch_far takes one more operand: the far lines' offset in bytes.
    const bool far = o.kind == OpKind::mat_load && o.int_attr("prefetch_far", 0) > 0;
    require(v.size() == base + 7 + (far ? 1 : 0), o,
            far ? "a load with prefetch_far takes ptr, row, col, stride_row, stride_col, rows, cols, far_bytes"
                : "load/store takes ptr, row, col, stride_row, stride_col, rows, cols");
    if (far) require(v[base + 7]->type.is_index(), o, cat("the far prefetch offset must be index, not ", v[base + 7]->type.str()));
    require(v[base]->type.is_pointer(), o, cat("the address must be a pointer, not ", v[base]->type.str()));
    require(m.is_matrix(), o, cat("the value must be a coopmatrix, not ", m.str()));
    const Type& p = v[base]->type;
    if (p.is_groupshared()) {
      // HLSL 0035's groupshared Load / Store / Accumulate: Wave or ThreadGroup scope, row- or
      // column-major (strides), the elements converted between the array's type and the
      // matrix's component type where they differ.
      require(m.scope != Scope::thread, o,
              cat("a groupshared ", mnemonic(o) == "coopmatrix.accumulate" ? "accumulate" : "load or store",
                  " needs a subgroup or workgroup scope matrix (HLSL 0035 scope table), got ", m.str()));
      require(o.int_attr("vnni", 1) == 1, o, "a groupshared access is not vnni-packed");
    } else {
      require(p.scalar == m.scalar, o,
              cat("pointer element type ", name(p.scalar), " differs from the matrix component type ", name(m.scalar),
                  " (", m.str(), "); only a groupshared array converts"));
    }
    for (size_t k = base + 1; k < base + 7; ++k)
      require(v[k]->type.is_index(), o, cat("position, strides and bounds must be index, operand ", k,
                                            " is ", v[k]->type.str()));
    const int64_t w = o.int_attr("vnni", 1);
    if (w == 1) return;
    // VNNI-packed memory (builder.h): whole 32-bit channels of K elements, the other dimension
    // contiguous, no bounds checks (packed panels are padded).
    require(w == 2 || w == 4, o, cat("vnni must be 1, 2 or 4, got ", w));
    require(size_in_bytes(m.scalar) * w == 4, o,
            cat("vnni(", w, ") packs 32-bit channels: it needs ", 4 / w, "-byte components, not ", m.str()));
    require(m.use == Use::a || m.use == Use::b, o, cat("vnni packing is along K: a matrix_a or matrix_b, not ", m.str()));
    require(!o.int_attr("checked"), o, "a vnni-packed access is not checked (packed panels are padded)");
    const bool is_a = m.use == Use::a;
    require((is_a ? m.cols : m.rows) % w == 0, o, cat("K of ", m.str(), " must be a multiple of vnni ", w));
    const Value* sx = v[base + (is_a ? 3 : 4)];
    require(sx->def && sx->def->kind == OpKind::constant && sx->def->int_attr("value") == 1, o,
            cat("a vnni-packed access needs the constant stride 1 along ", is_a ? "rows" : "columns"));
  }

  // Size limits. The lowerings unroll a cooperative-matrix operation on values in registers (a
  // SIMD lowering's vectors, a SIMT lane's components) into straight-line code, which LLVM
  // compiles in time that grows faster than its length: on a 2-core Zen 5, a 1024 x 1024 x 128
  // mul_add did not compile in 240 s, a per-element function or a row reduction over 64 x 64
  // elements took 5 to 12 s, 128 x 128 more than 60 s. Loads and stores of big matrices walk them
  // with loops (they are held in memory) and have no limit; the operations computing on them do.
  // (kMaxMulAdds: M x N x K of one mul_add; kMaxRegisterElements: a matrix an operation computes
  // on; both in verifier.h, where the GPU planner reads them)
  static constexpr int64_t kMaxRegionElements = int64_t(1) << 12;    // per-element / reduce functions
  // 8-bit matrices: twice the elements and a mul_add of 8-bit operands twice the multiply-adds (the
  // same bytes as 16-bit ones; their lowerings take 4 of them a 32-bit word: dp4a, VNNI, mma.sync
  // / wgmma k32). Hopper's int8 wgmma blocks of 2 warpgroups of 64 x 256 have a warp's B of 128 x 256.
  static bool byte_sized(ScalarType s) { return s == ScalarType::i8 || s == ScalarType::u8; }
  // Inside a K loop of attribute wgmma (Hopper's warpgroup pipeline, simt_wgmma.cpp) the loads and
  // the mul_add are not unrolled: the operands are copied into shared memory and the product is a
  // few wgmma instructions a K slice. There the limits are twice (blocks of 2 warpgroups of
  // 64 x 320: a warp's B of 64 x 320, a warp's mul_add 16 x 320 x 64).
  int wgmma_loops_ = 0;

  void size_limits(const Op& o) {
    const bool shared_access = (o.kind == OpKind::mat_load && !o.operands.empty() && o.operands[0]->type.is_groupshared()) ||
                               (o.kind == OpKind::mat_store && o.operands.size() > 1 && o.operands[1]->type.is_groupshared());
    switch (o.kind) {
      case OpKind::mat_load: case OpKind::mat_store:
        if (shared_access) break;  // element by element, with conversion: unrolled as the others
        return;
      case OpKind::mat_load_tensor: case OpKind::mat_store_tensor:
      case OpKind::mat_length: case OpKind::yield: case OpKind::for_: case OpKind::if_:
        return;
      default: break;
    }
    const bool region = o.kind == OpKind::mat_per_element || o.kind == OpKind::mat_reduce;
    const int64_t base_limit = region ? kMaxRegionElements : wgmma_loops_ ? 2 * kMaxRegisterElements : kMaxRegisterElements;
    std::vector<const Value*> vals(o.operands.begin(), o.operands.end());
    vals.insert(vals.end(), o.results.begin(), o.results.end());
    for (const Value* v : vals) {
      const Type& t = v->type;
      if (!t.is_matrix() && !t.is_vector()) continue;
      const int64_t limit = !region && byte_sized(t.scalar) ? 2 * base_limit : base_limit;
      const bool over = t.rows > limit || t.cols > limit || t.rows * t.cols > limit;  // no overflow: rows, cols <= limit
      require(!over, o,
              cat(t.str(), " has ", t.rows, " x ", t.cols,
                  t.rows > limit || t.cols > limit ? std::string() : cat(" = ", t.rows * t.cols),
                  " elements: the size limit of ", mnemonic(o),
                  " is ", limit, region ? " elements (a per-element or combine function is unrolled for each; "
                                        : " elements (the operation is unrolled into registers; ",
                  "loads and stores of bigger matrices have no limit): work on tiles of it in a loop"));
    }
    if (o.kind == OpKind::mat_mul_add && o.operands.size() == 3) {
      const Type &a = o.operands[0]->type, &c = o.operands[2]->type;
      const int64_t macs = c.rows * c.cols * a.cols;
      const Type& bt = o.operands[1]->type;
      const int64_t max_macs = (byte_sized(a.scalar) && byte_sized(bt.scalar) ? 2 * kMaxMulAdds : kMaxMulAdds) * (wgmma_loops_ ? 2 : 1);
      require(macs <= max_macs, o,
              cat("a ", c.rows, " x ", c.cols, " x ", a.cols, " product (M x N x K = ", macs,
                  " multiply-adds) exceeds the size limit of ", max_macs, max_macs == kMaxMulAdds ? " (2^18)"
                  : wgmma_loops_ ? " (in a wgmma loop)" : " (2^19, 8-bit operands)",
                  " multiply-adds per mul_add (it is unrolled into registers): split it into tiles in a loop"));
    }
  }

  // Matrix types: positive dimensions; the operation must accept the matrix's scope.
  void matrix_types(const Op& o) {
    std::vector<const Value*> vals(o.operands.begin(), o.operands.end());
    vals.insert(vals.end(), o.results.begin(), o.results.end());
    for (const Value* v : vals) {
      const Type& t = v->type;
      if (!t.is_matrix()) continue;
      require(t.rows >= 1 && t.cols >= 1, o, cat("matrix dimensions must be at least 1, got ", t.str()));
      unsigned ok = allowed_scopes(o.kind);
      require((ok & (1u << static_cast<int>(t.scope))) != 0, o,
              cat(mnemonic(o), " needs ", scope_list(ok), " scope matrices (HLSL 0035 scope table), got ", t.str()));
    }
  }

  // Functions applied per element (decode, combine, per-element) hold scalar operations only.
  void scalar_region(const Op& o, const char* what) {
    for (const auto& inner : o.regions[0]->ops)
      require(inner->kind == OpKind::constant || inner->kind == OpKind::binary || inner->kind == OpKind::cmp ||
                  inner->kind == OpKind::select || inner->kind == OpKind::unary || inner->kind == OpKind::convert ||
                  inner->kind == OpKind::yield,
              o, cat(what, " holds scalar operations only, not ", mnemonic(*inner)));
  }

  // A groupshared array is used where it is declared: not carried by loops or branches, and
  // only by the operations HLSL gives it (matrix load / store / accumulate, plain element reads
  // and writes, offsets).
  void groupshared_uses(const Op& o) {
    for (size_t k = 0; k < o.operands.size(); ++k) {
      if (!o.operands[k]->type.is_groupshared()) continue;
      require(o.kind != OpKind::for_ && o.kind != OpKind::if_ && o.kind != OpKind::yield, o,
              cat("a groupshared array (", o.operands[k]->type.str(), ") cannot be carried by ",
                  o.kind == OpKind::yield ? "a loop or branch" : mnemonic(o), ": use it directly"));
      const bool ok = o.kind == OpKind::load || o.kind == OpKind::store || o.kind == OpKind::ptr_offset ||
                      (o.kind == OpKind::mat_load && k == 0) ||
                      ((o.kind == OpKind::mat_store || o.kind == OpKind::mat_accumulate) && k == 1);
      require(ok, o, cat(mnemonic(o), " does not take a groupshared array (", o.operands[k]->type.str(),
                         "): matrix load / store / accumulate, load, store and ptr.offset do"));
    }
    if (o.kind == OpKind::for_ || o.kind == OpKind::if_)
      for (const Value* r : o.results)
        require(!r->type.is_groupshared(), o, cat("a groupshared array (", r->type.str(), ") cannot be carried by ",
                                                  mnemonic(o), ": use it directly"));
  }

  // HLSL's groupshared limit (Direct3D: 32 KiB a thread group), also OpenCL's least local memory.
  static constexpr int64_t kMaxGroupsharedBytes = 32 * 1024;

  void check(const Op& o) {
    const auto& v = o.operands;
    matrix_types(o);
    size_limits(o);
    groupshared_uses(o);
    switch (o.kind) {
      case OpKind::shared_alloc: {
        require(v.empty() && o.results.size() == 1 && o.result()->type.is_groupshared(), o,
                "groupshared.alloc takes nothing and gives a groupshared array");
        const Type& t = o.result()->type;
        require(t.scalar != ScalarType::i1 && t.scalar != ScalarType::index, o,
                cat("a groupshared array holds an arithmetic type, not ", name(t.scalar)));
        require(t.cols >= 1 && t.cols <= kMaxGroupsharedBytes / size_in_bytes(t.scalar), o,
                cat(t.str(), ": a groupshared array has 1 to ", kMaxGroupsharedBytes / size_in_bytes(t.scalar),
                    " elements of ", name(t.scalar), " (", kMaxGroupsharedBytes, " bytes a work-group)"));
        break;
      }
      case OpKind::store:
        require(v.size() == 3 && v[0]->type.is_pointer() && v[1]->type.is_index() &&
                    v[2]->type == Type::of(v[0]->type.scalar), o,
                cat("store takes (ptr<T>, index, T), got ", types(v)));
        break;
      case OpKind::barrier:
        require(v.empty() && o.results.empty(), o, "barrier takes nothing");
        break;
      case OpKind::constant:
        require(o.results.size() == 1 && o.result()->type.is_scalar() && o.has_attr("value"), o,
                "a constant has a value and one scalar result");
        break;
      case OpKind::binary: {
        require(v.size() == 2 && v[0]->type == v[1]->type && v[0]->type.is_scalar(), o,
                cat("operands must be scalars of one type, got ", types(v)));
        auto b = static_cast<BinOp>(o.sub);
        if (b == BinOp::and_ || b == BinOp::or_)
          require(!is_float(v[0]->type.scalar), o, cat("and/or need integer or i1 operands, got ", types(v)));
        if (b == BinOp::rem) require(!is_float(v[0]->type.scalar), o, "rem needs integer operands");
        break;
      }
      case OpKind::cmp:
        require(v.size() == 2 && v[0]->type == v[1]->type && v[0]->type.is_scalar(), o,
                cat("operands must be scalars of one type, got ", types(v)));
        break;
      case OpKind::ptr_offset:
        require(v.size() == 2 && v[0]->type.is_pointer() && v[1]->type.is_index(), o,
                cat("ptr.offset takes (ptr, index), got ", types(v)));
        break;
      case OpKind::flag_set: case OpKind::flag_wait:
        require((v.size() == 2 || (v.size() == 3 && o.kind == OpKind::flag_set && v[2]->type == Type::of(ScalarType::i32))) &&
                    v[0]->type == Type::pointer(ScalarType::i32) && v[1]->type.is_index(), o,
                cat(mnemonic(o), o.kind == OpKind::flag_set ? " takes (ptr<i32>, index[, i32])" : " takes (ptr<i32>, index)", ", got ", types(v)));
        require(o.int_attr("spin_limit", 0) >= 0 && (o.kind == OpKind::flag_wait || !o.has_attr("spin_limit")), o,
                cat(mnemonic(o), ": spin_limit must be a count >= 0 of flag.wait, got ", o.int_attr("spin_limit", 0)));
        require(!o.has_attr("trace") || (o.kind == OpKind::flag_set && (o.int_attr("trace") == 1) == (v.size() == 3) &&
                                         o.int_attr("trace") >= 1 && o.int_attr("trace") <= 3), o,
                cat(mnemonic(o), ": trace must be 1 (the value), 2 (the SM's clock) or 3 (the device's timer) of flag.set, "
                    "with a value only for 1, got ", o.int_attr("trace", 0)));
        break;
      case OpKind::load:
        require(v.size() == 2 && v[0]->type.is_pointer() && v[1]->type.is_index() &&
                    o.result()->type == Type::of(v[0]->type.scalar), o,
                cat("load takes (ptr<T>, index) -> T, got ", types(v)));
        break;
      case OpKind::select:
        require(v.size() == 3 && v[0]->type.is_bool() && v[1]->type == v[2]->type, o,
                cat("select takes (i1, T, T), got ", types(v)));
        break;
      case OpKind::for_: {
        require(v.size() >= 3 && v[0]->type.is_index() && v[1]->type.is_index() && v[2]->type.is_index(), o,
                "bounds and step must be index");
        require(o.regions.size() == 1, o, "for has one region");
        const Block& body = *o.regions[0];
        require(body.args.size() == v.size() - 2, o, "the body takes the induction variable and the iter_args");
        for (size_t i = 3; i < v.size(); ++i)
          require(body.args[i - 2]->type == v[i]->type && o.results[i - 3]->type == v[i]->type, o,
                  cat("iter_arg ", i - 3, " has inconsistent types"));
        if (!body.ops.empty() && body.ops.back()->kind == OpKind::yield) yields_match(o, body);
        break;
      }
      case OpKind::if_:
        require(v.size() == 1 && v[0]->type.is_bool(), o, cat("the condition must be i1, got ", types(v)));
        require(o.regions.size() == 2, o, "if has a then and an else region");
        for (const auto& r : o.regions)
          if (!r->ops.empty() && r->ops.back()->kind == OpKind::yield) yields_match(o, *r);
        break;
      case OpKind::yield:
        break;
      case OpKind::mat_load:
        access(o, 0, o.result()->type);
        break;
      case OpKind::mat_store:
        access(o, 1, v[0]->type);
        break;
      case OpKind::mat_splat: {
        const Type& m = o.result()->type;
        require(m.is_matrix() && v.size() == 1 && v[0]->type == Type::of(m.scalar), o,
                cat("splat takes a scalar of the component type: ", types(v), " -> ", m.str()));
        break;
      }
      case OpKind::mat_scale:
        require(v.size() == 2 && v[0]->type.is_matrix() && v[1]->type == Type::of(v[0]->type.scalar), o,
                cat("scale takes a matrix and a scalar of its component type, got ", types(v)));
        break;
      case OpKind::mat_binary:
        require(v.size() == 2 && v[0]->type.is_matrix() && v[0]->type == v[1]->type, o,
                cat("element-wise operations take two matrices of one type, got ", types(v)));
        break;
      case OpKind::tensor_layout: {
        const Type& t = o.result()->type;
        require(t.rank >= 1 && t.rank <= 5, o, cat("a tensor layout has 1 to 5 dimensions, got rank ", t.rank));
        require(v.size() == size_t(5 * t.rank + 1), o,
                cat("tensor.layout of rank ", t.rank, " takes ", 5 * t.rank + 1, " operands, got ", v.size()));
        for (int i = 0; i < 5 * t.rank; ++i)
          require(v[i]->type.is_index(), o, cat("block, dims, strides, offsets and spans are index, operand ", i,
                                                 " is ", v[i]->type.str()));
        require(v.back()->type == Type::of(ScalarType::f64), o, "the clamp value is f64");
        break;
      }
      case OpKind::tensor_view: {
        const Type& t = o.result()->type;
        require(t.rank >= 1 && t.rank <= 5, o, cat("a tensor view has 1 to 5 dimensions, got rank ", t.rank));
        std::vector<bool> seen(t.rank, false);
        for (int i = 0; i < t.rank; ++i) {
          int p = t.perm[i];
          require(p >= 0 && p < t.rank && !seen[p], o, cat("the view permutation is not a permutation of 0..",
                                                           t.rank - 1, ": ", t.str()));
          seen[p] = true;
        }
        size_t want = (t.has_dims ? 2 * t.rank : 0) + 4;
        require(v.size() == want, o, cat("tensor.view takes ", want, " operands, got ", v.size()));
        for (const Value* x : v) require(x->type.is_index(), o, "view dims, strides and clip are index");
        break;
      }
      case OpKind::mat_load_tensor: case OpKind::mat_store_tensor: {
        bool load = o.kind == OpKind::mat_load_tensor;
        const Type& m = v[load ? 1 : 0]->type;
        require(v.size() == 4 || v.size() == 5, o, "takes (matrix or ptr, ...), layout, extent and an optional view");
        require(m.is_matrix(), o, cat("the ", load ? "object" : "value", " must be a coopmatrix, got ", m.str()));
        const Type& ptr = v[load ? 0 : 1]->type;
        // With a decode function the pointer may point to any type (002: DecodeFunc's first
        // parameter is a pointer of its own type); the function returns the component type.
        require(ptr.is_pointer() && (ptr.scalar == m.scalar || (load && !o.regions.empty())), o,
                cat("the pointer must point to the component type ", name(m.scalar), ", got ", ptr.str()));
        const Type& lay = v[2]->type;
        require(lay.is_tensor_layout(), o, cat("operand 2 must be a tensor layout, got ", lay.str()));
        require(v[3]->type.is_index(), o, "the extent (elements in the buffer) is index");
        if (v.size() == 5) {
          const Type& view = v[4]->type;
          require(view.is_tensor_view(), o, cat("operand 4 must be a tensor view, got ", view.str()));
          if (!view.has_dims)
            require(view.rank == lay.rank, o,
                    cat("a view without dimensions uses the layout's spans: its rank ", view.rank,
                        " must equal the layout's rank ", lay.rank));
        }
        if (load) require(o.result()->type == m, o, "the result has the object's type");
        require(load ? o.regions.size() <= 1 : o.regions.empty(), o,
                "only a load takes a decode function (SPV_NV_cooperative_matrix2: DecodeFunc is not allowed "
                "with a store)");
        if (!o.regions.empty()) {
          const Block& dec = *o.regions[0];
          require(dec.args.size() == size_t(1 + 2 * lay.rank), o,
                  cat("the decode function takes the index, blockCoord[", lay.rank, "] and coordInBlock[", lay.rank,
                      "]: ", 1 + 2 * lay.rank, " arguments, got ", dec.args.size()));
          for (const Value* a : dec.args) require(a->type.is_index(), o, "decode arguments are index");
          for (const auto& inner : dec.ops)
            require(inner->kind == OpKind::constant || inner->kind == OpKind::binary || inner->kind == OpKind::cmp ||
                        inner->kind == OpKind::select || inner->kind == OpKind::load || inner->kind == OpKind::yield ||
                        inner->kind == OpKind::unary || inner->kind == OpKind::convert,
                    o, cat("a decode function holds scalar operations only, not ", mnemonic(*inner)));
          const Op& y = *dec.ops.back();
          require(y.kind == OpKind::yield && y.operands.size() == 1 && y.operands[0]->type == Type::of(m.scalar), o,
                  cat("the decode function yields one ", name(m.scalar), " element"));
        }
        if (!load && v[2]->def && v[2]->def->kind == OpKind::tensor_layout) {
          // SPV_NV_cooperative_matrix2: a block size above 1 must not be used with a store.
          for (int i = 0; i < lay.rank; ++i) {
            const Value* b = v[2]->def->operands[i];
            if (b->def && b->def->kind == OpKind::constant)
              require(b->def->int_attr("value") == 1, o, "a store must not use a block size larger than 1");
          }
        }
        break;
      }
      case OpKind::unary:
        require(v.size() == 1 && v[0]->type.is_scalar() && o.result()->type == v[0]->type, o,
                cat("unary operations take one scalar, got ", types(v)));
        if (o.sub != static_cast<int>(UnOp::neg) && o.sub != static_cast<int>(UnOp::abs))
          require(is_float(v[0]->type.scalar), o, cat(mnemonic(o), " needs a float operand, got ", types(v)));
        break;
      case OpKind::convert:
        require(v.size() == 1 && v[0]->type.is_scalar() && o.result()->type.is_scalar(), o,
                cat("convert takes a scalar to a scalar type, got ", types(v)));
        break;
      case OpKind::mat_reduce: {
        const Type &m = v[0]->type, &r = o.result()->type;
        if (!o.regions.empty()) scalar_region(o, "a combine function");
        require(m.use == Use::acc && r.use == Use::acc, o,
                cat("reduce needs accumulator matrices (SPV_NV_cooperative_matrix2), got ", m.str(), " -> ", r.str()));
        require(m.scalar == r.scalar && m.scope == r.scope, o,
                cat("reduce keeps the component type and scope: ", m.str(), " -> ", r.str()));
        auto mode = static_cast<ReduceMode>(o.sub);
        if (mode == ReduceMode::row)
          require(r.rows == m.rows, o, cat("a row reduction keeps the number of rows: ", m.str(), " -> ", r.str()));
        if (mode == ReduceMode::column)
          require(r.cols == m.cols, o, cat("a column reduction keeps the number of columns: ", m.str(), " -> ", r.str()));
        if (mode == ReduceMode::quad)
          require(m.rows % 2 == 0 && m.cols % 2 == 0 && r.rows * 2 == m.rows && r.cols * 2 == m.cols, o,
                  cat("a 2x2 reduction halves both dimensions: ", m.str(), " -> ", r.str()));
        if (!o.regions.empty()) {
          const Block& c = *o.regions[0];
          const Op& y = *c.ops.back();
          require(c.args.size() == 2 && c.args[0]->type == Type::of(m.scalar) && c.args[1]->type == Type::of(m.scalar) &&
                      y.operands.size() == 1 && y.operands[0]->type == Type::of(m.scalar),
                  o, cat("the combine function takes two ", name(m.scalar), " and returns one"));
        } else {
          require(o.has_attr("combine"), o, "reduce needs a combine operation (add, mul, min, max) or function");
        }
        break;
      }
      case OpKind::mat_per_element: {
        const Type& m = v[0]->type;
        scalar_region(o, "a per-element function");
        require(o.result()->type == m, o, "the result has the matrix's type");
        for (size_t i = 1; i < v.size(); ++i)
          require(v[i]->type.is_scalar() || v[i]->type == m, o,
                  cat("extra operand ", i, " must be a matrix of type ", m.str(), " or a scalar, got ", v[i]->type.str()));
        const Block& f = *o.regions[0];
        require(f.args.size() == v.size() + 2, o, "the function takes (row, col, value, one per extra operand)");
        const Op& y = *f.ops.back();
        require(y.operands.size() == 1 && y.operands[0]->type == Type::of(m.scalar), o,
                cat("the per-element function returns one ", name(m.scalar)));
        break;
      }
      case OpKind::mat_convert: {
        const Type &m = v[0]->type, &r = o.result()->type;
        require(r.is_matrix() && m.rows == r.rows && m.cols == r.cols && m.scope == r.scope, o,
                cat("convert keeps the shape and scope: ", m.str(), " -> ", r.str()));
        if (o.sub == 0)
          require(m.use == r.use || (m.use == Use::acc && (r.use == Use::a || r.use == Use::b)), o,
                  cat("convert changes use only from acc to a or b (SPV_NV_cooperative_matrix2): ", m.str(), " -> ",
                      r.str()));
        break;
      }
      case OpKind::mat_transpose: {
        const Type &m = v[0]->type, &r = o.result()->type;
        require(m.use == Use::acc && r.use == Use::b && r.rows == m.cols && r.cols == m.rows && r.scalar == m.scalar &&
                    r.scope == m.scope,
                o, cat("transpose takes acc M x N to b N x M of the same component and scope: ", m.str(), " -> ",
                       r.str()));
        break;
      }
      case OpKind::mat_length:
        require(v[0]->type.is_matrix(), o, "length takes a matrix");
        break;
      case OpKind::mat_get: case OpKind::mat_coord:
        require(v.size() == 2 && v[0]->type.is_matrix() && v[1]->type.is_index(), o,
                cat(mnemonic(o), " takes (matrix, index), got ", types(v)));
        break;
      case OpKind::mat_set:
        require(v.size() == 3 && v[0]->type.is_matrix() && v[1]->type.is_index() &&
                    v[2]->type == Type::of(v[0]->type.scalar),
                o, cat("set takes (matrix, index, element of the component type), got ", types(v)));
        break;
      case OpKind::mat_sum_accumulate: {
        const Type &a = v[0]->type, &b = v[1]->type, &c = v[2]->type;
        require(a.use == Use::a && b.use == Use::b && c.use == Use::acc, o,
                cat("sum_accumulate needs uses (a, b, acc), got ", types(v)));
        require(a.rows == c.rows && a.cols == c.cols && b.rows == c.rows && b.cols == c.cols, o,
                cat("sum_accumulate adds A and B element by element into acc: one shape, got ", types(v)));
        require(a.scope == b.scope && b.scope == c.scope, o, cat("one scope, got ", types(v)));
        require(products_allowed(a.scalar, b.scalar, c.scalar), o, cat("component types, got ", types(v)));
        break;
      }
      case OpKind::mat_outer_product: {
        const Type &x = v[0]->type, &y = v[1]->type, &r = o.result()->type;
        require(x.is_vector() && y.is_vector() && x.scalar == y.scalar, o,
                cat("outer_product takes two vectors of one component type, got ", types(v)));
        require(r.is_matrix() && r.use == Use::acc && r.rows == x.cols && r.cols == y.cols, o,
                cat("outer_product of vector<", x.cols, "> and vector<", y.cols, "> is an acc ", x.cols, " x ", y.cols,
                    " matrix, got ", r.str()));
        require(r.scalar == x.scalar || products_allowed(x.scalar, y.scalar, r.scalar), o,
                cat("outer_product component types, got ", types(v), " -> ", r.str()));
        break;
      }
      case OpKind::mat_accumulate:
        access(o, 1, v[0]->type);
        require(v[0]->type.use == Use::acc, o, cat("accumulate needs an accumulator matrix, got ", v[0]->type.str()));
        break;
      case OpKind::vec_matrix_mul: {
        const Type &x = v[0]->type, &m = v[1]->type, &r = o.result()->type;
        require(x.is_vector() && m.is_matrix() && m.use == Use::b && x.cols == m.rows, o,
                cat("vector x matrix takes vector<M> and a b matrix M x K, got ", types(v)));
        require(r.is_vector() && r.cols == m.cols, o, cat("the result is vector<", m.cols, ">, got ", r.str()));
        if (v.size() == 3)
          require(v[2]->type.is_vector() && v[2]->type.cols == m.cols, o,
                  cat("the bias is vector<", m.cols, ">, got ", v[2]->type.str()));
        break;
      }
      case OpKind::vec_load: case OpKind::vec_store: {
        bool load = o.kind == OpKind::vec_load;
        const Type& vt = load ? o.result()->type : v[0]->type;
        const Type& p = v[load ? 0 : 1]->type;
        require(vt.is_vector() && p.is_pointer() && p.scalar == vt.scalar, o,
                cat(mnemonic(o), " moves a vector through a pointer to its component type, got ", types(v)));
        for (size_t k = load ? 1 : 2; k < v.size(); ++k) require(v[k]->type.is_index(), o, "offset and stride are index");
        break;
      }
      case OpKind::cycles:
        require(v.empty() && o.results.size() == 1 && o.result()->type.is_index(), o, "cycles takes nothing and is an index");
        break;
      case OpKind::prefetch:
        require(v.size() == 2 && v[0]->type.is_pointer() && v[1]->type.is_index() && o.results.empty(), o,
                cat("prefetch takes (ptr, index), got ", types(v)));
        require(o.int_attr("write", 0) >= 0 && o.int_attr("write", 0) <= 1 && o.int_attr("locality", 3) >= 0 &&
                    o.int_attr("locality", 3) <= 3, o,
                cat("prefetch: write must be 0 or 1 and locality 0 to 3, got ", o.int_attr("write", 0), " and ",
                    o.int_attr("locality", 3)));
        break;
      case OpKind::work_id: {
        const auto w = static_cast<WorkId>(o.sub);
        require(v.empty() && o.results.size() == 1 && o.result()->type.is_index(), o, "an id takes nothing and is an index");
        if (w == WorkId::group || w == WorkId::groups)
          require(o.int_attr("dim", -1) >= 0 && o.int_attr("dim", -1) < 3, o, "the group dimension is 0, 1 or 2");
        break;
      }
      case OpKind::mat_mul_add: {
        require(v.size() == 3 && v[0]->type.is_matrix() && v[1]->type.is_matrix() && v[2]->type.is_matrix(), o,
                cat("mul_add takes three matrices, got ", types(v)));
        const Type &a = v[0]->type, &b = v[1]->type, &c = v[2]->type;
        require(a.use == Use::a && b.use == Use::b && c.use == Use::acc, o,
                cat("mul_add needs uses (a, b, acc), got (", name(a.use), ", ", name(b.use), ", ", name(c.use), ")"));
        require(a.cols == b.rows && a.rows == c.rows && b.cols == c.cols, o,
                cat("mul_add needs A MxK, B KxN and acc MxN, got A ", a.rows, "x", a.cols, ", B ", b.rows,
                    "x", b.cols, ", acc ", c.rows, "x", c.cols));
        require(a.scope == b.scope && b.scope == c.scope, o,
                cat("mul_add needs one scope for A, B and acc, got ", name(a.scope), ", ", name(b.scope),
                    ", ", name(c.scope)));
        // HLSL 0035 "Restrictions on Dimensions": K is a power of two in [4, 128] for thread and
        // wave (subgroup) scope, and in [1, 1024] for thread group (workgroup) scope; "sizes for
        // matrices of packed data types are 4 times the valid size for a scalar element": for
        // 8-bit A and B, K counts 8-bit elements up to 4 x 128 = 512 (4 x 1024 = 4096). The
        // smallest K stays 4 (0035's 8-bit lower bound is 4 x 4 = 16): coopjit takes the smaller
        // 8-bit K steps too, as its own GEMM plans use them (VNNI quads, K steps of 4 and 8).
        const int64_t x4 = is_packed_8bit(a.scalar) && is_packed_8bit(b.scalar) ? 4 : 1;
        if (a.scope == Scope::workgroup)
          require(a.cols >= 1 && a.cols <= 1024 * x4, o,
                  cat("K = ", a.cols, " must be in [1, ", 1024 * x4, "] for workgroup scope",
                      x4 > 1 ? " (8-bit A and B: 4 x 1024)" : ""));
        else
          require(a.cols >= 4 && a.cols <= 128 * x4 && (a.cols & (a.cols - 1)) == 0, o,
                  cat("K = ", a.cols, " must be a power of two in [4, ", 128 * x4, "] for ", name(a.scope), " scope",
                      x4 > 1 ? " (8-bit A and B: up to 4 x 128)" : ""));
        require(products_allowed(a.scalar, b.scalar, c.scalar), o,
                cat("mul_add component types: A and B of one type accumulating into the same type, ",
                    "i8/u8 into i32, or floats into an f32 / f64 accumulator that holds them (f16/bf16/f8/f32 into f32, ",
                    "any float into f64); got ", types(v)));
        require(o.result()->type == c, o, "the result has the accumulator's type");
        break;
      }
    }
  }

  const Function& f_;
  std::unordered_set<const Value*> defined_, seen_;
};

}  // namespace

void verify(const Function& f) { Verifier(f).run(); }

}  // namespace coopjit::ir
