// The SIMD lowering of VNNI-packed loads and stores and of mul_add through the CPU's dot-product
// instructions: AVX512-BF16 (vdpbf16ps: pairs of bf16 products added to f32) and AVX512-VNNI /
// AVX-VNNI (vpdpbusd: quads of u8 x s8 products added to i32). These are the seeds' VNNI layout (001:
// omega = 4 / component size consecutive K elements in one 32-bit channel) in registers.
#include "lower/simd_lowering.h"

#include "target/cpu_info.h"

namespace coopjit {

namespace {
int vnni_of(const Op& o) { return static_cast<int>(o.int_attr("vnni", 1)); }
}  // namespace

// Element (x, k) of a vnni-packed access: x is the row of a matrix_a, the column of a matrix_b.
llvm::Value* SimdLowering::vnni_element_ptr(const Type& t, const Addr& a, int64_t x, int64_t k) {
  const bool is_a = t.use == Use::a;
  const int64_t om = 4 / size_in_bytes(t.scalar);
  llvm::Value* k0 = is_a ? a.col : a.row;  // a multiple of omega (whole channels)
  llvm::Value* x0 = is_a ? a.row : a.col;
  llvm::Value* sk = is_a ? a.sc : a.sr;
  llvm::Value* q = b_.CreateAdd(b_.CreateUDiv(k0, b_.getInt64(om)), b_.getInt64(k / om));
  llvm::Value* off = b_.CreateAdd(b_.CreateMul(q, sk),
                                  b_.CreateAdd(b_.CreateMul(b_.CreateAdd(x0, b_.getInt64(x)), b_.getInt64(om)),
                                               b_.getInt64(k % om)));
  return b_.CreateGEP(scalar_ty(t.scalar), a.ptr, off);
}

void SimdLowering::load_vnni(const Op& o) {
  const Type& t = o.result()->type;
  const int om = vnni_of(o);
  Addr a = addr(o, 0);
  llvm::Type* et = scalar_ty(t.scalar);
  std::vector<llvm::Value*> out, raw;
  if (t.use == Use::a) {
    for (int64_t i = 0; i < t.rows; ++i)
      for (int64_t k = 0; k < t.cols; ++k) out.push_back(b_.CreateAlignedLoad(et, vnni_element_ptr(t, a, i, k), align(t.scalar)));
    for (int64_t i = 0; i < t.rows; ++i)
      for (int64_t q = 0; q < t.cols / om; ++q)
        raw.push_back(b_.CreateAlignedLoad(b_.getInt32Ty(), vnni_element_ptr(t, a, i, q * om), align(t.scalar)));
  } else {
    COOPJIT_INTERNAL_ASSERT(!in_memory(t), "vnni loads of matrices held in memory are not supported");
    const int nch = chunks(t);
    auto* wide = llvm::FixedVectorType::get(et, om * S_);
    out.resize(static_cast<size_t>(t.rows * nch));
    for (int64_t q = 0; q < t.rows / om; ++q)
      for (int j = 0; j < nch; ++j) {
        llvm::Value* p = vnni_element_ptr(t, a, int64_t(j) * S_, q * om);
        const int valid = static_cast<int>(std::min<int64_t>(S_, t.cols - int64_t(j) * S_));
        llvm::Value* v;
        if (valid == S_) {
          v = b_.CreateAlignedLoad(wide, p, align(t.scalar));
        } else {
          std::vector<llvm::Constant*> m;
          for (int l = 0; l < om * S_; ++l) m.push_back(b_.getInt1(l < om * valid));
          v = b_.CreateMaskedLoad(wide, p, align(t.scalar), llvm::ConstantVector::get(m), llvm::Constant::getNullValue(wide));
        }
        raw.push_back(v);
        for (int r = 0; r < om; ++r) {  // row om*q+r: every om-th component from r
          std::vector<int> sel;
          for (int l = 0; l < S_; ++l) sel.push_back(l * om + r);
          out[static_cast<size_t>((q * om + r) * nch + j)] = b_.CreateShuffleVector(v, sel);
        }
      }
  }
  mats_[o.result()] = out;
  raw_[o.result()] = raw;
}

void SimdLowering::store_vnni(const Op& o) {
  const Type& t = o.operands[0]->type;
  const int om = vnni_of(o);
  Addr a = addr(o, 1);
  const auto& vals = mat(o.operands[0]);
  if (t.use == Use::a) {
    // One store per 32-bit channel (its om elements as one vector): element stores would keep
    // LLVM from seeing the channels, and an s8 -> u8 pack (a + 128) ran at a byte per store.
    auto* ch_t = llvm::FixedVectorType::get(scalar_ty(t.scalar), om);
    // A packed panel's block (the rows from the panel's first, the channel stride = rows
    // channels): its channels are contiguous, (q, i) at q * rows + i. Each row as one vector of
    // 32-bit channels, the rows interleaved by one shuffle, one store (a few full-width stores
    // after lowering, where a channel a store ran at 4 bytes a store).
    auto* sk = llvm::dyn_cast<llvm::ConstantInt>(a.sc);
    auto* x0 = llvm::dyn_cast<llvm::ConstantInt>(a.row);
    const int64_t nq = t.cols / om;
    if (sk && x0 && x0->isZero() && sk->getSExtValue() == t.rows * om && nq >= 4 && t.rows > 1) {
      auto* row_t = llvm::FixedVectorType::get(scalar_ty(t.scalar), static_cast<unsigned>(t.cols));
      auto* dw_t = llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(nq));
      std::vector<llvm::Value*> rows;
      for (int64_t i = 0; i < t.rows; ++i) {
        llvm::Value* v = llvm::PoisonValue::get(row_t);
        for (int64_t k = 0; k < t.cols; ++k) v = b_.CreateInsertElement(v, vals[static_cast<size_t>(i * t.cols + k)], k);
        rows.push_back(b_.CreateBitCast(v, dw_t));
      }
      // Concatenate pairwise (padding with poison to a power of two), then pick (q, i) -> q * rows + i.
      std::vector<llvm::Value*> parts = rows;
      size_t p2 = 1;
      while (p2 < parts.size()) p2 *= 2;
      while (parts.size() < p2) parts.push_back(llvm::PoisonValue::get(dw_t));
      llvm::Value* all = concat_vectors(b_, parts);
      std::vector<int> sel;
      for (int64_t q = 0; q < nq; ++q)
        for (int64_t i = 0; i < t.rows; ++i) sel.push_back(static_cast<int>(i * nq + q));
      llvm::Value* block = b_.CreateShuffleVector(all, sel);
      b_.CreateAlignedStore(block, vnni_element_ptr(t, a, 0, 0), align(t.scalar));
      return;
    }
    for (int64_t i = 0; i < t.rows; ++i)
      for (int64_t q = 0; q < t.cols / om; ++q) {
        llvm::Value* v = llvm::PoisonValue::get(ch_t);
        for (int r = 0; r < om; ++r) v = b_.CreateInsertElement(v, vals[static_cast<size_t>(i * t.cols + q * om + r)], r);
        b_.CreateAlignedStore(v, vnni_element_ptr(t, a, i, q * om), align(t.scalar));
      }
    return;
  }
  const int nch = chunks(t);
  for (int64_t q = 0; q < t.rows / om; ++q)
    for (int j = 0; j < nch; ++j) {
      std::vector<llvm::Value*> rows;
      for (int r = 0; r < om; ++r) rows.push_back(vals[static_cast<size_t>((q * om + r) * nch + j)]);
      llvm::Value* v = interleave(rows);
      llvm::Value* p = vnni_element_ptr(t, a, int64_t(j) * S_, q * om);
      const int valid = static_cast<int>(std::min<int64_t>(S_, t.cols - int64_t(j) * S_));
      if (valid == S_) {
        b_.CreateAlignedStore(v, p, align(t.scalar));
      } else {
        std::vector<llvm::Constant*> m;
        for (int l = 0; l < om * S_; ++l) m.push_back(b_.getInt1(l < om * valid));
        b_.CreateMaskedStore(v, p, align(t.scalar), llvm::ConstantVector::get(m));
      }
    }
}

