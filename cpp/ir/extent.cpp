// The extents a kernel's pointer parameters need (extent.h): interval arithmetic over the IR.
#include "ir/extent.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "core/error.h"
#include "ir/printer.h"

namespace coopjit::ir {
namespace {

using i128 = __int128;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// The values an integer may take: [lo, hi] when bounded. `derivable` is false when the value
// depends on data (memory contents, matrix elements, floats, loop-carried values); `bounded` is
// false when the range is not known (at compile time: it depends on the call).
struct AV {
  bool derivable = true;
  bool bounded = false;
  int64_t lo = 0, hi = 0;

  static AV point(int64_t v) { return {true, true, v, v}; }
  static AV range(int64_t lo, int64_t hi) { return {true, true, lo, hi}; }
  static AV call() { return {true, false, 0, 0}; }  // known at the call
  static AV data() { return {false, false, 0, 0}; }
};

AV from128(bool derivable, i128 lo, i128 hi) {
  if (lo < kMin || hi > kMax) return {derivable, false, 0, 0};
  return {derivable, true, static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

AV unite(const AV& a, const AV& b) {
  AV r;
  r.derivable = a.derivable && b.derivable;
  r.bounded = a.bounded && b.bounded;
  if (r.bounded) { r.lo = std::min(a.lo, b.lo); r.hi = std::max(a.hi, b.hi); }
  return r;
}

// The four corners of f over the boxes (for add, sub, mul, div: monotone in each argument on
// intervals that exclude the divisor's zero).
template <typename F>
AV corners(const AV& a, const AV& b, F f) {
  const bool d = a.derivable && b.derivable;
  if (!a.bounded || !b.bounded) return {d, false, 0, 0};
  i128 v[4] = {f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)};
  return from128(d, *std::min_element(v, v + 4), *std::max_element(v, v + 4));
}

AV add(const AV& a, const AV& b) { return corners(a, b, [](i128 x, i128 y) { return x + y; }); }
AV mul(const AV& a, const AV& b) { return corners(a, b, [](i128 x, i128 y) { return x * y; }); }

// The range of an integer type: values of narrower types wrap in the lowering, so a range that
// leaves the type becomes the whole type.
AV fit(AV v, ScalarType t) {
  int64_t lo = kMin, hi = kMax;
  switch (t) {
    case ScalarType::i1: lo = 0; hi = 1; break;
    case ScalarType::i8: lo = -128; hi = 127; break;
    case ScalarType::u8: lo = 0; hi = 255; break;
    case ScalarType::i16: lo = -32768; hi = 32767; break;
    case ScalarType::u16: lo = 0; hi = 65535; break;
    case ScalarType::i32: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); break;
    case ScalarType::u32: lo = 0; hi = std::numeric_limits<uint32_t>::max(); break;
    case ScalarType::u64: if (v.bounded && v.lo < 0) v.bounded = false; return v;
    default: return v;  // i64, index
  }
  if (!v.bounded || v.lo < lo || v.hi > hi) return {v.derivable, true, lo, hi};
  return v;
}

bool is_int_type(const Type& t) { return t.is_scalar() && (is_integer(t.scalar) || t.scalar == ScalarType::i1); }

struct Ptr {
  int param = -1;  // the pointer parameter it points into; -1: not tracked
  AV offset = AV::point(0);
  const Value* shared = nullptr;  // or the groupshared array (groupshared.alloc's result) it points into
};

class Analysis {
 public:
  Analysis(const Function& f, const ExtentEnv& env) : f_(f), env_(env), out_(f.params.size()) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      const Value* p = f.params[i];
      if (p->type.is_pointer()) {
        ptrs_[p] = Ptr{static_cast<int>(i), AV::point(0), nullptr};
      } else if (is_int_type(p->type)) {
        if (env.ints && i < env.ints->size()) vals_[p] = fit(AV::point((*env.ints)[i]), p->type.scalar);
        else vals_[p] = AV::call();
      }
    }
  }

