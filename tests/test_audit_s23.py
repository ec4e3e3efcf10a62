"""Session 23's audit of what sessions 20 and 22 did not reach: reductions, batched products,
prepacked operands, plan= dicts, thread counts, environment variables and the command line. Each
test is a bug the audit found (it failed before its fix); scripts/fuzz_reductions.py is the sweep
of the reductions against NumPy."""
import os
import subprocess
import sys

import numpy as np
import pytest

import coopjit
from conftest import load_script


def _run(code, **env):
    """`code` in a fresh Python with `env` added: (returncode, stdout + stderr)."""
    full = {**os.environ, **env}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize("n", [1025, 100_000, 2**31, 2**40])
def test_set_num_threads_past_the_pool_limit_names_the_value(n):
    # 2**31 raised pybind11's "incompatible function arguments"; 100_000 was taken, and the first
    # reduction of a few MB started threads until the system refused one ("Resource temporarily
    # unavailable", the process limit of every process of the user spent).
    before = coopjit.get_num_threads()
    with pytest.raises(ValueError, match=f"in \\[1, 1024\\], got {n}"):
        coopjit.set_num_threads(n)
    assert coopjit.get_num_threads() == before
    with pytest.raises(ValueError, match=f"got {n}"):
        coopjit._core.set_num_threads(min(n, 2**63 - 1))


def test_set_num_threads_takes_numpy_ints(pool):
    pool(coopjit.get_num_threads())  # (restored afterwards)
    coopjit.set_num_threads(np.int64(3))
    assert coopjit.get_num_threads() == 3
    x = np.arange(3_000_000, dtype=np.float64)
    assert coopjit.reduce(x) == x.sum()


_THREADS = "import coopjit; print('threads', coopjit.get_num_threads())"


@pytest.mark.parametrize("value,want", [("99999999999", 1024), ("5000", 1024), ("4294967299", 1024), ("3abc", None),
                                        ("1e3", None), ("-4", None), ("abc", None), (" 3 ", 3)])
def test_num_threads_environment_variable_is_read_whole(value, want):
    # atoi read "3abc" as 3 and "1e3" as 1; "99999999999" overflowed into a pool of 1.2e9 threads
    # and "4294967299" into 3. A value that is not a whole number is passed over with a warning
    # (the CPUs of the affinity mask); one past 1024 is taken as 1024, with a warning.
    rc, out = _run(_THREADS + "; import numpy as np; print('sum', coopjit.reduce(np.ones(3_000_000, np.float32)) == 3e6)",
                   COOPJIT_NUM_THREADS=value, OMP_NUM_THREADS="")
    assert rc == 0, out
    got = int(out.split("threads ")[1].split()[0])
    cpus = len(os.sched_getaffinity(0))
    assert got == (cpus if want is None else want), out
    assert "sum True" in out
    if want != 3:
        assert f"COOPJIT_NUM_THREADS={value}" in out or f"COOPJIT_NUM_THREADS='{value}'" in out, out


def test_omp_num_threads_first_number_still_counts():
    rc, out = _run(_THREADS, COOPJIT_NUM_THREADS="", OMP_NUM_THREADS="3,2")
    assert rc == 0 and "threads 3" in out, out


_PACK = """
import pickle, sys, numpy as np, ml_dtypes, coopjit
rng = np.random.default_rng(5)
packs = {}
for name, dt in (("float32", np.float32), ("bfloat16", ml_dtypes.bfloat16), ("int8", np.int8)):
    b = rng.integers(-4, 5, (70, 53)).astype(dt)
    packs[name] = (b, coopjit.prepack(b))
sys.stdout.buffer.write(pickle.dumps(packs))
"""


