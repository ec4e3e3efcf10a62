"""What limits coopjit's products on many cores (issue 14): the same products on one thread and on
every core, where a 16-worker call's time goes (the pool's launch trace), the pool's threads pinned
one a CPU or left to the scheduler, and plan variants against torch on the same cores.

    python benchmarks/amx_threads.py trace     # 1 thread against all cores, per-worker kernel time
    python benchmarks/amx_threads.py pin       # the pool's threads pinned (one CPU each) or not
    python benchmarks/amx_threads.py plans     # plan variants and torch, medians of alternating rounds
    python benchmarks/amx_threads.py shares    # the blocked nest in shares (plan shares 1 / 2 / 4 / 8) and torch
    python benchmarks/amx_threads.py confirm   # the default against shares 1 and torch, 3 rounds
    python benchmarks/amx_threads.py small     # the same for calls of 0.02-2 ms
    python benchmarks/amx_threads.py fair      # shares 1 / 2 / 4, all through plan= (small: plan= costs ~20 us)
    python benchmarks/amx_threads.py prefetch  # amx_prefetch 3 / 4 / 5 (prefetcht1 of the panels 8 / 16 K steps ahead)
    python benchmarks/amx_threads.py int8k     # int8 with K past 4096: K tiles of 2048 (with k_inner) against the default
    python benchmarks/amx_threads.py kinner    # plan k_inner (each row block through every K tile) with K tiles
                                               # and blocks of several sizes, against the default through plan=

Every product is checked against float64 (exact for int8) before it is timed. Timing: blocks of
calls after a pause (plan_sweep.timed), the median of the rounds.

Recorded: benchmarks/recorded/issue14-emr16-session12.txt, issue14-emr16-session13.txt (kinner)."""
import json
import os
import sys
import time

import numpy as np

import coopjit
from _rounds import operands, timed

THREADS = os.cpu_count()
SMOKE = int(os.environ.get("AMX_THREADS_SMOKE", "1"))  # divides the sizes (a quick check of the script)


def check(c, a, b, dt, ref=None):
    if ref is None:
        ref = a.astype(np.float64) @ b.astype(np.float64)
    c = np.asarray(c).astype(np.float64)
    err = float(np.max(np.abs(c - ref))) / max(float(np.max(np.abs(ref))), 1e-30)
    limit = 0 if dt == "int8" else (1e-5 if dt == "f32" else 1e-2)
    assert err <= limit, (dt, a.shape, b.shape, err)
    return err


def peak_of(pk, dt, all_cores=True):
    key = {"bf16": "amx_bf16", "int8": "amx_int8", "f32": "f32_fma"}[dt]
    return pk.get(key, {}).get("all" if all_cores else "single") or float("nan")  # (nan: no AMX here)


def trace_cases():
    """One thread against every core, and the 16-worker call's per-worker kernel time (trace)."""
    from coopjit import _core
    rng = np.random.default_rng(0)
    pk = coopjit.peak()
    print("peaks (single, all):", json.dumps({k: (v["single"], v["all"]) for k, v in pk.items()
                                               if isinstance(v, dict) and "single" in v}), flush=True)
    print("case              plan                 1 thread  G/s  %1core | all cores  G/s  %all  x1thr | call  "
          "kernel med/max  start max  join   (us, medians of calls)")
    for dt, s in (("bf16", 1024), ("bf16", 4096), ("int8", 1024), ("int8", 4096), ("f32", 1024), ("f32", 4096)):
        s //= SMOKE
        a, b = operands(rng, dt, s, s, s)
        for plan in ({}, {"kt": 1024} if dt == "bf16" and s == 4096 else None):
            if plan is None:
                continue
            one = {**plan, "threads": 1}
            ref = a.astype(np.float64) @ b.astype(np.float64)
            check(coopjit.matmul(a, b, plan=one), a, b, dt, ref)
            check(coopjit.matmul(a, b, plan=plan or None), a, b, dt, ref)
            time.sleep(0.2)
            t1 = timed(lambda: coopjit.matmul(a, b, plan=one), seconds=0.4, blocks=3)
            time.sleep(0.2)
            tn = timed(lambda: coopjit.matmul(a, b, plan=plan or None), seconds=0.4, blocks=5)
            _core._set_launch_trace(True)
            rows = []
            for _ in range(max(5, min(60, int(0.4 / tn)))):
                t0 = time.perf_counter_ns()
                coopjit.matmul(a, b, plan=plan or None)
                t_call = time.perf_counter_ns() - t0
                tr = _core._launch_trace()
                st, en = np.array(tr["start_ns"], dtype=np.float64), np.array(tr["end_ns"], dtype=np.float64)
                rows.append((t_call, np.median(en - st), (en - st).max(), st.max(), tr["join_ns"]))
            _core._set_launch_trace(False)
            r = np.median(np.array(rows), axis=0) / 1e3
            f = 2 * s ** 3
            r1, rn = f / t1 / 1e9, f / tn / 1e9
            print(f"{dt:5} {s:5}^3  {json.dumps(plan):<18} {t1 * 1e3:8.2f} ms {r1:6.0f} {r1 / peak_of(pk, dt, False) * 100:4.0f}% | "
                  f"{tn * 1e3:8.3f} ms {rn:6.0f} {rn / peak_of(pk, dt) * 100:4.0f}% {t1 / tn:5.1f} | {r[0]:8.0f} {r[1]:8.0f}/{r[2]:6.0f} "
                  f"{r[3]:7.0f} {r[4]:7.0f}", flush=True)