  bool call_dependent_ = false;

  std::vector<ParamExtent> run(int64_t top_ops) {
    const auto& ops = f_.body.ops;
    const size_t n = top_ops < 0 ? ops.size() : std::min(ops.size(), static_cast<size_t>(top_ops));
    for (size_t i = 0; i < n; ++i) op(*ops[i]);
    return std::move(out_);
  }

 private:
  const Function& f_;
  ExtentEnv env_;
  std::vector<ParamExtent> out_;
  std::unordered_map<const Value*, AV> vals_;
  std::unordered_map<const Value*, Ptr> ptrs_;

  AV val(const Value* v) const {
    auto it = vals_.find(v);
    return it == vals_.end() ? AV::data() : it->second;
  }
  Ptr ptr(const Value* v) const {
    auto it = ptrs_.find(v);
    return it == ptrs_.end() ? Ptr{} : it->second;
  }
  // select(lo <= x && x < hi, x, y) (the comparisons in either order, signed): x in [lo, hi - 1]
  // where it is chosen, whatever x depends on; so the result is derivable when lo, hi and y are.
  // A decode function reads its element this way (build/tensor_recipe.cpp).
  AV guarded_select(const Value* cond, const Value* x, const Value* y) const {
    AV plain = unite(val(x), val(y));
    const Op* a = cond->def;
    if (plain.derivable || !a || a->kind != OpKind::binary || static_cast<BinOp>(a->sub) != BinOp::and_) return plain;
    const Value *lo = nullptr, *hi = nullptr;
    for (const Value* c : a->operands) {
      const Op* k = c->def;
      if (!k || k->kind != OpKind::cmp || k->operands[0] != x || !x->type.is_scalar() ||
          !(x->type.scalar == ScalarType::index || x->type.scalar == ScalarType::i64))
        continue;
      if (static_cast<CmpPred>(k->sub) == CmpPred::ge) lo = k->operands[1];
      if (static_cast<CmpPred>(k->sub) == CmpPred::lt) hi = k->operands[1];
    }
    if (!lo || !hi) return plain;
    AV l = val(lo), h = val(hi);
    if (!l.derivable || !h.derivable) return plain;
    AV in = h.bounded ? add(h, AV::point(-1)) : h;
    in = l.bounded && in.bounded ? AV::range(l.lo, std::max(l.lo, in.hi)) : AV::call();
    return unite(in, val(y));
  }

  void set(const Value* v, AV a) {
    if (is_int_type(v->type)) vals_[v] = fit(a, v->type.scalar);
  }

  std::string param_name(int i) const {
    const Value* p = f_.params[static_cast<size_t>(i)];
    return p->hint.empty() ? cat("parameter ", i) : p->hint;
  }

  [[noreturn]] void underivable(const Op& o, const std::string& what) const {
    throw UserError(cat("cannot derive the elements this access touches: ", what,
                        ". Make the access checked (checked=True) with bounds that do not depend on data (only "
                        "elements inside the bounds are then touched), or compute the position from constants, "
                        "scalar parameters and loop counters\n  in: ", print_op(f_, o)));
  }

  // Records that `o` touches element offsets `off` (relative to the pointer) of the parameter
  // `p` points into.
  void touch(const Op& o, const Value* pv, AV off, bool write, int64_t row_stride = 0) {
    Ptr p = ptr(pv);
    if (p.shared) return touch_shared(o, p, off);
    if (p.param < 0) underivable(o, "the pointer does not come from a kernel parameter through ptr_offset");
    off = add(off, p.offset);
    ParamExtent& e = out_[static_cast<size_t>(p.param)];
    (write ? e.written : e.read) = true;
    if (!off.derivable) underivable(o, cat("the position in ", param_name(p.param), " depends on data"));
    if (!off.bounded) {
      if (e.bounded) {
        e.bounded = false;
        e.why = cat(env_.ints ? "the offsets overflow or a loop step may be below 1: " : "", print_op(f_, o));
      }
      return;
    }
    if (off.lo > off.hi) return;  // nothing touched
    if (!e.touched) {
      e.lo = off.lo; e.hi = off.hi; e.row_stride = row_stride;
    } else {
      e.lo = std::min(e.lo, off.lo); e.hi = std::max(e.hi, off.hi);
      if (e.row_stride != row_stride) e.row_stride = 0;
    }
    e.touched = true;
  }

