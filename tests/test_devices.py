"""Devices: discovery ("cpu", "opencl:N" when Intel's CPU OpenCL runtime is installed), their
properties, coopjit.empty() arrays in shared memory that kernels use in place, argument checks,
the Level Zero path without a driver, and importing coopjit without any runtime."""
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import coopjit
from coopjit import _core
from coopjit._opencl_icd import intel_cpu_runtime
from coopjit.devices import Module, shared_buffer, status

from spirv_kernels import AXPY_INDEX

INTEL_CPU = intel_cpu_runtime()
needs_intel_cpu = pytest.mark.skipif(
    INTEL_CPU is None, reason="Intel's CPU OpenCL runtime is absent (pip install intel-opencl-rt intel-cmplr-lib-rt)")
level_zero = next(s for s in status() if s["backend"] == "level_zero")
no_level_zero_driver = pytest.mark.skipif(level_zero["usable"] > 0, reason="a Level Zero GPU driver is present")


def opencl_cpu_device():
    for name in coopjit.devices():
        if name.startswith("opencl:") and coopjit.device_info(name)["platform"] == "Intel(R) OpenCL":
            return name
    return None


def test_cpu_is_always_first():
    assert coopjit.devices()[0] == "cpu"
    info = coopjit.device_info("cpu")
    assert info["backend"] == "cpu" and info["name"] == "cpu"


@needs_intel_cpu
def test_intel_cpu_runtime_is_a_usable_opencl_device():
    dev = opencl_cpu_device()
    assert dev is not None, f"intel-opencl-rt is installed ({INTEL_CPU}) but no opencl device: {status()}"
    assert "opencl:0" in coopjit.devices()


@needs_intel_cpu
def test_opencl_device_properties():
    info = coopjit.device_info(opencl_cpu_device())
    assert info["backend"] == "opencl" and info["type"] == "cpu"
    assert 16 in info["subgroup_sizes"] and info["subgroup_sizes"] == sorted(info["subgroup_sizes"])
    assert tuple(map(int, info["spirv_version"].split("."))) >= (1, 4)
    assert info["max_work_group_size"] >= 64 and info["local_memory_bytes"] >= 32 * 1024
    assert info["global_memory_bytes"] > 0 and info["compute_units"] >= 1
    assert info["memory"] in ("usm_shared", "svm_fine_grain")
    assert {"cl_intel_subgroups", "cl_intel_required_subgroup_size"} <= set(info["extensions"])
    assert info["dpas"] is False  # a CPU has no XMX


def test_every_listed_device_has_properties():
    for name in coopjit.devices()[1:]:
        info = coopjit.device_info(name)
        assert info["name"] == name and info["subgroup_sizes"]
        assert info["spirv_version"] if info["backend"] != "cuda" else info["arch"].startswith("sm_")


@pytest.mark.parametrize("name", ["gpu:0", "opencl", "opencl:x", "cuda", "cuda:x", "nvidia:0", ""])
def test_malformed_device_names_are_value_errors(name):
    with pytest.raises(ValueError, match="unknown device"):
        coopjit.device_info(name)


def test_missing_cuda_device_is_a_device_error():
    """cuda:N is a device name; where there is no such GPU the error says why (the driver, or the count)."""
    with pytest.raises(coopjit.DeviceError, match="no device 'cuda:99': .* usable CUDA device"):
        coopjit.device_info("cuda:99")
    with pytest.raises(ValueError, match="unknown device"):
        coopjit.matmul([[1.0]], [[1.0]], device="cuda:99")


def test_missing_opencl_device_is_a_device_error():
    with pytest.raises(coopjit.DeviceError, match="no device 'opencl:99'"):
        coopjit.device_info("opencl:99")
    with pytest.raises(coopjit.DeviceError, match="no device 'opencl:99'"):
        coopjit.empty(4, device="opencl:99")


# ---- Level Zero on a machine with the loader but no driver ----------------------------------

@no_level_zero_driver
def test_level_zero_without_driver_lists_no_device():
    assert not [d for d in coopjit.devices() if d.startswith("level_zero")]
    assert level_zero["usable"] == 0
    assert "zeInit returned" in level_zero["status"] or "libze_loader.so.1 not loaded" in level_zero["status"]


@no_level_zero_driver
def test_level_zero_device_request_names_the_missing_driver():
    with pytest.raises(coopjit.DeviceError, match=r"no device 'level_zero:0'.*(no GPU driver|libze_intel_gpu|libze_loader)"):
        coopjit.device_info("level_zero:0")
    with pytest.raises(coopjit.DeviceError, match="libze_intel_gpu.so.1|libze_loader"):
        coopjit.empty((2, 2), np.float32, device="level_zero:0")
    with pytest.raises(coopjit.DeviceError, match="level_zero:0"):
        Module(b"\x03\x02\x23\x07" + bytes(16), "level_zero:0")