def pool_tids():
    return sorted(int(t) for t in os.listdir("/proc/self/task"))


def pin(tids, on):
    cpus = sorted(os.sched_getaffinity(0)) if not hasattr(pin, "cpus") else pin.cpus
    pin.cpus = cpus
    for i, t in enumerate(tids):
        try:
            os.sched_setaffinity(t, {cpus[i % len(cpus)]} if on else set(cpus))
        except OSError:
            pass


def pin_cases(rounds=3):
    """The pool's threads (this process's threads: no other library loaded) pinned one a CPU, or free."""
    rng = np.random.default_rng(1)
    a0, b0 = operands(rng, "f32", 512, 512, 512)
    coopjit.matmul(a0, b0)  # starts the pool's threads
    tids = pool_tids()
    print(f"{len(tids)} threads in the process")
    cases = []
    for dt, s in (("bf16", 1024), ("bf16", 4096), ("int8", 1024), ("int8", 4096), ("f32", 1024), ("f32", 4096)):
        s //= SMOKE
        a, b = operands(rng, dt, s, s, s)
        check(coopjit.matmul(a, b), a, b, dt)
        cases.append((dt, s, a, b, {"free": [], "pinned": []}))
    for _ in range(rounds):
        for mode in ("free", "pinned"):
            pin(tids, mode == "pinned")
            for dt, s, a, b, res in cases:
                time.sleep(0.15)
                res[mode].append(timed(lambda: coopjit.matmul(a, b), seconds=0.3, blocks=5))
    pin(tids, False)
    for dt, s, a, b, res in cases:
        f, p = np.median(res["free"]), np.median(res["pinned"])
        print(f"{dt:5} {s:5}^3  free {f * 1e3:8.3f} ms  pinned {p * 1e3:8.3f} ms  free / pinned {f / p:5.2f}", flush=True)


PLANS = [
    ("bf16", 1024, [{"grid_m": 2}, {"grid_m": 4}, {"direct_a": 0}, {"kt": 512}, {"threads": 8}, "prepacked"]),
    ("bf16", 4096, [{"kt": 1024}, {"kt": 1024, "mc_tiles": 16}, {"grid_m": 2}, {"grid_m": 4}, {"mc_tiles": 4},
                    {"threads": 8}, "prepacked"]),
    ("int8", 1024, [{"grid_m": 1}, {"grid_m": 2}, {"grid_m": 4}, {"direct_a": 0}, {"threads": 8}, "prepacked"]),
    ("int8", 4096, [{"kt": 2048}, {"kt": 1024}, {"grid_m": 2}, {"grid_m": 4}, {"direct_a": 0}, {"threads": 8},
                    "prepacked"]),
    ("f32", 1024, [{"grid_m": 1}, {"grid_m": 2}, {"grid_m": 8}, {"grid_m": 16}, {"kt": 256}, {"mc_tiles": 16},
                   {"threads": 8}, "prepacked"]),
    ("f32", 4096, [{"kt": 512}, {"grid_m": 2}, {"mc_tiles": 16}, "prepacked"]),
]


SHARES = [(dt, s, [{"shares": 1}, {"shares": 2}, {"shares": 8}]) for dt, s in
          (("bf16", 1024), ("bf16", 4096), ("bf16", 8192), ("int8", 1024), ("int8", 4096), ("int8", 8192), ("f32", 4096))] + [
    ("f32", 1024, [{"shares": 1}, {"shares": 2}, {"shares": 8}, {"grid_m": 1}, {"grid_m": 1, "shares": 1}])]


