"""What `import coopjit` makes reachable: the documented modules, and no function that hides a
module of the same name (import coopjit.X as m must give the module)."""
import importlib
import pkgutil
import subprocess
import sys
import types

import coopjit


def test_every_public_submodule_is_the_attribute_of_its_name():
    for info in pkgutil.iter_modules(coopjit.__path__):
        if info.name.startswith("_") or info.name in ("bench",):  # bench: imported by `python -m coopjit bench`
            continue
        try:
            mod = importlib.import_module(f"coopjit.{info.name}")
        except ImportError:  # an optional integration whose package is not installed (coopjit.dask)
            continue
        assert getattr(coopjit, info.name) is mod, f"coopjit.{info.name} is {getattr(coopjit, info.name)!r}, not the module"


def test_ir_and_devices_are_reachable_after_import_coopjit():
    code = ("import coopjit\n"
            "print(coopjit.ir.KernelBuilder.__name__, coopjit.devices.device_info is coopjit.device_info,"
            " coopjit.devices()[0])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["KernelBuilder", "True", "cpu"]


def test_devices_module_is_callable_and_lists_the_same_devices():
    import coopjit.devices as d

    assert isinstance(d, types.ModuleType) and d() == d.devices() == coopjit.devices()
    assert all(name in coopjit.__all__ for name in ("ir", "devices", "Plan", "ptx", "spirv", "tensor", "layout", "cache"))
    for name in coopjit.__all__:
        assert hasattr(coopjit, name), name
