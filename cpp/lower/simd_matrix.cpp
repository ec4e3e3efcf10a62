// The SIMD lowering of matrix arithmetic: splat, mul_add, element-wise operations, and the
// operation set of SPV_NV_cooperative_matrix2 / HLSL 0035 (reduce, per-element, convert,
// transpose, get/set, sum_accumulate, outer_product, accumulate, vector x matrix), with the
// component-type conversions (round to nearest even; the fp8 formats' saturation and NaN rules).
#include "lower/simd_lowering.h"

#include "lower/fp8_convert.h"
#include "lower/vector_math.h"

namespace coopjit {

std::vector<llvm::Value*> SimdLowering::splat(const Op& o) {
  const Type& t = o.result()->type;
  llvm::Value* s = scalar(o.operands[0]);
  if (!vector_layout(t)) return std::vector<llvm::Value*>(parts(t), s);
  std::vector<llvm::Value*> out;
  llvm::Value* full = b_.CreateVectorSplat(S_, s);
  llvm::Value* zero = llvm::Constant::getNullValue(full->getType());
  for (int64_t i = 0; i < t.rows; ++i)
    for (int j = 0; j < chunks(t); ++j) {
      int valid = static_cast<int>(std::min<int64_t>(S_, t.cols - int64_t(j) * S_));
      // Padding lanes hold zero, as the layout defines.
      out.push_back(valid < S_ ? b_.CreateSelect(lane_mask(valid), full, zero) : full);
    }
  return out;
}

llvm::Value* SimdLowering::fma(ScalarType t, llvm::Value* x, llvm::Value* y, llvm::Value* acc) {
  if (is_float(t)) return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, acc});
  return b_.CreateAdd(b_.CreateMul(x, y), acc);
}

std::vector<llvm::Value*> SimdLowering::mul_add(const Op& o) {
  const Type &ta = o.operands[0]->type, &tb = o.operands[1]->type, &tc = o.operands[2]->type;
  if (Dot d = dot_kind(ta, tb, tc); d != Dot::none) return mul_add_dot(o, d);
  std::vector<llvm::Value*> a = mat(o.operands[0]);
  std::vector<llvm::Value*> bv = mat(o.operands[1]);
  // Mixed precision (i8/u8 -> i32, f16/bf16/f8 -> f32): widen the inputs, multiply-add in the
  // accumulator's type.
  if (ta.scalar != tc.scalar)
    for (auto& x : a) x = convert_value(x, ta.scalar, tc.scalar);
  if (tb.scalar != tc.scalar)
    for (auto& x : bv) x = convert_value(x, tb.scalar, tc.scalar);
  std::vector<llvm::Value*> c = mat(o.operands[2]);
  const int nch = chunks(tc);
  for (int64_t k = 0; k < ta.cols; ++k)
    for (int64_t i = 0; i < tc.rows; ++i) {
      llvm::Value* bc = b_.CreateVectorSplat(S_, a[i * ta.cols + k]);
      for (int j = 0; j < nch; ++j) c[i * nch + j] = fma(tc.scalar, bc, bv[k * nch + j], c[i * nch + j]);
    }
  return c;
}

std::vector<llvm::Value*> SimdLowering::elementwise(const Op& o) {
  const Type& t = o.result()->type;
  const auto& x = mat(o.operands[0]);
  std::vector<llvm::Value*> out;
  if (t.is_matrix() && !vector_layout(t) && t.cols > 1) {
    // A matrix_a (held as scalars) a row at a time as one vector: LLVM keeps narrow rows (the
    // s8 -> u8 pack's 4-byte rows) as vector work only when it is given them as vectors.
    const BinOp op = o.kind == OpKind::mat_scale ? BinOp::mul : static_cast<BinOp>(o.sub);
    auto* row_t = llvm::FixedVectorType::get(scalar_ty(t.scalar), static_cast<unsigned>(t.cols));
    auto row = [&](const std::vector<llvm::Value*>& m, int64_t i) {
      llvm::Value* v = llvm::PoisonValue::get(row_t);
      for (int64_t k = 0; k < t.cols; ++k) v = b_.CreateInsertElement(v, m[static_cast<size_t>(i * t.cols + k)], k);
      return v;
    };
    llvm::Value* s = o.kind == OpKind::mat_scale ? b_.CreateVectorSplat(static_cast<unsigned>(t.cols), scalar(o.operands[1]))
                                                 : nullptr;
    for (int64_t i = 0; i < t.rows; ++i) {
      llvm::Value* r = scalar_bin(op, t.scalar, row(x, i), s ? s : row(mat(o.operands[1]), i));
      for (int64_t k = 0; k < t.cols; ++k) out.push_back(b_.CreateExtractElement(r, k));
    }
    return out;
  }
  if (o.kind == OpKind::mat_scale) {
    llvm::Value* s = scalar(o.operands[1]);
    if (vector_layout(t)) s = b_.CreateVectorSplat(S_, s);
    for (llvm::Value* v : x) out.push_back(scalar_bin(BinOp::mul, t.scalar, v, s));
    return out;
  }
  const auto& y = mat(o.operands[1]);
  for (size_t i = 0; i < x.size(); ++i) out.push_back(scalar_bin(static_cast<BinOp>(o.sub), t.scalar, x[i], y[i]));
  return out;
}


