"""Session 26 (issue 14): one thread of coopjit AMX (plain / prepacked B / prepack alone, plan
variants) against coopjit.peak(), and bf16 64x4096x4096 on 16 threads against torch in blocks
and gapped calls.

    taskset -c 3 python benchmarks/amx_s26.py one ; python benchmarks/amx_s26.py skinny

Recorded: benchmarks/recorded/issue14-emr16-amx-session26.txt."""
import json, sys, time, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import coopjit
from _rounds import operands, timed, gapped
part = sys.argv[1]
rng = np.random.default_rng(0)
if part == "one":
    pk = coopjit.peak()
    print("peak single/all:", {k: (round(v["single"]), round(v["all"])) for k, v in pk.items() if k.startswith("amx")}, flush=True)
    for dt in ("bf16", "int8"):
        peak = pk["amx_bf16" if dt == "bf16" else "amx_int8"]["single"]
        for (m, n, k) in ((512, 512, 4096), (2048, 2048, 2048)):
            a, b = operands(rng, dt, m, n, k)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            fl = 2 * m * n * k
            for v in ({}, {"amx_prefetch": 0}, {"kt": 512}, {"kt": 1024, "mc_tiles": 4}):
                plan = {"threads": 1, **v}
                pb = coopjit.prepack(b, plan=plan)
                for name, f in (("plain", lambda: coopjit.matmul(a, b, plan=plan)),
                                ("prepackedB", lambda: coopjit.matmul(a, pb, plan=plan)),
                                ("prepack only", lambda: coopjit.prepack(b, plan=plan))):
                    if name != "prepack only":
                        c = f(); err = float(np.max(np.abs(c.astype(np.float64) - ref)) / np.max(np.abs(ref)))
                    else:
                        err = 0.0
                    time.sleep(0.1)
                    t = timed(f, seconds=0.3, blocks=5, clock=time.thread_time)
                    r = fl / t / 1e9
                    print(f"{dt} {m}x{n}x{k} {json.dumps(v):32} {name:13} {t*1e3:8.3f} ms {r:7.0f} G/s {100*r/peak:5.1f}% err {err:.1e}", flush=True)
            cf = coopjit.compile_gemm(m, n, k, a.dtype, plan={"threads": 1}).config
            print("   plan:", {kk: cf[kk] for kk in ("kt", "kb", "mc_tiles", "nc_tiles", "amx_prefetch", "order") if kk in cf}, flush=True)
elif part == "skinny":
    import torch
    torch.set_num_threads(16)
    m, n, k = 64, 4096, 4096
    a, b = operands(rng, "bf16", m, n, k)
    ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16); tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
    t0 = time.perf_counter(); c = coopjit.matmul(a, b); print(f"first call (compile) {1e3*(time.perf_counter()-t0):.1f} ms")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    print("err", float(np.max(np.abs(c.astype(np.float64) - ref)) / np.max(np.abs(ref))))
    print("plan", {kk: v for kk, v in coopjit.compile_gemm(m, n, k, a.dtype).config.items() if kk in ("amx", "kt", "kb", "mc_tiles", "shares", "direct_a", "grid_m", "grid_n", "threads", "order", "ksplit")})
    res = {}
    for rnd in range(5):
        for name, f in ((("coopjit", lambda: coopjit.matmul(a, b)), ("torch", lambda: ta @ tb)) if rnd % 2 == 0 else (("torch", lambda: ta @ tb), ("coopjit", lambda: coopjit.matmul(a, b)))):
            time.sleep(0.3)
            tb_ = timed(f, blocks=5, seconds=0.3)
            time.sleep(0.3)
            tg = gapped(f, n=20, gap=0.3 / 20 * 0 + 0.01)
            res.setdefault(name, []).append((tb_, tg))
            print(f"round {rnd} {name:8} blocks {tb_*1e6:8.0f} us  gapped(10ms) {tg*1e6:8.0f} us", flush=True)
    for name, v in res.items():
        print(f"{name}: blocks median {1e6*np.median([x[0] for x in v]):.0f} us [{1e6*min(x[0] for x in v):.0f}-{1e6*max(x[0] for x in v):.0f}], gapped median {1e6*np.median([x[1] for x in v]):.0f} us")
