"""The check of a change that must not change any plan (a refactor of the planner or the CPU
recipe): dumps coopjit's GEMM plans (the planner's fields, or its error message, for ~42,000
cases: shapes x dtypes x layouts x strides x batches x override sets, plus cross_compile's plans
and kernel keys for other CPUs), one line a case. Dump with the build before the change and the
build after, then `cmp` the two files.

    PYTHONPATH=<build before> python3 scripts/plan_dump.py before.txt
    PYTHONPATH=<build after>  python3 scripts/plan_dump.py after.txt && cmp before.txt after.txt

It reruns itself under COOPJIT_NUM_THREADS=1 / 2 / 16 and COOPJIT_CPU_LEVEL=avx2 (the planner
reads the pool's size and the CPU level).

`gpu` mode: the GPU planner's plans (plan_gpu_gemm through _core.gpu_gemm_plan: every field, key and
code_key, or the error message) on the named targets (sm_80, sm_90, xe-hpc, xe2, generic; sm_120,
which is not one, for its message) for ~200,000 cases: shapes x type triples x layouts / strides /
batches x accumulate x fused epilogues, and ~120 override sets (valid and invalid) on a subset.
A plan's fields are written out once, as `F<n> = ...` where it first appears; each case names its
plan's number.

    PYTHONPATH=<build before> python3 scripts/plan_dump.py gpu before.txt
    PYTHONPATH=<build after>  python3 scripts/plan_dump.py gpu after.txt && cmp before.txt after.txt

`ir` mode: the kernel IR (and the optimized LLVM IR) of ~180 CPU kernels that the recipe's
epilogues build differently (beta, fused steps, C of another type, the dot walk, Stream-K's
additions, AMX stores), for a refactor of the CPU recipe; under COOPJIT_NUM_THREADS=2, without
the kernel cache.

    PYTHONPATH=<build before> python3 scripts/plan_dump.py ir before.txt

`reduce` mode: the CPU reductions' plans (session 28): for ~6,000 cases (shapes x axes x dtypes x
ops, NumPy arrays, some strided), the kernels coopjit.reduce would run (its Python routing: each
form, view and type triple; the kernels are not run) and plan_reduce's fields of each (with the
column_rows plan of a column form that run_reduce splits over the rows), under 1 / 2 / 16 pool
threads and AVX-512 / AVX2 vectors.

    PYTHONPATH=<build before> python3 scripts/plan_dump.py reduce before.txt"""
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
             {"mr": 4, "nr": 32}, {"bogus": 1}, {"direct_a": 1, "amx": 2}, {"b_prefetch": 1024},
             # nr forced without mr: a prepacked B's panel width (coopjit.prepack) fixes nr, the planner the rest
             {"nr": 16}, {"nr": 32}, {"nr": 64}, {"pack": 1, "prepacked_b": 1, "nr": 32}]


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
    # Matrix-vector products (session 25): a row-major A times vectors of other strides (every other
    # element, a column of a 5-wide matrix, reversed, stride 0), batches of them (each product its own
    # vector, one broadcast vector, a broadcast A), and a strided row vector times a column-major B.
    for (m, n, k) in [(4096, 1, 4096), (1001, 1, 777), (9, 1, 4100), (40, 1, 50), (1, 4096, 4096), (1, 700, 3000)]:
        for dname in ("f32", "f64", "bf16", "i8", "u8i8"):
            for lay in (("mv-x2", "mv-col5", "mv-rev", "mv-x0") if n == 1 else ("mv-rowx2", "mv-rowx2F")):
                for batch in ((None, 4) if n == 1 else (None,)):
                    yield (m, n, k, dname, lay, batch, {})
            if n == 1:
                for lay in ("mv-b", "mv-bx", "mv-ba", "mv-bx2"):
                    yield (m, n, k, dname, lay, 4, {})
                    if dname == "f32":
                        for ov in ({"order": 2}, {"order": 2, "fixed": 1}, {"threads": 16}):
                            yield (m, n, k, dname, lay, 4, ov)
                for ov in ({"order": 2}, {"order": 2, "fixed": 1}):
                    yield (m, n, k, dname, "mv-x2", None, ov)