// ---- element grid --------------------------------------------------------------------------------
std::vector<llvm::Value*> SimdLowering::elems(const Value* v) {
  const Type& t = v->type;
  const auto& p = mat(v);
  if (t.is_vector() || !vector_layout(t)) return p;
  std::vector<llvm::Value*> out;
  for (int64_t i = 0; i < t.rows; ++i)
    for (int64_t c = 0; c < t.cols; ++c) out.push_back(b_.CreateExtractElement(p[i * chunks(t) + c / S_], c % S_));
  return out;
}

std::vector<llvm::Value*> SimdLowering::from_elems(const Type& t, const std::vector<llvm::Value*>& e) {
  if (t.is_vector() || !vector_layout(t)) return e;
  std::vector<llvm::Value*> out;
  for (int64_t i = 0; i < t.rows; ++i)
    for (int j = 0; j < chunks(t); ++j) {
      llvm::Value* v = llvm::Constant::getNullValue(vec_ty(t.scalar));  // padding lanes stay zero
      for (int l = 0; l < S_ && j * S_ + l < t.cols; ++l) v = b_.CreateInsertElement(v, e[i * t.cols + j * S_ + l], l);
      out.push_back(v);
    }
  return out;
}

// ---- conversions -----------------------------------------------------------------------------------

llvm::Value* SimdLowering::fp8_to_f32(llvm::Value* bits, ScalarType from) { return coopjit::fp8_to_f32(b_, bits, from); }

llvm::Value* SimdLowering::f32_to_fp8(llvm::Value* x, ScalarType to) {
  return coopjit::f32_to_fp8(b_, x, to, [&](llvm::Value* v) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, v); });
}

llvm::Value* SimdLowering::f32_to_bf16(llvm::Value* x) {
  auto c32 = [&](uint32_t v) { return splat_like(b_, x, b_.getInt32(v)); };
  llvm::Value* bits = b_.CreateBitCast(x, like_type(x, b_.getInt32Ty()));
  llvm::Value* rounded = b_.CreateAdd(bits, b_.CreateAdd(c32(0x7FFF), b_.CreateAnd(b_.CreateLShr(bits, c32(16)), c32(1))));
  llvm::Value* nan = b_.CreateOr(b_.CreateLShr(bits, c32(16)), c32(0x40));  // quiet, sign kept
  llvm::Value* is_nan = b_.CreateICmpUGT(b_.CreateAnd(bits, c32(0x7FFFFFFF)), c32(0x7F800000));
  llvm::Value* r = b_.CreateSelect(is_nan, nan, b_.CreateLShr(rounded, c32(16)));
  return b_.CreateBitCast(b_.CreateTrunc(r, like_type(x, b_.getInt16Ty())), like_type(x, b_.getBFloatTy()));
}

// x as f32 for a narrower format's rounding: exact where f32 holds x; otherwise (f64, and
// integers of more than 24 bits) rounded to odd, which keeps the sticky information so that the
// second rounding (to bf16 / fp8, at least 8 bits shorter) gives the correctly rounded result
// of x, never a double rounding.
llvm::Value* SimdLowering::to_f32_sticky(llvm::Value* x, ScalarType from) {
  if (!is_float(from) && from != ScalarType::i1 && ir::size_in_bytes(from) >= 4) {
    x = convert_value(x, from, ScalarType::f64);  // exact for 32-bit integers
    from = ScalarType::f64;
  }
  if (from != ScalarType::f64) return convert_value(x, from, ScalarType::f32);
  llvm::Type* fty = like_type(x, b_.getFloatTy());
  llvm::Type* ity = like_type(x, b_.getInt32Ty());
  llvm::Value* f = b_.CreateFPTrunc(x, fty);
  llvm::Value* back = b_.CreateFPExt(f, x->getType());
  llvm::Value* inexact = b_.CreateFCmpONE(back, x);  // false for NaN (kept as is) and exact values
  llvm::Value* fabs_x = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  llvm::Value* fabs_b = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back);
  llvm::Value* bits = b_.CreateBitCast(f, ity);
  // Rounded away from zero (or to infinity): one step back toward zero, then set the last bit.
  llvm::Value* down = b_.CreateSub(bits, splat_like(b_, x, b_.getInt32(1)));
  bits = b_.CreateSelect(b_.CreateAnd(inexact, b_.CreateFCmpOGT(fabs_b, fabs_x)), down, bits);
  bits = b_.CreateSelect(inexact, b_.CreateOr(bits, splat_like(b_, x, b_.getInt32(1))), bits);
  return b_.CreateBitCast(bits, fty);
}

