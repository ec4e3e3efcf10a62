# The 128 x 320 Hopper plan check (host side, no GPU): random override sets around nr 288-384 on sm_90.
import numpy as np, itertools, collections
from coopjit import _core
from coopjit._kernel_args import _gpu_overrides
rng = np.random.default_rng(3)
kinds = collections.Counter(); bad = []
fields = {"nr": [256, 288, 296, 300, 304, 320, 336, 352, 384, 392, 400, 0, -8], "sg_m": [1, 2, 4, 8], "sg_n": [1, 2, 4],
          "ws": [0, 1, 2], "tma": [0, 1], "wgmma": [0, 1], "split": ["dp", "sk", "sk+dp"], "stages": [1, 2, 3, 4, 6],
          "layout": ["row", "col"], "tma_store": [0, 1, 2], "persistent": [0, 1], "kmajor": [0, 1], "mr": [64, 128, 256],
          "workers": [1, 7, 132]}
types_list = [("bf16", "bf16", "f32"), ("bf16", "bf16", "bf16"), ("f16", "f16", "f16"), ("i8", "i8", "i32"), ("f32", "f32", "f32"), ("e4m3", "e4m3", "bf16")]
for i in range(3000):
    plan = {"nr": int(rng.choice(fields["nr"]))}
    for f, vs in fields.items():
        if f != "nr" and rng.random() < 0.35:
            plan[f] = vs[int(rng.integers(len(vs)))]
            if isinstance(plan[f], np.generic): plan[f] = plan[f].item()
    types = list(types_list[int(rng.integers(len(types_list)))])
    m, n, k = [int(rng.choice([1, 64, 130, 1000, 2816, 4096])) for _ in range(3)]
    shape = [m, n, k, 1, 1]
    strides = [k, 1, n, 1, n, 1] + [0] * 6
    epi = None
    try:
        ov = _gpu_overrides(plan)
        f = _core.gpu_gemm_plan("target:sm_90", types, shape, strides, bool(rng.random() < 0.3), ov, epi)
        kinds["planned " + ("nr=" + f.get("nr", "?"))] += 1
        if f.get("nr") not in ("256", "320", "128"): print("PLANNED", plan, types, shape, {q: f.get(q) for q in ("nr", "mr", "wgmma", "tma", "ws", "sg_m", "sg_n", "mma", "macro_tile", "layout")})
    except (ValueError, TypeError) as e:
        kinds["refused"] += 1
    except Exception as e:
        bad.append((plan, types, shape, type(e).__name__, str(e)[:200]))
print(dict(kinds)); print("other exceptions", len(bad)); [print(b) for b in bad[:10]]
