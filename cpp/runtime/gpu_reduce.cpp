// Reductions on a SPIR-V device (gpu_reduce.h).
#include "runtime/gpu_reduce.h"

#include "build/reduce_recipe_gpu.h"
#include "plan/gpu_plan.h"
#include "runtime/devices.h"

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
  if (p.parts <= 1) {
    code->launch(args, gpu_reduce_groups(s, p));
    return code;
  }
  // Split: the parts' partials into W (column form: parts x cols, row form: rows x parts, in the
  // accumulator type), then the same form reduces W into Y. W lives for the call (its free waits
  // for the device).
  const bool row = s.form == "row";
  ReduceSpec w = s;
  w.in = s.acc;
  w.rows = row ? s.rows : p.parts;
  w.cols = row ? p.parts : s.cols;
  w.sx_r = w.cols;
  w.sx_c = 1;
  SharedAllocation ws(open_device(device), static_cast<size_t>(w.rows * w.cols * ir::size_in_bytes(s.acc)));
  args.push_back(pointer_arg(ws.data()));
  args.push_back(scalar_arg(idx, p.parts, 0.0));
  code->launch(args, gpu_reduce_groups(s, p));
  run_gpu_reduce(device, w, ws.data(), y);
  return code;
}

}  // namespace coopjit