llvm::Value* SimdLowering::convert_value(llvm::Value* x, ScalarType from, ScalarType to) {
  if (from == to) return x;
  auto fp8 = [](ScalarType t) { return t == ScalarType::f8_e4m3 || t == ScalarType::f8_e5m2; };
  llvm::Type* target = like_type(x, scalar_ty(to));
  if (fp8(from)) return convert_value(fp8_to_f32(x, from), ScalarType::f32, to);
  if (fp8(to)) return f32_to_fp8(to_f32_sticky(x, from), to);
  if (to == ScalarType::bf16) return f32_to_bf16(to_f32_sticky(x, from));
  if (is_float(from) && is_float(to)) {
    unsigned fb = x->getType()->getScalarSizeInBits(), tb = target->getScalarSizeInBits();
    if (from == ScalarType::bf16) {  // bf16 widens exactly to f32 and up; to f16 through f32 (one rounding)
      if (tb >= 32) return b_.CreateFPExt(x, target);
      return b_.CreateFPTrunc(b_.CreateFPExt(x, like_type(x, b_.getFloatTy())), target);
    }
    return tb > fb ? b_.CreateFPExt(x, target) : b_.CreateFPTrunc(x, target);
  }
  if (is_float(from))  // to an integer: saturating, NaN -> 0
    return b_.CreateIntrinsic(is_signed(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat,
                              {target, x->getType()}, {x});
  if (is_float(to)) return is_signed(from) ? b_.CreateSIToFP(x, target) : b_.CreateUIToFP(x, target);
  if (to == ScalarType::i1) return b_.CreateICmpNE(x, llvm::Constant::getNullValue(x->getType()));
  return b_.CreateIntCast(x, target, is_signed(from));
}

llvm::Value* SimdLowering::unary_value(UnOp u, ScalarType t, llvm::Value* x) {
  if (t == ScalarType::f8_e4m3 || t == ScalarType::f8_e5m2)  // held as bits: in f32, rounded back
    return convert_value(unary_value(u, ScalarType::f32, convert_value(x, t, ScalarType::f32)), ScalarType::f32, t);
  if (!is_float(t)) {
    if (u == UnOp::neg) return b_.CreateNeg(x);
    if (u == UnOp::abs) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse());
    throw InternalError("integer unary op");
  }
  switch (u) {
    case UnOp::neg: return b_.CreateFNeg(x);
    case UnOp::abs: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    // exp, tanh and erf of f32 as vector code (vector_math.h: LLVM would call libm once per lane);
    // f64 and f16 keep the C library's precision.
    case UnOp::exp:
      if (t == ScalarType::f32) return lower::exp_f32(b_, x);
      return b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x);
    case UnOp::log: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, x);
    case UnOp::tanh:
      if (t == ScalarType::f32) return lower::tanh_f32(b_, x);
      return b_.CreateUnaryIntrinsic(llvm::Intrinsic::tanh, x);
    case UnOp::erf:
      if (t == ScalarType::f32) return lower::erf_f32(b_, x);
      if (t == ScalarType::f64) return lower::erf_f64_libm(b_, x);
      return b_.CreateFPTrunc(lower::erf_f32(b_, b_.CreateFPExt(x, x->getType()->getWithNewType(b_.getFloatTy()))), x->getType());
    case UnOp::sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
  }
  throw InternalError("unknown unary op");
}

// A combine / per-element function: its scalar operations on the given arguments (scalars, or
// vectors of lanes in lane mode).
llvm::Value* SimdLowering::lower_region(const Block& region, const std::vector<llvm::Value*>& args) {
  for (size_t i = 0; i < args.size(); ++i) scalars_[region.args[i]] = args[i];
  return lanev(block(region)[0]);
}

llvm::Value* SimdLowering::combine(const Op& o, ScalarType t, llvm::Value* x, llvm::Value* y) {
  if (!o.regions.empty()) return lower_region(*o.regions[0], {x, y});
  const std::string& c = std::get<std::string>(o.attrs.at("combine"));
  BinOp op = c == "add" ? BinOp::add : c == "mul" ? BinOp::mul : c == "min" ? BinOp::min : BinOp::max;
  return scalar_bin(op, t, x, y);
}

