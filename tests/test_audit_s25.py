"""Session 25's audit of what sessions 20, 22, 23 and 24 did not reach: the on-disk caches (the
kernel cache and the tuning database: damaged, foreign or unwritable), the kernel-building API
(coopjit.ir: constants, values used outside their region), coopjit.dask's arguments. Each test is
a bug the audit found (it failed before its fix); scripts/fuzz_ir_builder.py is the sweep of
malformed kernels (refused with a Python exception, never a crash)."""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import coopjit
from coopjit import _tunedb
from coopjit.ir import KernelBuilder
from cache_helpers import private_cache  # noqa: F401 - a fixture
from conftest import load_script

GOOD_PLAN = {"layout": "row", "mr": 3, "nr": 16, "kb": 8, "kt": 128, "threads": 1, "split": "dp", "pack": False}


# ---------------------------------------------------------------------------------------------
# the tuning database


def test_a_deeply_nested_tuning_database_does_not_break_import(tmp_path):
    # json.loads raised RecursionError (not a ValueError) on a file of nested brackets: the
    # import of coopjit itself failed, where a damaged database is to be ignored with a warning.
    (tmp_path / "tuning.json").write_text('{"format": 1, "entries": ' + "[" * 100000 + "]" * 100000 + "}")
    code = ("import warnings, numpy as np\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    import coopjit\n"
            "a = np.arange(16, dtype=np.float32).reshape(4, 4)\n"
            "assert np.allclose(coopjit.matmul(a, a), a.astype(np.float64) @ a)\n"
            "print([str(x.message) for x in w])")
    env = {**os.environ, "COOPJIT_CACHE_DIR": str(tmp_path)}
    env.pop("COOPJIT_CACHE", None)
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "damaged tuning database" in res.stdout


def test_a_deeply_nested_tuning_database_is_ignored_on_reload(private_cache):  # noqa: F811
    private_cache.mkdir(exist_ok=True)
    (private_cache / "tuning.json").write_text('{"format": 1, "entries": ' + "[" * 100000 + "]" * 100000 + "}")
    with pytest.warns(RuntimeWarning, match="damaged tuning database"):
        _tunedb.reload()
    assert _tunedb.entries() == {}


@pytest.fixture
def unwritable_cache(tmp_path):
    """The caches in a directory that cannot be made (a path under a regular file: ENOTDIR, which
    holds for root too, where a read-only mode would not)."""
    old = coopjit.cache.directory()
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="tuning database"):
        coopjit.cache.set_directory(blocker / "cache")
    coopjit._core.cache_clear()
    yield blocker / "cache"
    coopjit.cache.set_directory(old)


