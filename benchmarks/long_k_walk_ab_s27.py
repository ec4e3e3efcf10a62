#!/usr/bin/env python3
"""Session 27 (hzen, issue 14): A/B of two coopjit builds on f32 / f64 products over long K, one
thread's CPU time (time.thread_time), processes of the two builds alternating (the order swapped
each round); per case each process's median of 9 blocks of calls, then the median [min-max] over
rounds, and the largest error against NumPy in float64 (relative, per element).

    CASES=96x96x16384,200x200x4096d python benchmarks/long_k_walk_ab_s27.py SITE_A SITE_B ROUNDS
(a trailing d: float64)"""
import json, os, subprocess, sys
import numpy as np
CASES = [tuple(int(v) for v in c.rstrip("d").split("x")) + ((np.float64,) if c.endswith("d") else ()) for c in os.environ["CASES"].split(",")] if os.environ.get("CASES") else [(96, 96, 16384), (96, 96, 4096), (200, 200, 8192), (200, 200, 2048), (513, 129, 700), (64, 64, 8192), (100, 37, 4000)]
def child():
    import time, coopjit
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _rounds import timed
    coopjit.set_num_threads(1)
    rng = np.random.default_rng(1)
    res = {}
    for case in CASES:
        m, n, k = case[:3]; dt = case[3] if len(case) > 3 else np.float32
        a = rng.random((m, k)).astype(dt); b = rng.random((k, n)).astype(dt); out = np.empty((m, n), dt)
        coopjit.matmul(a, b, out=out)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        err = float(np.max(np.abs(out - ref) / np.abs(ref)))
        f = lambda: coopjit.matmul(a, b, out=out)
        t_call = timed(f, blocks=9, seconds=9 * 0.02, clock=time.thread_time)  # (blocks of 20 ms)
        res[f"{m}x{n}x{k}" + ("" if dt == np.float32 else " f64")] = (t_call * 1e3, err)
    print(json.dumps(res))
if __name__ == "__main__" and len(sys.argv) == 2 and sys.argv[1] == "child":
    child(); sys.exit()
sites = sys.argv[1:3]; rounds = int(sys.argv[3])
allr = {s: [] for s in sites}
for r in range(rounds):
    for s in (sites if r % 2 == 0 else sites[::-1]):
        env = dict(os.environ, PYTHONPATH=s)
        out = subprocess.run([sys.executable, __file__, "child"], env=env, capture_output=True, text=True, cwd="/tmp")
        allr[s].append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"round {r} {s} load {os.getloadavg()[0]:.1f}", flush=True)
print(f"{'case':18s} " + "  ".join(f"{os.path.basename(s):>22s}" for s in sites) + "   ratio  (ms, median over rounds of each round's median of 9 blocks; [min-max])")
for c in allr[sites[0]][0]:
    meds = []
    cols = []
    for s in sites:
        v = [x[c][0] for x in allr[s]]; meds.append(np.median(v))
        cols.append(f"{np.median(v):8.4f} [{min(v):.3f}-{max(v):.3f}]")
    errs = [max(x[c][1] for x in allr[s]) for s in sites]
    print(f"{c:18s} " + "  ".join(f"{x:>22s}" for x in cols) + f"   {meds[1]/meds[0]:.3f}  max rel err {errs[0]:.1e} / {errs[1]:.1e}")
