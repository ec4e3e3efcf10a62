# Every plan override key with edge values on a few products: the refusal text or the plan (compare builds).
import numpy as np, coopjit, sys
keys = ["layout","simd_width","mr","nr","kb","kt","threads","shares","split","pack","prepacked_b","vnni","amx","amx_feed",
        "amx_prefetch","amx_store","demote","cycles","c_prefetch","direct_a","inline_b","own_a","k_inner","nc_tiles",
        "b_prefetch","mc_tiles","fixed","order","grid_m","ksplit"]
vals = [-1, 0, 1, 2, 3, 4, 6, 7, 8, 64, 65, 128, 129, 1024, 1025, 4096, 4097, 2**30, 2**30 + 1]
from coopjit import _core
from coopjit._kernel_args import _overrides
out = []
for dt, shape in ((np.float32, (64, 64, 300)), (np.float32, (1, 200, 3000)), (np.int8, (64, 64, 256)), (np.float64, (37, 5, 9000))):
    m, n, k = shape
    a = np.ones((m, k), dt); b = np.ones((k, n), dt)
    for key in keys:
        for v in vals:
            for extra in ({}, {"pack": 1}, {"order": 1}, {"pack": 0, "order": 0, "threads": 3}):
                ov = dict(extra); ov[key] = v
                try:
                    f = _core.gemm_plan(a, b, np.empty((m, n), np.int32 if dt == np.int8 else dt), False,
                                        ["i8","i8","i32"] if dt == np.int8 else (["f32"]*3 if dt == np.float32 else ["f64"]*3), ov)
                    out.append(f"{dt.__name__} {shape} {ov}: " + " ".join(f"{key}={f[key]}" for key in sorted(f)))
                except Exception as e:
                    out.append(f"{dt.__name__} {shape} {ov}: {type(e).__name__} {str(e)[:400]!r}")
open(sys.argv[1], "w").write("\n".join(out) + "\n")
print(len(out))
