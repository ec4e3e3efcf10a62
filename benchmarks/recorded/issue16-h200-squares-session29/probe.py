"""hsq (session 29): SM clock / power / clock-event reasons sampled by nvidia-smi (50 ms) while each
product runs for SECONDS back to back (coopjit's plan vs torch.matmul), and the rate reached.
    python probe.py OUT.md [SECONDS]"""
import statistics, subprocess, sys, time
import ml_dtypes, numpy as np, torch
import coopjit

def sample(seconds, fn):
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,clocks_event_reasons.active",
                            "--format=csv,noheader,nounits", "-lms", "50"], stdout=subprocess.PIPE, text=True)
    t0 = time.perf_counter(); calls = 0; t_mid = None
    while True:
        for _ in range(10):
            fn()
        torch.cuda.synchronize(); calls += 10
        t = time.perf_counter() - t0
        if t_mid is None and t > seconds / 3:
            t_mid, c_mid = t, calls
        if t > seconds:
            break
    smi.terminate(); out = smi.communicate()[0]
    rows = []
    for line in out.splitlines():
        p = [x.strip() for x in line.split(",")]
        try: rows.append((float(p[0]), float(p[1]), p[2]))
        except (ValueError, IndexError): pass
    return (calls - c_mid) / (t - t_mid), rows[len(rows) // 3:]

DT = {"bf16": (torch.bfloat16, ml_dtypes.bfloat16), "f16": (torch.float16, np.float16)}
def main():
    out = sys.argv[1]; sec = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    lines = ["| case | TF/s | median SM MHz | range | median W | reasons (hex: 0x4 = SW power cap, 0x20 = SW thermal, 0x1 = idle) |", "|---|---|---|---|---|---|"]
    for s, dt, plan in [("8192x8192x8192", "bf16", None), ("8192x8192x8192", "f16", None), ("2816x1920x8192", "bf16", None)]:
        m, n, k = (int(x) for x in s.split("x")); tdt, ndt = DT[dt]
        a = torch.randn(m, k, device="cuda").to(tdt); b = torch.randn(k, n, device="cuda").to(tdt)
        c = torch.empty(m, n, device="cuda", dtype=tdt)
        kern = coopjit.compile_gemm(m, n, k, ndt, device="cuda:0", plan=plan)
        for name, fn in [("coopjit", lambda: kern(a, b, c)), ("cublas", lambda: torch.matmul(a, b, out=c))]:
            time.sleep(1.0); fn(); torch.cuda.synchronize()
            rate, rows = sample(sec, fn)
            clk = statistics.median(r[0] for r in rows); pw = statistics.median(r[1] for r in rows)
            lines.append(f"| {s} {dt} {name} | {2*m*n*k*rate/1e12:.0f} | {clk:.0f} | {min(r[0] for r in rows):.0f}-{max(r[0] for r in rows):.0f} | {pw:.0f} | {' '.join(sorted({r[2] for r in rows}))} |")
            print(lines[-1], flush=True)
    open(out, "w").write("\n".join(lines) + "\n")

main()
