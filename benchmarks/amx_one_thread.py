"""One thread of coopjit's AMX GEMM against the one-core AMX peak (issue 14): bf16 and int8 at
1024 / 2048 / 4096 with plan variants (K tile, row panels per block, prefetch, tile feed,
prepacked B), each checked against float64 and timed in blocks after a pause (plan_sweep.timed).

    taskset -c 3 python benchmarks/amx_one_thread.py            # the variants below
    taskset -c 3 python benchmarks/amx_one_thread.py '{"kt": 512}' ...   # these plans only
    taskset -c 3 python benchmarks/amx_one_thread.py fills   # 2048^3 with zero / constant / random operands

Recorded: benchmarks/recorded/issue14-emr16-amx-session11.txt."""
import json
import sys
import time

import numpy as np

import coopjit
from _rounds import operands, timed

VARIANTS = {
    "bf16": [{}, {"kt": 256}, {"kt": 512}, {"kt": 512, "amx_prefetch": 2}, {"amx_prefetch": 0}, {"amx_prefetch": 2},
             {"amx_feed": 1}, {"amx_feed": 2}, {"mc_tiles": 2}, {"mc_tiles": 32}, "prepacked"],
    "int8": [{}, {"kt": 512}, {"kt": 1024}, {"kt": 1024, "amx_prefetch": 2}, {"amx_prefetch": 0}, {"amx_prefetch": 2},
             {"amx_feed": 1}, {"amx_feed": 2}, {"mc_tiles": 2}, {"mc_tiles": 32}, "prepacked"],
}


def main():
    if not coopjit.cpu_info()["features"].get("amx-tile"):
        print("this CPU has no AMX tiles: nothing to measure")
        return
    fills = sys.argv[1:] == ["fills"]
    only = [] if fills else [json.loads(x) for x in sys.argv[1:]]
    pk = coopjit.peak()
    print("peak (one core, all cores):", json.dumps({k: (round(v["single"]), round(v["all"]))
                                                     for k, v in pk.items() if k.startswith("amx")}), flush=True)
    rng = np.random.default_rng(0)
    for dt in ("bf16", "int8"):
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["single"]
        for s, fill in [(2048, f) for f in ("zero", "const", "random")] if fills else [(s, "random") for s in (1024, 2048, 4096)]:
            a, b = operands(rng, dt, s, s, s)
            if fill != "random":  # zeros, or coopjit.peak()'s constants (bf16 1/64, int8 1)
                a[...] = 0 if fill == "zero" else 1 / 64 if dt == "bf16" else 1
                b[...] = a[0, 0]
            ref = a.astype(np.float64) @ b.astype(np.float64)
            variants = only or ([{}, {"amx_prefetch": 0}, {"mc_tiles": 8}] if fills else VARIANTS[dt] if s == 2048 else
                                [{}, VARIANTS[dt][2], "prepacked"])
            for v in variants:
                plan = {"threads": 1, **(v if isinstance(v, dict) else {})}
                if v == "prepacked":
                    pb = coopjit.prepack(b, plan=plan)
                    f = lambda: coopjit.matmul(a, pb, plan=plan)
                else:
                    f = lambda: coopjit.matmul(a, b, plan=plan)
                c = f()
                err = float(np.max(np.abs(c.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)
                cf = coopjit.compile_gemm(s, s, s, a.dtype, plan=plan).config
                time.sleep(0.1)
                t = timed(f, seconds=0.25 if s < 4096 else 0.5, blocks=3)
                rate = 2 * s ** 3 / t / 1e9
                print(f"{dt:5} {s:5}^3 {fill:6} 1 thread {json.dumps(v):<40} {t * 1e3:8.2f} ms {rate:7.0f} G/s {rate / peak * 100:5.1f}% "
                      f"of one core  err {err:.1e}  [kt={cf['kt']} mc_tiles={cf['mc_tiles']}]", flush=True)


if __name__ == "__main__":
    main()
