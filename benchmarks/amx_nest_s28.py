"""Session 28 (issue 14): AMX blocks of C through every K tile (plan k_inner with nc_tiles: the
block's partial sums stay in L2, each column panel's short K-tile slice of B is read from L1 by
the block's row panels), against the default nest and torch, with the fenced in-call breakdown
(plan cycles; benchmarks/amx_cycles_s27.py's fields).

    python3 benchmarks/amx_nest_s28.py compile               # every plan below into the disk cache
    taskset -c 3 python3 benchmarks/amx_nest_s28.py cycles one   # breakdown, one thread
    python3 benchmarks/amx_nest_s28.py cycles all                # breakdown, every core
    python3 benchmarks/amx_nest_s28.py ab all                    # variants and torch, alternating rounds
    (SIZES=..., DTYPES=bf16,int8, VARIANTS=default,kin512,..., CALLS=3, ROUNDS=3, PLAN='{...}')

A variant's K tile is given in bytes of a tile row (kt x the element's bytes): the same bytes of
B's slice for bf16 and int8. Recorded: benchmarks/recorded/issue14-emr16-amx-session28.txt."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np

import coopjit
from coopjit import _core
from _rounds import compile_squares, env_list, operands, timed, torch_case
from amx_cycles_s27 import breakdown, tsc_hz

# name: (plan fields, K tile bytes or None)
VARIANTS = {
    "default": ({}, None),
    "kin512": ({"k_inner": 1, "nc_tiles": 8, "mc_tiles": 8}, 512),     # B slice 16 KiB (L1), C block 256 KiB
    "kin1024": ({"k_inner": 1, "nc_tiles": 8, "mc_tiles": 8}, 1024),   # B slice 32 KiB
    "kin512n16": ({"k_inner": 1, "nc_tiles": 16, "mc_tiles": 8}, 512), # C block 512 KiB
    "kin512m16": ({"k_inner": 1, "nc_tiles": 8, "mc_tiles": 16}, 512), # A slice block 256 KiB, C 512 KiB
    "kt512": ({}, 512),                                                # the default order, short K tiles
}


def plan_of(variant, dt, one, cycles):
    fields, kt_bytes = VARIANTS[variant]
    p = dict(fields)
    if kt_bytes:
        p["kt"] = kt_bytes // (2 if dt == "bf16" else 1)
    p.update(json.loads(os.environ.get("PLAN", "{}")))
    if one:
        p["threads"] = 1
    if cycles:
        p["cycles"] = 1
    return p


def compile_all():
    jobs = []
    for dt in env_list("DTYPES", "bf16,int8"):
        for s in (int(x) for x in env_list("SIZES", "2048,4096,8192")):
            for v in env_list("VARIANTS", ",".join(VARIANTS)):
                for one in (True, False):
                    for cyc in (True, False):
                        jobs.append((dt, s, plan_of(v, dt, one, cyc)))

    compile_squares(jobs)


def cycles(mode):
    one = mode == "one"
    hz = tsc_hz()
    peaks = {dt: _core.measure_peak(u, 0.1) for dt, u in (("bf16", "amx_bf16"), ("int8", "amx_int8"))}
    nthreads = 1 if one else coopjit.get_num_threads()
    print(f"TSC {hz / 1e9:.3f} GHz; threads {nthreads}; peaks (one core, all) " +
          json.dumps({dt: (round(p.get("single") or 0), round(p.get("all") or 0)) for dt, p in peaks.items()}), flush=True)
    calls = int(os.environ.get("CALLS", "3"))
    rng = np.random.default_rng(0)
    for dt in env_list("DTYPES", "bf16,int8"):
        peak1 = peaks[dt].get("single") or float("nan")
        peakall = (peaks[dt].get("single") if one else peaks[dt].get("all")) or float("nan")
        for s in (int(x) for x in env_list("SIZES", "2048,4096")):
            a, b = operands(rng, dt, s, s, s)
            ref = a[:64].astype(np.float64) @ b.astype(np.float64)
            for v in env_list("VARIANTS", ",".join(VARIANTS)):
                plan = plan_of(v, dt, one, True)
                c = coopjit.matmul(a, b, plan=plan)
                err = float(np.max(np.abs(c[:64].astype(np.float64) - ref)) / np.max(np.abs(ref)))
                cfg = coopjit.compile_gemm(s, s, s, a.dtype, plan=plan).config
                time.sleep(0.2)
                rows, plain = [], []
                for _ in range(calls):
                    _core._gemm_cycles(True)
                    coopjit.matmul(a, b, plan=plan)
                    rows.append(breakdown(_core._gemm_cycles(True), nthreads, hz))
                    p0 = plan_of(v, dt, one, False)  # the same plan without the counters, alternating
                    t = time.perf_counter()
                    coopjit.matmul(a, b, plan=p0)
                    plain.append(time.perf_counter() - t)
                med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
                fl = 2.0 * s ** 3
                tp = float(np.median(plain))
                kt = min(int(cfg["kt"]), s)
                steps = kt * (2 if dt == "bf16" else 1) // 64  # K steps (64 bytes of K) a tile
                tile_fl = 2.0 * 32 * 32 * kt
                r_other = tile_fl / (med["other_tile_us"] * 1e-6) / 1e9
                r_first = tile_fl / (med["first_tile_us"] * 1e-6) / 1e9 if med["n_first"] else float("nan")
                print(f"{dt:4} {s}^3 {mode} {v:9} plain {tp * 1e3:8.2f} ms {fl / tp / 1e9:6.0f} G/s ({100 * fl / tp / 1e9 / peakall:4.1f}% of peak)"
                      f" counted {med['call_ms']:8.2f} ms err {err:.1e} | packA {100 * med['pack_a']:4.1f}% packB {100 * med['pack_b']:4.1f}%"
                      f" barrier {100 * med['barrier']:4.1f}% first {100 * med['tiles_first']:4.1f}% other {100 * med['tiles_other']:4.1f}%"
                      f" stores {100 * med['tile_stores']:4.1f}% rest {100 * med['kernel_rest']:4.1f}% outside {100 * med['outside']:4.1f}%"
                      f" | ns/step first {med['first_tile_us'] * 1e3 / steps:5.1f} other {med['other_tile_us'] * 1e3 / steps:5.1f}"
                      f" ({int(med['n_first'])}/{int(med['n_other'])}); tile rate first {100 * r_first / peak1:4.1f}%"
                      f" other {100 * r_other / peak1:4.1f}% of one core"
                      f" [kt {cfg['kt']} mc {cfg['mc_tiles']} nc {cfg['nc_tiles']} k_inner {int(cfg['k_inner'])} shares {cfg['shares']}]",
                      flush=True)


def ab(mode):
    import torch
    one = mode == "one"
    torch.set_num_threads(1 if one else coopjit.get_num_threads())
    rounds = int(os.environ.get("ROUNDS", "3"))
    peaks = {dt: _core.measure_peak(u, 0.1) for dt, u in (("bf16", "amx_bf16"), ("int8", "amx_int8"))}
    print(f"threads {1 if one else coopjit.get_num_threads()}, rounds {rounds}; peaks (one core, all) " +
          json.dumps({dt: (round(p.get("single") or 0), round(p.get("all") or 0)) for dt, p in peaks.items()}), flush=True)
    rng = np.random.default_rng(0)
    variants = env_list("VARIANTS", "default,kin512,kin1024")
    for dt in env_list("DTYPES", "bf16,int8"):
        peak = (peaks[dt].get("single") if one else peaks[dt].get("all")) or float("nan")
        for s in (int(x) for x in env_list("SIZES", "1024,4096,8192")):
            a, b = operands(rng, dt, s, s, s)
            fns = {v: (lambda p=plan_of(v, dt, one, False): coopjit.matmul(a, b, plan=p)) for v in variants}
            fns["torch"] = torch_case(a, b, dt)
            n = min(s, 128)
            ref = a[:n].astype(np.float64) @ b.astype(np.float64)
            c0 = fns[variants[0]]()
            same = {v: bool(np.array_equal(np.asarray(fns[v]()).view(np.uint8), np.asarray(c0).view(np.uint8)))
                    for v in variants[1:]}
            errs = {v: float(np.max(np.abs(np.asarray(fns[v]()[:n], np.float64) - ref)) / np.max(np.abs(ref))) for v in variants}
            names = list(fns)
            per = {x: [] for x in names}
            seconds = 0.25 if s <= 4096 else 0.6
            for r in range(rounds):
                for name in (names if r % 2 == 0 else names[::-1]):
                    time.sleep(0.2)
                    per[name].append(timed(fns[name], blocks=3, seconds=seconds))
            fl = 2.0 * s ** 3
            t0, tt = np.median(per[variants[0]]), np.median(per["torch"])
            print(f"{dt:4} {s}^3 {mode}: same bits as {variants[0]}: {same}", flush=True)
            for name in names:
                v = per[name]
                t = float(np.median(v))
                print(f"  {name:10} {t * 1e3:9.3f} ms [{min(v) * 1e3:.3f}-{max(v) * 1e3:.3f}] {fl / t / 1e9:7.0f} G/s "
                      f"{100 * fl / t / 1e9 / peak:5.1f}% of peak; {variants[0]}/this {t0 / t:5.3f}x torch/this {tt / t:5.2f}x"
                      + (f" err {errs[name]:.1e}" if name in errs else ""), flush=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "cycles"
    if what == "compile":
        compile_all()
    elif what == "cycles":
        cycles(sys.argv[2] if len(sys.argv) > 2 else "one")
    else:
        ab(sys.argv[2] if len(sys.argv) > 2 else "all")