def test_import_without_any_runtime():
    env = dict(os.environ, COOPJIT_OPENCL_LIBRARY="libcoopjit-absent-opencl.so",
               COOPJIT_LEVEL_ZERO_LIBRARY="libcoopjit-absent-ze.so", COOPJIT_CUDA_LIBRARY="libcoopjit-absent-cuda.so")
    code = ("import coopjit\n"
            "assert coopjit.devices() == ['cpu'], coopjit.devices()\n"
            "from coopjit.devices import status\n"
            "s = {x['backend']: x['status'] for x in status()}\n"
            "assert 'libcoopjit-absent-opencl.so not loaded' in s['opencl'], s\n"
            "assert 'libcoopjit-absent-ze.so not loaded' in s['level_zero'], s\n"
            "try:\n    coopjit.device_info('opencl:0')\nexcept coopjit.DeviceError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "libcoopjit-absent-opencl.so not loaded" in r.stdout


# ---- empty(): NumPy arrays in shared memory -------------------------------------------------

def test_empty_on_cpu_is_numpy_empty():
    a = coopjit.empty((3, 4), np.float32)
    assert type(a) is np.ndarray and a.shape == (3, 4) and a.dtype == np.float32 and shared_buffer(a) is None


@needs_intel_cpu
@pytest.mark.parametrize("shape,dtype,order", [((5, 7), np.float32, "C"), ((4, 3, 2), np.int64, "F"),
                                               (10, np.float16, "C"), ((0, 3), np.float64, "C")])
def test_empty_on_device_is_shared_memory(shape, dtype, order):
    dev = opencl_cpu_device()
    a = coopjit.empty(shape, dtype, device=dev, order=order)
    want = np.empty(shape, dtype, order=order)
    assert a.shape == want.shape and a.dtype == want.dtype
    assert a.strides == want.strides or a.size == 0
    assert a.flags.writeable and a.flags.aligned
    buf = shared_buffer(a)
    assert buf is not None and buf.device == dev and buf.nbytes >= a.nbytes
    assert a.__array_interface__["data"][0] == buf.address and buf.address % 64 == 0
    a[...] = 3
    assert (a == 3).all()


@needs_intel_cpu
def test_empty_memory_is_freed_with_the_last_view():
    dev = opencl_cpu_device()
    gc.collect()
    before = _core.live_shared_allocations()
    a = coopjit.empty((64, 64), np.float32, device=dev)
    view = a[3:, ::2].T
    assert _core.live_shared_allocations() == before + 1
    del a
    gc.collect()
    assert _core.live_shared_allocations() == before + 1  # the view keeps it
    view[...] = 1.0
    del view
    gc.collect()
    assert _core.live_shared_allocations() == before


@needs_intel_cpu
def test_empty_rejects_object_dtype_and_negative_shapes():
    dev = opencl_cpu_device()
    with pytest.raises(TypeError, match="Python objects"):
        coopjit.empty(3, object, device=dev)
    with pytest.raises(ValueError, match="negative"):
        coopjit.empty((2, -1), device=dev)


@needs_intel_cpu
def test_kernel_reads_and_writes_empty_arrays_in_place(rng):
    dev = opencl_cpu_device()
    n = 1000
    x = coopjit.empty(n, np.float32, device=dev)
    y = coopjit.empty(n + 24, np.float32, device=dev)
    x[:] = rng.standard_normal(n).astype(np.float32)
    y[:] = -7.0
    address = (x.ctypes.data, y.ctypes.data)
    kernel = Module.from_llvm(AXPY_INDEX, dev, kernels={"axpy_index": {"work_group_size": (64,)}}).kernel("axpy_index")
    kernel(x, y, np.float32(2.5), np.int64(n), global_size=1024, local_size=64)
    want = 2.5 * x.astype(np.float64) + np.arange(n)
    assert np.allclose(y[:n], want, rtol=2e-7, atol=2e-4)
    assert (y[n:] == -7.0).all()  # i >= n wrote nothing
    assert (x.ctypes.data, y.ctypes.data) == address  # the same memory, no copies
    # A view's pointer is its first element: the kernel writes from there.
    kernel(x[500:], y[500:], np.float32(0.0), np.int64(10), global_size=64, local_size=64)
    assert np.array_equal(y[500:510], np.arange(10, dtype=np.float32))


@needs_intel_cpu
def test_kernel_arguments_are_checked():
    dev = opencl_cpu_device()
    kernel = Module.from_llvm(AXPY_INDEX, dev).kernel("axpy_index")
    x = coopjit.empty(16, np.float32, device=dev)
    with pytest.raises(ValueError, match="argument 1 is a NumPy array in host memory"):
        kernel(x, np.zeros(16, np.float32), np.float32(1), np.int64(16), global_size=16)
    with pytest.raises(TypeError, match="argument 2 is a float"):
        kernel(x, x, 1.0, np.int64(16), global_size=16)
    with pytest.raises(coopjit.DeviceError, match="clSetKernelArg failed with CL_INVALID_ARG_SIZE"):
        kernel(x, x, np.float64(1), np.int64(16), global_size=16)
