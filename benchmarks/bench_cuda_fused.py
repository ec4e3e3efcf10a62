"""Issue 16: fused epilogues on torch CUDA tensors against torch (cuBLAS + its elementwise kernels),
and where session 19's synchronous path spent its time.

    python benchmarks/bench_cuda_fused.py [--quick] [--out DIR]

Part 1 (the breakdown, bf16 4096^3 + bias + GELU): session 19's path for a fused product of device
arrays replayed step by step (the Epilogue's checks with a stream synchronize per device vector, the
wait for torch's stream, the kernel lookup, the binding's run: a re-plan, a launch and a synchronize),
host wall time per step; the kernel alone (the prepared launch, CUDA events); the whole old call and
the new one (queued on torch's stream). Part 2: cases against torch, CUDA events around blocks of
calls, a pause before each library's blocks, the median of the blocks, the best of rounds (the
libraries alternate); coopjit's result checked against float64 (torch on the GPU)."""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

import coopjit
from coopjit import _core
from coopjit._arrays import gemm_types
from coopjit._bench_cuda import _timed as events  # median seconds a call: CUDA events, blocks of reps after a pause
from coopjit._cuda_arrays import device_view, wait_for
from coopjit._epilogue import Epilogue
from coopjit._gemm_fused import _launcher
from coopjit.devices import get


def host_per_call(fn, calls=100):
    """Wall seconds a call spends on the host to queue it (the GPU kept behind: calls of a small product)."""
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    dt = (time.perf_counter() - t) / calls
    torch.cuda.synchronize()
    return dt


def old_call(a, b, c, **kw):
    """Session 19's path for a fused product of device arrays (_gemm_fused._device_product's tail then):
    the Epilogue reads each device vector with a synchronize, waits for torch's stream, and runs the
    product synchronously through _gpu.gemm (kernel lookup, staging, the binding's run)."""
    va, vb, vc = device_view(a, False), device_view(b, False), device_view(c, False)
    ep = Epilogue("matmul", va.dtype, vb.dtype, va.shape[0], vb.shape[1], out_dtype=vc.dtype, sync=True, **kw)
    (ta, tb, _), _ = gemm_types(va.dtype, vb.dtype)
    wait_for([va, vb, vc])
    get("cuda:0").gemm(va, vb, vc, 1.0, 0.0, ep.types(ta, tb), None, fused=ep)


def breakdown(n=4096, calls=20):
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(n, n, device="cuda", generator=g).bfloat16()
    b = torch.randn(n, n, device="cuda", generator=g).bfloat16()
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(n, device="cuda", generator=g)
    va, vb, vc = device_view(a, False), device_view(b, False), device_view(c, False)
    from coopjit._gpu import _gemm_operands

    shape, strides = _gemm_operands(va, vb, vc)
    types = ["bf16", "bf16", "bf16"]
    kw = dict(bias=bias, activation="gelu")
    ep = Epilogue("matmul", va.dtype, vb.dtype, n, n, out_dtype=vc.dtype, **kw)
    k = _core.gpu_gemm_kernel("cuda:0", types, shape, strides, False, {}, ep.steps())
    launch = _launcher("cuda:0", types, va, vb, vc, False, None, ep)
    old_call(a, b, c, **kw)
    torch.cuda.synchronize()
    rows = {}

    def wall(name, fn):
        fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        rows[name] = (time.perf_counter() - t) / calls

    wall("Epilogue(...) with a synchronize per device vector", lambda: Epilogue(
        "matmul", va.dtype, vb.dtype, n, n, out_dtype=vc.dtype, sync=True, **kw))
    wall("wait_for (torch stream synchronize)", lambda: wait_for([va, vb, vc]))
    wall("_core.gpu_gemm_kernel lookup (plan + cache)", lambda: _core.gpu_gemm_kernel(
        "cuda:0", types, shape, strides, False, {}, ep.steps()))
    wall("_core.gpu_gemm_plan (the re-plan run() does)", lambda: _core.gpu_gemm_plan(
        "cuda:0", types, shape, strides, False, {}, ep.steps()))
    addr = [0, 0, bias.data_ptr(), 0]
    wall("k.run (re-plan, launch, synchronize)", lambda: k.run(types, shape, strides, va.ptr, vb.ptr, vc.ptr, 1.0, 0.0,
                                                             addr))
    wall("old path, whole call (synchronous)", lambda: old_call(a, b, c, **kw))
    wall("new matmul, whole call + synchronize", lambda: coopjit.matmul(a, b, out=c, bias=bias, activation="gelu"))
    stream = torch.cuda.current_stream().cuda_stream
    t_kernel = events(lambda: launch.launch(va.ptr, vb.ptr, vc.ptr, 1.0, 0.0, stream, addr), 10, 5, 0.3)
    t_plain_launch = events(lambda: coopjit.matmul(a, b, out=c), 10, 5, 0.3)
    t_new = events(lambda: coopjit.matmul(a, b, out=c, bias=bias, activation="gelu"), 10, 5, 0.3)
    t_old = events(lambda: old_call(a, b, c, **kw), 10, 5, 0.3)
    rows["fused kernel alone (prepared launch, CUDA events)"] = t_kernel
    rows["plain product, matmul (CUDA events)"] = t_plain_launch
    rows["old path (CUDA events, back to back)"] = t_old
    rows["new matmul (CUDA events, back to back)"] = t_new
    rows["plan of the launch"] = launch.plan_key
    rows["plan of k"] = k.plan_key
    return rows


