"""python -m coopjit info | demo | bench | tune | dump: the command line (`python -m coopjit --help`)."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import coopjit
from coopjit import spirv
from coopjit._tune_cli import _shape
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
    c = coopjit.cache.info()
    print(f"cache: {c['directory'] or 'disabled (COOPJIT_CACHE=0)'}  ({c['kernels']['entries']} kernels, "
          f"{c['kernels']['bytes'] / 2**20:.1f} MiB; {c['tuning']['entries']} tuned problems)")
    print(f"CPU: {cpu['name']}  triple {cpu['triple']}  vector width {cpu['vector_bytes'] * 8} bits"
          f"  (feature level: {cpu['level']}; COOPJIT_CPU_LEVEL=avx2|sse forces a lower one)")
    for label, name in FEATURES:
        print(f"  {label:<13} {'yes' if feats.get(name) else 'no'}")
    print(f"devices: {', '.join(coopjit.devices())}")
    for name in coopjit.devices()[1:]:
        d = coopjit.device_info(name)
        if d["backend"] == "cuda":
            print(f"  {name}: {d['device_name']} (CUDA driver {d['driver_version']}), {d['arch']}, "
                  f"{d['compute_units']} SMs, shared memory {d['local_memory_bytes'] // 1024} KiB a block, "
                  f"{d['global_memory_bytes'] / 2**30:.0f} GiB at {d['memory_bandwidth_gbs']:.0f} GB/s")
            continue
        print(f"  {name}: {d['device_name']} ({d['platform']}, {d['type']}), SPIR-V {d['spirv_version']}, "
              f"subgroups {d['subgroup_sizes']}, max work-group {d['max_work_group_size']}, "
              f"local memory {d['local_memory_bytes'] // 1024} KiB, memory {d['memory']}, dpas {d['dpas']}, "
              f"2-D block I/O {d['block2d']}")
    for s in status():
        if s["status"] or s["rejected"]:
            print(f"  {s['backend']}: {s['status'] or ''}{'; rejected: ' + '; '.join(s['rejected']) if s['rejected'] else ''}")
    for tool, t in spirv.tools().items():
        print(f"{tool}: {t.get('version', t.get('error'))}")


def _median_time(fn, repeat: int) -> float:
    # OpenBLAS's worker threads spin for about 0.1 s after a numpy.matmul, holding the cores the
    # next timed kernel needs (coopjit 1024^3 float32 measured at half speed right after one):
    # let them go to sleep first, then run the function for a while (cores that slept clock up
    # again) before timing it.
    time.sleep(0.2)
    t_end = time.perf_counter() + 0.05
    while True:
        fn()
        if time.perf_counter() >= t_end:
            break
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _plan_text(cfg: dict) -> str:
    text = f"{cfg['layout']} {cfg['mr']}x{cfg['nr']} simd{cfg['simd_width']} {cfg['split']}x{cfg['threads']}"
    return text + (" packed" if cfg.get("pack") else "")


def demo() -> None:
    """JIT-compiles GEMM (and reduction) kernels for a few problems, checks each against NumPy in
    float64 and prints a table: shape, dtype, coopjit and NumPy times, the error, the plan."""
    import ml_dtypes

    rng = np.random.default_rng(0)
    print("coopjit demo: JIT-compiled kernels on the CPU, checked against NumPy (float64 reference)")
    header = f"{'problem':>22} {'dtype':>9} {'coopjit ms':>11} {'numpy ms':>9} {'max rel err':>12}  plan"
    print(header)
    print("-" * len(header))
    ok = True

    def row(name, dtype, got, ref, t_cj, t_np, tol, plan):
        nonlocal ok
        err = float(np.max(np.abs(np.asarray(got, np.float64) - ref)) / max(1e-30, float(np.max(np.abs(ref)))))
        ok &= err <= tol
        print(f"{name:>22} {dtype:>9} {t_cj * 1e3:11.3f} {t_np * 1e3:9.3f} {err:12.2e}  {plan}")

    for dtype in (np.float32, np.float64):
        for m, n, k in [(64, 64, 64), (100, 37, 250), (256, 256, 256), (513, 129, 700), (1024, 1024, 1024)]:
            a = rng.standard_normal((m, k)).astype(dtype)
            b = rng.standard_normal((k, n)).astype(dtype)
            kern = coopjit.compile_gemm(m, n, k, dtype)
            c = kern(a, b)  # the first call also warms up
            repeat = 20 if m * n * k < 1e8 else 5
            t_cj = _median_time(lambda: kern(a, b, c), repeat)
            t_np = _median_time(lambda: np.matmul(a, b), repeat)
            row(f"{m}x{n}x{k}", np.dtype(dtype).name, c, a.astype(np.float64) @ b, t_cj, t_np,
                np.finfo(dtype).eps * 4 * np.sqrt(k), _plan_text(kern.config))
    # Low precision: bfloat16 in, float32 accumulation; int8 in, int32 accumulation (exact).
    a = rng.uniform(-1, 1, (512, 512)).astype(ml_dtypes.bfloat16)
    b = rng.uniform(-1, 1, (512, 512)).astype(ml_dtypes.bfloat16)
    out = np.zeros((512, 512), np.float32)
    kern = coopjit.compile_gemm(512, 512, 512, ml_dtypes.bfloat16, out_dtype=np.float32)
    kern(a, b, out)
    t_cj = _median_time(lambda: kern(a, b, out), 10)
    t_np = _median_time(lambda: np.matmul(a, b), 3)
    row("512x512x512", "bfloat16", out, a.astype(np.float64) @ b.astype(np.float64), t_cj, t_np, 1e-5,
        _plan_text(kern.config) + " ->f32")
    a8 = rng.integers(-128, 128, (512, 512)).astype(np.int8)
    b8 = rng.integers(-128, 128, (512, 512)).astype(np.int8)
    c8 = coopjit.matmul(a8, b8)
    t_cj = _median_time(lambda: coopjit.matmul(a8, b8), 10)
    t_np = _median_time(lambda: np.matmul(a8.astype(np.int32), b8.astype(np.int32)), 3)
    row("512x512x512", "int8", c8, a8.astype(np.int64) @ b8.astype(np.int64), t_cj, t_np, 0, "int32 accumulate")
    # 4096 stacked 16x16x16 products in one launch, and reductions.
    s = rng.standard_normal((4096, 16, 16)).astype(np.float32)
    got = coopjit.matmul(s, s)
    row("4096 x 16x16x16", "float32", got, np.matmul(s.astype(np.float64), s),
        _median_time(lambda: coopjit.matmul(s, s), 10), _median_time(lambda: np.matmul(s, s), 10), 1e-5, "batched")
    x = rng.standard_normal((2048, 2048)).astype(np.float32)
    for axis in (0, 1, None):
        got = coopjit.reduce(x, axis=axis)
        row(f"sum 2048x2048 axis={axis}", "float32", got, x.astype(np.float64).sum(axis=axis),
            _median_time(lambda: coopjit.reduce(x, axis=axis), 10), _median_time(lambda: x.sum(axis=axis), 10),
            1e-5, "reduce")
    print("all results within tolerance" if ok else "SOME RESULTS OUTSIDE TOLERANCE")
    if not ok:
        sys.exit(1)


#: The subcommands with their one-line descriptions (`python -m coopjit --help` lists them).
COMMANDS = {
    "info": "the CPU features, devices, cache and tools coopjit sees",
    "demo": "JIT-compile GEMM and reduction kernels, check them against NumPy, print a table",
    "bench": "coopjit side by side with NumPy and PyTorch, with the machine's peaks (options: bench --help)",
    "tune": "tune GEMM problems and store the winners in the tuning database (options: tune --help)",
    "dump": "the plan, kernel IR, LLVM IR, assembly, PTX or SPIR-V of one GEMM problem",
}


def dump(argv) -> None:
    p = argparse.ArgumentParser(prog="python -m coopjit dump", description=COMMANDS["dump"] + ". Compiles (or "
                                "takes from the cache) the kernel coopjit plans for the problem and prints it.")
    p.add_argument("shape", type=_shape, metavar="MxNxK", help="the product C (M x N) = A (M x K) @ B (K x N)")
    p.add_argument("--dtype", default="float32", help="input type: float32, float64, float16, bfloat16, "
                   "float8_e4m3fn, float8_e5m2, int8, uint8 (default float32)")
    p.add_argument("--out-dtype", default=None, help="output type when it differs from the default for the inputs")
    p.add_argument("--trans-a", action="store_true", help="A is given as K x M (the kernel reads its transpose)")
    p.add_argument("--trans-b", action="store_true", help="B is given as N x K")
    p.add_argument("--target", default="cpu", help="cpu (this machine), a device name from `info` (opencl:0, "
                   "cuda:0, ...), or an NVIDIA architecture (sm_80, sm_90) for PTX without a GPU (default cpu)")
    p.add_argument("--what", default="plan", help="plan, ir, llvm, asm (cpu), ptx (NVIDIA), spirv (SPIR-V devices) "
                   "or all (default plan)")
    args = p.parse_args(argv)
    from ._tune_cli import _dtype

    dtypes = {}
    for flag, name in (("--dtype", args.dtype), ("--out-dtype", args.out_dtype)):
        try:
            dtypes[flag] = _dtype(name) if name else None
        except (TypeError, AttributeError):  # ("unknown dtype 'float32 / nope'" named both)
            p.error(f"{flag}: unknown dtype {name!r}")
    dtype, out_dtype = dtypes["--dtype"], dtypes["--out-dtype"]
    m, n, k = args.shape
    kw = dict(trans_a=args.trans_a, trans_b=args.trans_b, out_dtype=out_dtype)
    target = args.target
    try:
        if target.startswith("sm_"):
            kern, dev = coopjit.ptx.compile_gemm(m, n, k, dtype, target=target, **kw), "target:" + target
        else:
            kern, dev = coopjit.compile_gemm(m, n, k, dtype, device=target, **kw), target
    except (TypeError, ValueError, coopjit.DeviceError) as e:
        p.error(str(e))
    kinds = ("plan",) + tuple(coopjit.devices.get(dev).sources)  # what the device's kernels show
    what = kinds if args.what == "all" else (args.what,)
    for w in what:
        if w not in kinds:
            p.error(f"--what {w!r} is not available for target {target!r}; choose from {', '.join(kinds)} or all")
    for w in what:
        if len(what) > 1:
            print(f"===== {w} =====")
        print(str(kern) if w == "plan" else kern.source(w))


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # the benchmark has options of its own
        from . import bench

        return bench.main(argv[1:])
    if argv[:1] == ["tune"]:  # its own options: python -m coopjit tune --help
        from ._tune_cli import main as tune_main

        return tune_main(argv[1:])
    if argv[:1] == ["dump"]:
        return dump(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m coopjit", description="coopjit: JIT-compiled GEMM and "
                                     "reduction kernels over cooperative matrices.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="commands:\n" + "\n".join(f"  {c:<6} {d}" for c, d in COMMANDS.items())
                                     + "\n\n`python -m coopjit COMMAND --help` gives a command's options.")
    parser.add_argument("--version", action="version",
                        version=f"coopjit {coopjit.__version__} (LLVM {coopjit.llvm_version})")
    parser.add_argument("command", choices=list(COMMANDS), metavar="COMMAND", help="one of: " + ", ".join(COMMANDS))
    args, rest = parser.parse_known_args(argv)
    if rest:
        parser.error(f"{args.command} takes no arguments, got {' '.join(rest)}")
    {"info": info, "demo": demo}[args.command]()


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # `python -m coopjit dump ... | head`: the reader left; no traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
