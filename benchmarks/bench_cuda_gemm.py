"""coopjit's GEMM kernels on an NVIDIA GPU side by side with torch (cuBLAS) in one run: CUDA events
around blocks of calls on device tensors (no copies: the compiled kernel runs on the tensors'
pointers), a warm-up first, a pause before each library's blocks, medians of the blocks.

    python benchmarks/bench_cuda_gemm.py [--quick] [--out table.md]
    python benchmarks/bench_cuda_gemm.py --hopper [--streamk] [--out table.md]   # sm_90: wgmma (ws / TMA / cp.async) vs cuBLAS
    python benchmarks/bench_cuda_gemm.py --cluster [--cluster-shapes 4096x4096x4096,...] [--out table.md]   # sm_90: clusters of 2 vs not vs cuBLAS
    python benchmarks/bench_cuda_gemm.py --int8 [--sizes 1024,2048,4096,8192] [--out table.md]   # int8 vs torch._int_mm

Rows: bf16 / f16 4096^3 and 8192^3 (tensor cores, mma.sync pipeline), f32 4096^3 (CUDA cores;
torch with TF32 off), 4096 stacked 16^3 bf16 products (torch.bmm), a Stream-K shape whose 128 x 128
tiles leave the last wave of the persistent grid mostly empty (automatic plan vs forced DP).
"""
import argparse
import statistics
import time

import ml_dtypes
import numpy as np
import torch

import coopjit
from coopjit._bench_cuda import event_blocks, graph_timed  # noqa: F401 (graph_timed: imported from here by other benchmarks)

DEV = "cuda:0"
TY = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32", torch.int8: "i8", torch.int32: "i32"}
NP = {torch.bfloat16: ml_dtypes.bfloat16, torch.float16: np.float16, torch.float32: np.float32, torch.int8: np.int8}


def timed(fn, reps, blocks=5):
    """(median seconds per call over `blocks` blocks of `reps` calls (CUDA events; a warm-up call
    and a 0.2 s pause first), spread: (max - min) / median)."""
    out = event_blocks(fn, reps, blocks, 0.2)
    return statistics.median(out), (max(out) - min(out)) / statistics.median(out)


