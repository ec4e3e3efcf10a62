"""A/B of two coopjit builds on the 2-core Zen 5 (issue 14, session 26): alternating processes
(`rounds` of main then branch), each timing plan=None calls of the int8 squares, the int8 / bf16
shape-sweep rows and bf16 squares on 2 workers (a block of calls after a pause, median of 5
blocks; torch in its own block in the same process), and the pool's launch trace (the busier
worker's kernel time, median over the calls). Prints, per case and build, the median and minimum
over rounds.

    python benchmarks/zen5_int8_ab.py /tmp/site-main /tmp/site-branch [rounds]
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

CASES = [("i8", 256, 256, 256), ("i8", 512, 512, 512), ("i8", 1024, 1024, 1024), ("i8", 2048, 2048, 2048),
         ("i8", 64, 4096, 4096), ("bf16", 256, 256, 256), ("bf16", 512, 512, 512), ("bf16", 1024, 1024, 1024),
         ("bf16", 64, 4096, 4096)]


def child(torch_too):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ml_dtypes
    import coopjit
    from coopjit import _core
    from _rounds import timed
    rng = np.random.default_rng(0)
    res = {}
    if torch_too:
        import torch
        torch.set_num_threads(coopjit.get_num_threads())
    for dt, m, n, k in CASES:
        if dt == "i8":
            a = rng.integers(-128, 128, (m, k), dtype=np.int8)
            b = rng.integers(-128, 128, (k, n), dtype=np.int8)
            out = np.empty((m, n), np.int32)
            ref = a.astype(np.int64) @ b.astype(np.int64)
        else:
            a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
            b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
            out = np.empty((m, n), np.float32)
            ref = a.astype(np.float64) @ b.astype(np.float64)
        coopjit.matmul(a, b, out=out)
        err = float(np.max(np.abs(out - ref))) / float(np.max(np.abs(ref)))
        assert err < (1e-5 if dt == "bf16" else 1e-12), (dt, m, n, k, err)
        time.sleep(0.1)
        t = timed(lambda: coopjit.matmul(a, b, out=out), blocks=5, seconds=0.3)
        _core._set_launch_trace(True)
        ks = []
        for _ in range(max(5, int(0.05 / t))):
            coopjit.matmul(a, b, out=out)
            tr = _core._launch_trace()
            if tr["workers"] > 1:
                ks.append(max(e - s for s, e in zip(tr["start_ns"], tr["end_ns"])) / 1e3)
        _core._set_launch_trace(False)
        row = {"t": t, "kern": float(np.median(ks)) if ks else None}
        if torch_too:
            ta, tb = torch.from_numpy(a.view(np.int8) if dt == "i8" else a.astype(np.float32)), None
            if dt == "i8":
                ta, tb = torch.from_numpy(a), torch.from_numpy(b)
                f = lambda: torch._int_mm(ta, tb)  # noqa: E731
            else:
                ta = torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
                tb = torch.from_numpy(b.astype(np.float32)).to(torch.bfloat16)
                f = lambda: torch.matmul(ta, tb)  # noqa: E731
            time.sleep(0.1)
            row["torch"] = timed(f, blocks=5, seconds=0.3)
        res[f"{dt} {m}x{n}x{k}"] = row
    print(json.dumps(res))


def main():
    builds = sys.argv[1:3]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    runs = {b: [] for b in builds}
    for r in range(rounds):
        for b in builds:
            env = dict(os.environ, PYTHONPATH=b)
            o = subprocess.run([sys.executable, os.path.abspath(__file__), "child", "1"], env=env, capture_output=True,
                               text=True, cwd="/tmp", timeout=600)
            if o.returncode:
                print(o.stderr[-2000:])
                raise SystemExit(1)
            runs[b].append(json.loads(o.stdout.strip().splitlines()[-1]))
            print(f"round {r} {b} done ({os.getloadavg()[0]:.1f} load)", flush=True)
    print(f"{'case':<22} {'build':<22} {'call med':>9} {'min':>9} {'kernel med':>10} {'torch med':>9}   (us; vs torch at medians)")
    for dt, m, n, k in CASES:
        key = f"{dt} {m}x{n}x{k}"
        for b in builds:
            t = np.array([x[key]["t"] for x in runs[b]]) * 1e6
            kk = [x[key]["kern"] for x in runs[b] if x[key]["kern"] is not None]
            pt = np.array([x[key]["torch"] for x in runs[b]]) * 1e6
            kern = f"{np.median(kk):10.1f}" if kk else f"{'-':>10}"
            print(f"{key:<22} {os.path.basename(b):<22} {np.median(t):9.1f} {t.min():9.1f} {kern} {np.median(pt):9.1f}   "
                  f"{np.median(pt) / np.median(t):.2f}x", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2] == "1")
    else:
        main()
