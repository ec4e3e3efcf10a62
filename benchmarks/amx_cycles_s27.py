"""Session 27 (issue 14): where an AMX product's time goes inside one call, from the kernel's own
time-stamp counter (plan field `cycles`: coopjit._core._gemm_cycles), so that the ratios do not
depend on the vCPU's rate in that round. For each case and plan variant: R calls, each one's
counters read and reset; medians over the calls of each phase's share of the call's ticks times
the threads (pack A, pack B, the packing barrier, the first row panel of each block for each
column panel = B's K-tile slice cold, the other row panels, the tiles' epilogue / partial-sum
stores, the rest of the kernel, outside the kernels = the pool, the launch gap, imbalance),
and the tiles' own rates against coopjit's measured AMX peak of one core.

    python3 benchmarks/amx_cycles_s27.py compile            # every kernel into the disk cache (threads in parallel)
    taskset -c 3 python3 benchmarks/amx_cycles_s27.py one  # one thread
    python3 benchmarks/amx_cycles_s27.py all               # every core
    (SIZES=2048,4096 DTYPES=bf16,int8 VARIANTS=default,prepB,... CALLS=5 PLAN='{...}' in the environment)

Recorded: benchmarks/recorded/issue14-emr16-amx-session27.txt."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np

import coopjit
from coopjit import _core
from _rounds import compile_squares, env_list, operands

VARIANTS = {
    "default": {},
    "prepB": {"prepacked_b": 1},  # B packed once beforehand (coopjit.prepack)
    "pf6": {"amx_prefetch": 6},   # the next column panel's B slice (and next block's A) into L2 ahead
    "nc8": {"nc_tiles": 8},       # blocks of 8 column panels, each row panel across a block
    "kt1024": {"kt": 1024},
    "cpf": {"c_prefetch": 1},     # the lines each tile will write prefetched for writing during its K loop
}
FIELDS = ["kernel", "calls", "pack_a", "pack_b", "barrier", "tiles_first", "tiles_first_n", "tiles_other",
          "tiles_other_n", "tile_stores"]


def tsc_hz():
    t0, c0 = time.perf_counter(), _core._tsc()
    time.sleep(0.2)
    return (_core._tsc() - c0) / (time.perf_counter() - t0)


def plan_of(variant, threads, cycles=True):
    p = {k: v for k, v in VARIANTS[variant].items() if k != "prepacked_b"}
    p.update(json.loads(os.environ.get("PLAN", "{}")))  # (PLAN='{"amx": "emulated"}': a check where there are no tiles)
    if threads == 1:
        p["threads"] = 1
    if cycles:
        p["cycles"] = 1
    return p


def compile_all():
    """Every plan the other modes run (with and without the counters, one thread and all), compiled
    in parallel threads (coopjit.compile_gemm: the kernels go to the disk cache, which a later
    process reads instead of running LLVM)."""
    jobs = []
    for dt in env_list("DTYPES", "bf16,int8"):
        for s in (int(x) for x in env_list("SIZES", "2048,4096")):
            for v in env_list("VARIANTS", ",".join(VARIANTS)):
                for threads in (1, 0):
                    for cyc in (True, False):
                        plan = plan_of(v, threads, cyc)
                        if VARIANTS[v].get("prepacked_b"):
                            plan["prepacked_b"] = 1
                        jobs.append((dt, s, plan))

    compile_squares(jobs)


def breakdown(d, threads_used, hz):
    """One call's counters -> shares of the call's ticks x threads, and per-tile ticks."""
    slots = np.array(d["slots"], dtype=np.int64)[:, :len(FIELDS)] if d["slots"] else np.zeros((1, len(FIELDS)), np.int64)
    tot = dict(zip(FIELDS, slots.sum(axis=0).tolist()))
    cap = d["call_ticks"] * threads_used
    parts = ["pack_a", "pack_b", "barrier", "tiles_first", "tiles_other", "tile_stores"]
    out = {p: tot[p] / cap for p in parts}
    out["kernel_rest"] = (tot["kernel"] - sum(tot[p] for p in parts)) / cap
    out["outside"] = (cap - tot["kernel"]) / cap
    out["call_ms"] = d["call_ticks"] / hz * 1e3
    out["first_tile_us"] = tot["tiles_first"] / max(1, tot["tiles_first_n"]) / hz * 1e6
    out["other_tile_us"] = tot["tiles_other"] / max(1, tot["tiles_other_n"]) / hz * 1e6
    out["n_first"], out["n_other"] = tot["tiles_first_n"], tot["tiles_other_n"]
    out["busiest_kernel_ms"] = float(slots[:, 0].max()) / hz * 1e3
    return out


def run(threads_mode):
    hz = tsc_hz()
    unit = {"bf16": "amx_bf16", "int8": "amx_int8"}
    peaks = {dt: _core.measure_peak(u, 0.1) for dt, u in unit.items()}
    nthreads = 1 if threads_mode == "one" else coopjit.get_num_threads()
    print(f"TSC {hz / 1e9:.3f} GHz; threads {nthreads}; peaks " +
          json.dumps({dt: (round(p.get("single") or 0), round(p.get("all") or 0)) for dt, p in peaks.items()}), flush=True)
    calls = int(os.environ.get("CALLS", "5"))
    rng = np.random.default_rng(0)
    for dt in env_list("DTYPES", "bf16,int8"):
        peak1 = peaks[dt].get("single") or float("nan")
        for s in (int(x) for x in env_list("SIZES", "2048,4096")):
            a, b = operands(rng, dt, s, s, s)
            ref = None
            if s <= 2048:
                ref = a[:64].astype(np.float64) @ b.astype(np.float64)
            for v in env_list("VARIANTS", ",".join(VARIANTS)):
                plan = plan_of(v, 1 if threads_mode == "one" else 0)
                bb = coopjit.prepack(b, plan=plan) if VARIANTS[v].get("prepacked_b") else b
                c = coopjit.matmul(a, bb, plan=plan)
                err = float("nan") if ref is None else float(np.max(np.abs(c[:64].astype(np.float64) - ref)) / np.max(np.abs(ref)))
                cfg = coopjit.compile_gemm(s, s, s, a.dtype, plan=plan).config
                time.sleep(0.2)
                rows = []
                plain = []
                for i in range(calls):
                    _core._gemm_cycles(True)
                    coopjit.matmul(a, bb, plan=plan)
                    rows.append(breakdown(_core._gemm_cycles(True), nthreads, hz))
                    if v == "default":  # the same plan without the counters, alternating
                        p0 = plan_of(v, 1 if threads_mode == "one" else 0, cycles=False)
                        t = time.perf_counter()
                        coopjit.matmul(a, bb, plan=p0)
                        plain.append(time.perf_counter() - t)
                med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
                fl = 2.0 * s * s * s
                rate = fl / (med["call_ms"] * 1e-3) / 1e9
                # the tiles' own rate: flops of one tile (32 x 32 x kt) over its ticks, against one core's peak
                kt = min(int(cfg["kt"]), s)
                tile_fl = 2.0 * 32 * 32 * kt
                r_first = tile_fl / (med["first_tile_us"] * 1e-6) / 1e9 if med["n_first"] else float("nan")
                r_other = tile_fl / (med["other_tile_us"] * 1e-6) / 1e9
                print(f"{dt:4} {s}^3 {threads_mode} {v:8} call {med['call_ms']:8.2f} ms [{min(r['call_ms'] for r in rows):.2f}-"
                      f"{max(r['call_ms'] for r in rows):.2f}] {rate:7.0f} G/s"
                      + (f" (plain {np.median(plain) * 1e3:.2f} ms)" if plain else "")
                      + f" err {err:.1e} | packA {100 * med['pack_a']:4.1f}% packB {100 * med['pack_b']:4.1f}% barrier "
                      f"{100 * med['barrier']:4.1f}% first {100 * med['tiles_first']:4.1f}% other {100 * med['tiles_other']:4.1f}% "
                      f"stores {100 * med['tile_stores']:4.1f}% rest {100 * med['kernel_rest']:4.1f}% outside {100 * med['outside']:4.1f}%"
                      f" | tile us first {med['first_tile_us']:.2f} other {med['other_tile_us']:.2f} ({int(med['n_first'])}/"
                      f"{int(med['n_other'])}); tile rate first {100 * r_first / peak1:4.1f}% other {100 * r_other / peak1:4.1f}% "
                      f"of one core; busiest worker {med['busiest_kernel_ms']:.2f} ms"
                      f" [kt {cfg['kt']} mc {cfg['mc_tiles']} nc {cfg['nc_tiles']} shares {cfg['shares']} grid_m {cfg['grid_m']}]",
                      flush=True)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "one"
    if mode == "compile":
        compile_all()
    else:
        run(mode)
