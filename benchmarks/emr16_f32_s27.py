"""f32 squares and the K split of small blocks on the 16-core Emerald Rapids host (issue 14, session
27): coopjit's plan against plan= variants and torch, each library in its own warm process, driven
block by block (for each case a block of calls after a pause, PAUSE, 0.3 s; the order reversed
every other round; medians [min-max] over the rounds), coopjit.peak()'s f32 figure from the same
run. One-thread cases run in processes pinned to one CPU (taskset). Every case is checked against
NumPy in float64 first (sampled rows for the squares). With TRACE, the pool's launch trace of some
cases: each launch's workers, join and per-share busy time (packing launch, then the nest's shares).

  python benchmarks/emr16_f32_s27.py drive [GROUPS]   (the driver; GROUPS comma-separated, default all)
  python benchmarks/emr16_f32_s27.py child LIB         (a worker: cj | torch | cj1 | torch1)
  ROUNDS=5 PAUSE=0.3 BLOCK_S=0.15 SHRINK=1 (SHRINK=8: a dry run on smaller shapes)
Recorded: benchmarks/recorded/issue14-emr16-f32-session27.txt."""
import json
import os
import subprocess
import sys
import time

import numpy as np

ROUNDS = int(os.environ.get("ROUNDS", "5"))
PAUSE = float(os.environ.get("PAUSE", "0.3"))
SECONDS = float(os.environ.get("BLOCK_S", "0.15"))
SHRINK = int(os.environ.get("SHRINK", "1"))
ONE_CPU = os.environ.get("ONE_CPU", "5")

KS = {"order": "k_outer", "pack": 0}
MI = {"order": "m_inner", "pack": 0}
# group: (dtype, M, N, K, rounds, a_pad, [(label, lib, plan, copy_a)]); copy_a False with plan None is
# main's code path exactly (the K split's copy of an aliased A off). That copy (and its private
# toggle _core._set_ksplit_copy_a) was in run 1's build (5c19c0d) only: it measured no better and
# was dropped, so in later builds copy_a does nothing and "main (copy_a off)" is the build's planner.
GROUPS = {
    "sq4096": ("float32", 4096, 4096, 4096, 3, 0, [
        ("auto", "cj", None, True), ("shares16", "cj", {"shares": 16}, True),
        ("kt128 nc1", "cj", {"kt": 128, "nc_tiles": 1}, True), ("kt256 nc1", "cj", {"kt": 256, "nc_tiles": 1}, True),
        ("kt2048", "cj", {"kt": 2048}, True), ("nc0", "cj", {"nc_tiles": 0}, True),
        ("mr8 nr48", "cj", {"mr": 8, "nr": 48}, True),
        ("t15", "cj", {"threads": 15}, True), ("torch", "torch", None, True)]),
    "sq8192": ("float32", 8192, 8192, 8192, 2, 0, [
        ("auto", "cj", None, True), ("torch", "torch", None, True)]),
    "sq2048": ("float32", 2048, 2048, 2048, 3, 0, [
        ("auto", "cj", None, True), ("kt256 nc1", "cj", {"kt": 256, "nc_tiles": 1}, True),
        ("shares8", "cj", {"shares": 8}, True),
        ("torch", "torch", None, True)]),
    "k64": ("float32", 64, 64, 8192, 4, 0, [
        ("main (copy_a off)", "cj", None, False), ("auto (copy_a on)", "cj", None, True),
        ("m_inner 6x64 ks16", "cj", dict(MI, ksplit=16, mr=6, nr=64), True),
        ("m_inner 6x64 ks32", "cj", dict(MI, ksplit=32, mr=6, nr=64), True),
        ("torch", "torch", None, True)]),
    "k64f64": ("float64", 64, 64, 8192, 3, 0, [
        ("main (copy_a off)", "cj", None, False), ("auto (copy_a on)", "cj", None, True),
        ("m_inner 6x32 ks16", "cj", dict(MI, ksplit=16, mr=6, nr=32), True),
        ("torch", "torch", None, True)]),
    "k64x128": ("float32", 64, 128, 8192, 3, 0, [
        ("main (copy_a off)", "cj", None, False), ("auto (copy_a on)", "cj", None, True),
        ("m_inner 6x64 ks16", "cj", dict(MI, ksplit=16, mr=6, nr=64), True), ("torch", "torch", None, True)]),
    "k128": ("float32", 128, 128, 4096, 3, 0, [
        ("main (copy_a off)", "cj", None, False), ("auto (copy_a on)", "cj", None, True),
        ("m_inner 6x64 ks16", "cj", dict(MI, ksplit=16, mr=6, nr=64), True), ("torch", "torch", None, True)]),
    "k16": ("float32", 16, 16, 65536, 3, 0, [
        ("main (copy_a off)", "cj", None, False), ("auto (copy_a on)", "cj", None, True),
        ("torch", "torch", None, True)]),
    "t1_1024": ("float32", 1024, 1024, 1024, 3, 0, [("auto", "cj1", None, True), ("torch", "torch1", None, True)]),
    # one part of the K split on one thread: A's rows 32 KiB apart (as in 64x64x8192), or 528 elements
    "t1_part": ("float32", 64, 64, 512, 3, 7680, [
        ("k_outer 11x32 (A 32 KiB rows)", "cj1", dict(KS, threads=1, mr=11, nr=32, kt=128), False),
        ("m_inner 6x64 (A 32 KiB rows)", "cj1", dict(MI, threads=1, mr=6, nr=64), False)]),
    "t1_partc": ("float32", 64, 64, 512, 3, 16, [
        ("k_outer 11x32 (A 2112 B rows)", "cj1", dict(KS, threads=1, mr=11, nr=32, kt=128), False),
        ("m_inner 6x64 (A 2112 B rows)", "cj1", dict(MI, threads=1, mr=6, nr=64), False)]),
}
TRACE = [("sq4096", "auto"), ("sq4096", "kt256 nc1"), ("k64", "main (copy_a off)"), ("k64", "m_inner 6x64 ks16")]
KEYS = ("error", "order", "mr", "nr", "kt", "threads", "split", "pack", "ksplit", "grid_m", "shares", "mc_tiles",
        "nc_tiles")


