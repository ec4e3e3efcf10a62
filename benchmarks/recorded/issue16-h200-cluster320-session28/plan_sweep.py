# Planner sweep (session 28, hsk): PYTHONPATH=<build> python3 plan_sweep.py OUT.json on main and the branch, then compare the two files.
import sys, json
sys.path.insert(0, "/work/wt/hsk/scripts")
from plan_dump import gpu_strides
from coopjit import _core
out = {}
for k in (1024, 4096, 8192):
    for m in range(512, 8193, 128):
        for n in range(512, 8193, 128):
            for lay in ("nn", "tn", "nt"):
                shape, strides = gpu_strides(m, n, k, lay)
                f = _core.gpu_gemm_plan("target:sm_90", ["bf16", "bf16", "bf16"], shape, strides, False, {}, None)
                out[f"{m}x{n}x{k} {lay}"] = f"{f['layout']} {f['macro_tile']} {f['split']} cl={f['cluster']}"
json.dump(out, open(sys.argv[1], "w"))