// The per-element function applied to whole rows of lanes at once (row, col and the values are
// vectors; padding lanes stay zero).
std::vector<llvm::Value*> SimdLowering::per_element(const Op& o) {
  const Type& t = o.operands[0]->type;
  std::vector<std::vector<llvm::Value*>> src;
  for (const Value* v : o.operands) src.push_back(v->type.is_matrix() ? as_vectors(v->type, mat(v)) : std::vector<llvm::Value*>{});
  std::vector<llvm::Value*> out;
  llvm::Value* saved = lane_mask_;
  lane_mask_ = lane_mask(S_);
  for (int64_t i = 0; i < t.rows; ++i)
    for (int j = 0; j < chunks(t); ++j) {
      const size_t k = static_cast<size_t>(i * chunks(t) + j);
      std::vector<llvm::Value*> args{b_.CreateVectorSplat(S_, b_.getInt64(i)),
                                     b_.CreateAdd(b_.CreateVectorSplat(S_, b_.getInt64(int64_t(j) * S_)), lanes()),
                                     src[0][k]};
      for (size_t e = 1; e < o.operands.size(); ++e)
        args.push_back(o.operands[e]->type.is_matrix() ? src[e][k] : lanev(scalar(o.operands[e])));
      llvm::Value* r = lower_region(*o.regions[0], args);
      int valid = static_cast<int>(std::min<int64_t>(S_, t.cols - int64_t(j) * S_));
      out.push_back(valid < S_ ? b_.CreateSelect(lane_mask(valid), r, llvm::Constant::getNullValue(r->getType())) : r);
    }
  lane_mask_ = saved;
  return from_vectors(t, out);
}

namespace {
// Whether a reduce's combine may run as a tree of vector ops (any order, the same result): min /
// max of f32 / f64 / integers, sums and products of integers, and float sums and products whose
// reduce allows any order (attribute order = "any": its producer holds no element order to keep);
// `op` the combine.
bool tree_combine(const Op& o, ScalarType s, BinOp& op) {
  const std::string& c = std::get<std::string>(o.attrs.at("combine"));
  const bool any_order = o.has_attr("order") && std::get<std::string>(o.attrs.at("order")) == "any";
  const bool exact = c == "min" || c == "max" ? (s == ScalarType::f32 || s == ScalarType::f64 || is_integer(s))
                                              : (c == "add" || c == "mul") && (is_integer(s) || any_order);
  op = c == "add" ? BinOp::add : c == "mul" ? BinOp::mul : c == "min" ? BinOp::min : BinOp::max;
  return exact;
}
}  // namespace

// A row reduction whose combine is exact in any order (float min / max; integer add, mul, min,
// max), or whose op allows any order (attribute order = "any": the reduction recipe's float sums,
// whose tile already summed its columns lane by lane), of rows of whole vectors: each row's vectors combined pairwise, then across the lanes by
// rotations (S/2, S/4, ..., 1: every lane ends with the row's value). The element-by-element chain
// of the general path extracted each lane and combined scalars one after another: for a max of a
// 4 x 64 f32 tile, about 2800 instructions per tile (IEEE max scalarized), more than the 64
// steps of the loop that fills the tile (coopjit.reduce(a, 1, "max") of 4096 x 4096 f32: 20 GB/s
// on one Zen 5 core, a sum 40). False (nothing emitted) for any other reduction.
llvm::Value* SimdLowering::halve_rows(BinOp op, ScalarType t, llvm::Value* x, llvm::Value* y, int level) {
  const int64_t w = S_ >> level, rows_in = int64_t(1) << level;
  std::vector<int> first, second;
  for (int half = 0; half < 2; ++half)
    for (int64_t q = 0; q < rows_in; ++q)
      for (int64_t l = 0; l < w / 2; ++l) {
        first.push_back(static_cast<int>(half * S_ + q * w + l));
        second.push_back(static_cast<int>(half * S_ + q * w + w / 2 + l));
      }
  return scalar_bin(op, t, b_.CreateShuffleVector(x, y, first), b_.CreateShuffleVector(x, y, second));
}

void SimdLowering::push_row(std::vector<std::pair<int, llvm::Value*>>& stack, llvm::Value* acc, BinOp op, ScalarType t) {
  int level = 0;
  while (!stack.empty() && stack.back().first == level) {
    acc = halve_rows(op, t, stack.back().second, acc, level);
    stack.pop_back();
    ++level;
  }
  stack.emplace_back(level, acc);
}