def test_tune_into_an_unwritable_directory_keeps_its_result(unwritable_cache):
    # The tuning ran its whole budget, then _tunedb.store raised NotADirectoryError (the lock
    # file's folder) and the result was lost; the kernel cache in the same place costs nothing
    # but the cache. Now the plan is used in this process and a warning says it was not stored.
    with pytest.warns(RuntimeWarning, match="cannot write the tuning database"):
        report = coopjit.tune(shape="24x16x8", budget=5, max_candidates=2, progress=False)
    assert report.winner is not None and report.stored and report.stored_in is None
    assert report.problem["signature"] in coopjit._core.tuned_plans()
    assert "used in this process" in str(report)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((24, 8)).astype(np.float32), rng.standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(coopjit.matmul(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_database_updates_in_an_unwritable_directory_warn(unwritable_cache):
    sig = "gemm f32 8x8x8 batch 1 unit b_c,c_c pool 1"
    with pytest.warns(RuntimeWarning, match="cannot write the tuning database"):
        assert _tunedb.store(sig, "cpu", GOOD_PLAN, {"time_s": 1.0}) is None
    assert _tunedb.lookup(sig) is not None and sig in coopjit._core.tuned_plans()
    with pytest.warns(RuntimeWarning, match="cannot write the tuning database"):
        assert _tunedb.forget(sig) is True
    assert _tunedb.lookup(sig) is None and sig not in coopjit._core.tuned_plans()
    rec = {"signature": sig, "device": "cpu", "machine": _tunedb.machine(), "plan": GOOD_PLAN}
    with pytest.warns(RuntimeWarning, match="cannot write the tuning database"):
        assert _tunedb.merge({_tunedb.key(sig): rec}) == 1
    assert sig in coopjit._core.tuned_plans()
    out = coopjit.cache.clear()  # raised NotADirectoryError; nothing is stored there to delete
    assert out["tuning"] == 1 and coopjit._core.tuned_plans() == {}


# ---------------------------------------------------------------------------------------------
# the cache directory


@pytest.mark.parametrize("path", ["", "bad\0name"])
def test_set_directory_refuses_an_empty_path_or_a_nul(tmp_path, private_cache, path):  # noqa: F811
    # "" put both caches in the current directory (os.path.abspath("")); a NUL was handed to the
    # core, which created the folder named by the part before it (its C string) and kept the
    # path with the NUL as the cache directory after the tuning database raised ValueError.
    before = coopjit.cache.directory()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(ValueError, match="cache directory"):
            coopjit.cache.set_directory(path)
    finally:
        os.chdir(cwd)
    assert coopjit.cache.directory() == before
    assert not {"bad", "kernels", "tuning.json"} & set(os.listdir(tmp_path))  # nothing made here


# ---------------------------------------------------------------------------------------------
# coopjit.ir: constants


def _store_constant(value, dtype):
    """The kernel that stores one constant of `dtype` into x[0]."""
    b = KernelBuilder("const")
    x = b.param("x", f"ptr<{dtype}>")
    b.store_element(x, 0, b.const(value, dtype))
    k = b.compile()
    out = np.zeros(1, {"i8": np.int8, "u8": np.uint8, "i32": np.int32, "i64": np.int64, "u64": np.uint64,
                       "u32": np.uint32, "i16": np.int16}[dtype])
    k(out)
    return out[0]


@pytest.mark.parametrize("value, dtype", [(300, "i8"), (-1, "u8"), (2**31, "i32"), (2**63, "i64"), (2**64, "u64"),
                                          (1e30, "i32"), (float("nan"), "i32"), (float("inf"), "i64"),
                                          (2.5, "i32"), (-(2**15) - 1, "i16")])
def test_integer_constants_outside_their_type_are_refused(value, dtype):
    # They were wrapped or truncated silently (300 as i8 stored 44, 2.5 as i32 stored 2), and a
    # NaN or 1e30 went through a C++ float-to-int cast that is undefined behaviour (UBSan).
    with pytest.raises(ValueError, match=rf"{dtype}"):
        KernelBuilder("k").const(value, dtype)


@pytest.mark.parametrize("value, dtype", [(2**53 + 1, "i64"), (-(2**63), "i64"), (2**63 - 1, "i64"),
                                          (2**64 - 1, "u64"), (2**63 + 3, "u64"), (-128, "i8"), (255, "u8"),
                                          (2**32 - 1, "u32"), (7.0, "i32")])
def test_integer_constants_are_exact(value, dtype):
    # Python ints went through float(): 2**53 + 1 became 2**53, and 2**64 - 1 as u64 2**63.
    assert int(_store_constant(value, dtype)) == int(value)


def test_an_integer_number_operand_is_exact():
    b = KernelBuilder("k")
    x = b.param("x", "ptr<i64>")
    b.store_element(x, 0, b.add(b.load_element(x, 0), 2**53 + 1))
    k = b.compile()
    out = np.array([1], np.int64)
    k(out)
    assert int(out[0]) == 2**53 + 2


# ---------------------------------------------------------------------------------------------
# coopjit.ir: values used outside the region that defines them


def _escaped_from_loop(b, box):
    b.for_range(0, 4, 1, [], lambda bb, i: (box.append(bb.add(i, 1)), None)[1])
    return box[0]


def _escaped_from_then(b, box):
    b.if_(b.lt(b.index(1), 2), lambda bb: (box.append(bb.add(bb.index(3), 1)), None)[1])
    return box[0]


def _from_another_loop(b, box):
    b.for_range(0, 4, 1, [], lambda bb, i: (box.append(bb.add(i, 1)), None)[1])
    out = []
    b.for_range(0, 4, 1, [], lambda bb, i: (out.append(bb.add(box[0], i)), None)[1])
    return out[0]


@pytest.mark.parametrize("escape", [_escaped_from_loop, _escaped_from_then, _from_another_loop])
def test_a_value_used_outside_its_region_is_a_verify_error(escape):
    # The verifier's set of defined values kept a region's values after the region ended: the
    # kernel reached LLVM's verifier ("Instruction does not dominate all uses!", a RuntimeError
    # naming LLVM IR, not the kernel's value).
    b = KernelBuilder("k")
    x = b.param("x", "ptr<f32>")
    v = escape(b, [])
    b.store_element(x, 0, b.convert(b.add(v, 1), "f32"))
    with pytest.raises(coopjit.VerifyError, match="outside the region that defines it"):
        b.compile()


# ---------------------------------------------------------------------------------------------
# coopjit.dask


@pytest.mark.parametrize("split_every, err, words", [
    ({0: 1}, ValueError, r"split_every\[0\] must be at least 2, got 1"),
    (1, ValueError, "split_every must be at least 2, got 1"),
    (0, ValueError, "split_every must be at least 2, got 0"),
    (-3, ValueError, "split_every must be at least 2, got -3"),
    ({5: 2}, ValueError, "the key 5, not an axis of the array"),
    ({"a": 2}, ValueError, "the key 'a'"),
    (2.5, TypeError, "split_every must be None, an int >= 2 or a dict"),
    ({0: 2.0}, TypeError, r"split_every\[0\] must be an int"),
])
def test_dask_reduce_checks_split_every(split_every, err, words):
    # dask.array's reduction took them: {0: 1} summed part of the array (345 where the sum is 780),
    # -3 raised "int() argument must be ... not 'complex'", {5: 2} and 1 were taken silently.
    da = pytest.importorskip("dask.array")
    import coopjit.dask as cjd

    x = da.from_array(np.arange(40, dtype=np.float32).reshape(8, 5), chunks=2)
    with pytest.raises(err, match=words):
        cjd.reduce(x, split_every=split_every)


def test_dask_reduce_takes_split_every_per_axis(rng):
    da = pytest.importorskip("dask.array")
    import dask
    import coopjit.dask as cjd

    a = rng.standard_normal((9, 7, 5)).astype(np.float32)
    x = da.from_array(a, chunks=(2, 3, 2))
    with dask.config.set(scheduler="synchronous"):
        got = cjd.reduce(x, axis=(0, -1), split_every={-1: 2, 0: 3}).compute()
    np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=(0, 2)), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# the sweep: scripts/fuzz_ir_builder.py


@pytest.mark.parametrize("seed", [1, 2])
def test_fuzzed_kernels_are_refused_or_run_and_never_end_the_process(seed):
    fuzz = load_script("fuzz_ir_builder")
    counts = {}
    fails = fuzz.sweep(seed, 40, counts=counts)
    assert not fails, "\n".join(fails[:5])
    assert counts.get("ran", 0) >= 5 and counts.get("refused", 0) >= 5, counts


def test_fuzzed_kernels_on_a_spirv_device():
    dev = next((d for d in coopjit.devices() if d.startswith(("opencl:", "level_zero:"))), None)
    if dev is None:
        pytest.skip("no SPIR-V device (OpenCL / Level Zero) on this machine")
    fuzz = load_script("fuzz_ir_builder")
    fails = fuzz.sweep(3, 30, device=dev)
    assert not fails, "\n".join(fails[:5])


# ---------------------------------------------------------------------------------------------
# what held (guards, passing before): the kernel cache is keyed by the CPU's features


def test_a_kernel_cached_for_more_cpu_features_is_never_loaded_with_fewer(tmp_path):
    # The disk cache's key holds the CPU's name and its whole feature string (COOPJIT_CPU_LEVEL
    # turns features off): a process limited to AVX2 compiles its own kernel rather than load the
    # one a native process stored (with AVX-512 on such a CPU), and the two do not meet.
    from cache_helpers import run_snippet

    if not coopjit.cpu_info()["features"].get("avx512f"):
        pytest.skip("this CPU has no AVX-512: COOPJIT_CPU_LEVEL=avx2 turns nothing off")
    code = ("import json, numpy as np, coopjit\n"
            "k = coopjit.compile_gemm(64, 48, 32, np.float32, plan={'mr': 2, 'kb': 8})\n"
            "a = np.ones((64, 32), np.float32); b = np.ones((32, 48), np.float32)\n"
            "ok = bool((k(a, b) == 32).all())\n"
            "print(json.dumps({'ok': ok, 'zmm': 'zmm' in k.source('asm'), 'origin': k._core.origin, "
            "'features': coopjit.cpu_info()['features'].get('avx512f', False)}))")
    native, _ = run_snippet(code, tmp_path)
    limited, _ = run_snippet(code, tmp_path, env={"COOPJIT_CPU_LEVEL": "avx2"})
    again, _ = run_snippet(code, tmp_path, env={"COOPJIT_CPU_LEVEL": "avx2"})
    assert native["ok"] and limited["ok"] and again["ok"]
    assert native["origin"] == "compiled" and limited["origin"] == "compiled" and again["origin"] == "disk"
    assert not limited["zmm"] and not again["zmm"] and not limited["features"]
    entries = [f for f in os.listdir(tmp_path / "kernels") if f.endswith(".x86-obj")]
    assert len(entries) == 2


# ---------------------------------------------------------------------------------------------
# resources: tune's arrays against the memory available


def test_tune_refuses_a_problem_beyond_the_available_memory_before_allocating(monkeypatch):
    # tune(shape=...) drew its operands and made their float64 copies one by one: a problem whose
    # arrays each fit the machine but together do not was filled until the kernel's out-of-memory
    # killer ended the process (NumPy refuses only a single allocation beyond the machine). The
    # memory the machine has is stood in for here by 64 MiB: 2048^3 needs about 0.2 GiB.
    from coopjit import _tune

    monkeypatch.setattr(_tune, "_available_memory", lambda: 64 << 20)
    with pytest.raises(MemoryError, match=r"2048x2048x2048 float32 needs about 0\.\d GiB .* 0\.1 GiB available"):
        coopjit.tune(shape="2048x2048x2048", budget=5, progress=False)
    a = np.ones((2048, 2048), np.float32)
    with pytest.raises(MemoryError, match="needs about"):
        coopjit.tune(a, a, budget=5, progress=False)
    report = coopjit.tune(shape="64x64x64", budget=2, max_candidates=1, progress=False, save=False)
    assert report.winner is not None  # small problems are unaffected


def test_tune_command_line_refuses_a_problem_beyond_the_memory_as_a_usage_error():
    res = subprocess.run([sys.executable, "-m", "coopjit", "tune", "--shape", "200000x200000x200000", "--budget", "2"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "200000x200000x200000 float32 needs about" in res.stderr and "GiB available" in res.stderr


# ---------------------------------------------------------------------------------------------
# coopjit.ir: what region functions return


def test_region_functions_may_return_numbers_and_name_what_else_they_return():
    # A number returned by a per_element / combine / loop / branch function reached pybind11 as
    # "Unable to cast Python instance of type <class 'float'> to C++ type '?'" (a RuntimeError),
    # None as per_element's "incompatible function arguments". A number is now a constant of the
    # value's type (as everywhere else in the builder); anything else a TypeError naming it.
    T = "coopmatrix<f32, 4, 16, acc, subgroup>"
    b = KernelBuilder("k")
    x = b.param("x", "ptr<f32>")
    m = b.load(T, x, strides=(16, 1))
    m = b.per_element(m, lambda bb, r, c, v: 2.5)
    total = b.for_range(0, 3, 1, [b.const(0, "f32")], lambda bb, i, acc: 1.5)[0]
    branch = b.if_(b.lt(b.index(0), 1), lambda bb: 4, lambda bb: 5.0, types=["f32"])[0]
    m = b.per_element(m, lambda bb, r, c, v: bb.add(bb.add(v, total), branch))
    b.store(m, x, strides=(16, 1))
    k = b.compile()
    buf = np.arange(64, dtype=np.float32)
    k(buf)
    np.testing.assert_array_equal(buf, np.full(64, 2.5 + 1.5 + 4, np.float32))

    for bad, where in ((None, "per_element's function"), ("x", "per_element's function")):
        with pytest.raises(TypeError, match=f"{where} must return an IR value or a number, got {bad!r}"):
            b2 = KernelBuilder("k")
            b2.per_element(b2.splat(T, 1.0), lambda bb, r, c, v: bad)
    with pytest.raises(TypeError, match="reduce's combine function must return"):
        b2 = KernelBuilder("k")
        b2.reduce(b2.splat(T, 1.0), "row", "coopmatrix<f32, 4, 1, acc, subgroup>", lambda bb, p, q: [p])
    with pytest.raises(TypeError, match="inits must be IR values"):
        KernelBuilder("k").for_range(0, 4, 1, [0.0], lambda bb, i, acc: acc)