def mv_operands(m, n, k, lay, batch, a_t, b_t, c_t):
    """The operands of the matrix-vector cases (see cases())."""
    nb = batch or 1
    if n != 1:  # a strided row vector times a row-major / column-major B
        b = view((k, n), (1, k) if lay.endswith("F") else (n, 1), b_t)
        return view((1, k), (0, 2), a_t), b, view((1, n), (n, 1), c_t)
    a = view((nb, m, k), (0 if lay == "mv-ba" else m * k, k, 1), a_t)
    st = {"mv-x2": 2, "mv-col5": 5, "mv-rev": -1, "mv-x0": 0, "mv-b": 1, "mv-bx": 1, "mv-ba": 1, "mv-bx2": 2}[lay]
    b = view((nb, k, 1), (0 if lay == "mv-bx" else k * abs(st) or 1, abs(st), 0), b_t)
    if st < 0:
        b = b[:, ::-1]
    c = view((nb, m, 1), (m, 1, 1), c_t)
    return (a, b, c) if batch else (a[0], b[0], c[0])


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
        if lay.startswith("mv"):
            a, b, c = mv_operands(m, n, k, lay, batch, a_t, b_t, c_t)
        else:
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


# --- gpu mode -----------------------------------------------------------------------------------
GPU_TARGETS = ["sm_80", "sm_90", "xe-hpc", "xe2", "generic"]
GPU_SHAPES = [(1, 1, 1), (8, 8, 8), (16, 16, 16), (16, 16, 17), (17, 16, 16), (32, 32, 32), (64, 64, 64), (65, 65, 65),
              (3, 70, 5), (100, 37, 250), (96, 96, 64), (128, 128, 64), (520, 64, 136), (256, 256, 256), (64, 4096, 4096),
              (1, 4096, 4096), (4096, 1, 4096), (16, 4096, 1024), (513, 129, 700), (1024, 1024, 1024), (2048, 2048, 2048),
              (4096, 4096, 4096), (8192, 8192, 8192), (4224, 4224, 4224), (4224, 1024, 4096), (4224, 1024, 8192),
              (1024, 4224, 4096), (4352, 1024, 4096), (4352, 1024, 8192), (4608, 1024, 8192), (896, 4864, 8192),
              (1024, 4864, 4096), (1024, 4352, 4096), (2816, 1920, 8192), (5632, 1152, 4096), (2816, 3456, 4096),
              (4864, 1792, 8192), (3072, 3072, 8192), (6144, 6144, 6144), (4200, 1000, 320), (4224, 4224, 8192),
              (1024, 1024, 64), (256, 16384, 128), (16384, 256, 128), (132 * 128, 256, 512), (128, 33 * 256, 4096)]
# (a, b, c) IR types: every pairing the planner distinguishes, C of the accumulator's type or the inputs'
GPU_TYPES = [("f32", "f32", "f32"), ("f64", "f64", "f64"), ("f16", "f16", "f32"), ("f16", "f16", "f16"),
             ("bf16", "bf16", "f32"), ("bf16", "bf16", "bf16"), ("f8_e4m3", "f8_e4m3", "f32"),
             ("f8_e5m2", "f8_e5m2", "f32"), ("i8", "i8", "i32"), ("u8", "i8", "i32"), ("i8", "u8", "i32"),
             ("u8", "u8", "i32")]
GPU_LAYOUTS = ["nn", "tn", "nt", "tt", "cF", "strided", "padded", "oddld", "negb", "batch", "batch2"]
# fused epilogues (python_epilogue's dicts; {}: the conversion to C's type alone), with C's type
GPU_EPILOGUES = [(None, None), ({}, "bf16"), ({}, "f16"), ({"bias": True}, "f32"), ({"bias": True, "bias_axis": 0, "activation": "gelu"}, "bf16"),
                 ({"residual": True, "scale": True}, "f32"), ({"row_scale": True, "activation": "relu"}, "f32")]
