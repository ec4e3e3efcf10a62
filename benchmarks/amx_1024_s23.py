"""Issue 14, session 23: what costs time in 16-thread AMX products at 1024^3 and 2048^3 (bf16; int8
at 1024^3), plan variant by variant, on the machine at hand.

    python benchmarks/amx_1024_s23.py sweep [--confirm] [SIZE:DT ...]  # plan= variants against torch
    python benchmarks/amx_1024_s23.py ab SITE_A SITE_B [ROUNDS] # two builds' default plans
        (AB_KEYS=SIZE:DT,... picks the cases; this process imports coopjit too: run it with one
        of the builds on PYTHONPATH)

sweep: for each case, coopjit's automatic plan, plan= variants (shares, K tile, grid, direct_a,
nc_tiles, amx_feed / amx_prefetch / amx_store, mc_tiles, fewer workers), the product with B packed
beforehand (coopjit.prepack: what the packing launch costs) and torch (torch.matmul / _int_mm at the
same thread count). Each variant's product is checked against float64 first (the first 256 rows; a
variant above the error bound stops the script); then every case is timed in alternating rounds,
a block of calls each after a pause (benchmarks/_rounds.measure: medians of the rounds); then 12
traced calls of each (the pool's launch trace: packing launch, compute launch, shares' busy time
fastest / median / slowest, tail after the median CPU's last share), medians.

ab: the two builds' automatic plans and torch in alternating rounds, one subprocess a build and
round (each case a block of calls after a pause; each build its own kernel cache), medians over the
rounds of the blocks' means and of the median call of each block; "apart" where every round of one
build beat every round of the other (session 24: main against the mc_tiles 4 rule,
benchmarks/recorded/issue14-emr16-amx-ab-session24.txt).

--emulate (sweep): every plan with amx=2 (emulated tiles, for a check on CPUs without AMX; rates
mean nothing) at 256^3.

Recorded: benchmarks/recorded/issue14-emr16-amx-1024-session23.txt."""
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
from coopjit import _core  # noqa: E402
from _rounds import amx_peak, measure, operands, torch_case  # noqa: E402
from phases_16core import phase_row  # noqa: E402

BF16_1024 = [{"shares": 1}, {"shares": 2}, {"shares": 8}, {"kt": 512}, {"kt": 256}, {"direct_a": 0}, {"grid_m": 2},
             {"grid_m": 4}, {"nc_tiles": 1}, {"nc_tiles": 2}, {"amx_feed": 1}, {"amx_feed": 2}, {"amx_prefetch": 0},
             {"amx_prefetch": 2}, {"mc_tiles": 4}, {"mc_tiles": 16}, {"threads": 8}, {"threads": 12}, {"amx_store": 0},
             {"shares": 8, "kt": 512}, {"shares": 1, "kt": 512}]
BF16_2048 = [{"shares": 1}, {"shares": 2}, {"shares": 8}, {"kt": 1024}, {"kt": 512}, {"direct_a": 0}, {"grid_m": 2},
             {"nc_tiles": 2}, {"amx_feed": 1}, {"mc_tiles": 4}, {"mc_tiles": 16}, {"amx_prefetch": 0},
             {"shares": 8, "kt": 1024}]
INT8_1024 = [{"shares": 1}, {"shares": 2}, {"shares": 8}, {"kt": 512}, {"direct_a": 0}, {"grid_m": 2}, {"amx_feed": 1}]
SWEEP = {"1024:bf16": BF16_1024, "2048:bf16": BF16_2048, "1024:int8": INT8_1024}
# --confirm: run 1's candidates again (the A block's panels, A's prefetch, shares), on the branch's build
CONFIRM = {"2048:bf16": [{"mc_tiles": 8}, {"mc_tiles": 4}, {"amx_prefetch": 0}, {"mc_tiles": 4, "amx_prefetch": 0},
                         {"shares": 8}, {"mc_tiles": 4, "shares": 8}],
           "4096:bf16": [{"mc_tiles": 8}, {"mc_tiles": 4}, {"amx_prefetch": 0}],
           "4096:int8": [{"mc_tiles": 8}, {"mc_tiles": 4}]}
BOUND = {"bf16": 2e-2, "int8": 0.0}  # max |c - ref| / max |ref| (bf16 C rounds: 2^-8 relative, sums of 1024+)


def out_of(a, b):
    return np.empty((a.shape[0], b.shape[1]), np.int32 if a.dtype == np.int8 else a.dtype)


