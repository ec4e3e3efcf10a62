// Workgroup-scope matrices in the SIMT lowering (SPV_NV_cooperative_matrix2's workgroup scope,
// HLSL 0035's ThreadGroup scope): a matrix spread over all the subgroups of a work-group.
//
// Storage: work-group shared memory (SPIR-V Workgroup, PTX .shared; SimtTarget's
// shared_addrspace), one buffer per matrix value, its M x N elements row-major (element (i, j)
// at i * N + j). Work-item t = subgroup * S + lane of the W = S x subgroups work-items owns the
// elements e = t, t + W, t + 2W, ... of every matrix: it computes them, and reads any element it
// needs. Each operation reads its operands' buffers, writes its own, then waits at a work-group
// barrier, so the next operation sees the whole result; an operation never writes a buffer it
// reads (each has its own; values carried by loops and branches are copied into buffers of their
// own, so an operation inside a loop never overwrites what its own earlier iteration left for a
// later one). The barriers make these operations work-group uniform: they must not sit in
// control flow that differs between the work-items (HLSL requires this for ThreadGroup scope).
//
// Why memory and not registers: mul_add reads whole rows of A and columns of B, a reduction whole
// rows or columns, a transpose or a use conversion moves every element to another owner; across
// subgroups those moves go through shared memory whatever the register layout, and a row-major
// shared tile is what the hardware's work-group-wide operations read (Hopper's wgmma takes A and
// B from shared memory); the lowering stays target-neutral (simt_target.h: the work-item ids,
// the barrier and the address space are all it asks of the target).
#include <llvm/IR/Intrinsics.h>

#include "lower/ir_to_llvm.h"
#include "lower/simt_lowering.h"

