"""Small and mid products on many cores (issue 14, session 17): the per-call fixed cost, the
pool's launch, and plan variants against NumPy / torch (16 threads) in the same run. Plan variants
go in through the tuned-plan table (coopjit._core.set_tuned_plan on the product's signature), so
every call takes matmul's plan=None fast path (plan= adds tens of microseconds a call); variants
with a third field False run with the pool's hold off (coopjit._core._set_pool_hold: the waits of
earlier sessions). Each library / variant timed in blocks of calls after a pause, medians of
rounds; then the launch trace of each multi-worker variant (its start, the workers' start
latency and busy time).

  python benchmarks/small_calls_16core.py run1   fixed cost + the bench rows' plan variants (main's build)
  python benchmarks/small_calls_16core.py run2   the branch's rules against main's choices
  python benchmarks/small_calls_16core.py fixed|rows|amx|small|mid   one part
  SHRINK=8 ROUNDS=1 PAUSE=0.01 ...                a dry run on smaller shapes
Recorded: benchmarks/recorded/issue14-emr16-small-calls-session17.txt."""
import os, sys, time
import numpy as np
import coopjit
from _rounds import gapped, timed
from coopjit import _core
from coopjit._kernel_args import _overrides
from coopjit._arrays import gemm_types
import torch
torch.set_num_threads(16)
coopjit.set_num_threads(16)
PART = sys.argv[1] if len(sys.argv) > 1 else "run2"
ROUNDS = int(os.environ.get("ROUNDS", "5"))
PAUSE = float(os.environ.get("PAUSE", "0.3"))
rng = np.random.default_rng(0)
print(f"coopjit {coopjit.__version__} numpy {np.__version__} torch {torch.__version__} threads {coopjit.get_num_threads()}",
      flush=True)


def use(a, b, plan):
    """Sets (plan dict) or clears (None) the tuned plan of a @ b; returns the config calls take."""
    types, dt = gemm_types(a.dtype, b.dtype)
    c = np.empty((a.shape[0], b.shape[1]), dt)
    sig = _core.gemm_signature(a, b, c, False, list(types))
    _core.set_tuned_plan(sig, _overrides(plan) if plan else {})
    k = coopjit.compile_gemm(a.shape[0], b.shape[1], a.shape[1], a.dtype)
    if plan and not k.tuned:
        print(f"  !! tuned plan {plan} not taken for {sig}", flush=True)
    return k.config


KEYS = ("layout", "order", "mr", "nr", "kt", "threads", "split", "pack", "inline_b", "grid_m", "shares", "mc_tiles",
        "nc_tiles", "amx", "direct_a", "fixed")


def cfgs(c):
    return " ".join(f"{k}={c[k]}" for k in KEYS if k in c)


def trace(f, reps=7, gap=0.0):
    _core._set_launch_trace(True); rows = []
    for _ in range(reps):
        if gap: time.sleep(gap)
        else: f()
        t0 = time.perf_counter_ns(); f(); t1 = time.perf_counter_ns()
        tr = _core._launch_trace(); s = np.array(tr["start_ns"], float); e = np.array(tr["end_ns"], float)
        d = e - s
        rows.append((t1 - t0, tr["join_ns"], np.median(s), s.max(), np.median(d), d.max(), tr["workers"], np.mean(tr["slept"])))
    _core._set_launch_trace(False)
    r = np.median(np.array(rows, float), axis=0)
    return (f"call {r[0]/1e3:.1f} us, launch {r[1]/1e3:.1f} us ({int(r[6])} workers, slept {r[7]:.2f}): start median "
            f"{r[2]/1e3:.2f} max {r[3]/1e3:.2f} us, busy median {r[4]/1e3:.2f} max {r[5]/1e3:.2f} us")


