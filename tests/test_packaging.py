"""What a user of the installed package relies on besides the kernels: the declared metadata,
the typing files, the stubs of the compiled module kept in step with it, annotations on the
public API."""
import ast
import importlib.metadata as md
import inspect
import pathlib

import pytest

import coopjit
from coopjit import _core

PKG = pathlib.Path(coopjit.__file__).parent


def test_typing_files_are_installed():
    assert (PKG / "py.typed").exists()
    assert (PKG / "_core.pyi").exists()


def test_stub_names_every_public_attribute_of_the_compiled_module():
    tree = ast.parse((PKG / "_core.pyi").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    public = {n for n in dir(_core) if not n.startswith("_")}
    missing = sorted(public - names)
    assert not missing, f"python/coopjit/_core.pyi lacks {missing}: run `make stubs`"


def test_runtime_dependencies_are_declared():
    requires = md.requires("coopjit") or []
    base = {r.split(";")[0].split(">")[0].split("=")[0].strip().lower().replace("_", "-")
            for r in requires if "extra ==" not in r}
    # ml_dtypes: bfloat16 / float8 are part of the API; platformdirs: the cache directory;
    # tqdm: tune's progress.
    assert {"numpy", "ml-dtypes", "platformdirs", "tqdm"} <= base, base
    extras = set(md.metadata("coopjit").get_all("Provides-Extra") or [])
    assert {"opencl", "test", "bench", "plot"} <= extras, extras


def _public_functions():
    for name in coopjit.__all__:
        obj = getattr(coopjit, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__.startswith("coopjit") and not issubclass(obj, BaseException):
            for mname, m in vars(obj).items():
                if inspect.isfunction(m) and (not mname.startswith("_") or mname in ("__init__", "__call__")):
                    yield f"{name}.{mname}", m


@pytest.mark.parametrize("name,fn", list(_public_functions()), ids=lambda x: x if isinstance(x, str) else "")
def test_public_functions_are_annotated(name, fn):
    sig = inspect.signature(fn)
    unannotated = [p.name for p in sig.parameters.values()
                   if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    assert not unannotated, f"{name}: parameters without annotations: {unannotated}"
    assert sig.return_annotation is not inspect.Signature.empty, f"{name}: no return annotation"