namespace coopjit {

namespace {
bool uses_workgroup(const Block& blk) {
  for (const auto& op : blk.ops) {
    for (const Value* v : op->operands)
      if (is_workgroup_matrix(v->type)) return true;
    for (const Value* v : op->results)
      if (is_workgroup_matrix(v->type)) return true;
    for (const auto& r : op->regions)
      if (uses_workgroup(*r)) return true;
  }
  return false;
}
}  // namespace

bool is_workgroup_matrix(const Type& t) { return t.is_matrix() && t.scope == Scope::workgroup; }

void SimtLowering::wg_setup() {
  if (!uses_workgroup(f_.body)) return;
  llvm::Value* sg = target_.work_id(b_, WorkId::subgroup, 0);
  wg_tid_ = b_.CreateAdd(b_.CreateMul(sg, b_.getInt64(S_)), lane64_, "wg.tid");
}

llvm::Value* SimtLowering::wg_buffer(const Type& t) {
  const int64_t n = t.rows * t.cols;
  const int64_t bytes = (n * size_in_bytes(t.scalar) + 15) / 16 * 16;
  if (wg_bytes_ + bytes > kWorkgroupBytes)
    throw UserError(cat("SIMT lowering: the workgroup-scope matrices of kernel ", f_.name, " need more than ",
                        kWorkgroupBytes, " bytes of work-group shared memory (", wg_bytes_ + bytes, " with ", t.str(),
                        "): use smaller matrices or fewer of them"));
  wg_bytes_ += bytes;
  auto* ty = llvm::ArrayType::get(scalar_ty(t.scalar), static_cast<uint64_t>(n));
  auto* g = new llvm::GlobalVariable(*mod_, ty, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(ty),
                                     "wg_matrix", nullptr, llvm::GlobalValue::NotThreadLocal, target_.shared_addrspace());
  g->setAlignment(llvm::Align(16));
  return g;
}

// A uniform loop over n (the same trip count on every work-item), e = n W + wg_tid_, guarded by
// e < count when W does not divide it. (A loop whose counter starts at the work-item id was
// miscompiled by Intel's CPU OpenCL runtime: with e / N * stride addressing, lanes 8 to 15 read
// the wrong elements whenever the stride was not 8 or 16.)
void SimtLowering::wg_each(int64_t count, const std::function<void(llvm::Value*)>& body) {
  const int64_t W = int64_t(S_) * sgs_, trips = (count + W - 1) / W;
  emit_for(b_, fn_, b_.getInt64(0), b_.getInt64(trips), b_.getInt64(1), {},
           [&](llvm::Value* n, const std::vector<llvm::Value*>&) {
             llvm::Value* e = b_.CreateAdd(b_.CreateMul(n, b_.getInt64(W)), wg_tid_);
             if (count % W == 0) body(e);
             else guarded(b_.CreateICmpULT(e, b_.getInt64(count)), [&] { body(e); });
             return std::vector<llvm::Value*>{};
           });
}

llvm::Value* SimtLowering::wg_get(llvm::Value* buf, ScalarType t, llvm::Value* e) {
  return b_.CreateAlignedLoad(scalar_ty(t), b_.CreateGEP(scalar_ty(t), buf, e), align(t));
}

int64_t SimtLowering::wg_slots(const Type& t) const {
  const int64_t W = int64_t(S_) * sgs_;
  return (t.rows * t.cols + W - 1) / W;
}

void SimtLowering::wg_set(llvm::Value* buf, ScalarType t, llvm::Value* e, llvm::Value* v) {
  b_.CreateAlignedStore(v, b_.CreateGEP(scalar_ty(t), buf, e), align(t));
}

std::vector<llvm::Value*> SimtLowering::wg_carry(const std::vector<Value*>& results, const std::vector<llvm::Value*>& vals,
                                                 std::vector<llvm::Value*>& carriers) {
  if (carriers.empty()) {  // first call: a buffer for each workgroup-scope matrix among the results
    for (const Value* r : results) {
      if (is_workgroup_matrix(r->type)) carriers.push_back(wg_buffer(r->type));
      else for (size_t k = 0; k < parts(r->type); ++k) carriers.push_back(nullptr);
    }
  }
  std::vector<llvm::Value*> out = vals;
  size_t pos = 0;
  bool copied = false;
  for (const Value* r : results) {
    if (is_workgroup_matrix(r->type)) {
      const ScalarType t = r->type.scalar;
      llvm::Value *src = vals[pos], *dst = carriers[pos];
      wg_each(r->type.rows * r->type.cols, [&](llvm::Value* e) { wg_set(dst, t, e, wg_get(src, t, e)); });
      out[pos] = dst;
      copied = true;
      ++pos;
    } else {
      pos += parts(r->type);
    }
  }
  if (copied) target_.barrier(b_);
  return out;
}

// ---- the operations ------------------------------------------------------------------------------
void SimtLowering::workgroup_op(const Op& o) {
  const auto& v = o.operands;
  auto done = [&](llvm::Value* buf) {
    target_.barrier(b_);
    if (buf) mats_[o.result()] = {buf};
  };
  auto buf_of = [&](const Value* x) { return mat(x)[0]; };
  switch (o.kind) {
    case OpKind::mat_load: case OpKind::mat_store: {
      if (o.int_attr("vnni", 1) != 1)
        throw InternalError(cat("the SIMT lowering does not take vnni-packed memory: ", mnemonic(o)));
      // The memory's element type differs from the component type only for a groupshared array
      // (HLSL 0035: converted on the way).
      const bool load = o.kind == OpKind::mat_load;
      const Type& t = load ? o.result()->type : v[0]->type;
      const Access a = access(o, load ? 0 : 1);
      const bool checked = o.int_attr("checked");
      const ScalarType mt = v[load ? 0 : 1]->type.scalar;
      llvm::Type* ty = scalar_ty(mt);
      llvm::Value* buf = load ? wg_buffer(t) : buf_of(v[0]);
      wg_each(t.rows * t.cols, [&](llvm::Value* e) {
        llvm::Value* row = b_.CreateAdd(a.row, b_.CreateUDiv(e, b_.getInt64(t.cols)));
        llvm::Value* col = b_.CreateAdd(a.col, b_.CreateURem(e, b_.getInt64(t.cols)));
        llvm::Value* ok = checked ? b_.CreateAnd(b_.CreateICmpULT(row, a.rows), b_.CreateICmpULT(col, a.cols)) : b_.getTrue();
        llvm::Value* ptr = b_.CreateGEP(ty, a.ptr, b_.CreateAdd(b_.CreateMul(row, a.sr), b_.CreateMul(col, a.sc)));
        if (load) wg_set(buf, t.scalar, e, convert_value(guarded_load(ok, ty, ptr, align(mt)), mt, t.scalar));
        else guarded(ok, [&] { b_.CreateAlignedStore(convert_value(wg_get(buf, t.scalar, e), t.scalar, mt), ptr, align(mt)); });
      });
      done(load ? buf : nullptr);
      return;
    }
    case OpKind::mat_accumulate: {
      // Each work-item adds the elements it owns, atomically (other work-groups, or other
      // operations, may add to the same memory), in the memory's element type (HLSL 0035: the
      // matrix's component type for a buffer; a groupshared array's own type, converted to).
      const Type& t = v[0]->type;
      const Access a = access(o, 1);
      const ScalarType mt = v[1]->type.scalar;
      llvm::Value* src = buf_of(v[0]);
      wg_each(t.rows * t.cols, [&](llvm::Value* e) {
        llvm::Value* row = b_.CreateAdd(a.row, b_.CreateUDiv(e, b_.getInt64(t.cols)));
        llvm::Value* col = b_.CreateAdd(a.col, b_.CreateURem(e, b_.getInt64(t.cols)));
        llvm::Value* ok = b_.CreateAnd(b_.CreateICmpULT(row, a.rows), b_.CreateICmpULT(col, a.cols));
        guarded(ok, [&] {
          llvm::Value* ptr = b_.CreateGEP(scalar_ty(mt), a.ptr, b_.CreateAdd(b_.CreateMul(row, a.sr), b_.CreateMul(col, a.sc)));
          atomic_add(mt, ptr, convert_value(wg_get(src, t.scalar, e), t.scalar, mt));
        });
      });
      done(nullptr);
      return;
    }
    case OpKind::mat_outer_product: {
      // Element (i, j) = x[i] * y[j] in the result's type, from the vectors of the work-item that
      // owns it (HLSL's ThreadGroup scope: the vectors are the same on every work-item).
      const Type& r = o.result()->type;
      llvm::Value* buf = wg_buffer(r);
      std::vector<llvm::Value*> xs = mat(v[0]), ys = mat(v[1]);
      for (auto& x : xs) x = convert_value(x, v[0]->type.scalar, r.scalar);
      for (auto& y : ys) y = convert_value(y, v[1]->type.scalar, r.scalar);
      wg_each(r.rows * r.cols, [&](llvm::Value* e) {
        llvm::Value* i = b_.CreateUDiv(e, b_.getInt64(r.cols));
        llvm::Value* j = b_.CreateURem(e, b_.getInt64(r.cols));
        wg_set(buf, r.scalar, e, scalar_bin(BinOp::mul, r.scalar, select_component(xs, i), select_component(ys, j)));
      });
      done(buf);
      return;
    }
    case OpKind::mat_splat: {
      const Type& t = o.result()->type;
      llvm::Value* buf = wg_buffer(t);
      llvm::Value* s = scalar(v[0]);
      if (lane_varying(v[0])) {  // HLSL's Splat: the first work-item's value, through the buffer
        llvm::Value* first = b_.CreateICmpEQ(wg_tid_, b_.getInt64(0));
        guarded(first, [&] { wg_set(buf, t.scalar, b_.getInt64(0), s); });
        target_.barrier(b_);
        s = wg_get(buf, t.scalar, b_.getInt64(0));
        target_.barrier(b_);
      }
      wg_each(t.rows * t.cols, [&](llvm::Value* e) { wg_set(buf, t.scalar, e, s); });
      done(buf);
      return;
    }
    case OpKind::mat_scale: case OpKind::mat_binary: {
      const Type& t = o.result()->type;
      llvm::Value* buf = wg_buffer(t);
      llvm::Value* x = buf_of(v[0]);
      wg_each(t.rows * t.cols, [&](llvm::Value* e) {
        llvm::Value* a = wg_get(x, t.scalar, e);
        llvm::Value* r = o.kind == OpKind::mat_scale
                             ? scalar_bin(BinOp::mul, t.scalar, a, scalar(v[1]))
                             : scalar_bin(static_cast<BinOp>(o.sub), t.scalar, a, wg_get(buf_of(v[1]), t.scalar, e));
        wg_set(buf, t.scalar, e, r);
      });
      done(buf);
      return;
    }
    case OpKind::mat_per_element: {
      const Type& t = v[0]->type;
      llvm::Value* buf = wg_buffer(o.result()->type);
      wg_each(t.rows * t.cols, [&](llvm::Value* e) {
        std::vector<llvm::Value*> args{b_.CreateUDiv(e, b_.getInt64(t.cols)), b_.CreateURem(e, b_.getInt64(t.cols)),
                                       wg_get(buf_of(v[0]), t.scalar, e)};
        for (size_t k = 1; k < v.size(); ++k)
          args.push_back(v[k]->type.is_matrix() ? wg_get(buf_of(v[k]), v[k]->type.scalar, e) : scalar(v[k]));
        wg_set(buf, o.result()->type.scalar, e, lower_region(*o.regions[0], args));
      });
      done(buf);
      return;
    }
    case OpKind::mat_mul_add: {
      // D[i, j] = C[i, j] + sum over k of A[i, k] B[k, j], k in order, the inputs widened to C's
      // component type first (as the subgroup mul_add: fmuladd for floats).
      const Type &ta = v[0]->type, &tb = v[1]->type, &tc = v[2]->type;
      llvm::Value* buf = wg_buffer(tc);
      llvm::Value *A = buf_of(v[0]), *B = buf_of(v[1]), *C = buf_of(v[2]);
      const int64_t K = ta.cols, N = tc.cols;
      const bool fp = is_float(tc.scalar);
      wg_each(tc.rows * N, [&](llvm::Value* e) {
        llvm::Value* i = b_.CreateUDiv(e, b_.getInt64(N));
        llvm::Value* j = b_.CreateURem(e, b_.getInt64(N));
        llvm::Value* arow = b_.CreateMul(i, b_.getInt64(K));
        auto acc = emit_for(b_, fn_, b_.getInt64(0), b_.getInt64(K), b_.getInt64(1), {wg_get(C, tc.scalar, e)},
                            [&](llvm::Value* k, const std::vector<llvm::Value*>& c) {
                              llvm::Value* a = convert_value(wg_get(A, ta.scalar, b_.CreateAdd(arow, k)), ta.scalar, tc.scalar);
                              llvm::Value* x = convert_value(wg_get(B, tb.scalar, b_.CreateAdd(b_.CreateMul(k, b_.getInt64(N)), j)),
                                                             tb.scalar, tc.scalar);
                              return std::vector<llvm::Value*>{
                                  fp ? b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, x, c[0]})
                                     : b_.CreateAdd(b_.CreateMul(a, x), c[0])};
                            });
        wg_set(buf, tc.scalar, e, acc[0]);
      });
      done(buf);
      return;
    }
    case OpKind::mat_reduce: {
      // Result element (i, j): row i (Row), column j (Column), everything (Row|Column) or the
      // 2 x 2 block at (2i, 2j) of the source, combined in row-major order.
      const Type &ts = v[0]->type, &tr = o.result()->type;
      const auto mode = static_cast<ReduceMode>(o.sub);
      llvm::Value* buf = wg_buffer(tr);
      llvm::Value* x = buf_of(v[0]);
      const ScalarType T = ts.scalar;
      auto fold = [&](llvm::Value* base, int64_t count, int64_t step, llvm::Value* init) {
        return emit_for(b_, fn_, b_.getInt64(1), b_.getInt64(count), b_.getInt64(1), {init},
                        [&](llvm::Value* k, const std::vector<llvm::Value*>& c) {
                          llvm::Value* at = b_.CreateAdd(base, b_.CreateMul(k, b_.getInt64(step)));
                          return std::vector<llvm::Value*>{combine(o, T, c[0], wg_get(x, T, at))};
                        })[0];
      };
      wg_each(tr.rows * tr.cols, [&](llvm::Value* e) {
        llvm::Value* i = b_.CreateUDiv(e, b_.getInt64(tr.cols));
        llvm::Value* j = b_.CreateURem(e, b_.getInt64(tr.cols));
        llvm::Value* r = nullptr;
        switch (mode) {
          case ReduceMode::row: {
            llvm::Value* base = b_.CreateMul(i, b_.getInt64(ts.cols));
            r = fold(base, ts.cols, 1, wg_get(x, T, base));
            break;
          }
          case ReduceMode::column:
            r = fold(j, ts.rows, ts.cols, wg_get(x, T, j));
            break;
          case ReduceMode::both:
            r = fold(b_.getInt64(0), ts.rows * ts.cols, 1, wg_get(x, T, b_.getInt64(0)));
            break;
          case ReduceMode::quad: {
            llvm::Value* base = b_.CreateAdd(b_.CreateMul(b_.CreateMul(i, b_.getInt64(2)), b_.getInt64(ts.cols)),
                                             b_.CreateMul(j, b_.getInt64(2)));
            const int64_t offs[4] = {0, 1, ts.cols, ts.cols + 1};
            for (int64_t d : offs) {
              llvm::Value* y = wg_get(x, T, b_.CreateAdd(base, b_.getInt64(d)));
              r = r ? combine(o, T, r, y) : y;
            }
            break;
          }
        }
        wg_set(buf, tr.scalar, e, r);
      });
      done(buf);
      return;
    }
    case OpKind::mat_convert: case OpKind::mat_transpose: {
      // Component type and use (the storage does not depend on the use): element by element;
      // a transpose reads element (j, i) for (i, j).
      const Type &ts = v[0]->type, &tr = o.result()->type;
      llvm::Value* buf = wg_buffer(tr);
      llvm::Value* x = buf_of(v[0]);
      const bool tr_ = o.kind == OpKind::mat_transpose;
      wg_each(tr.rows * tr.cols, [&](llvm::Value* e) {
        llvm::Value* from = e;
        if (tr_) {
          llvm::Value* i = b_.CreateUDiv(e, b_.getInt64(tr.cols));
          llvm::Value* j = b_.CreateURem(e, b_.getInt64(tr.cols));
          from = b_.CreateAdd(b_.CreateMul(j, b_.getInt64(ts.cols)), i);
        }
        wg_set(buf, tr.scalar, e, convert_value(wg_get(x, ts.scalar, from), ts.scalar, tr.scalar));
      });
      done(buf);
      return;
    }
    case OpKind::mat_load_tensor: case OpKind::mat_store_tensor: {
      // Element by element through the layout and view, as a subgroup's (simt_memory.cpp).
      const TensorOp t = tensor_op(o);
      const Type& mt = t.matrix->type;
      llvm::Value* src = buf_of(t.matrix);
      llvm::Value* buf = t.load ? wg_buffer(mt) : nullptr;
      wg_each(mt.rows * mt.cols, [&](llvm::Value* e) {
        llvm::Value* r = tensor_element_access(o, t, b_.CreateUDiv(e, b_.getInt64(mt.cols)),
                                               b_.CreateURem(e, b_.getInt64(mt.cols)), b_.getTrue(),
                                               wg_get(src, mt.scalar, e));
        if (t.load) wg_set(buf, mt.scalar, e, r);
      });
      done(buf);
      return;
    }
    case OpKind::mat_sum_accumulate: {  // C + (A + B), one shape (the verifier's rule)
      const Type& tc = v[2]->type;
      llvm::Value* buf = wg_buffer(tc);
      wg_each(tc.rows * tc.cols, [&](llvm::Value* e) {
        auto at = [&](const Value* x) { return convert_value(wg_get(buf_of(x), x->type.scalar, e), x->type.scalar, tc.scalar); };
        llvm::Value* sum = scalar_bin(BinOp::add, tc.scalar, at(v[0]), at(v[1]));
        wg_set(buf, tc.scalar, e, scalar_bin(BinOp::add, tc.scalar, wg_get(buf_of(v[2]), tc.scalar, e), sum));
      });
      done(buf);
      return;
    }
    case OpKind::mat_length:  // HLSL's Length: the elements each work-item holds, padding included
      scalars_[o.result()] = b_.getInt64(wg_slots(v[0]->type));
      return;
    case OpKind::mat_get: case OpKind::mat_coord: {
      // Component i of work-item t: element i W + t (padding beyond the matrix: get reads 0,
      // get_coordinate gives UINT32_MAX as on subgroups).
      const Type& t = v[0]->type;
      llvm::Value* i = scalar(v[1]);
      llvm::Value* e = b_.CreateAdd(b_.CreateMul(i, b_.getInt64(int64_t(S_) * sgs_)), wg_tid_);
      llvm::Value* ok = b_.CreateAnd(b_.CreateICmpULT(i, b_.getInt64(wg_slots(t))), b_.CreateICmpULT(e, b_.getInt64(t.rows * t.cols)));
      if (o.kind == OpKind::mat_get) {
        llvm::Value* idx = b_.CreateSelect(ok, e, b_.getInt64(0));
        scalars_[o.result()] = b_.CreateSelect(ok, wg_get(buf_of(v[0]), t.scalar, idx), zero(t.scalar));
        return;
      }
      llvm::Value* bad = b_.getInt64(0xFFFFFFFFu);
      scalars_[o.results[0]] = b_.CreateSelect(ok, b_.CreateUDiv(e, b_.getInt64(t.cols)), bad);
      scalars_[o.results[1]] = b_.CreateSelect(ok, b_.CreateURem(e, b_.getInt64(t.cols)), bad);
      return;
    }
    case OpKind::mat_set: {  // a copy with this work-item's component i replaced
      const Type& t = v[0]->type;
      llvm::Value* buf = wg_buffer(t);
      llvm::Value* x = buf_of(v[0]);
      wg_each(t.rows * t.cols, [&](llvm::Value* e) { wg_set(buf, t.scalar, e, wg_get(x, t.scalar, e)); });
      llvm::Value* i = scalar(v[1]);
      llvm::Value* e = b_.CreateAdd(b_.CreateMul(i, b_.getInt64(int64_t(S_) * sgs_)), wg_tid_);
      llvm::Value* ok = b_.CreateAnd(b_.CreateICmpULT(i, b_.getInt64(wg_slots(t))), b_.CreateICmpULT(e, b_.getInt64(t.rows * t.cols)));
      guarded(ok, [&] { wg_set(buf, t.scalar, e, scalar(v[2])); });  // e is this work-item's: no race
      done(buf);
      return;
    }
    default:
      break;
  }
  std::string type;
  for (const Value* x : v)
    if (is_workgroup_matrix(x->type)) type = x->type.str();
  for (const Value* x : o.results)
    if (is_workgroup_matrix(x->type)) type = x->type.str();
  throw UserError(cat("SIMT lowering: ", mnemonic(o), " on ", type,
                      ": workgroup-scope matrices support load, store, accumulate, load_tensor, store_tensor, splat, "
                      "scale, element-wise arithmetic, per_element, mul_add, reduce, convert, cast, transpose, "
                      "sum_accumulate, outer_product, length, get, set and get_coordinate on GPUs so far"));
}

}  // namespace coopjit
