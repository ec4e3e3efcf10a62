"""Session 27 (issue 14): plan c_prefetch (the lines an AMX tile will write prefetched for writing
during its K loop) against the same build without it (whose kernels are main's: the field off
builds the same program), and torch, in alternating rounds: each library / plan in its own block
of calls after a pause, medians of the rounds' block medians [min-max].

    taskset -c 3 python3 benchmarks/amx_cpf_ab_s27.py one   # one thread (torch with 1 thread)
    python3 benchmarks/amx_cpf_ab_s27.py all                 # every core
    (ROUNDS=3 SIZES=... DTYPES=bf16,int8 PLAN='{...}' in the environment)

Recorded: benchmarks/recorded/issue14-emr16-amx-session27.txt."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np

import coopjit
from _rounds import env_list, timed


def operands(rng, dt, s):
    if dt == "int8":
        return rng.integers(-128, 128, (s, s), dtype=np.int8), rng.integers(-128, 128, (s, s), dtype=np.int8)
    import ml_dtypes
    return (rng.standard_normal((s, s), np.float32).astype(ml_dtypes.bfloat16),
            rng.standard_normal((s, s), np.float32).astype(ml_dtypes.bfloat16))


def main(mode):
    import torch
    one = mode == "one"
    torch.set_num_threads(1 if one else coopjit.get_num_threads())
    rounds = int(os.environ.get("ROUNDS", "3"))
    sizes = [int(x) for x in env_list("SIZES", "1024,4096" if one else "1024,4096,8192")]
    base = {"threads": 1} if one else {}
    base.update(json.loads(os.environ.get("PLAN", "{}")))  # (PLAN='{"amx": "emulated"}': a check without tiles)
    plans = {"main": base, "c_prefetch": {**base, "c_prefetch": 1}}
    rng = np.random.default_rng(0)
    print(f"threads {1 if one else coopjit.get_num_threads()}, rounds {rounds}", flush=True)
    for dt in env_list("DTYPES", "bf16,int8"):
        for s in sizes:
            a, b = operands(rng, dt, s)
            ta, tb = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if dt == "bf16" else torch.from_numpy(a), \
                torch.from_numpy(b.view(np.int16)).view(torch.bfloat16) if dt == "bf16" else torch.from_numpy(b)
            fns = {name: (lambda p=p: coopjit.matmul(a, b, plan=p)) for name, p in plans.items()}
            fns["torch"] = (lambda: torch._int_mm(ta, tb)) if dt == "int8" else (lambda: ta @ tb)
            c0 = fns["main"]()
            c1 = fns["c_prefetch"]()
            same = np.array_equal(np.asarray(c0).view(np.uint8), np.asarray(c1).view(np.uint8))
            n = min(s, 256)
            ref = a[:n].astype(np.float64) @ b.astype(np.float64)
            err = float(np.max(np.abs(np.asarray(c1[:n], np.float64) - ref)) / np.max(np.abs(ref)))
            per_call = {}
            names = list(fns)
            seconds = 0.25 if s <= 4096 else 0.6
            for r in range(rounds):
                order = names if r % 2 == 0 else names[::-1]
                for name in order:
                    time.sleep(0.2)
                    per_call.setdefault(name, []).append(timed(fns[name], blocks=3, seconds=seconds))
            fl = 2.0 * s ** 3
            line = [f"{dt:4} {s}^3 {mode}: c_prefetch result == main's: {same}, err {err:.1e};"]
            for name in names:
                v = per_call[name]
                line.append(f"{name} {np.median(v) * 1e3:.3f} ms [{min(v) * 1e3:.3f}-{max(v) * 1e3:.3f}] "
                            f"({fl / np.median(v) / 1e9:.0f} G/s)")
            m, c, t = (np.median(per_call[x]) for x in ("main", "c_prefetch", "torch"))
            line.append(f"| main/c_prefetch {m / c:.3f}x, torch/c_prefetch {t / c:.2f}x, torch/main {t / m:.2f}x")
            print(" ".join(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "one")
