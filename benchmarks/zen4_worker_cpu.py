"""2 threads, one process: plans in alternating blocks (0.3 s pause before each); per plan the median
wall time per call over rounds, and from the launch trace the busier worker's median CPU time and the calls
where both workers ran undisturbed on two CPUs (wall of each within 3% + 3 us of its CPU time): what a
plan costs a worker on a machine loaded by other processes. Issue 14, session 21.
    python benchmarks/zen4_worker_cpu.py 256,512,1024 '{"default": {}, "own_a": {"own_a": 1}}' 5 bf16|f32|int8"""
import sys, time, json, numpy as np, ml_dtypes, coopjit
from coopjit import _core
coopjit.set_num_threads(2)
sizes = [int(x) for x in sys.argv[1].split(",")]; plans = json.loads(sys.argv[2]); rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
dt = sys.argv[4] if len(sys.argv) > 4 else "bf16"
npdt = {"bf16": ml_dtypes.bfloat16, "f32": np.float32, "int8": np.int8}[dt]
print(open("/proc/loadavg").read().strip(), dt)
for n in sizes:
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((n, n), dtype=np.float32) * 30).astype(npdt); b = (rng.standard_normal((n, n), dtype=np.float32) * 30).astype(npdt)
    c = np.empty((n, n), np.int32 if dt == "int8" else npdt)
    ks = {k: coopjit.compile_gemm(n, n, n, npdt, plan=v or None) for k, v in plans.items()}
    for k in ks.values(): k(a, b, c)
    t = time.perf_counter(); ks[next(iter(ks))](a, b, c); calls = max(3, min(400, int(0.1 / (time.perf_counter() - t))))
    wall = {k: [] for k in ks}; cpu = {k: [] for k in ks}; und = {k: [] for k in ks}
    for r in range(rounds):
        for name, k in ks.items():
            time.sleep(0.3); k(a, b, c)
            t = time.perf_counter()
            for _ in range(calls): k(a, b, c)
            wall[name].append((time.perf_counter() - t) / calls)
            _core._set_launch_trace(True); _core._launch_traces()
            for _ in range(min(calls, 30)):
                t0 = time.perf_counter_ns(); k(a, b, c); t1 = time.perf_counter_ns()
                for tr in _core._launch_traces():
                    cpu[name].append(max(tr["cpu_time_ns"]))
                    if all(tr["end_ns"][w] - tr["start_ns"][w] <= 1.03 * tr["cpu_time_ns"][w] + 3000 for w in range(tr["workers"])) and tr["cpu"][0] != tr["cpu"][-1]:
                        und[name].append(t1 - t0)
            _core._set_launch_trace(False)
    fl = 2 * n**3
    for name in ks:
        cf = ks[name].config
        w = np.median(wall[name]); u = np.median(und[name]) / 1e9 if und[name] else float("nan")
        print(f"{n} {name:>14}: wall {w*1e6:8.0f} us {fl/w/1e9:5.0f} GF/s (best {fl/min(wall[name])/1e9:5.0f}); worker cpu {np.median(cpu[name])/1e3:8.0f} us; "
              f"undisturbed {len(und[name])} calls {u*1e6:8.0f} us {fl/u/1e9:5.0f} GF/s  [mr{cf['mr']} nr{cf['nr']} kt{cf['kt']} mc{cf['mc_tiles']} inl{cf['inline_b']} own{cf.get('own_a')}]", flush=True)
print(open("/proc/loadavg").read().strip())
