// The SPIR-V target of the SIMT lowering (simt_target.h): OpenCL built-ins (Itanium-mangled, as
// LLVM's SPIR-V backend recognizes them) and SPV_INTEL_subgroups' shuffles.
#include "lower/simt_target.h"

#include "core/error.h"
#include "target/spirv_target.h"

namespace coopjit {

llvm::Value* spirv_builtin(llvm::IRBuilder<>& b, const std::string& name, llvm::Type* ret,
                           const std::vector<llvm::Value*>& args, bool convergent) {
  llvm::Module* mod = b.GetInsertBlock()->getModule();
  llvm::Function* fn = mod->getFunction(name);
  if (!fn) {
    std::vector<llvm::Type*> types;
    for (llvm::Value* a : args) types.push_back(a->getType());
    fn = llvm::Function::Create(llvm::FunctionType::get(ret, types, false), llvm::Function::ExternalLinkage, name, mod);
    fn->setCallingConv(llvm::CallingConv::SPIR_FUNC);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    if (convergent) fn->addFnAttr(llvm::Attribute::Convergent);
    else fn->setDoesNotAccessMemory();
  }
  llvm::CallInst* call = b.CreateCall(fn, args);
  call->setCallingConv(llvm::CallingConv::SPIR_FUNC);
  return call;
}

namespace {

// The OpenCL mangling of a shuffled type, or "" when it must travel as an i32.
const char* mangled(llvm::Type* t) {
  if (t->isFloatTy()) return "f";
  if (t->isDoubleTy()) return "d";
  if (t->isHalfTy()) return "Dh";
  if (t->isIntegerTy(32)) return "i";
  if (t->isIntegerTy(64)) return "l";
  return "";
}

class SpirvSimtTarget : public SimtTarget {
 public:
  std::string name() const override { return "spirv64"; }
  std::string triple() const override { return kSpirvTriple; }
  bool subgroup_ok(int S) const override { return true; }
  bool intel_subgroups() const override { return true; }
  unsigned constant_addrspace() const override { return 2; }

  void mark_kernel(llvm::Function& f, int subgroup_size, int work_group_size) const override {
    KernelShape shape;
    shape.subgroup_size = subgroup_size;
    shape.work_group_size = {work_group_size, 1, 1};
    mark_spirv_kernel(f, shape);
  }

  llvm::Value* lane_id(llvm::IRBuilder<>& b) const override {
    return spirv_builtin(b, "_Z22get_sub_group_local_idv", b.getInt32Ty(), {});
  }

  llvm::Value* work_id(llvm::IRBuilder<>& b, ir::WorkId which, int dim) const override {
    auto u32 = [&](const char* name) { return b.CreateZExt(spirv_builtin(b, name, b.getInt32Ty(), {}), b.getInt64Ty()); };
    switch (which) {
      case ir::WorkId::lane: return b.CreateZExt(lane_id(b), b.getInt64Ty());
      case ir::WorkId::subgroup: return u32("_Z16get_sub_group_idv");
      case ir::WorkId::subgroups: return u32("_Z18get_num_sub_groupsv");
      case ir::WorkId::group: return spirv_builtin(b, "_Z12get_group_idj", b.getInt64Ty(), {b.getInt32(dim)});
      case ir::WorkId::groups: return spirv_builtin(b, "_Z14get_num_groupsj", b.getInt64Ty(), {b.getInt32(dim)});
    }
    throw InternalError("unknown work id");
  }

  llvm::Value* shuffle(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* src_lane) const override {
    llvm::Type* t = x->getType();
    if (!*mangled(t)) return b.CreateTrunc(shuffle(b, b.CreateZExt(x, b.getInt32Ty()), src_lane), t);
    return spirv_builtin(b, cat("_Z23intel_sub_group_shuffle", mangled(t), "j"), t, {x, src_lane}, true);
  }

  llvm::Value* shuffle_xor(llvm::IRBuilder<>& b, llvm::Value* x, int mask) const override {
    llvm::Type* t = x->getType();
    if (!*mangled(t)) return b.CreateTrunc(shuffle_xor(b, b.CreateZExt(x, b.getInt32Ty()), mask), t);
    return spirv_builtin(b, cat("_Z27intel_sub_group_shuffle_xor", mangled(t), "j"), t, {x, b.getInt32(mask)}, true);
  }

  llvm::Value* broadcast(llvm::IRBuilder<>& b, llvm::Value* x, int src_lane) const override {
    llvm::Type* t = x->getType();
    if (!*mangled(t)) return b.CreateTrunc(broadcast(b, b.CreateZExt(x, b.getInt32Ty()), src_lane), t);
    if (t->isHalfTy()) return shuffle(b, x, b.getInt32(src_lane));
    return spirv_builtin(b, cat("_Z19sub_group_broadcast", mangled(t), "j"), t, {x, b.getInt32(src_lane)}, true);
  }

  void barrier(llvm::IRBuilder<>& b) const override {
    spirv_builtin(b, "_Z7barrierj", b.getVoidTy(), {b.getInt32(1)}, true);  // CLK_LOCAL_MEM_FENCE
  }
  // OpControlBarrier: execution and memory scope Subgroup (3), AcquireRelease | CrossWorkgroupMemory
  // (0x208). (LLVM 22's SPIR-V backend leaves OpenCL's sub_group_barrier an unresolved call.)
  void subgroup_sync(llvm::IRBuilder<>& b) const override {
    spirv_builtin(b, "_Z22__spirv_ControlBarrieriii", b.getVoidTy(), {b.getInt32(3), b.getInt32(3), b.getInt32(0x208)}, true);
  }
  void group_barrier(llvm::IRBuilder<>& b) const override {
    spirv_builtin(b, "_Z7barrierj", b.getVoidTy(), {b.getInt32(3)}, true);  // CLK_LOCAL_ | CLK_GLOBAL_MEM_FENCE
  }

  llvm::Value* math(llvm::IRBuilder<>& b, ir::UnOp u, ir::ScalarType t, llvm::Value* x) const override {
    // OpenCL built-ins, which LLVM's SPIR-V backend writes as OpenCL.std extended instructions.
    using ir::UnOp;
    const char* base = u == UnOp::abs ? "fabs" : u == UnOp::exp ? "exp" : u == UnOp::log ? "log" : u == UnOp::tanh ? "tanh" : u == UnOp::erf ? "erf" : "sqrt";
    const char* suffix = t == ir::ScalarType::f64 ? "d" : t == ir::ScalarType::f16 ? "Dh" : "f";
    return spirv_builtin(b, cat("_Z", std::string(base).size(), base, suffix), x->getType(), {x});
  }

  llvm::Value* round_even(llvm::IRBuilder<>& b, llvm::Value* x) const override {
    return spirv_builtin(b, "_Z4rintf", b.getFloatTy(), {x});
  }

  llvm::Value* f32_to_bf16(llvm::IRBuilder<>& b, llvm::Value* x) const override {
    return spirv_builtin(b, "_Z27__spirv_ConvertFToBF16INTELf", b.getInt16Ty(), {x});  // SPV_INTEL_bfloat16_conversion
  }
};

}  // namespace

std::unique_ptr<SimtTarget> spirv_simt_target() { return std::make_unique<SpirvSimtTarget>(); }

std::unique_ptr<SimtTarget> simt_target(const std::string& name) {
  if (name.empty() || name == "spirv64") return spirv_simt_target();
  if (name.rfind("nvptx64:", 0) == 0) return nvptx_simt_target(name.substr(8));
  throw UserError(cat("unknown SIMT target '", name, "' (known: spirv64, nvptx64:sm_XX)"));
}

}  // namespace coopjit
