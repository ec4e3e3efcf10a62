"""`python -m coopjit bench --device cuda:N`: coopjit on an NVIDIA GPU side by side with PyTorch
(cuBLAS) in one run. Both libraries get the same device tensors and write into the same output
(coopjit through its device-array path: no copies); CUDA events around blocks of calls, a warm-up
call first, a pause before each library's blocks, medians of the blocks; coopjit's first result is
checked against float64. Ratios are torch's time over coopjit's (above 1: coopjit faster);
rates are fractions of cuBLAS's and, for bandwidth, of the device's memory bandwidth (the
driver's figure) and of a measured device-to-device copy."""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import coopjit


def event_blocks(fn, reps: int, blocks: int, pause: float) -> list[float]:
    """Seconds a call of `fn` in each of `blocks` blocks of `reps` calls, timed by CUDA events on
    torch's current stream: one warm-up call, a synchronize and a `pause` (seconds) first. The one
    timing loop of this module and of benchmarks/ (bench_cuda_gemm.py, bench_cuda_fused.py,
    cuda_fused_ab.py, which each had their own copy)."""
    import torch

    fn()
    torch.cuda.synchronize()
    time.sleep(pause)
    out = []
    for _ in range(blocks):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) / 1e3 / reps)
    return out


def _timed(fn, reps: int, blocks: int, pause: float) -> float:
    """The median of event_blocks: seconds a call."""
    return statistics.median(event_blocks(fn, reps, blocks, pause))