bool SimdLowering::row_tree(const Op& o, const Type& m, const Type& r, std::vector<llvm::Value*>& out) {
  if (!o.regions.empty() || !m.is_matrix() || !vector_layout(m) || m.cols % S_ != 0 || (S_ & (S_ - 1)) != 0) return false;
  BinOp op;
  if (!tree_combine(o, m.scalar, op)) return false;
  const auto& vecs = mat(o.operands[0]);
  const int n = chunks(m);
  auto row_vector = [&](int64_t i) {  // row i's vectors combined pairwise into one
    std::vector<llvm::Value*> vs(vecs.begin() + i * n, vecs.begin() + (i + 1) * n);
    while (vs.size() > 1) {
      std::vector<llvm::Value*> next;
      for (size_t k = 0; k + 1 < vs.size(); k += 2) next.push_back(scalar_bin(op, m.scalar, vs[k], vs[k + 1]));
      if (vs.size() % 2) next.push_back(vs.back());
      vs = next;
    }
    return vs[0];
  };
  // 2, 4, ... S rows (a power of two): the rows' vectors across their lanes together, as
  // segment_rows does: two vectors of q rows of w lanes each -> one of 2q rows of w / 2 lanes (two
  // shuffles, one op), R - 1 times for the R rows, then the one vector with itself until each row
  // has one lane (log2(S / R) times; rows 0..R-1 in lanes 0..R-1, repeated). R - 1 + log2(S / R)
  // ops for the R rows where the rotations of each row took R log2(S): a 4 x 64 f32 tile's max 5
  // instead of 16 (the max is 3 instructions), an 8-row tile's 8 instead of 32.
  const int64_t R = m.rows;
  if (R >= 2 && R <= S_ && (R & (R - 1)) == 0) {
    std::vector<std::pair<int, llvm::Value*>> stack;  // a binary counter of rows: few vectors live
    for (int64_t i = 0; i < R; ++i) {
      llvm::Value* acc = row_vector(i);
      push_row(stack, acc, op, m.scalar);
    }
    llvm::Value* v = stack.back().second;
    for (int level = stack.back().first; (int64_t(1) << level) < S_; ++level) v = halve_rows(op, m.scalar, v, v, level);
    for (int64_t i = 0; i < R; ++i) {
      llvm::Value* s = b_.CreateExtractElement(v, uint64_t(i));
      for (int64_t k = 0; k < r.cols; ++k) out[i * r.cols + k] = s;
    }
    return true;
  }
  for (int64_t i = 0; i < m.rows; ++i) {
    llvm::Value* v = row_vector(i);
    for (int w = S_ / 2; w >= 1; w /= 2) {
      std::vector<int> rot;
      for (int l = 0; l < S_; ++l) rot.push_back((l + w) % S_);
      v = scalar_bin(op, m.scalar, v, b_.CreateShuffleVector(v, v, rot));
    }
    llvm::Value* s = b_.CreateExtractElement(v, uint64_t(0));
    for (int64_t k = 0; k < r.cols; ++k) out[i * r.cols + k] = s;
  }
  return true;
}

// The column reduce of a segment tile (the n x CW view of CW contiguous rows of n elements,
// segs_) whose combine is exact in any order or allowed any order (attribute order = "any"):
// each row of X combined from the whole vectors it spans (lanes outside it the identity, by
// constant masks), then the S rows' vectors of a chunk across their lanes together, halving the
// lanes of each row at every level (pairs of vectors: one shuffle takes the rows' first halves,
// one the second halves, one op; S - 1 ops and 2 (S - 1) shuffles for S rows). Where each of the
// n rows of the tile was picked from the n vectors (about n / 2 two-source permutes a vector for
// every n; past 8 their index vectors outgrow the registers), this costs about the same for any
// n. False (nothing emitted) for any other reduce.
bool SimdLowering::segment_rows(const Op& o, const Type& m, const Type& r, std::vector<llvm::Value*>& out) {
  const Value* src = o.operands[0];  // the segment tile, or its conversion to the accumulator type
  if (!segs_.count(src) && src->def && src->def->kind == OpKind::mat_convert) src = src->def->operands[0];
  auto it = segs_.find(src);
  // Rows of up to 7 elements: the picks (at most 4 permutes a vector) and one combine a row of the
  // view cost less than a combine or two and a select per row of X (16 of them in 3 vectors of
  // rows of 3 f32; max of rows of 3 / 5 f32 32 / 33 GB/s through the picks, 16 / 21 here).
  if (it == segs_.end() || m.rows < 8 || !o.regions.empty() || r.rows != 1 || r.cols != m.cols || (S_ & (S_ - 1)) != 0) return false;
  BinOp op;
  if (!tree_combine(o, m.scalar, op)) return false;
  const int64_t n = m.rows;
  const Type& in = src->type;  // X's type (the reduce's: the accumulator's)
  llvm::Value* id = nullptr;
  {  // the identity of the combine, as a vector
    llvm::Type* et = scalar_ty(m.scalar);
    llvm::Constant* e;
    if (is_float(m.scalar)) {
      const double inf = std::numeric_limits<double>::infinity();
      e = llvm::ConstantFP::get(et, op == BinOp::add ? 0.0 : op == BinOp::mul ? 1.0 : op == BinOp::min ? inf : -inf);
    } else {
      const unsigned bits = et->getIntegerBitWidth();
      llvm::APInt v = op == BinOp::add ? llvm::APInt(bits, 0) : op == BinOp::mul ? llvm::APInt(bits, 1)
                    : op == BinOp::min ? (is_signed(m.scalar) ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits))
                                       : (is_signed(m.scalar) ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits));
      e = llvm::ConstantInt::get(et, v);
    }
    id = llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(S_), e);
  }
  for (const auto& raw : it->second) {  // a chunk: S rows of X in n vectors
    // Each row as soon as it is combined joins the tree (a stack of one vector a level, like a
    // binary counter): a few vectors live at a time, not the S rows' (which spilled).
    std::vector<std::pair<int, llvm::Value*>> stack;
    for (int64_t i = 0; i < S_; ++i) {
      const int64_t lo = i * n, hi = lo + n;
      llvm::Value* acc = nullptr;
      for (int64_t k = lo / S_; k <= (hi - 1) / S_; ++k) {
        llvm::Value* v = raw[k];
        if (m.scalar != in.scalar) v = convert_value(v, in.scalar, m.scalar);
        if (k * S_ < lo || (k + 1) * S_ > hi) {
          std::vector<llvm::Constant*> bits;
          for (int64_t l = 0; l < S_; ++l) bits.push_back(b_.getInt1(k * S_ + l >= lo && k * S_ + l < hi));
          v = b_.CreateSelect(llvm::ConstantVector::get(bits), v, id);
        }
        acc = acc ? scalar_bin(op, m.scalar, acc, v) : v;
      }
      push_row(stack, acc, op, m.scalar);
    }
    out.push_back(stack.back().second);
  }
  return true;
}

