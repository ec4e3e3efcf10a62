"""4352x1024x4096 with A transposed (a.T @ b): the planner's plan (col 128 x 320, one wave, since
kRate320OneTile) against the plan before (col 128 x 256 SK + DP) and cuBLAS; CUDA graphs, 3
alternating rounds, medians; each checked against float64 first."""
import statistics, sys, time, json
import ml_dtypes, numpy as np, torch
import coopjit
from coopjit._bench_cuda import graph_timed
out = {}
for (m, n, k, ta) in ((4352, 1024, 4096, True), (4352, 1024, 8192, True), (1280, 3584, 8192, False)):
    g = torch.Generator(device="cuda").manual_seed(1)
    a = (torch.randn(k, m, device="cuda", generator=g).to(torch.bfloat16).T) if ta else torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(k, n, device="cuda", generator=g).to(torch.bfloat16)
    ref = a.double() @ b.double()
    plans = {"auto": None, "before": {"layout": "col", "sg_m": 8, "nr": 256, "split": "sk+dp"}}
    fns, cfgs = {}, {}
    o = {lab: torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for lab in list(plans) + ["cublas"]}
    for lab, pl in plans.items():
        kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", trans_a=ta, plan=pl)
        cfgs[lab] = f"{kern.config['layout']} {kern.config['macro_tile']} {kern.config['split']} st{kern.config['stages']} alias {kern.config['epi_alias']}"
        at = a.T if ta else a  # the kernel takes op(A)'s storage: A as stored (k x m) when trans_a
        fns[lab] = lambda kern=kern, at=at, oo=o[lab]: kern(at, b, oo)
    fns["cublas"] = lambda: torch.matmul(a, b, out=o["cublas"])
    for lab, fn in fns.items():
        fn(); torch.cuda.synchronize()
        e = ((o[lab].double() - ref).norm() / ref.norm()).item()
        assert e < 1e-2, (lab, e)
    t = {lab: [] for lab in fns}
    for _ in range(3):
        for lab, fn in fns.items():
            time.sleep(0.25)
            t[lab].append(graph_timed(fn, 10)[0] * 1e6)
    row = {lab: statistics.median(v) for lab, v in t.items()}
    out[f"{m}x{n}x{k} trans_a={ta}"] = {"us": row, "all_us": t, "config": cfgs}
    print(f"{m}x{n}x{k} trans_a={ta}", " ".join(f"{l}={v:.2f}us" for l, v in row.items()), cfgs, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
