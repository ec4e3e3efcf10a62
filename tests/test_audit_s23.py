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
