"""Differential fuzz of coopjit's CPU GEMM plans against NumPy in float64 (session 20's audit).

Draws products around the thresholds of the plans sessions 17-19 added (Zen 4 half-width vectors,
the k_outer walk of 16-64 rows with 6-8 x 3-vector tiles and K tiles of 256, edge tiles, AMX
tiles stored straight to C (emulated where the CPU has none), B packed by its reader (inline_b),
skinny dot products, many-core splits on a pool of up to 16 workers, the CPU recipe's beta / store
epilogues, fused epilogues, out= aliasing, prepacked B) through matmul, gemm, compile_gemm's
kernels and prepack, with or without plan= overrides, and checks for every case:
  - the result against NumPy in float64, with a tolerance from K and the dtypes' epsilons (exact,
    after the output's own rounding, for integer inputs and for inputs that are multiples of 1/4
    with no transcendental step);
  - guard bytes: the output is a view in the middle of a larger buffer (strided, transposed or
    reversed); every byte of that buffer outside the view must be unchanged;
  - inputs unchanged: every input is a view of a buffer of its own, compared byte for byte after;
  - a refusal (ValueError / TypeError) is counted and its message kept; any other exception is a
    failure.
Then fixed checks: extreme but legal shapes (0-sized dims, K = 0, M or N = 1 with long K, row
strides past 2^31 elements through a sparse memory map) and bad input (every one must raise
ValueError / TypeError naming the offending values).

    python scripts/fuzz_cpu_plans.py --seed 1 --seconds 600 [--cases N] [--threads 1,2,3,16]

Exit status 1 when anything failed; the summary line counts cases, refusals and failures.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import traceback

import ml_dtypes
import numpy as np

import coopjit

BF16, F8A, F8B = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
FLOATS = [np.float32, np.float64, np.float16, BF16, F8A, F8B]
INTS = [np.int8, np.uint8]
# Sizes around the plans' edges: vector widths (8 / 16 f32 lanes, 4 / 8 f64), tile sizes (6-8 rows,
# 3-5 vectors), the k_outer rule's 16-64 rows, K tiles of 256, skinny / dot thresholds (4 rows).
M_SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40, 47, 48, 49, 63, 64, 65, 72, 79, 80]
NK_SIZES = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 20, 23, 24, 25, 31, 32, 33, 37, 40, 41, 47, 48, 49, 63, 64, 65, 70,
            127, 128, 129, 130, 255, 256, 257, 258]
K_LONG = [511, 512, 513, 767, 768, 769, 1023, 1025]
ACTS = ["relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"]


def finfo_eps(dt) -> float:
    dt = np.dtype(dt)
    if dt.kind in "iu":
        return 0.0
    return float(ml_dtypes.finfo(dt).eps)


def uview(x: np.ndarray) -> np.ndarray:
    """The array's bytes as unsigned integers of its item size (NaN payloads compare too)."""
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


class Owned:
    """An operand as a view of a buffer of its own, the buffer's bytes kept to compare after."""

    def __init__(self, rng, values: np.ndarray, layout: str):
        m, n = values.shape
        dt = values.dtype
        if layout == "fortran":
            base = np.asfortranarray(values.copy())
            view = base
        elif layout == "transposed":
            base = np.ascontiguousarray(values.T.copy())
            view = base.T
        elif layout == "reversed":
            base = np.ascontiguousarray(values[::-1, ::-1])
            view = base[::-1, ::-1]
        elif layout == "stepped":
            base = np.zeros((m + 2, 3 * n + 3), dt)
            view = base[1:1 + m, 2:2 + 3 * n:3]
            view[...] = values
        elif layout == "stepped_rows":
            base = np.zeros((2 * m + 1, n + 5), dt)
            view = base[1:2 * m + 1:2, 3:3 + n]
            view[...] = values
        else:
            base = values.copy()
            view = base
        self.base, self.view = base, view
        self.saved = uview(base).copy()

    def unchanged(self) -> bool:
        return np.array_equal(uview(self.base), self.saved)


class Guarded:
    """An output view in the middle of a larger buffer filled with a sentinel byte pattern; the
    rest of the buffer must keep it."""

    def __init__(self, rng, shape, dtype, layout: str, fill: np.ndarray | None):
        m, n = shape
        dtype = np.dtype(dtype)
        step = 2 if layout in ("stepped", "stepped_t") else 1
        if layout in ("transposed", "stepped_t"):
            base = np.empty((step * n + 5, m + 4), dtype)
            sl = (slice(3, 3 + step * n, step), slice(2, 2 + m))
            t = True
        else:
            base = np.empty((m + 4, step * n + 5), dtype)
            sl = (slice(2, 2 + m), slice(3, 3 + step * n, step))
            t = False
        ub = uview(base)
        self.sentinel = {1: 0xA5, 2: 0x7E5A, 4: 0x7FA5A5A5, 8: 0x7FF5A5A5A5A5A5A5}[dtype.itemsize]  # NaNs for floats
        ub[...] = self.sentinel
        mask = np.ones(base.shape, bool)
        mask[sl] = False
        view = base[sl]
        if t:
            view = view.T
        if layout == "reversed":
            view = view[::-1, ::-1]
        if fill is not None:
            view[...] = fill
        self.base, self.view, self.mask = base, view, mask

    def untouched(self) -> bool:
        return bool((uview(self.base)[self.mask] == self.sentinel).all())


def values(rng, shape, dtype, exact: bool) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return rng.integers(0, 8, shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-7, 8, shape).astype(dtype)
    if exact or dtype.itemsize == 1:
        return (rng.integers(-8, 9, shape) / 4).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def act64(name, y):
    with np.errstate(over="ignore"):
        return _act64(name, y)


