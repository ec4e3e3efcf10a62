"""One device interface (coopjit._device.Device): every public function plans, allocates, copies
and launches through the device object of its device= (coopjit.devices.get), so that a kind of
device registered in coopjit.devices.KINDS is dispatched to without any other change; and the
package's modules import without cycles (each in a fresh interpreter, alone; and every import
statement, those inside functions included)."""
import ast
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import coopjit
from coopjit import devices
from coopjit._cpu import CpuDevice
from coopjit._device import Device
from conftest import assert_gemm_close

PKG = pathlib.Path(coopjit.__file__).parent
MODULES = sorted(p.stem for p in PKG.glob("*.py") if p.stem not in ("__init__", "__main__"))


# ---- a kind of device registered from outside: everything reaches it through the interface ----------
class ProbeDevice(CpuDevice):
    """A device kind that runs on the CPU's kernels and records which interface methods each
    public function called."""

    kind = "probe"
    calls: list = []

    @classmethod
    def names(cls, prefix):
        return [f"{prefix}:0"]

    def info(self):
        ProbeDevice.calls.append("info")
        return {"name": self.name, "backend": "probe"}

    def check_prepacked(self, where):
        ProbeDevice.calls.append("check_prepacked")
        Device.check_prepacked(self, where)  # a packed operand is the CPU's: refused here


def _recorded(name):
    def method(self, *args, **kwargs):
        ProbeDevice.calls.append(name)
        return getattr(CpuDevice, name)(self, *args, **kwargs)
    return method


for _m in ("empty", "resident", "plan_overrides", "compile_gemm", "compile_kernel", "gemm", "gemm_views",
           "epilogue_operands", "reduce2d", "pool_workers"):
    setattr(ProbeDevice, _m, _recorded(_m))


@pytest.fixture
def probe():
    devices.register("probe", ProbeDevice)
    ProbeDevice.calls = []
    try:
        yield "probe:0"
    finally:
        devices.unregister("probe")


def _called(*names):
    missing = [n for n in names if n not in ProbeDevice.calls]
    assert not missing, f"not dispatched through the device: {missing} (calls: {ProbeDevice.calls})"
    ProbeDevice.calls = []


def test_a_registered_kind_is_listed_checked_and_one_object_per_name(probe):
    assert coopjit.devices()[0] == "cpu" and probe in coopjit.devices()
    assert devices.check_device(probe) == probe
    dev = devices.get(probe)
    assert isinstance(dev, ProbeDevice) and devices.get(probe) is dev and devices.resolve(probe) is dev
    assert coopjit.device_info(probe) == {"name": probe, "backend": "probe"}
    _called("info")
    x = coopjit.empty((3, 5), np.float32, device=probe)
    assert x.shape == (3, 5) and x.dtype == np.float32
    _called("empty")


def test_products_dispatch_through_the_registered_kind(probe, rng):
    a, b = rng.standard_normal((37, 29)), rng.standard_normal((29, 41))
    assert_gemm_close(coopjit.matmul(a, b, device=probe), a, b)
    _called("gemm")
    c = rng.standard_normal((41, 37))
    got = coopjit.gemm(b, a, c.copy(), alpha=0.5, beta=2.0, trans_a=True, trans_b=True, device=probe)
    assert_gemm_close(got, b.T, a.T, c, 0.5, 2.0)
    _called("gemm")
    x, y = rng.standard_normal((3, 1, 9, 7)), rng.standard_normal((4, 7, 5))
    got = coopjit.matmul(x, y, device=probe)
    for i in np.ndindex(got.shape[:2]):
        assert_gemm_close(got[i], x[i[0], 0], y[i[1]])
    _called("resident", "gemm_views")
    k = coopjit.compile_gemm(37, 41, 29, np.float64, device=probe)
    assert_gemm_close(k(a, b), a, b)
    _called("compile_gemm")


