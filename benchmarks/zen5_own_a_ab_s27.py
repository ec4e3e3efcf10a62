"""Session 27 (hzen, issue 14): plan= own_a 0 / 1 in one process, alternating blocks: call median / min (perf_counter, block of calls) and the launch
trace's threads; int8 and bf16 squares, 2 workers; torch in its own block.

    python benchmarks/zen5_own_a_ab_s27.py   (with the build to measure on PYTHONPATH)"""
import sys, time, numpy as np, coopjit, os, ml_dtypes
from coopjit import _core
from collections import Counter
rng = np.random.default_rng(0)
import torch; torch.set_num_threads(coopjit.get_num_threads())
for dt in ("i8", "bf16"):
  for n in (256, 512):
    if dt == "i8":
        a = rng.integers(-128,128,(n,n),dtype=np.int8); b = rng.integers(-128,128,(n,n),dtype=np.int8); out=np.empty((n,n),np.int32)
        ref = a.astype(np.int64) @ b.astype(np.int64); ta, tb = torch.from_numpy(a), torch.from_numpy(b); tf = lambda: torch._int_mm(ta, tb)
    else:
        a = rng.standard_normal((n,n)).astype(ml_dtypes.bfloat16); b = rng.standard_normal((n,n)).astype(ml_dtypes.bfloat16); out=np.empty((n,n),np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64); ta, tb = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16), torch.from_numpy(b.view(np.int16)).view(torch.bfloat16); tf = lambda: ta @ tb
    res = {0: [], 1: [], "torch": []}; thr = {0: Counter(), 1: Counter()}
    reps = 200 if n == 256 else 40
    for r in range(7):
        for own in (0, 1):
            time.sleep(0.05)
            coopjit.matmul(a, b, out=out, plan={"own_a": own})
            assert np.max(np.abs(out - ref)) <= (0 if dt == "i8" else 1e-3 * np.max(np.abs(ref)))
            t0 = time.perf_counter()
            for _ in range(reps): coopjit.matmul(a, b, out=out, plan={"own_a": own})
            res[own].append((time.perf_counter() - t0) / reps * 1e6)
            _core._set_launch_trace(True)
            for _ in range(20):
                coopjit.matmul(a, b, out=out, plan={"own_a": own}); thr[own][tuple(_core._launch_trace()["thread"])] += 1
            _core._set_launch_trace(False)
        time.sleep(0.05); tf()
        t0 = time.perf_counter()
        for _ in range(reps): tf()
        res["torch"].append((time.perf_counter() - t0) / reps * 1e6)
    for k, v in res.items():
        print(f"{dt} {n}^3 {str(k):6s} med {np.median(v):8.1f} min {min(v):8.1f} us", "" if k == "torch" else f"threads of the shares {dict(thr[k])}")
print("load", os.getloadavg())