_ON = [0, 1, 2, 3, -1]
GPU_OVERRIDES = ([{}] + [{"layout": v} for v in (0, 1, 2)] + [{"subgroup_size": v} for v in (8, 16, 32, 64)] +
                 [{"mr": v} for v in (3, 16, 32, 64, 128)] + [{"nr": v} for v in (8, 64, 128, 136, 144, 192, 216, 256, 300)] +
                 [{"kb": v} for v in (3, 4, 8, 16, 32, 64, 128)] + [{"sg_m": v} for v in (1, 2, 4, 8, 12)] +
                 [{"sg_n": v} for v in (1, 2, 4)] +
                 [{k: v} for k in ("dpas", "block2d", "mma", "wgmma", "tma", "ws", "persistent", "sk_flags", "sk_down",
                                   "epi_smem", "tma_store", "kmajor", "cluster") for v in _ON] +
                 [{"stages": v} for v in (0, 1, 2, 3, 4, 8, 9)] + [{"split": v} for v in (-1, 0, 1, 2, 3, 4)] +
                 [{"kt": v} for v in (24, 64, 100, 128, 256, 512)] + [{"workers": v} for v in (0, 1, 64, 132, 264, 1 << 21)] +
                 [{"group_m": v} for v in (-1, 0, 8, 16, 300)] + [{"bogus": 1}] +
                 [{"sg_m": 12, "nr": 192}, {"sg_m": 8, "nr": 256}, {"sg_m": 8, "nr": 136}, {"sg_m": 4, "nr": 128},
                  {"mr": 16, "sg_m": 8, "nr": 256, "kb": 64}, {"layout": 0, "nr": 136}, {"layout": 1, "sg_m": 12, "nr": 192},
                  {"ws": 2, "split": 2}, {"ws": 1, "split": 1, "sk_flags": 1}, {"ws": 2, "split": 3, "sk_down": 1},
                  {"split": 2, "workers": 64, "sk_flags": 1}, {"split": 2, "persistent": 0}, {"ws": 0, "persistent": 1},
                  {"wgmma": 0, "mma": 1, "stages": 4}, {"wgmma": 0, "stages": 0}, {"wgmma": 1, "stages": 0},
                  {"tma": 0, "ws": 1}, {"tma": 0, "tma_store": 1}, {"epi_smem": 0, "tma_store": 1}, {"ws": 0, "cluster": 2},
                  {"cluster": 2, "group_m": 3}, {"cluster": 2, "group_m": 4}, {"cluster": 2, "persistent": 0},
                  {"cluster": 2, "workers": 1}, {"dpas": 2, "block2d": 2}, {"subgroup_size": 32, "dpas": 1},
                  {"kb": 16, "kt": 24}, {"kmajor": 1, "layout": 0}, {"kmajor": 1, "wgmma": 0}, {"mma": 0, "stages": 3},
                  {"split": 1, "kt": 128, "workers": 64}, {"ws": 1, "persistent": 1, "split": 0}, {"sg_n": 2, "nr": 128}])
GPU_OV_SHAPES = [(16, 16, 16), (64, 64, 64), (100, 37, 250), (520, 64, 136), (1024, 1024, 1024), (4096, 4096, 4096),
                 (4224, 1024, 4096), (4352, 1024, 8192), (896, 4864, 8192), (1024, 4864, 4096), (2816, 1920, 8192),
                 (8192, 8192, 8192)]
GPU_OV_TYPES = [("f32", "f32", "f32"), ("f64", "f64", "f64"), ("bf16", "bf16", "f32"), ("f16", "f16", "f16"),
                ("i8", "i8", "i32"), ("u8", "i8", "i32")]


def gpu_strides(m, n, k, lay):
    """(shape [M, N, K, batch1, batch2], the 12 element strides of gemm_spec) of a layout."""
    sa, sb, sc = [k, 1], [n, 1], [n, 1]
    batch, bs = [1, 1], [0] * 6
    if lay in ("tn", "tt"):
        sa = [1, m]
    if lay in ("nt", "tt"):
        sb = [1, k]
    if lay == "cF":
        sc = [1, m]
    if lay == "strided":
        sa, sb, sc = [2 * k, 2], [2 * n, 2], [2 * n, 2]
    if lay == "padded":
        sa, sb, sc = [k + 8, 1], [n + 8, 1], [n + 8, 1]
    if lay == "oddld":
        sa, sb, sc = [k + 1, 1], [1, k + 3], [n + 5, 1]
    if lay == "negb":
        sb = [-n, 1]
    if lay == "batch":
        batch, bs = [3, 1], [m * k, k * n, m * n, 0, 0, 0]
    if lay == "batch2":
        batch, bs = [2, 3], [3 * m * k, 0, 3 * m * n, m * k, k * n, m * n]
    return [m, n, k, *batch], [*sa, *sb, *sc, bs[0], bs[1], bs[2], bs[3], bs[4], bs[5]]


def gpu_cases():
    for target in GPU_TARGETS:
        for (m, n, k) in GPU_SHAPES:
            for types in GPU_TYPES:
                for lay in GPU_LAYOUTS:
                    for acc in (False, True):
                        yield target, m, n, k, types, lay, acc, None, {}
            for lay in ("nn", "tn", "nt", "batch"):
                for a in ("f32", "f64", "bf16", "f16", "i8"):
                    for epi, c in GPU_EPILOGUES[1:]:
                        b = "i8" if a == "i8" else a
                        yield target, m, n, k, (a, b, "f64" if a == "f64" and c == "f32" else c), lay, False, epi, {}
        for (m, n, k) in GPU_OV_SHAPES:
            for types in GPU_OV_TYPES:
                for lay in ("nn", "tn", "nt", "tt"):
                    for ov in GPU_OVERRIDES:
                        yield target, m, n, k, types, lay, False, None, ov
    for lay in ("nn", "tt"):  # not a named target: its message
        yield "sm_120", 4096, 4096, 4096, ("bf16", "bf16", "f32"), lay, False, None, {}


