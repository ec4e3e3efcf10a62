// Transcendental functions written as LLVM IR that vectorizes: on x86 LLVM turns llvm.exp /
// llvm.tanh on a vector into one libm call per lane, which costs more than the GEMM epilogue
// or softmax around it. Each function takes a float (f32 or f64) scalar or vector value.
#pragma once

#include <functional>

#include <llvm/IR/IRBuilder.h>

namespace coopjit::lower {

/// e^x for f32 (scalar or vector): x = n ln2 + r (|r| <= ln2 / 2, Cody-Waite with a two-part
/// ln2), e^r by a degree-7 polynomial, 2^n by building the exponent bits. Within 2 ulp; inf above
/// 88.72, 0 below -87.33 (no subnormal results), NaN propagates.
llvm::Value* exp_f32(llvm::IRBuilder<>& b, llvm::Value* x);

/// tanh x for f32: an odd Taylor polynomial below |x| = 0.3, else sign(x) (1 - 2 / (e^2|x| + 1)).
llvm::Value* tanh_f32(llvm::IRBuilder<>& b, llvm::Value* x);

/// erf x for f32: a Taylor polynomial below |x| = 0.5, else 1 - erfc |x| (sign restored), erfc z = t e^(-z^2 + P(t)), t = 1 / (1 + z / 2),
/// P a degree-9 polynomial (fractional error of erfc below 1.2e-7 for every z >= 0).
/// `exp`: the e^x to use (a target's own; default exp_f32); `recip`: 1 / x of t's denominator (in
/// [1, inf]; a target's approximate reciprocal within 1 ulp, e.g. NVPTX's rcp.approx, whose IEEE
/// division is a call to a slow path per element; default an IEEE division).
using ExpFn = std::function<llvm::Value*(llvm::IRBuilder<>&, llvm::Value*)>;
/// `absolute`: 1 - erfc |x| with x's sign only (absolute error ~1.2e-7, no relative accuracy near 0):
/// for a caller that adds erf to 1 (GELU), without the series below |x| = 0.5 (13 instructions less).
llvm::Value* erf_f32(llvm::IRBuilder<>& b, llvm::Value* x, const ExpFn& exp = nullptr, const ExpFn& recip = nullptr,
                     bool absolute = false);
/// erfc |x| as above (for GELU, whose negative tail is x erfc(|x| / sqrt 2) / 2: no cancellation).
llvm::Value* erfc_abs_f32(llvm::IRBuilder<>& b, llvm::Value* x, const ExpFn& exp = nullptr, const ExpFn& recip = nullptr);

/// erf x for f64: the C library's erf, lane by lane (the module declares `erf`; the CPU JIT
/// resolves it in the process).
llvm::Value* erf_f64_libm(llvm::IRBuilder<>& b, llvm::Value* x);

}  // namespace coopjit::lower