void SimdLowering::matrix_op(const Op& o) {
  const auto& v = o.operands;
  switch (o.kind) {
    case OpKind::mat_per_element:
      mats_[o.result()] = per_element(o);
      return;
    case OpKind::mat_reduce: {
      const Type &m = v[0]->type, &r = o.result()->type;
      auto e = elems(v[0]);
      auto at = [&](int64_t i, int64_t c) { return e[i * m.cols + c]; };
      std::vector<llvm::Value*> out(r.rows * r.cols);
      switch (static_cast<ReduceMode>(o.sub)) {
        case ReduceMode::row:
          if (row_tree(o, m, r, out)) break;
          for (int64_t i = 0; i < m.rows; ++i) {
            llvm::Value* acc = at(i, 0);
            for (int64_t c = 1; c < m.cols; ++c) acc = combine(o, m.scalar, acc, at(i, c));
            for (int64_t c = 0; c < r.cols; ++c) out[i * r.cols + c] = acc;
          }
          break;
        case ReduceMode::column:  // the document's text says "row" here: the column is meant
          if (std::vector<llvm::Value*> seg; vector_layout(r) && segment_rows(o, m, r, seg)) {
            mats_[o.result()] = seg;
            return;
          }
          if (vector_layout(m) && vector_layout(r) && o.regions.empty() && m.cols % S_ == 0 && r.cols == m.cols) {
            // Whole vectors: the rows combined chunk by chunk, in row order (each lane's chain
            // as the element-by-element one below).
            const auto& vecs = mat(v[0]);
            const int n = chunks(m);
            std::vector<llvm::Value*> res;
            std::vector<llvm::Value*> col(static_cast<size_t>(n));
            for (int j = 0; j < n; ++j) {
              col[j] = vecs[j];
              for (int64_t i = 1; i < m.rows; ++i) col[j] = combine(o, m.scalar, col[j], vecs[i * n + j]);
            }
            for (int64_t i = 0; i < r.rows; ++i) res.insert(res.end(), col.begin(), col.end());
            mats_[o.result()] = res;
            return;
          }
          for (int64_t c = 0; c < m.cols; ++c) {
            llvm::Value* acc = at(0, c);
            for (int64_t i = 1; i < m.rows; ++i) acc = combine(o, m.scalar, acc, at(i, c));
            for (int64_t i = 0; i < r.rows; ++i) out[i * r.cols + c] = acc;
          }
          break;
        case ReduceMode::both: {
          llvm::Value* acc = e[0];
          for (size_t k = 1; k < e.size(); ++k) acc = combine(o, m.scalar, acc, e[k]);
          for (auto& x : out) x = acc;
          break;
        }
        case ReduceMode::quad:
          for (int64_t i = 0; i < r.rows; ++i)
            for (int64_t c = 0; c < r.cols; ++c) {
              llvm::Value* acc = combine(o, m.scalar, at(2 * i, 2 * c), at(2 * i + 1, 2 * c));
              acc = combine(o, m.scalar, acc, at(2 * i, 2 * c + 1));
              out[i * r.cols + c] = combine(o, m.scalar, acc, at(2 * i + 1, 2 * c + 1));
            }
          break;
      }
      mats_[o.result()] = from_elems(r, out);
      return;
    }
    case OpKind::mat_convert: {
      const Type &m = v[0]->type, &r = o.result()->type;
      if (vector_layout(m) && vector_layout(r)) {
        // f32 sums of AMX tiles to bf16 (plan amx_store): vcvtneps2bf16 rounds to nearest even as
        // the general conversion does, but takes subnormal inputs as zero; the tiles' sums hold
        // none (the dot products flush them, and so does their emulation).
        const bool tile_sums = amx_ && tiles_.count(v[0]) && m.scalar == ScalarType::f32 && r.scalar == ScalarType::bf16 &&
                               cpu_.has("avx512bf16");
        std::vector<llvm::Value*> out;
        for (llvm::Value* x : mat(v[0])) {
          auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
          if (tile_sums && vt && vt->getNumElements() == 16 && vt->getElementType()->isFloatTy())
            out.push_back(b_.CreateIntrinsic(llvm::Intrinsic::x86_avx512bf16_cvtneps2bf16_512, {}, {x}));
          else
            out.push_back(convert_value(x, m.scalar, r.scalar));
        }
        mats_[o.result()] = out;
        return;
      }
      auto e = elems(v[0]);
      for (auto& x : e) x = convert_value(x, m.scalar, r.scalar);
      mats_[o.result()] = from_elems(r, e);
      return;
    }
    case OpKind::mat_transpose: {
      const Type &m = v[0]->type, &r = o.result()->type;
      auto e = elems(v[0]);
      std::vector<llvm::Value*> t(e.size());
      for (int64_t i = 0; i < m.rows; ++i)
        for (int64_t c = 0; c < m.cols; ++c) t[c * m.rows + i] = e[i * m.cols + c];
      mats_[o.result()] = from_elems(r, t);
      return;
    }
    case OpKind::mat_length:  // on the CPU one invocation holds the whole matrix
      scalars_[o.result()] = b_.getInt64(v[0]->type.rows * v[0]->type.cols);
      return;
    case OpKind::mat_coord: {  // element i is (i / cols, i % cols); out of range: UINT32_MAX
      const Type& m = v[0]->type;
      llvm::Value* i = scalar(v[1]);
      llvm::Value* ok = b_.CreateICmpULT(i, b_.getInt64(m.rows * m.cols));
      llvm::Value* bad = b_.getInt64(0xFFFFFFFFu);
      scalars_[o.results[0]] = b_.CreateSelect(ok, b_.CreateUDiv(i, b_.getInt64(m.cols)), bad);
      scalars_[o.results[1]] = b_.CreateSelect(ok, b_.CreateURem(i, b_.getInt64(m.cols)), bad);
      return;
    }
    case OpKind::mat_get: case OpKind::mat_set: {
      // Through a stack copy of the elements, one spare slot past the end for out-of-range
      // indices (get reads 0 there, set writes there: a no-op).
      const Type& m = v[0]->type;
      const int64_t n = m.rows * m.cols;
      llvm::Type* et = scalar_ty(m.scalar);
      auto* arr = llvm::ArrayType::get(et, static_cast<uint64_t>(n + 1));
      llvm::Value* slots;
      {
        llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
        slots = eb.CreateAlloca(arr, nullptr, "elements");
      }
      auto e = elems(v[0]);
      for (int64_t k = 0; k < n; ++k) b_.CreateStore(e[k], b_.CreateConstInBoundsGEP2_64(arr, slots, 0, k));
      b_.CreateStore(llvm::Constant::getNullValue(et), b_.CreateConstInBoundsGEP2_64(arr, slots, 0, n));
      llvm::Value* i = scalar(v[1]);
      llvm::Value* idx = b_.CreateSelect(b_.CreateICmpULT(i, b_.getInt64(n)), i, b_.getInt64(n));
      llvm::Value* at = b_.CreateInBoundsGEP(arr, slots, {b_.getInt64(0), idx});
      if (o.kind == OpKind::mat_get) {
        scalars_[o.result()] = b_.CreateLoad(et, at);
        return;
      }
      b_.CreateStore(scalar(v[2]), at);
      std::vector<llvm::Value*> out;
      for (int64_t k = 0; k < n; ++k) out.push_back(b_.CreateLoad(et, b_.CreateConstInBoundsGEP2_64(arr, slots, 0, k)));
      mats_[o.result()] = from_elems(m, out);
      return;
    }
    case OpKind::mat_sum_accumulate: {
      const Type& c = v[2]->type;
      auto a = elems(v[0]), bb = elems(v[1]), acc = elems(v[2]);
      for (size_t k = 0; k < acc.size(); ++k) {
        llvm::Value* s = scalar_bin(BinOp::add, c.scalar, convert_value(a[k], v[0]->type.scalar, c.scalar),
                                    convert_value(bb[k], v[1]->type.scalar, c.scalar));
        acc[k] = scalar_bin(BinOp::add, c.scalar, acc[k], s);
      }
      mats_[o.result()] = from_elems(c, acc);
      return;
    }
    case OpKind::mat_outer_product: {
      const Type& r = o.result()->type;
      auto x = mat(v[0]), y = mat(v[1]);
      std::vector<llvm::Value*> out;
      for (int64_t i = 0; i < r.rows; ++i)
        for (int64_t c = 0; c < r.cols; ++c)
          out.push_back(scalar_bin(BinOp::mul, r.scalar, convert_value(x[i], v[0]->type.scalar, r.scalar),
                                   convert_value(y[c], v[1]->type.scalar, r.scalar)));
      mats_[o.result()] = from_elems(r, out);
      return;
    }
    case OpKind::mat_accumulate: {  // atomic add of each in-bounds element
      // A groupshared array of another element type: each element converted to it, then added
      // in it (HLSL 0035).
      const Type& m = v[0]->type;
      const ScalarType pt = v[1]->type.scalar;
      Addr a = addr(o, 1);
      auto e = elems(v[0]);
      for (auto& x : e) x = convert_value(x, m.scalar, pt);
      for (int64_t i = 0; i < m.rows; ++i)
        for (int64_t c = 0; c < m.cols; ++c) {
          llvm::Value* r = b_.CreateAdd(a.row, b_.getInt64(i));
          llvm::Value* col = b_.CreateAdd(a.col, b_.getInt64(c));
          llvm::Value* inb = b_.CreateAnd(b_.CreateAnd(b_.CreateICmpSLT(r, a.rows), b_.CreateICmpSLT(col, a.cols)),
                                          b_.CreateAnd(b_.CreateICmpSGE(r, b_.getInt64(0)), b_.CreateICmpSGE(col, b_.getInt64(0))));
          llvm::Value* p = b_.CreateGEP(scalar_ty(pt), a.ptr, b_.CreateAdd(b_.CreateMul(r, a.sr), b_.CreateMul(col, a.sc)));
          auto* yes = llvm::BasicBlock::Create(ctx_, "acc.in", fn_);
          auto* cont = llvm::BasicBlock::Create(ctx_, "acc.cont", fn_);
          b_.CreateCondBr(inb, yes, cont);
          b_.SetInsertPoint(yes);
          if (pt == ScalarType::f8_e4m3 || pt == ScalarType::f8_e5m2)
            fp8_atomic_add(pt, p, e[i * m.cols + c]);
          else
            b_.CreateAtomicRMW(is_float(pt) ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add, p,
                               e[i * m.cols + c], align(pt), llvm::AtomicOrdering::Monotonic);
          b_.CreateBr(cont);
          b_.SetInsertPoint(cont);
        }
      return;
    }
    case OpKind::vec_matrix_mul: {  // result[k] = sum_m v[m] * B[m][k] (+ bias[k])
      const Type &m = v[1]->type, &r = o.result()->type;
      auto x = mat(v[0]);
      auto bm = elems(v[1]);
      std::vector<llvm::Value*> out;
      for (int64_t k = 0; k < m.cols; ++k) {
        llvm::Value* acc = v.size() > 2 ? convert_value(mat(v[2])[k], v[2]->type.scalar, r.scalar)
                                        : llvm::Constant::getNullValue(scalar_ty(r.scalar));
        for (int64_t i = 0; i < m.rows; ++i)
          acc = fma(r.scalar, convert_value(x[i], v[0]->type.scalar, r.scalar),
                    convert_value(bm[i * m.cols + k], m.scalar, r.scalar), acc);
        out.push_back(acc);
      }
      mats_[o.result()] = out;
      return;
    }
    case OpKind::vec_load: case OpKind::vec_store: {
      const bool load = o.kind == OpKind::vec_load;
      const Type& t = load ? o.result()->type : v[0]->type;
      llvm::Value* ptr = scalar(v[load ? 0 : 1]);
      llvm::Value* off = scalar(v[load ? 1 : 2]);
      llvm::Value* stride = scalar(v[load ? 2 : 3]);
      std::vector<llvm::Value*> out;
      for (int64_t k = 0; k < t.cols; ++k) {
        llvm::Value* p = b_.CreateGEP(scalar_ty(t.scalar), ptr, b_.CreateAdd(off, b_.CreateMul(stride, b_.getInt64(k))));
        if (load) out.push_back(b_.CreateAlignedLoad(scalar_ty(t.scalar), p, align(t.scalar)));
        else b_.CreateAlignedStore(mat(v[0])[k], p, align(t.scalar));
      }
      if (load) mats_[o.result()] = out;
      return;
    }
    default:
      throw InternalError(cat("matrix_op does not handle ", mnemonic(o)));
  }
}

// *p += v for fp8 bits (i8), added in fp8 (rounded once, as HLSL 0035 adds in the component type):
// a compare-exchange loop on the byte, since no processor adds fp8 atomically.
void SimdLowering::fp8_atomic_add(ScalarType t, llvm::Value* p, llvm::Value* v) {
  llvm::Type* i8 = b_.getInt8Ty();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::Value* first = b_.CreateAlignedLoad(i8, p, llvm::Align(1));
  auto* loop = llvm::BasicBlock::Create(ctx_, "acc.cas", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "acc.done", fn_);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  llvm::PHINode* old = b_.CreatePHI(i8, 2);
  old->addIncoming(first, pre);
  llvm::Value* pair = b_.CreateAtomicCmpXchg(p, old, scalar_bin(BinOp::add, t, old, v), llvm::Align(1),
                                             llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic);
  old->addIncoming(b_.CreateExtractValue(pair, 0), b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateExtractValue(pair, 1), done, loop);
  b_.SetInsertPoint(done);
}

}  // namespace coopjit
