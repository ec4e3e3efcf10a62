"""Issue 14, session 17: where one thread's AMX time goes against amx_nest_probe.c, and plan
amx_store (full tiles from the tiles straight to C when alpha is 1) against the old epilogue
(the tiles through the stack into vectors, times alpha, bf16 rounded by integer operations).

    taskset -c 3 python benchmarks/amx_store.py one 2048           # one thread: packing, C, epilogue
    python benchmarks/amx_store.py all 1024 2048 4096 8192         # every thread, against torch

One thread, each case of plan {"nc_tiles": 8} (the probe's order 2, NC 8) and the default plan:
as matmul allocates C; into a preallocated `out`; with B prepacked (coopjit.prepack: no B
packing); amx_store 0 (the old epilogue) for each. "A packing" is M x 32 x K with B prepacked:
the A panels of the whole product and 1/64 of its dot products. Every product is checked
against float64 first (err: max |c - ref| / max |ref|; 8192: its first 256 rows); 3 alternating
rounds of _rounds.timed (3 blocks) after a 0.3 s pause each; medians; % of coopjit.peak()'s
AMX rate (one core / all cores).

Recorded: benchmarks/recorded/issue14-emr16-amx-store-session17.txt."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
from _rounds import amx_peak, measure, operands, torch_case  # noqa: E402


def one_thread(pk, rng, s, emu):
    for dt in ("bf16", "int8"):
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["single"]
        a, b = operands(rng, dt, s, s, s)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        a32 = a
        b32 = np.ascontiguousarray(b[:, :32])
        ref32 = a.astype(np.float64) @ b32.astype(np.float64)
        out = np.empty((s, s), np.int32 if dt == "int8" else a.dtype)
        out32 = np.empty((s, 32), out.dtype)
        cases, refs, flops = [], {}, {}

        def add(name, f, r, fl):
            cases.append((name, f))
            refs[name] = r
            flops[name] = fl

        full = 2.0 * s ** 3
        for v in ({"nc_tiles": 8}, {}):
            for store in (1, 0):
                plan = {**v, "threads": 1, "amx_store": store, **({"amx": 2} if emu else {})}
                pb = coopjit.prepack(b, plan=plan)
                pb32 = coopjit.prepack(b32, plan={**plan, "pack": 1, "direct_a": 0})
                tag = json.dumps({**v, "amx_store": store})
                add(tag, lambda plan=plan: coopjit.matmul(a, b, plan=plan), ref, full)
                add(tag + " out=", lambda plan=plan: coopjit.matmul(a, b, plan=plan, out=out), ref, full)
                add(tag + " B prepacked, out=", lambda plan=plan, pb=pb: coopjit.matmul(a, pb, plan=plan, out=out), ref, full)
                if not v and store:
                    p32 = {**plan, "pack": 1, "direct_a": 0}
                    add("A packing (N 32, B prepacked)", lambda p32=p32, pb32=pb32: coopjit.matmul(a32, pb32, plan=p32, out=out32),
                        ref32, full / (s / 32))
        add("numpy a.copy() (time only)", lambda: a.copy(), None, full)
        measure(f"{dt:5} {s}^3  1 thread ", cases, refs, flops, peak, 0.3)


def all_threads(pk, rng, sizes, emu):
    import torch
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    for dt in ("bf16", "int8"):
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["all"]
        for s in sizes:
            a, b = operands(rng, dt, s, s, s)
            rows = min(s, 256 if s > 4096 else s)
            ref = a[:rows].astype(np.float64) @ b.astype(np.float64)
            cases = []
            for v in ({}, {"amx_store": 0}):
                plan = {**v, **({"amx": 2} if emu else {})}
                cases.append((json.dumps(v), lambda plan=plan: coopjit.matmul(a, b, plan=plan or None)))
            cases.append(("torch", torch_case(a, b, dt)))
            names = [n for n, _ in cases]
            measure(f"{dt:5} {s}^3 {threads:2} threads", cases, dict.fromkeys(names, ref), dict.fromkeys(names, 2.0 * s ** 3),
                    peak, 0.15 if s < 8192 else 0.4)


def main():
    mode, sizes = sys.argv[1], [int(x) for x in sys.argv[2:]]
    pk, emu = amx_peak()  # no AMX here: the emulated tiles (a check of this script, not a timing)
    rng = np.random.default_rng(0)
    if mode == "one":
        one_thread(pk, rng, (sizes or [2048])[0], emu)
    else:
        all_threads(pk, rng, sizes, emu)


if __name__ == "__main__":
    main()