# plan k_inner (session 13): "{shares: 4}" is the default plan on 16 cores, passed through plan= so that
# every row pays the same Python cost; the others change the nest's loop order, K tile and block.
_KI = {"k_inner": 1}
KINNER = [
    ("bf16", 1024, [{**_KI, "kt": 512}, {**_KI, "kt": 256}, {**_KI, "kt": 512, "mc_tiles": 16}]),
    ("bf16", 4096, [_KI, {**_KI, "kt": 1024}, {**_KI, "kt": 512}, {**_KI, "kt": 1024, "mc_tiles": 16},
                    {**_KI, "kt": 512, "mc_tiles": 16}, {"kt": 1024}]),
    ("bf16", 8192, [_KI, {**_KI, "kt": 1024}, {**_KI, "kt": 512}, {**_KI, "kt": 1024, "mc_tiles": 16},
                    {**_KI, "kt": 512, "mc_tiles": 16}]),
    ("int8", 1024, [{**_KI, "kt": 512}, {**_KI, "kt": 256}]),
    ("int8", 4096, [{**_KI, "kt": 2048}, {**_KI, "kt": 1024}, {**_KI, "kt": 1024, "mc_tiles": 16}]),
    ("int8", 8192, [_KI, {**_KI, "kt": 2048}, {**_KI, "kt": 1024}, {**_KI, "kt": 1024, "mc_tiles": 16}]),
    ("f32", 1024, [{**_KI, "kt": 256, "mc_tiles": 16}, {**_KI, "kt": 256, "mc_tiles": 32}]),
    ("f32", 4096, [_KI, {**_KI, "kt": 256, "mc_tiles": 32}, {**_KI, "kt": 512, "mc_tiles": 32}]),
]

# amx_prefetch 3 / 4 / 5 (session 13): prefetcht1 of A's and B's lines 8 / 16 / 8 K steps ahead (5
# without the L1 prefetch of A), against the default (amx_prefetch 1) through plan=.
_P = [{"amx_prefetch": 3}, {"amx_prefetch": 4}, {"amx_prefetch": 5}]
PREFETCH = [
    ("bf16", 1024, _P),
    ("bf16", 4096, _P + [{"amx_prefetch": 3, "k_inner": 1, "kt": 512}]),
    ("bf16", 8192, _P),
    ("int8", 1024, _P),
    ("int8", 4096, _P),
    ("int8", 8192, _P + [{"k_inner": 1, "kt": 2048}, {"amx_prefetch": 3, "k_inner": 1, "kt": 2048}]),
]
PREFETCH_ONE = [("bf16", 2048, [{"threads": 1, "amx_prefetch": 3}, {"threads": 1, "amx_prefetch": 5}])]

# int8 tiles with K past one K tile (session 13): K tiles of 2048 with k_inner, and K tiles of 2048
# alone, against the default (K tiles of 4096, the old order). (Runs 3-4 of session 13 measured a
# branch whose default was K tiles of 2048 with k_inner, against {"k_inner": 0, "kt": 4096}.)
_OLD8 = [{"k_inner": 1, "kt": 2048}, {"kt": 2048}]
INT8K = [("int8", 8192, _OLD8), ("int8", (4096, 4096, 8192), _OLD8), ("int8", (2048, 2048, 8192), _OLD8),
         ("int8", (4096, 4096, 16384), _OLD8), ("int8", (256, 256, 8192), _OLD8),
         ("bf16", 8192, [{"k_inner": 1, "kt": 1024}])]