def test_fused_epilogues_dispatch_through_the_registered_kind(probe, rng):
    a, b = rng.standard_normal((19, 23)).astype(np.float32), rng.standard_normal((23, 17)).astype(np.float32)
    bias = rng.standard_normal(17).astype(np.float32)
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0.0)
    np.testing.assert_allclose(coopjit.matmul(a, b, bias=bias, activation="relu", device=probe), ref, rtol=1e-4, atol=1e-4)
    _called("gemm")
    np.testing.assert_allclose(coopjit.gemm(a, b, bias=bias, activation="relu", device=probe), ref, rtol=1e-4, atol=1e-4)
    _called("gemm")
    x = rng.standard_normal((2, 19, 23)).astype(np.float32)
    r = rng.standard_normal((2, 19, 17)).astype(np.float32)
    ref = np.einsum("bmk,kn->bmn", x.astype(np.float64), b.astype(np.float64)) + r
    np.testing.assert_allclose(coopjit.matmul(x, b, residual=r, device=probe), ref, rtol=1e-4, atol=1e-4)
    _called("resident", "epilogue_operands", "gemm_views")


def test_reductions_and_user_kernels_dispatch_through_the_registered_kind(probe, rng):
    z = rng.standard_normal((13, 300))
    for axis in (0, 1, None):
        np.testing.assert_allclose(coopjit.reduce(z, axis=axis, device=probe), z.sum(axis=axis), rtol=1e-12, atol=1e-12)
        _called("reduce2d", "pool_workers")
    from coopjit.ir import KernelBuilder

    kb = KernelBuilder("twice", subgroup_size=16)
    X, Y = kb.param("X", "ptr<f32>"), kb.param("Y", "ptr<f32>")
    t = "coopmatrix<f32, 16, 8, acc, subgroup>"
    kb.store(kb.per_element(kb.load(t, X, strides=(8, 1)), lambda b, r, c, v: b.mul(v, 2.0)), Y, strides=(8, 1))
    k = kb.compile(device=probe)
    _called("compile_kernel")
    xs = rng.standard_normal((16, 8)).astype(np.float32)
    ys = np.zeros_like(xs)
    k(xs, ys)
    np.testing.assert_array_equal(ys, 2 * xs.astype(np.float64))


def test_a_kind_that_takes_no_prepacked_operand_refuses_one_naming_itself(probe, rng):
    b = rng.standard_normal((8, 6)).astype(np.float32)
    pb = coopjit.prepack(b)
    a = rng.standard_normal((5, 8)).astype(np.float32)
    for call in (lambda: coopjit.matmul(a, pb, device=probe), lambda: coopjit.gemm(a, pb, device=probe),
                 lambda: coopjit.matmul(a, pb, bias=np.ones(6, np.float32), device=probe)):
        with pytest.raises(ValueError, match=r"prepacked b \(coopjit.prepack\) is packed for the CPU; pass the array "
                                             r"itself on probe:0"):
            call()
        _called("check_prepacked")


def test_unregistered_kind_is_an_unknown_device_again(rng):
    devices.register("probe", ProbeDevice)
    devices.unregister("probe")
    assert "probe:0" not in coopjit.devices()
    with pytest.raises(ValueError, match=r"unknown device 'probe:0'; available devices: \['cpu'"):
        coopjit.matmul(np.ones((2, 2)), np.ones((2, 2)), device="probe:0")
    with pytest.raises(TypeError, match="not a coopjit device class"):
        devices.register("probe", object)


def test_built_in_names_map_to_their_kinds():
    """No device needed: the objects are made without opening anything."""
    from coopjit import _gpu

    assert isinstance(devices.get("cpu"), CpuDevice) and devices.get("cpu").plan_target == "cpu"
    for name, cls, source in (("opencl:0", _gpu.OpenclDevice, "spirv"), ("level_zero:0", _gpu.LevelZeroDevice, "spirv"),
                              ("cuda:0", _gpu.CudaDevice, "ptx"), ("target:sm_90", _gpu.TargetDevice, "ptx"),
                              ("target:xe-hpc", _gpu.TargetDevice, "spirv")):
        dev = devices.get(name)
        assert type(dev) is cls and dev.name == name and dev.default_source == source and dev.plan_target == "gpu"
        assert dev.sources[-1] == source
    assert devices.get("target:sm_90").host_visible and not devices.get("target:sm_90").launches
    assert devices.get("cpu").pool_workers() == coopjit.get_num_threads()


