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

void Builder::clone(const Block& src, std::map<const Value*, Value*>& map) {
  auto mapped = [&](const Value* v) {
    auto it = map.find(v);
    COOPJIT_INTERNAL_ASSERT(it != map.end(), "clone: a value defined outside the cloned block");
    return it->second;
  };
  for (const auto& op : src.ops) {
    std::vector<Value*> operands;
    for (const Value* v : op->operands) operands.push_back(mapped(v));
    std::vector<Type> types;
    std::vector<std::string> hints;
    for (const Value* r : op->results) {
      types.push_back(r->type);
      hints.push_back(r->hint);
    }
    Op* n = append(op->kind, std::move(operands), types, std::move(hints));
    n->sub = op->sub;
    n->attrs = op->attrs;
    for (size_t i = 0; i < op->results.size(); ++i) map[op->results[i]] = n->results[i];
    for (const auto& region : op->regions) {
      auto blk = std::make_unique<Block>();
      blk->parent = n;
      for (const Value* a : region->args) {
        Value* na = f_.new_value(a->type, a->hint);
        blk->args.push_back(na);
        map[a] = na;
      }
      Builder inner(f_, blk.get());
      inner.clone(*region, map);
      n->regions.push_back(std::move(blk));
    }
  }
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

Value* Builder::constant_int(int64_t v, ScalarType t, std::string hint) {
  Op* op = append(OpKind::constant, {}, {Type::of(t)}, {std::move(hint)});
  op->attrs["value"] = v;
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
  if (a.vnni != 1) op->attrs["vnni"] = int64_t(a.vnni);
  return op->result();
}

Op* Builder::store(Value* m, const Access& a, bool checked) {
  Op* op = append(OpKind::mat_store,
                  {m, a.ptr, a.row, a.col, a.stride_row, a.stride_col, a.rows, a.cols}, {});
  op->attrs["checked"] = int64_t(checked);
  if (a.vnni != 1) op->attrs["vnni"] = int64_t(a.vnni);
  return op;
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
Op* Builder::flag_set(Value* flags, Value* i, Value* value) {
  return append(OpKind::flag_set, value ? std::vector<Value*>{flags, i, value} : std::vector<Value*>{flags, i}, {});
}
void Builder::flag_wait(Value* flags, Value* i, int64_t spin_limit) {
  Op* o = append(OpKind::flag_wait, {flags, i}, {});
  if (spin_limit) o->attrs["spin_limit"] = spin_limit;
}

Value* Builder::load_scalar(Value* ptr, Value* index, std::string hint) {
  return append(OpKind::load, {ptr, index}, {Type::of(ptr->type.scalar)}, {std::move(hint)})->result();
}

void Builder::store_tensor(Value* matrix, Value* ptr, Value* layout, Value* view, Value* extent) {
  std::vector<Value*> ops{matrix, ptr, layout, extent};
  if (view) ops.push_back(view);
  append(OpKind::mat_store_tensor, ops, {});
}

Value* Builder::unary(UnOp u, Value* x, std::string hint) {
  Op* op = append(OpKind::unary, {x}, {x->type}, {std::move(hint)});
  op->sub = static_cast<int>(u);
  return op->result();
}

Value* Builder::convert(Value* x, ScalarType to, std::string hint) {
  return append(OpKind::convert, {x}, {Type::of(to)}, {std::move(hint)})->result();
}

namespace {
const char* combine_name(BinOp b) {
  switch (b) {
    case BinOp::add: return "add";
    case BinOp::mul: return "mul";
    case BinOp::min: return "min";
    case BinOp::max: return "max";
    default: return "?";
  }
}
}  // namespace

Value* Builder::reduce(Value* m, ReduceMode mode, Type result, BinOp combine, std::string hint) {
  Op* op = append(OpKind::mat_reduce, {m}, {result}, {std::move(hint)});
  op->sub = static_cast<int>(mode);
  op->attrs["combine"] = std::string(combine_name(combine));
  return op->result();
}

Value* Builder::reduce(Value* m, ReduceMode mode, Type result, const Combine& combine, std::string hint) {
  Op* op = append(OpKind::mat_reduce, {m}, {result}, {std::move(hint)});
  op->sub = static_cast<int>(mode);
  auto region = std::make_unique<Block>();
  region->parent = op;
  Value* x = f_.new_value(Type::of(m->type.scalar), "x");
  Value* y = f_.new_value(Type::of(m->type.scalar), "y");
  region->args = {x, y};
  Block* blk = region.get();
  op->regions.push_back(std::move(region));
  Builder inner(f_, blk);
  inner.yield({combine(inner, x, y)});
  return op->result();
}

Value* Builder::per_element(Value* m, const std::vector<Value*>& extras, const PerElement& body, std::string hint) {
  std::vector<Value*> ops{m};
  ops.insert(ops.end(), extras.begin(), extras.end());
  Op* op = append(OpKind::mat_per_element, ops, {m->type}, {std::move(hint)});
  auto region = std::make_unique<Block>();
  region->parent = op;
  Value* row = f_.new_value(Type::index(), "row");
  Value* col = f_.new_value(Type::index(), "col");
  Value* val = f_.new_value(Type::of(m->type.scalar), "value");
  region->args = {row, col, val};
  std::vector<Value*> xs;
  for (Value* e : extras) {
    xs.push_back(f_.new_value(e->type.is_matrix() ? Type::of(e->type.scalar) : e->type, "extra"));
    region->args.push_back(xs.back());
  }
  Block* blk = region.get();
  op->regions.push_back(std::move(region));
  Builder inner(f_, blk);
  inner.yield({body(inner, row, col, val, xs)});
  return op->result();
}

Value* Builder::convert_matrix(Value* m, Type result, bool cast, std::string hint) {
  Op* op = append(OpKind::mat_convert, {m}, {result}, {std::move(hint)});
  op->sub = cast ? 1 : 0;
  return op->result();
}

Value* Builder::transpose(Value* m, std::string hint) {
  const Type& t = m->type;
  return append(OpKind::mat_transpose, {m}, {Type::matrix(t.scalar, t.cols, t.rows, Use::b, t.scope)},
                {std::move(hint)})->result();
}

Value* Builder::length(Value* m, std::string hint) {
  return append(OpKind::mat_length, {m}, {Type::index()}, {std::move(hint)})->result();
}
Value* Builder::get(Value* m, Value* i, std::string hint) {
  return append(OpKind::mat_get, {m, i}, {Type::of(m->type.scalar)}, {std::move(hint)})->result();
}
Value* Builder::set(Value* m, Value* i, Value* v, std::string hint) {
  return append(OpKind::mat_set, {m, i, v}, {m->type}, {std::move(hint)})->result();
}
std::pair<Value*, Value*> Builder::get_coordinate(Value* m, Value* i) {
  Op* op = append(OpKind::mat_coord, {m, i}, {Type::index(), Type::index()}, {"row", "col"});
  return {op->results[0], op->results[1]};
}
Value* Builder::sum_accumulate(Value* a, Value* b, Value* c, std::string hint) {
  return append(OpKind::mat_sum_accumulate, {a, b, c}, {c->type}, {std::move(hint)})->result();
}
Value* Builder::outer_product(Value* va, Value* vb, Type result, std::string hint) {
  return append(OpKind::mat_outer_product, {va, vb}, {result}, {std::move(hint)})->result();
}
void Builder::accumulate(Value* m, const Access& a) {
  append(OpKind::mat_accumulate, {m, a.ptr, a.row, a.col, a.stride_row, a.stride_col, a.rows, a.cols}, {});
}
Value* Builder::vector_multiply(Value* v, Value* bm, Value* bias, Type result, std::string hint) {
  std::vector<Value*> ops{v, bm};
  if (bias) ops.push_back(bias);
  return append(OpKind::vec_matrix_mul, ops, {result}, {std::move(hint)})->result();
}
Value* Builder::vector_load(Type vec, Value* ptr, Value* offset, Value* stride, std::string hint) {
  return append(OpKind::vec_load, {ptr, offset, stride}, {vec}, {std::move(hint)})->result();
}
void Builder::vector_store(Value* v, Value* ptr, Value* offset, Value* stride) {
  append(OpKind::vec_store, {v, ptr, offset, stride}, {});
}

void Builder::store_scalar(Value* ptr, Value* index, Value* value) { append(OpKind::store, {ptr, index, value}, {}); }

Value* Builder::groupshared(ScalarType elem, int64_t n, std::string hint) {
  return append(OpKind::shared_alloc, {}, {Type::groupshared(elem, n)}, {std::move(hint)})->result();
}

void Builder::barrier() { append(OpKind::barrier, {}, {}); }

void Builder::prefetch(Value* ptr, Value* index, bool write, int locality) {
  Op* op = append(OpKind::prefetch, {ptr, index}, {});
  op->attrs["write"] = int64_t(write);
  op->attrs["locality"] = int64_t(locality);
}

Value* Builder::cycles(std::string hint) { return append(OpKind::cycles, {}, {Type::index()}, {std::move(hint)})->result(); }

Value* Builder::work_id(WorkId w, int dim, std::string hint) {
  Op* op = append(OpKind::work_id, {}, {Type::index()}, {std::move(hint)});
  op->sub = static_cast<int>(w);
  if (w == WorkId::group || w == WorkId::groups) op->attrs["dim"] = int64_t(dim);
  return op->result();
}

}  // namespace coopjit::ir
