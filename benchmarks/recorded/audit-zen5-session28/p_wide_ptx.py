# Wide wgmma tiles other than 320 / 384 that the plan check lets through: PTX pieces and ptxas -v here (no GPU).
import re, ml_dtypes, numpy as np
from coopjit import ptx
BF16 = ml_dtypes.bfloat16
for nr, trans_b, layout in ((296, True, "row"), (304, True, "row"), (352, True, "row"), (264, True, "row"), (376, True, "row"), (296, False, "col"), (320, False, "row"), (384, False, "row"), (336, False, "row")):
    plan = {"sg_m": 8, "nr": nr, "layout": layout, "split": "dp"}
    try:
        k = ptx.compile_gemm(2816, 1920, 4096, BF16, target="sm_90", trans_b=trans_b, plan=plan)
        text = k.source("ptx")
        pieces = sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16", text)), key=int)
        rep = ptx.ptxas(text, "sm_90")
        spills = sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", rep))
        regs = re.findall(r"Used (\d+) registers", rep)
        print(nr, "trans_b" if trans_b else "N-major", layout, k.config["macro_tile"], "pieces", pieces, "spills", spills, "regs", regs,
              "PERF-LOSS" if "Potential Performance Loss" in rep else "")
    except Exception as e:
        print(nr, trans_b, layout, type(e).__name__, str(e)[:160])
