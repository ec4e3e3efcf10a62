// Combine and identity of reduction ops (reduce_ops.h).
#include "build/reduce_ops.h"

#include <limits>

namespace coopjit {

using namespace ir;

BinOp reduce_combine(const std::string& op) {
  return op == "sum" ? BinOp::add : op == "prod" ? BinOp::mul : op == "min" ? BinOp::min : BinOp::max;
}

Value* reduce_identity(Builder& b, const std::string& op, ScalarType t) {
  if (is_float(t)) {
    const double inf = std::numeric_limits<double>::infinity();
    return b.constant(op == "sum" ? 0.0 : op == "prod" ? 1.0 : op == "min" ? inf : -inf, t, "identity");
  }
  if (op == "sum" || op == "prod") return b.constant_int(op == "sum" ? 0 : 1, t, "identity");
  const bool mn = op == "min";
  const int bits = size_in_bytes(t) * 8;
  int64_t v;
  if (is_signed(t))
    v = mn ? (bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (bits - 1)) - 1)
           : (bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (bits - 1)));
  else
    v = mn ? (bits == 64 ? -1 : (int64_t(1) << bits) - 1) : 0;  // all ones is the unsigned maximum
  return b.constant_int(v, t, "identity");
}

}  // namespace coopjit
