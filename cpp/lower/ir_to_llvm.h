// Small mappings from the kernel IR to LLVM shared by the SIMD (CPU) and SIMT (SPIR-V) lowerings.
#pragma once

#include <functional>
#include <vector>

#include <llvm/IR/IRBuilder.h>
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

/// The structured control flow of the IR, as both lowerings emit it.
/// for (iv = lb; iv < ub; iv += step) carrying `init`: `body` runs with the builder in the loop
/// body, gets the induction variable and the carried values (phis), and returns the next ones;
/// the builder is left at the exit, and the carried values after the loop are returned.
using LoopBody = std::function<std::vector<llvm::Value*>(llvm::Value* iv, const std::vector<llvm::Value*>& carried)>;
std::vector<llvm::Value*> emit_for(llvm::IRBuilder<>& b, llvm::Function* fn, llvm::Value* lb, llvm::Value* ub,
                                   llvm::Value* step, const std::vector<llvm::Value*>& init, const LoopBody& body);
/// if (cond) then_arm() else else_arm(), each returning the values it yields (of the same types);
/// the builder is left at the merge point, and the merged values (phis) are returned.
using Arm = std::function<std::vector<llvm::Value*>()>;
std::vector<llvm::Value*> emit_if(llvm::IRBuilder<>& b, llvm::Function* fn, llvm::Value* cond, const Arm& then_arm,
                                  const Arm& else_arm);

/// x op y on integers (signed or not) or on floats (add, sub, mul, div); nullptr for float
/// min / max, whose NaN and signed-zero handling each lowering emits its own way.
llvm::Value* emit_binary(llvm::IRBuilder<>& b, ir::BinOp op, ir::ScalarType t, llvm::Value* x, llvm::Value* y);

/// Refuses (TypeError) an i1 matrix, vector or pointer anywhere in `f`: i1 values live in
/// registers only (comparisons, select, if); in memory booleans are bytes (NumPy's bool), which
/// kernels read and write as u8 and compare. `target` names the lowering ("the CPU", ...).
void reject_i1_in_memory(const ir::Function& f, const char* target);

}  // namespace coopjit