  // An access to a groupshared array must stay inside it (HLSL: "the validator will ensure that
  // the group shared target memory is large enough"): refused when it may leave it; checked at
  // each call when its range depends on the call.
  void touch_shared(const Op& o, const Ptr& p, AV off) {
    off = add(off, p.offset);
    const int64_t n = p.shared->type.cols;
    if (!off.derivable) underivable(o, cat("the position in the groupshared array ", p.shared->type.str(), " depends on data"));
    if (!off.bounded) {
      if (env_.ints) underivable(o, cat("the positions in the groupshared array ", p.shared->type.str(), " overflow"));
      call_dependent_ = true;  // known at the call
      return;
    }
    if (off.lo > off.hi) return;
    if (off.lo < 0 || off.hi >= n)
      throw UserError(cat("the access reaches elements ", off.lo, " to ", off.hi, " of the groupshared array ",
                          p.shared->type.str(), ", which has elements 0 to ", n - 1,
                          ": give it positions, strides and bounds inside the array\n  in: ", print_op(f_, o)));
  }

  // One dimension of a matrix access: the coordinates it reaches, positions p .. p + n - 1,
  // intersected with [0, bound) for checked accesses (empty: lo > hi).
  static AV coords(const AV& p, int64_t n, bool checked, const AV& bound) {
    AV pos = add(p, AV::range(0, n - 1));
    if (!checked) return pos;
    if (!bound.derivable || !bound.bounded) return {bound.derivable, false, 0, 0};
    AV r = AV::range(0, bound.hi - 1);
    if (pos.bounded) { r.lo = std::max(r.lo, pos.lo); r.hi = std::min(r.hi, pos.hi); }
    return r;
  }

  void matrix_access(const Op& o, size_t base, const Type& m, bool checked, bool write) {
    const auto& v = o.operands;
    AV r = coords(val(v[base + 1]), m.rows, checked, val(v[base + 5]));
    AV c = coords(val(v[base + 2]), m.cols, checked, val(v[base + 6]));
    if ((r.bounded && r.lo > r.hi) || (c.bounded && c.lo > c.hi)) {  // nothing inside the bounds
      Ptr p = ptr(v[base]);
      if (p.shared) return;
      if (p.param >= 0) (write ? out_[p.param].written : out_[p.param].read) = true;
      return;
    }
    AV sr = val(v[base + 3]), sc = val(v[base + 4]);
    AV off = add(mul(r, sr), mul(c, sc));
    const int64_t row_stride = sr.bounded && sr.lo == sr.hi && sc.bounded && sc.lo == 1 && sc.hi == 1 ? sr.lo : 0;
    touch(o, v[base], off, write, row_stride);
  }

  void region(const Block& b) {
    for (const auto& o : b.ops) op(*o);
  }

