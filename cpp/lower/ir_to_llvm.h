// Small mappings from the kernel IR to LLVM shared by the SIMD (CPU) and SIMT (SPIR-V) lowerings.
#pragma once

#include <llvm/IR/InstrTypes.h>

#include "ir/ir.h"

namespace coopjit {

/// The LLVM predicate of an IR comparison on type t: ordered float compares (une for ne, so that
/// NaN != x), signed or unsigned integer compares.
inline llvm::CmpInst::Predicate llvm_predicate(ir::CmpPred p, ir::ScalarType t) {
  using P = llvm::CmpInst;
  static const P::Predicate fp[] = {P::FCMP_OLT, P::FCMP_OLE, P::FCMP_OGT, P::FCMP_OGE, P::FCMP_OEQ, P::FCMP_UNE};
  static const P::Predicate sp[] = {P::ICMP_SLT, P::ICMP_SLE, P::ICMP_SGT, P::ICMP_SGE, P::ICMP_EQ, P::ICMP_NE};
  static const P::Predicate up[] = {P::ICMP_ULT, P::ICMP_ULE, P::ICMP_UGT, P::ICMP_UGE, P::ICMP_EQ, P::ICMP_NE};
  const int i = static_cast<int>(p);
  if (ir::is_float(t)) return fp[i];
  return ir::is_signed(t) ? sp[i] : up[i];
}

}  // namespace coopjit
