"""AMX plans on a CPU with AMX tiles (issue 14): bf16 and int8 products, one thread and all cores,
the automatic plan and K-tile / block variants, as rates and as fractions of coopjit.peak()'s AMX
peaks, then torch (matmul, torch._int_mm) on the same cores. Each case is checked against float64
and timed in its own block after a pause (median of 5 blocks).

    python benchmarks/amx_probe.py            # on the 16-core Emerald Rapids host of the accelerator machine

Recorded: benchmarks/recorded/issue14-emr16-amx-session8.txt."""
import json
import time

import ml_dtypes
import numpy as np

import coopjit
from plan_sweep import timed  # this folder: the same blocks-after-a-pause timer


def operands(rng, dt, m, n, k):
    if dt == "int8":
        return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    return a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)


def main():
    if not coopjit.cpu_info()["features"].get("amx-tile"):
        print("this CPU has no AMX tiles: nothing to measure")
        return
    pk = coopjit.peak()
    print(json.dumps({k: (v.get("single"), v.get("all")) for k, v in pk.items() if isinstance(v, dict)}))
    rng = np.random.default_rng(0)
    cases = []
    for dt, kts in (("bf16", (512, 2048)), ("int8", (1024, 4096))):
        cases += [(dt, 512, 512, 4096, {"threads": 1}), (dt, 512, 512, 4096, {"threads": 1, "kt": kts[0]})]
        cases += [(dt, s, s, s, {}) for s in (1024, 2048, 4096)]
        cases += [(dt, 4096, 4096, 4096, p) for p in [{"kt": x} for x in kts] + [{"mc_tiles": 16}]]
    current = None
    for dt, m, n, k, plan in cases:
        if current is None or current[0] != (dt, m, n, k):
            a, b = operands(rng, dt, m, n, k)
            current = ((dt, m, n, k), a, b, a.astype(np.float64) @ b.astype(np.float64))
        _, a, b, ref = current
        kern = coopjit.compile_gemm(m, n, k, a.dtype, plan=plan)
        c = coopjit.matmul(a, b, plan=plan)
        err = float(np.max(np.abs(c.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)
        time.sleep(0.15)
        t = timed(lambda: coopjit.matmul(a, b, plan=plan))
        unit = "amx_bf16" if dt == "bf16" else "amx_int8"
        peak = pk[unit]["single"] if plan.get("threads") == 1 else pk[unit]["all"]
        rate = 2 * m * n * k / t / 1e9
        cf = kern.config
        print(f"{dt:5} {m}x{n}x{k} {str(plan):<28} {rate:9.1f} G/s {rate / peak * 100:5.1f}% peak  err {err:.1e} "
              f"[{' '.join(f'{f}={cf[f]}' for f in ('amx', 'kt', 'mc_tiles', 'grid_m', 'threads'))}]", flush=True)
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(coopjit.get_num_threads())
    for dt, s in (("bf16", 1024), ("bf16", 2048), ("bf16", 4096), ("int8", 1024), ("int8", 2048), ("int8", 4096)):
        if dt == "int8":
            ta = torch.randint(-128, 127, (s, s), dtype=torch.int8)
            tb = torch.randint(-128, 127, (s, s), dtype=torch.int8)
            f = lambda: torch._int_mm(ta, tb)  # noqa: E731
        else:
            ta = torch.randn(s, s, dtype=torch.bfloat16)
            tb = torch.randn_like(ta)
            f = lambda: torch.matmul(ta, tb)  # noqa: E731
        time.sleep(0.3)
        t = timed(f)
        print(f"torch {dt} {s}: {2 * s**3 / t / 1e9:9.1f} G/s")


if __name__ == "__main__":
    main()
