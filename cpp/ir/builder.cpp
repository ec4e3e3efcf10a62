// Implementation of ir::Builder (builder.h).
#include "ir/builder.h"

#include "core/error.h"

namespace coopjit::ir {

Op* Builder::append(OpKind kind, std::vector<Value*> operands, const std::vector<Type>& results,
                    std::vector<std::string> hints) {
  auto op = std::make_unique<Op>();
  op->kind = kind;
  for (Value* v : operands) COOPJIT_INTERNAL_ASSERT(v != nullptr, "null operand");
  op->operands = std::move(operands);
  for (size_t i = 0; i < results.size(); ++i) {
    Value* r = f_.new_value(results[i], i < hints.size() ? hints[i] : std::string());
    r->def = op.get();
    op->results.push_back(r);
  }
  block_->ops.push_back(std::move(op));
  return block_->ops.back().get();
}

Value* Builder::index(int64_t v, std::string hint) {
  Op* op = append(OpKind::constant, {}, {Type::index()}, {std::move(hint)});
  op->attrs["value"] = v;
  return op->result();
}

Value* Builder::constant(double v, ScalarType t, std::string hint) {
  Op* op = append(OpKind::constant, {}, {Type::of(t)}, {std::move(hint)});
  if (is_float(t))
    op->attrs["value"] = v;
  else
    op->attrs["value"] = static_cast<int64_t>(v);
  return op->result();
}

Value* Builder::bin(BinOp b, Value* x, Value* y, std::string hint) {
  Op* op = append(OpKind::binary, {x, y}, {x->type}, {std::move(hint)});
  op->sub = static_cast<int>(b);
  return op->result();
}

Value* Builder::cmp(CmpPred p, Value* x, Value* y, std::string hint) {
  Op* op = append(OpKind::cmp, {x, y}, {Type::boolean()}, {std::move(hint)});
  op->sub = static_cast<int>(p);
  return op->result();
}

Value* Builder::select(Value* c, Value* x, Value* y, std::string hint) {
  return append(OpKind::select, {c, x, y}, {x->type}, {std::move(hint)})->result();
}

void Builder::yield(const std::vector<Value*>& values) { append(OpKind::yield, values, {}); }

std::vector<Value*> Builder::for_(Value* lb, Value* ub, Value* step, const std::vector<Value*>& inits,
                                  const ForBody& body, std::string iv_hint) {
  std::vector<Value*> operands{lb, ub, step};
  std::vector<Type> types;
  for (Value* v : inits) {
    operands.push_back(v);
    types.push_back(v->type);
  }
  Op* op = append(OpKind::for_, operands, types);
  for (size_t i = 0; i < inits.size(); ++i) op->results[i]->hint = inits[i]->hint;
  auto region = std::make_unique<Block>();
  region->parent = op;
  Value* iv = f_.new_value(Type::index(), std::move(iv_hint));
  region->args.push_back(iv);
  std::vector<Value*> iters;
  for (Value* v : inits) {
    iters.push_back(f_.new_value(v->type, v->hint));
    region->args.push_back(iters.back());
  }
  Block* blk = region.get();
  op->regions.push_back(std::move(region));
  Builder inner(f_, blk);
  inner.yield(body(inner, iv, iters));
  return op->results;
}

std::vector<Value*> Builder::if_(Value* cond, const std::vector<Type>& result_types,
                                 const IfBody& then_body, const IfBody& else_body) {
  Op* op = append(OpKind::if_, {cond}, result_types);
  for (const IfBody* body : {&then_body, &else_body}) {
    auto region = std::make_unique<Block>();
    region->parent = op;
    Block* blk = region.get();
    op->regions.push_back(std::move(region));
    Builder inner(f_, blk);
    inner.yield(*body ? (*body)(inner) : std::vector<Value*>{});
  }
  return op->results;
}

Value* Builder::load(Type matrix, const Access& a, bool checked, std::string hint) {
  Op* op = append(OpKind::mat_load, {a.ptr, a.row, a.col, a.stride_row, a.stride_col, a.rows, a.cols},
                  {matrix}, {std::move(hint)});
  op->attrs["checked"] = int64_t(checked);
  return op->result();
}

void Builder::store(Value* m, const Access& a, bool checked) {
  Op* op = append(OpKind::mat_store,
                  {m, a.ptr, a.row, a.col, a.stride_row, a.stride_col, a.rows, a.cols}, {});
  op->attrs["checked"] = int64_t(checked);
}

Value* Builder::splat(Type matrix, Value* scalar, std::string hint) {
  return append(OpKind::mat_splat, {scalar}, {matrix}, {std::move(hint)})->result();
}

Value* Builder::mul_add(Value* a, Value* b, Value* c, std::string hint) {
  return append(OpKind::mat_mul_add, {a, b, c}, {c->type}, {std::move(hint)})->result();
}

Value* Builder::scale(Value* m, Value* s, std::string hint) {
  return append(OpKind::mat_scale, {m, s}, {m->type}, {std::move(hint)})->result();
}

Value* Builder::mat_bin(BinOp b, Value* x, Value* y, std::string hint) {
  Op* op = append(OpKind::mat_binary, {x, y}, {x->type}, {std::move(hint)});
  op->sub = static_cast<int>(b);
  return op->result();
}

Value* Builder::tensor_layout(ClampMode clamp, const LayoutFields& f, std::string hint) {
  const int rank = static_cast<int>(f.dim.size());
  std::vector<Value*> ops;
  for (const auto* part : {&f.block, &f.dim, &f.stride, &f.offset, &f.span}) {
    COOPJIT_INTERNAL_ASSERT(static_cast<int>(part->size()) == rank, "tensor layout fields differ in rank");
    ops.insert(ops.end(), part->begin(), part->end());
  }
  ops.push_back(f.clamp_value);
  return append(OpKind::tensor_layout, ops, {Type::tensor_layout(rank, clamp)}, {std::move(hint)})->result();
}

Value* Builder::tensor_view(int rank, const std::array<int8_t, 5>& perm, const std::vector<Value*>& dims,
                            const std::vector<Value*>& strides, const std::array<Value*, 4>& clip, std::string hint) {
  std::vector<Value*> ops(dims.begin(), dims.end());
  ops.insert(ops.end(), strides.begin(), strides.end());
  ops.insert(ops.end(), clip.begin(), clip.end());
  return append(OpKind::tensor_view, ops, {Type::tensor_view(rank, !dims.empty(), perm)}, {std::move(hint)})
      ->result();
}

Value* Builder::load_tensor(Value* ptr, Value* object, Value* layout, Value* view, Value* extent, std::string hint) {
  std::vector<Value*> ops{ptr, object, layout, extent};
  if (view) ops.push_back(view);
  return append(OpKind::mat_load_tensor, ops, {object->type}, {std::move(hint)})->result();
}

Value* Builder::load_tensor(Value* ptr, Value* object, Value* layout, Value* view, Value* extent,
                            const DecodeBody& decode, std::string hint) {
  Value* r = load_tensor(ptr, object, layout, view, extent, std::move(hint));
  Op* op = r->def;
  auto region = std::make_unique<Block>();
  region->parent = op;
  Value* index = f_.new_value(Type::index(), "index");
  region->args.push_back(index);
  std::vector<Value*> bc, cib;
  for (int d = 0; d < layout->type.rank; ++d) bc.push_back(f_.new_value(Type::index(), cat("block", d)));
  for (int d = 0; d < layout->type.rank; ++d) cib.push_back(f_.new_value(Type::index(), cat("in_block", d)));
  region->args.insert(region->args.end(), bc.begin(), bc.end());
  region->args.insert(region->args.end(), cib.begin(), cib.end());
  Block* blk = region.get();
  op->regions.push_back(std::move(region));
  Builder inner(f_, blk);
  inner.yield({decode(inner, index, bc, cib)});
  return r;
}

Value* Builder::ptr_offset(Value* ptr, Value* elements, std::string hint) {
  return append(OpKind::ptr_offset, {ptr, elements}, {ptr->type}, {std::move(hint)})->result();
}
void Builder::flag_set(Value* flags, Value* i) { append(OpKind::flag_set, {flags, i}, {}); }
void Builder::flag_wait(Value* flags, Value* i) { append(OpKind::flag_wait, {flags, i}, {}); }

Value* Builder::load_scalar(Value* ptr, Value* index, std::string hint) {
  return append(OpKind::load, {ptr, index}, {Type::of(ptr->type.scalar)}, {std::move(hint)})->result();
}

void Builder::store_tensor(Value* matrix, Value* ptr, Value* layout, Value* view, Value* extent) {
  std::vector<Value*> ops{matrix, ptr, layout, extent};
  if (view) ops.push_back(view);
  append(OpKind::mat_store_tensor, ops, {});
}

}  // namespace coopjit::ir