# ---- no import cycles --------------------------------------------------------------------------------
_ISOLATED = r"""
import builtins, importlib.abc, importlib.util, json, sys
name = sys.argv[1]
spec = importlib.util.find_spec("coopjit")
pkg = importlib.util.module_from_spec(spec)  # the package without its __init__: only the module's own imports run
sys.modules["coopjit"] = pkg
initializing, cycles, order = [], [], []


class Tracker(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith("coopjit."):
            return None
        for f in sys.meta_path:
            if f is not self and hasattr(f, "find_spec"):
                s = f.find_spec(fullname, path, target)
                if s is not None:
                    break
        else:
            return None
        loader = s.loader

        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                order.append(fullname)
                initializing.append(fullname)
                try:
                    loader.exec_module(module)
                finally:
                    initializing.pop()

        s.loader = Loader()
        return s


real_import = builtins.__import__


def tracking_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "")
    base = importlib.util.resolve_name("." * level + name, (globals or {}).get("__package__")) if level else name
    for t in [base] + [base + "." + x for x in (fromlist or ()) if x != "*"]:
        if t in initializing and t != importer:
            cycles.append([importer, t])  # t asked for while it is still running: a circle
    return real_import(name, globals, locals, fromlist, level)


sys.meta_path.insert(0, Tracker())
builtins.__import__ = tracking_import
try:
    importlib.import_module("coopjit." + name)
    error = None
except ImportError as e:
    missing = e.name or getattr(e.__cause__, "name", None)  # the module that could not be found
    error = {"message": f"{type(e).__name__}: {e}", "missing": missing}
print(json.dumps({"cycles": cycles, "order": order, "error": error}))
"""


def test_each_module_imports_alone_without_a_cycle():
    procs = {m: subprocess.Popen([sys.executable, "-c", _ISOLATED, m], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for m in MODULES}
    for m, p in procs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, f"coopjit.{m} failed to import alone:\n{err}"
        r = json.loads(out.splitlines()[-1])
        if r["error"] is not None:
            # only an optional third-party package may be missing (coopjit.dask without dask)
            missing = r["error"]["missing"]
            assert missing and not missing.startswith("coopjit"), f"coopjit.{m}: {r['error']['message']}"
            continue
        assert not r["cycles"], f"coopjit.{m}: modules asked for while still initializing: {r['cycles']}"
        assert f"coopjit.{m}" in r["order"], r["order"]


def _import_graph():
    """module -> the coopjit modules it imports anywhere (module level and inside functions)."""
    graph = {}
    for name in MODULES + ["__init__"]:
        tree = ast.parse((PKG / f"{name}.py").read_text())
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                out |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("coopjit."):
                out.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("coopjit.")}
        graph[name] = {m for m in out if m in MODULES and m != name}
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_statement_closes_a_cycle():
    graph = _import_graph()
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]  # the finder finds one
    cycles = _cycles(graph)
    # The one left: coopjit.tune(client=...) hands the problems to coopjit.dask, whose workers run
    # coopjit.tune (the optional dask integration); nothing of the device layer is in a cycle.
    assert cycles in ([], [{"_tune", "dask"}]), cycles
    layer = {"_arrays", "_cuda_arrays", "_epilogue", "_kernel_args", "_device", "_cpu", "_gpu", "devices", "spirv",
             "ptx", "_gemm", "_gemm_fused", "_reduce", "ir"}
    assert layer <= set(MODULES)
    # the interface imports no implementation, the implementations no public function
    assert not graph["_device"] & layer
    assert not (graph["_cpu"] | graph["_gpu"]) & {"devices", "_gemm", "_gemm_fused", "_reduce", "ir", "spirv", "ptx"}
