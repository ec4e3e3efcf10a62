// The SIMT lowering of mul_add on Intel's matrix engines: OpSubgroupMatrixMultiplyAccumulateINTEL
// (SPV_INTEL_subgroup_matrix_multiply_accumulate; DPAS on Xe-HPC and Xe2) at subgroup size 16,
// for f16 / bf16 inputs with f32 accumulators and i8 / u8 inputs with i32 accumulators.
//
// The instruction computes D (M x 16) = A (M x K) B (K x 16) + C with M in {1, 2, 4, 8} and K =
// 16 (16-bit inputs) or 32 (8-bit inputs); lane n holds column n of C and D (component m: row m),
// B as K / 2 or K / 4 32-bit channels of column n (VNNI: consecutive K values packed, the lower
// K in the lower bits), and A as one 16-bit word per row m: element (m, n) for 16-bit inputs,
// elements (m, 2n) and (m, 2n + 1) for 8-bit ones.
//
// The seeds' layout runs the lanes down the rows of C and of matrix_a, and puts omega K values
// in one channel of matrix_a (its VNNI): that is DPAS's layout of the transposed product. So
//   C^T (8 columns of C x 16 rows) += B^T (8 x K) A^T (K x 16 rows)
// makes the kernel's matrix_a DPAS's (VNNI-packed) B operand and the kernel's matrix_b its A
// operand, with every element on the lane that already holds it: no shuffles. The K order of
// the instruction is free (a sum over K): DPAS K index k' takes the kernel's K value pi(k'),
// where pi gives lane n the K values matrix_b keeps on lane n (for i8, K1 = 2: rows n and
// n + 16). Mode 2 ("emulated") writes the same operands and computes the instruction from its
// specification with subgroup shuffles, so that the operand packing runs (and is tested) on
// devices without DPAS.
#include <llvm/IR/Intrinsics.h>

#include "lower/simt_lowering.h"

