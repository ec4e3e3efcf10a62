"""The JIT's own costs for the benchmark: per kernel kind, the first call in a process that has
to compile the kernel with LLVM, the first call in a process that finds it in the disk cache,
and a steady call. Each measurement runs in a fresh Python process (the in-memory caches start
empty) with a private cache directory; the first call's extra time over a steady call is the
kernel's JIT cost (planning, IR, LLVM O3 and code generation, or the disk load and link)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

#: kind -> Python that defines `call` (run once cold, then timed warm)
KINDS = {
    "GEMM f32 1024^3 (packed)": "a = np.ones((1024, 1024), np.float32); call = lambda: cj.matmul(a, a)",
    "GEMM f32 16^3 (fixed shape)": "a = np.ones((16, 16), np.float32); call = lambda: cj.matmul(a, a)",
    "GEMM f32 4096 x 16^3 stacked": "a = np.ones((4096, 16, 16), np.float32); call = lambda: cj.matmul(a, a)",
    "GEMM f64 512^3": "a = np.ones((512, 512)); call = lambda: cj.matmul(a, a)",
    "GEMM bf16 1024^3 (VNNI)": ("import ml_dtypes; a = np.ones((1024, 1024), ml_dtypes.bfloat16); "
                                "call = lambda: cj.matmul(a, a)"),
    "GEMM int8 1024^3 (VNNI)": "a = np.ones((1024, 1024), np.int8); call = lambda: cj.matmul(a, a)",
    "reduce sum along rows": "a = np.ones((4096, 4096), np.float32); call = lambda: cj.reduce(a, axis=1)",
    "reduce max down columns": "a = np.ones((4096, 4096), np.float32); call = lambda: cj.reduce(a, axis=0, op='max')",
}

_SCRIPT = r"""
import json, sys, time
import numpy as np
import coopjit as cj
out = {}
for kind, code in json.loads(sys.argv[1]).items():
    env = {"np": np, "cj": cj}
    exec(code, env)
    call = env["call"]
    t0 = time.perf_counter(); call(); first = time.perf_counter() - t0
    warm = []
    for _ in range(5):
        t0 = time.perf_counter(); call(); warm.append(time.perf_counter() - t0)
    out[kind] = {"first_s": first, "warm_s": sorted(warm)[2]}
print("JIT-RESULT " + json.dumps(out))
"""


def _run(cache_dir: str) -> dict:
    env = {**os.environ, "COOPJIT_CACHE_DIR": cache_dir}
    env.pop("COOPJIT_CACHE", None)
    res = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(KINDS)], capture_output=True, text=True,
                         env=env, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"the JIT measurement failed: {res.stderr[-2000:]}")
    line = [x for x in res.stdout.splitlines() if x.startswith("JIT-RESULT ")][-1]
    return json.loads(line.split(" ", 1)[1])


def measure() -> list[dict]:
    """Rows: kind, compile_ms (first call with an empty cache, beyond a warm call), disk_ms (first
    call of a new process with the kernel on disk, beyond a warm call), call_us (a warm call)."""
    with tempfile.TemporaryDirectory(prefix="coopjit-bench-jit-") as d:
        cold = _run(d)
        disk = _run(d)
    rows = []
    for kind in KINDS:
        c, k = cold[kind], disk[kind]
        warm = min(c["warm_s"], k["warm_s"])
        rows.append({"kind": kind, "compile_ms": 1e3 * max(0.0, c["first_s"] - warm),
                     "disk_ms": 1e3 * max(0.0, k["first_s"] - warm), "call_us": 1e6 * warm})
    return rows


def format_rows(rows: list[dict]) -> list[str]:
    width = max(len(r["kind"]) for r in rows)
    head = f"{'kernel kind':>{width + 1}} {'compile ms':>11} {'disk ms':>9} {'call us':>10}"
    lines = ["", "JIT: first call compiling (empty cache) / loading from the disk cache, beyond a warm call",
             head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['kind']:>{width + 1}} {r['compile_ms']:>11.1f} {r['disk_ms']:>9.1f} {r['call_us']:>10.1f}")
    return lines
