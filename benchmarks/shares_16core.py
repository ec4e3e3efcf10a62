"""Issue 14, session 19: why same-work shares of the 16-core blocked nest run 2-2.8x apart.

    python benchmarks/shares_16core.py shares 4096 [f32 bf16 int8]   # per-share statistics
    python benchmarks/shares_16core.py pin 4096 [dtypes]             # pinned pool threads against not
    python benchmarks/shares_16core.py scale 4096 [dtypes]           # 1, 2, 4, 8, 16 workers, same blocking
    python benchmarks/shares_16core.py huge 4096 [dtypes]            # operands on huge pages against 4 KiB pages
    python benchmarks/shares_16core.py plans 4096 [dtypes]           # blocking variants (VARIANTS)
    python benchmarks/shares_16core.py all 4096 [dtypes]             # the five, one process

`shares`: the compute launch (the last launch of a packed call with shares) of traced calls, each
share with its index, the thread that ran it (its owner: index // per; another: stolen), the CPU at
its start and end, its wall time and its thread's CPU time (CLOCK_THREAD_CPUTIME_ID: below the wall
time when the thread was descheduled), and how many shares ran at the same time (the mean over its
span). Printed: the shares' times and rates (against a core's part of coopjit.peak()'s all-core
rate), then their medians by CPU per round (a slow CPU stays slow?), by position in the owner's
range (the first share after the barrier?), by owner, stolen or not, and by concurrency.
`pin`: coopjit._core._set_pool_pin on / off in alternating rounds with the shares'
spread (medians of 3 rounds). `scale`: the 16-thread plan's blocking (kt, mc_tiles, nc_tiles, shares) on n workers:
each core's rate. `huge`: A, B and C on 2 MiB pages (madvise MADV_HUGEPAGE before first touch)
against 4 KiB pages (MADV_NOHUGEPAGE), alternating rounds; the AnonHugePages of each mapping.

Recorded: benchmarks/recorded/issue14-emr16-shares-session19.txt."""
import ctypes
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
from coopjit import _core  # noqa: E402
from _rounds import operands  # noqa: E402
from phases_16core import config_of, out_of, err_of  # noqa: E402

PEAK_KEY = {"f32": "f32_fma", "bf16": "amx_bf16", "int8": "amx_int8"}


def traced(f, calls):
    """The compute launch of each of `calls` traced calls."""
    _core._set_launch_trace(True)
    out = []
    for _ in range(calls):
        _core._launch_traces()
        f()
        ls = _core._launch_traces()
        if ls:
            out.append(ls[-1])
    _core._set_launch_trace(False)
    return out


