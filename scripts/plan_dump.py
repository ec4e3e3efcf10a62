"""The check of a change that must not change any plan (a refactor of the planner or the CPU
recipe): dumps coopjit's GEMM plans (the planner's fields, or its error message, for ~42,000
cases: shapes x dtypes x layouts x strides x batches x override sets, plus cross_compile's plans
and kernel keys for other CPUs), one line a case. Dump with the build before the change and the
build after, then `cmp` the two files.

    PYTHONPATH=<build before> python3 scripts/plan_dump.py before.txt
    PYTHONPATH=<build after>  python3 scripts/plan_dump.py after.txt && cmp before.txt after.txt

It reruns itself under COOPJIT_NUM_THREADS=1 / 2 / 16 and COOPJIT_CPU_LEVEL=avx2 (the planner
reads the pool's size and the CPU level)."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
from numpy.lib.stride_tricks import as_strided

BF16 = ml_dtypes.bfloat16
SHAPES = [(1, 1, 1), (4, 4, 4), (8, 8, 8), (16, 16, 16), (32, 32, 32), (64, 64, 64), (65, 65, 65), (3, 70, 5),
          (100, 37, 250), (96, 96, 64), (128, 128, 64), (64, 64, 200), (256, 16, 16), (256, 256, 256),
          (300, 200, 100), (513, 129, 700), (1000, 130, 1000), (2000, 200, 300), (256, 100, 2000),
          (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
          (1, 4096, 4096), (1, 4096, 512), (1, 512, 4096), (1, 2048, 1024), (4096, 1, 4096), (2048, 1, 2048),
          (16384, 1, 4096), (4, 4096, 4096), (8, 4096, 4096), (16, 4096, 4096), (48, 4096, 4096),
          (64, 4096, 4096), (64, 4096, 4000), (64, 4096, 1024), (64, 512, 1024), (40, 2048, 2048),
          (32, 1024, 4096), (16, 4096, 1024), (4096, 64, 4096), (64, 64, 8192), (128, 32, 4096),
          (256, 64, 8192), (4096, 4096, 16), (1, 1, 4096), (4096, 16, 1), (64, 4096, 2048), (512, 512, 512)]
DTYPES = {"f32": (np.float32, np.float32), "f64": (np.float64, np.float64), "bf16": (BF16, BF16),
          "f16": (np.float16, np.float16), "i8": (np.int8, np.int8), "u8i8": (np.uint8, np.int8),
          "u8u8": (np.uint8, np.uint8)}
TYPES = {"f32": ["f32", "f32", "f32"], "f64": ["f64", "f64", "f64"], "bf16": ["bf16", "bf16", "f32"],
         "f16": ["f16", "f16", "f32"], "i8": ["i8", "i8", "i32"], "u8i8": ["u8", "i8", "i32"],
         "u8u8": ["u8", "u8", "i32"]}
LAYOUTS = ["nn", "tn", "nt", "tt", "strided", "cF"]
OVERRIDES = [{}, {"amx": 2}, {"pack": 1}, {"threads": 2}, {"pack": 0}, {"split": 1, "threads": 2},
             {"order": 1}, {"order": 2}, {"inline_b": 1}, {"fixed": 1}, {"kt": 100}, {"vnni": 4},
             {"amx": 2, "amx_feed": 2}, {"nc_tiles": 1}, {"shares": 4, "pack": 1}, {"ksplit": 2},
             {"mr": 4, "nr": 32}, {"bogus": 1}, {"direct_a": 1, "amx": 2}, {"b_prefetch": 1024}]


def view(shape, strides_elems, dtype):
    buf = np.zeros(1 + sum((s - 1) * abs(st) for s, st in zip(shape, strides_elems)), dtype)
    isz = np.dtype(dtype).itemsize
    return as_strided(buf, shape, tuple(st * isz for st in strides_elems))


def operands(m, n, k, la, lb, lc_f, a_t, b_t, c_t, batch=None, step=1):
    def mat(r, c, trans, dt, stp):
        if trans:
            return view((r, c), (stp, r * stp), dt)  # column-major
        return view((r, c), (c * stp, stp), dt)
    if batch:
        a = view((batch, m, k), (m * k, k, 1), a_t)
        b = view((batch, k, n), (k * n, n, 1), b_t)
        c = view((batch, m, n), (m * n, n, 1), c_t)
        return a, b, c
    return mat(m, k, la, a_t, step), mat(k, n, lb, b_t, step), mat(m, n, lc_f, c_t, 1)


def cases():
    for (m, n, k) in SHAPES:
        for dname in DTYPES:
            for lay in LAYOUTS:
                ovs = OVERRIDES if lay == "nn" else [{}]
                if dname in ("f16", "u8u8", "f64") and lay != "nn":
                    continue
                for ov in ovs:
                    yield (m, n, k, dname, lay, None, ov)
    for (m, n, k) in [(8, 8, 8), (64, 64, 64), (100, 37, 250), (256, 256, 256), (16, 4096, 64), (1, 512, 512)]:
        for dname in ("f32", "f64", "bf16", "i8"):
            for batch in (2, 7):
                yield (m, n, k, dname, "nn", batch, {})


def child(tag):
    import coopjit
    from coopjit import _core
    out = []
    for (m, n, k, dname, lay, batch, ov) in cases():
        a_t, b_t = DTYPES[dname]
        types = TYPES[dname]
        c_t = {"f32": np.float32, "f64": np.float64, "i32": np.int32}[types[2]]
        la, lb = lay in ("tn", "tt"), lay in ("nt", "tt")
        step = 2 if lay == "strided" else 1
        a, b, c = operands(m, n, k, la, lb, lay == "cF", a_t, b_t, c_t, batch, step)
        for acc in ((False, True) if ov == {} and lay == "nn" and batch is None else (False,)):
            try:
                f = _core.gemm_plan(a, b, c, acc, types, ov)
                res = " ".join(f"{key}={f[key]}" for key in sorted(f))
            except Exception as e:  # noqa: BLE001 (the message is part of the behaviour)
                res = f"ERROR {type(e).__name__}: {e}"
            out.append(f"{tag} {m}x{n}x{k} {dname} {lay} batch={batch} acc={acc} {sorted(ov.items())}: {res}")
    # Plans for other CPUs (AMX targets among them), through cross_compile (compiles the kernel too).
    if tag == "t2":
        for cpu in ("sapphirerapids", "graniterapids", "znver4", "skylake"):
            for threads in (1, 16):
                for (m, n, k) in [(64, 64, 64), (100, 37, 250), (1, 4096, 4096), (4096, 1, 4096), (64, 4096, 4096),
                                  (16, 4096, 4096), (512, 512, 512), (2048, 2048, 2048), (513, 129, 700)]:
                    for dname in ("f32", "bf16", "i8"):
                        a_t, b_t = DTYPES[dname]
                        a, b = view((m, k), (k, 1), a_t), view((k, n), (n, 1), b_t)
                        try:
                            r = coopjit.cross_compile(a, b, cpu=cpu, threads=threads)
                            cfg = r["config"]
                            res = r["key"] + " | " + " ".join(f"{key}={cfg[key]}" for key in sorted(cfg))
                        except Exception as e:  # noqa: BLE001
                            res = f"ERROR {type(e).__name__}: {e}"
                        out.append(f"cross {cpu} t{threads} {m}x{n}x{k} {dname}: {res}")
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
        sys.exit(0)
    lines = []
    for tag, env in [("t1", {"COOPJIT_NUM_THREADS": "1"}), ("t2", {"COOPJIT_NUM_THREADS": "2"}),
                     ("t16", {"COOPJIT_NUM_THREADS": "16"}),
                     ("t16avx2", {"COOPJIT_NUM_THREADS": "16", "COOPJIT_CPU_LEVEL": "avx2"}),
                     ("t2avx2", {"COOPJIT_NUM_THREADS": "2", "COOPJIT_CPU_LEVEL": "avx2"})]:
        e = {**os.environ, **env, "COOPJIT_CACHE": "0"}
        r = subprocess.run([sys.executable, __file__, "--child", tag], env=e, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{tag}: {r.stderr[-3000:]}")
        lines.append(r.stdout)
    with open(sys.argv[1], "w") as f:
        f.write("".join(lines))
    n = sum(s.count("\n") + 1 for s in lines)
    print(f"{n} cases -> {sys.argv[1]}")
