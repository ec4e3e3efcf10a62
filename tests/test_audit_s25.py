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
