"""Skinny f32 / f64 products on many cores (issue 14): the default plan against the unpacked k_outer walk
(plan order="k_outer") and NumPy, blocks of calls after a pause (median of 5). Where B's rows lie a multiple
of 4 KiB apart the planner packs B by its reader (inline_b) on 8+ cores. Usage: python benchmarks/skinny_alias.py
(recorded: benchmarks/recorded/issue14-emr16-skinny-session15.txt)."""
import time, numpy as np, coopjit
rng = np.random.default_rng(0)
def blk(f, n=5, reps=5):
    ts = []
    for _ in range(reps):
        time.sleep(0.3); f()
        t0 = time.perf_counter()
        for _ in range(n): f()
        ts.append((time.perf_counter() - t0) / n)
    return sorted(ts)[len(ts) // 2]
for dt, (m, k, n) in [(np.float32, s) for s in [(64, 4096, 4096), (16, 4096, 4096), (32, 8192, 2048), (64, 4096, 1024), (64, 4096, 4000)]] + \
                     [(np.float64, (64, 4096, 2048)), (np.float64, (32, 4096, 4096))]:
    a = rng.standard_normal((m, k)).astype(dt); b = rng.standard_normal((k, n)).astype(dt)
    ref = a.astype(np.float64) @ b
    c = coopjit.matmul(a, b); err = np.abs(c - ref).max() / np.abs(ref).max()
    cfg = coopjit.compile_gemm(m, n, k, dt).config
    tn = blk(lambda: a @ b); tk = blk(lambda: coopjit.matmul(a, b, plan={"order": "k_outer"})); td = blk(lambda: coopjit.matmul(a, b))
    print(f"{np.dtype(dt).name} {m}x{k}x{n}: numpy {tn*1e6:.0f} us | k_outer {tk*1e6:.0f} ({tn/tk:.2f}x) | default "
          f"{td*1e6:.0f} ({tn/td:.2f}x; pack {cfg['pack']}, inline_b {cfg['inline_b']}, order {cfg['order']}) err {err:.1e}", flush=True)
