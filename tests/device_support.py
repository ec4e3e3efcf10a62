"""Helpers of the SPIR-V device tests (the SIMT path): the device they run on and how they skip.
$COOPJIT_TEST_DEVICE runs them on another device, e.g. cuda:0 (the same SIMT lowering for NVPTX):
the subgroup sizes come from the device (lanes()), arrays the host cannot reach in device memory
are host arrays copied in and out (on_device), and what only SPIR-V has skips there, saying why
(spirv_only)."""
import functools
import os

import numpy as np
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


@functools.cache
def subgroup_sizes() -> tuple[int, ...]:
    """The subgroup sizes DEVICE runs (device_info: Intel's CPU runtime 4 to 64, NVIDIA 32); ()
    where DEVICE is absent (its tests skip in needs_device)."""
    if DEVICE not in coopjit.devices():
        return ()
    return tuple(int(s) for s in coopjit.device_info(DEVICE)["subgroup_sizes"])


def lanes(wanted: int = 16) -> int:
    """The subgroup size of a test written for `wanted` lanes: that one where DEVICE runs it, else
    the device's own size nearest to it (NVIDIA: 32). The test's shapes and references follow the
    size returned (its layout tables, lane ids); where DEVICE is absent, `wanted`."""
    sizes = subgroup_sizes()
    if not sizes or wanted in sizes:
        return wanted
    return min(sizes, key=lambda s: (abs(s - wanted), s))


def lanes_cases(cases, at: int = -1) -> list:
    """Parameter tuples with their subgroup size (item `at`) mapped through lanes(), those that
    become the same case once mapped kept once (NVIDIA runs 8, 16 and 32 as 32)."""
    out = []
    for c in cases:
        c = list(c)
        c[at] = lanes(c[at])
        if tuple(c) not in out:
            out.append(tuple(c))
    return out


def is_spirv() -> bool:
    """Whether DEVICE runs SPIR-V (opencl:N, level_zero:N); cuda:N runs PTX."""
    return not DEVICE.startswith("cuda")


def spirv_only(what: str) -> None:
    """Skips a test (or the rest of one) that checks what only SPIR-V or Intel GPUs have, on a
    device that runs PTX, naming what."""
    if not is_spirv():
        pytest.skip(f"{what}: SPIR-V / Intel only, and {DEVICE} runs PTX (the NVPTX lowering)")


def host_visible() -> bool:
    """Whether the host reaches DEVICE's memory (USM shared on SPIR-V devices; not CUDA's)."""
    return coopjit.devices.get(needs_device()).host_visible


def device_empty(shape, dtype, order="C") -> np.ndarray:
    """An array a kernel on DEVICE uses in place: coopjit.empty (shared memory) where the host
    reaches the device's memory; else a host array, which the launches copy in and out (CUDA)."""
    if host_visible():
        return coopjit.empty(shape, dtype, device=DEVICE, order=order)
    return np.empty(shape, dtype, order=order)


def on_device(x) -> np.ndarray:
    """A copy of x in device_empty's memory (order kept)."""
    x = np.asarray(x)
    d = device_empty(x.shape, x.dtype, "F" if x.flags.f_contiguous and not x.flags.c_contiguous else "C")
    d[...] = x
    return d


def validated(binary: bytes) -> bytes:
    """Every module the tests generate passes spirv-val. On a device that runs PTX a kernel has no
    SPIR-V module (an empty one): the driver's JIT compiled its PTX, which is the check there."""
    if not is_spirv():
        assert binary == b"", "a PTX device's kernel has no SPIR-V module"
        return binary
    spirv.validate(binary)
    return binary


@pytest.fixture(params=["cpu", "device"])
def target(request):
    """A test run on both targets: "cpu", then DEVICE (skipped, saying why, where it is absent)."""
    return "cpu" if request.param == "cpu" else needs_device()


def build(b, target):
    """KernelBuilder b compiled for `target` ("cpu" or a device); a device's module validated."""
    if target == "cpu":
        return b.compile()
    k = b.compile(device=target)
    validated(k.spirv)
    return k


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