def gpu_dump(path):
    from coopjit import _core
    ids, out = {}, []
    for (target, m, n, k, types, lay, acc, epi, ov) in gpu_cases():
        shape, strides = gpu_strides(m, n, k, lay)
        try:
            f = _core.gpu_gemm_plan("target:" + target, list(types), shape, strides, acc, ov, epi)
            text = " ".join(f"{key}={f[key]}" for key in sorted(f))
            if text not in ids:
                ids[text] = len(ids)
                out.append(f"F{ids[text]} = {text}")
            res = f"F{ids[text]}"
        except Exception as e:  # noqa: BLE001 (the message is part of the behaviour)
            res = f"ERROR {type(e).__name__}: {e}"
        out.append(f"{target} {m}x{n}x{k} {'x'.join(types)} {lay} acc={acc} epi={epi} {sorted(ov.items())}: {res}")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")
    n = len(out) - len(ids)
    errors = sum(1 for line in out if ": ERROR " in line)
    print(f"{n} cases ({len(ids)} distinct plans, {errors} errors) -> {path}")


# --- ir mode ------------------------------------------------------------------------------------
IR_SHAPES = [(100, 37, 250), (513, 129, 700), (300, 1, 200), (1, 300, 200)]
IR_DTYPES = [("f32", np.float32, None), ("f64", np.float64, None), ("bf16", BF16, None), ("bf16>f32", BF16, np.float32),
             ("f16", np.float16, None), ("i8", np.int8, None), ("u8", np.uint8, None)]
IR_EPILOGUES = [{"bias": True, "activation": "relu"}, {"residual": True}, {"bias": True, "bias_axis": 0, "scale": True},
                {"row_scale": True, "activation": "gelu"}]
IR_PLANS = [{"pack": True}, {"pack": False}, {"split": "sk", "threads": 2}, {"split": "sk+dp", "threads": 2, "kt": 64},
            {"order": "k_outer"}, {"order": "k_outer", "ksplit": 2}, {"pack": True, "inline_b": True}, {"fixed": True},
            {"amx": "emulated"}, {"amx": "emulated", "amx_store": False}]


def ir_cases():
    for (m, n, k) in IR_SHAPES:
        for name, dt, out in IR_DTYPES:
            for acc in (False, True):
                yield m, n, k, name, dt, out, acc, {}, {}
    for (m, n, k) in [(100, 37, 250), (300, 1, 200)]:
        for name, dt, out in IR_DTYPES:
            for acc in (False, True):
                for epi in (IR_EPILOGUES[:1] if acc else IR_EPILOGUES):
                    if acc and name in ("i8", "u8"):  # (an int8 product with an epilogue takes no beta)
                        continue
                    yield m, n, k, name, dt, out, acc, epi, {}
    for (m, n, k) in [(257, 250, 256)]:
        for name, dt, out in [("f32", np.float32, None), ("bf16", BF16, None), ("i8", np.int8, None)]:
            for plan in IR_PLANS:
                for acc in (False, True):
                    yield m, n, k, name, dt, out, acc, {}, plan


def ir_child(path):
    import coopjit
    out = []
    for (m, n, k, name, dt, odt, acc, epi, plan) in ir_cases():
        head = f"== {m}x{n}x{k} {name} acc={acc} epi={sorted(epi.items())} plan={sorted(plan.items())}"
        try:
            kern = coopjit.compile_gemm(m, n, k, dt, accumulate=acc, out_dtype=odt, plan=plan or None, **epi)
            cfg = kern.config
            res = " ".join(f"{key}={cfg[key]}" for key in sorted(cfg))
            res += "\n-- ir\n" + kern.source("ir") + "\n-- llvm\n" + kern.source("llvm")
        except Exception as e:  # noqa: BLE001
            res = f"ERROR {type(e).__name__}: {e}"
        out.append(f"{head}: {res}")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")
    print(f"{len(out)} kernels -> {path}")


def ir_dump(path):
    e = {**os.environ, "COOPJIT_NUM_THREADS": "2", "COOPJIT_CACHE": "0"}
    r = subprocess.run([sys.executable, __file__, "--ir-child", path], env=e)
    sys.exit(r.returncode)


