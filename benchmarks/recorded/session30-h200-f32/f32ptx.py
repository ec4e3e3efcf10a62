"""Dump the sm_90 f32 SIMT kernels' PTX for the named variants (4096^3) into $OUT-side dir argv[1]."""
import sys, os
from coopjit import _core
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
V = {"auto": {}, "wg4x2": {"sg_m": 4, "sg_n": 2}, "kb16": {"kb": 16}, "m128n64": {"mr": 128, "nr": 64},
     "m64n128": {"mr": 64, "nr": 128}, "m32n64": {"mr": 32, "nr": 64}, "st3": {"stages": 3}}
m = n = k = 4096
for lab, ov in V.items():
    kk = _core.gpu_gemm_kernel("target:sm_90", ["f32", "f32", "f32"], [m, n, k, 1, 1], [k, 1, n, 1, n, 1, 0, 0, 0, 0, 0, 0], False, ov, None)
    open(os.path.join(d, lab + ".ptx"), "w").write(kk.ptx)
