"""One Hopper product of the shapes in tests/test_gpu_ntile.py that stopped finishing on the H100 in
session 23 (benchmarks/recorded/session23-h100-gpu-tests.md): bf16 in, bf16 (or f32) out, checked
against NumPy in float64 (f16 in: a seventh argument f16); prints the plan and the error, or hangs. Run it under a timeout:

    timeout 15 python scripts/gpu_ntile_hang_probe.py 4300 1000 200 '{"layout":"col","sg_m":8,"nr":136}'
    timeout 15 python scripts/gpu_ntile_hang_probe.py M N K PLANJSON [1 (trans_b)] [f32] [f16]
    timeout 15 python scripts/gpu_ntile_hang_probe.py 4300 1000 136 '{"layout":"col","sg_m":8,"nr":200}' 1 f32 f16
"""
import json, sys, time
import numpy as np, ml_dtypes, coopjit
m, n, k = map(int, sys.argv[1:4]); plan = json.loads(sys.argv[4])
tb = len(sys.argv) > 5 and sys.argv[5] == "1"
out = np.float32 if len(sys.argv) > 6 and sys.argv[6] == "f32" else ml_dtypes.bfloat16
dt = np.float16 if len(sys.argv) > 7 and sys.argv[7] == "f16" else ml_dtypes.bfloat16
kern = coopjit.compile_gemm(m, n, k, dt, device="cuda:0", out_dtype=out, trans_b=tb, plan=plan or None)
cfg = kern.config
rng = np.random.default_rng(0)
a = rng.uniform(-1, 1, (m, k)).astype(dt); b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(dt)
t0 = time.perf_counter(); c = np.asarray(kern(a, b), np.float64); t = time.perf_counter() - t0
b64 = b.astype(np.float64); ref = a.astype(np.float64) @ (b64.T if tb else b64)
print(f"OK {m}x{n}x{k} {plan} tile {cfg['mr']}x{cfg['nr']} sg_m {cfg['sg_m']} split {cfg['split']} pers {cfg['persistent']} "
      f"ws {cfg['ws']} err {np.abs(c - ref).max():.3g} in {t:.3f} s", flush=True)