def gemm_case(m, n, k, dt, out_dt, plan=None, batch=1, reps=10, trans_b=False):
    g = torch.Generator(device="cuda").manual_seed(1)
    shape_a, shape_b = ((batch, m, k), (batch, k, n)) if batch > 1 else ((m, k), (k, n))
    a = torch.randn(shape_a, device="cuda", generator=g).to(dt)
    if dt is torch.int8:
        a = torch.randint(-128, 127, shape_a, device="cuda", dtype=dt, generator=g)
        b = torch.randint(-128, 127, (n, k), device="cuda", dtype=dt, generator=g).t()
    else:
        b = torch.randn(shape_b, device="cuda", generator=g).to(dt)
    c = torch.empty((batch, m, n) if batch > 1 else (m, n), device="cuda", dtype=out_dt)
    kern = coopjit.compile_gemm(m, n, k, NP[dt], device=DEV, out_dtype=NP.get(out_dt, None), plan=plan,
                                trans_b=trans_b) if batch == 1 else None
    types = [TY[dt], TY[dt], TY[out_dt]]
    bs = [m * k, k * n, m * n] if batch > 1 else [0, 0, 0]
    shape = [m, n, k, 1, batch]
    strides = [k, 1, *((1, k) if trans_b else (n, 1)), n, 1, 0, 0, 0, *bs]
    if kern is None:
        from coopjit import _core, _gemm

        core = _core.gpu_gemm_kernel(DEV, types, shape, strides, False, _gemm._gpu_overrides(plan))
    else:
        core = kern._core
    run = lambda: core.run(types, shape, strides, a.data_ptr(), b.data_ptr(), c.data_ptr(), 1.0, 0.0)  # noqa: E731
    run()
    torch.cuda.synchronize()
    # correctness on these inputs against float64
    ref = torch.matmul(a.double(), b.double()) if dt is not torch.int8 else torch.matmul(a.cpu().long(), b.cpu().long()).cuda().double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    t, spread = timed(run, reps)
    return t, spread, err, core.config


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--bf16-only", action="store_true", help="only bf16 4096^3 and 8192^3 (one line each)")
    ap.add_argument("--hopper", action="store_true",
                    help="bf16 / f16 2048-8192: the wgmma pipeline fed by TMA (plan tma=yes) and by cp.async (tma=no), and torch")
    ap.add_argument("--streamk", action="store_true", help="with --hopper: the Stream-K table (shapes whose last wave is partly empty)")
    ap.add_argument("--streamk-shapes", default="896x4864x8192,4864x896x8192,4864x1792x8192,4224x4224x4224,4224x4224x8192,1024x1024x1024,2048x2048x2048,"
                    "4096x4096x4096",
                    help="with --streamk: MxNxK shapes of the Stream-K table")
    ap.add_argument("--streamk-only", action="store_true", help="with --hopper: only the Stream-K table")
    ap.add_argument("--no-cp-async", action="store_true", help="with --hopper: leave out the cp.async column")
    ap.add_argument("--variants", default="", help="with --hopper: extra wgmma plans (bf16; size 's', default 4096), a JSON list of dicts; with --int8: extra plans for every size")
    ap.add_argument("--cluster", action="store_true",
                    help="sm_90, bf16: ws DP plans with and without clusters of 2 (B's panels multicast) against torch, CUDA graphs, alternating rounds")
    ap.add_argument("--cluster-shapes", default="4096x4096x4096,8192x8192x8192,2048x2048x2048,4864x1792x8192,896x4864x8192,4864x896x8192,"
                    "4224x4224x4224,1024x4352x4096", help="with --cluster: MxNxK list")
    ap.add_argument("--rounds", type=int, default=3, help="with --cluster: alternating rounds (medians)")
    ap.add_argument("--int8", action="store_true",
                    help="int8 -> int32 on both B layouts against torch._int_mm: the default plan and the older paths")
    ap.add_argument("--sizes", default="1024,2048,4096,8192", help="with --int8: the square sizes")
    ap.add_argument("--plan", default="", help="with --hopper / --int8: plan fields (a JSON dict, e.g. '{\"tma_store\": \"no\"}') "
                    "added to every coopjit plan of the run, the default rows' too (their matmul calls then take plan=)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.int8:
        int8(args)
        return
    if args.cluster:
        cluster(args)
        return
    if args.hopper:
        hopper(args)
        return
    if args.bf16_only:
        for s in (4096, 8192):
            t = gemm_case(s, s, s, torch.bfloat16, torch.bfloat16, reps=20 if s == 4096 else 5)
            print(f"bf16 {s}^3: {2 * s**3 / t[0] / 1e12:.1f} TFLOP/s (spread {t[1]:.2f}, err {t[2]:.1e})", flush=True)
        return
    rows = []

    def add(name, flops, ours, theirs, note=""):
        t, sp, err, cfg = ours
        tt, tsp = theirs
        rows.append((name, flops / t / 1e12, flops / tt / 1e12, tt / t, sp, tsp, err,
                     f"{cfg['macro_tile']} s{cfg['stages']} {cfg['split']} {note}"))
        print(rows[-1], flush=True)

    sizes = [4096] if args.quick else [4096, 8192]
    s = 4096
    for plan in ({"stages": 3}, {"stages": 5}, {"kb": 64, "stages": 3}, {"mr": 64, "nr": 32, "sg_m": 2, "sg_n": 4},
                 {"sg_n": 4, "stages": 3}, {"sg_n": 4, "stages": 4}):
        ours = gemm_case(s, s, s, torch.bfloat16, torch.bfloat16, plan=plan, reps=20)
        print(f"variant {plan}: {2 * s**3 / ours[0] / 1e12:.1f} TFLOP/s err {ours[2]:.1e}", flush=True)
        rows.append((f"bf16 4096^3 variant {plan}", 2 * s**3 / ours[0] / 1e12, 0, 0, ours[1], 0, ours[2], ours[3]["macro_tile"]))
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        for s in sizes if dt is torch.bfloat16 else [4096]:
            reps = 20 if s == 4096 else 5
            ours = gemm_case(s, s, s, dt, dt, reps=reps)
            a = torch.randn(s, s, device="cuda").to(dt)
            b = torch.randn(s, s, device="cuda").to(dt)
            add(f"{name} {s}^3", 2 * s**3, ours, timed(lambda: torch.matmul(a, b), reps))
    s = 4096
    for plan in ({"kb": 16, "stages": 3, "nr": 32, "sg_n": 4}, {"kb": 8, "stages": 6}, {"stages": 0}):
        ours = gemm_case(s, s, s, torch.float32, torch.float32, plan=plan, reps=3)
        print(f"f32 variant {plan}: {2 * s**3 / ours[0] / 1e12:.1f} TFLOP/s err {ours[2]:.1e}", flush=True)
        rows.append((f"f32 4096^3 variant {plan}", 2 * s**3 / ours[0] / 1e12, 0, 0, ours[1], 0, ours[2], ours[3]["macro_tile"]))
    ours = gemm_case(s, s, s, torch.float32, torch.float32, reps=3)
    a = torch.randn(s, s, device="cuda")
    b = torch.randn(s, s, device="cuda")
    add("f32 4096^3 (no TF32)", 2 * s**3, ours, timed(lambda: torch.matmul(a, b), 3))
    # Stream-K: 2304^2 = 18 x 18 = 324 tiles of 128 x 128 on a grid of 2 x SMs (264 on an H100):
    # the second wave is 60 of 264.
    m = n = 2304
    k = 8192
    auto = gemm_case(m, n, k, torch.bfloat16, torch.bfloat16, reps=10)
    dp = gemm_case(m, n, k, torch.bfloat16, torch.bfloat16, plan={"split": "dp"}, reps=10)
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    add(f"bf16 {m}x{n}x{k} auto", 2 * m * n * k, auto, timed(lambda: torch.matmul(a, b), 10))
    add(f"bf16 {m}x{n}x{k} forced dp", 2 * m * n * k, dp, timed(lambda: torch.matmul(a, b), 10))
    print(f"Stream-K: automatic plan ({auto[3]['split']}) / forced DP speed: {dp[0] / auto[0]:.2f}x", flush=True)
    rows.append((f"Stream-K auto ({auto[3]['split']}) over forced dp", 0, 0, dp[0] / auto[0], 0, 0, 0, "speedup"))
    for plan in ({"split": "sk", "workers": 132}, {"split": "sk+dp", "workers": 132}, {"split": "sk", "workers": 264}):
        v = gemm_case(m, n, k, torch.bfloat16, torch.bfloat16, plan=plan, reps=10)
        print(f"Stream-K variant {plan}: {dp[0] / v[0]:.2f}x forced DP (err {v[2]:.1e})", flush=True)
        rows.append((f"Stream-K {plan} over forced dp", 0, 0, dp[0] / v[0], v[1], 0, v[2], "speedup"))
    # 4096 stacked 16^3 bf16 products
    ours = gemm_case(16, 16, 16, torch.bfloat16, torch.bfloat16, batch=4096, reps=50)
    a = torch.randn(4096, 16, 16, device="cuda").to(torch.bfloat16)
    b = torch.randn(4096, 16, 16, device="cuda").to(torch.bfloat16)
    add("bf16 4096 x 16^3 batched", 2 * 4096 * 16**3, ours, timed(lambda: torch.bmm(a, b), 50))
    # int8: torch._int_mm for the record (coopjit's int8 runs on CUDA cores: the old path)
    s = 4096
    ai = torch.randint(-128, 127, (s, s), device="cuda", dtype=torch.int8)
    bi = torch.randint(-128, 127, (s, s), device="cuda", dtype=torch.int8)
    ti, tis = timed(lambda: torch._int_mm(ai, bi), 20)
    bt = torch.randint(-128, 127, (s, s), device="cuda", dtype=torch.int8).t()
    add("int8 4096^3 (B as N x K)", 2 * s**3, gemm_case(s, s, s, torch.int8, torch.int32, reps=20, trans_b=True),
        timed(lambda: torch._int_mm(ai, bt), 20), "vs torch._int_mm on the same layout")
    print(f"torch._int_mm 4096^3: {2 * s**3 / ti / 1e12:.1f} TOP/s", flush=True)

    hdr = "| case | coopjit TFLOP/s | torch TFLOP/s | coopjit / torch | spread ours | spread torch | rel. err vs f64 | plan |"
    lines = [hdr, "|" + "---|" * 8]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]:.1f} | {r[2]:.1f} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.2f} | {r[6]:.1e} | {r[7]} |")
    lines.append(f"| int8 4096^3 torch._int_mm | - | {2 * s**3 / ti / 1e12:.1f} TOP/s | - | - | {tis:.2f} | - | not run by coopjit |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}\n\n{text}\n")


