// Ownership and naming helpers of the kernel IR (ir.h).
#include "ir/ir.h"

#include "core/error.h"

namespace coopjit::ir {

const char* name(BinOp b) {
  switch (b) {
    case BinOp::add: return "add";
    case BinOp::sub: return "sub";
    case BinOp::mul: return "mul";
    case BinOp::div: return "div";
    case BinOp::rem: return "rem";
    case BinOp::min: return "min";
    case BinOp::max: return "max";
    case BinOp::and_: return "and";
    case BinOp::or_: return "or";
  }
  return "?";
}

const char* name(CmpPred p) {
  switch (p) {
    case CmpPred::lt: return "lt";
    case CmpPred::le: return "le";
    case CmpPred::gt: return "gt";
    case CmpPred::ge: return "ge";
    case CmpPred::eq: return "eq";
    case CmpPred::ne: return "ne";
  }
  return "?";
}

const char* name(UnOp u) {
  switch (u) {
    case UnOp::neg: return "neg";
    case UnOp::abs: return "abs";
    case UnOp::exp: return "exp";
    case UnOp::log: return "log";
    case UnOp::tanh: return "tanh";
    case UnOp::sqrt: return "sqrt";
    case UnOp::erf: return "erf";
  }
  return "?";
}

const char* name(ReduceMode r) {
  switch (r) {
    case ReduceMode::row: return "row";
    case ReduceMode::column: return "column";
    case ReduceMode::both: return "row_column";
    case ReduceMode::quad: return "2x2";
  }
  return "?";
}

const char* name(WorkId w) {
  switch (w) {
    case WorkId::lane: return "lane";
    case WorkId::subgroup: return "subgroup";
    case WorkId::subgroups: return "subgroups";
    case WorkId::group: return "group";
    case WorkId::groups: return "groups";
  }
  return "?";
}

std::string mnemonic(const Op& op) {
  switch (op.kind) {
    case OpKind::constant: return "constant";
    case OpKind::binary: return name(static_cast<BinOp>(op.sub));
    case OpKind::cmp: return cat("cmp.", name(static_cast<CmpPred>(op.sub)));
    case OpKind::select: return "select";
    case OpKind::unary: return name(static_cast<UnOp>(op.sub));
    case OpKind::convert: return "convert";
    case OpKind::mat_reduce: return "coopmatrix.reduce";
    case OpKind::mat_per_element: return "coopmatrix.per_element";
    case OpKind::mat_convert: return op.sub ? "coopmatrix.cast" : "coopmatrix.convert";
    case OpKind::mat_transpose: return "coopmatrix.transpose";
    case OpKind::mat_length: return "coopmatrix.length";
    case OpKind::mat_get: return "coopmatrix.get";
    case OpKind::mat_set: return "coopmatrix.set";
    case OpKind::mat_coord: return "coopmatrix.get_coordinate";
    case OpKind::mat_sum_accumulate: return "coopmatrix.sum_accumulate";
    case OpKind::mat_outer_product: return "coopmatrix.outer_product";
    case OpKind::mat_accumulate: return "coopmatrix.accumulate";
    case OpKind::vec_matrix_mul: return op.operands.size() > 2 ? "vector.multiply_add" : "vector.multiply";
    case OpKind::vec_load: return "vector.load";
    case OpKind::vec_store: return "vector.store";
    case OpKind::load: return "load";
    case OpKind::ptr_offset: return "ptr.offset";
    case OpKind::flag_set: return "flag.set";
    case OpKind::flag_wait: return "flag.wait";
    case OpKind::for_: return "for";
    case OpKind::if_: return "if";
    case OpKind::yield: return "yield";
    case OpKind::mat_load: return "coopmatrix.load";
    case OpKind::mat_store: return "coopmatrix.store";
    case OpKind::mat_splat: return "coopmatrix.splat";
    case OpKind::mat_mul_add: return "coopmatrix.mul_add";
    case OpKind::mat_scale: return "coopmatrix.scale";
    case OpKind::mat_binary: return cat("coopmatrix.", name(static_cast<BinOp>(op.sub)));
    case OpKind::tensor_layout: return "tensor.layout";
    case OpKind::tensor_view: return "tensor.view";
    case OpKind::mat_load_tensor: return "coopmatrix.load_tensor";
    case OpKind::mat_store_tensor: return "coopmatrix.store_tensor";
    case OpKind::shared_alloc: return "groupshared.alloc";
    case OpKind::store: return "store";
    case OpKind::barrier: return "barrier";
    case OpKind::work_id: return cat("id.", name(static_cast<WorkId>(op.sub)));
    case OpKind::cycles: return "cycles";
    case OpKind::prefetch: return "prefetch";
  }
  return "?";
}

int64_t Op::int_attr(const std::string& k, int64_t dflt) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return dflt;
  if (auto* v = std::get_if<int64_t>(&it->second)) return *v;
  throw InternalError(cat("attribute '", k, "' of ", mnemonic(*this), " is not an integer"));
}

double Op::float_attr(const std::string& k) const {
  auto it = attrs.find(k);
  COOPJIT_INTERNAL_ASSERT(it != attrs.end(), k);
  if (auto* v = std::get_if<double>(&it->second)) return *v;
  if (auto* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
  throw InternalError(cat("attribute '", k, "' of ", mnemonic(*this), " is not a number"));
}

Value* Function::new_value(Type t, std::string hint) {
  auto v = std::make_unique<Value>();
  v->id = static_cast<int>(values_.size());
  v->type = t;
  v->hint = std::move(hint);
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Function::add_param(Type t, std::string name) {
  Value* v = new_value(t, std::move(name));
  params.push_back(v);
  return v;
}

}  // namespace coopjit::ir