def graph_timed(fn, reps: int, blocks: int = 5, pause: float = 0.2) -> tuple[float, float]:
    """(median seconds a call, spread: (max - min) / median of the blocks) of `reps` calls captured
    in one CUDA graph, replayed `blocks` times (event_blocks of the replay; fn is warmed first on the
    capture stream, twice, so that nothing is allocated or prepared while capturing: coopjit's
    per-call cache holds the prepared launch once a shape has been seen)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        for _ in range(reps):
            fn()
    out = event_blocks(g.replay, 1, blocks, pause)
    med = statistics.median(out)
    return med / reps, (max(out) - min(out)) / med


def run(device: str = "cuda:0", quick: bool = False, out_dir: str | Path | None = None) -> dict:
    import torch

    idx = int(device.partition(":")[2] or 0)
    dev = torch.device("cuda", idx)
    info = coopjit.device_info(device)
    reps, blocks, pause = (3, 3, 0.1) if quick else (10, 5, 0.3)
    rows = []
    g = torch.Generator(device=dev).manual_seed(7)

    def add(label, work, unit, ours, theirs, check, note=""):  # work: flops (or integer ops); rates in T/s
        t_c = _timed(ours, reps, blocks, pause)
        t_t = _timed(theirs, reps, blocks, pause)
        rows.append({"case": label, "coopjit_s": t_c, "torch_s": t_t, "ratio": t_t / t_c, "unit": unit,
                     "coopjit_rate": work / t_c / 1e12, "torch_rate": work / t_t / 1e12,
                     "error": check, "note": note})

    def rel_err(got, ref):
        return float(((got.double() - ref).norm() / ref.norm()).item())

    sizes = (4096,) if quick else (2048, 4096, 8192)  # issue 16's targets: 2048 >= 80% of cuBLAS, 4096-8192 >= 85%
    for name, dt in (("bf16", torch.bfloat16), ("f16", torch.float16)):
        for n in sizes:
            a = torch.randn(n, n, device=dev, generator=g).to(dt)
            b = torch.randn(n, n, device=dev, generator=g).to(dt)
            c = torch.empty(n, n, device=dev, dtype=dt)
            coopjit.matmul(a, b, out=c)
            err = rel_err(c, a.double() @ b.double())
            add(f"{name} {n}^3", 2.0 * n ** 3, "TF/s", lambda: coopjit.matmul(a, b, out=c),
                lambda: torch.matmul(a, b, out=c), err)
    # Stream-K's shapes (issue 16): products whose last wave of tiles is partly empty on 132 SMs
    # (in 128 x 256 tiles: 153, 152, 456, 561, 160), bf16, the planner's own plan named in the note
    waves = ((2176, 2176, 8192), (1024, 4864, 8192), (4864, 3072, 8192), (4224, 4224, 8192), (832, 5120, 4096))
    for m, nn, k in waves[:3] if quick else waves:
        a = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
        b = torch.randn(k, nn, device=dev, generator=g).to(torch.bfloat16)
        c = torch.empty(m, nn, device=dev, dtype=torch.bfloat16)
        cfg = coopjit.compile_gemm(m, nn, k, "bfloat16", device=device).config
        coopjit.matmul(a, b, out=c)
        add(f"bf16 {m}x{nn}x{k} (last wave partly empty)", 2.0 * m * nn * k, "TF/s", lambda: coopjit.matmul(a, b, out=c),
            lambda: torch.matmul(a, b, out=c), rel_err(c, a.double() @ b.double()),
            f"{cfg['layout']} {cfg['macro_tile']} {cfg['split']}")
    n = 4096
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        a = torch.randn(n, n, device=dev, generator=g)
        b = torch.randn(n, n, device=dev, generator=g)
        c = torch.empty(n, n, device=dev)
        coopjit.matmul(a, b, out=c)
        add("f32 4096^3 (CUDA cores; torch without TF32)", 2.0 * n ** 3, "TF/s", lambda: coopjit.matmul(a, b, out=c),
            lambda: torch.matmul(a, b, out=c), rel_err(c, a.double() @ b.double()))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    ai = torch.randint(-128, 127, (n, n), device=dev, dtype=torch.int8, generator=g)
    bi = torch.randint(-128, 127, (n, n), device=dev, dtype=torch.int8, generator=g).t()  # torch._int_mm's layout
    ci = torch.empty(n, n, device=dev, dtype=torch.int32)
    coopjit.matmul(ai, bi, out=ci)
    exact = bool(torch.equal(ci.cpu().long(), ai.cpu().long() @ bi.cpu().long()))
    add("int8 4096^3 -> int32 (torch._int_mm)", 2.0 * n ** 3, "TOP/s",
        lambda: coopjit.matmul(ai, bi, out=ci), lambda: torch._int_mm(ai, bi), 0.0 if exact else 1.0,
        "exact" if exact else "WRONG")
    # bias + GELU fused, against torch's addmm + gelu
    a = torch.randn(n, n, device=dev, generator=g).to(torch.bfloat16)
    b = torch.randn(n, n, device=dev, generator=g).to(torch.bfloat16)
    bias = torch.randn(n, device=dev, generator=g)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    bias16 = bias.to(torch.bfloat16)
    coopjit.matmul(a, b, out=c, bias=bias, activation="gelu")
    y = a.double() @ b.double() + bias.double()
    add("bf16 4096^3 + bias, GELU (fused; torch addmm + gelu)", 2.0 * n ** 3, "TF/s",
        lambda: coopjit.matmul(a, b, out=c, bias=bias, activation="gelu"),
        lambda: torch.nn.functional.gelu(torch.addmm(bias16, a, b)), rel_err(c, 0.5 * y * (1 + torch.erf(y / 2 ** 0.5))))
    # the memory: a device-to-device copy of 1 GiB
    x = torch.empty(1 << 28, device=dev)
    yx = torch.empty_like(x)
    t_copy = _timed(lambda: yx.copy_(x), 3, 3, pause)
    copy_gbs = 2 * x.numel() * 4 / t_copy / 1e9
    result = {"device": device, "device_name": info.get("device_name"), "sms": info.get("compute_units"),
              "memory_bandwidth_gbs": info.get("memory_bandwidth_gbs"), "copy_gbs": copy_gbs,
              "torch": torch.__version__, "coopjit": coopjit.__version__, "rows": rows}
    if out_dir is not None:
        p = Path(out_dir)
        p.mkdir(parents=True, exist_ok=True)
        (p / "coopjit-bench-cuda.json").write_text(json.dumps(result, indent=1))
        (p / "coopjit-bench-cuda.txt").write_text(format_table(result) + "\n")
        result["files"] = {"json": str(p / "coopjit-bench-cuda.json"), "table": str(p / "coopjit-bench-cuda.txt")}
    return result


def format_table(result: dict) -> str:
    lines = [f"coopjit {result['coopjit']} vs torch {result['torch']} (cuBLAS) on {result['device']} "
             f"({result['device_name']}, {result['sms']} SMs); memory: {result['memory_bandwidth_gbs']} GB/s by the "
             f"driver's figures, a device-to-device copy measured {result['copy_gbs']:.0f} GB/s",
             "ratio: torch's time / coopjit's (above 1: coopjit faster); % cuBLAS: coopjit's rate over torch's", "",
             f"{'case':>56}  {'coopjit':>18}  {'torch':>18}  {'ratio':>6}  {'% cuBLAS':>8}  {'rel. error':>10}"]
    for r in result["rows"]:
        lines.append(f"{r['case']:>56}  {r['coopjit_s'] * 1e3:8.3f} ms {r['coopjit_rate']:5.0f} {r['unit']:>4}"
                     f"  {r['torch_s'] * 1e3:8.3f} ms {r['torch_rate']:5.0f} {r['unit']:>4}  {r['ratio']:6.2f}"
                     f"  {100 * r['ratio']:7.0f}%  {r['error']:10.1e} {r['note']}")
    return "\n".join(lines)
