// SNorm / UNorm components lowered to clamps (norm_types.h).
#include "ir/norm_types.h"

#include <map>

#include "core/error.h"
#include "ir/builder.h"

namespace coopjit::ir {
namespace {

bool has_norm(const Block& b) {
  for (const auto& op : b.ops) {
    for (const Value* r : op->results)
      if (r->type.is_matrix() && r->type.norm) return true;
    for (const auto& region : op->regions)
      if (has_norm(*region)) return true;
  }
  return false;
}

Type plain(Type t) {
  t.norm = 0;
  return t;
}

// The elements of m clamped into the range of `norm` (1: [-1, 1], 2: [0, 1]); NaN becomes 0.
Value* clamp(Builder& b, Value* m, uint8_t norm) {
  if (m->type.scope == Scope::thread)
    throw UserError(cat("SNorm / UNorm components are not built for thread-scope matrices (", m->type.str(),
                        "): their values are clamped by a per-element operation, which thread scope has not"));
  return b.per_element(m, {}, [norm](Builder& in, Value*, Value*, Value* v, const std::vector<Value*>&) {
    const ScalarType T = v->type.scalar;
    Value* lo = in.constant(norm == 1 ? -1.0 : 0.0, T);
    Value* hi = in.constant(1.0, T);
    Value* c = in.select(in.cmp(CmpPred::lt, v, lo), lo, v);
    c = in.select(in.cmp(CmpPred::gt, c, hi), hi, c);
    return in.select(in.cmp(CmpPred::eq, v, v), c, in.constant(0.0, T), "normed");
  }, "norm");
}

void copy(Builder& b, Function& nf, const Block& src, std::map<const Value*, Value*>& map) {
  for (const auto& op : src.ops) {
    std::vector<Value*> operands;
    for (const Value* v : op->operands) {
      auto it = map.find(v);
      COOPJIT_INTERNAL_ASSERT(it != map.end(), "norm types: a value used before its definition");
      operands.push_back(it->second);
    }
    std::vector<Type> types;
    std::vector<std::string> hints;
    for (const Value* r : op->results) {
      types.push_back(plain(r->type));
      hints.push_back(r->hint);
    }
    Op* n = b.append(op->kind, std::move(operands), types, std::move(hints));
    n->sub = op->sub;
    n->attrs = op->attrs;
    for (const auto& region : op->regions) {
      auto blk = std::make_unique<Block>();
      blk->parent = n;
      for (const Value* a : region->args) {
        Value* na = nf.new_value(plain(a->type), a->hint);
        blk->args.push_back(na);
        map[a] = na;
      }
      Builder inner(nf, blk.get());
      copy(inner, nf, *region, map);
      n->regions.push_back(std::move(blk));
    }
    for (size_t i = 0; i < op->results.size(); ++i) {
      const Type& t = op->results[i]->type;
      map[op->results[i]] = t.is_matrix() && t.norm ? clamp(b, n->results[i], t.norm) : n->results[i];
    }
  }
}

}  // namespace

std::unique_ptr<Function> lower_norm_types(const Function& f) {
  if (!has_norm(f.body)) return nullptr;
  auto nf = std::make_unique<Function>();
  nf->name = f.name;
  nf->attrs = f.attrs;
  std::map<const Value*, Value*> map;
  for (const Value* p : f.params) map[p] = nf->add_param(plain(p->type), p->hint);
  Builder b(*nf);
  copy(b, *nf, f.body, map);
  return nf;
}

}  // namespace coopjit::ir
