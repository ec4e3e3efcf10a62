"""SPIR-V out of LLVM 22: hand-written OpenCL kernels compile through the SPIR-V backend with the
explicit extension list, pass spirv-val, carry their execution modes, and run on opencl:0 (Intel's
CPU OpenCL runtime) with results checked against NumPy."""
import re

import numpy as np
import pytest

import coopjit
from coopjit import spirv
from coopjit._opencl_icd import intel_cpu_runtime
from coopjit.devices import Module, status

from conftest import needs_spirv_tools
from spirv_kernels import AXPY_INDEX, SUBGROUP, TO_BF16, UNRESOLVED, bf16_bits, subgroup_reference


def needs_opencl():
    """Skips only when Intel's CPU OpenCL runtime is not installed; installed, it must be opencl:0."""
    if "opencl:0" in coopjit.devices():
        return
    if intel_cpu_runtime() is None:
        pytest.skip("Intel's CPU OpenCL runtime is absent (pip install intel-opencl-rt intel-cmplr-lib-rt)")
    pytest.fail(f"intel-opencl-rt is installed ({intel_cpu_runtime()}) but there is no opencl:0: {status()}")


def compiled(ir, **options):
    binary = spirv.compile(ir, **options)
    spirv.validate(binary)  # every module the tests generate passes spirv-val
    return binary, spirv.disassemble(binary)


def declared_extensions(text):
    return set(re.findall(r'OpExtension "([A-Za-z0-9_]+)"', text))


def test_spirv_val_is_recent_enough():
    needs_spirv_tools()
    version = spirv.tools()["spirv-val"]["version"]
    year = int(re.search(r"v(\d{4})\.", version).group(1))
    assert year >= 2023, f"spirv-val {version} predates SPIR-V 1.6 support"


def test_default_extension_list_is_explicit():
    exts = spirv.default_extensions()
    assert "SPV_INTEL_subgroups" in exts and "SPV_INTEL_bfloat16_conversion" in exts
    assert all(e.startswith("SPV_") for e in exts) and "all" not in exts


@pytest.mark.parametrize("bad", [["all"], ["SPV_INTEL_subgroups", "all"], ["+SPV_INTEL_subgroups"], ["SPV_NOT_AN_EXTENSION"]])
def test_extension_lists_other_than_names_are_refused(bad):
    with pytest.raises(ValueError, match="extension"):
        spirv.compile(SUBGROUP, extensions=bad)


def test_subgroup_kernel_has_its_execution_modes():
    _, text = compiled(SUBGROUP)
    assert "; Version: 1.4" in text
    assert re.search(r"OpEntryPoint Kernel %\w+ \"subgroup_mix\"", text)
    assert re.search(r"OpExecutionMode %\w+ SubgroupSize 16", text)
    assert re.search(r"OpExecutionMode %\w+ LocalSize 64 1 1", text)
    assert "ContractionOff" not in text  # !opencl.enable.FP_CONTRACT: contraction allowed
    assert "FloatControls2" not in text and "FPFastMathDefault" not in text
    assert declared_extensions(text) == {"SPV_INTEL_subgroups"}
    assert "OpSubgroupShuffleINTEL" in text and "OpSubgroupShuffleXorINTEL" in text


def test_declared_extensions_come_from_the_list():
    _, text = compiled(SUBGROUP, extensions=["SPV_INTEL_subgroups"])
    assert declared_extensions(text) <= {"SPV_INTEL_subgroups"}


def test_an_extension_outside_the_list_is_an_error_not_an_exit():
    # The list is what LLVM may use: without SPV_INTEL_subgroups it cannot write
    # intel_sub_group_shuffle. Its report_fatal_error becomes an exception; the process goes on.
    with pytest.raises(RuntimeError, match="requires the following SPIR-V extension: SPV_INTEL_subgroups"):
        spirv.compile(SUBGROUP, extensions=[])
    compiled(SUBGROUP)


def test_fp_contract_is_added_when_missing():
    _, text = compiled(AXPY_INDEX)
    assert "ContractionOff" not in text


def test_kernel_shapes_from_options():
    _, text = compiled(AXPY_INDEX, kernels={"axpy_index": {"subgroup_size": 8, "work_group_size": (32,)}})
    assert re.search(r"OpExecutionMode %\w+ SubgroupSize 8", text)
    assert re.search(r"OpExecutionMode %\w+ LocalSize 32 1 1", text)
    with pytest.raises(ValueError, match="no kernel 'nope'"):
        spirv.compile(AXPY_INDEX, kernels={"nope": {"subgroup_size": 8}})