def hopper(args):
    """The wgmma pipelines on TMA against torch in one run, the same device tensors: the
    warp-specialized kernel (plan ws=2, simt_tma_ws.cpp, the default), the TMA pipeline without it
    (ws=no: simt_tma.cpp, work-item 0 the producer) and cp.async (tma=no);
    then (--streamk) shapes whose last wave of tiles is partly empty: the automatic plan, forced DP
    with and without ws, and torch."""
    import json

    # The first columns time each plan through the kernel's run() (which waits for the device after
    # each launch: Python, the host-side preparation and the GPU time in series). "matmul" times what
    # a user calls: coopjit.matmul(a, b, out=c) of torch tensors, the default plan, queued on
    # torch's stream without waiting (the per-call fast path), in the same blocks of calls as torch.
    extra = json.loads(args.plan or "{}")
    hdr = ("| case | ws TFLOP/s | TMA (ws=no) TFLOP/s | cp.async TFLOP/s | matmul TFLOP/s | torch TFLOP/s | ws / torch | "
           "TMA / torch | cp.async / torch | matmul / torch | spread ws / TMA / matmul / torch | rel. err vs f64 | plan |")
    lines = [hdr, "|" + "---|" * 13]
    cases = [(torch.bfloat16, 2048), (torch.bfloat16, 4096), (torch.bfloat16, 8192), (torch.float16, 2048), (torch.float16, 4096),
             (torch.float16, 8192), (torch.bfloat16, 4224)]
    if args.streamk_only:
        cases, args.streamk = [], True
    for dt, s in cases:
        reps = 40 if s <= 2048 else 20 if s <= 4224 else 5
        ws = gemm_case(s, s, s, dt, dt, plan={**extra, "wgmma": "yes", "tma": "yes", "ws": 2, "split": "dp"}, reps=reps)
        tm = gemm_case(s, s, s, dt, dt, plan={**extra, "wgmma": "yes", "tma": "yes", "ws": "no", "split": "dp"}, reps=reps)
        cp = gemm_case(s, s, s, dt, dt, plan={**extra, "wgmma": "yes", "tma": "no"}, reps=reps) if not args.no_cp_async else None
        a = torch.randn(s, s, device="cuda").to(dt)
        b = torch.randn(s, s, device="cuda").to(dt)
        c = torch.empty(s, s, device="cuda", dtype=dt)
        ref = torch.matmul(a.double(), b.double())
        coopjit.matmul(a, b, out=c, plan=extra or None)
        mm_err = ((c.double() - ref).norm() / ref.norm()).item()
        del ref
        mm = timed(lambda: coopjit.matmul(a, b, out=c, plan=extra or None), reps)
        th = timed(lambda: torch.matmul(a, b), reps)
        f = 2 * s**3
        cps = f"{f / cp[0] / 1e12:.1f}" if cp else "-"
        cpr = f"{th[0] / cp[0]:.2f}" if cp else "-"
        lines.append(f"| {TY[dt]} {s}^3 | {f / ws[0] / 1e12:.1f} | {f / tm[0] / 1e12:.1f} | {cps} | {f / mm[0] / 1e12:.1f} | "
                     f"{f / th[0] / 1e12:.1f} | {th[0] / ws[0]:.2f} | {th[0] / tm[0]:.2f} | {cpr} | {th[0] / mm[0]:.2f} | "
                     f"{ws[1]:.2f} / {tm[1]:.2f} / {mm[1]:.2f} / {th[1]:.2f} | {max(ws[2], tm[2], mm_err):.1e} | "
                     f"{ws[3]['macro_tile']} s{ws[3]['stages']} {ws[3]['split']} |")
        print(lines[-1], flush=True)
    for plan in json.loads(args.variants or "[]"):
        s = plan.pop("s", 4096)
        v = gemm_case(s, s, s, torch.bfloat16, torch.bfloat16, plan=dict(extra, **plan, wgmma="yes"), reps=20)
        lines.append(f"| bf16 {s}^3 wgmma variant {plan} | {2 * s**3 / v[0] / 1e12:.1f} | - | - | - | - | - | - | - | - | {v[1]:.2f} | "
                     f"{v[2]:.1e} | {v[3]['macro_tile']} s{v[3]['stages']} {v[3]['split']} ws {str(v[3]['ws']).split(':')[0]} |")
        print(lines[-1], flush=True)
    if args.streamk:
        # Tiles of 128 x 256 on an H100's 132 SMs (the kernel's M along the user's N, layout col):
        # 4224^2 is 33 x 17 = 561 tiles (4.25 waves); 896 x 4864 is 38 x 4 = 152 tiles, 4864 x 896
        # 7 x 19 = 133 (one more than the SMs); 2048^2 (128 tiles) and 4096^2 (512) fill their waves.
        # Columns: the automatic plan, forced DP (ws), Stream-K, 2-tile SK + DP and DP + SK (the last
        # wave's tiles streamed) in the ws kernel (workers = the SMs), torch; every plan through
        # run() (a wait after each launch; Stream-K plans launch the fix-up too); "matmul": what a
        # user calls, coopjit.matmul(a, b, out=c) of torch tensors with the automatic plan, queued on
        # torch's stream (the product and its fix-up) in blocks of calls like torch, and "matmul DP"
        # the same with plan split=dp.
        lines += ["", "| shape (bf16) | tiles | auto TFLOP/s | auto plan | DP ws TFLOP/s | SK ws TFLOP/s | SK+DP ws TFLOP/s | "
                  "DP+SK ws TFLOP/s | matmul TFLOP/s | matmul DP TFLOP/s | torch TFLOP/s | auto / DP ws | matmul / matmul DP | "
                  "matmul / torch | best SK / torch | rel. err vs f64 |", "|" + "---|" * 16]
        shapes = [tuple(int(x) for x in v.split("x")) for v in args.streamk_shapes.split(",")]
        for m, n, k in shapes:
            reps = 20 if m * n * k <= 2**36 else 10
            auto = gemm_case(m, n, k, torch.bfloat16, torch.bfloat16, plan=extra or None, reps=reps)
            dpw = gemm_case(m, n, k, torch.bfloat16, torch.bfloat16, plan={**extra, "split": "dp", "ws": 2}, reps=reps)
            sk = gemm_case(m, n, k, torch.bfloat16, torch.bfloat16, plan={**extra, "split": "sk", "ws": 2}, reps=reps)
            skdp = gemm_case(m, n, k, torch.bfloat16, torch.bfloat16, plan={**extra, "split": "sk+dp", "ws": 2}, reps=reps)
            dpsk = gemm_case(m, n, k, torch.bfloat16, torch.bfloat16, plan={**extra, "split": "dp+sk", "ws": 2}, reps=reps)
            a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
            th = timed(lambda: torch.matmul(a, b), reps)
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            mm = timed(lambda: coopjit.matmul(a, b, out=c, plan=extra or None), reps)
            mmd = timed(lambda: coopjit.matmul(a, b, out=c, plan={**extra, "split": "dp"}), reps)
            f = 2 * m * n * k
            mt, nt = (int(x) for x in dpw[3]["macro_tile"].split("x"))
            km, kn = (n, m) if dpw[3]["layout"] == "col" else (m, n)  # the kernel's M and N
            tiles = -(-km // mt) * -(-kn // nt)
            lines.append(f"| {m}x{n}x{k} | {tiles} | {f / auto[0] / 1e12:.1f} | {auto[3]['split']} ws "
                         f"{str(auto[3]['ws']).split(':')[0]} | {f / dpw[0] / 1e12:.1f} | {f / sk[0] / 1e12:.1f} | "
                         f"{f / skdp[0] / 1e12:.1f} | {f / dpsk[0] / 1e12:.1f} | {f / mm[0] / 1e12:.1f} | {f / mmd[0] / 1e12:.1f} | "
                         f"{f / th[0] / 1e12:.1f} | {dpw[0] / auto[0]:.2f} | {mmd[0] / mm[0]:.2f} | {th[0] / mm[0]:.2f} | "
                         f"{th[0] / min(sk[0], skdp[0], dpsk[0]):.2f} | "
                         f"{max(auto[2], dpw[2], sk[2], skdp[2], dpsk[2]):.1e} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}\n\n{text}\n")


def cluster(args):
    """Clusters of 2 blocks sharing B's panels (plan field cluster, TMA multicast) against the same ws
    DP plans without them and torch (cuBLAS), bf16, coopjit.matmul(a, b, out=c, plan=...) of torch
    tensors and torch.matmul, each captured in a CUDA graph (graph_timed), in alternating rounds
    (medians); a pause before each. Plans whose tiles along M are odd cannot take clusters ('-').
    --plan adds fields to every plan, e.g. '{"sg_m": 12, "nr": 192, "ws": 2}' (192 x 192 tiles, as cuBLAS
    takes on the shapes that 128 x 256 quantizes badly; no clusters: N tiles of 192).
    Also the cuBLAS kernel torch runs (torch.profiler), for its tile and cluster shape."""
    import json

    extra = json.loads(args.plan or "{}")
    plans = {"auto": None, "dp": {"split": "dp"}, "dp cl2": {"split": "dp", "cluster": 2},
             "pers": {"split": "dp", "persistent": "yes"}, "pers cl2": {"split": "dp", "persistent": "yes", "cluster": 2}}
    plans = {k: (None if v is None and not extra else {**extra, **(v or {})}) for k, v in plans.items()}
    lines = ["| shape (bf16) | kernel tiles | " + " | ".join(f"{k} TFLOP/s" for k in plans) + " | torch TFLOP/s | dp cl2 / dp | "
             "pers cl2 / pers | best / torch | rel. err vs f64 | auto plan | cuBLAS kernel |", "|" + "---|" * (len(plans) + 9)]
    for shape in args.cluster_shapes.split(","):
        m, n, k = (int(x) for x in shape.split("x"))
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = torch.matmul(a.double(), b.double())
        err, ok = 0.0, {}
        for name, plan in plans.items():
            try:
                coopjit.matmul(a, b, out=c, plan=plan)
            except ValueError as e:  # clusters refused (odd tiles along M)
                print(f"{shape} {name}: {e}", flush=True)
                continue
            torch.cuda.synchronize()
            ok[name] = plan
            err = max(err, ((c.double() - ref).norm() / ref.norm()).item())
        del ref
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            torch.matmul(a, b)
            torch.cuda.synchronize()
        kname = ";".join(sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}))[:120]
        reps = 20 if m * n * k <= 2**36 else 5
        times = {name: [] for name in [*ok, "torch"]}
        for _ in range(args.rounds):
            for name, plan in ok.items():
                time.sleep(0.5)
                times[name].append(graph_timed(lambda: coopjit.matmul(a, b, out=c, plan=plan), reps)[0])
            time.sleep(0.5)
            times["torch"].append(graph_timed(lambda: torch.matmul(a, b, out=c), reps)[0])
        med = {name: statistics.median(v) for name, v in times.items()}
        f = 2 * m * n * k
        tf = lambda name: f"{f / med[name] / 1e12:.1f}" if name in med else "-"  # noqa: E731
        ratio = lambda x, y: f"{med[y] / med[x]:.2f}" if x in med and y in med else "-"  # noqa: E731
        cfg = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, plan=ok.get("dp")).config
        mt, nt = (int(x) for x in cfg["macro_tile"].split("x"))
        km, kn = (n, m) if cfg["layout"] == "col" else (m, n)
        auto = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device=DEV, plan=ok.get("auto")).config
        best = min(v for name, v in med.items() if name != "torch")
        lines.append(f"| {shape} | {-(-km // mt)} x {-(-kn // nt)} | " + " | ".join(tf(name) for name in plans) + f" | {tf('torch')} | "
                     f"{ratio('dp cl2', 'dp')} | {ratio('pers cl2', 'pers')} | {med['torch'] / best:.2f} | {err:.1e} | "
                     f"{auto['split']} cl {auto['cluster']} | {kname} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; CUDA graphs, medians of {args.rounds} "
                     f"alternating rounds\n\n{text}\n")


