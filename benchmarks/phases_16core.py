"""Issue 14, session 18: where an all-core product's time goes, phase by phase, through the launch
trace (coopjit._core._launch_traces: every traced launch of a call, with its start).

    python benchmarks/phases_16core.py phases 4096            # f32, bf16, int8: the phases of a call
    python benchmarks/phases_16core.py store 8192             # int8 amx_store 1 against 0, alternating
    python benchmarks/phases_16core.py plans 4096 '{"kt":2048}' ...   # plan variants, alternating

A packed plan with shares (the default on 8+ cores) runs as two launches: the packing launch (each
worker packs its share of A's row panels and B's column panels; its end is the barrier), then the
blocked nest as shares (ThreadPool::run_shares). For each call: the call's wall time; the packing
launch's wall time (start -> join), its workers' busy time (median / slowest) and the wait at its
end (join - each worker's end: the barrier), the GB/s of the packing (A and B read, their panels
written) against torch's copy of the same bytes with every thread (dst.copy_(src), in the same
rounds); the gap between the launches; the compute launch's wall time, its shares' busy time
(fastest / median / slowest), each share's rate against its part of coopjit.peak()'s all-core
rate (the K loop's rate), the tail (join - the median CPU's last share's end) and the busy time per thread
(imbalance). Medians over the calls of 5 alternating rounds, each after a 0.5 s pause; torch
(torch.set_num_threads(threads)) in the same rounds. Every product is checked against float64
first (err: max |c - ref| / max |ref|, the first 256 rows).

Recorded: benchmarks/recorded/issue14-emr16-phases-session18.txt."""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coopjit  # noqa: E402
from coopjit import _core  # noqa: E402
from _rounds import operands  # noqa: E402

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

FIELDS = ("split", "threads", "shares", "grid_m", "mr", "nr", "kb", "kt", "mc_tiles", "nc_tiles", "amx", "amx_store", "amx_feed",
          "direct_a", "pack")


def out_of(a, b):
    return np.empty((a.shape[0], b.shape[1]), np.int32 if a.dtype == np.int8 else a.dtype)


def config_of(a, b, out, plan):
    types = coopjit._arrays.gemm_types(a.dtype, b.dtype, out.dtype)[0]
    cfg = coopjit._plan.from_core(coopjit._core.gemm_plan(a, b, out, False, types, coopjit._gemm._overrides(plan)))
    return {k: cfg[k] for k in FIELDS if k in cfg}


