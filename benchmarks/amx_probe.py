"""AMX plans on a CPU with AMX tiles (issue 14): bf16 and int8 products, one thread and all cores,
the automatic plan and K-tile / block variants, as rates and as fractions of coopjit.peak()'s AMX
peaks, then torch (matmul, torch._int_mm) on the same cores. Each case is checked against float64
and timed in its own block after a pause (median of 5 blocks).

    python benchmarks/amx_probe.py            # on the 16-core Emerald Rapids host of the accelerator machine
    python benchmarks/amx_probe.py trace      # where a call's time goes: the pool's per-worker stamps
    python benchmarks/amx_probe.py feeds      # the tile feeds (plan amx_feed 0 / 1 / 2), interleaved rounds
    python benchmarks/amx_probe.py phases     # which plans carry a 16-worker call's fixed cost
    python benchmarks/amx_probe.py local      # the same calls with no panel read from another core's writes
    python benchmarks/amx_probe.py direct     # plan direct_a (A read where it is) against the default

Recorded: benchmarks/recorded/issue14-emr16-amx-session8.txt, issue14-emr16-session10.txt."""
import json
import sys
import time

import numpy as np

import coopjit
from _rounds import operands, timed  # this folder: operands, and the blocks-after-a-pause timer


def main():
    if not coopjit.cpu_info()["features"].get("amx-tile"):
        print("this CPU has no AMX tiles: nothing to measure")
        return
    pk = coopjit.peak()
    print(json.dumps({k: (v.get("single"), v.get("all")) for k, v in pk.items() if isinstance(v, dict)}))
    rng = np.random.default_rng(0)
    cases = []
    for dt, kts in (("bf16", (512, 2048)), ("int8", (1024, 4096))):
        cases += [(dt, 512, 512, 4096, {"threads": 1}), (dt, 512, 512, 4096, {"threads": 1, "kt": kts[0]})]
        cases += [(dt, s, s, s, {}) for s in (1024, 2048, 4096)]
        cases += [(dt, 4096, 4096, 4096, p) for p in [{"kt": x} for x in kts] + [{"mc_tiles": 16}]]
    current = None
    for dt, m, n, k, plan in cases:
        if current is None or current[0] != (dt, m, n, k):
            a, b = operands(rng, dt, m, n, k)
            current = ((dt, m, n, k), a, b, a.astype(np.float64) @ b.astype(np.float64))
        _, a, b, ref = current
        kern = coopjit.compile_gemm(m, n, k, a.dtype, plan=plan)
        c = coopjit.matmul(a, b, plan=plan)
        err = float(np.max(np.abs(c.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)
        time.sleep(0.15)
        t = timed(lambda: coopjit.matmul(a, b, plan=plan))
        unit = "amx_bf16" if dt == "bf16" else "amx_int8"
        peak = pk[unit]["single"] if plan.get("threads") == 1 else pk[unit]["all"]
        rate = 2 * m * n * k / t / 1e9
        cf = kern.config
        print(f"{dt:5} {m}x{n}x{k} {str(plan):<28} {rate:9.1f} G/s {rate / peak * 100:5.1f}% peak  err {err:.1e} "
              f"[{' '.join(f'{f}={cf[f]}' for f in ('amx', 'kt', 'mc_tiles', 'grid_m', 'threads'))}]", flush=True)
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(coopjit.get_num_threads())
    for dt, s in (("bf16", 1024), ("bf16", 2048), ("bf16", 4096), ("int8", 1024), ("int8", 2048), ("int8", 4096)):
        if dt == "int8":
            ta = torch.randint(-128, 127, (s, s), dtype=torch.int8)
            tb = torch.randint(-128, 127, (s, s), dtype=torch.int8)
            f = lambda: torch._int_mm(ta, tb)  # noqa: E731
        else:
            ta = torch.randn(s, s, dtype=torch.bfloat16)
            tb = torch.randn_like(ta)
            f = lambda: torch.matmul(ta, tb)  # noqa: E731
        time.sleep(0.3)
        t = timed(f)
        print(f"torch {dt} {s}: {2 * s**3 / t / 1e9:9.1f} G/s")


def trace(calls=300):
    """bf16 512^3 / 1024^3 on 1, 4, 16 workers: each call's time in Python, and from the pool's
    launch trace (COOPJIT_TRACE; coopjit._core._launch_trace): when each worker started after the
    launch, how long its part of the kernel ran, the wait for the last one. Back to back, and
    after a 1 ms pause (the workers have stopped spinning: a futex wake-up); with out= given and
    with a fresh output each call. Medians over the calls, in microseconds."""
    from coopjit import _core
    rng = np.random.default_rng(0)
    print("case                      threads mode        call   launch->join  start(med/max)  kernel(med/max)  caller  after-last  slept")
    for s in (512, 1024):
        a, b = operands(rng, "bf16", s, s, s)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        for threads in (1, 4, 16):
            coopjit.set_num_threads(threads)
            out = np.empty((s, s), a.dtype)
            c = coopjit.matmul(a, b, out=out)
            err = float(np.max(np.abs(c.astype(np.float64) - ref))) / float(np.max(np.abs(ref)))
            for mode in ("b2b out=", "b2b fresh", "pause out="):
                _core._set_launch_trace(True)
                rows = []
                for _ in range(calls if mode != "pause out=" else calls // 3):
                    if mode.startswith("pause"):
                        time.sleep(0.001)
                    t0 = time.perf_counter_ns()
                    if mode.endswith("fresh"):
                        coopjit.matmul(a, b)
                    else:
                        coopjit.matmul(a, b, out=out)
                    t1 = time.perf_counter_ns()
                    tr = _core._launch_trace()
                    if tr["workers"] <= 1:
                        rows.append((t1 - t0, 0, 0, 0, 0, 0, 0, 0, 0))
                        continue
                    st, en = np.array(tr["start_ns"]), np.array(tr["end_ns"])
                    dur = en - st
                    rows.append((t1 - t0, tr["join_ns"], np.median(st[1:]), st[1:].max(), np.median(dur), dur.max(),
                                 dur[0], tr["join_ns"] - en.max(), np.mean(tr["slept"][1:])))
                _core._set_launch_trace(False)
                m = np.median(np.array(rows, dtype=np.float64), axis=0) / 1e3
                print(f"bf16 {s}^3 err {err:.1e}   {threads:3}  {mode:10} {m[0]:7.1f}  {m[1]:9.1f}  {m[2]:7.1f}/{m[3]:6.1f}"
                      f"  {m[4]:8.1f}/{m[5]:6.1f}  {m[6]:7.1f}  {m[7]:7.1f}  {m[8] * 1e3:5.2f}", flush=True)
    coopjit.set_num_threads(16)


def phases(calls=200):
    """Which plans carry the fixed cost of a 16-worker call (the trace's per-worker kernel time,
    against the one-worker time / 16): AMX packed plans, the packed
    vdpbf16ps plan (amx 'no') and the unpacked one (pack 0), on 512^3 and on 512 x 512 x 32
    (almost no compute: the packing, the barrier and the epilogue), f32 packed / unpacked."""
    from coopjit import _core
    rng = np.random.default_rng(1)
    print("case                 plan                              threads   call  kernel(med/max)  start(max)")
    for dt, m, n, k in (("bf16", 512, 512, 32), ("bf16", 512, 512, 512), ("f32", 512, 512, 512)):
        a, b = operands(rng, dt, m, n, k) if dt != "f32" else (rng.standard_normal((m, k), dtype=np.float32),
                                                               rng.standard_normal((k, n), dtype=np.float32))
        ref = a.astype(np.float64) @ b.astype(np.float64)
        variants = [{}, {"amx": "no"}, {"amx": "no", "pack": 0}] if dt == "bf16" else [{"pack": 1}, {"pack": 0}]
        for plan in variants:
            for threads in (1, 16):
                p = {**plan, "threads": threads}
                out = np.empty((m, n), np.float32)
                c = coopjit.matmul(a, b, out=out, plan=p)
                assert np.max(np.abs(c - ref)) <= 1e-2 * np.max(np.abs(ref)), (dt, p)
                _core._set_launch_trace(True)
                rows = []
                for _ in range(calls):
                    t0 = time.perf_counter_ns()
                    coopjit.matmul(a, b, out=out, plan=p)
                    t1 = time.perf_counter_ns()
                    tr = _core._launch_trace()
                    if threads == 1:
                        rows.append((t1 - t0, 0, 0, 0))
                        continue
                    st, en = np.array(tr["start_ns"]), np.array(tr["end_ns"])
                    rows.append((t1 - t0, np.median(en - st), (en - st).max(), st.max()))
                _core._set_launch_trace(False)
                r = np.median(np.array(rows, dtype=np.float64), axis=0) / 1e3
                print(f"{dt} {m}x{n}x{k:<6} {json.dumps(plan):<34} {threads:3} {r[0]:8.1f} {r[1]:8.1f}/{r[2]:6.1f} {r[3]:7.1f}",
                      flush=True)


def local(calls=200):
    """Is it the packed panels that other cores wrote? grid_m = workers gives each worker the A
    panels it packed itself; a prepacked B is clean, shared data; together no worker reads a
    panel another core has just written. Per-worker kernel time (median / longest) against the
    one-worker call / 16, microseconds."""
    from coopjit import _core
    rng = np.random.default_rng(2)
    print("case            variant                          call  kernel(med/max)   1-thread/16")
    for dt, s in (("bf16", 512), ("bf16", 1024), ("f32", 1024)):
        a, b = operands(rng, dt, s, s, s) if dt != "f32" else (rng.standard_normal((s, s), dtype=np.float32),
                                                               rng.standard_normal((s, s), dtype=np.float32))
        ref = a.astype(np.float64) @ b.astype(np.float64)
        out = np.empty((s, s), np.float32)
        base = {"pack": 1} if dt == "f32" else {}
        one = None
        variants = [("1 thread", {**base, "threads": 1}, False), ("default", base, False),
                    ("grid_m 16", {**base, "grid_m": 16}, False), ("prepacked B", base, True),
                    ("prepacked B, grid_m 16", {**base, "grid_m": 16}, True)]
        if coopjit.cpu_info()["features"].get("cldemote"):  # plan demote: the panels pushed to L3
            variants += [("demote", {**base, "demote": 1}, False), ("demote, grid_m 16", {**base, "demote": 1, "grid_m": 16}, False),
                         ("default again", base, False)]
        for name, plan, packed in variants:
            bb = coopjit.prepack(b, plan=plan) if packed else b
            f = (lambda bb=bb, plan=plan: coopjit.matmul(a, bb, out=out)) if packed else \
                (lambda plan=plan: coopjit.matmul(a, b, out=out, plan=plan))
            c = f()
            assert np.max(np.abs(c - ref)) <= 1e-2 * np.max(np.abs(ref)), (dt, name)
            _core._set_launch_trace(True)
            rows = []
            for _ in range(calls):
                t0 = time.perf_counter_ns()
                f()
                t1 = time.perf_counter_ns()
                tr = _core._launch_trace()
                st, en = np.array(tr["start_ns"]), np.array(tr["end_ns"])
                rows.append((t1 - t0, np.median(en - st) if len(st) else 0, (en - st).max() if len(st) else 0))
            _core._set_launch_trace(False)
            r = np.median(np.array(rows, dtype=np.float64), axis=0) / 1e3
            if one is None:
                one = r[0]
            print(f"{dt} {s}^3   {name:<28} {r[0]:8.1f} {r[1]:8.1f}/{r[2]:6.1f}  {one / 16:8.1f}", flush=True)


def direct(rounds=5):
    """plan direct_a (the tiles read A where it is; each worker packs only its own B panels) against
    the default, one and 16 workers, torch in the same rounds."""
    cases = []
    for dt in ("bf16", "int8"):
        cases += [(dt, 512, 512, 4096, {"threads": 1, **v}) for v in ({}, {"direct_a": 1})]
    for dt, s in (("bf16", 512), ("bf16", 1024), ("bf16", 2048), ("bf16", 4096), ("int8", 1024), ("int8", 4096)):
        cases += [(dt, s, s, s, v) for v in ({}, {"direct_a": 1}, {"direct_a": 1, "grid_m": 1})[: 2 if dt == "bf16" else 3]]
        cases.append((dt, s, s, s, "torch"))
    feeds(rounds, cases)


def feeds(rounds=5, cases=None):
    """The tile feeds (plan amx_feed 0 / 1 / 2) and K tiles on 1 and 16 workers, in interleaved
    rounds (each variant in its own block after a pause; medians of `rounds`), torch in the same
    rounds; every variant checked against float64 / exact integers first."""
    pk = coopjit.peak()
    print(json.dumps({k: (v.get("single"), v.get("all")) for k, v in pk.items() if isinstance(v, dict)}))
    rng = np.random.default_rng(0)
    given, cases = cases, []
    fp = [{}, {"amx_prefetch": 0}, {"amx_prefetch": 2}, {"amx_feed": 2, "amx_prefetch": 2}]
    for dt, kts in (("bf16", (256, 2048)), ("int8", (512, 4096))):
        for kt in kts:
            cases += [(dt, 512, 512, 4096, {"threads": 1, "kt": kt, **v}) for v in (fp if kt > 512 or dt == "bf16" else fp[::3])]
    more = {512: [{"grid_m": 4}, {"grid_m": 16}, "prepacked"], 1024: [{"grid_m": 4}, "prepacked"]}
    for dt, s in (("bf16", 512), ("bf16", 1024), ("bf16", 4096), ("int8", 1024), ("int8", 4096)):
        cases += [(dt, s, s, s, v) for v in (fp[:1] + fp[2:] + (more.get(s, []) if dt == "bf16" else []))]
        cases.append((dt, s, s, s, "torch"))
    if given is not None:
        cases = given
    data, runs = {}, []
    for dt, m, n, k, plan in cases:
        if (dt, m, n, k) not in data:
            a, b = operands(rng, dt, m, n, k)
            data[(dt, m, n, k)] = (a, b, a.astype(np.float64) @ b.astype(np.float64))
        a, b, ref = data[(dt, m, n, k)]
        if plan == "torch":
            import torch
            torch.set_num_threads(coopjit.get_num_threads())
            ta, tb = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if dt == "bf16" else torch.from_numpy(a), \
                torch.from_numpy(b.view(np.int16)).view(torch.bfloat16) if dt == "bf16" else torch.from_numpy(b)
            f = (lambda ta=ta, tb=tb: torch._int_mm(ta, tb)) if dt == "int8" else (lambda ta=ta, tb=tb: torch.matmul(ta, tb))
            runs.append(((dt, m, n, k, "torch"), f, 0.0, ""))
            continue
        out = np.empty((m, n), np.int32 if dt == "int8" else np.float32)
        if plan == "prepacked":
            pw = coopjit.prepack(b)
            c = coopjit.matmul(a, pw, out=out)
            err = float(np.max(np.abs(c.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)
            runs.append(((dt, m, n, k, "prepacked B"), lambda a=a, pw=pw, out=out: coopjit.matmul(a, pw, out=out), err, ""))
            continue
        c = coopjit.matmul(a, b, out=out, plan=plan)
        err = float(np.max(np.abs(c.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)
        cf = coopjit.compile_gemm(m, n, k, a.dtype, plan=plan).config
        runs.append(((dt, m, n, k, json.dumps(plan)), lambda a=a, b=b, out=out, plan=plan: coopjit.matmul(a, b, out=out, plan=plan),
                     err, " ".join(f"{x}={cf[x]}" for x in ("kt", "grid_m", "threads"))))
    times = {r[0]: [] for r in runs}
    for _ in range(rounds):
        for key, f, _, _ in runs:
            time.sleep(0.05)
            f()
            t = time.perf_counter()
            f()
            one = max(time.perf_counter() - t, 1e-6)
            inner = max(1, int(0.05 / one))
            t = time.perf_counter()
            for _ in range(inner):
                f()
            times[key].append((time.perf_counter() - t) / inner)
    for key, _, err, cf in runs:
        dt, m, n, k, plan = key
        t = float(np.median(times[key]))
        rate = 2 * m * n * k / t / 1e9
        unit = "amx_bf16" if dt == "bf16" else "amx_int8"
        peak = (pk[unit]["single"] if '"threads": 1' in plan else pk[unit]["all"]) or float("nan")
        print(f"{dt:5} {m}x{n}x{k} {plan:<42} {t * 1e6:9.1f} us {rate:9.1f} G/s {rate / peak * 100:5.1f}% peak "
              f"spread {max(times[key]) / min(times[key]):4.2f} err {err:.1e} {cf}", flush=True)


if __name__ == "__main__":
    {"trace": trace, "feeds": feeds, "phases": phases, "local": local, "direct": direct}.get(sys.argv[1] if len(sys.argv) > 1 else "", main)()