def share_records(launch, threads):
    st = np.array(launch["start_ns"], np.float64)
    en = np.array(launch["end_ns"], np.float64)
    n = len(st)
    per = -(-n // threads)
    dur = en - st
    ov = np.clip(np.minimum(en[:, None], en[None, :]) - np.maximum(st[:, None], st[None, :]), 0, None)
    conc = ov.sum(axis=1) / np.maximum(dur, 1)
    idx = np.arange(n)
    return {"index": idx, "owner": idx // per, "pos": idx % per, "thread": np.array(launch["thread"]),
            "cpu": np.array(launch["cpu"]), "cpu_end": np.array(launch["cpu_end"]), "start": st / 1e6,
            "dur": dur / 1e6, "cpu_time": np.array(launch["cpu_time_ns"], np.float64) / 1e6, "conc": conc}


def cat_records(rs):
    return {k: np.concatenate([r[k] for r in rs]) for k in rs[0]}


def spread_line(r, per_share_flops, core_peak):
    d = r["dur"]
    q = np.percentile(d, [0, 25, 50, 75, 100])
    rate = per_share_flops / (q * 1e-3) / 1e9 / core_peak * 100
    return ("ms min/p25/med/p75/max " + " / ".join(f"{x:.2f}" for x in q) + "; % of a core's peak "
            + " / ".join(f"{x:.0f}" for x in rate))


def grouped(r, key, vals=None):
    vals = np.unique(r[key]) if vals is None else vals
    return " ".join(f"{v}:{np.median(r['dur'][r[key] == v]):.2f}({int((r[key] == v).sum())})" for v in vals
                    if (r[key] == v).any())


def shares(sizes, dts, rounds=3, calls=8):
    threads = coopjit.get_num_threads()
    pk = coopjit.peak()
    print(f"threads {threads}; coopjit.peak(): " + json.dumps({k: {"single": round(v.get("single") or 0), "all": round(v.get("all") or 0),
                                                                   "threads": v.get("threads")}
                                                               for k, v in pk.items() if isinstance(v, dict)}), flush=True)
    print("pin order (one CPU per core first): " + " ".join(map(str, _core._pin_order())), flush=True)
    rng = np.random.default_rng(0)
    for s in sizes:
        for dt in dts:
            a, b = operands(rng, dt, s, s, s)
            out = out_of(a, b)
            ref = a[:128].astype(np.float64) @ b.astype(np.float64)
            f = lambda: coopjit.matmul(a, b, out=out)  # noqa: E731
            cfg = config_of(a, b, out, None)
            print(f"\n{dt} {s}^3 plan {json.dumps(cfg)} err {err_of(f(), ref):.1e}", flush=True)
            core_peak = (pk[PEAK_KEY[dt]]["all"] or float("nan")) / threads
            rounds_r = []
            for _ in range(rounds):
                time.sleep(0.5)
                f()
                rounds_r.append([share_records(l, threads) for l in traced(f, calls)])
            allr = cat_records([x for rr in rounds_r for x in rr])
            nsh = len(rounds_r[0][0]["dur"])
            per_flops = 2.0 * s ** 3 / nsh
            print(f"  {nsh} shares a call, {len(allr['dur']) // nsh} calls: " + spread_line(allr, per_flops, core_peak))
            ct = allr["cpu_time"] / allr["dur"]
            print(f"  thread CPU time / wall per share: median {np.median(ct):.3f}, min {ct.min():.3f}; "
                  f"below 0.95: {int((ct < 0.95).sum())} of {len(ct)}; migrated during the share: "
                  f"{int((allr['cpu'] != allr['cpu_end']).sum())}")
            own = allr["thread"] == allr["owner"]
            print(f"  own shares {int(own.sum())} median {np.median(allr['dur'][own]):.2f} ms; stolen {int((~own).sum())} "
                  f"median {np.median(allr['dur'][~own]) if (~own).any() else float('nan'):.2f} ms")
            print("  by position in the owner's range (own shares), ms(count): "
                  + grouped({k: v[own] for k, v in allr.items()}, "pos"))
            print("  by owner (the C block), ms(count): " + grouped(allr, "owner"))
            print("  by thread, ms(count): " + grouped(allr, "thread"))
            cb = np.digitize(allr["conc"], [4, 8, 12, 14, 15.5])
            labels = ["<4", "4-8", "8-12", "12-14", "14-15.5", ">=15.5"]
            print("  by concurrent shares (mean over the share), ms(count): "
                  + " ".join(f"{labels[i]}:{np.median(allr['dur'][cb == i]):.2f}({int((cb == i).sum())})" for i in range(6)
                             if (cb == i).any()))
            print(f"  correlation of a share's time with its concurrency: {np.corrcoef(allr['dur'], allr['conc'])[0, 1]:.2f}")
            cpus = np.unique(allr["cpu"])
            print("  by CPU per round, median ms: CPU " + " ".join(f"{c:>5d}" for c in cpus))
            for i, rr in enumerate(rounds_r):
                r = cat_records(rr)
                print(f"    round {i}:      " + " ".join(f"{np.median(r['dur'][r['cpu'] == c]):5.2f}" if (r['cpu'] == c).any()
                                                      else "    -" for c in cpus))
            last = rounds_r[-1][-1]
            order = np.argsort(last["start"])
            print("  the last call, shares by start: index@thread/cpu start+ms " + " ".join(
                f"{last['index'][i]}@{last['thread'][i]}/{last['cpu'][i]} {last['start'][i]:.1f}+{last['dur'][i]:.2f}" for i in order), flush=True)


def timed_rounds(cases, rounds=3, seconds=0.25):
    ts = {n: [] for n in cases}
    for _ in range(rounds):
        for n, (setup, f) in cases.items():
            setup()
            time.sleep(0.5)
            f()
            t = time.perf_counter()
            k = 0
            while time.perf_counter() - t < seconds:
                f()
                k += 1
            ts[n].append((time.perf_counter() - t) / k)
    return ts


def report(dt, s, ts, peak, base):
    b = float(np.median(ts[base]))
    for n, v in ts.items():
        t = float(np.median(v))
        rate = 2.0 * s ** 3 / t / 1e9
        print(f"  {dt} {s}^3 {n:<26} {t * 1e3:8.3f} ms {rate:7.0f} G/s {rate / peak * 100:5.1f}% of peak  {base} time / this "
              f"{b / t:5.2f}  rounds " + " ".join(f"{x * 1e3:.2f}" for x in v), flush=True)


def pin(sizes, dts):
    threads = coopjit.get_num_threads()
    pk = coopjit.peak()
    rng = np.random.default_rng(2)
    for s in sizes:
        for dt in dts:
            a, b = operands(rng, dt, s, s, s)
            out = out_of(a, b)
            f = lambda: coopjit.matmul(a, b, out=out)  # noqa: E731
            cases = {"unpinned": (lambda: _core._set_pool_pin(False), f), "pinned": (lambda: _core._set_pool_pin(True), f)}
            ts = timed_rounds(cases)
            print(f"\n{dt} {s}^3 pinned pool threads against not ({threads} threads), alternating rounds, medians:")
            report(dt, s, ts, (pk[PEAK_KEY[dt]]["all"] or float("nan")), "unpinned")
            core_peak = (pk[PEAK_KEY[dt]]["all"] or float("nan")) / threads
            for on in (False, True):
                _core._set_pool_pin(on)
                f()
                r = cat_records([share_records(l, threads) for l in traced(f, 8)])
                nsh = len(r["dur"]) // 8
                print(f"  shares {'pinned' if on else 'unpinned'}: " + spread_line(r, 2.0 * s ** 3 / nsh, core_peak)
                      + "; by CPU " + grouped(r, "cpu"), flush=True)
            _core._set_pool_pin(False)


def scale(sizes, dts):
    full = coopjit.get_num_threads()
    pk = coopjit.peak()
    rng = np.random.default_rng(3)
    for s in sizes:
        for dt in dts:
            a, b = operands(rng, dt, s, s, s)
            out = out_of(a, b)
            base = config_of(a, b, out, None)
            keep = {k: base[k] for k in ("kt", "mc_tiles", "nc_tiles", "shares", "mr", "nr") if k in base}
            core_peak = (pk[PEAK_KEY[dt]]["all"] or float("nan")) / full
            print(f"\n{dt} {s}^3 the {full}-thread plan's blocking {json.dumps(keep)} on n workers: each core's rate "
                  f"(% of a core's part of the all-core peak, {core_peak:.0f} G/s)", flush=True)
            for n in (1, 2, 4, 8, full):
                coopjit.set_num_threads(n)
                plan = dict(keep, threads=n)
                if n == 1:
                    plan.pop("shares", None)
                try:
                    cfg = config_of(a, b, out, plan)
                except (ValueError, RuntimeError) as e:
                    print(f"  n {n}: refused {e}")
                    continue
                f = lambda: coopjit.matmul(a, b, out=out, plan=plan)  # noqa: E731
                time.sleep(0.3)
                f()
                ts = []
                for _ in range(3 if n <= 2 else 5):
                    t = time.perf_counter()
                    f()
                    ts.append(time.perf_counter() - t)
                t = float(np.median(ts))
                rate = 2.0 * s ** 3 / t / 1e9 / n
                line = f"  n {n:2d}: {t * 1e3:9.2f} ms, {rate:6.0f} G/s a core ({rate / core_peak * 100:5.1f}%)"
                if n >= 2:
                    r = cat_records([share_records(l, n) for l in traced(f, 4)])
                    nsh = len(r["dur"]) // 4
                    line += "; shares " + spread_line(r, 2.0 * s ** 3 / nsh, core_peak)
                print(line + f"  plan {json.dumps({k: cfg.get(k) for k in ('threads', 'shares', 'kt', 'mc_tiles', 'nc_tiles', 'grid_m')})}",
                      flush=True)
            coopjit.set_num_threads(full)


libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_HUGEPAGE, MADV_NOHUGEPAGE = 14, 15


def paged_copy(x, huge):
    """A copy of x whose pages were advised before their first touch (huge: 2 MiB pages)."""
    y = np.empty(x.nbytes + (4 << 20), np.uint8)
    base = (y.ctypes.data + (2 << 20) - 1) // (2 << 20) * (2 << 20)
    off = base - y.ctypes.data
    libc.madvise(ctypes.c_void_p(base), ctypes.c_size_t(x.nbytes // (2 << 20) * (2 << 20) + (2 << 20)),
                 MADV_HUGEPAGE if huge else MADV_NOHUGEPAGE)
    z = y[off:off + x.nbytes].view(x.dtype).reshape(x.shape)
    z[...] = x
    return z


def huge_pages_of(arrays):
    """AnonHugePages (kB) of the mappings that hold each array, from /proc/self/smaps."""
    maps, cur = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" not in parts[0]:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                cur = [lo, hi, 0]
                maps.append(cur)
            elif parts[0] == "AnonHugePages:" and cur:
                cur[2] = int(parts[1])
    out = {}
    for name, x in arrays.items():
        p = x.ctypes.data
        m = [m for m in maps if m[0] <= p < m[1]]
        out[name] = f"{m[0][2] // 1024} MiB huge of {(m[0][1] - m[0][0]) >> 20} MiB" if m else "?"
    big = [m for m in maps if m[1] - m[0] >= (16 << 20)]
    return out, " ".join(f"{(m[1] - m[0]) >> 20}M:{m[2] >> 10}M" for m in big)


def huge(sizes, dts):
    pk = coopjit.peak()
    rng = np.random.default_rng(4)
    for s in sizes:
        for dt in dts:
            a, b = operands(rng, dt, s, s, s)
            out = out_of(a, b)
            ah, bh, ch = paged_copy(a, True), paged_copy(b, True), paged_copy(out, True)
            a4, b4, c4 = paged_copy(a, False), paged_copy(b, False), paged_copy(out, False)
            fh = lambda: coopjit.matmul(ah, bh, out=ch)  # noqa: E731
            f4 = lambda: coopjit.matmul(a4, b4, out=c4)  # noqa: E731
            fh()
            f4()
            hp, big = huge_pages_of({"A huge": ah, "B huge": bh, "C huge": ch, "A 4K": a4, "B 4K": b4, "C 4K": c4})
            print(f"\n{dt} {s}^3 operands on 2 MiB pages against 4 KiB pages: " + "; ".join(f"{k} {v}" for k, v in hp.items()))
            print(f"  mappings of 16 MiB and more (size:AnonHugePages): {big}")
            ts = timed_rounds({"2 MiB pages": (lambda: None, fh), "4 KiB pages": (lambda: None, f4)})
            report(dt, s, ts, (pk[PEAK_KEY[dt]]["all"] or float("nan")), "2 MiB pages")


VARIANTS = {"f32": ['{"shares": 8}', '{"kt": 512}'], "bf16": ['{"shares": 8}', '{"kt": 1024}'],
            "int8": ['{"shares": 8}', '{"kt": 2048}']}


def plans(sizes, dts):
    """The default plan against blocking variants (VARIANTS), alternating rounds, and their shares' spread."""
    threads = coopjit.get_num_threads()
    pk = coopjit.peak()
    rng = np.random.default_rng(5)
    for s in sizes:
        for dt in dts:
            a, b = operands(rng, dt, s, s, s)
            out = out_of(a, b)
            ref = a[:128].astype(np.float64) @ b.astype(np.float64)
            cases = {}
            print(f"\n{dt} {s}^3 plan variants ({threads} threads), alternating rounds, medians:")
            for v in ["{}"] + VARIANTS[dt]:
                p = json.loads(v) or None
                f = (lambda p=p: coopjit.matmul(a, b, out=out, plan=p))
                try:
                    print(f"  {v:<16} err {err_of(f(), ref):.1e} {json.dumps(config_of(a, b, out, p))}")
                except (ValueError, RuntimeError) as e:
                    print(f"  {v:<16} refused: {e}")
                    continue
                cases[v] = (lambda: None, f)
            ts = timed_rounds(cases)
            report(dt, s, ts, (pk[PEAK_KEY[dt]]["all"] or float("nan")), "{}")
            core_peak = (pk[PEAK_KEY[dt]]["all"] or float("nan")) / threads
            for v, (_, f) in cases.items():
                r = cat_records([share_records(l, threads) for l in traced(f, 6)])
                nsh = len(r["dur"]) // 6
                print(f"  shares {v:<16} ({nsh} a call): " + spread_line(r, 2.0 * s ** 3 / nsh, core_peak), flush=True)


def main():
    mode = sys.argv[1]
    sizes = [int(x) for x in sys.argv[2:] if x.isdigit()] or [4096]
    dts = [x for x in sys.argv[2:] if not x.isdigit()] or ["f32", "bf16", "int8"]
    if mode == "all":  # one process (coopjit.peak() measured once)
        for m in (shares, pin, scale, huge, plans):
            m(sizes, dts)
        return
    {"shares": shares, "pin": pin, "scale": scale, "huge": huge, "plans": plans}[mode](sizes, dts)


if __name__ == "__main__":
    main()
