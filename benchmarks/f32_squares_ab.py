"""Two builds' automatic f32 square plans in alternating rounds, one subprocess a build and round,
torch (and NumPy through threadpoolctl, where installed) in each build's process at the same thread
count; each case a block of calls after a pause, medians over the rounds (issue 14, session 22).

    python benchmarks/f32_squares_ab.py SITE_A SITE_B [ROUNDS]

Recorded: benchmarks/recorded/issue14-emr16-f32-squares-session22.txt."""
import json
import os
import subprocess
import sys

import numpy as np

CASES = [(1024, 1), (2048, 1), (1024, 2), (1024, 16), (4096, 16), (8192, 16)]

CHILD = r"""
import json, sys, time
import numpy as np, torch, coopjit
try:
    from threadpoolctl import threadpool_limits
except ImportError:
    threadpool_limits = None
def block(f, seconds=0.25):
    f(); t = time.perf_counter(); f(); one = time.perf_counter() - t
    inner = max(1, int(seconds / max(one, 1e-7))); t = time.perf_counter()
    for _ in range(inner): f()
    return (time.perf_counter() - t) / inner
rng = np.random.default_rng(0); out = {}
for n, th in json.loads(sys.argv[1]):
    coopjit.set_num_threads(th); torch.set_num_threads(th)
    a = rng.standard_normal((n, n), dtype=np.float32); b = rng.standard_normal((n, n), dtype=np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    cfg = coopjit.compile_gemm(n, n, n, np.float32).config
    r = {"plan": " ".join(f"{k}={cfg[k]}" for k in ("threads", "shares", "kt", "mc_tiles", "nc_tiles"))}
    time.sleep(0.3); r["coopjit"] = block(lambda: coopjit.matmul(a, b))
    time.sleep(0.3); r["torch"] = block(lambda: torch.matmul(ta, tb))
    if threadpool_limits is not None:
        time.sleep(0.3)
        with threadpool_limits(th):
            r["numpy"] = block(lambda: np.matmul(a, b))
    out[f"{n} {th}"] = r
print("RESULT" + json.dumps(out))
"""


def child(site):
    env = dict(os.environ, PYTHONPATH=site)
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(CASES)], env=env, capture_output=True, text=True,
                       timeout=240)
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT")]
    if not line:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(line[0][6:])


def main():
    sites = {"main": sys.argv[1], "branch": sys.argv[2]}
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    res = {k: [] for k in sites}
    for r in range(rounds):
        for k in (("main", "branch") if r % 2 == 0 else ("branch", "main")):
            res[k].append(child(sites[k]))
    for key in (f"{n} {t}" for n, t in CASES):
        n, t = map(int, key.split())
        fl = 2.0 * n**3
        med = {}
        for k in sites:
            for lib in ("coopjit", "torch", "numpy"):
                xs = [rr[key][lib] for rr in res[k] if lib in rr[key]]
                if xs:
                    med[(k, lib)] = float(np.median(xs))
        for k in sites:
            print(f"f32 {n:5}^3 {t:2}t {k:6} [{res[k][0][key]['plan']}]", flush=True)
        mm, bb = med[("main", "coopjit")], med[("branch", "coopjit")]
        tt = float(np.median([med[(k, "torch")] for k in sites]))
        line = (f"f32 {n:5}^3 {t:2}t  main {mm * 1e3:9.3f} ms ({fl / mm / 1e9:7.1f} GF/s)  branch {bb * 1e3:9.3f} ms "
                f"({fl / bb / 1e9:7.1f} GF/s)  branch/main {mm / bb:5.2f}x  torch {tt * 1e3:9.3f} ms: branch {tt / bb:5.2f}x, "
                f"main {tt / mm:5.2f}x torch")
        if ("main", "numpy") in med:
            npm = float(np.median([med[(k, "numpy")] for k in sites]))
            line += f"  numpy {npm * 1e3:9.3f} ms: branch {npm / bb:5.2f}x numpy"
        print(line, flush=True)
        for k in sites:
            cj = " ".join(f"{rr[key]['coopjit'] * 1e3:.2f}" for rr in res[k])
            pt = " ".join(f"{rr[key]['torch'] * 1e3:.2f}" for rr in res[k])
            print(f"    rounds {k:6} coopjit {cj}  torch {pt}", flush=True)


if __name__ == "__main__":
    main()
