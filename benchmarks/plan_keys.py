"""The plan (kernel.config, without the shares field) of a list of products of the bench and its shape sweep,
as JSON: run under two builds and compare, to see which plans a change moves on this machine."""
import json, numpy as np, ml_dtypes, coopjit
out = {}
for dt in (np.float32, np.float64, ml_dtypes.bfloat16, np.int8):
    for m, n, k in [(256,256,256),(1024,1024,1024),(4096,4096,4096),(513,129,700),(100,37,250),(3000,500,200),(64,4096,4096),(4096,64,4096),(1,4096,4096),(4096,1,4096),(16,4096,4096),(64,64,8192),(32,32,32),(64,64,64),(512,512,512),(128,512,4096)]:
        c = dict(coopjit.compile_gemm(m, n, k, dt).config); c.pop("shares", None)
        out[f"{np.dtype(dt).name} {m}x{n}x{k}"] = json.dumps(c, sort_keys=True, default=str)
print(json.dumps(out))