@pytest.mark.parametrize("level", ["sse", "avx2"])
def test_prepacked_operand_pickled_on_another_cpu_works_here(rng, level):
    # A PackedMatrix pickled where the vectors are narrower (a Dask worker of another machine, or
    # COOPJIT_CPU_LEVEL) kept that CPU's panels: its products here were refused with errors about
    # plan fields nobody passed ("plan override nr=8 must be a multiple of the vector width 16",
    # "plan vnni=2 needs packed panels"). Unpickling repacks into this machine's format.
    import pickle

    p = subprocess.run([sys.executable, "-c", _PACK], capture_output=True, timeout=120,
                       env={**os.environ, "COOPJIT_CPU_LEVEL": level})
    assert p.returncode == 0, p.stderr.decode()
    packs = pickle.loads(p.stdout)
    for name, (b, pb) in packs.items():
        a = rng.integers(-4, 5, (33, 70)).astype(b.dtype)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        got = coopjit.matmul(a, pb)
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=1e-2 if name == "bfloat16" else 0, atol=0,
                                   err_msg=f"{name} packed under COOPJIT_CPU_LEVEL={level}")
        np.testing.assert_array_equal(pb.unpacked(), b)
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(pb)).unpacked(), b)


def test_prepacked_operand_on_the_left_is_named(rng):
    # matmul(packed, x) said "a has dtype object; coopjit GEMM supports ..." and packed @ x
    # "operand 'PackedMatrix' does not support ufuncs".
    pb = coopjit.prepack(rng.standard_normal((5, 4)).astype(np.float32))
    x = np.ones((4, 3), np.float32)
    for call in (lambda: coopjit.matmul(pb, x), lambda: coopjit.gemm(pb, x), lambda: pb @ x):
        with pytest.raises(TypeError, match="right-hand operand"):
            call()


@pytest.mark.parametrize("plan,err,words", [([("mr", 4)], TypeError, "plan must be a dict"),
                                            ("mr=4", TypeError, "plan must be a dict"),
                                            ({"foo": 1}, ValueError, "unknown plan field 'foo'")])
def test_prepack_plan_of_the_wrong_kind_is_named(plan, err, words):
    # prepack(b, plan=[("mr", 4)]) packed with mr 4 taken from a list of pairs, and plan="mr=4"
    # raised "dictionary update sequence element #0 has length 1; 2 is required".
    with pytest.raises(err, match=words):
        coopjit.prepack(np.ones((4, 4), np.float32), plan=plan)



@pytest.mark.parametrize("kw", [{"budget": float("nan")}, {"budget": float("inf")}, {"budget": "60"},
                                {"max_candidates": 2.5}, {"max_candidates": "3"}])
def test_tune_limits_of_the_wrong_kind_are_named(kw):
    # budget=nan was taken (its deadline never came: every candidate was timed); budget="60" and
    # max_candidates="3" raised "'<=' not supported between instances of 'str' and 'int'".
    name, value = next(iter(kw.items()))
    with pytest.raises(ValueError, match=f"{name} must .*got {value!r}".replace("(", "\\(").replace(")", "\\)")):
        coopjit.tune(shape=(8, 8, 8), progress=False, save=False, **kw)


@pytest.mark.parametrize("args,words", [
    (["tune", "--shape", "8x8x8", "--budget", "0"], "budget must be a positive"),
    (["tune", "--shape", "8x8x8", "--budget", "nan"], "budget must be a positive"),
    (["tune", "--shape", "8x8x8", "--max-candidates", "0"], "max_candidates must be"),
    (["tune", "--shape", "0x8x8"], "0x8x8 has an empty dimension"),
    (["tune", "--shape", "8x8x8", "--scheduler", "tcp://nowhere:1", "--threads", "0"], "--threads must be in"),
    (["dump", "4x4x4", "--out-dtype", "nope"], "--out-dtype: unknown dtype 'nope'"),
    (["bench", "--quick", "--only", "reduce", "--out", "/proc/coopjit-nope"], "--out /proc/coopjit-nope: cannot write"),
])
def test_command_line_argument_errors_are_usage_errors(args, words):
    # Each was a traceback (rc 1): tune's ValueErrors; bench made its --out directory after the
    # whole run, so an unwritable one lost the run to a FileNotFoundError; dump's unknown
    # --out-dtype was reported as "unknown dtype 'float32 / nope'".
    p = subprocess.run([sys.executable, "-m", "coopjit", *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert words in p.stderr and "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize("plan,err,words", [({"amx": True}, TypeError, "amx must be one of 'no', 'yes', 'emulated'"),
                                            ({"amx": 1.5}, TypeError, "amx must be one of"),
                                            ({"split": "dp+sk"}, ValueError, "'dp\\+sk' is for device plans")])