def row(title, a, b, variants, lib_np=True, lib_torch=True, int8=False, rounds=ROUNDS, seconds=0.05, do_trace=True,
        call=None, torch_call=None):
    """variants: list of (name, plan or None); rounds alternate them with numpy / torch."""
    m, k = a.shape; n = b.shape[1]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    names, fns = [], []
    for v in variants:
        name, plan = v[0], v[1]
        _core._set_pool_hold(v[2] if len(v) > 2 else True)
        cfg = use(a, b, plan)
        c = (call or (lambda: coopjit.matmul(a, b)))()
        err = float(np.abs(np.asarray(c, np.float64) - ref).max() / max(np.abs(ref).max(), 1e-300)) if call is None else float("nan")
        print(f"  {title} {name}: err {err:.1e} [{cfgs(cfg)}]", flush=True)
        if do_trace and int(cfg["threads"]) > 1:
            print(f"    trace b2b: {trace(call or (lambda: coopjit.matmul(a, b)))}", flush=True)
        names.append(name)
        fns.append(((plan, v[2] if len(v) > 2 else True), call or (lambda: coopjit.matmul(a, b))))
    ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch_call is None else (None, None)
    if lib_np:
        names.append("numpy"); fns.append(("lib", lambda: np.matmul(a, b)))
    if lib_torch:
        names.append("torch"); fns.append(("lib", torch_call or ((lambda: torch._int_mm(ta, tb)) if int8 else (lambda: torch.matmul(ta, tb)))))
    res = {nm: [] for nm in names}
    for r in range(rounds):
        for nm, (plan, f) in zip(names, fns):
            if plan != "lib":
                use(a, b, plan[0]); _core._set_pool_hold(plan[1])
            time.sleep(PAUSE)
            res[nm].append(timed(f, 5, seconds))
    use(a, b, None); _core._set_pool_hold(True)
    base = np.median(res[names[0]])
    for nm in names:
        t = float(np.median(res[nm]))
        print(f"{title:22} {nm:34} {t*1e6:9.2f} us  {base/t:5.2f}x default  "
              + (f"{np.median(res['numpy'])/t:5.2f}x numpy  " if lib_np else "")
              + (f"{np.median(res['torch'])/t:5.2f}x torch  " if lib_torch else "")
              + f"(rounds {' '.join(f'{x*1e6:.1f}' for x in res[nm])})", flush=True)
    return res


S = int(os.environ.get("SHRINK", "1"))  # (a dry run: big dims / S)


