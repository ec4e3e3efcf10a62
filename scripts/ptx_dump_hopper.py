"""The PTX of ~470 sm_90 GEMM plans (bf16 / f16 / int8, f32 C, fused epilogues, Stream-K options,
edge shapes) as one line each: plan key and the PTX's SHA-1, or the refusal. For a refactor of the
Hopper lowering: dump with the build before and after, then cmp.

    PYTHONPATH=<build> python3 scripts/ptx_dump_hopper.py OUT.txt
"""
import hashlib
import sys

import ml_dtypes
import numpy as np

from coopjit import _core
from coopjit._epilogue import Epilogue
def steps(dt, m, n, **kw):
    return Epilogue("t", np.dtype(dt), np.dtype(dt), m, n, bind_arrays=False, **kw).steps()
out=open(sys.argv[1],'w')
cases=[]
for (m,n,k) in [(4096,4096,4096),(1024,4864,8192),(520,264,2056),(4224,4224,8192),(2816,1920,8192),(133,77,300)]:
    for types in (["bf16","bf16","bf16"],["bf16","bf16","f32"],["f16","f16","f16"],["i8","i8","i32"]):
        for ov in ({}, {"sk_stage_store":1}, {"sk_stage_store":2}, {"split":"sk","sk_trace":1}, {"tma_store":0}):
            for epi in (None, dict(bias=True, activation="gelu"), dict(bias=True, activation="silu", residual=True), dict(bias=True)):
                if epi is not None and types[0]=="i8": continue
                cases.append(((m,n,k),types,ov,epi))
for (m,n,k),types,ov,epi in cases:
    strides=[k,1,n,1,n,1,0,0,0,0,0,0]
    st=None
    if epi is not None:
        st=steps(ml_dtypes.bfloat16 if types[0]=="bf16" else np.float16, m, n, **epi)
    try:
        kk=_core.gpu_gemm_kernel("target:sm_90", types, [m,n,k,1,1], strides, False, ov, st)
        r=kk.plan_key+" "+hashlib.sha1(kk.ptx.encode()).hexdigest()
    except Exception as e:
        r="refused: " + str(e)[:200]
    out.write(f"{m}x{n}x{k} {types} {ov} {epi}: {r}\n")
