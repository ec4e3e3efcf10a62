"""A device kernel's .config passed back as plan= gives the same plan (what the docs promise, and
what autotuning scripts do): the GPU planner's plans for the named targets (sm_90, sm_80, Intel's
and the generic SPIR-V target; no device needed) through Plan (coopjit._plan.from_core), its
overrides() and plan='s conversion, planned again: every field, key and code_key equal. Hopper
plans failed before session 22: overrides() kept tma / wgmma's descriptions ('yes:
cp.async.bulk.tensor ...'), which plan= refused, epi_smem's bytes where plan= takes yes / no, and
an 8-bit product's mma (the pipeline's consequence of its types), refused as a choice."""
import pytest

from coopjit import _core
from coopjit._kernel_args import _gpu_overrides
from coopjit._plan import from_core

TYPES = [("bf16", "bf16", "bf16"), ("bf16", "bf16", "f32"), ("f16", "f16", "f16"), ("i8", "i8", "i32"),
         ("u8", "i8", "i32"), ("f32", "f32", "f32")]
SHAPES = [(96, 80, 64), (4096, 4096, 4096), (1024, 4864, 8192), (8, 8, 8), (4224, 4224, 8192), (37, 29, 19)]


@pytest.mark.parametrize("target", ["sm_90", "sm_80", "xe-hpc", "xe2", "generic"])
@pytest.mark.parametrize("types", TYPES, ids="x".join)
def test_a_device_plan_comes_back_from_its_config(target, types):
    checked = 0
    for m, n, k in SHAPES:
        for strides in ([k, 1, n, 1, n, 1], [1, m, n, 1, n, 1]):
            for acc in (False, True):
                shape, st = [m, n, k, 1, 1], strides + [0] * 6
                try:
                    want = _core.gpu_gemm_plan("target:" + target, list(types), shape, st, acc, {}, None)
                except ValueError:
                    continue  # a product this target does not take
                plan = from_core(want, "gpu")
                got = _core.gpu_gemm_plan("target:" + target, list(types), shape, st, acc, _gpu_overrides(plan), None)
                assert got == want, (target, types, (m, n, k), strides, acc,
                                     {f: (want[f], got.get(f)) for f in want if want[f] != got.get(f)})
                checked += 1
    assert checked > 0
