"""What the GPU's clock does under a long tensor-core load (issue 16's int8 target): runs one
product for a few seconds at a time (coopjit's default plan, then torch's) while nvidia-smi samples
the SM clock, the power draw and the clock-event (throttle) reasons, and prints, for each, the
median clock and power under load, the rate reached, and the dense tensor-core peak at the
measured clock (132 SMs x ops a clock an SM x clock: NVIDIA's H100 SXM figures, 989.4 bf16 TFLOP/s
and 1978.9 int8 TOP/s, are that product at 1830 MHz).

    python benchmarks/gpu_clock_probe.py [--sizes 8192,4096] [--seconds 3] [--out probe.md]
"""
import argparse
import statistics
import subprocess
import time

import torch

import coopjit

OPS_PER_CLK_SM = {"int8": 8192, "bf16": 4096}  # dense tensor-core ops a clock an SM (H100 SXM)


def sample(seconds, fn):
    """Run fn repeatedly for `seconds` while nvidia-smi samples every 50 ms; returns (rate of calls
    a second over the middle of the run, [(clock MHz, watts, reasons)])."""
    fields = "clocks.sm,power.draw,clocks_event_reasons.active"
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    calls, t_mid, c_mid = 0, None, 0
    while True:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        calls += 20
        t = time.perf_counter() - t0
        if t_mid is None and t > seconds / 3:
            t_mid, c_mid = t, calls
        if t > seconds:
            break
    rate = (calls - c_mid) / (t - t_mid)
    smi.terminate()
    out = smi.communicate()[0]
    rows = []
    for line in out.splitlines():
        parts = [x.strip() for x in line.split(",")]
        try:
            rows.append((float(parts[0]), float(parts[1]), parts[2]))
        except (ValueError, IndexError):
            pass
    # the samples of the later two thirds (under load)
    return rate, rows[len(rows) // 3:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8192,4096")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    lines = [f"device: {torch.cuda.get_device_name()} ({sms} SMs), torch {torch.__version__}",
             "", "| case | rate (T op/s) | median SM clock under load (MHz) | clock range | median power (W) | clock-event reasons seen | "
             "dense peak at that clock (T op/s) | rate / peak at clock | rate / peak at 1830 MHz |", "|" + "---|" * 9]
    for n in (int(x) for x in args.sizes.split(",")):
        g = torch.Generator(device="cuda").manual_seed(1)
        ai = torch.randint(-128, 127, (n, n), device="cuda", dtype=torch.int8, generator=g)
        bi = torch.randint(-128, 127, (n, n), device="cuda", dtype=torch.int8, generator=g).t()
        ci = torch.empty(n, n, device="cuda", dtype=torch.int32)
        ah = torch.randn(n, n, device="cuda", generator=g).bfloat16()
        bh = torch.randn(n, n, device="cuda", generator=g).bfloat16()
        ch = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        # coopjit.matmul on torch tensors with out=: the prepared launch on torch's stream (B an N x K
        # tensor's .t(), K-contiguous: _int_mm's layout)
        coopjit.matmul(ai, bi, out=ci)
        torch.cuda.synchronize()
        assert torch.equal(ci, torch._int_mm(ai, bi)), "coopjit's int8 product differs from torch._int_mm's"
        coopjit.matmul(ah, bh, out=ch)
        ref = ah.double() @ bh.double()
        assert ((ch.double() - ref).norm() / ref.norm()).item() < 1e-2
        cases = [("int8", f"int8 {n}^3 coopjit", lambda: coopjit.matmul(ai, bi, out=ci)),
                 ("int8", f"int8 {n}^3 torch._int_mm", lambda: torch._int_mm(ai, bi)),
                 ("bf16", f"bf16 {n}^3 coopjit", lambda: coopjit.matmul(ah, bh, out=ch)),
                 ("bf16", f"bf16 {n}^3 torch.matmul", lambda: torch.matmul(ah, bh, out=ch))]
        for kind, name, fn in cases:
            time.sleep(1.0)
            fn()
            torch.cuda.synchronize()
            rate, rows = sample(args.seconds, fn)
            ops = 2 * n**3 * rate / 1e12
            clk = statistics.median(r[0] for r in rows) if rows else float("nan")
            pw = statistics.median(r[1] for r in rows) if rows else float("nan")
            reasons = sorted({r[2] for r in rows})
            peak = sms * OPS_PER_CLK_SM[kind] * clk * 1e6 / 1e12
            peak_nom = sms * OPS_PER_CLK_SM[kind] * 1830e6 / 1e12
            lines.append(f"| {name} | {ops:.0f} | {clk:.0f} | {min(r[0] for r in rows):.0f}-{max(r[0] for r in rows):.0f} | {pw:.0f} | "
                         f"{' '.join(reasons)} | {peak:.0f} | {ops / peak:.2f} | {ops / peak_nom:.2f} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