llvm::Value* concat_vectors(llvm::IRBuilder<>& b, std::vector<llvm::Value*> parts) {
  while (parts.size() > 1) {  // pairwise: a power-of-two count of equal-width vectors
    std::vector<llvm::Value*> next;
    const int n = static_cast<int>(llvm::cast<llvm::FixedVectorType>(parts[0]->getType())->getNumElements());
    std::vector<int> both;
    for (int l = 0; l < 2 * n; ++l) both.push_back(l);
    for (size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(b.CreateShuffleVector(parts[i], parts[i + 1], both));
    parts = std::move(next);
  }
  return parts[0];
}

// om vectors of S lanes -> one of om * S: lane l of vector r goes to om * l + r.
llvm::Value* SimdLowering::interleave(const std::vector<llvm::Value*>& rows) {
  const int om = static_cast<int>(rows.size());
  if (om == 1) return rows[0];
  // One vector of om * S lanes (row r at r * S), then pick.
  llvm::Value* all = concat_vectors(b_, rows);
  std::vector<int> sel;
  for (int l = 0; l < S_; ++l)
    for (int r = 0; r < om; ++r) sel.push_back(r * S_ + l);
  return b_.CreateShuffleVector(all, sel);
}

SimdLowering::Dot SimdLowering::dot_kind(const Type& ta, const Type& tb, const Type& tc) const {
  if ((S_ != 16 && S_ != 8) || ta.use != Use::a || tb.use != Use::b) return Dot::none;
  if (in_memory(tb) || in_memory(tc)) return Dot::none;
  const CpuInfo& cpu = cpu_;
  // 16 lanes: the AVX-512 forms; 8 lanes (AVX2 level): AVX-VNNI's VEX vpdpbusd (no bf16 dot there).
  const bool wide = S_ == 16 && cpu.has("avx512f");
  if (wide && ta.scalar == ScalarType::bf16 && tb.scalar == ScalarType::bf16 && tc.scalar == ScalarType::f32 &&
      ta.cols % 2 == 0 && cpu.has("avx512bf16"))
    return Dot::bf16;
  const bool vnni = wide ? cpu.has("avx512vnni") && cpu.has("avx512bw") : S_ == 8 && cpu.has("avxvnni");
  if (tc.scalar == ScalarType::i32 && ta.cols % 4 == 0 && vnni) {
    if (ta.scalar == ScalarType::u8 && tb.scalar == ScalarType::i8) return Dot::u8s8;
    if (ta.scalar == ScalarType::i8 && tb.scalar == ScalarType::u8) return Dot::s8u8;
  }
  return Dot::none;
}

std::vector<llvm::Value*> SimdLowering::mul_add_dot(const Op& o, Dot kind) {
  const Type &ta = o.operands[0]->type, &tc = o.operands[2]->type;
  const int om = kind == Dot::bf16 ? 2 : 4;
  const auto& a = mat(o.operands[0]);
  const auto& bv = mat(o.operands[1]);
  auto ra = raw_.find(o.operands[0]);
  auto rb = raw_.find(o.operands[1]);
  std::vector<llvm::Value*> c = mat(o.operands[2]);
  const int nch = chunks(tc);
  const int64_t groups = ta.cols / om;
  llvm::Type* et = kind == Dot::bf16 ? b_.getBFloatTy() : b_.getInt8Ty();
  auto* wide = llvm::FixedVectorType::get(et, om * S_);
  // A's channel (i, q), splat over the lanes.
  auto a_splat = [&](int64_t i, int64_t q) {
    llvm::Value* w;
    if (ra != raw_.end()) {
      w = ra->second[static_cast<size_t>(i * groups + q)];
    } else {
      llvm::Value* v = llvm::PoisonValue::get(llvm::FixedVectorType::get(a[0]->getType(), om));
      for (int r = 0; r < om; ++r) v = b_.CreateInsertElement(v, a[static_cast<size_t>(i * ta.cols + q * om + r)], r);
      w = b_.CreateBitCast(v, b_.getInt32Ty());
    }
    return b_.CreateBitCast(b_.CreateVectorSplat(S_, w), wide);
  };
  // (the 256-bit form is AVX512-VNNI's with VL, or AVX-VNNI's VEX encoding: LLVM picks by features)
  const llvm::Intrinsic::ID busd =
      S_ == 16 ? llvm::Intrinsic::x86_avx512_vpdpbusd_512 : llvm::Intrinsic::x86_avx512_vpdpbusd_256;
  std::vector<llvm::Value*> bq(static_cast<size_t>(groups * nch));
  for (int64_t q = 0; q < groups; ++q)
    for (int j = 0; j < nch; ++j) {
      llvm::Value* v;
      if (rb != raw_.end()) {
        v = rb->second[static_cast<size_t>(q * nch + j)];
      } else {
        std::vector<llvm::Value*> rows;
        for (int r = 0; r < om; ++r) rows.push_back(bv[static_cast<size_t>((q * om + r) * nch + j)]);
        v = interleave(rows);
      }
      bq[static_cast<size_t>(q * nch + j)] = b_.CreateBitCast(v, wide);
    }
  for (int64_t q = 0; q < groups; ++q)
    for (int64_t i = 0; i < tc.rows; ++i) {
      llvm::Value* as = a_splat(i, q);
      for (int j = 0; j < nch; ++j) {
        llvm::Value*& acc = c[static_cast<size_t>(i * nch + j)];
        llvm::Value* bj = bq[static_cast<size_t>(q * nch + j)];
        switch (kind) {
          case Dot::bf16:
            acc = b_.CreateIntrinsic(llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512, {}, {acc, as, bj});
            break;
          case Dot::u8s8:  // vpdpbusd: the first source's bytes are unsigned, the second's signed
            acc = b_.CreateIntrinsic(busd, {}, {acc, as, bj});
            break;
          case Dot::s8u8:
            acc = b_.CreateIntrinsic(busd, {}, {acc, bj, as});
            break;
          case Dot::none:
            break;
        }
      }
    }
  return c;
}

}  // namespace coopjit
