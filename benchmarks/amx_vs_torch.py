"""coopjit's AMX products on every core against torch on the same cores (issue 14): bf16
(torch.matmul) and int8 (torch._int_mm) squares, coopjit with its own plan and with the plan
variants given as JSON arguments, as rates and shares of coopjit.peak()'s all-core AMX peak. Each
case is checked (float64 / exact integers) and timed in blocks after a pause (_rounds.timed);
coopjit and torch alternate over 3 rounds and each reports its median round.

    python benchmarks/amx_vs_torch.py ['{"amx_prefetch": 0}' ...]

Recorded: benchmarks/recorded/issue14-emr16-amx-session11.txt."""
import json
import os
import sys

import numpy as np

import coopjit
from _rounds import alternate, err_of, operands, torch_case


def main():
    import torch

    if not coopjit.cpu_info()["features"].get("amx-tile"):
        print("this CPU has no AMX tiles: nothing to measure")
        return
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    variants = [{}] + [json.loads(x) for x in sys.argv[1:]]
    pk = coopjit.peak()
    print(f"torch {torch.__version__} with {threads} threads; peak (one core, all cores):",
          json.dumps({k: (round(v["single"]), round(v["all"])) for k, v in pk.items() if k.startswith("amx")}), flush=True)
    rng = np.random.default_rng(0)
    for dt in ("bf16", "int8"):
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["all"]
        for s in (1024, 2048, 4096):
            a, b = operands(rng, dt, s, s, s)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            cases = [(json.dumps(v), (lambda v=v: coopjit.matmul(a, b, plan=v or None))) for v in variants] + [("torch", torch_case(a, b, dt))]
            errs = {name: err_of(f(), ref) for name, f in cases}
            times = alternate(cases, rounds=3, pause=0.1, seconds=0.3, blocks=5)
            rows = {name: (times[name], errs[name]) for name, _ in cases}
            t_torch = float(np.median(rows["torch"][0]))
            for name, (ts, err) in rows.items():
                t = float(np.median(ts))
                rate = 2 * s ** 3 / t / 1e9
                print(f"{dt:5} {s:5}^3 {threads} threads {name:<28} {t * 1e3:8.3f} ms {rate:8.0f} G/s {rate / peak * 100:5.1f}% "
                      f"of peak  torch time / this {t_torch / t:5.2f}  err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