def _act64(name, y):
    if name == "relu":
        return np.maximum(y, 0.0)
    if name == "gelu":
        erf = np.vectorize(math.erf, otypes=[np.float64])
        return 0.5 * y * (1.0 + erf(y / math.sqrt(2.0)))
    if name == "gelu_tanh":
        return 0.5 * y * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y ** 3)))
    if name == "silu":
        return y / (1.0 + np.exp(-y))
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-y))
    if name == "tanh":
        return np.tanh(y)
    raise AssertionError(name)


def plan_menu(rng, dtype, m, n, k):
    """A plan override that steers the planner to one of the audited paths (or None)."""
    dt = np.dtype(dtype)
    r = rng.random()
    if r < 0.45:
        return None
    if dt in (np.dtype(np.float32), np.dtype(np.float64)):
        f64 = dt == np.float64
        w = 8 if f64 else 16
        opts = [
            {"order": "k_outer"},
            {"order": "k_outer", "mr": int(rng.integers(6, 9)), "nr": 3 * w, "kt": 256},
            {"order": "k_outer", "kt": int(rng.choice([4, 8, 64, 252, 256, 260, 255]))},
            {"order": "k_outer", "b_prefetch": int(rng.choice([0, 64, 256, 8192]))},
            {"simd_width": w // 2},
            {"simd_width": w // 2, "mr": int(rng.integers(1, 9)), "nr": int(rng.integers(1, 6)) * (w // 2)},
            {"pack": 1},
            {"pack": 0},
            {"pack": 1, "inline_b": 1},
            {"pack": 1, "k_inner": 1, "kt": int(rng.choice([16, 64, 256]))},
            {"split": "sk"},
            {"split": "sk+dp"},
            {"order": "dot"},
            {"order": "k_outer", "ksplit": int(rng.integers(2, 5))},  # (one row of C: draw() makes M 1)
            {"mr": int(rng.integers(1, 13)), "nr": int(rng.integers(1, 5)) * w},
            {"threads": int(rng.choice([1, 2, 3, 5, 16]))},
            {"pack": 1, "shares": int(rng.choice([1, 2, 4]))},
            {"pack": 1, "grid_m": int(rng.choice([1, 2, 3]))},
            {"fixed": 1},
        ]
    else:
        opts = [
            {"amx": "emulated"},
            {"amx": "emulated", "amx_store": 0},
            {"amx": "emulated", "amx_store": 1, "threads": int(rng.choice([1, 2, 3]))},
            {"amx": "emulated", "pack": 1, "inline_b": 1},
            {"amx": "emulated", "direct_a": 1},
            {"amx": "emulated", "amx_feed": int(rng.choice([0, 1, 2]))},
            {"vnni": 1},
            {"pack": 1},
            {"pack": 0},
            {"pack": 1, "inline_b": 1},
            {"order": "dot"},
            {"order": "k_outer"},
            {"split": "sk"},
            {"threads": int(rng.choice([1, 2, 3, 16]))},
        ]
        if dt.itemsize == 2 and dt != np.dtype(BF16):  # f16: no AMX / VNNI types
            opts = [o for o in opts if "amx" not in o and "vnni" not in o]
        if dt.kind == "f" and dt.itemsize == 1:
            opts = [o for o in opts if "amx" not in o and "vnni" not in o]
    p = dict(opts[int(rng.integers(len(opts)))])
    if "amx" in p and m * n * k > 64 * 300 * 300:  # emulated tiles are slow
        return None
    return p


class Case:
    pass


def draw(rng, threads_choices, k0=True):
    c = Case()
    c.api = str(rng.choice(["matmul", "matmul", "gemm", "gemm", "kernel", "prepack", "fused_matmul", "fused_gemm",
                            "fused_kernel"]))
    r = rng.random()
    c.dtype = np.dtype(rng.choice(FLOATS[:2]) if r < 0.45 else rng.choice(FLOATS[2:] + INTS))
    c.m = int(rng.choice(M_SIZES))
    c.n = int(rng.choice(NK_SIZES))
    c.k = int(rng.choice(NK_SIZES + K_LONG if rng.random() < 0.3 else NK_SIZES))
    if rng.random() < 0.1:
        c.k = int(rng.choice([0, 1, 2049, 4100] if k0 else [1, 2049, 4100]))
    c.threads = int(rng.choice(threads_choices))
    c.exact = bool(rng.random() < 0.5)
    c.plan = plan_menu(rng, c.dtype, c.m, c.n, c.k)
    if c.plan and "ksplit" in c.plan:
        c.m = 1
    layouts = ["contiguous", "contiguous", "fortran", "transposed", "reversed", "stepped", "stepped_rows"]
    c.la, c.lb = str(rng.choice(layouts)), str(rng.choice(layouts))
    if c.api.endswith("kernel") and rng.random() < 0.7:  # compiled kernels are planned for contiguous operands
        c.la = c.lb = "contiguous"
    c.trans_a, c.trans_b = bool(rng.random() < 0.3), bool(rng.random() < 0.3)
    c.out = str(rng.choice(["none", "guard", "guard", "guard_t", "guard_rev", "guard_step", "guard_step_t",
                            "alias_a", "overlap_a"]))
    integer = c.dtype.kind in "iu"
    if integer:
        c.alpha = float(rng.choice([1, -2, 3]))
        c.beta = float(rng.choice([0, 0, 1, -1, 2]))
    else:
        c.alpha = float(rng.choice([1.0, 1.0, -0.5, 2.0, 0.75]))
        c.beta = float(rng.choice([0.0, 0.0, 1.0, -1.5, 0.5]))
    c.b_dtype = c.dtype
    if c.dtype == np.uint8 and rng.random() < 0.5:
        c.b_dtype = np.dtype(np.int8)
    elif c.dtype == np.int8 and rng.random() < 0.3:
        c.b_dtype = np.dtype(np.uint8)
    c.epi = {}
    if c.api.startswith("fused"):
        if rng.random() < 0.6:
            c.epi["bias_axis"] = int(rng.choice([0, 1]))
            c.epi["bias"] = True
        if rng.random() < 0.4:
            c.epi["scale"] = True
        if rng.random() < 0.3:
            c.epi["row_scale"] = True
        if rng.random() < 0.5:
            c.epi["activation"] = str(rng.choice(ACTS))
        if rng.random() < 0.35:
            c.epi["residual"] = str(rng.choice(["full", "row", "col", "scalar"]))
        if rng.random() < 0.35:
            outs = ["float32", "bfloat16", "float16"] + (["float64"] if c.dtype == np.float64 else [])
            c.epi["out_dtype"] = str(rng.choice(outs))
        if not c.epi:
            c.epi["bias"] = True
            c.epi["bias_axis"] = 1
    c.seed = int(rng.integers(2**31))
    return c


def describe(c) -> str:
    return (f"{c.api} {c.dtype.name}{'x' + c.b_dtype.name if c.b_dtype != c.dtype else ''} {c.m}x{c.n}x{c.k} "
            f"threads={c.threads} plan={c.plan} a={c.la}{' T' if c.trans_a else ''} "
            f"b={c.lb}{' T' if c.trans_b else ''} "
            f"out={c.out} alpha={c.alpha} beta={c.beta} epi={c.epi} exact={c.exact} seed={c.seed}")


def product_out_dtype(c) -> np.dtype:
    if c.epi:
        if "out_dtype" in c.epi:
            return np.dtype(BF16 if c.epi["out_dtype"] == "bfloat16" else c.epi["out_dtype"])
        if c.dtype.kind in "iu" or c.dtype.itemsize == 1:
            return np.dtype(np.float32)
        return c.dtype
    if c.dtype.kind in "iu":
        return np.dtype(np.int32)
    if c.dtype.itemsize == 1:
        return np.dtype(np.float32)
    return c.dtype


def run_case(c, stats) -> str | None:
    """None when the case passed (or was refused with a clear message); else what failed."""
    rng = np.random.default_rng(c.seed)
    coopjit.set_num_threads(c.threads)
    m, n, k = c.m, c.n, c.k
    gemm_api = c.api in ("gemm", "kernel", "fused_gemm", "fused_kernel", "prepack")
    ta = c.trans_a and gemm_api
    tb = c.trans_b and gemm_api and c.api != "prepack"
    av = values(rng, (m, k), c.dtype, c.exact)
    bv = values(rng, (k, n), c.b_dtype, c.exact)
    A = Owned(rng, np.ascontiguousarray(av.T) if ta else av, c.la)
    B = Owned(rng, np.ascontiguousarray(bv.T) if tb else bv, c.lb)
    odt = product_out_dtype(c)
    a64, b64 = av.astype(np.float64), bv.astype(np.float64)
    acc = a64 @ b64
    mag = np.abs(a64) @ np.abs(b64)
    integer_product = c.dtype.kind in "iu"
    use_c = c.api in ("gemm", "kernel", "fused_gemm", "fused_kernel", "prepack")
    alpha = c.alpha if use_c else 1.0
    beta = c.beta if use_c else 0.0
    if c.epi and integer_product:
        beta = 0.0  # an int8 product with an epilogue takes no beta / accumulate
    # The output (and C's values when beta reads it).
    cvals = None
    if beta != 0.0:
        if odt.kind in "iu":
            cvals = rng.integers(-9, 10, (m, n)).astype(odt)
        else:
            cvals = values(rng, (m, n), odt if odt.itemsize > 1 else np.float32, c.exact).astype(odt)
    kind = c.out
    if kind in ("alias_a", "overlap_a") and not (c.api in ("matmul", "gemm") and A.view.dtype == odt and not ta):
        kind = "guard"
    if c.api in ("kernel", "fused_kernel", "prepack", "fused_gemm") and kind == "none" and beta != 0.0:
        kind = "guard"
    if c.api in ("gemm",) and kind == "none" and beta != 0.0:
        kind = "guard"
    G = None
    out = None
    if kind.startswith("guard"):
        lay = {"guard": "contiguous", "guard_t": "transposed", "guard_rev": "reversed", "guard_step": "stepped",
               "guard_step_t": "stepped_t"}[kind]
        G = Guarded(rng, (m, n), odt, lay, cvals)
        out = G.view
    elif kind == "alias_a":
        if A.view.shape == (m, n):
            out = A.view
            if cvals is not None:
                # beta reads C, which is a: the reference's C is a's values
                cvals = A.view.copy()
        else:
            kind = "none"
    elif kind == "overlap_a":
        # out in a's buffer, starting in the middle of a's elements: a partial overlap
        if c.la == "contiguous" and m * k >= 2:
            buf = np.zeros(m * k + m * n, A.base.dtype)
            buf[: m * k] = A.view.reshape(-1)
            A.view = buf[: m * k].reshape(m, k)
            out = buf[m * k // 2: m * k // 2 + m * n].reshape(m, n)
            if cvals is not None:
                cvals = out.copy()
        else:
            kind = "none"
    if out is None:
        cvals, beta = None, 0.0
    # Epilogue operands and the reference.
    epi_kw = {}
    bias_v = scale_v = row_v = res_v = None
    etype = np.float64 if c.dtype == np.float64 and (not c.epi or True) else np.float32
    if c.epi:
        ax = c.epi.get("bias_axis", 1)
        if c.epi.get("bias"):
            bias_v = values(rng, (n if ax == 1 else m,), np.float32, True)
            epi_kw["bias"] = bias_v
            epi_kw["bias_axis"] = ax
        if c.epi.get("scale"):
            scale_v = values(rng, (n,), np.float32, True)
            epi_kw["scale"] = scale_v
        if c.epi.get("row_scale"):
            row_v = values(rng, (m,), np.float32, True)
            epi_kw["row_scale"] = row_v
        if "activation" in c.epi:
            epi_kw["activation"] = c.epi["activation"]
        if "residual" in c.epi:
            shape = {"full": (m, n), "row": (n,), "col": (m, 1), "scalar": (1, 1)}[c.epi["residual"]]
            res_v = values(rng, shape, np.float32, True)
            epi_kw["residual"] = res_v
        if "out_dtype" in c.epi:
            epi_kw["out_dtype"] = odt
    inputs_saved = {name: v.copy() for name, v in (("bias", bias_v), ("scale", scale_v), ("row_scale", row_v),
                                                   ("residual", res_v)) if v is not None}
    y = alpha * acc
    ymag = abs(alpha) * mag
    eps_acc = 2.0 ** -52 if (c.dtype == np.float64) else 2.0 ** -23
    if integer_product:
        eps_acc = 0.0 if not c.epi else 2.0 ** -23  # int32 sums are exact; the epilogue converts to f32
    if scale_v is not None:
        y = y * scale_v.astype(np.float64)[None, :]
        ymag = ymag * np.abs(scale_v.astype(np.float64))[None, :]
    if row_v is not None:
        y = y * row_v.astype(np.float64)[:, None]
        ymag = ymag * np.abs(row_v.astype(np.float64))[:, None]
    if cvals is not None:
        c64 = cvals.astype(np.float64)
        y = y + beta * c64
        ymag = ymag + abs(beta) * np.abs(c64)
    if bias_v is not None:
        bb = bias_v.astype(np.float64)
        y = y + (bb[None, :] if epi_kw["bias_axis"] == 1 else bb[:, None])
        ymag = ymag + np.abs(bb[None, :] if epi_kw["bias_axis"] == 1 else bb[:, None])
    transcendental = False
    tol_pre = (k + 4) * eps_acc * ymag if not (c.exact or c.dtype.itemsize == 1 or integer_product) else \
        4 * eps_acc * ymag
    if "activation" in epi_kw:
        name = epi_kw["activation"]
        transcendental = name != "relu"
        y = act64(name, y)
        ymag = np.abs(y) + 1.0
        tol_pre = 1.2 * tol_pre + (64 * (2.0 ** -52 if etype == np.float64 else 2.0 ** -23) * (np.abs(y) + 1.0)
                                   if transcendental else 0.0)
    if res_v is not None:
        y = y + np.broadcast_to(res_v.astype(np.float64), (m, n))
        tol_pre = tol_pre + 2 * eps_acc * (np.abs(y) + np.abs(np.broadcast_to(res_v.astype(np.float64), (m, n))))
    ref = y
    # The call.
    plan = c.plan
    pb = None
    try:
        if c.api == "matmul":
            got = coopjit.matmul(A.view, B.view, out=out, plan=plan)
        elif c.api == "fused_matmul":
            got = coopjit.matmul(A.view, B.view, out=out, plan=plan, **epi_kw)
        elif c.api in ("gemm", "fused_gemm"):
            kw = epi_kw if c.api == "fused_gemm" else {}
            got = coopjit.gemm(A.view, B.view, out, alpha=alpha, beta=beta if out is not None else 0.0,
                               trans_a=ta, trans_b=tb, plan=plan, **kw)
        elif c.api == "prepack":
            pb = coopjit.prepack(B.view, plan=plan if plan and "amx" in plan else None)
            got = coopjit.gemm(A.view, pb, out, alpha=alpha, beta=beta if out is not None else 0.0, trans_a=ta,
                               plan=({k2: v for k2, v in plan.items() if k2 in ("threads", "split", "mr", "kt")}
                                     if plan else None))
        else:
            ckw = {}
            call_kw = {}
            if c.api == "fused_kernel":
                for name in ("bias", "scale", "row_scale", "residual"):
                    if name in epi_kw:
                        ckw[name] = True
                        call_kw[name] = epi_kw[name]
                for name in ("bias_axis", "activation", "out_dtype"):
                    if name in epi_kw:
                        ckw[name] = epi_kw[name]
            odt_k = ckw.pop("out_dtype", None)
            if not c.epi and c.dtype.itemsize == 2 and rng.random() < 0.3:
                odt_k = np.float32  # a 16-bit product into float32
                if G is not None:
                    raise _Skip()
            kern = coopjit.compile_gemm(m, n, k, c.dtype, trans_a=ta, trans_b=tb, accumulate=beta != 0.0, plan=plan,
                                        out_dtype=odt_k, **ckw)
            if c.b_dtype != c.dtype:
                raise _Skip()
            got = kern(A.view, B.view, out, alpha=alpha, beta=beta if out is not None else 0.0, **call_kw)
    except _Skip:
        stats["skipped"] += 1
        return None
    except (ValueError, TypeError) as e:
        msg = str(e)
        stats["refused"] += 1
        stats["refusals"].setdefault(msg[:90], describe(c))
        if len(msg) < 15:
            return f"refusal with an unclear message {msg!r}"
        return None
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
    stats["ran"] += 1
    if out is not None and got is not out:
        return "the result is not the out / c passed in"
    got = np.asarray(got)
    if got.shape != (m, n):
        return f"result shape {got.shape}, want {(m, n)}"
    want_dt = odt if out is None else out.dtype
    if out is None and got.dtype != want_dt:
        return f"result dtype {got.dtype}, want {want_dt}"
    g64 = got.astype(np.float64)
    eps_out = finfo_eps(got.dtype)
    if got.dtype.kind in "iu":
        bad = g64 != ref
        tol = np.zeros_like(ref)
    else:
        tol = tol_pre + eps_out * np.abs(ref) + (1e-300 if got.dtype == np.float64 else 1e-30)
        if got.dtype.itemsize == 2:  # f16 / bf16 overflow or subnormal edges
            tol = tol + (2.0 ** -24 if got.dtype == np.float16 else 0.0)
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(g64 - ref) <= tol)
    if bad.any():
        i = np.argwhere(bad)[0]
        return (f"{int(bad.sum())} of {bad.size} wrong; first at {tuple(i)}: got {g64[tuple(i)]!r} want "
                f"{ref[tuple(i)]!r} (tolerance {tol[tuple(i)]:.3g}); a {c.la}, b {c.lb}")
    if G is not None and not G.untouched():
        ub = uview(G.base)
        where = np.argwhere(G.mask & (ub != G.sentinel))
        return f"wrote outside the output view: {len(where)} elements, first at {tuple(where[0])} of {G.base.shape}"
    if not B.unchanged():
        return "b (or its buffer) was modified"
    if kind not in ("alias_a", "overlap_a") and not A.unchanged():
        return "a (or its buffer) was modified"
    if kind == "overlap_a":
        # a's buffer outside out's part keeps a's bytes
        pass
    for name, v in inputs_saved.items():
        if not np.array_equal(uview(np.ascontiguousarray(epi_kw[name])), uview(v)):
            return f"{name} was modified"
    if pb is not None and not np.array_equal(pb.unpacked().astype(np.float64), b64 if not tb else b64):
        return "the prepacked b no longer unpacks to b"
    return None


class _Skip(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Fixed checks: extreme legal shapes and bad input.

def extreme_cases(failures, quick=False, k0=True):
    rng = np.random.default_rng(7)
    checked = 0

    def expect(label, got, want, tol=0.0):
        nonlocal checked
        checked += 1
        got = np.asarray(got, np.float64)
        if got.shape != np.shape(want) or not (np.abs(got - want) <= tol).all():
            failures.append(f"extreme {label}: got {got if got.size < 10 else got.shape}, want "
                            f"{want if np.size(want) < 10 else np.shape(want)}")

    for threads in (1, 16):
        coopjit.set_num_threads(threads)
        for dt in (np.float32, np.float64, BF16, np.int8):
            odt = np.int32 if dt == np.int8 else dt
            for (m, n, k) in [(0, 5, 3), (5, 0, 3), (5, 3, 0), (17, 33, 0), (0, 3, 300)]:
                if k == 0 and not k0:
                    continue
                a = np.ones((m, k), dt)
                b = np.ones((k, n), dt)
                try:
                    expect(f"{np.dtype(dt).name} {m}x{n}x{k} t{threads}", coopjit.matmul(a, b), np.zeros((m, n)))
                    c = np.full((m, n), 3, odt)
                    coopjit.gemm(a, b, c, alpha=2.0, beta=-1.0)
                    expect(f"gemm beta {np.dtype(dt).name} {m}x{n}x{k}", c, np.full((m, n), -3.0))
                    c = np.full((m, n), np.nan if odt != np.int32 else 1, odt)
                    coopjit.gemm(a, b, c, beta=0.0)
                    expect(f"gemm beta 0 {np.dtype(dt).name} {m}x{n}x{k}", c, np.zeros((m, n)))
                    if np.dtype(dt).kind == "f":
                        bias = np.arange(n, dtype=np.float32)
                        expect(f"fused {np.dtype(dt).name} {m}x{n}x{k}", coopjit.matmul(a, b, bias=bias,
                               activation="relu"), np.broadcast_to(bias.astype(np.float64), (m, n)))
                    for plan in ({"order": "k_outer"}, {"pack": 1, "inline_b": 1}, {"ksplit": 2}):
                        if np.dtype(dt).itemsize == 1 and plan.get("order") == "k_outer":
                            continue
                        try:
                            got = coopjit.matmul(a, b, plan=plan)
                        except ValueError:
                            continue
                        expect(f"{plan} {np.dtype(dt).name} {m}x{n}x{k}", got, np.zeros((m, n)))
                except Exception as e:  # noqa: BLE001
                    failures.append(f"extreme {np.dtype(dt).name} {m}x{n}x{k} t{threads}: {type(e).__name__}: {e}")
        # M or N = 1 with a long K (dot walk, ksplit, k_outer)
        for (m, n, k) in [(1, 1, 1 << 20), (1, 130, 70_000), (33, 1, 100_000)]:
            if quick and k > 200_000:
                continue
            for dt in (np.float32, np.float64, BF16, np.int8):
                a = values(rng, (m, k), dt, True)
                b = values(rng, (k, n), dt, True)
                ref = a.astype(np.float64) @ b.astype(np.float64)
                mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
                # int8: exact; floats: f32 sums of multiples of 1/16 stay exact below 2^20, then
                # K-sized rounding, and the output's own rounding (bf16 / f32)
                tol = 0 if np.dtype(dt).kind == "i" else \
                    (k * 2.0 ** -23 * mag * (mag > 2.0 ** 20)) + finfo_eps(np.dtype(dt)) * np.abs(ref)
                try:
                    got = coopjit.matmul(a, b)
                    expect(f"long K {np.dtype(dt).name} {m}x{n}x{k} t{threads}", got, ref, tol)
                except Exception as e:  # noqa: BLE001
                    failures.append(f"long K {np.dtype(dt).name} {m}x{n}x{k}: {type(e).__name__}: {e}")
    coopjit.set_num_threads(2)
    # Row strides past 2^31 elements: a sparse memory map, only a few pages touched.
    for dt in (np.float32, np.float64, BF16, np.int8):
        dt = np.dtype(dt)
        for (m, n, k) in [(3, 5, 17), (20, 33, 40)]:
            far = (1 << 31) + 64  # elements between rows
            with tempfile.TemporaryDirectory() as d:
                try:
                    path = os.path.join(d, "a")
                    span = (m - 1) * far + k
                    mm = np.memmap(path, dtype=dt, mode="w+", shape=(span,))
                    a = np.lib.stride_tricks.as_strided(mm, (m, k), (far * dt.itemsize, dt.itemsize))
                    av = values(rng, (m, k), dt, True)
                    a[...] = av
                    bpath = os.path.join(d, "b")
                    bspan = (k - 1) * far + n
                    mb = np.memmap(bpath, dtype=dt, mode="w+", shape=(bspan,))
                    b = np.lib.stride_tricks.as_strided(mb, (k, n), (far * dt.itemsize, dt.itemsize))
                    bv = values(rng, (k, n), dt, True)
                    b[...] = bv
                    odt = np.dtype(np.int32) if dt.kind == "i" else dt
                    cpath = os.path.join(d, "c")
                    cspan = (m - 1) * far + n
                    mc = np.memmap(cpath, dtype=odt, mode="w+", shape=(cspan,))
                    c = np.lib.stride_tricks.as_strided(mc, (m, n), (far * odt.itemsize, odt.itemsize))
                    ref = av.astype(np.float64) @ bv.astype(np.float64)
                    got = coopjit.matmul(a, b, out=c)
                    tol = 0 if dt.kind == "i" else finfo_eps(odt) * np.abs(ref)
                    expect(f"2^31 strides {dt.name} {m}x{n}x{k}", np.array(got), ref, tol)
                    got = coopjit.matmul(a, b)
                    expect(f"2^31 strides (a, b) {dt.name} {m}x{n}x{k}", got, ref, tol)
                    for plan in ({"order": "k_outer"}, {"pack": 1}, {"pack": 0}):
                        if dt.itemsize == 1 and "order" in plan:
                            continue
                        try:
                            got = coopjit.matmul(a, b, plan=plan)
                        except ValueError:
                            continue
                        expect(f"2^31 strides {plan} {dt.name} {m}x{n}x{k}", got, ref, tol)
                    del mm, mb, mc, a, b, c
                except Exception as e:  # noqa: BLE001
                    failures.append(f"2^31 strides {dt.name} {m}x{n}x{k}: {type(e).__name__}: {e}")
    return checked


def aliasing_cases(failures) -> int:
    """Epilogue operands (bias, scale, row_scale, residual) that are views of the output itself,
    through matmul, gemm, a compiled kernel, a batch and a prepacked B: the result must be what
    NumPy computes from the operands' values before the call."""
    rng = np.random.default_rng(5)
    checked = 0
    for (m, n, k) in [(4, 8, 5), (16, 64, 32), (33, 130, 70)]:
        for dt in (np.float32, np.float64):
            for threads in (1, 3):
                coopjit.set_num_threads(threads)
                a = rng.integers(-3, 4, (m, k)).astype(dt)
                b = rng.integers(-3, 4, (k, n)).astype(dt)
                ab = a.astype(np.float64) @ b.astype(np.float64)
                for step in ("bias", "scale", "row_scale", "bias0", "residual"):
                    for api in ("matmul", "gemm", "kernel", "prepack", "batch"):
                        # a C-contiguous out (the kernel writes it in place) and a vector inside it
                        big = rng.integers(-3, 4, (m + 1) * n).astype(dt)
                        out = big[: m * n].reshape(m, n)
                        length = n if step in ("bias", "scale") else m
                        start = int(rng.integers(0, m * n - length + 1))
                        vec = big[start: start + length]
                        kw = {}
                        v0 = vec.astype(np.float64).copy()
                        c0 = out.astype(np.float64).copy()
                        if step == "bias":
                            kw = {"bias": vec}
                            want = ab + v0[None, :]
                        elif step == "scale":
                            kw = {"scale": vec}
                            want = ab * v0[None, :]
                        elif step == "row_scale":
                            kw = {"row_scale": vec}
                            want = ab * v0[:, None]
                        elif step == "bias0":
                            kw = {"bias": vec, "bias_axis": 0}
                            want = ab + v0[:, None]
                        else:
                            kw = {"residual": out}
                            want = ab + c0
                        try:
                            if api == "matmul":
                                got = coopjit.matmul(a, b, out=out, **kw)
                            elif api == "gemm":
                                got = coopjit.gemm(a, b, out, alpha=1.0, beta=0.5, **kw)
                                want = want + 0.5 * c0 if step != "residual" else ab + 0.5 * c0 + c0
                                if step in ("scale", "row_scale"):
                                    want = (ab * (v0[None, :] if step == "scale" else v0[:, None])) + 0.5 * c0
                            elif api == "kernel":
                                ck = {key: (True if key != "bias_axis" else val) for key, val in kw.items()}
                                kern = coopjit.compile_gemm(m, n, k, dt, **ck)
                                got = kern(a, b, out, **{key: val for key, val in kw.items() if key != "bias_axis"})
                            elif api == "prepack":
                                got = coopjit.matmul(a, coopjit.prepack(b), out=out, **kw)
                            else:
                                got = coopjit.matmul(a[None], b[None], out=out[None], **kw)[0]
                                if step == "residual":
                                    continue  # (a residual of the 2-D out against a batch of 1: shape differs)
                        except (ValueError, TypeError) as e:
                            failures.append(f"aliasing {api} {step} {np.dtype(dt).name} {m}x{n}x{k}: refused: {e}")
                            continue
                        checked += 1
                        err = np.abs(np.asarray(got, np.float64) - want).max()
                        if err > 1e-6 * (1 + np.abs(want).max()):
                            failures.append(f"aliasing {api} {step}=view of the output {np.dtype(dt).name} "
                                            f"{m}x{n}x{k} threads={threads}: max error {err}")
    return checked


BAD = []


def bad(label, fn, exc, *needles):
    BAD.append((label, fn, exc, needles))


def _bad_inputs():
    f32 = np.ones((4, 5), np.float32)
    g32 = np.ones((5, 6), np.float32)
    bad("mismatched inner dims", lambda: coopjit.matmul(f32, np.ones((4, 6), np.float32)), ValueError, "(4, 5)",
        "(4, 6)")
    bad("gemm mismatched", lambda: coopjit.gemm(f32, g32, trans_a=True), ValueError, "(5, 4)", "(5, 6)")
    bad("out wrong shape", lambda: coopjit.matmul(f32, g32, out=np.empty((4, 5), np.float32)), ValueError, "(4, 5)",
        "(4, 6)")
    bad("c wrong shape", lambda: coopjit.gemm(f32, g32, np.empty((6, 4), np.float32)), ValueError, "(6, 4)", "(4, 6)")
    bad("complex", lambda: coopjit.matmul(f32.astype(np.complex64), g32.astype(np.complex64)), TypeError, "complex64")
    bad("mixed int8 float", lambda: coopjit.gemm(f32.astype(np.int8), g32), TypeError, "int8", "float32")
    bad("object dtype", lambda: coopjit.matmul(f32.astype(object), g32), TypeError, "object")
    bad("out int for float", lambda: coopjit.matmul(f32, g32, out=np.empty((4, 6), np.int32)), TypeError, "int32")
    ro = np.empty((4, 6), np.float32)
    ro.flags.writeable = False
    bad("read-only out", lambda: coopjit.matmul(f32, g32, out=ro), ValueError, "read-only")
    bad("read-only c", lambda: coopjit.gemm(f32, g32, ro, beta=1.0), ValueError, "read-only")
    bad("read-only c kernel", lambda: coopjit.compile_gemm(4, 6, 5)(f32, g32, ro), ValueError, "read-only")
    bad("read-only out fused", lambda: coopjit.matmul(f32, g32, out=ro, bias=np.ones(6, np.float32)), ValueError,
        "read-only")
    bad("read-only c prepacked", lambda: coopjit.gemm(f32, coopjit.prepack(g32), ro), ValueError, "read-only")
    bad("bias wrong length", lambda: coopjit.matmul(f32, g32, bias=np.ones(5, np.float32)), ValueError, "(5,)", "6")
    bad("bias axis 0 wrong length", lambda: coopjit.matmul(f32, g32, bias=np.ones(6, np.float32), bias_axis=0),
        ValueError, "(6,)", "4")
    bad("bias_axis 2", lambda: coopjit.matmul(f32, g32, bias=np.ones(6, np.float32), bias_axis=2), ValueError, "2")
    bad("scale wrong length", lambda: coopjit.matmul(f32, g32, scale=np.ones(4, np.float32)), ValueError, "(4,)", "6")
    bad("row_scale wrong length", lambda: coopjit.matmul(f32, g32, row_scale=np.ones(6, np.float32)), ValueError,
        "(6,)", "4")
    bad("residual no broadcast", lambda: coopjit.matmul(f32, g32, residual=np.ones((3, 6), np.float32)), ValueError,
        "(3, 6)", "(4, 6)")
    bad("bad activation", lambda: coopjit.matmul(f32, g32, activation="swish"), ValueError, "swish")
    bad("out_dtype int8", lambda: coopjit.matmul(f32, g32, bias=np.ones(6, np.float32), out_dtype=np.int8), TypeError,
        "int8")
    bad("out_dtype f64 for f32", lambda: coopjit.matmul(f32, g32, bias=np.ones(6, np.float32), out_dtype=np.float64),
        TypeError, "float64")
    bad("fractional alpha int8", lambda: coopjit.gemm(f32.astype(np.int8), g32.astype(np.int8), alpha=0.5),
        ValueError, "0.5")
    bad("nan alpha type", lambda: coopjit.gemm(f32, g32, alpha="x"), TypeError, "alpha")
    bad("prepacked trans_b", lambda: coopjit.gemm(f32, coopjit.prepack(g32), trans_b=True), ValueError, "trans_b")
    bad("prepacked K mismatch", lambda: coopjit.matmul(np.ones((4, 6), np.float32), coopjit.prepack(g32)), ValueError,
        "(4, 6)", "(5, 6)")
    bad("prepacked 3-D", lambda: coopjit.prepack(np.ones((2, 5, 6), np.float32)), ValueError, "(2, 5, 6)")
    bad("prepack plan clash", lambda: coopjit.matmul(f32, coopjit.prepack(g32), plan={"pack": 0}), ValueError, "pack")
    for plan, needle in [({"mr": 0}, "mr"), ({"nr": 3}, "nr"), ({"kt": 0}, "kt"), ({"threads": 0}, "threads"),
                         ({"threads": 10**7}, "threads"), ({"simd_width": 3}, "simd_width"), ({"ksplit": -1}, "ksplit"),
                         ({"kb": 3}, "kb"), ({"b_prefetch": 65}, "b_prefetch"), ({"shares": -2}, "shares"),
                         ({"order": "diagonal"}, "diagonal"), ({"amx_prefetch": 9}, "amx_prefetch"),
                         ({"mc_tiles": -1}, "mc_tiles"), ({"grid_m": -3}, "grid_m"), ({"mr": 10**6}, "mr"),
                         ({"nr": 16 * 10**5}, "nr"), ({"kt": 2**31}, "kt")]:
        bad(f"plan {plan}", lambda plan=plan: coopjit.matmul(f32, g32, plan=plan), ValueError, needle)
    bad("kernel wrong a shape", lambda: coopjit.compile_gemm(4, 6, 5)(np.ones((4, 4), np.float32), g32), ValueError,
        "(4, 4)")
    bad("kernel wrong dtype", lambda: coopjit.compile_gemm(4, 6, 5)(f32.astype(np.float64), g32), TypeError,
        "float64")
    bad("kernel c wrong dtype", lambda: coopjit.compile_gemm(4, 6, 5)(f32, g32, np.empty((4, 6), np.float64)),
        (ValueError, TypeError), "float64")
    bad("kernel missing bias", lambda: coopjit.compile_gemm(4, 6, 5, bias=True)(f32, g32), ValueError, "bias")
    bad("kernel bias not compiled", lambda: coopjit.compile_gemm(4, 6, 5)(f32, g32, bias=np.ones(6)), ValueError,
        "bias")
    bad("compile negative m", lambda: coopjit.compile_gemm(-1, 6, 5), ValueError, "-1")
    bad("set_num_threads 0", lambda: coopjit.set_num_threads(0), ValueError, "0")
    bad("batch no broadcast", lambda: coopjit.matmul(np.ones((2, 4, 5), np.float32), np.ones((3, 5, 6), np.float32)),
        ValueError, "(2, 4, 5)", "(3, 5, 6)")


def bad_input_cases(failures):
    BAD.clear()
    _bad_inputs()
    for label, fn, exc, needles in BAD:
        try:
            fn()
        except exc as e:
            msg = str(e)
            missing = [s for s in needles if s not in msg]
            if missing:
                failures.append(f"bad input {label}: {type(e).__name__} {msg!r} does not name {missing}")
        except Exception as e:  # noqa: BLE001
            failures.append(f"bad input {label}: {type(e).__name__} (want {exc}): {e}")
        else:
            failures.append(f"bad input {label}: no exception (want {exc})")
    return len(BAD)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--cases", type=int, default=10**9)
    ap.add_argument("--threads", default="1,2,3,16")
    ap.add_argument("--no-fixed", action="store_true", help="skip the extreme-shape and bad-input checks")
    ap.add_argument("--quick-fixed", action="store_true", help="the extreme shapes without the longest K")
    ap.add_argument("--max-failures", type=int, default=30)
    ap.add_argument("--no-k0", action="store_true", help="draw no K = 0 products (builds before session 20's fix "
                    "crash on some of their plans)")
    ap.add_argument("--last-case", default=None, help="a file each case is written to before it runs (a crash's case)")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    old_threads = coopjit.get_num_threads()
    failures = []
    stats = {"ran": 0, "refused": 0, "skipped": 0, "refusals": {}}
    t0 = time.monotonic()
    if not args.no_fixed:
        n_bad = bad_input_cases(failures)
        print(f"bad inputs: {n_bad} checked, {len(failures)} failures ({time.monotonic() - t0:.0f} s)", flush=True)
        for f in failures:
            print("FAIL", f, flush=True)
        n_alias = aliasing_cases(failures)
        print(f"epilogue operands in the output: {n_alias} checked, {len(failures)} failures "
              f"({time.monotonic() - t0:.0f} s)", flush=True)
        n_ext = extreme_cases(failures, args.quick_fixed, not args.no_k0)
        print(f"fixed checks: {n_bad} bad inputs, {n_ext} extreme-shape results, {len(failures)} failures "
              f"({time.monotonic() - t0:.0f} s)", flush=True)
    rng = np.random.default_rng(args.seed)
    i = 0
    while i < args.cases and time.monotonic() - t0 < args.seconds and len(failures) < args.max_failures:
        c = draw(rng, threads, not args.no_k0)
        i += 1
        if args.last_case:
            with open(args.last_case, "w") as f:
                f.write(f"case {i}: {describe(c)}\n")
        try:
            err = run_case(c, stats)
        except Exception as e:  # noqa: BLE001  (the harness itself)
            err = f"harness: {type(e).__name__}: {e}\n{traceback.format_exc()}"
        if err:
            failures.append(f"case {i}: {describe(c)}\n    {err}")
            print(f"FAIL case {i}: {describe(c)}\n    {err}", flush=True)
        if i % 200 == 0:
            print(f"... {i} cases, {time.monotonic() - t0:.0f} s, {len(failures)} failures", flush=True)
    coopjit.set_num_threads(old_threads)
    print(f"refusal messages ({len(stats['refusals'])} distinct):")
    for msg, case in sorted(stats["refusals"].items()):
        print(f"  {msg!r}  <- {case}")
    print(f"seed {args.seed}: {i} cases drawn, {stats['ran']} ran and checked, {stats['refused']} refused (clear "
          f"ValueError / TypeError), {stats['skipped']} skipped; {len(failures)} failures; "
          f"{time.monotonic() - t0:.0f} s")
    for f in failures:
        print("FAILURE:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