def sweep(keys, emulate, table=SWEEP):
    import torch
    threads = coopjit.get_num_threads()
    torch.set_num_threads(threads)
    pk, emu = amx_peak()
    print(f"coopjit {coopjit.__version__}, {threads} workers, {coopjit.cpu_info()['name']}; torch {torch.__version__} "
          f"{torch.get_num_threads()} threads", flush=True)
    rng = np.random.default_rng(0)
    for key in keys:
        s, dt = key.split(":")
        s = int(s)
        variants = table.get(key, BF16_1024 if dt == "bf16" else INT8_1024)
        if emulate:
            s = 256
        a, b = operands(rng, dt, s, s, s)
        out = out_of(a, b)
        ref = a[:256].astype(np.float64) @ b.astype(np.float64)
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["all"]
        extra = {"amx": 2} if emulate else {}
        cases, plans = [], {}
        for v in [{}] + variants:
            p = dict(v, **extra)
            name = json.dumps(v) if v else "default"
            try:
                cfg = coopjit.compile_gemm(s, s, s, a.dtype, plan=p or None).config
            except (ValueError, TypeError) as e:
                print(f"{dt} {s}^3 {name}: refused ({e})", flush=True)
                continue
            plans[name] = {k: cfg[k] for k in ("threads", "shares", "grid_m", "kt", "mc_tiles", "nc_tiles", "direct_a",
                                               "amx_feed", "amx_prefetch", "amx_store")}
            cases.append((name, lambda p=p: coopjit.matmul(a, b, out=out, plan=p or None)))
        pb = coopjit.prepack(b, extra or None)
        cases.append(("B prepacked", lambda: coopjit.matmul(a, pb, out=out, plan=extra or None)))
        cases.append(("torch", torch_case(a, b, dt)))
        print(f"\n{dt} {s}^3, {threads} threads; default plan {json.dumps(plans['default'])}", flush=True)
        for name, f in cases:  # checked against float64 before any timing
            c = f()
            c = c.float().numpy() if hasattr(c, "float") else c
            err = float(np.max(np.abs(np.asarray(c[:256], np.float64) - ref))) / float(np.max(np.abs(ref)))
            if not err <= BOUND[dt] * (1 if name != "torch" else 2):
                raise SystemExit(f"{dt} {s}^3 {name}: error {err:.2e} above {BOUND[dt]:.0e}")
        times = measure(f"{dt} {s}^3", cases, ref, 2.0 * s ** 3, peak, seconds=0.15, rounds=5, pause=0.3, width=30)
        # The launch trace of each (medians of 12 calls): where the time goes.
        _core._set_launch_trace(True)
        for name, f in cases:
            if name == "torch":
                continue
            time.sleep(0.3)
            f()
            rows = []
            for _ in range(12):
                _core._launch_traces()
                t0 = time.perf_counter_ns()
                f()
                w = time.perf_counter_ns() - t0
                rows.append(phase_row(w, _core._launch_traces(), 2.0 * s ** 3, peak, threads, a.nbytes + b.nbytes))
            med = {k: float(np.median([r[k] for r in rows if k in r])) for k in rows[0]}
            line = f"  trace {name:<30} call {med['call']:7.1f} us"
            if "compute" in med:
                line += (f"; compute {med['compute']:7.1f} us ({med['compute_rate']:.1f}% of peak), shares "
                         f"{med['share_min']:.1f} / {med['share_med']:.1f} / {med['share_max']:.1f} us (K loop "
                         f"{med['kloop_best']:.0f}% / {med['kloop_med']:.0f}% best / med), tail {med['tail']:.1f}, "
                         f"busiest / med thread {med['thread_busy_max_over_med']:.2f}")
            if "pack" in med:
                line += (f"; pack {med['pack']:.1f} us (busy {med['pack_busy_med']:.1f} / {med['pack_busy_max']:.1f}, "
                         f"barrier wait {med['barrier_wait_med']:.1f}), gap {med['gap']:.1f}, before {med['before']:.1f}")
            print(line + f"  plan {json.dumps(plans.get(name, {}))}", flush=True)
        _core._set_launch_trace(False)
        best = min((float(np.median(t)), n) for n, t in times.items() if n not in ("torch", "B prepacked"))
        print(f"{dt} {s}^3 best plan: {best[1]} {best[0] * 1e3:.3f} ms; default {np.median(times['default']) * 1e3:.3f}; "
              f"torch {np.median(times['torch']) * 1e3:.3f}", flush=True)


