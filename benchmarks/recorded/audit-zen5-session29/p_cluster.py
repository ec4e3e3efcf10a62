"""cluster=2 on wide Hopper tiles and the SK + DP rule's plans (host side, no GPU): random plan
fields around cluster / nr / split / persistent / stages / layout / epilogues on sm_90, each plan
the check lets through compiled to PTX (ptx.compile_gemm, no ptxas); anything but a plan refusal
(ValueError / TypeError) from either step is a finding. Usage: probe SEED CASES"""
import sys
import collections
import time
import ml_dtypes
import numpy as np
from coopjit import ptx

seed, cases = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(seed)
BF16 = ml_dtypes.bfloat16
F16 = np.float16
fields = {"nr": [128, 192, 256, 320, 384, 448, 64], "sg_m": [4, 8, 12], "sg_n": [1, 2], "split": ["dp", "sk", "sk+dp"],
          "stages": [2, 3, 4], "layout": ["row", "col"], "persistent": ["yes", "no"], "tma_store": [0, 1],
          "cluster": [2, 2, 2, 0, 4, 3], "ws": [1, 1, 2, 0], "group_m": [0, 2, 3, 8], "kmajor": [0, 1], "workers": [2, 3, 7, 132]}
shapes = [(2816, 1920, 8192), (1920, 2816, 8192), (2048, 2560, 4096), (4096, 4096, 256), (260, 640, 72), (4864, 3072, 4096), (5632, 5632, 1024), (128, 320, 64), (130, 321, 70), (1, 640, 64),
          (256, 640, 100), (3584, 4096, 512), (1000, 960, 72)]
kinds = collections.Counter()
bad = []
t0 = time.time()
for i in range(cases):
    plan = {"cluster": 2}
    for f, vs in fields.items():
        if rng.random() < 0.5:
            v = vs[int(rng.integers(len(vs)))]
            plan[f] = v.item() if isinstance(v, np.generic) else v
    m, n, k = shapes[int(rng.integers(len(shapes)))]
    dt = [BF16, F16, np.int8][int(rng.integers(3))]
    trans_b = bool(rng.random() < 0.5)
    kw = {}
    r = rng.random()
    if r < 0.15:
        kw["bias"] = True
    elif r < 0.25:
        kw["activation"] = "relu"
    try:
        kern = ptx.compile_gemm(m, n, k, dt, target="sm_90", trans_b=trans_b, plan=plan,
                                **({"bias": np.zeros(n, np.float32)} if "bias" in kw else {}),
                                **({"activation": "relu"} if "activation" in kw else {}))
        text = kern.source("ptx")
        cfg = kern.config
        kinds["compiled cluster=" + str(cfg.get("cluster"))] += 1
        if str(cfg.get("cluster")).startswith("2") and ".reqnctapercluster 2" not in text:
            bad.append(("cluster in plan, not in PTX", plan, (m, n, k), np.dtype(dt).name, trans_b))
    except (ValueError, TypeError) as e:
        kinds["refused"] += 1
        kinds["refused: " + str(e)[:70]] += 0
    except Exception as e:  # noqa: BLE001 (a finding)
        bad.append((type(e).__name__, str(e)[:200], plan, (m, n, k), np.dtype(dt).name, trans_b, kw))
print({k: v for k, v in kinds.items() if v}, "in", round(time.time() - t0), "s")
print("findings:", len(bad))
for b in bad[:20]:
    print(b)
