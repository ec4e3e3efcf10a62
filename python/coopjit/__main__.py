"""python -m coopjit info | demo | bench [--quick] [--out DIR]"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import coopjit
from coopjit import spirv
from coopjit.devices import status

#: The CPU features that decide coopjit's code paths, as LLVM names them.
FEATURES = [
    ("AVX2", "avx2"),
    ("FMA", "fma"),
    ("AVX-512 F", "avx512f"),
    ("AVX-512 BF16", "avx512bf16"),
    ("AVX-512 FP16", "avx512fp16"),
    ("AVX-512 VNNI", "avx512vnni"),
    ("AMX tile", "amx-tile"),
    ("AMX bf16", "amx-bf16"),
    ("AMX int8", "amx-int8"),
]


def info() -> None:
    cpu = coopjit.cpu_info()
    feats = cpu["features"]
    print(f"coopjit {coopjit.__version__}  (LLVM {coopjit.llvm_version})")
    print(f"CPU: {cpu['name']}  triple {cpu['triple']}  vector width {cpu['vector_bytes'] * 8} bits")
    for label, name in FEATURES:
        print(f"  {label:<13} {'yes' if feats.get(name) else 'no'}")
    print(f"devices: {', '.join(coopjit.devices())}")
    for name in coopjit.devices()[1:]:
        d = coopjit.device_info(name)
        print(f"  {name}: {d['device_name']} ({d['platform']}, {d['type']}), SPIR-V {d['spirv_version']}, "
              f"subgroups {d['subgroup_sizes']}, max work-group {d['max_work_group_size']}, "
              f"local memory {d['local_memory_bytes'] // 1024} KiB, memory {d['memory']}, dpas {d['dpas']}")
    for s in status():
        if s["status"] or s["rejected"]:
            print(f"  {s['backend']}: {s['status'] or ''}{'; rejected: ' + '; '.join(s['rejected']) if s['rejected'] else ''}")
    for tool, t in spirv.tools().items():
        print(f"{tool}: {t.get('version', t.get('error'))}")


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def demo() -> None:
    rng = np.random.default_rng(0)
    shapes = [(64, 64, 64), (100, 37, 250), (256, 256, 256), (513, 129, 700), (1024, 1024, 1024)]
    print("coopjit demo: JIT-compiled GEMM kernels on the CPU, checked against NumPy (float64 reference)")
    header = f"{'M x N x K':>18} {'dtype':>8} {'coopjit ms':>11} {'numpy ms':>9} {'max rel err':>12}  plan"
    print(header)
    print("-" * len(header))
    ok = True
    for dtype in (np.float32, np.float64):
        for m, n, k in shapes:
            a = rng.standard_normal((m, k)).astype(dtype)
            b = rng.standard_normal((k, n)).astype(dtype)
            kern = coopjit.compile_gemm(m, n, k, dtype)
            c = kern(a, b)  # first call also warms up
            ref = a.astype(np.float64) @ b.astype(np.float64)
            err = float(np.max(np.abs(c - ref)) / max(1e-30, np.max(np.abs(ref))))
            tol = (np.finfo(dtype).eps * 4 * np.sqrt(k))
            ok &= err <= tol
            repeat = 20 if m * n * k < 1e8 else 5
            t_cj = _median_time(lambda: kern(a, b, c), repeat)
            t_np = _median_time(lambda: np.matmul(a, b), repeat)
            cfg = kern.config
            plan = f"{cfg['layout']} {cfg['mr']}x{cfg['nr']} simd{cfg['simd_width']}"
            print(f"{f'{m}x{n}x{k}':>18} {np.dtype(dtype).name:>8} {t_cj * 1e3:11.3f} {t_np * 1e3:9.3f} "
                  f"{err:12.2e}  {plan}")
    print("all results within tolerance" if ok else "SOME RESULTS OUTSIDE TOLERANCE")
    if not ok:
        sys.exit(1)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # the benchmark has options of its own
        from . import bench

        return bench.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m coopjit", description=__doc__)
    parser.add_argument("command", choices=["info", "demo", "bench"])
    args = parser.parse_args(argv)
    {"info": info, "demo": demo}[args.command]()


if __name__ == "__main__":
    main()
