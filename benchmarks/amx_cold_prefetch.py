"""Issue 14, session 15: coopjit's AMX nest with amx_prefetch 1 (the default) against 6 (the
next kernels' cold panels into L2), one thread and every thread against torch, in one run.

    taskset -c 3 python benchmarks/amx_cold_prefetch.py one       # one thread, B packed per call or prepacked
    python benchmarks/amx_cold_prefetch.py all 1024 4096 8192     # every thread, against torch

Recorded: benchmarks/recorded/issue14-emr16-amx-nest-session15.txt."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
from _rounds import alternate, amx_peak, err_of, operands, torch_case  # noqa: E402


def one_thread(pk, rng):
    for dt in ("bf16", "int8"):
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["single"]
        for (m, n, k) in ((256, 64, 2048), (2048, 2048, 2048), (4096, 4096, 4096)):
            a, b = operands(rng, dt, m, n, k)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            variants = [{"amx_prefetch": 1}, {"amx_prefetch": 6}]
            if m == 256:
                variants = [{"direct_a": 1}, {"direct_a": 1, "amx_prefetch": 6}]
            cases = []
            for v in variants:
                plan = {"threads": 1, **v}
                pb = coopjit.prepack(b, plan=plan)
                cases.append((json.dumps(v), lambda plan=plan: coopjit.matmul(a, b, plan=plan)))
                cases.append((json.dumps(v) + " prepacked", lambda plan=plan, pb=pb: coopjit.matmul(a, pb, plan=plan)))
            errs = {name: err_of(f(), ref) for name, f in cases}
            times = alternate(cases, rounds=2, pause=0.3, seconds=0.3 if m < 4096 else 0.6, blocks=3)
            rows = {name: (times[name], errs[name]) for name, _ in cases}
            for name, (ts, e) in rows.items():
                t = min(ts)
                rate = 2 * m * n * k / t / 1e9
                print(f"{dt:5} {m}x{n}x{k} 1 thread {name:<44} {t * 1e3:9.3f} ms {rate:7.0f} G/s {rate / peak * 100:5.1f}% of one core  err {e:.1e}", flush=True)


def all_threads(pk, rng, sizes):
    import torch
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    for dt in ("bf16", "int8"):
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["all"]
        for s in sizes:
            a, b = operands(rng, dt, s, s, s)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            tf = torch_case(a, b, dt)
            cases = [("{}", lambda: coopjit.matmul(a, b)),
                     ('{"amx_prefetch": 6}', lambda: coopjit.matmul(a, b, plan={"amx_prefetch": 6})),
                     ("torch", tf)]
            errs = {name: err_of(f(), ref) for name, f in cases}
            times = alternate(cases, rounds=3, pause=0.5, seconds=0.3, blocks=3)
            rows = {name: (times[name], errs[name]) for name, _ in cases}
            t_torch = float(np.median(rows["torch"][0]))
            for name, (ts, e) in rows.items():
                t = float(np.median(ts))
                rate = 2 * s ** 3 / t / 1e9
                print(f"{dt:5} {s:5}^3 {threads} threads {name:<22} {t * 1e3:9.3f} ms {rate:8.0f} G/s {rate / peak * 100:5.1f}% "
                      f"of peak  torch time / this {t_torch / t:5.2f}  rounds {' '.join(f'{x * 1e3:.2f}' for x in ts)}  err {e:.1e}", flush=True)


def main():
    pk, _ = amx_peak()  # no AMX here: the products run without tiles (a check of this script, not a timing)
    rng = np.random.default_rng(0)
    if sys.argv[1] == "one":
        one_thread(pk, rng)
    else:
        all_threads(pk, rng, [int(x) for x in sys.argv[2:]] or [1024, 4096, 8192])


if __name__ == "__main__":
    main()