def s(v):
    return max(1, v // SHRINK)


def block(f, seconds=SECONDS):
    """Median seconds a call over blocks of back-to-back calls (one block of 2 calls past 50 ms)."""
    f()
    t = time.perf_counter()
    f()
    one = max(time.perf_counter() - t, 1e-7)
    blocks = 3 if one < 0.05 else 1
    inner = max(1 if one < 0.05 else 2, int(seconds / blocks / one))
    out = []
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(inner):
            f()
        out.append((time.perf_counter() - t) / inner)
    return float(np.median(out))


def operands(group):
    dt, m, n, k, _, pad, _ = GROUPS[group]
    m, n, k = (m, n, k) if m <= 128 and n <= 128 else (s(m), s(n), s(k))
    rng = np.random.default_rng(27)
    a = rng.uniform(-1, 1, (m, k + pad)).astype(dt)[:, :k]
    b = rng.uniform(-1, 1, (k, n)).astype(dt)
    return a, b


def child(lib):
    """Sets up its cases, then answers 'run KEY' / 'trace KEY' lines."""
    calls = {}
    one = lib.endswith("1")
    if lib.startswith("torch"):
        import torch
        torch.set_num_threads(1 if one else os.cpu_count())
    else:
        import coopjit
        from coopjit import _core
        from coopjit._arrays import gemm_types
        from coopjit._kernel_args import _overrides
        coopjit.set_num_threads(1 if one else os.cpu_count())
    for group, (dt, m, n, k, _, pad, cases) in GROUPS.items():
        mine = [c for c in cases if c[1] == lib]
        if not mine:
            continue
        a, b = operands(group)
        rows = np.arange(a.shape[0])
        if a.shape[0] > 256:
            rows = np.random.default_rng(1).choice(a.shape[0], 64, replace=False)
        ref = a[rows].astype(np.float64) @ b.astype(np.float64)
        for label, _, plan, copy_a in mine:
            key = f"{group} | {label}"
            c = np.empty((a.shape[0], b.shape[1]), a.dtype)
            if lib.startswith("torch"):
                ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
                f = (lambda ta=ta, tb=tb, tc=tc: torch.matmul(ta, tb, out=tc))
                cfg = f"torch {torch.__version__} threads {torch.get_num_threads()}"
            else:
                try:
                    types, cdt = gemm_types(a.dtype, b.dtype)
                    conf = _core.gemm_plan(a, b, c, False, list(types), _overrides(plan) if plan else {})
                except Exception as e:
                    conf = {"error": str(e)[:80]}

                toggle = getattr(_core, "_set_ksplit_copy_a", None)  # (run 1's build, 5c19c0d, only)

                def f(a=a, b=b, c=c, plan=plan, copy_a=copy_a, toggle=toggle):
                    if toggle:
                        toggle(copy_a)
                    coopjit.matmul(a, b, out=c, plan=plan)
                try:
                    f()
                except Exception as e:
                    print(json.dumps({"info": key, "text": f"refused: {e}"}), flush=True)
                    continue
                cfg = " ".join(f"{kk}={conf[kk]}" for kk in KEYS if kk in conf) + f" copy_a={copy_a}"
            c[...] = np.nan
            f()
            got = c[rows]
            err = float(np.max(np.abs(got.astype(np.float64) - ref)) / max(float(np.max(np.abs(ref))), 1e-300))
            ok = bool(np.isfinite(err)) and err < (1e-4 if a.dtype == np.float32 else 1e-10)
            print(json.dumps({"info": key, "text": f"err {err:.1e} {'ok' if ok else 'WRONG'} [{cfg}]"}), flush=True)
            calls[key] = f
    print(json.dumps({"ready": sorted(calls)}), flush=True)
    for line in sys.stdin:
        cmd, _, key = line.strip().partition(" ")
        if cmd == "run":
            print(json.dumps({"t": block(calls[key])}), flush=True)
        elif cmd == "trace":
            f = calls[key]
            f()
            _core._set_launch_trace(True)
            _core._launch_traces()
            out = []
            for _ in range(5):
                time.sleep(0.05)
                t0 = time.perf_counter_ns()
                f()
                t1 = time.perf_counter_ns()
                launches = _core._launch_traces()
                parts = []
                for tr in launches:
                    d = (np.array(tr["end_ns"]) - np.array(tr["start_ns"])) / 1e3
                    st = np.array(tr["start_ns"]) / 1e3
                    cpu = np.array(tr["cpu_time_ns"]) / 1e3
                    parts.append(f"[{tr['workers']}w join {tr['join_ns'] / 1e3:.0f} start<= {st.max():.0f} busy "
                                 f"{d.min():.0f}/{np.median(d):.0f}/{d.max():.0f} "
                                 f"cpu {cpu.sum() / max(d.sum(), 1e-9):.2f}]")
                out.append(f"call {(t1 - t0) / 1e3:.0f} us: " + " ".join(parts))
            _core._set_launch_trace(False)
            print(json.dumps({"t": out}), flush=True)


def drive(groups):
    libs = sorted({c[1] for g in groups for c in GROUPS[g][6]})
    procs, keys = {}, {}
    import coopjit
    pk = coopjit.peak()["f32_fma"]
    print(f"coopjit {coopjit.__version__} from {os.path.dirname(coopjit.__file__)}; peak() f32 FMA one thread "
          f"{pk['single']:.1f} / all {pk['all']:.1f} GF/s ({pk['threads']} threads)", flush=True)
    for lib in libs:
        cmd = [sys.executable, __file__, "child", lib]
        if lib.endswith("1"):
            cmd = ["taskset", "-c", ONE_CPU] + cmd
        env = dict(os.environ, GROUPS_SEL=",".join(groups))
        procs[lib] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, env=env)
    for lib, p in procs.items():
        for line in p.stdout:
            msg = json.loads(line)
            if "ready" in msg:
                keys[lib] = set(msg["ready"])
                break
            print(f"  {lib:6s} {msg['info']}: {msg['text']}", flush=True)

    def ask(lib, cmd, key):
        time.sleep(PAUSE)
        procs[lib].stdin.write(f"{cmd} {key}\n")
        procs[lib].stdin.flush()
        return json.loads(procs[lib].stdout.readline())["t"]

    times = {}
    for g in groups:
        dt, m, n, k, rounds, pad, cases = GROUPS[g]
        items = [(c[1], f"{g} | {c[0]}") for c in cases if f"{g} | {c[0]}" in keys.get(c[1], ())]
        t0 = time.time()
        for r in range(min(rounds, ROUNDS)):
            for lib, key in (items[::-1] if r % 2 else items):
                times.setdefault(key, []).append(ask(lib, "run", key))
        flop = 2.0 * m * n * k if m <= 128 and n <= 128 else 2.0 * s(m) * s(n) * s(k)
        t1 = [lib for lib, _ in items if lib.endswith("1")]
        peak = pk["single"] if t1 else pk["all"]
        base = float(np.median(times[items[0][1]]))
        print(f"== {g}: {dt} {m}x{n}x{k}{f' (A rows {k + pad} apart)' if pad else ''}, "
              f"{'1 thread' if t1 else '16 threads'}; {len(times[items[0][1]])} rounds, {time.time() - t0:.0f} s; "
              f"median [min-max] us, GF/s, % of peak() {peak:.0f}", flush=True)
        for lib, key in items:
            v = np.array(times[key])
            med = float(np.median(v))
            print(f"  {key.split(' | ')[1]:26s} {med * 1e6:11.1f} [{v.min() * 1e6:11.1f}-{v.max() * 1e6:11.1f}] "
                  f"{flop / med / 1e9:8.1f} GF/s {100 * flop / med / 1e9 / peak:5.1f}%  {base / med:5.2f}x first",
                  flush=True)
        for tg, tl in TRACE:
            if tg == g and f"{g} | {tl}" in keys.get("cj", ()):
                for line in ask("cj", "trace", f"{g} | {tl}"):
                    print(f"    trace {tl}: {line}", flush=True)
    for p in procs.values():
        p.stdin.close()
        p.wait(timeout=60)


if __name__ == "__main__":
    if sys.argv[1] == "child":
        sel = os.environ.get("GROUPS_SEL")
        if sel:
            GROUPS = {g: v for g, v in GROUPS.items() if g in sel.split(",")}
        child(sys.argv[2])
    else:
        gs = sys.argv[2].split(",") if len(sys.argv) > 2 else list(GROUPS)
        GROUPS_ALL = GROUPS
        drive(gs)
