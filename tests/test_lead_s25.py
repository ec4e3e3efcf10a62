"""Four of session 25's audit leftovers (the fourth audit's "noticed and left alone"), each a test
that failed before its fix: spirv.compile's kernel shapes and opt_level are checked (negative sizes
were passed on and dropped), COOPJIT_CACHE_LOCK_TIMEOUT is read as COOPJIT_CACHE_MAX_MB is (atof
read "abc" as no wait and "inf" as a wait without end), and a product that only converts to a dtype
its kernel does not write is not called fused; KernelBuilder.index and work_id name a value
out of range (pybind11 gave "incompatible function arguments", and a work_id dim past 2 was taken)."""
import numpy as np
import pytest

from coopjit import _epilogue, spirv
from cache_helpers import COMPILE_AND_CHECK, run_snippet
from spirv_kernels import AXPY_INDEX


@pytest.mark.parametrize("kernels, named", [
    ({"axpy_index": {"subgroup_size": -8}}, "subgroup_size = -8"),
    ({"axpy_index": {"subgroup_size": 2.5}}, "subgroup_size = 2.5"),
    ({"axpy_index": {"subgroup_size": True}}, "subgroup_size = True"),
    ({"axpy_index": {"work_group_size": (64, -1)}}, "work_group_size = -1"),
    ({"axpy_index": {"work_group_size": (0,)}}, "work_group_size = 0"),
    ({"axpy_index": {"work_group_size": (8, 4, 2, 1)}}, "(8, 4, 2, 1)"),
    ({"axpy_index": {"work_group_size": "64"}}, "'64'"),
    ({"axpy_index": {"subgroupsize": 8}}, "['subgroupsize']"),
    ({"axpy_index": 16}, "kernels['axpy_index'] = 16"),
])
def test_spirv_kernel_shapes_are_checked(kernels, named):
    with pytest.raises(ValueError) as e:
        spirv.compile(AXPY_INDEX, kernels=kernels)
    assert named in str(e.value) and "axpy_index" in str(e.value)


@pytest.mark.parametrize("level", [-1, 4, True, "3", 2.0])
def test_spirv_opt_level_is_checked(level):
    with pytest.raises(ValueError, match="opt_level="):
        spirv.compile(AXPY_INDEX, opt_level=level)


def test_spirv_kernel_shapes_still_take_what_they_took():
    # a list and a subgroup size of 0 (no requirement), as before; a bare int work-group size is one
    # dimension (it was a TypeError from inside the module: "int object is not iterable")
    for shape in ({"work_group_size": 64}, {"work_group_size": [32, 2]}, {"subgroup_size": 0}):
        binary, text = spirv.compile_with_ir(AXPY_INDEX, kernels={"axpy_index": shape})
        assert binary[:4] == b"\x03\x02\x23\x07" and "axpy_index" in text


@pytest.mark.parametrize("value", ["abc", "inf", "-1", "nan", "0.5s"])
def test_a_lock_timeout_that_is_no_number_of_seconds_is_passed_over(tmp_path, value):
    res, err = run_snippet(COMPILE_AND_CHECK, tmp_path, env={"COOPJIT_CACHE_LOCK_TIMEOUT": value, "COOPJIT_DEBUG": "cache"})
    assert res["ok"] and res["compiles"] == 1
    assert f"COOPJIT_CACHE_LOCK_TIMEOUT={value} is not a number of seconds" in err, err[-2000:]


def test_a_valid_lock_timeout_is_taken_silently(tmp_path):
    res, err = run_snippet(COMPILE_AND_CHECK, tmp_path, env={"COOPJIT_CACHE_LOCK_TIMEOUT": "0.3", "COOPJIT_DEBUG": "cache"})
    assert res["ok"] and "COOPJIT_CACHE_LOCK_TIMEOUT" not in err


def test_a_conversion_alone_is_not_called_fused():
    f32 = np.dtype(np.float32)
    with pytest.raises(TypeError) as e:
        _epilogue.Epilogue("matmul", f32, f32, 4, 4, out_dtype=np.int8)
    assert "a float32 x float32 product writes" in str(e.value) and "fused" not in str(e.value)
    with pytest.raises(TypeError, match="a fused float32 x float32 product writes"):
        _epilogue.Epilogue("matmul", f32, f32, 4, 4, out_dtype=np.int8, bias=np.zeros(4, np.float32))


@pytest.mark.parametrize("v", [2**70, -2**63 - 1, 2.5, "3", True])
def test_an_index_constant_out_of_range_is_named(v):
    from coopjit.ir import KernelBuilder

    with pytest.raises(ValueError, match=r"index\("):
        KernelBuilder("k").index(v)


def test_index_constants_at_the_ends_of_the_range_are_taken():
    from coopjit.ir import KernelBuilder

    b = KernelBuilder("k")
    for v in (0, -2**63, 2**63 - 1, np.int64(7)):
        b.index(v)


@pytest.mark.parametrize("dim", [-1, 3, 2**40, 1.0, None])
def test_a_work_id_dim_outside_0_to_2_is_named(dim):
    from coopjit.ir import KernelBuilder

    with pytest.raises(ValueError, match="dim is 0, 1 or 2"):
        KernelBuilder("k").work_id("group", dim)
