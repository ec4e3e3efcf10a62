"""Helpers of the SPIR-V device tests (the SIMT path): the device they run on and how they skip.
$COOPJIT_TEST_DEVICE runs them on another device, e.g. cuda:0 (the same SIMT lowering for NVPTX)."""
import os

import pytest

import coopjit
from coopjit import spirv

DEVICE = os.environ.get("COOPJIT_TEST_DEVICE", "opencl:0")


def needs_device():
    """Skips only when there is no opencl:0 (Intel's CPU OpenCL runtime, intel-opencl-rt, absent or
    not loadable); the reason says which."""
    if DEVICE in coopjit.devices():
        return DEVICE
    from coopjit.devices import status

    pytest.skip(f"no {DEVICE}: Intel's CPU OpenCL runtime is absent or unusable "
                f"(the [opencl] extra: pip install 'coopjit[opencl]', or intel-opencl-rt and intel-cmplr-lib-rt); status: {status()}")


def validated(binary: bytes) -> bytes:
    """Every module the tests generate passes spirv-val."""
    spirv.validate(binary)
    return binary


_validated = set()


@pytest.fixture(autouse=True, scope="module")
def every_module_passes_spirv_val():
    """After each test module: spirv-val on every SPIR-V module the device cache holds."""
    yield
    from coopjit import _core

    if "error" in spirv.tools()["spirv-val"]:
        return  # no SPIRV-Tools here: the tests that needed spirv-val skipped, saying so
    for p in _core.device_programs():
        if p.key not in _validated and not p.ptx:  # PTX modules: the driver's JIT checked them
            spirv.validate(p.spirv)
            _validated.add(p.key)
