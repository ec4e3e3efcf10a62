// Shared pieces of the SIMD and SIMT lowerings (ir_to_llvm.h).
#include "lower/ir_to_llvm.h"

#include "core/error.h"

namespace coopjit {

std::vector<llvm::Value*> emit_for(llvm::IRBuilder<>& b, llvm::Function* fn, llvm::Value* lb, llvm::Value* ub,
                                   llvm::Value* step, const std::vector<llvm::Value*>& init, const LoopBody& body) {
  llvm::LLVMContext& ctx = b.getContext();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx, "for.header", fn);
  auto* body_bb = llvm::BasicBlock::Create(ctx, "for.body", fn);
  auto* exit = llvm::BasicBlock::Create(ctx, "for.exit", fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* iv = b.CreatePHI(b.getInt64Ty(), 2, "iv");
  iv->addIncoming(lb, pre);
  std::vector<llvm::Value*> phis;
  for (llvm::Value* v : init) {
    llvm::PHINode* phi = b.CreatePHI(v->getType(), 2);
    phi->addIncoming(v, pre);
    phis.push_back(phi);
  }
  b.CreateCondBr(b.CreateICmpSLT(iv, ub), body_bb, exit);
  b.SetInsertPoint(body_bb);
  std::vector<llvm::Value*> next = body(iv, phis);
  COOPJIT_INTERNAL_ASSERT(next.size() == phis.size(), "a loop body yields other values than it carries");
  llvm::Value* iv_next = b.CreateAdd(iv, step, "iv.next", /*HasNUW=*/false, /*HasNSW=*/true);
  llvm::BasicBlock* latch = b.GetInsertBlock();
  iv->addIncoming(iv_next, latch);
  for (size_t i = 0; i < phis.size(); ++i) llvm::cast<llvm::PHINode>(phis[i])->addIncoming(next[i], latch);
  b.CreateBr(header);
  b.SetInsertPoint(exit);
  return phis;
}

std::vector<llvm::Value*> emit_if(llvm::IRBuilder<>& b, llvm::Function* fn, llvm::Value* cond, const Arm& then_arm,
                                  const Arm& else_arm) {
  llvm::LLVMContext& ctx = b.getContext();
  auto* then_bb = llvm::BasicBlock::Create(ctx, "if.then", fn);
  auto* else_bb = llvm::BasicBlock::Create(ctx, "if.else", fn);
  auto* merge = llvm::BasicBlock::Create(ctx, "if.end", fn);
  b.CreateCondBr(cond, then_bb, else_bb);
  std::vector<std::pair<llvm::BasicBlock*, std::vector<llvm::Value*>>> arms;
  for (int r = 0; r < 2; ++r) {
    b.SetInsertPoint(r == 0 ? then_bb : else_bb);
    auto vals = r == 0 ? then_arm() : else_arm();
    arms.emplace_back(b.GetInsertBlock(), vals);
    b.CreateBr(merge);
  }
  COOPJIT_INTERNAL_ASSERT(arms[0].second.size() == arms[1].second.size(), "the arms of an if yield different values");
  b.SetInsertPoint(merge);
  std::vector<llvm::Value*> res;
  for (size_t i = 0; i < arms[0].second.size(); ++i) {
    llvm::PHINode* phi = b.CreatePHI(arms[0].second[i]->getType(), 2);
    for (auto& [bb, vals] : arms) phi->addIncoming(vals[i], bb);
    res.push_back(phi);
  }
  return res;
}

llvm::Value* emit_binary(llvm::IRBuilder<>& b, ir::BinOp op, ir::ScalarType t, llvm::Value* x, llvm::Value* y) {
  using ir::BinOp;
  if (ir::is_float(t)) {
    switch (op) {
      case BinOp::add: return b.CreateFAdd(x, y);
      case BinOp::sub: return b.CreateFSub(x, y);
      case BinOp::mul: return b.CreateFMul(x, y);
      case BinOp::div: return b.CreateFDiv(x, y);
      case BinOp::min: case BinOp::max: return nullptr;
      default: break;
    }
    throw InternalError(cat("binary op ", ir::name(op), " on floats"));
  }
  const bool s = ir::is_signed(t);
  switch (op) {
    case BinOp::add: return b.CreateAdd(x, y);
    case BinOp::sub: return b.CreateSub(x, y);
    case BinOp::mul: return b.CreateMul(x, y);
    case BinOp::div: return s ? b.CreateSDiv(x, y) : b.CreateUDiv(x, y);
    case BinOp::rem: return s ? b.CreateSRem(x, y) : b.CreateURem(x, y);
    case BinOp::min: return b.CreateSelect(s ? b.CreateICmpSLT(x, y) : b.CreateICmpULT(x, y), x, y);
    case BinOp::max: return b.CreateSelect(s ? b.CreateICmpSGT(x, y) : b.CreateICmpUGT(x, y), x, y);
    case BinOp::and_: return b.CreateAnd(x, y);
    case BinOp::or_: return b.CreateOr(x, y);
  }
  throw InternalError("unknown binary op");
}

namespace {
void check_i1(const ir::Type& t, const std::string& where, const char* target) {
  if (t.scalar != ir::ScalarType::i1 || !(t.is_matrix() || t.is_vector() || t.is_pointer())) return;
  throw UserTypeError(cat(t.str(), " (", where, "): i1 matrices, vectors and pointers are not supported (lowering for ",
                          target, "; the CPU and SPIR-V devices both refuse them): a boolean in memory is a byte, as "
                          "NumPy's bool; use u8 (0 / 1) and compare with ne 0 for an i1"));
}
void check_block(const ir::Block& b, const char* target) {
  for (const auto& op : b.ops) {
    for (const ir::Value* v : op->results) check_i1(v->type, cat("the result of ", ir::mnemonic(*op)), target);
    for (const ir::Value* v : op->operands) check_i1(v->type, cat("an operand of ", ir::mnemonic(*op)), target);
    for (const auto& r : op->regions) {
      for (const ir::Value* v : r->args) check_i1(v->type, cat("an argument of ", ir::mnemonic(*op), "'s region"), target);
      check_block(*r, target);
    }
  }
}
}  // namespace

void reject_i1_in_memory(const ir::Function& f, const char* target) {
  for (const ir::Value* p : f.params) check_i1(p->type, cat("parameter ", p->hint.empty() ? "?" : p->hint), target);
  check_block(f.body, target);
}

}  // namespace coopjit