# --- reduce mode --------------------------------------------------------------------------------
RED_SHAPES = [((3, 4_000_000), (None, 0, 1)), ((4_000_000, 3), (None, 0, 1)), ((8192, 8192), (None, 0, 1)),
              ((1_000_000, 64), (None, 0, 1)), ((64, 1_000_000), (None, 0, 1)), ((12_000_000,), (None,)),
              ((3, 2000, 2000), ((0, 1), (1, 2), 0, 2)), ((2000, 2000, 3), ((0, 1), (1, 2), 0, 2)),
              ((128, 64, 8192), ((0, 1), (1, 2))), ((1000, 1000, 64), ((0, 1), (1, 2))),
              ((100_000, 500), (0, 1)), ((40_000, 300), (0, 1)), ((5, 2_400_000), (0, 1)), ((15, 800_000), (0, 1)),
              ((4096, 4096), (0, 1)), ((8192, 1024), (0, 1)), ((12_000, 1000), (0, 1)), ((1000, 1000), (0, 1)),
              ((64, 64), (0, 1)), ((1_000_003, 5), (0, 1)), ((1 << 20, 15), (0, 1)), ((1 << 20, 16), (0, 1)),
              ((1 << 20, 32), (0, 1)), ((300_000, 40), (0, 1)), ((4, 1 << 22), (0, 1)), ((1 << 24,), (None,))]
RED_DTYPES = ["float32", "float64", "bfloat16", "float16", "int8", "int32", "uint8", "int64"]


def reduce_child(tag):
    import coopjit
    from coopjit import _core, _reduce
    calls = []
    _reduce._run = lambda op, form, x2d, y, types, device="cpu": calls.append((op, form, x2d, types))
    threads = coopjit.get_num_threads()
    vb = 32 if "avx2" in tag else 64

    def plan(op, form, rows, cols, sx_r, sx_c, types):
        try:
            p = _core.reduce_plan(op, form, rows, cols, sx_r, sx_c, *types, vector_bytes=vb, threads=threads)
            return " ".join(f"{k}={p[k]}" for k in sorted(p))
        except Exception as e:  # noqa: BLE001
            return f"ERROR {type(e).__name__}: {e}"

    out = []
    for shape, axes in RED_SHAPES:
        for dtype in RED_DTYPES:
            dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
            base = np.empty(shape, dt)  # (never touched: the kernels are not run)
            views = [("c", base)]
            if len(shape) == 2:
                views.append(("T", base.T))
            if len(shape) == 1:
                views.append(("s2", np.empty(2 * shape[0], dt)[::2]))
            for vname, a in views:
                for op in ("sum", "max"):
                    for axis in axes:
                        calls.clear()
                        try:
                            coopjit.reduce(a, axis=axis, op=op)
                            res = []
                            for (o, form, x2d, types) in calls:
                                isz = x2d.itemsize
                                rows, cols = x2d.shape
                                sx_r, sx_c = x2d.strides[0] // isz, x2d.strides[1] // isz
                                line = f"{form} {rows}x{cols} s({sx_r},{sx_c}) {'/'.join(types)}: " + \
                                    plan(o, form, rows, cols, sx_r, sx_c, types)
                                if form == "column" and sx_c == 1 and rows >= 8 * threads and cols * isz > 2048:
                                    line += " | column_rows: " + plan(o, "column_rows", rows, cols, sx_r, sx_c,
                                                                      (types[0], types[1], types[1]))
                                res.append(line)
                            res = " ; ".join(res)
                        except Exception as e:  # noqa: BLE001
                            res = f"ERROR {type(e).__name__}: {e}"
                        out.append(f"{tag} {op} {dtype} {shape} {vname} ax={axis}: {res}")
    print("\n".join(out))


def reduce_dump(path):
    lines = []
    for tag, env in [("t1", {"COOPJIT_NUM_THREADS": "1"}), ("t2", {"COOPJIT_NUM_THREADS": "2"}),
                     ("t16", {"COOPJIT_NUM_THREADS": "16"}), ("t2avx2", {"COOPJIT_NUM_THREADS": "2"})]:
        e = {**os.environ, **env, "COOPJIT_CACHE": "0"}
        r = subprocess.run([sys.executable, __file__, "--reduce-child", tag], env=e, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{tag}: {r.stderr[-3000:]}")
        lines.append(r.stdout)
    with open(path, "w") as f:
        f.write("".join(lines))
    print(f"{sum(s.count(chr(10)) for s in lines)} cases -> {path}")


if __name__ == "__main__":
    modes = {"reduce": reduce_dump, "--reduce-child": reduce_child, "ir": ir_dump, "--ir-child": ir_child,
             "gpu": gpu_dump, "--child": child}
    if len(sys.argv) > 2 and sys.argv[1] in modes:
        modes[sys.argv[1]](sys.argv[2])
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
