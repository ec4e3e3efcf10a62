"""Single-wave probes (issue 16, session 18): the kernels torch.matmul (cuBLAS) runs, one launch of
cuBLAS or of a coopjit plan for ncu, and CUDA-graph timings of plans against cuBLAS in one process
(each result checked against float64 first; medians of alternating rounds).

    python benchmarks/cuda_single_wave.py names 4224x1024x4096,4352x1024x4096
    ncu --profile-from-start off --launch-count 1 --set full -o ours python benchmarks/cuda_single_wave.py one ours 4224x1024x4096 '{"layout": "col", "nr": 256, "sg_m": 8}'
    ncu --profile-from-start off --launch-count 1 --set full -o cublas python benchmarks/cuda_single_wave.py one cublas 4224x1024x4096
    python benchmarks/cuda_single_wave.py sweep spec.json    (a list of [shape, {label: plan dict, null or "cublas"}])
    python benchmarks/cuda_single_wave.py orient 4224x1024x4096,4224x1024x8192,4200x1000x4096,4096x1024x8192

`orient`: the automatic plan (the orientation by waves), the strides' orientation (layout col: the
default before session 18), col and row with 128 x 256 DP named, and cuBLAS.
"""
import json
import statistics
import sys
import time

import ml_dtypes
import torch

import coopjit
from _cuda_rounds import bf16_operands, cublas_kernels
from bench_cuda_gemm import graph_timed

W256 = {"split": "dp", "ws": 2, "sg_m": 8, "nr": 256, "persistent": 0}


def shp(s):
    return tuple(int(x) for x in s.split("x"))


def names(shapes):
    for s in shapes:
        for key, us in cublas_kernels(*bf16_operands(*shp(s)), 5):
            print(s, "cuBLAS kernel:", key, f"{us:.1f} us a call", flush=True)


def one(which, s, plan):
    m, n, k = shp(s)
    a, b, c = bf16_operands(m, n, k)
    if which == "cublas":
        fn = lambda: torch.matmul(a, b, out=c)  # noqa: E731
    else:
        kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=plan)
        print({x: kern.config.get(x) for x in ("macro_tile", "split", "stages", "persistent", "workers", "group_m", "cluster")}, flush=True)
        fn = lambda: kern(a, b, c)  # noqa: E731
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    time.sleep(0.5)
    torch.cuda.profiler.start()
    fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def sweep(spec, rounds=3):
    """spec: list of (shape, {label: plan or 'cublas'})"""
    for s, plans in spec:
        m, n, k = shp(s)
        a, b, _ = bf16_operands(m, n, k)
        ref = a.double() @ b.double()
        fns, outs = {}, {}
        for lab, pl in plans.items():
            outs[lab] = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            if pl == "cublas":
                fns[lab] = lambda o=outs[lab]: torch.matmul(a, b, out=o)
            else:
                try:
                    kern = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=pl)
                except Exception as e:  # noqa: BLE001
                    print(s, lab, "refused:", str(e)[:200], flush=True)
                    continue
                fns[lab] = lambda kern=kern, o=outs[lab]: kern(a, b, o)
        for lab, fn in fns.items():
            fn()
            torch.cuda.synchronize()
            e = ((outs[lab].double() - ref).norm() / ref.norm()).item()
            assert e < 1e-2, (s, lab, e)
        t = {lab: [] for lab in fns}
        for _ in range(rounds):
            for lab, fn in fns.items():
                time.sleep(0.3)
                t[lab].append(graph_timed(fn, 10)[0])
        f = 2 * m * n * k
        print(s, " ".join(f"{lab}={statistics.median(v) * 1e6:.2f}us/{f / statistics.median(v) / 1e12:.0f}T" for lab, v in t.items()),
              flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "names":
        names(sys.argv[2].split(","))
    elif mode == "one":
        one(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]) if len(sys.argv) > 4 else W256)
    elif mode == "orient":
        col = {"layout": "col"}
        sweep([(sh, {"cublas": "cublas", "auto": None, "col (before)": col, "col 256": dict(W256, layout="col"),
                     "row 256": dict(W256, layout="row")}) for sh in sys.argv[2].split(",")])
    elif mode == "sweep":
        sweep(json.loads(open(sys.argv[2]).read()))
