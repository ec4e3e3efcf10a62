import statistics, time, re, cProfile, pstats
import numpy as np, torch, coopjit
from coopjit import _core
from coopjit._kernel_args import _gpu_overrides

def ev_time(fn, reps=300, blocks=5):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(blocks):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps): fn()
        e.record(); e.synchronize()
        out.append(s.elapsed_time(e) / reps * 1e3)
    return statistics.median(out)

B = 4096
a = torch.randn(B, 16, 16, device="cuda").bfloat16(); b = torch.randn(B, 16, 16, device="cuda").bfloat16()
c = torch.empty(B, 16, 16, device="cuda", dtype=torch.bfloat16)
ref = a.double() @ b.double()
print("bmm us", ev_time(lambda: torch.bmm(a, b, out=c)))
types = ["bf16", "bf16", "bf16"]
shape = [16, 16, 16, 1, B]
strides = [16, 1, 16, 1, 16, 1, 0, 0, 0, 256, 256, 256]
variants = [{}, {"mma": "yes"}, {"nr": 8}, {"kb": 16}, {"kb": 4}, {"layout": "row"}, {"sg_n": 2}, {"nr": 32}]
for v in variants:
    try:
        k = _core.gpu_gemm_kernel("cuda:0", types, shape, strides, False, _gpu_overrides(v), None)
        l = k.launcher(types, shape, strides, True)
        if l is None:
            print(v, "no launcher", k.plan_key); continue
        c.zero_()
        l.launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), 1.0, 0.0, 0)
        torch.cuda.synchronize()
        err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
        t = ev_time(lambda: l.launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), 1.0, 0.0, 0))
        ptx = k.ptx
        regs = re.findall(r"\.reg \.(\w+) \s*%\w+<(\d+)>", ptx)
        sh = re.findall(r"\.shared[^;]*\[(\d+)\]", ptx)
        print(f"{str(v):45s} {t:7.2f} us err {err:.1e} groups {l.groups} {k.plan_key} regs {regs} shared {sh}", flush=True)
    except Exception as e:
        print(v, "ERR", type(e).__name__, str(e)[:200])
x = torch.randn(16, 16, device="cuda")
kern = coopjit.compile_gemm(16, 16, 16, np.float32, device="cuda:0")
kern(x, x)
pr = cProfile.Profile(); pr.enable()
for _ in range(1000): kern(x, x)
pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(10)