namespace coopjit {

namespace {

// Matrix Multiply Accumulate Operands (SPIR-V registry, SPV_INTEL_subgroup_matrix_multiply_accumulate).
constexpr uint32_t kASigned = 0x1, kBSigned = 0x2, kAInt8 = 0x10, kBInt8 = 0x20, kAFp16 = 0x400, kBFp16 = 0x800,
                   kABf16 = 0x1000, kBBf16 = 0x2000;

// Itanium mangling of an OpenCL built-in with scalar and vector arguments (vector types are
// substitution candidates: the second use of Dv8_i is S_, of the next new one S0_, ...).
std::string mangle(const std::string& name, const std::vector<llvm::Type*>& args) {
  auto scalar = [](llvm::Type* t) -> std::string {
    if (t->isHalfTy()) return "Dh";
    if (t->isFloatTy()) return "f";
    if (t->isIntegerTy(8)) return "c";
    if (t->isIntegerTy(16)) return "s";
    if (t->isIntegerTy(32)) return "i";
    throw InternalError("mangle: unsupported built-in argument type");
  };
  std::string out = cat("_Z", name.size(), name);
  std::vector<std::string> subs;
  for (llvm::Type* t : args) {
    auto* v = llvm::dyn_cast<llvm::FixedVectorType>(t);
    if (!v) {
      out += scalar(t);
      continue;
    }
    const std::string s = cat("Dv", v->getNumElements(), "_", scalar(v->getElementType()));
    auto it = std::find(subs.begin(), subs.end(), s);
    if (it == subs.end()) {
      out += s;
      subs.push_back(s);
    } else {
      const auto i = it - subs.begin();
      out += i == 0 ? std::string("S_") : cat("S", i - 1, "_");
    }
  }
  return out;
}

}  // namespace

std::optional<SimtLowering::DpasShape> SimtLowering::dpas_shape(const Type& ta, const Type& tb, const Type& tc) const {
  if (S_ != 16) return std::nullopt;
  DpasShape d;
  const ScalarType a = ta.scalar, b = tb.scalar;
  auto int8 = [](ScalarType t) { return t == ScalarType::i8 || t == ScalarType::u8; };
  if (a == ScalarType::f16 && b == ScalarType::f16 && tc.scalar == ScalarType::f32) {
    d.kdim = 16, d.bits = 16, d.flags = kAFp16 | kBFp16;
  } else if (a == ScalarType::bf16 && b == ScalarType::bf16 && tc.scalar == ScalarType::f32) {
    d.kdim = 16, d.bits = 16, d.flags = kABf16 | kBBf16;
  } else if (int8(a) && int8(b) && tc.scalar == ScalarType::i32) {
    // The instruction's A is the kernel's B and the other way round.
    d.kdim = 32, d.bits = 8, d.flags = kAInt8 | kBInt8 | (b == ScalarType::i8 ? kASigned : 0) | (a == ScalarType::i8 ? kBSigned : 0);
  } else {
    return std::nullopt;
  }
  d.m = tc.cols % 8 == 0 ? 8 : tc.cols;
  if (tc.rows % S_ != 0 || ta.cols % d.kdim != 0 || (d.m != 1 && d.m != 2 && d.m != 4 && d.m != 8)) return std::nullopt;
  return d;
}

namespace {
// The component that holds element elem(p) on every lane p, when each lane holds its own one in
// the same component; -1 otherwise.
int64_t common_component(const LaneMap& L, int S, const std::function<std::pair<int64_t, int64_t>(int)>& elem) {
  int64_t comp = -1;
  for (int p = 0; p < S; ++p) {
    auto [r, c] = elem(p);
    auto [lane, n] = L.owner(r, c);
    if (lane != p || (comp >= 0 && n != comp) || L.inside(n) != 1) return -1;
    comp = n;
  }
  return comp;
}
}  // namespace

bool SimtLowering::dpas_mul_add(const Op& o, std::vector<llvm::Value*>& C) {
  const Type &ta = o.operands[0]->type, &tb = o.operands[1]->type, &tc = o.operands[2]->type;
  const auto shape = dpas_shape(ta, tb, tc);
  if (!shape) return false;
  const DpasShape d = *shape;
  const LaneMap La = lanes_of(ta), Lb = lanes_of(tb), Lc = lanes_of(tc);
  const int per_lane = d.kdim / S_;  // K values of the instruction's A per lane and row: 1 or 2
  const int per_chan = 32 / d.bits;  // K values per 32-bit channel of the instruction's B: 2 or 4

  // Where everything is, checked before anything is emitted (any miss: the generic mul_add).
  const int64_t K = ta.cols, N = tc.cols, M = tc.rows;
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> b_comps;  // (r0, k0) -> [k'] comp of matrix_a
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> a_comps;  // (c0, k0) -> [m * per_lane + s] comp of matrix_b
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> c_comps;  // (r0, c0) -> [m] comp of C
  for (int64_t k0 = 0; k0 < K; k0 += d.kdim) {
    // pi from lane p's K values of matrix_b in this block (the same in every column).
    std::vector<std::vector<int64_t>> mine(S_);
    for (int64_t k = k0; k < k0 + d.kdim; ++k) {
      const int64_t lane = Lb.owner(k, 0).first;
      if (lane < 0 || lane >= S_) return false;
      mine[lane].push_back(k);
    }
    std::vector<int64_t> pi(d.kdim);
    for (int p = 0; p < S_; ++p) {
      if (static_cast<int>(mine[p].size()) != per_lane) return false;
      for (int s = 0; s < per_lane; ++s) pi[p * per_lane + s] = mine[p][s];
    }
    for (int64_t c0 = 0; c0 < N; c0 += d.m) {
      auto& v = a_comps[{c0, k0}];
      for (int m = 0; m < d.m; ++m)
        for (int s = 0; s < per_lane; ++s) {
          const int64_t n = common_component(Lb, S_, [&](int p) { return std::make_pair(pi[p * per_lane + s], c0 + m); });
          if (n < 0) return false;
          v.push_back(n);
        }
    }
    for (int64_t r0 = 0; r0 < M; r0 += S_) {
      auto& v = b_comps[{r0, k0}];
      for (int kk = 0; kk < d.kdim; ++kk) {
        const int64_t n = common_component(La, S_, [&](int p) { return std::make_pair(r0 + p, pi[kk]); });
        if (n < 0) return false;
        v.push_back(n);
      }
    }
  }
  for (int64_t r0 = 0; r0 < M; r0 += S_)
    for (int64_t c0 = 0; c0 < N; c0 += d.m) {
      auto& v = c_comps[{r0, c0}];
      for (int m = 0; m < d.m; ++m) {
        const int64_t n = common_component(Lc, S_, [&](int p) { return std::make_pair(r0 + p, c0 + m); });
        if (n < 0) return false;
        v.push_back(n);
      }
    }

  const auto& A = mat(o.operands[0]);
  const auto& B = mat(o.operands[1]);
  llvm::Type* i16 = b_.getInt16Ty();
  llvm::Type* i32 = b_.getInt32Ty();
  auto bits_of = [&](llvm::Value* x) {  // a component's bits as an integer of d.bits
    return x->getType()->isIntegerTy() ? x : b_.CreateBitCast(x, b_.getIntNTy(x->getType()->getPrimitiveSizeInBits()));
  };
  auto pack = [&](const std::vector<llvm::Value*>& parts, llvm::Type* to) {  // parts[0] in the lowest bits
    llvm::Value* w = nullptr;
    for (size_t i = 0; i < parts.size(); ++i) {
      llvm::Value* x = b_.CreateZExt(bits_of(parts[i]), to);
      if (i) x = b_.CreateShl(x, llvm::ConstantInt::get(to, i * d.bits));
      w = w ? b_.CreateOr(w, x) : x;
    }
    return w;
  };
  auto vec = [&](const std::vector<llvm::Value*>& xs) -> llvm::Value* {
    if (xs.size() == 1) return xs[0];
    llvm::Value* v = llvm::PoisonValue::get(llvm::FixedVectorType::get(xs[0]->getType(), xs.size()));
    for (size_t i = 0; i < xs.size(); ++i) v = b_.CreateInsertElement(v, xs[i], b_.getInt32(i));
    return v;
  };
  // The instruction's operands, each packed once and shared by the calls that use it.
  std::map<std::pair<int64_t, int64_t>, llvm::Value*> a_ops, b_ops;
  auto a_op = [&](int64_t c0, int64_t k0) {  // M x i16: the kernel's B (K on the lanes)
    llvm::Value*& v = a_ops[{c0, k0}];
    if (!v) {
      const auto& comps = a_comps.at({c0, k0});
      std::vector<llvm::Value*> words;
      for (int m = 0; m < d.m; ++m) {
        std::vector<llvm::Value*> parts;
        for (int s = 0; s < per_lane; ++s) parts.push_back(B[comps[m * per_lane + s]]);
        words.push_back(pack(parts, i16));
      }
      v = vec(words);
    }
    return v;
  };
  auto b_op = [&](int64_t r0, int64_t k0) {  // 8 x i32: the kernel's A, VNNI channels
    llvm::Value*& v = b_ops[{r0, k0}];
    if (!v) {
      const auto& comps = b_comps.at({r0, k0});
      std::vector<llvm::Value*> words;
      for (int j = 0; j < d.kdim / per_chan; ++j) {
        std::vector<llvm::Value*> parts;
        for (int t = 0; t < per_chan; ++t) parts.push_back(A[comps[j * per_chan + t]]);
        words.push_back(pack(parts, i32));
      }
      v = vec(words);
    }
    return v;
  };
  for (int64_t r0 = 0; r0 < M; r0 += S_)
    for (int64_t c0 = 0; c0 < N; c0 += d.m) {
      const auto& cc = c_comps.at({r0, c0});
      std::vector<llvm::Value*> acc;
      for (int64_t n : cc) acc.push_back(C[n]);
      llvm::Value* c = vec(acc);
      for (int64_t k0 = 0; k0 < K; k0 += d.kdim)
        c = dpas_mode_ == 2 ? dpas_emulated(d, a_op(c0, k0), b_op(r0, k0), c)
                            : builtin(mangle("__spirv_SubgroupMatrixMultiplyAccumulateINTEL",
                                             {i32, a_op(c0, k0)->getType(), b_op(r0, k0)->getType(), c->getType(), i32}),
                                      c->getType(), {b_.getInt32(d.kdim), a_op(c0, k0), b_op(r0, k0), c, b_.getInt32(d.flags)},
                                      true);
      for (int m = 0; m < d.m; ++m) C[cc[m]] = d.m == 1 ? c : b_.CreateExtractElement(c, b_.getInt32(m));
    }
  return true;
}

// The instruction from its specification (see the file comment), lane n computing column n:
//   D[m][n] = C[m][n] + sum over k of A[m][k] * B[k][n],
// A[m][k] on lane k / per_lane (16-bit word m; for 8-bit inputs, byte k % 2), B[k][n] in this
// lane's channel k / per_chan at bit (k % per_chan) * bits.
// A loop over the source lanes (the sum in the same order as the specification's), not 16
// unrolled copies: unrolled, a 32 x 32 subgroup tile was ~3000 shuffles and multiply-adds a K
// step; looped, an int8 kernel's SPIR-V is 0.93 MB instead of 2.4 and Intel's CPU OpenCL
// runtime compiles it in 18 s instead of 33 (16-bit kernels: 1.2 -> 0.58 MB, ~13 s either way).
llvm::Value* SimtLowering::dpas_emulated(const DpasShape& d, llvm::Value* a, llvm::Value* bop, llvm::Value* c) {
  const int per_lane = d.kdim / S_, per_chan = 32 / d.bits;
  llvm::Type* acc_t = c->getType()->getScalarType();
  llvm::Type* i32 = b_.getInt32Ty();
  const bool fp = acc_t->isFloatTy();
  auto elem = [&](llvm::Value* v, int i) { return v->getType()->isVectorTy() ? b_.CreateExtractElement(v, b_.getInt32(i)) : v; };
  // A value of d.bits bits as the accumulator type.
  auto widen = [&](llvm::Value* bits, bool is_signed) -> llvm::Value* {
    if (d.bits == 8) return is_signed ? b_.CreateSExt(bits, acc_t) : b_.CreateZExt(bits, acc_t);
    if (d.flags & kAFp16) return b_.CreateFPExt(b_.CreateBitCast(bits, b_.getHalfTy()), acc_t);
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(bits, i32), 16), acc_t);  // bf16
  };
  auto field = [&](llvm::Value* word, llvm::Value* shift) {  // d.bits bits of word from bit `shift`
    return b_.CreateTrunc(b_.CreateLShr(word, b_.CreateZExtOrTrunc(shift, word->getType())), b_.getIntNTy(d.bits));
  };
  std::vector<llvm::Value*> rows, init;  // A's word of row m on this lane; C's component m
  for (int m = 0; m < d.m; ++m) {
    rows.push_back(elem(a, m));
    init.push_back(elem(c, m));
  }
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "dpas.emu", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "dpas.emu.done", fn);
  b_.CreateBr(body);
  b_.SetInsertPoint(body);
  llvm::PHINode* src = b_.CreatePHI(i32, 2, "src");
  src->addIncoming(b_.getInt32(0), pre);
  std::vector<llvm::PHINode*> acc_phi;
  std::vector<llvm::Value*> acc;
  for (int m = 0; m < d.m; ++m) {
    acc_phi.push_back(b_.CreatePHI(acc_t, 2));
    acc_phi.back()->addIncoming(init[static_cast<size_t>(m)], pre);
    acc.push_back(acc_phi.back());
  }
  std::vector<llvm::Value*> bits_b;  // B[k][n] for this lane's k = src * per_lane + s
  for (int s = 0; s < per_lane; ++s) {
    llvm::Value* k = b_.CreateAdd(b_.CreateMul(src, b_.getInt32(per_lane)), b_.getInt32(s));
    llvm::Value* chan = bop->getType()->isVectorTy() ? b_.CreateExtractElement(bop, b_.CreateUDiv(k, b_.getInt32(per_chan))) : bop;
    bits_b.push_back(widen(field(chan, b_.CreateMul(b_.CreateURem(k, b_.getInt32(per_chan)), b_.getInt32(d.bits))),
                           d.flags & kBSigned));
  }
  for (int m = 0; m < d.m; ++m) {
    llvm::Value* word = target_.shuffle(b_, rows[static_cast<size_t>(m)], src);  // lane src's word of row m (uniform)
    for (int s = 0; s < per_lane; ++s) {
      llvm::Value* x = widen(field(word, b_.getInt32(s * d.bits)), d.flags & kASigned);
      llvm::Value* y = bits_b[static_cast<size_t>(s)];
      acc[static_cast<size_t>(m)] = fp ? b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {acc_t}, {x, y, acc[static_cast<size_t>(m)]})
                                       : b_.CreateAdd(b_.CreateMul(x, y), acc[static_cast<size_t>(m)]);
    }
  }
  llvm::Value* next = b_.CreateAdd(src, b_.getInt32(1));
  llvm::BasicBlock* end = b_.GetInsertBlock();
  src->addIncoming(next, end);
  for (int m = 0; m < d.m; ++m) acc_phi[static_cast<size_t>(m)]->addIncoming(acc[static_cast<size_t>(m)], end);
  b_.CreateCondBr(b_.CreateICmpULT(next, b_.getInt32(static_cast<uint32_t>(S_))), body, done);
  b_.SetInsertPoint(done);
  if (acc.size() == 1) return acc[0];
  llvm::Value* v = llvm::PoisonValue::get(c->getType());
  for (size_t i = 0; i < acc.size(); ++i) v = b_.CreateInsertElement(v, acc[i], b_.getInt32(i));
  return v;
}

}  // namespace coopjit
