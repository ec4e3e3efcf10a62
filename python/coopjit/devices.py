"""Devices from Python: the names coopjit can run on ("cpu", "opencl:N", "level_zero:N",
"cuda:N"), their properties, NumPy arrays backed by device-visible memory (empty), SPIR-V modules
whose kernels read and write those arrays in place, and the table of kinds of device behind the
device interface (_device.Device): `get(name)` is the object the public functions plan, allocate,
copy and launch through.

Importing this module registers Intel's CPU OpenCL runtime from the intel-opencl-rt wheel with the
OpenCL ICD loader (see _opencl_icd), before the loader first runs.
"""
from __future__ import annotations

import types

import numpy as np
from numpy.typing import DTypeLike

from . import _core, _opencl_icd, spirv
from ._arrays import as_dtype
from ._cpu import CpuDevice
from ._device import Device
from ._gpu import CudaDevice, LevelZeroDevice, OpenclDevice, RuntimeDevice, TargetDevice, shared_buffer

ICD_VENDORS_DIR = _opencl_icd.register()

DeviceError = _core.DeviceError

#: The kinds of device, by the prefix of their names ("cpu", "opencl" of "opencl:0"), in the order
#: devices() lists them. A new kind of device is a Device subclass and a line here.
KINDS: dict[str, type[Device]] = {
    "cpu": CpuDevice,
    "opencl": OpenclDevice,
    "level_zero": LevelZeroDevice,
    "cuda": CudaDevice,
    "target": TargetDevice,  # a GPU named, not present (coopjit.spirv / coopjit.ptx compile_gemm)
}
_OPEN: dict[str, Device] = {}  # one object per device name (dict operations are atomic: no lock to hold across fork)


def register(prefix: str, kind: type[Device]) -> None:
    """Adds (or replaces) the kind of device whose names start with `prefix` ("<prefix>:N")."""
    if not (isinstance(kind, type) and issubclass(kind, Device)):
        raise TypeError(f"register: {kind!r} is not a coopjit device class (a subclass of _device.Device)")
    KINDS[prefix] = kind
    for name in [n for n in list(_OPEN) if n.partition(":")[0] == prefix]:
        _OPEN.pop(name, None)


def unregister(prefix: str) -> None:
    """Removes a kind added by register (and the objects of its devices)."""
    KINDS.pop(prefix, None)
    for name in [n for n in list(_OPEN) if n.partition(":")[0] == prefix]:
        _OPEN.pop(name, None)


def get(name: str) -> Device:
    """The device object of `name` (one per name and process). A name of no known kind gets the
    C++ runtime's device class, which reports it (unknown device, missing runtime) when used."""
    if not isinstance(name, str):
        return RuntimeDevice(name)
    dev = _OPEN.get(name)
    if dev is not None:
        return dev
    kind = KINDS.get(name.partition(":")[0])
    if kind is None:
        return RuntimeDevice(name)
    return _OPEN.setdefault(name, kind(name))


def resolve(device: str | None) -> Device:
    """The device object of a device= argument (None: the CPU), checked as check_device does."""
    return get(check_device(device))


def devices() -> list[str]:
    """Names of the devices coopjit can run on: "cpu" first, then the usable SPIR-V devices, then
    NVIDIA GPUs ("cuda:0", ...) when the CUDA driver is there."""
    return [name for prefix, kind in list(KINDS.items()) for name in kind.names(prefix)]


def check_device(device) -> str:
    """"cpu" for None or "cpu"; a device's name ("opencl:0", "level_zero:0", "cuda:0") when it is
    one of devices(); ValueError naming the available devices otherwise (DeviceError when the
    device's runtime has no usable device at all)."""
    if device is None or device == "cpu":
        return "cpu"
    available = devices()
    if isinstance(device, str) and device in available:
        return device
    backend = device.partition(":")[0] if isinstance(device, str) else None
    runtime = getattr(KINDS.get(backend), "runtime", None) if backend is not None else None
    if runtime is not None and device.partition(":")[2].isdigit():
        # A device of a runtime coopjit knows, absent: when the runtime has no device at all (no
        # loader, no driver), that is what the error says, as a DeviceError (a RuntimeError).
        for st in _core.backend_status():
            if st["backend"] == backend and not st["usable"]:
                raise _core.DeviceError(
                    f"device {device!r} is not available: {runtime} has no usable device: "
                    f"{st['status'] or 'no devices found'} (available devices: {available})")
    raise ValueError(f"unknown device {device!r}; available devices: {available}")


def _name(device, where: str) -> str:
    """device= of device_info / empty: None is the CPU (as matmul's device=None); TypeError for a
    value that is not a str (pybind11's "incompatible function arguments" for 3 or None, and b'cpu'
    reached the SPIR-V runtime: "device 'cpu' runs kernels through the ORC JIT"), ValueError for
    "cpu:N" (taken as the CPU here, refused by matmul)."""
    if device is None:
        return "cpu"
    if not isinstance(device, str):
        raise TypeError(f"{where}: device must be a device name (a str: 'cpu', 'opencl:0', 'level_zero:0', "
                        f"'cuda:0'), got {device!r} ({type(device).__name__})")
    if device != "cpu" and device.partition(":")[0] == "cpu":
        raise ValueError(f"unknown device {device!r}: the CPU is 'cpu'; available devices: {devices()}")
    return device