CHILD = r"""
import json, sys, time
import numpy as np, torch, coopjit
sys.path.insert(0, sys.argv[2])
from _rounds import operands, torch_case
torch.set_num_threads(coopjit.get_num_threads())
def block(f, seconds=0.2):
    # (the block's mean a call, and the median of its calls each timed: a host stall inflates the
    # mean of a block; the median of its calls leaves it out)
    f(); t = time.perf_counter(); f(); one = time.perf_counter() - t
    inner = max(3, int(seconds / max(one, 1e-7))); ts = []; t0 = time.perf_counter()
    for _ in range(inner):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return (time.perf_counter() - t0) / inner, float(np.median(ts))
rng = np.random.default_rng(0); out = {}
for key in json.loads(sys.argv[1]):
    s, dt = key.split(":"); s = int(s)
    a, b = operands(rng, dt, s, s, s)
    c = np.empty((s, s), np.int32 if dt == "int8" else a.dtype)
    ref = a[:256].astype(np.float64) @ b.astype(np.float64)
    coopjit.matmul(a, b, out=c)
    err = float(np.max(np.abs(c[:256].astype(np.float64) - ref))) / float(np.max(np.abs(ref)))
    assert err <= (2e-2 if dt == "bf16" else 0.0), (key, err)
    tf = torch_case(a, b, dt)
    time.sleep(0.3); t_c, m_c = block(lambda: coopjit.matmul(a, b, out=c))
    time.sleep(0.3); t_t, m_t = block(tf)
    out[key] = {"coopjit": t_c, "torch": t_t, "coopjit_call_med": m_c, "torch_call_med": m_t, "err": err,
                "plan": {k: coopjit.compile_gemm(s, s, s, a.dtype).config[k] for k in ("shares", "kt", "grid_m", "direct_a", "nc_tiles", "mc_tiles")}}
print("RESULT " + json.dumps(out))
"""


def ab(site_a, site_b, rounds):
    keys = os.environ.get("AB_KEYS", "1024:bf16,2048:bf16,4096:bf16,1024:int8,2048:int8,4096:int8").split(",")
    here = os.path.dirname(os.path.abspath(__file__))
    res = {site: [] for site in (site_a, site_b)}
    t0 = time.time()
    for r in range(rounds):
        for site in (site_a, site_b) if r % 2 == 0 else (site_b, site_a):
            # (each build its own kernel cache: a kernel on disk is found by its plan, and the
            # first round of each build compiles its own)
            env = dict(os.environ, PYTHONPATH=site, COOPJIT_CACHE_DIR=f"/tmp/coopjit-ab-cache-{os.path.basename(site)}")
            p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(keys), here], env=env, capture_output=True,
                               text=True, timeout=120)
            line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
            if p.returncode or not line:
                raise SystemExit(f"{site}: {p.stderr[-2000:]}")
            res[site].append(json.loads(line[0][7:]))
            print(f"round {r + 1} {os.path.basename(site)} done at {time.time() - t0:.0f} s", flush=True)
            time.sleep(0.5)
    na, nb = os.path.basename(site_a), os.path.basename(site_b)
    print(f"{rounds} rounds, alternating (round 1 {na} first); ms, medians over rounds (each round's value in "
          f"brackets): 'block' = a block's mean a call, 'call' = the median of a block's calls", flush=True)
    for key in keys:
        s = int(key.split(":")[0])
        row = {}
        for site in (site_a, site_b):
            tc = [x[key]["coopjit"] for x in res[site]]
            mc = [x[key]["coopjit_call_med"] for x in res[site]]
            tt = [x[key]["torch"] for x in res[site]]
            row[site] = (float(np.median(tc)), float(np.median(tt)), tc, float(np.median(mc)), mc)
            print(f"{key:<10} {os.path.basename(site):<14} coopjit {row[site][0] * 1e3:7.3f} ms "
                  f"({2 * s ** 3 / row[site][0] / 1e9:6.0f} G/s) torch {row[site][1] * 1e3:7.3f} ms  torch / coopjit "
                  f"{row[site][1] / row[site][0]:.2f}  block [{' '.join(f'{x * 1e3:.3f}' for x in tc)}]  call "
                  f"{row[site][3] * 1e3:.3f} [{' '.join(f'{x * 1e3:.3f}' for x in mc)}]  torch "
                  f"[{' '.join(f'{x * 1e3:.3f}' for x in tt)}]  plan {json.dumps(res[site][0][key]['plan'])}",
                  flush=True)
        (ma, _, ra, ca, rca), (mb, _, rb, cb, rcb) = row[site_a], row[site_b]
        # clear: every round of one build faster than every round of the other (the spreads apart)
        sep = "apart" if max(ra) < min(rb) or max(rb) < min(ra) else "overlap"
        sepc = "apart" if max(rca) < min(rcb) or max(rcb) < min(rca) else "overlap"
        print(f"{key:<10} {na} time / {nb} time: block {ma / mb:.3f} (rounds' spreads {sep}), call {ca / cb:.3f} "
              f"(spreads {sepc})", flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "ab":
        ab(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 5)
    elif len(sys.argv) > 1 and sys.argv[1] == "sweep":
        table = CONFIRM if "--confirm" in sys.argv else SWEEP
        keys = [x for x in sys.argv[2:] if ":" in x] or list(table)
        sweep(keys, "--emulate" in sys.argv, table)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
