"""A/B of two builds in alternating subprocesses (issue 14, session 22): matrix-vector products
(the dot walk) and the skinny rows, coopjit's default plan against NumPy / torch in the same process,
each timed in blocks of calls after a pause; ROUNDS rounds, the builds alternating, medians.

  python benchmarks/gemv_shares_ab.py NAME=PYTHONPATH [NAME=PYTHONPATH ...]
Recorded: benchmarks/recorded/issue14-emr16-skinny-session22.txt."""
import json, os, subprocess, sys, time

CASES = [(4096, 4096, 1), (2048, 2048, 1), (16384, 4096, 1), (4099, 3001, 1), (1, 4096, 4096), (4096, 4096, 64),
         (8192, 8192, 32), (3000, 200, 500)]  # m, k, n
if os.environ.get("CASES"):  # e.g. CASES='4096x4096x1,1x4096x4096' (m x k x n)
    CASES = [tuple(int(v) for v in c.split("x")) for c in os.environ["CASES"].split(",")]

CHILD = r'''
import json, os, sys, time
import numpy as np, torch, coopjit
sys.path.insert(0, %r)
from _rounds import timed
T = os.cpu_count(); torch.set_num_threads(T); coopjit.set_num_threads(T)
rng = np.random.default_rng(0); out = {}
for m, k, n in %r:
    a = rng.standard_normal((m, k)).astype(np.float32); b = rng.standard_normal((k, n)).astype(np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    cfg = coopjit.compile_gemm(m, n, k, np.float32).config
    r = {}
    for nm, f in [("coopjit", lambda: coopjit.matmul(a, b)), ("numpy", lambda: a @ b), ("torch", lambda: torch.matmul(ta, tb))]:
        time.sleep(0.3); r[nm] = timed(f, 5, 0.15)
    r["cfg"] = f"order={cfg['order']} threads={cfg['threads']} shares={cfg['shares']}"
    out[f"{m}x{n}x{k}"] = r
print(json.dumps(out))
'''


def main():
    builds = [arg.split("=", 1) for arg in sys.argv[1:]]
    rounds = int(os.environ.get("ROUNDS", "5"))
    here = os.path.dirname(os.path.abspath(__file__))
    res = {}
    for r in range(rounds):
        for name, path in builds:
            env = dict(os.environ, PYTHONPATH=path)
            p = subprocess.run([sys.executable, "-c", CHILD % (here, CASES)], env=env, capture_output=True, text=True, timeout=120)
            if p.returncode:
                print(p.stderr[-2000:]); raise SystemExit(1)
            for case, v in json.loads(p.stdout.strip().splitlines()[-1]).items():
                for lib in ("coopjit", "numpy", "torch"):
                    res.setdefault((case, name, lib), []).append(v[lib])
                res[(case, name, "cfg")] = v["cfg"]
            time.sleep(0.5)
    import statistics as st
    for m, k, n in CASES:
        case = f"{m}x{n}x{k}"
        nbytes = 4 * (m * k + k * n)
        for name, _ in builds:
            c, npy, tor = (st.median(res[(case, name, lib)]) for lib in ("coopjit", "numpy", "torch"))
            print(f"f32 {case:16} {name:8} coopjit {c*1e6:8.1f} us ({nbytes/c/1e9:6.1f} GB/s)  numpy {npy*1e6:8.1f}  torch {tor*1e6:8.1f}"
                  f"  vs numpy {npy/c:5.2f}  vs torch {tor/c:5.2f}  [{res[(case, name, 'cfg')]}]"
                  f"  rounds {' '.join(f'{x*1e6:.0f}' for x in res[(case, name, 'coopjit')])}", flush=True)


if __name__ == "__main__":
    main()