def f32(m, k, n):
    m, k, n = (max(1, x // S) if x > 64 else x for x in (m, k, n))
    return rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)



if PART in ("fixed", "run1"):
    print("== fixed cost per call (back to back, blocks of calls; 'gap': one call after 2 ms idle)", flush=True)
    a, b = f32(8, 8, 8)
    o = np.empty((8, 8), np.float32)
    ta, tb, to = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(o)
    fns = {"python no-op call": lambda: None, "np.empty 8x8": lambda: np.empty((8, 8), np.float32),
           "coopjit.matmul 8x8x8": lambda: coopjit.matmul(a, b), "_core.matmul_fast(a, b)": lambda: _core.matmul_fast(a, b),
           "_core.matmul_fast(a, b, out)": lambda: _core.matmul_fast(a, b, o),
           "coopjit.matmul(plan={})": lambda: coopjit.matmul(a, b, plan={"mr": 8}),
           "np.matmul 8x8x8": lambda: np.matmul(a, b), "np.matmul(out=)": lambda: np.matmul(a, b, out=o),
           "torch.matmul 8x8x8": lambda: torch.matmul(ta, tb), "torch.matmul(out=)": lambda: torch.matmul(ta, tb, out=to)}
    res = {k: [] for k in fns}
    for r in range(ROUNDS):
        for k, f in fns.items():
            time.sleep(0.1); res[k].append(timed(f, 5, 0.03))
    for k in fns:
        print(f"  {k:32} {np.median(res[k])*1e6:8.3f} us  (rounds {' '.join(f'{x*1e6:.2f}' for x in res[k])})", flush=True)
    # The launch: 256x16x16 (16 tiles of 16 x 16, ~8 kFLOP each) on 1-16 workers.
    a, b = f32(256, 16, 16)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    out = {}
    for t in (1, 2, 4, 8, 16):
        cfg = use(a, b, {"threads": t, "split": "dp"})
        f = lambda: coopjit.matmul(a, b)
        c = f(); ref = a.astype(np.float64) @ b.astype(np.float64)
        err = float(np.abs(c - ref).max() / np.abs(ref).max())
        b2b = [timed(f, 5, 0.03) for _ in range(3)]
        gap = gapped(f)
        tr = trace(f) if t > 1 else ""
        trg = trace(f, gap=0.002) if t > 1 else ""
        print(f"  256x16x16 threads {t:2}: b2b {np.median(b2b)*1e6:7.2f} us, after 2 ms idle {gap*1e6:7.2f} us  err {err:.0e} "
              f"[{cfgs(cfg)}]\n    trace b2b: {tr}\n    trace gap: {trg}", flush=True)
    use(a, b, None)
    for nm, f in (("numpy", lambda: np.matmul(a, b)), ("torch", lambda: torch.matmul(ta, tb))):
        print(f"  256x16x16 {nm}: b2b {np.median([timed(f, 5, 0.03) for _ in range(3)])*1e6:7.2f} us, after 2 ms idle "
              f"{gapped(f)*1e6:7.2f} us", flush=True)

if PART in ("rows", "run1"):
    print("== rows", flush=True)
    a, b = f32(64, 64, 64)
    row("f32 64x64x64", a, b, [("default", None), ("threads 2 dp", {"threads": 2, "split": "dp"}),
                               ("threads 2 sk+dp", {"threads": 2, "split": "sk+dp"}),
                               ("threads 4 dp", {"threads": 4, "split": "dp"})], seconds=0.03)
    a, b = f32(100, 250, 37)
    row("f32 100x37x250", a, b, [("default", None), ("threads 1", {"threads": 1}), ("threads 4 dp", {"threads": 4, "split": "dp"}),
                                 ("threads 8 dp", {"threads": 8, "split": "dp"}), ("threads 16 sk+dp", {"threads": 16, "split": "sk+dp"}),
                                 ("threads 4 mr 8", {"threads": 4, "split": "dp", "mr": 8})], seconds=0.03)
    a, b = f32(513, 700, 129)
    row("f32 513x129x700", a, b, [("default", None), ("grid_m 16", {"grid_m": 16}), ("grid_m 4", {"grid_m": 4}),
                                  ("threads 8", {"threads": 8}), ("threads 12", {"threads": 12}),
                                  ("nr 32", {"nr": 32}), ("nr 64", {"nr": 64}), ("nr 32 grid_m 16", {"nr": 32, "grid_m": 16}),
                                  ("unpacked", {"pack": False}), ("shares 2", {"shares": 2})])
    a, b = f32(1024, 1024, 1024)
    row("f32 1024^3", a, b, [("default", None), ("shares 1", {"shares": 1}), ("shares 2", {"shares": 2}),
                             ("shares 8", {"shares": 8}), ("nc_tiles 1", {"nc_tiles": 1}), ("kt 512", {"kt": 512}),
                             ("grid_m 16", {"grid_m": 16})], lib_np=True, seconds=0.1)
    a, b = f32(1, 4096, 4096)
    row("f32 1x4096x4096", a, b, [("default", None), ("threads 16", {"threads": 16}), ("ksplit 16", {"ksplit": 16}),
                                  ("ksplit 12", {"ksplit": 12}), ("ksplit 8", {"ksplit": 8}),
                                  ("ksplit 16 kt 64", {"ksplit": 16, "kt": 64})],
        seconds=0.1)
    a = rng.integers(-128, 128, (64, 4096 // S), dtype=np.int8); b = rng.integers(-128, 128, (4096 // S, 4096 // S), dtype=np.int8)
    row("int8 64x4096x4096", a, b, [("default", None), ("inline_b", {"inline_b": True}),
                                    ("inline_b grid_m 1", {"inline_b": True, "grid_m": 1}), ("amx 0", {"amx": 0})],
        lib_np=False, int8=True, seconds=0.1)

def i8(m, k, n):
    return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)


def bf(m, k, n):
    import ml_dtypes
    x, y = f32(m, k, n)
    return x.astype(ml_dtypes.bfloat16), y.astype(ml_dtypes.bfloat16)


OFF = False  # hold off: the pool's earlier waits
if PART in ("amx", "run2"):
    print("== AMX skinny: inline_b (branch default) against main's packing launch", flush=True)
    a, b = i8(64, 4096, 4096)
    row("int8 64x4096x4096", a, b, [("branch", None), ("main (inline_b 0)", {"inline_b": False}),
                                    ("branch, hold off", None, OFF)], lib_np=False, int8=True, seconds=0.1)
    a, b = bf(64, 4096, 4096)
    tdt = torch.bfloat16
    ta, tb = torch.from_numpy(a.astype(np.float32)).to(tdt), torch.from_numpy(b.astype(np.float32)).to(tdt)
    row("bf16 64x4096x4096", a, b, [("branch", None), ("main (inline_b 0)", {"inline_b": False})], lib_np=False,
        seconds=0.1, torch_call=lambda: torch.matmul(ta, tb))
    a, b = i8(32, 4096, 4096)
    row("int8 32x4096x4096", a, b, [("branch", None), ("main (inline_b 0)", {"inline_b": False})], lib_np=False, int8=True,
        seconds=0.1)
    a, b = i8(48, 4096, 4096)
    row("int8 48x4096x4096", a, b, [("branch", None), ("main (inline_b 0)", {"inline_b": False})], lib_np=False, int8=True,
        seconds=0.1)
    a, b = i8(64, 4096, 1024)
    row("int8 64x1024x4096", a, b, [("branch", None), ("main (inline_b 0)", {"inline_b": False})], lib_np=False, int8=True,
        seconds=0.1)
    a, b = bf(16, 4096, 4096)
    ta, tb = torch.from_numpy(a.astype(np.float32)).to(tdt), torch.from_numpy(b.astype(np.float32)).to(tdt)
    row("bf16 16x4096x4096", a, b, [("branch", None), ("main (inline_b 0)", {"inline_b": False})], lib_np=False,
        seconds=0.1, torch_call=lambda: torch.matmul(ta, tb))
    # the bench's W8A8 row: one fused kernel, through plan= on both sides (the same per-call cost)
    import ml_dtypes
    a, b = i8(64, 4096, 4096)
    sc = rng.uniform(0.001, 0.002, 4096).astype(np.float32); bi = rng.standard_normal(4096).astype(np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    tsc, tbi = torch.from_numpy(sc), torch.from_numpy(bi)
    ref = (a.astype(np.float64) @ b.astype(np.float64)) * sc + bi
    for nm, pl in (("plan inline_b 1", {"inline_b": True}), ("plan inline_b 0", {"inline_b": False})):
        got = coopjit.matmul(a, b, scale=sc, bias=bi, out_dtype=ml_dtypes.bfloat16, plan=pl).astype(np.float64)
        print(f"  W8A8 {nm}: err {np.abs(got - ref).max() / np.abs(ref).max():.1e}", flush=True)
    res = {"plan inline_b 1": [], "plan inline_b 0": [], "torch": []}
    fns = {"plan inline_b 1": lambda: coopjit.matmul(a, b, scale=sc, bias=bi, out_dtype=ml_dtypes.bfloat16, plan={"inline_b": True}),
           "plan inline_b 0": lambda: coopjit.matmul(a, b, scale=sc, bias=bi, out_dtype=ml_dtypes.bfloat16, plan={"inline_b": False}),
           "torch": lambda: (torch._int_mm(ta, tb) * tsc + tbi).to(torch.bfloat16)}
    for r in range(ROUNDS):
        for k, f in fns.items():
            time.sleep(PAUSE); res[k].append(timed(f, 5, 0.1))
    for k in fns:
        t = np.median(res[k])
        print(f"W8A8 64x4096x4096 fused {k:20} {t*1e6:9.2f} us  {np.median(res['plan inline_b 0'])/t:5.2f}x inline_b 0  "
              f"{np.median(res['torch'])/t:5.2f}x torch  (rounds {' '.join(f'{x*1e6:.1f}' for x in res[k])})", flush=True)

if PART in ("small", "run2"):
    print("== small products: every core from 1.5 MFLOP on 8+ cores (branch) against main's 2 workers", flush=True)
    a, b = f32(100, 250, 37)
    row("f32 100x37x250", a, b, [("branch", None), ("main (threads 2)", {"threads": 2}), ("threads 16 dp", {"threads": 16, "split": "dp"}),
                                 ("threads 8 dp", {"threads": 8, "split": "dp"}), ("branch, hold off", None, OFF)], seconds=0.03)
    a, b = a.astype(np.float64), b.astype(np.float64)
    row("f64 100x37x250", a, b, [("branch", None), ("main (threads 2)", {"threads": 2}), ("threads 8 dp", {"threads": 8, "split": "dp"})],
        seconds=0.03)
    a, b = f32(64, 200, 64)
    row("f32 64x64x200", a, b, [("branch", None), ("main (threads 2)", {"threads": 2}), ("threads 8 dp", {"threads": 8, "split": "dp"})],
        seconds=0.03)
    a, b = f32(128, 64, 128)
    row("f32 128x128x64", a, b, [("branch", None), ("main (threads 2)", {"threads": 2}), ("threads 8 dp", {"threads": 8, "split": "dp"})],
        seconds=0.03)
    a, b = f32(64, 64, 64)
    row("f32 64x64x64", a, b, [("branch (1)", None), ("threads 2 dp", {"threads": 2, "split": "dp"}),
                               ("threads 4 dp", {"threads": 4, "split": "dp"}), ("threads 8 dp", {"threads": 8, "split": "dp"})],
        seconds=0.03)
    a, b = f32(96, 64, 96)
    row("f32 96x96x64", a, b, [("branch (1)", None), ("threads 4 dp", {"threads": 4, "split": "dp"}),
                               ("threads 8 dp", {"threads": 8, "split": "dp"}), ("threads 16", {"threads": 16})], seconds=0.03)

if PART in ("mid", "run2"):
    print("== mid / big: the pool's hold (branch) against main's waits, and plan variants for the next rules", flush=True)
    a, b = f32(1, 4096, 4096)
    row("f32 1x4096x4096", a, b, [("branch", None), ("hold off (main)", None, OFF), ("threads 16", {"threads": 16}),
                                  ("ksplit 16", {"ksplit": 16}), ("ksplit 12", {"ksplit": 12})], seconds=0.1)
    a, b = f32(513, 700, 129)
    row("f32 513x129x700", a, b, [("branch", None), ("hold off (main)", None, OFF), ("unpacked", {"pack": False}),
                                  ("grid_m 16", {"grid_m": 16})])
    a, b = f32(1000, 1000, 130)
    row("f32 1000x130x1000", a, b, [("branch", None), ("unpacked", {"pack": False}), ("grid_m 16", {"grid_m": 16})])
    a, b = f32(3000, 200, 500)
    row("f32 3000x500x200", a, b, [("branch", None), ("hold off (main)", None, OFF), ("unpacked", {"pack": False})], seconds=0.1)
    a, b = f32(512, 512, 512)
    row("f32 512^3", a, b, [("branch", None), ("unpacked", {"pack": False})], seconds=0.1)
    a, b = f32(1024, 1024, 1024)
    row("f32 1024^3", a, b, [("branch (shares 4)", None), ("hold off (main)", None, OFF), ("shares 8", {"shares": 8}),
                             ("shares 16", {"shares": 16})], seconds=0.1)
    a, b = f32(2048, 2048, 2048)
    row("f32 2048^3", a, b, [("branch (shares 4)", None), ("shares 8", {"shares": 8})], lib_np=False, seconds=0.2, do_trace=False)
    a, b = f32(4096, 4096, 4096)
    row("f32 4096^3", a, b, [("branch (shares 4)", None), ("shares 8", {"shares": 8})], lib_np=False, seconds=0.3, do_trace=False,
        rounds=3)