def test_many_modules_in_one_process_all_validate():
    # LLVM 22's SPIR-V backend leaks module state from one compilation into the next (ids defined
    # twice in about a quarter of the modules after a few dozen): coopjit compiles in a child.
    keep = []
    for i in range(40):
        keep.append(np.ones(100 + 37 * i))  # move the heap around between compilations
        compiled(SUBGROUP if i % 2 else AXPY_INDEX, opt_level=3 * (i % 3 != 0))


@pytest.mark.parametrize("opt_level", [0, 3])
def test_opt_levels_validate(opt_level):
    compiled(SUBGROUP, opt_level=opt_level)


def test_unparsable_ir_is_a_value_error():
    with pytest.raises(ValueError, match="cannot parse the LLVM IR"):
        spirv.compile("define void @f( {")


def test_non_spirv_triple_is_refused():
    with pytest.raises(RuntimeError, match="not spirv64"):
        spirv.compile(AXPY_INDEX.replace("spirv64-unknown-unknown", "x86_64-unknown-linux-gnu"))


def test_spirv_val_rejects_a_broken_module():
    binary = bytearray(spirv.compile(AXPY_INDEX))
    binary[12:16] = (1).to_bytes(4, "little")  # id bound 1: every id is out of bounds
    with pytest.raises(ValueError, match="spirv-val rejects"):
        spirv.validate(bytes(binary))


def test_not_spirv_is_a_value_error():
    with pytest.raises(ValueError, match="not a SPIR-V module"):
        spirv.disassemble(b"\x7fELF" + bytes(60))


def test_subgroup_kernel_runs_on_opencl(rng):
    needs_opencl()
    binary, _ = compiled(SUBGROUP)
    dev = "opencl:0"
    module = Module(binary, dev)
    kernel = module.kernel("subgroup_mix")
    n = 1024
    x = coopjit.empty(n, np.float32, device=dev)
    rev, total = coopjit.empty(n, np.float32, device=dev), coopjit.empty(n, np.float32, device=dev)
    sgsize = coopjit.empty(n, np.int32, device=dev)
    x[:] = rng.standard_normal(n).astype(np.float32)
    kernel(x, rev, total, sgsize, np.float32(0.75), global_size=n, local_size=64)
    want_rev, want_total = subgroup_reference(x, 0.75)
    assert (sgsize == 16).all()
    np.testing.assert_array_equal(rev, want_rev.astype(np.float32))
    bound = 18 * np.finfo(np.float32).eps * (np.abs(x).reshape(-1, 16).sum(1).repeat(16) + 0.75 * np.abs(x))
    assert (np.abs(total - want_total) <= bound).all()


def test_bfloat16_conversion_runs_on_opencl(rng):
    needs_opencl()
    binary, text = compiled(TO_BF16)
    assert declared_extensions(text) == {"SPV_INTEL_bfloat16_conversion"} and "OpConvertFToBF16INTEL" in text
    dev = "opencl:0"
    x = coopjit.empty(4096, np.float32, device=dev)
    y = coopjit.empty(4096, np.uint16, device=dev)
    x[:] = rng.standard_normal(4096).astype(np.float32) * np.float32(1e3) ** rng.integers(-3, 4, 4096)
    Module(binary, dev).kernel("to_bf16")(x, y, global_size=4096)
    np.testing.assert_array_equal(y, bf16_bits(x))


def test_module_source_is_the_disassembly():
    needs_opencl()
    module = Module.from_llvm(SUBGROUP, "opencl:0")
    text = module.source("spirv")
    assert text.startswith("; SPIR-V") and "OpSubgroupShuffleINTEL" in text
    assert "spir_kernel" in module.source("llvm")


def test_build_failure_reports_the_build_log():
    needs_opencl()
    binary, _ = compiled(UNRESOLVED)
    with pytest.raises(coopjit.DeviceError, match=r"(?s)clBuildProgram failed with CL_BUILD_PROGRAM_FAILURE.*build log:.*coopjit_undefined_helper"):
        Module(binary, "opencl:0")


def test_unknown_kernel_name_is_a_device_error():
    needs_opencl()
    module = Module.from_llvm(AXPY_INDEX, "opencl:0")
    with pytest.raises(coopjit.DeviceError, match="clCreateKernel failed with CL_INVALID_KERNEL_NAME"):
        module.kernel("no_such_kernel")


def test_launch_against_the_required_work_group_size_fails_cleanly():
    needs_opencl()
    dev = "opencl:0"
    kernel = Module.from_llvm(SUBGROUP, dev).kernel("subgroup_mix")
    bufs = [coopjit.empty(128, np.float32, device=dev) for _ in range(3)] + [coopjit.empty(128, np.int32, device=dev)]
    with pytest.raises(coopjit.DeviceError, match="CL_INVALID_WORK_GROUP_SIZE"):
        kernel(*bufs, np.float32(1), global_size=128, local_size=32)