def device_info(name: str = "cpu") -> dict:
    """Properties of a device. For SPIR-V devices: device_name, vendor, driver_version, platform,
    type, spirv_version, memory, subgroup_sizes, max_work_group_size, local_memory_bytes,
    global_memory_bytes, compute_units, dpas (True / False / None when unreported), block2d (2-D block I/O, the same),
    extensions, spirv_extensions (the SPIR-V extensions an OpenCL device says it takes).
    CUDA devices ("cuda:N", memory "device"): device_name, compute_units (SMs), arch ("sm_90"),
    compute_capability, local_memory_bytes (shared memory a block may opt into),
    shared_memory_per_sm_bytes, global_memory_bytes, registers_per_block, l2_bytes, clock_khz,
    memory_clock_khz, memory_bus_bits, memory_bandwidth_gbs.
    Raises DeviceError (naming the missing runtime or driver) for an absent device."""
    return get(_name(name, "device_info")).info()


def status() -> list[dict]:
    """Per runtime: how many devices it gives, and why not more (loader, driver, rejected devices)."""
    out = _core.backend_status()
    lib = _opencl_icd.intel_cpu_runtime()
    for s in out:
        if s["backend"] == "opencl":
            s["intel_cpu_runtime"] = str(lib) if lib else "not installed (pip install intel-opencl-rt intel-cmplr-lib-rt)"
            s["icd_vendors"] = ICD_VENDORS_DIR
            if lib is not None and not s["usable"]:
                s["missing_libraries"] = _opencl_icd.missing_libraries(lib)
    return out


def empty(shape: int | tuple[int, ...], dtype: DTypeLike = np.float64, *, device: str = "cpu", order: str = "C") -> np.ndarray:
    """An uninitialized array like numpy.empty. On a SPIR-V device its memory is USM shared (or
    fine-grain SVM): the host and the device's kernels use it in place, without copies. The
    allocation lives as long as the array (its base) and views of it, and is freed after."""
    dtype = np.dtype(np.float64) if dtype is None else as_dtype(dtype, "empty: dtype")  # (numpy.empty's None)
    return get(_name(device, "empty")).empty(shape, dtype, order)


def _kernel_arg(i: int, a, device: str):
    if isinstance(a, _core.SharedBuffer):
        buf, address = a, a.address
    elif isinstance(a, np.ndarray):
        buf, address = shared_buffer(a), a.__array_interface__["data"][0]
        if buf is None:
            raise ValueError(f"argument {i} is a NumPy array in host memory: a {device} kernel reads "
                             f"arrays made by coopjit.empty(..., device={device!r})")
    elif isinstance(a, np.generic):
        return ("bytes", a.tobytes())
    elif isinstance(a, (bytes, bytearray)):
        return ("bytes", bytes(a))
    else:
        raise TypeError(f"argument {i} is a {type(a).__name__}: pass device arrays, or scalars with "
                        f"their size, such as np.int32(5) or np.float32(0.5)")
    if buf.device != device:
        raise ValueError(f"argument {i} lives on {buf.device}, the kernel runs on {device}")
    return ("ptr", address)


class Kernel:
    """One kernel of a Module; calling it sets the arguments, launches and waits."""

    def __init__(self, module: "Module", name: str):
        self.module, self.name = module, name
        self._k = module._m.kernel(name)

    def __call__(self, *args, global_size, local_size=None) -> None:
        g = (global_size,) if np.isscalar(global_size) else tuple(global_size)
        l = () if local_size is None else ((local_size,) if np.isscalar(local_size) else tuple(local_size))
        dev = self.module.device
        self._k.launch([_kernel_arg(i, a, dev) for i, a in enumerate(args)], [int(x) for x in g], [int(x) for x in l])

    def source(self, kind: str = "spirv") -> str:
        return self.module.source(kind)


class Module:
    """A SPIR-V module built for one device (DeviceError with the build log if it does not build)."""

    def __init__(self, binary: bytes, device: str, llvm_ir: str | None = None):
        self.binary, self.device, self.llvm_ir = bytes(binary), device, llvm_ir
        self._m = _core.load_spirv(device, self.binary)

    @classmethod
    def from_llvm(cls, llvm_ir: str, device: str, **options) -> "Module":
        """Compiles LLVM IR to SPIR-V (options: spirv.compile_with_ir) and builds it on device."""
        binary, ir = spirv.compile_with_ir(llvm_ir, **options)
        return cls(binary, device, ir)

    def kernel(self, name: str) -> Kernel:
        return Kernel(self, name)

    @property
    def build_log(self) -> str:
        return self._m.build_log

    def source(self, kind: str = "spirv") -> str:
        """"spirv": the disassembly (spirv-dis); "llvm": the LLVM IR given to the SPIR-V backend."""
        if kind == "spirv":
            return spirv.disassemble(self.binary)
        if kind == "llvm" and self.llvm_ir is not None:
            return self.llvm_ir
        raise ValueError(f"no {kind!r} source: a SPIR-V module has 'spirv'" + (" and 'llvm'" if self.llvm_ir else ""))


class _DevicesModule(types.ModuleType):
    """`coopjit.devices` is this module, and calling it lists the devices: `coopjit.devices()` as
    before, and `coopjit.devices.device_info`, `coopjit.devices.Module`, ... (a function of the
    same name would hide the module: `import coopjit.devices as d` would give the function)."""

    def __call__(self) -> list[str]:
        return devices()


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _DevicesModule
