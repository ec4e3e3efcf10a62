"""Lead, session 29 (session 31: + group_m variants, the tiles in bands of M tiles): f32 products on the H200's CUDA cores, named SIMT plan variants against the
planner's plan and cuBLAS (torch.matmul, TF32 off), CUDA graphs of 10 calls, medians of
alternating rounds, a pause before each block; every result checked against float64 first."""
import json, os, statistics, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import numpy as np, torch, coopjit
from bench_cuda_gemm import graph_timed
torch.backends.cuda.matmul.allow_tf32 = False
VARIANTS = {"auto": None, "cublas": "cublas",
            "wg4x2": {"sg_m": 4, "sg_n": 2}, "wg2x4": {"sg_m": 2, "sg_n": 4},
            "m128n64": {"mr": 128, "nr": 64}, "m64n128": {"mr": 64, "nr": 128},
            "kb16": {"kb": 16}, "kb4": {"kb": 4}, "st3": {"stages": 3}, "st2": {"stages": 2}, "st4": {"stages": 4},
            "wg4x2st3": {"sg_m": 4, "sg_n": 2, "stages": 3}, "m32n64": {"mr": 32, "nr": 64},
            "wg4x4": {"sg_m": 4, "sg_n": 4},
            "gm4": {"group_m": 4}, "gm8": {"group_m": 8}, "gm16": {"group_m": 16}, "gm32": {"group_m": 32}}
shapes = sys.argv[1].split(",")
if os.environ.get("ONLY"):
    VARIANTS = {k: v for k, v in VARIANTS.items() if k in os.environ["ONLY"].split(",")}
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
out = []
for s in shapes:
    m, n, k = (int(x) for x in s.split("x"))
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(m, k, device="cuda", generator=g)
    b = torch.randn(k, n, device="cuda", generator=g)
    ref = a.double() @ b.double()
    fns, outs, cfg = {}, {}, {}
    for lab, pl in VARIANTS.items():
        outs[lab] = torch.empty(m, n, device="cuda")
        if pl == "cublas":
            fns[lab] = lambda o=outs[lab]: torch.matmul(a, b, out=o)
            continue
        try:
            kern = coopjit.compile_gemm(m, n, k, np.float32, device="cuda:0", plan=pl)
        except Exception as e:  # noqa: BLE001
            print(s, lab, "refused:", str(e)[:200], flush=True)
            continue
        cfg[lab] = f"{kern.config.get('macro_tile')} {kern.config.get('key', '')}"
        fns[lab] = lambda kern=kern, o=outs[lab]: kern(a, b, o)
    errs = {}
    for lab, fn in fns.items():
        fn(); torch.cuda.synchronize()
        errs[lab] = ((outs[lab].double() - ref).norm() / ref.norm()).item()
        if not errs[lab] < 1e-5:
            print(s, lab, "WRONG: relative error", errs[lab], flush=True)
    fns = {lab: fn for lab, fn in fns.items() if errs[lab] < 1e-5}
    del ref
    t = {lab: [] for lab in fns}
    for r in range(rounds):
        labs = list(fns) if r % 2 == 0 else list(fns)[::-1]
        for lab in labs:
            time.sleep(0.2)
            t[lab].append(graph_timed(fns[lab], 10)[0])
    f = 2 * m * n * k
    row = {lab: {"us": statistics.median(v) * 1e6, "tflops": f / statistics.median(v) / 1e12,
                 "all_us": [x * 1e6 for x in v], "err": errs[lab], "config": cfg.get(lab, "cublas")} for lab, v in t.items()}
    out.append({"shape": s, "plans": row})
    cub = row["cublas"]["us"]
    for lab, p in sorted(row.items(), key=lambda kv: kv[1]["us"]):
        print(f"{s} {lab:9s} {p['us']:9.1f} us {p['tflops']:5.1f} TF/s  cuBLAS/this {cub / p['us']:.3f}  err {p['err']:.1e}  [{min(p['all_us']):.1f}-{max(p['all_us']):.1f}] {p['config']}", flush=True)
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "f32plans.json"), "w"), indent=1)