# graph_timed (imported above from coopjit._bench_cuda; other benchmarks import it from here): (median
# seconds a call, spread) of `reps` calls captured in one CUDA graph, replayed in 5 blocks after a 0.2 s pause.


INT8_PEAK = 1979.0  # H100 SXM dense int8 tensor-core TOP/s (NVIDIA's H100 datasheet; H200 the same)


def int8(args):  # noqa: C901
    """int8 x int8 -> int32 through coopjit.matmul on torch tensors (out=: the prepared launch on
    torch's stream, no copies) against torch._int_mm on the same tensors, B given K-contiguous (an
    N x K tensor's .t(): _int_mm's cuBLASLt layout) and N-contiguous (K x N). Plans: the default
    (sm_90: 8-bit wgmma fed by TMA in the warp-specialized kernel; an N-contiguous B copied K-major
    first, plan field kmajor), the default without ws / without the persistent grid, session 12's
    default (4 warpgroups of 64 x 128, no ws), 128 x 128 blocks, cp.async instead of TMA, and the
    paths before wgmma (mma.sync for a K-contiguous B, CUDA cores for an N-contiguous one); at 2048
    and below the 128 x 256 / 64 x 256 / 64 x 128 blocks the planner chooses among. Each result is compared with _int_mm's
    (exact int32). Every plan row also as a CUDA graph of the same calls (the GPU's time, without the
    per-call planning of a plan dict), against _int_mm's graph."""
    import json

    extra = json.loads(args.plan or "{}")
    hdr = ("| size | B layout | coopjit plan | coopjit TOP/s | % of int8 peak | torch._int_mm TOP/s | coopjit / _int_mm | "
           "spread coopjit / torch | graph: coopjit TOP/s | graph: coopjit / _int_mm | exact |")
    lines = [hdr, "|" + "---|" * 11]
    reps_of = {1024: 200, 2048: 60, 4096: 15, 8192: 4}
    for s in (int(x) for x in args.sizes.split(",")):
        g = torch.Generator(device="cuda").manual_seed(s)
        a = torch.randint(-128, 128, (s, s), device="cuda", dtype=torch.int8, generator=g)
        layouts = (("N x K (K-contiguous)", torch.randint(-128, 128, (s, s), device="cuda", dtype=torch.int8, generator=g).t(), True),
                   ("K x N (N-contiguous)", torch.randint(-128, 128, (s, s), device="cuda", dtype=torch.int8, generator=g), False))
        c = torch.empty((s, s), device="cuda", dtype=torch.int32)
        reps = reps_of.get(s, 10)
        f = 2 * s**3
        for name, b, kcontig in layouts:
            ref = torch._int_mm(a, b)
            th, ths = timed(lambda: torch._int_mm(a, b), reps)
            plans = [("default", None), ("default without ws", {"ws": "no"}), ("default, not persistent", {"persistent": "no"}),
                     ("session-12 default (4 warpgroups of 64 x 128, no ws)", {"nr": 128, "sg_n": 2, "ws": "no", "split": "dp"}),
                     ("128x128 blocks", {"nr": 128, "sg_n": 1}), ("wgmma, cp.async", {"tma": "no"}),
                     ("mma.sync (before)" if kcontig else "CUDA cores (before)", {"wgmma": "no"} if kcontig else {"kmajor": "no"})]
            if s <= 2048 and not args.variants:  # the blocks the planner chooses among: 128 x 256, 64 x 256, 64 x 128
                plans += [("128x256 blocks", {"sg_m": 8, "nr": 256, "sg_n": 1}), ("64x256 blocks", {"sg_m": 4, "nr": 256, "sg_n": 1}),
                          ("64x128 blocks", {"sg_m": 4, "nr": 128, "sg_n": 1}),
                          ("64x128 blocks, no ws", {"sg_m": 4, "nr": 128, "sg_n": 1, "ws": "no"})]
            plans += [(f"variant {v}", v) for v in json.loads(args.variants or "[]")]
            plans = [(pname, {**extra, **(plan or {})} or None) for pname, plan in plans]
            # The default plan and _int_mm once more as CUDA graphs of `reps` calls: the GPU's time
            # without the host's per-call work (Python, the launch's preparation, the tensor maps).
            try:
                gr = graph_timed(lambda: coopjit.matmul(a, b, out=c, plan=extra or None), reps)
                gth = graph_timed(lambda: torch._int_mm(a, b), reps)
                lines.append(f"| {s}^3 | {name} | default, CUDA graph | {f / gr[0] / 1e12:.1f} | "
                             f"{100 * f / gr[0] / 1e12 / INT8_PEAK:.1f}% | {f / gth[0] / 1e12:.1f} (graph) | {gth[0] / gr[0]:.2f} | "
                             f"{gr[1]:.2f} / {gth[1]:.2f} | - | - | {torch.equal(c, ref)} |")
            except Exception as e:  # noqa: BLE001 (recorded in the table)
                gth = None
                lines.append(f"| {s}^3 | {name} | default, CUDA graph | - | - | - | - | - | - | - | capture failed: {e!r} |")
            print(lines[-1], flush=True)
            for pname, plan in plans:
                run = lambda: coopjit.matmul(a, b, out=c, plan=plan)  # noqa: E731
                c.zero_()
                run()
                torch.cuda.synchronize()
                exact = torch.equal(c, ref)
                slow = pname.startswith("CUDA cores")
                t, sp = timed(run, max(1, reps // 20) if slow else reps)
                # The same calls as a CUDA graph (the GPU's time: without the per-call planning of a plan dict)
                gcol = "- | -"
                if not slow and gth is not None:
                    try:
                        gp = graph_timed(run, reps)[0]
                        gcol = f"{f / gp / 1e12:.1f} | {gth[0] / gp:.2f}"
                    except Exception as e:  # noqa: BLE001 (recorded in the table)
                        gcol = f"capture failed: {type(e).__name__} | -"
                lines.append(f"| {s}^3 | {name} | {pname} | {f / t / 1e12:.1f} | {100 * f / t / 1e12 / INT8_PEAK:.1f}% | "
                             f"{f / th / 1e12:.1f} | {th / t:.2f} | {sp:.2f} / {ths:.2f} | {gcol} | {exact} |")
                print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, int8 peak taken as {INT8_PEAK:.0f} TOP/s\n\n{text}\n")


if __name__ == "__main__":
    main()
