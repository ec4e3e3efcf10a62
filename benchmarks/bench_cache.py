"""Times the first matmul of a new process whose kernel is in the disk cache against the cached (in-memory) call, per size; each process on a private cache directory."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import json, sys, time
import numpy as np
import coopjit
n = int(sys.argv[1])
a = np.ones((n, n), np.float32); b = np.ones((n, n), np.float32)
t0 = time.perf_counter(); coopjit.matmul(a, b); first = time.perf_counter() - t0
ts = []
for _ in range(30 if n < 1024 else 10):
    t0 = time.perf_counter(); coopjit.matmul(a, b); ts.append(time.perf_counter() - t0)
s = coopjit._core.cache_stats()
print(json.dumps({"first": first, "cached": sorted(ts)[len(ts) // 2], "compiles": s["compiles"],
                  "disk_loads": s["disk_loads"]}))
"""


def run(n: int, cache: str) -> dict:
    env = {**os.environ, "COOPJIT_CACHE_DIR": cache}
    env.pop("COOPJIT_CACHE", None)
    out = subprocess.run([sys.executable, "-c", CHILD, str(n)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 256, 1024])
    parser.add_argument("--processes", type=int, default=5, help="new processes per size")
    args = parser.parse_args()
    print(f"{'size':>6} {'compile ms':>11} {'first from disk ms':>19} {'cached ms':>10} {'difference ms':>14}")
    with tempfile.TemporaryDirectory(prefix="coopjit-bench-cache-") as cache:
        for n in args.sizes:
            cold = run(n, cache)  # compiles and stores
            assert cold["compiles"] == 1, cold
            warm = [run(n, cache) for _ in range(args.processes)]
            assert all(w["compiles"] == 0 and w["disk_loads"] == 1 for w in warm), warm
            first = statistics.median(w["first"] for w in warm) * 1e3
            cached = statistics.median(w["cached"] for w in warm) * 1e3
            print(f"{n:>6} {cold['first'] * 1e3:11.1f} {first:19.3f} {cached:10.4f} {first - cached:14.3f}")


if __name__ == "__main__":
    main()