  void op(const Op& o) {
    const auto& v = o.operands;
    switch (o.kind) {
      case OpKind::constant:
        if (auto* i = std::get_if<int64_t>(&o.attrs.at("value"))) set(o.result(), AV::point(*i));
        else vals_[o.result()] = AV::data();
        return;
      case OpKind::binary: {
        if (!is_int_type(o.result()->type)) return;
        AV x = val(v[0]), y = val(v[1]), r;
        const bool points = x.bounded && y.bounded && x.lo == x.hi && y.lo == y.hi;
        if (points && (static_cast<BinOp>(o.sub) == BinOp::rem || static_cast<BinOp>(o.sub) == BinOp::and_ ||
                       static_cast<BinOp>(o.sub) == BinOp::or_)) {  // exact for known values
          const int64_t a = x.lo, c = y.lo;
          if (static_cast<BinOp>(o.sub) == BinOp::and_) r = AV::point(a & c);
          else if (static_cast<BinOp>(o.sub) == BinOp::or_) r = AV::point(a | c);
          else if (c != 0 && !(a == kMin && c == -1)) r = AV::point(a % c);
          else r = {true, false, 0, 0};
          r.derivable = x.derivable && y.derivable;
          set(o.result(), r);
          return;
        }
        switch (static_cast<BinOp>(o.sub)) {
          case BinOp::add: r = add(x, y); break;
          case BinOp::sub: r = corners(x, y, [](i128 a, i128 b) { return a - b; }); break;
          case BinOp::mul: r = mul(x, y); break;
          case BinOp::div:
            if (y.bounded && (y.lo > 0 || y.hi < 0)) r = corners(x, y, [](i128 a, i128 b) { return a / b; });
            else r = {x.derivable && y.derivable, false, 0, 0};
            break;
          case BinOp::rem:
            if (x.bounded && y.bounded && (y.lo > 0 || y.hi < 0)) {
              const int64_t m = std::max(y.lo == kMin ? kMax : std::abs(y.lo), y.hi == kMin ? kMax : std::abs(y.hi)) - 1;
              r = AV::range(x.lo >= 0 ? 0 : std::max(-m, x.lo), x.hi <= 0 ? 0 : std::min(m, x.hi));
              r.derivable = x.derivable && y.derivable;
            } else {
              r = {x.derivable && y.derivable, false, 0, 0};
            }
            break;
          case BinOp::min: r = corners(x, y, [](i128 a, i128 b) { return std::min(a, b); }); break;
          case BinOp::max: r = corners(x, y, [](i128 a, i128 b) { return std::max(a, b); }); break;
          case BinOp::and_:
          case BinOp::or_: {
            r = {x.derivable && y.derivable, false, 0, 0};
            if (x.bounded && y.bounded && x.lo >= 0 && y.lo >= 0) {
              if (static_cast<BinOp>(o.sub) == BinOp::and_) {
                r.bounded = true; r.lo = 0; r.hi = std::min(x.hi, y.hi);
              } else {
                int64_t m = std::max(x.hi, y.hi), p = 1;
                while (p <= m && p < (int64_t(1) << 62)) p <<= 1;
                r.bounded = p > m; r.lo = 0; r.hi = p - 1;
              }
            }
            break;
          }
        }
        set(o.result(), r);
        return;
      }
      case OpKind::cmp: set(o.result(), AV::range(0, 1)); return;
      case OpKind::select:
        if (o.result()->type.is_pointer()) {
          Ptr a = ptr(v[1]), b = ptr(v[2]);
          if (a.param >= 0 && a.param == b.param) ptrs_[o.result()] = Ptr{a.param, unite(a.offset, b.offset), nullptr};
          return;
        }
        set(o.result(), guarded_select(v[0], v[1], v[2]));
        return;
      case OpKind::unary: {
        if (!is_int_type(o.result()->type)) return;
        AV x = val(v[0]);
        if (static_cast<UnOp>(o.sub) == UnOp::neg) set(o.result(), corners(x, AV::point(0), [](i128 a, i128) { return -a; }));
        else if (static_cast<UnOp>(o.sub) == UnOp::abs && x.bounded)
          set(o.result(), from128(x.derivable, x.lo >= 0 ? x.lo : (x.hi <= 0 ? -i128(x.hi) : 0),
                                  std::max(-i128(x.lo), i128(x.hi))));
        else set(o.result(), {x.derivable, false, 0, 0});
        return;
      }
      case OpKind::convert:
        if (is_int_type(v[0]->type)) {
          AV x = val(v[0]);
          if (v[0]->type.scalar == ScalarType::u64 && x.bounded && x.lo < 0) x.bounded = false;
          set(o.result(), x);
        } else {
          set(o.result(), AV::data());  // from a float
        }
        return;
      case OpKind::load:  // a scalar read: element index of the pointer; its value is data
        touch(o, v[0], val(v[1]), false);
        set(o.result(), AV::data());
        return;
      case OpKind::ptr_offset: {
        Ptr p = ptr(v[0]);
        if (p.param >= 0 || p.shared) ptrs_[o.result()] = Ptr{p.param, add(p.offset, val(v[1])), p.shared};
        return;
      }
      case OpKind::shared_alloc: ptrs_[o.result()] = Ptr{-1, AV::point(0), o.result()}; return;
      case OpKind::store: touch(o, v[0], val(v[1]), true); return;
      case OpKind::barrier: return;
      case OpKind::flag_set: touch(o, v[0], val(v[1]), true); return;
      case OpKind::flag_wait: touch(o, v[0], val(v[1]), false); return;
      case OpKind::for_: {
        const Block& body = *o.regions[0];
        AV lb = val(v[0]), ub = val(v[1]), step = val(v[2]);
        AV iv{lb.derivable && ub.derivable && step.derivable, false, 0, 0};
        bool dead = false;
        // A loop runs while iv < ub: a step below 1 never ends it once it has started.
        if (step.bounded && step.lo < 1 && !(lb.bounded && ub.bounded && ub.hi <= lb.lo))
          throw UserError(cat("a loop with step ", step.lo == step.hi ? cat(step.lo) : cat("in [", step.lo, ", ", step.hi, "]"),
                              " would never end (loops run while the counter is below the upper bound; the step must "
                              "be at least 1)\n  in: ", print_op(f_, o)));
        if (!step.bounded) call_dependent_ = true;
        if (lb.bounded && ub.bounded && step.bounded && step.lo >= 1 && i128(ub.hi) + step.hi <= kMax) {
          if (ub.hi <= lb.lo) {
            dead = true;
          } else if (lb.lo == lb.hi && ub.lo == ub.hi && step.lo == step.hi) {
            iv.bounded = true; iv.lo = lb.lo; iv.hi = lb.lo + (ub.lo - lb.lo - 1) / step.lo * step.lo;
          } else {
            iv.bounded = true; iv.lo = lb.lo; iv.hi = ub.hi - 1;
          }
        }
        vals_[body.args[0]] = iv;
        for (size_t i = 1; i < body.args.size(); ++i) carried(body.args[i]);
        if (!dead) region(body);
        for (Value* r : o.results) carried(r);
        return;
      }
      case OpKind::if_: {
        region(*o.regions[0]);
        region(*o.regions[1]);
        const Op& y0 = *o.regions[0]->ops.back();
        const Op& y1 = *o.regions[1]->ops.back();
        for (size_t i = 0; i < o.results.size() && i < y0.operands.size() && i < y1.operands.size(); ++i) {
          const Value* r = o.results[i];
          if (r->type.is_pointer()) {
            Ptr a = ptr(y0.operands[i]), b = ptr(y1.operands[i]);
            if (a.param >= 0 && a.param == b.param) ptrs_[r] = Ptr{a.param, unite(a.offset, b.offset), nullptr};
          } else {
            set(r, unite(val(y0.operands[i]), val(y1.operands[i])));
          }
        }
        return;
      }
      case OpKind::yield: return;
      case OpKind::mat_load:
        matrix_access(o, 0, o.result()->type, o.int_attr("checked") != 0, false);
        return;
      case OpKind::mat_store:
        matrix_access(o, 1, v[0]->type, o.int_attr("checked") != 0, true);
        return;
      case OpKind::mat_accumulate:  // every lowering adds only the elements inside the bounds
        matrix_access(o, 1, v[0]->type, true, true);
        return;
      case OpKind::vec_load:
      case OpKind::vec_store: {
        const bool store = o.kind == OpKind::vec_store;
        const Type& t = store ? v[0]->type : o.result()->type;
        const size_t base = store ? 1 : 0;
        AV off = add(val(v[base + 1]), mul(AV::range(0, t.cols - 1), val(v[base + 2])));
        touch(o, v[base], off, store);
        return;
      }
      case OpKind::mat_load_tensor:
      case OpKind::mat_store_tensor: {  // nothing outside ptr[0, extent) is touched
        const bool load = o.kind == OpKind::mat_load_tensor;
        AV ext = val(v[3]);
        if (ext.bounded) ext = AV::range(0, ext.hi - 1);
        if (load && !o.regions.empty()) {
          const Block& dec = *o.regions[0];
          for (Value* a : dec.args) vals_[a] = AV::data();
          region(dec);
        }
        touch(o, v[load ? 0 : 1], ext, !load);
        return;
      }
      case OpKind::mat_per_element: {
        const Block& body = *o.regions[0];
        const Type& t = v[0]->type;
        vals_[body.args[0]] = AV::range(0, t.rows - 1);
        vals_[body.args[1]] = AV::range(0, t.cols - 1);
        vals_[body.args[2]] = AV::data();
        for (size_t i = 3; i < body.args.size(); ++i) {
          const Value* x = v[i - 2];
          vals_[body.args[i]] = x->type.is_matrix() ? AV::data() : val(x);
        }
        region(body);
        return;
      }
      case OpKind::mat_reduce:
        for (const auto& r : o.regions) {
          for (Value* a : r->args) vals_[a] = AV::data();
          region(*r);
        }
        return;
      case OpKind::mat_length: set(o.result(), AV::range(0, v[0]->type.rows * v[0]->type.cols)); return;
      case OpKind::mat_coord:
        set(o.results[0], AV::range(0, v[0]->type.rows - 1));
        set(o.results[1], AV::range(0, v[0]->type.cols - 1));
        return;
      case OpKind::mat_get: set(o.result(), AV::data()); return;
      case OpKind::work_id: {
        const int64_t sg = std::max<int64_t>(env_.subgroup_size, 1), wg = std::max<int64_t>(env_.work_group_size, 1);
        const int64_t dim = o.int_attr("dim", 0);
        switch (static_cast<WorkId>(o.sub)) {
          case WorkId::lane: set(o.result(), AV::range(0, sg - 1)); return;
          case WorkId::subgroup: set(o.result(), AV::range(0, std::max<int64_t>(wg / sg, 1) - 1)); return;
          case WorkId::subgroups: set(o.result(), AV::point(std::max<int64_t>(wg / sg, 1))); return;
          case WorkId::group:
            if (dim != 0) set(o.result(), AV::point(0));  // launches are one-dimensional
            else set(o.result(), env_.groups < 0 ? AV::call() : AV::range(0, env_.groups - 1));
            return;
          case WorkId::groups:
            if (dim != 0) set(o.result(), AV::point(1));
            else set(o.result(), env_.groups < 0 ? AV::call() : AV::point(env_.groups));
            return;
        }
        return;
      }
      default:
        // Matrix arithmetic, tensor layouts and views: no memory, no integer results (the
        // regions of the ones above excepted). An integer result not handled is data.
        for (const auto& r : o.regions) {
          for (Value* a : r->args) vals_[a] = AV::data();
          region(*r);
        }
        for (Value* r : o.results)
          if (is_int_type(r->type)) vals_[r] = AV::data();
        return;
    }
  }

  // A loop-carried value (or a loop's result): data for integers, untracked for pointers.
  void carried(const Value* v) {
    if (is_int_type(v->type)) vals_[v] = AV::data();
  }
};

}  // namespace

std::vector<ParamExtent> analyze_extents(const Function& f, const ExtentEnv& env, int64_t top_ops,
                                         bool* call_dependent) {
  Analysis a(f, env);
  std::vector<ParamExtent> out = a.run(top_ops);
  if (call_dependent) *call_dependent = a.call_dependent_;
  return out;
}

bool extents_depend_on_call(const std::vector<ParamExtent>& e) {
  for (const auto& p : e)
    if (!p.bounded) return true;
  return false;
}

}  // namespace coopjit::ir