def cases(quick):
    g = torch.Generator(device="cuda").manual_seed(7)
    f64 = torch.float64
    out = []

    def bf(m, k):
        return (torch.randn(m, k, device="cuda", generator=g) * k ** -0.25).bfloat16()

    def gelu(y):
        return 0.5 * y * (1 + torch.erf(y / 2 ** 0.5))

    for n in ((1024, 2048, 4096) if quick else (1024, 2048, 4096, 8192)):
        a, b = bf(n, n), bf(n, n)
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(n, device="cuda", generator=g)
        bias16 = bias.bfloat16()
        y = a.to(f64) @ b.to(f64) + bias.to(f64)
        out.append((f"bf16 {n}^3 + bias, GELU (torch addmm + gelu)", 2.0 * n ** 3,
                    lambda a=a, b=b, c=c, bias=bias: coopjit.matmul(a, b, out=c, bias=bias, activation="gelu"),
                    lambda a=a, b=b, bias16=bias16: torch.nn.functional.gelu(torch.addmm(bias16, a, b)),
                    c, gelu(y), (lambda a=a, b=b, c=c, bias=bias: old_call(a, b, c, bias=bias, activation="gelu"))
                    if n in (1024, 4096) else None, (a, b)))
    n = 4096
    a, b = bf(n, n), bf(n, n)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(n, device="cuda", generator=g)
    y = a.to(f64) @ b.to(f64) + bias.to(f64)
    for act, ref in (("gelu_tanh", lambda y: 0.5 * y * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (y + 0.044715 * y ** 3)))),
                     ("silu", lambda y: y * torch.sigmoid(y)), ("relu", torch.relu)):
        tf = {"gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"), "silu": torch.nn.functional.silu,
              "relu": torch.relu}[act]
        out.append((f"bf16 4096^3 + bias, {act} (torch addmm + {act})", 2.0 * n ** 3,
                    lambda a=a, b=b, c=c, bias=bias, act=act: coopjit.matmul(a, b, out=c, bias=bias, activation=act),
                    lambda a=a, b=b, bias16=bias.bfloat16(), tf=tf: tf(torch.addmm(bias16, a, b)), c, ref(y), None,
                    (a, b)))
    a = (torch.randn(n, n, device="cuda", generator=g) * n ** -0.25).half()
    b = (torch.randn(n, n, device="cuda", generator=g) * n ** -0.25).half()
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    bias = torch.randn(n, device="cuda", generator=g)
    bias16 = bias.half()
    y = a.to(f64) @ b.to(f64) + bias.to(f64)
    out.append(("f16 4096^3 + bias, relu (torch addmm + relu)", 2.0 * n ** 3,
                lambda: coopjit.matmul(a, b, out=c, bias=bias, activation="relu"),
                lambda: torch.relu(torch.addmm(bias16, a, b)), c, torch.relu(y), None, (a, b)))
    a2, b2 = bf(n, n), bf(n, n)
    c32 = torch.empty(n, n, device="cuda")
    bias2 = torch.randn(n, device="cuda", generator=g)
    y2 = a2.to(f64) @ b2.to(f64) + bias2.to(f64)
    try:
        torch.mm(a2, b2, out_dtype=torch.float32)

        def theirs32():
            return torch.mm(a2, b2, out_dtype=torch.float32).add_(bias2)
        label = "bf16 4096^3 -> f32 C + bias (torch mm(out_dtype=f32) + add_)"
    except (TypeError, RuntimeError):
        def theirs32():
            return torch.addmm(bias2.bfloat16(), a2, b2).float()
        label = "bf16 4096^3 -> f32 C + bias (torch addmm(bf16) .float())"
    out.append((label, 2.0 * n ** 3, lambda: coopjit.matmul(a2, b2, out=c32, bias=bias2), theirs32, c32, y2, None,
                (a2, b2)))
    res = torch.randn(n, n, device="cuda", generator=g)
    c3 = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    out.append(("bf16 4096^3 + bias, GELU, f32 residual (torch addmm + gelu + add)", 2.0 * n ** 3,
                lambda: coopjit.matmul(a2, b2, out=c3, bias=bias2, activation="gelu", residual=res),
                lambda: torch.nn.functional.gelu(torch.addmm(bias2.bfloat16(), a2, b2)) + res, c3,
                gelu(y2) + res.to(f64), None, (a2, b2)))
    for m in (4096, 1024):
        ai = torch.randint(-128, 128, (m, n), device="cuda", dtype=torch.int8, generator=g)
        bi = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8, generator=g).t()
        scale = torch.rand(n, device="cuda", generator=g) * 1e-3
        row_scale = torch.rand(m, device="cuda", generator=g) + 0.5
        bias3 = torch.randn(n, device="cuda", generator=g)
        ci = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        yi = (ai.to(f64) @ bi.to(f64)) * scale.to(f64) * row_scale.to(f64)[:, None] + bias3.to(f64)

        def theirs_i8(ai=ai, bi=bi, scale=scale, row_scale=row_scale, bias3=bias3):
            return (torch._int_mm(ai, bi).float() * scale * row_scale[:, None] + bias3).bfloat16()
        out.append((f"W8A8 int8 {m}x{n}x{n} -> bf16, scale + row_scale + bias (torch _int_mm + 3 ops)", 2.0 * m * n * n,
                    lambda ai=ai, bi=bi, ci=ci, scale=scale, row_scale=row_scale, bias3=bias3: coopjit.matmul(
                        ai, bi, out=ci, scale=scale, row_scale=row_scale, bias=bias3),
                    theirs_i8, ci, yi, None, (ai, bi)))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=None)
    p.add_argument("--no-breakdown", action="store_true")
    p.add_argument("--few", action="store_true", help="the bf16 1024^3 GELU, the 4096^3 float cases and W8A8 4096 only (confirm.sh)")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "coopjit": coopjit.__version__}
    print(f"coopjit {coopjit.__version__} vs torch {torch.__version__} on {result['device']}", flush=True)
    if not args.no_breakdown:
        rows = breakdown()
        result["breakdown"] = rows
        print("\nbf16 4096^3 + bias (f32), GELU: where a call's time goes (wall per call unless said)")
        for k, v in rows.items():
            print(f"  {k:>58}: " + (f"{v * 1e3:8.3f} ms" if isinstance(v, float) else v), flush=True)
    reps, blocks, pause = (5, 3, 0.3) if args.quick else (10, 5, 0.5)
    print(f"\ncases: median of {blocks} blocks of {reps} calls (CUDA events), best of {args.rounds} rounds; "
          "ratio = torch / coopjit (above 1: coopjit faster); host: wall us to queue a call", flush=True)
    print(f"{'case':>84}  {'coopjit':>18}  {'torch':>18}  {'ratio':>5}  {'old path':>9}  {'host us':>11}  rel.err")
    rows = []
    t0 = time.perf_counter()
    few = ("bf16 1024^3 + bias, GELU", "bf16 4096^3 + bias, ", "f16 4096^3", "bf16 4096^3 -> f32 C", "W8A8 int8 4096x")
    for label, work, ours, theirs, c, ref, old, _keep in cases(args.quick):
        if args.few and not label.startswith(few):
            continue
        ours()
        torch.cuda.synchronize()
        err = float(((c.to(torch.float64) - ref).norm() / ref.norm()).item())
        t_c, t_t, t_o = [], [], []
        for _ in range(args.rounds):
            t_c.append(events(ours, reps, blocks, pause))
            t_t.append(events(theirs, reps, blocks, pause))
            if old is not None:
                t_o.append(events(old, max(2, reps // 2), blocks, pause))
        hc, ht = host_per_call(ours), host_per_call(theirs)
        tc, tt = min(t_c), min(t_t)
        to = min(t_o) if t_o else None
        r = {"case": label, "coopjit_s": tc, "torch_s": tt, "ratio": tt / tc, "old_s": to, "host_coopjit_s": hc,
             "host_torch_s": ht, "rate_coopjit": work / tc / 1e12, "rate_torch": work / tt / 1e12, "rel_err": err,
             "rounds_coopjit": t_c, "rounds_torch": t_t}
        rows.append(r)
        old_s = f"{to * 1e3:6.3f} ms" if to else "        -"
        print(f"{label:>84}  {tc * 1e3:7.3f} ms {r['rate_coopjit']:4.0f} T  {tt * 1e3:7.3f} ms {r['rate_torch']:4.0f} T  "
              f"{tt / tc:5.2f}  {old_s:>9}  {hc * 1e6:4.0f} / {ht * 1e6:4.0f}  {err:.1e}", flush=True)
        del _keep
        torch.cuda.empty_cache()
    print(f"(cases: {time.perf_counter() - t0:.0f} s)")
    result["rows"] = rows
    if args.out:
        with open(f"{args.out}/bench_cuda_fused.json", "w") as f:
            json.dump(result, f, indent=1, default=str)


if __name__ == "__main__":
    main()