def err_of(c, ref):
    c = c.float().numpy() if hasattr(c, "numpy") and not isinstance(c, np.ndarray) else c
    c = np.asarray(c[: ref.shape[0]])
    return float(np.max(np.abs(c.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)


def torch_fn(a, b, dt):
    import torch
    if dt == "bf16":
        ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
        return lambda: torch.matmul(ta, tb)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    if dt == "int8":
        return lambda: torch._int_mm(ta, tb)
    return lambda: torch.matmul(ta, tb)


def traced_call(f):
    """One call with the trace on: (wall ns, [launches])."""
    _core._launch_traces()
    t0 = time.perf_counter_ns()
    f()
    t1 = time.perf_counter_ns()
    return t1 - t0, _core._launch_traces()


def phase_row(wall, launches, flops, peak_all, threads, a_b_bytes):
    """The figures of one traced call (see the module's text), or None when it was one launch."""
    r = {"call": wall / 1e3}
    if not launches:
        return r
    comp = launches[-1]
    st, en = np.array(comp["start_ns"], np.float64), np.array(comp["end_ns"], np.float64)
    dur = en - st
    shares = len(dur)
    r["compute"] = comp["join_ns"] / 1e3
    r["share_min"], r["share_med"], r["share_max"] = dur.min() / 1e3, float(np.median(dur)) / 1e3, dur.max() / 1e3
    cpu = np.array(comp["cpu"])
    last = [en[cpu == c].max() for c in np.unique(cpu) if c >= 0]
    r["tail"] = (comp["join_ns"] - float(np.median(last))) / 1e3 if last else float("nan")  # after the median CPU's last share
    per = flops / shares  # every share of a square product has the same work (whole panels)
    r["kloop_med"] = per / float(np.median(dur)) / (peak_all / threads) * 100  # (G/s: flop / ns)
    r["kloop_best"] = per / dur.min() / (peak_all / threads) * 100
    r["compute_rate"] = flops / comp["join_ns"] / peak_all * 100
    busy = [dur[cpu == c].sum() for c in np.unique(cpu) if c >= 0]
    r["thread_busy_max_over_med"] = float(max(busy) / np.median(busy)) if busy else float("nan")
    if len(launches) >= 2:
        pk = launches[-2]
        pst, pen = np.array(pk["start_ns"], np.float64), np.array(pk["end_ns"], np.float64)
        pdur = pen - pst
        r["pack"] = pk["join_ns"] / 1e3
        r["pack_busy_med"], r["pack_busy_max"] = float(np.median(pdur)) / 1e3, pdur.max() / 1e3
        r["pack_start_max"] = pst.max() / 1e3
        r["barrier_wait_med"] = float(np.median(pk["join_ns"] - pen)) / 1e3
        r["pack_gbs"] = a_b_bytes * 2 / (pk["join_ns"] * 1e-9) / 1e9  # read + written
        r["gap"] = (comp["origin_ns"] - (pk["origin_ns"] + pk["join_ns"])) / 1e3
        r["before"] = (wall - (comp["origin_ns"] + comp["join_ns"] - pk["origin_ns"])) / 1e3
    return r


def phases(sizes, dts=("f32", "bf16", "int8"), rounds=5, calls=8):
    import torch
    threads = coopjit.get_num_threads()
    torch.set_num_threads(threads)
    pk = coopjit.peak()
    print(f"threads {threads}; peak all cores (G/s): " + json.dumps({k: round(v["all"] or 0) for k, v in pk.items()
                                                                       if isinstance(v, dict) and "all" in v}), flush=True)
    rng = np.random.default_rng(0)
    _core._set_launch_trace(True)
    for s in sizes:
        for dt in dts:
            peak = pk["f32_fma" if dt == "f32" else "amx_bf16" if dt == "bf16" else "amx_int8"]["all"]
            a, b = operands(rng, dt, s, s, s)
            out = out_of(a, b)
            rows = min(s, 256)
            ref = a[:rows].astype(np.float64) @ b.astype(np.float64)
            flops = 2.0 * s ** 3
            ab = a.nbytes + b.nbytes
            cfg = config_of(a, b, out, None)
            pb = coopjit.prepack(b)
            src = torch.empty(ab, dtype=torch.uint8)
            src.fill_(1)
            dst = torch.empty_like(src)
            tf = torch_fn(a, b, dt)
            cases = {"coopjit": lambda: coopjit.matmul(a, b, out=out),
                     "coopjit B prepacked": lambda: coopjit.matmul(a, pb, out=out),
                     "torch": tf, "torch copy of A+B bytes": lambda: dst.copy_(src)}
            err = err_of(coopjit.matmul(a, b, out=out), ref)
            err_p = err_of(coopjit.matmul(a, pb, out=out), ref)
            err_t = err_of(tf(), ref)
            print(f"\n{dt} {s}^3  plan {json.dumps(cfg)}  err coopjit {err:.1e} prepacked {err_p:.1e} torch {err_t:.1e}",
                  flush=True)
            res = {k: [] for k in cases}
            last_launches = None
            for _ in range(rounds):
                for name, f in cases.items():
                    time.sleep(0.5)
                    f()
                    for _ in range(calls):
                        if name.startswith("coopjit"):
                            w, launches = traced_call(f)
                            if name == "coopjit":
                                last_launches = launches
                            res[name].append(phase_row(w, launches, flops, peak, threads, ab))
                        else:
                            t0 = time.perf_counter_ns()
                            f()
                            res[name].append({"call": (time.perf_counter_ns() - t0) / 1e3})
            med = {n: {k: float(np.median([r[k] for r in rs if k in r])) for k in rs[0]} for n, rs in res.items()}
            if last_launches:  # one call's shares in index order (thread t owns [t * per, (t + 1) * per))
                comp = last_launches[-1]
                d = (np.array(comp["end_ns"]) - np.array(comp["start_ns"])) / 1e6
                print("  the last call's shares, ms (index order): " + " ".join(f"{x:.2f}" for x in d), flush=True)
                print("  their starts, ms: " + " ".join(f"{x / 1e6:.2f}" for x in comp["start_ns"]), flush=True)
                print("  their CPUs: " + " ".join(str(c) for c in comp["cpu"]), flush=True)
            t_copy = med["torch copy of A+B bytes"]["call"]
            for n, m in med.items():
                rate = flops / (m["call"] * 1e-6) / 1e9
                line = f"  {n:<24} call {m['call'] / 1e3:8.3f} ms"
                if not n.startswith("torch copy"):
                    line += f"  {rate:7.0f} G/s {rate / peak * 100:5.1f}% of peak"
                else:
                    line += f"  {ab * 2 / (m['call'] * 1e-6) / 1e9:6.1f} GB/s (read + written)"
                print(line, flush=True)
                if "compute" in m:
                    print(f"      compute launch {m['compute'] / 1e3:8.3f} ms ({m['compute_rate']:.1f}% of peak); shares "
                          f"{m['share_min'] / 1e3:.3f} / {m['share_med'] / 1e3:.3f} / {m['share_max'] / 1e3:.3f} ms "
                          f"(min / med / max); K loop at {m['kloop_best']:.1f}% (fastest share) / {m['kloop_med']:.1f}% "
                          f"(median) of a core's all-core peak; tail {m['tail'] / 1e3:.3f} ms; busiest thread / median "
                          f"{m['thread_busy_max_over_med']:.2f}", flush=True)
                if "pack" in m:
                    print(f"      packing launch {m['pack'] / 1e3:8.3f} ms ({m['pack'] / m['call'] * 100:.1f}% of the call; "
                          f"{m['pack_gbs']:.1f} GB/s, {m['pack'] / t_copy:.2f}x torch's copy of the bytes); workers busy "
                          f"{m['pack_busy_med'] / 1e3:.3f} / {m['pack_busy_max'] / 1e3:.3f} ms (med / max), last start "
                          f"{m['pack_start_max']:.0f} us; barrier wait (median worker) {m['barrier_wait_med']:.0f} us; gap "
                          f"to the compute launch {m['gap']:.0f} us; before the first launch {m['before']:.0f} us",
                          flush=True)
    _core._set_launch_trace(False)


def alternate(s, dt, variants, rounds=5, seconds=None):
    """Plan variants (JSON dicts; {} = the default) and torch, alternating rounds, medians."""
    import torch
    threads = coopjit.get_num_threads()
    torch.set_num_threads(threads)
    pk = coopjit.peak()
    peak = pk["f32_fma" if dt == "f32" else "amx_bf16" if dt == "bf16" else "amx_int8"]["all"]
    rng = np.random.default_rng(1)
    a, b = operands(rng, dt, s, s, s)
    out = out_of(a, b)
    ref = a[:256].astype(np.float64) @ b.astype(np.float64)
    cases = {}
    for v in variants:
        p = json.loads(v)
        cases[v] = (lambda p=p: coopjit.matmul(a, b, out=out, plan=p or None))
    cases["torch"] = torch_fn(a, b, dt)
    for n, f in list(cases.items()):
        try:
            cfg = json.dumps(config_of(a, b, out, json.loads(n))) if n != "torch" else ""
            print(f"{dt} {s}^3 {n:<28} err {err_of(f(), ref):.1e} {cfg}", flush=True)
        except (ValueError, RuntimeError) as e:  # a plan the planner refuses here
            print(f"{dt} {s}^3 {n:<28} refused: {e}", flush=True)
            del cases[n]
    seconds = seconds or (0.4 if s >= 8192 else 0.2)
    ts = {n: [] for n in cases}
    for _ in range(rounds):
        for n, f in cases.items():
            time.sleep(0.5)
            f()
            t = time.perf_counter()
            k = 0
            while time.perf_counter() - t < seconds:
                f()
                k += 1
            ts[n].append((time.perf_counter() - t) / k)
    base = float(np.median(ts[variants[0]]))
    tt = float(np.median(ts["torch"]))
    for n, v in ts.items():
        t = float(np.median(v))
        rate = 2.0 * s ** 3 / t / 1e9
        print(f"{dt} {s}^3 {threads} threads {n:<28} {t * 1e3:8.3f} ms {rate:7.0f} G/s {rate / peak * 100:5.1f}% of peak  "
              f"{variants[0]} time / this {base / t:5.2f}  torch time / this {tt / t:5.2f}  rounds "
              + " ".join(f"{x * 1e3:.2f}" for x in v), flush=True)


def main():
    mode = sys.argv[1]
    if mode == "phases":
        sizes = [int(x) for x in sys.argv[2:] if x.isdigit()] or [4096]
        dts = [x for x in sys.argv[2:] if not x.isdigit()] or ["f32", "bf16", "int8"]
        phases(sizes, dts)
    elif mode == "store":
        for s in [int(x) for x in sys.argv[2:]] or [8192]:
            alternate(s, "int8", ["{}", '{"amx_store": 0}'])
    elif mode == "plans":
        s, dt = int(sys.argv[2]), sys.argv[3]
        alternate(s, dt, ["{}"] + sys.argv[4:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