def plan_cases(rounds=2, only=None, plans=PLANS, base=None):
    import torch
    torch.set_num_threads(THREADS)
    pk = coopjit.peak()
    rng = np.random.default_rng(2)
    print(f"torch {torch.__version__}, {THREADS} threads")
    for dt, s, variants in plans:
        if only and f"{dt}{s}" not in only:
            continue
        m, n, k = (s, s, s) if isinstance(s, int) else s  # a size, or (M, N, K)
        m, n, k = m // SMOKE, n // SMOKE, k // SMOKE
        a, b = operands(rng, dt, m, n, k)
        # Rows spread over every block of row panels (all of them up to 2048 rows).
        rows = np.arange(m) if m <= 2048 else np.unique(np.r_[np.arange(0, m, 61), m - 1])
        ref = a[rows].astype(np.float64) @ b.astype(np.float64)
        cases = []
        for v in [base if base is not None else {}] + variants:
            if v == "prepacked":
                pb = coopjit.prepack(b)
                f = (lambda pb=pb: coopjit.matmul(a, pb))
            else:
                f = (lambda v=v: coopjit.matmul(a, b, plan=v or None))
            check(np.asarray(f())[rows], a[rows], b, dt, ref)
            cases.append((json.dumps(v), f))
        if dt == "bf16":
            ta, tb = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16), torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
            cases.append(("torch", lambda: torch.matmul(ta, tb)))
        elif dt == "int8":
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            cases.append(("torch", lambda: torch._int_mm(ta, tb)))
        else:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            cases.append(("torch", lambda: torch.matmul(ta, tb)))
        times = {name: [] for name, _ in cases}
        for _ in range(rounds):
            for name, f in cases:
                time.sleep(0.3 if name == "torch" or name == cases[-1][0] else 0.1)
                times[name].append(timed(f, seconds=0.25, blocks=5))
        tt = float(np.median(times["torch"]))
        for name, _ in cases:
            t = float(np.median(times[name]))
            rate = 2 * m * n * k / t / 1e9
            print(f"{dt:5} {m}x{n}x{k:<6} {name:<34} {t * 1e3:8.3f} ms {rate:7.0f} G/s {rate / peak_of(pk, dt) * 100:5.1f}% of peak  "
                  f"torch/this {tt / t:5.2f}", flush=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "trace"
    if what == "trace":
        trace_cases()
    elif what == "pin":
        pin_cases()
    elif what == "plans":
        plan_cases(only=sys.argv[2:])
    elif what == "shares":
        plan_cases(only=sys.argv[2:], plans=SHARES)
    elif what == "small":  # the default against shares 1 where a call lasts microseconds, 3 rounds
        plan_cases(rounds=3, only=sys.argv[2:], plans=[(dt, s, [{"shares": 1}]) for dt, s in (
            ("bf16", 256), ("bf16", 512), ("int8", 256), ("int8", 512), ("f32", 256), ("f32", 512),
            ("f32", (513, 129, 700)), ("bf16", (64, 4096, 4096)), ("int8", (64, 4096, 4096)), ("bf16", 2048))])
    elif what == "fair":  # shares 1 / 2 / 4, every variant through plan= (the same Python cost), 3 rounds
        plan_cases(rounds=3, only=sys.argv[2:], plans=[(dt, s, [{"shares": 1}, {"shares": 2}, {"shares": 4}]) for dt, s in (
            ("bf16", 512), ("bf16", 1024), ("int8", 1024), ("f32", 1024), ("bf16", 2048), ("int8", 2048), ("f32", 2048),
            ("f32", (513, 129, 700)), ("f32", (1000, 130, 1000)), ("bf16", (64, 4096, 4096)))])
    elif what == "skinny":  # the default against shares 1 / 4 through plan=, 3 rounds
        plan_cases(rounds=3, only=sys.argv[2:], plans=[(dt, s, [{"shares": 1}, {"shares": 4}]) for dt, s in (
            ("bf16", (64, 4096, 4096)), ("int8", (64, 4096, 4096)), ("bf16", (256, 4096, 4096)), ("bf16", 1024))])
    elif what == "kinner":  # plan k_inner against the default (through plan=), 2 rounds
        plan_cases(rounds=2, only=sys.argv[2:], plans=KINNER, base={"shares": 4})
    elif what == "prefetch":  # amx_prefetch 3 / 4 / 5 against the default (through plan=), 2 rounds; one thread
        plan_cases(rounds=2, only=sys.argv[2:], plans=PREFETCH, base={"shares": 4})
        plan_cases(rounds=2, only=sys.argv[2:], plans=PREFETCH_ONE, base={"threads": 1})
    elif what == "int8k":  # int8 with K past one K tile: K tiles of 2048 (with k_inner) against the default, 3 rounds
        plan_cases(rounds=3, only=sys.argv[2:], plans=INT8K, base={"shares": 4})
    elif what == "int8k5":  # the same, the default against K tiles of 2048 with k_inner only, 5 rounds
        plan_cases(rounds=5, only=sys.argv[2:], plans=[(dt, s, [_OLD8[0]]) for dt, s, _ in INT8K[:4]], base={"shares": 4})
    elif what == "confirm":  # the default (shares 4 on 16 cores) against shares 1, 3 rounds
        plan_cases(rounds=3, only=sys.argv[2:], plans=[(dt, s, [{"shares": 1}]) for dt, s in (
            ("bf16", 1024), ("bf16", 4096), ("int8", 1024), ("int8", 4096), ("f32", 1024), ("f32", 4096))])
