"""Helpers of the cache, tuning and thread tests: a private cache directory for in-process tests, and running a snippet in a fresh Python process on a given cache directory."""
import json
import os
import subprocess
import sys

import pytest

import coopjit


@pytest.fixture
def private_cache(tmp_path):
    """This process's caches moved to an empty directory for one test (and the in-memory code
    cache forgotten, so that each kernel is a miss again); restored afterwards."""
    old = coopjit.cache.directory()
    d = tmp_path / "cache"
    coopjit.cache.set_directory(d)
    coopjit._core.cache_clear()
    yield d
    coopjit.cache.set_directory(old)


def run_snippet(code: str, cache_dir, env=None, check=True, wait=True):
    """Runs `code` in a new Python process whose caches live in `cache_dir`; returns the JSON its
    last stdout line prints (and its stderr), or the Popen when not `wait`."""
    full_env = {**os.environ, "COOPJIT_CACHE_DIR": str(cache_dir), **(env or {})}
    full_env.pop("COOPJIT_CACHE", None) if "COOPJIT_CACHE" not in (env or {}) else None
    args = [sys.executable, "-c", code]
    if not wait:
        return subprocess.Popen(args, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    res = subprocess.run(args, env=full_env, capture_output=True, text=True, timeout=300)
    if check:
        assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


def result_of(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


#: A snippet that builds one kernel, checks it against NumPy and prints the cache counters.
COMPILE_AND_CHECK = """
import json, numpy as np, coopjit
k = coopjit.compile_gemm(96, 80, 64, np.float32, plan={"mr": 5, "kb": 8})
rng = np.random.default_rng(0)
a, b = rng.standard_normal((96, 64)).astype(np.float32), rng.standard_normal((64, 80)).astype(np.float32)
ok = bool(np.allclose(k(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4))
s = coopjit._core.cache_stats()
print(json.dumps({"ok": ok, "compiles": s["compiles"], "disk_loads": s["disk_loads"], "origin": k._core.origin,
                  "key": k._core.key, "ir": k.source("ir"), "lock_timeouts": coopjit.cache.info()["process"]["lock_timeouts"],
                  "fma": sum("vfmadd" in line for line in k.source("asm").splitlines())}))
"""