def test_cpu_plan_values_of_the_wrong_kind_are_named(plan, err, words):
    # amx=True said "plan amx must be an int" (it takes 'no' / 'yes' / 'emulated'); split='dp+sk'
    # (a device plan's) said "plan override split=3 must be 0 (dp), 1 (sk) or 2 (sk+dp)".
    a = np.ones((4, 4), np.float32)
    with pytest.raises(err, match=words):
        coopjit.matmul(a, a, plan=plan)


@pytest.mark.parametrize("kw", [{}, {"bias": True}, {"activation": "relu"}])
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_stack_of_products_with_k_zero_and_unmergeable_batch_strides(rng, kw, dtype):
    # K = 0 stacks whose batch strides do not merge: np.ascontiguousarray returns a zero-size
    # array as it is, strides and all, so the kernels got 5-D operands and raised "a must have 2
    # to 4 dims (batch dims, then the matrix), got 5". NumPy gives zeros (then the epilogue).
    if dtype == np.int8 and kw:
        kw = {**kw, "out_dtype": np.float32}
    if kw.get("bias") is True:
        kw = {**kw, "bias": rng.standard_normal(3).astype(np.float32)}
    a = np.ones((2, 2, 3, 5, 4), dtype)[:, ::-1, ::2, :, :0]  # (2, 2, 2, 5, 0), batch strides of 3 levels
    b = np.ones((1, 0, 3), dtype)
    got = coopjit.matmul(a, b, **kw)
    ref = np.zeros((2, 2, 2, 5, 3))
    if "bias" in kw:
        ref = ref + kw["bias"]
    assert got.shape == ref.shape
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=1e-6, atol=1e-6)


def _fuzz_slice(fuzz, rng, extra=None, cases=40):
    """`cases` drawn cases of a fuzz script through its shared sweep (scripts/fuzz_common.py), and
    extra(i, stats)'s error after case i where given: the failures' descriptions and the counts."""
    return fuzz.fuzz_common.sweep(fuzz.draw, fuzz.run_case, fuzz.describe, rng, cases,
                                  None if extra is None else lambda i, _rng, stats: extra(i, stats))


@pytest.mark.parametrize("seed", [7, 8])
def test_fuzzed_reductions_match_numpy_and_stay_in_their_buffers(seed):
    # A bounded slice of scripts/fuzz_reductions.py: dtypes, views, axes, out= in guarded buffers.
    fuzz = load_script("fuzz_reductions")
    rng = np.random.default_rng(seed)
    failures, stats = _fuzz_slice(fuzz, rng, lambda i, stats: fuzz.run_2x2_case(rng, stats) if i % 4 == 0 else None)
    assert not failures, "\n".join(failures)
    assert stats["ran"] >= 30, stats


@pytest.mark.parametrize("seed", [7, 8])
def test_fuzzed_stacks_of_products_match_numpy(seed):
    # A bounded slice of scripts/fuzz_batched.py: broadcast batch dims, views, out= in guarded buffers.
    fuzz = load_script("fuzz_batched")
    failures, stats = _fuzz_slice(fuzz, np.random.default_rng(seed))
    assert not failures, "\n".join(failures)
    assert stats["ran"] >= 25, stats
