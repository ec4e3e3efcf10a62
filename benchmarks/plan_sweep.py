"""Plan variants side by side on the machine at hand (issue 14): for each case, coopjit's automatic
plan and plans with fields overridden (mc_tiles, kt, threads, order, ...), each timed in its own
block after a pause (median of blocks), results checked against float64. Prints one line per
variant with the rate and the speed against the automatic plan. What the planner's constants are
tuned from on machines other than the one at hand. Run: python benchmarks/plan_sweep.py [--quick] [CASE ...] (CASE: a substring of "float32 1x4096x4096")"""
import sys
import time

import numpy as np

import coopjit
from _rounds import operands, timed

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None


CASES = [
    ("float32", 1024, 1024, 1024, [{"grid_m": 1}, {"grid_m": 2}, {"grid_m": 8}, {"mc_tiles": 4}, {"mc_tiles": 16},
                                   {"kt": 512}]),
    ("float32", 2048, 2048, 2048, [{"grid_m": 1}, {"mc_tiles": 16}, {"mc_tiles": 48}]),
    ("float32", 4096, 4096, 4096, [{"grid_m": 1}, {"mc_tiles": 16}, {"mc_tiles": 96}, {"kt": 512}]),
    ("bfloat16", 1024, 1024, 1024, [{"grid_m": 1}, {"mc_tiles": 4}, {"mc_tiles": 16}, {"kt": 256}, {"kt": 512}]),
    ("bfloat16", 4096, 4096, 4096, [{"grid_m": 1}, {"kt": 256}, {"kt": 512}, {"kt": 1024}, {"mc_tiles": 16},
                                    {"kt": 512, "mc_tiles": 16}]),
    ("int8", 1024, 1024, 1024, [{"grid_m": 1}, {"kt": 512}, {"mc_tiles": 4}]),
    ("int8", 4096, 4096, 4096, [{"grid_m": 1}, {"kt": 512}, {"kt": 1024}, {"kt": 2048}, {"mc_tiles": 16}]),
    ("float32", 1, 4096, 4096, [{"kt": 64}, {"threads": 8}, {"threads": 12}]),
    ("float32", 4096, 1, 4096, [{"threads": 4}, {"threads": 8}, {"threads": 12}]),
    ("float32", 16, 4096, 4096, [{"kt": 16}, {"threads": 8}]),
    ("float32", 64, 4096, 4096, [{"kt": 16}, {"kt": 128}, {"threads": 8}]),
    ("float32", 4096, 64, 4096, [{"split": "dp"}, {"threads": 8}]),
    ("float32", 64, 64, 8192, [{"threads": 8}]),
    ("float32", 513, 129, 700, [{"pack": True}, {"threads": 8}]),
    ("float32", 3000, 500, 200, [{"pack": True}, {"pack": True, "grid_m": 4}]),
]


def main():
    quick = "--quick" in sys.argv
    only = [a for a in sys.argv[1:] if not a.startswith("--")]  # substrings of "dtype MxNxK": those cases only
    rng = np.random.default_rng(0)
    print(f"coopjit {coopjit.__version__}, {coopjit.get_num_threads()} workers, {coopjit.cpu_info()['name']}")
    for dtype, m, n, k, variants in CASES:
        if (dtype == "bfloat16" and ml_dtypes is None) or (only and not any(o in f"{dtype} {m}x{n}x{k}" for o in only)):
            continue
        a, b = operands(rng, dtype, m, n, k)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        base = None
        for plan in [None] + variants:
            try:
                kern = coopjit.compile_gemm(m, n, k, a.dtype, plan=plan)
                c = coopjit.matmul(a, b, plan=plan)
            except (ValueError, TypeError) as e:
                print(f"  {dtype} {m}x{n}x{k} {plan}: refused ({e})")
                continue
            err = float(np.max(np.abs(c.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)
            time.sleep(0.1)
            t = timed(lambda: coopjit.matmul(a, b, plan=plan), seconds=0.15 if quick else 0.4)
            base = base or t
            cf = kern.config
            desc = " ".join(f"{f}={cf[f]}" for f in ("order", "mr", "nr", "kt", "mc_tiles", "grid_m", "threads", "split", "pack",
                                                       "amx"))
            print(f"{dtype:>9} {m}x{n}x{k} {str(plan or 'auto'):<24} {2 * m * n * k / t / 1e9:9.1f} G/s "
                  f"{t * 1e6:10.1f} us  x{base / t:5.2f}  err {err:.1e}  [{desc}]", flush=True)


if __name__ == "__main__":
    main()
