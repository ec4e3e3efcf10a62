"""1-D sum of 12e6 f32 (N=...): coopjit.reduce against the row form run directly over S pieces with R-row
tiles (VARS "SxR[:pfBYTES][:tcCOLS]": row.prefetch / row.tile_cols overrides), torch.sum and numpy.sum, blocks
of 10 calls alternating; THR=1: CPU time, else wall after 0.2 s pauses; best / median GB/s of ROUNDS.
Issue 14, session 19: THR=2 ROUNDS=21 VARS=8x4,2x1 python benchmarks/zen4_sum_split.py
Recorded: benchmarks/recorded/issue14-zen4-2core-bw-session19.txt."""
import os, time
import numpy as np, torch
import coopjit
from coopjit import _core

def load():
    return open("/proc/loadavg").read().split()[0]
rng = np.random.default_rng(7)
n = int(os.environ.get("N", 12_000_000))
a = rng.random(n, dtype=np.float32); ta = torch.from_numpy(a)
rounds = int(os.environ.get("ROUNDS", 7))
def variant(split, tr, extra):
    item = 4
    h = (-a.ctypes.data % 64) // item
    length = (n - 16 + 1) // split // 16 * 16
    body = a[h:h + split * length].reshape(split, length)
    part = np.empty(split, np.float32)
    rest = np.concatenate([a[:h], a[h + split*length:]])
    def f():
        _core.reduce_plan_overrides({"row.tile_rows": tr, **extra})
        _core.reduce2d("sum", "row", body, part, "f32", "f32", "f32")
        _core.reduce_plan_overrides({})
        return part.sum() + rest.sum()
    return f
thrs = [int(v) for v in os.environ.get("THR", "1,2").split(",")]
for thr in thrs:
    coopjit.set_num_threads(thr); torch.set_num_threads(thr)
    clock = time.thread_time if thr == 1 else time.perf_counter
    fns = {"cj": lambda: coopjit.reduce(a)}
    for spec in os.environ.get("VARS", "2x1,4x1,4x2,8x4,16x4").split(","):
        head, *rest = spec.split(":")
        s, tr = (int(v) for v in head.split("x"))
        extra = {("row.prefetch" if r.startswith("pf") else "row.tile_cols"): int(r[2:]) for r in rest}
        fns[spec] = variant(s, tr, extra)
    fns["torch"] = lambda: ta.sum()
    fns["numpy"] = lambda: a.sum()
    ref = a.astype(np.float64).sum()
    for k, f in fns.items():
        assert abs(float(f()) - ref) / ref < 1e-4, k
    res = {k: [] for k in fns}
    for r in range(rounds):
        for k, f in fns.items():
            if thr > 1: time.sleep(0.2)
            f(); t = clock()
            for _ in range(10): f()
            res[k].append((clock() - t) / 10)
    print(f"thr {thr} ({'thread_time' if thr == 1 else 'wall'}) GB/s best/median: " + "  ".join(
        f"{k} {a.nbytes/min(v)/1e9:4.1f}/{a.nbytes/np.median(v)/1e9:4.1f}" for k, v in res.items()) + f"  load {load()}", flush=True)
