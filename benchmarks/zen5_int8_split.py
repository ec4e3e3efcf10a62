"""int8 squares on the 2-core Zen 5's 2 workers (issue 14, session 26): plan variants in
alternating rounds (each a block of calls after a pause), per variant the median and the minimum
over rounds of a call's wall time, and from the pool's launch trace (min over calls) the busier
worker's kernel time; exact against int64 NumPy. Loaded machines: read the minima.

    python benchmarks/zen5_int8_split.py 256,512 '[null, {"grid_m": 2}]' [rounds]
"""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
from coopjit import _core  # noqa: E402

sizes = [int(x) for x in sys.argv[1].split(",")]
plans = json.loads(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
torch = None
if os.environ.get("TORCH") == "1":
    import torch
    torch.set_num_threads(coopjit.get_num_threads())
rng = np.random.default_rng(0)
for s in sizes:
    a = rng.integers(-128, 128, (s, s), dtype=np.int8)
    b = rng.integers(-128, 128, (s, s), dtype=np.int8)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    out = np.empty((s, s), np.int32)
    fs = []
    for plan in plans:
        coopjit.matmul(a, b, out=out, plan=plan)
        assert np.array_equal(out, ref), plan
        fs.append((json.dumps(plan), lambda plan=plan: coopjit.matmul(a, b, out=out, plan=plan)))
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        fs.append(("torch._int_mm", lambda: torch._int_mm(ta, tb)))
    inner = max(5, int(0.05 / (2 * s**3 / 1.5e12)))
    res = {n: [] for n, _ in fs}
    kern = {n: [] for n, _ in fs}
    for r in range(rounds):
        for n, f in fs:
            time.sleep(0.02)
            f()
            _core._set_launch_trace(n != "torch._int_mm")
            ts = []
            for _ in range(inner):
                t0 = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t0)
                if n != "torch._int_mm":
                    tr = _core._launch_trace()
                    if tr["workers"] > 1:
                        kern[n].append(max(e - s0 for s0, e in zip(tr["start_ns"], tr["end_ns"])) / 1e3)
            _core._set_launch_trace(False)
            res[n].append(float(np.median(ts)))
    for n, _ in fs:
        v = np.array(res[n]) * 1e6
        k = f" kernel(max worker) min {min(kern[n]):6.1f} med {np.median(kern[n]):6.1f}" if kern[n] else ""
        print(f"{s} {n:<40} med {np.median(v):8.1f} min {v.min():8.1f} us  ({2*s**3/v.min()/1e3:6.0f} GOP/s at min){k}", flush=True)
