"""wgmma plans whose accumulators do not fit the registers a block's launch leaves a work-item
(gpu_plan_overrides.cpp check_gpu_work_group, session 26). The H100 showed the case: col sg_m 20
nr 128 ws 2 (cuBLAS's 320 x 128 tile in coopjit's fields) passed the plan check, then ptxas failed
("Insufficient registers (80)") inside the driver's PTX JIT. Now the planner refuses it, naming the
values. Checked without a GPU (the sm_90 target by name): the planner's own plans and the override
plans the H100 assembled stay accepted."""
import pytest

from coopjit import _core


def _plan(shape, ov, types=("bf16", "bf16", "bf16")):
    m, n, k = shape
    strides = [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0]
    return _core.gpu_gemm_kernel("target:sm_90", list(types), [m, n, k, 1, 1], strides, False, ov, None)


@pytest.mark.parametrize("ov,threads,regs,acc", [
    ({"layout": 1, "sg_m": 20, "nr": 128, "split": 0, "ws": 2, "persistent": 1}, 768, 80, 64),
    ({"layout": 1, "sg_m": 20, "nr": 128, "split": 0, "ws": 2}, 768, 80, 64),
    ({"layout": 0, "sg_m": 16, "nr": 256, "split": 0, "ws": 2, "stages": 2}, 640, 96, 128),
])
def test_registers_short_refused_naming_the_values(ov, threads, regs, acc):
    """65536 / work-items, down to a multiple of 8, against mr x nr / 32 f32 accumulators + 32."""
    with pytest.raises(Exception) as e:
        _plan((2816, 1920, 8192), ov)
    msg = str(e.value)
    for w in (f"{threads} work-items a block leave {regs} registers", f"its {acc} accumulator registers",
              f"sg_m={ov['sg_m']}", f"nr={ov['nr']}"):
        assert w in msg, msg


@pytest.mark.parametrize("ov", [
    {},  # the planner's plan
    {"layout": 1, "sg_m": 16, "nr": 128, "split": 0, "ws": 2, "persistent": 1},  # 640 work-items, 96 registers: assembled on the H100
    {"layout": 1, "sg_m": 12, "nr": 192, "split": 0},  # 192 x 192, the planner's tile on 4224^2 shapes
    {"layout": 1, "sg_m": 8, "nr": 256, "split": 2},  # col 128 x 256 SK + DP
])
@pytest.mark.parametrize("shape", [(2816, 1920, 8192), (1024, 4864, 8192), (4224, 4224, 8192), (8192, 8192, 8192)])
def test_plans_that_assemble_stay_accepted(shape, ov):
    k = _plan(shape, ov)
    assert k.plan_key.startswith("gpugemm.") and ".wgmma." in k.plan_key
