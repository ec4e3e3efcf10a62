"""Which kernels cuBLAS (torch.matmul, bf16) runs on Hopper for given shapes (issue 16, session 26):
kernel name, grid, block, registers and shared memory from torch.profiler's trace, one call per shape
after a warm-up.

    python benchmarks/cublas_kernels_s26.py OUT.txt MxNxK [MxNxK ...]
"""
import json
import os
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile


def main():
    out = open(sys.argv[1], "w")
    for s in sys.argv[2:]:
        m, n, k = (int(x) for x in s.split("x"))
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.matmul(a, b, out=c)
            torch.cuda.synchronize()
        path = os.path.join(tempfile.mkdtemp(), "t.json")
        prof.export_chrome_trace(path)
        ev = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
        for e in ev:
            a_ = e.get("args", {})
            line = (f"{s}: {e['name']} grid={a_.get('grid')} block={a_.get('block')} regs={a_.get('registers per thread')} "
                    f"smem={a_.get('shared memory')} dur={e.get('dur')}us")
            print(line, flush=True)
            out.write(line + "\n")
    out.close()


if __name__ == "__main__":
    main()
