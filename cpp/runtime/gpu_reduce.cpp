// Reductions on a SPIR-V device (gpu_reduce.h).
#include "runtime/gpu_reduce.h"

#include "build/reduce_recipe_gpu.h"
#include "plan/gpu_plan.h"

namespace coopjit {

std::shared_ptr<const DeviceProgram> gpu_reduce_program(const std::string& device, const ReduceSpec& s) {
  const GpuReducePlan p = plan_gpu_reduce(s, gpu_target(device));
  return device_program(device, p.key(s), [&](const std::string& symbol) { return build_reduce_gpu(s, p, symbol); });
}

std::shared_ptr<const DeviceProgram> run_gpu_reduce(const std::string& device, const ReduceSpec& s, const void* x,
                                                    void* y) {
  const GpuReducePlan p = plan_gpu_reduce(s, gpu_target(device));
  auto code = device_program(device, p.key(s), [&](const std::string& symbol) { return build_reduce_gpu(s, p, symbol); });
  if (s.rows == 0 || s.cols == 0) return code;
  const ir::Type idx = ir::Type::index();
  std::vector<KernelArg> args{pointer_arg(const_cast<void*>(x)), pointer_arg(y)};
  for (int64_t v : {s.rows, s.cols, s.sx_r, s.sx_c, s.sy_r, s.sy_c}) args.push_back(scalar_arg(idx, v, 0.0));
  code->launch(args, gpu_reduce_groups(s, p));
  return code;
}

}  // namespace coopjit
