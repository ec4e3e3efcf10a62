"""The benchmark of `python -m coopjit bench`: coopjit against NumPy and PyTorch (CPU) side by side.

    python -m coopjit bench [--quick] [--out DIR] [--only SECTION ...]
    python -m coopjit bench --device cuda:0 [--quick] [--out DIR]   # the GPU against torch (cuBLAS)

Each cell is the median of repeated timed calls after a warm-up call; short calls are timed in
batches. Ratios are speed ratios (time of the other library / time of coopjit: above 1 coopjit
is faster). Percentages are of the machine's peak measured by coopjit.peak() on all cores. A
coopjit entry point that is missing or refuses a dtype (NotImplementedError, TypeError) gives
"n/a"; coopjit's first result of each case is checked against a float64 reference ("WRONG" if
it is off). Writes a table (printed and .txt), a JSON file and a PNG plot into DIR.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

import coopjit

from . import _bench_jit
from . import _bench_report as report

LIBS = ("coopjit", "numpy", "torch")


@dataclass(frozen=True)
class Config:
    """What to measure and how long to try."""

    gemm_sizes: tuple = (256, 512, 1024, 2048)
    small_sizes: tuple = (4, 8, 16, 32, 64)
    batched: tuple = (4096, 16)  # count, n: `count` products of n x n x n in one matmul call
    lowp_sizes: tuple = (256, 512, 1024, 2048, 4096)
    reduce_shape: tuple = (8192, 8192)  # float32: 256 MiB, 8x the L3 of a large CPU
    # float32 (M, N, K) whose output tiles leave the last wave of workers partly empty (3 and 5
    # tiles of 12 x 32 on 2 workers): the automatic plan (Stream-K) against forced data-parallel
    streamk: tuple = ((36, 32, 16384), (60, 32, 8192))
    repeat: int = 11  # timed samples per cell (fewer when the budget runs out, at least 3)
    min_sample: float = 0.005  # seconds: calls shorter than this are timed in batches
    budget: float = 3.0  # seconds of timed calls per cell
    slow: float = 2.0  # seconds: a call predicted to be slower is skipped
    # seconds between libraries: lets the other library's threads go idle (OpenBLAS's threads yield
    # for about 0.1 s after a call; 0.05 s gave erratic cells on the 16-core host)
    pause: float = 0.3
    busy: float = 0.25  # cores other processes may take during a case before it is measured again
    retries: int = 3  # times a busy case is measured again (the quietest try is kept)
    wait: float = 20.0  # seconds to wait for a quiet machine before measuring a busy case again
    retry_budget: float = 120.0  # seconds after the start past which busy cases are not measured again
    peak_seconds: float = 0.1
    # The shape sweep of issue 14 (the skinny, odd and batched shapes users meet): (dtype, M, N, K,
    # batch or 0[, "col": B column-major, a @ w.T]); and its reductions: (shape, axis)
    shapes: tuple = (("float32", 1, 4096, 4096, 0), ("float32", 4096, 1, 4096, 0), ("float32", 16, 4096, 4096, 0),
                     ("float32", 64, 4096, 4096, 0), ("float32", 4096, 64, 4096, 0), ("float32", 64, 64, 8192, 0),
                     ("float32", 513, 129, 700, 0), ("float32", 3000, 500, 200, 0), ("float32", 100, 37, 250, 0),
                     ("float32", 32, 32, 32, 0), ("float32", 64, 64, 64, 0), ("float32", 128, 128, 128, 32),
                     ("float32", 32, 32, 32, 256), ("float32", 512, 512, 512, 8), ("bfloat16", 512, 512, 512, 0),
                     ("bfloat16", 1, 4096, 4096, 0), ("bfloat16", 64, 4096, 4096, 0), ("int8", 64, 4096, 4096, 0),
                     ("int8", 1024, 1024, 1024, 0), ("float32", 16, 4096, 4096, 0, "col"),
                     ("float32", 64, 4096, 4096, 0, "col"))
    shape_reductions: tuple = (((3, 4_000_000), 1), ((12_000_000,), None), ((8192, 8192), None), ((8192, 8192), 0),
                               ((8192, 8192), 1), ((4_000_000, 3), 1))
    # Thread scaling: 1, 2, 4, ... workers up to the cores, float32 and bfloat16 GEMM of this size
    # and a float32 sum of scaling_reduce elements, coopjit and torch at the same thread count
    # Fused epilogues: float32 n^3 with bias + GELU; the W8A8 case is 64 x 4096 x 4096
    epilogue_sizes: tuple = (1024, 2048)
    w8a8_shape: tuple = (64, 4096, 4096)  # M (activations' rows), K, N (the prepacked int8 weight)
    softmax_shape: tuple = (8192, 1024)  # a row softmax written with the KernelBuilder, on the CPU's grid
    scaling_n: int = 2048
    scaling_reduce: int = 1 << 25
    sections: tuple = ("gemm_f32", "gemm_f64", "small_f32", "batched_f32", "gemm_bf16", "gemm_f16",
                       "gemm_int8", "reduce", "shapes", "epilogue", "softmax", "streamk", "scaling", "jit")


FULL = Config()
QUICK = Config(epilogue_sizes=(1024,), gemm_sizes=(256, 1024), small_sizes=(4, 16, 64), lowp_sizes=(256, 1024),
               reduce_shape=(4096, 4096), repeat=5, min_sample=0.002, budget=0.5, slow=1.0, pause=0.3, retries=1, wait=5.0,
               retry_budget=15.0, scaling_n=1024, scaling_reduce=1 << 23)


def for_machine(cfg: Config, cores: int | None = None) -> Config:
    """cfg with sizes that suit the machine: on 8 cores or more, squares up to 4096 (and 8192 for
    the low-precision products where the CPU has AMX tiles), --quick included, and Stream-K shapes whose output tiles
    (12 x 32 each) leave the last wave of the workers partly empty: workers + 1 and 1.5 x workers."""
    cores = cores or len(os.sched_getaffinity(0))
    if cores < 8:
        return cfg
    feats = coopjit.cpu_info()["features"]
    big = (4096,)
    lowp = (4096, 8192) if feats.get("amx-tile") else (4096,)
    w = min(cores, coopjit.get_num_threads())
    streamk = ((12 * (w + 1), 32, 8192), (12 * (3 * w // 2), 32, 8192))
    return dataclasses.replace(cfg, gemm_sizes=tuple(sorted(set(cfg.gemm_sizes + big))),
                               lowp_sizes=tuple(sorted(set(cfg.lowp_sizes + lowp))), streamk=streamk)


# ---- timing


def time_call(fn: Callable, cfg: Config) -> dict:
    """Warm-up call, then the median of up to cfg.repeat samples (each a batch of calls when short)."""
    t0 = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    fn()
    est = max(time.perf_counter() - t0, 1e-7)
    if est > cfg.slow:  # (the first call may be slow only because it compiles: the second tells)
        return {"median_s": min(first, est), "samples": 1, "first_s": first, "result": result}
    inner = max(1, int(cfg.min_sample / est))
    count = max(min(3, cfg.repeat), min(cfg.repeat, int(cfg.budget / (est * inner))))
    samples = []
    for _ in range(count):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return {"median_s": float(np.median(samples)), "samples": count * inner, "first_s": first, "result": result}


# ---- the cases: each row is a label, its work, and per library a call (or why there is none)


@dataclass
class Case:
    section: str
    label: str
    size: int | None
    work: float  # flops (or integer ops) or bytes of one call
    setup: Callable[[], tuple[dict, Callable | None]]  # -> ({lib: callable or reason}, check)
    dtype: str = ""


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _operand(values32: np.ndarray, dtype: str):
    """values32 converted to `dtype` as coopjit takes it (bfloat16: an ml_dtypes array)."""
    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            return None
        return values32.astype(ml_dtypes.bfloat16)
    return values32.astype(dtype)


def _rel_error_check(ref: np.ndarray, tol: float, exact: bool = False) -> Callable:
    def check(got) -> str | None:
        got = np.asarray(got)
        if got.shape != ref.shape:
            return f"shape {got.shape}, want {ref.shape}"
        g = got.astype(np.float64)
        want = ref.astype(np.int64).astype(got.dtype).astype(np.float64) if exact else ref  # int: wraps
        err = float(np.max(np.abs(g - want), initial=0.0)) / max(float(np.max(np.abs(ref), initial=0.0)), 1e-300)
        return None if err <= tol else f"max relative error {err:.2e} > {tol:.1e}"
    return check


def gemm_case(section: str, dtype: str, n: int, batch: int | None = None, label: str | None = None) -> Case:
    shape = (batch, n, n) if batch else (n, n)

    def setup():
        rng = np.random.default_rng(n)
        torch = _torch()
        libs: dict = {}
        if dtype == "int8":
            a = rng.integers(-128, 128, shape, dtype=np.int8)
            b = rng.integers(-128, 128, shape, dtype=np.int8)
            va, vb = a.astype(np.float32), b.astype(np.float32)
        else:
            a32, b32 = rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(shape, dtype=np.float32)
            a, b = _operand(a32, dtype), _operand(b32, dtype)
            va, vb = (a32, b32) if a is None else (a.astype(np.float64), b.astype(np.float64))
        if a is None:
            libs["coopjit"] = "ml_dtypes is not installed"
        elif not hasattr(coopjit, "matmul"):
            libs["coopjit"] = "coopjit.matmul does not exist"
        else:
            libs["coopjit"] = lambda: coopjit.matmul(a, b)
        libs["numpy"] = (lambda: np.matmul(a, b)) if dtype in ("float32", "float64") else "not compared"
        if torch is None:
            libs["torch"] = "torch is not installed"
        elif dtype == "int8":
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            libs["torch"] = "torch._int_mm is 2-D only" if batch else (lambda: torch._int_mm(ta, tb))
        else:
            if dtype in ("float32", "float64"):
                ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            else:  # the same (rounded) values as coopjit's operands
                tdt = getattr(torch, dtype)
                ta, tb = (torch.from_numpy(np.asarray(v, np.float32)).to(tdt) for v in (va, vb))
            libs["torch"] = lambda: torch.matmul(ta, tb)
        ref = np.matmul(np.asarray(va, np.float64), np.asarray(vb, np.float64))
        if dtype == "int8":
            return libs, _rel_error_check(ref, 0.0, exact=True)
        acc_eps = np.finfo(np.float64 if dtype == "float64" else np.float32).eps
        out_eps = 2.0**-8 if dtype == "bfloat16" else np.finfo(dtype).eps
        return libs, _rel_error_check(ref, 8 * np.sqrt(n) * acc_eps + out_eps)

    flops = 2.0 * n**3 * (batch or 1)
    return Case(section, label or str(n), n, flops, setup, dtype)


def _gelu_numpy():
    """NumPy's GELU (erf form) through scipy.special.erf: NumPy itself has no erf."""
    try:
        from scipy.special import erf
    except ImportError:
        return None
    return lambda y: np.multiply(np.multiply(y, 0.5), 1.0 + erf(y * np.float32(0.7071067811865476)))


def epilogue_case(kind: str, n: int, w8a8_shape: tuple = (64, 4096, 4096)) -> Case:
    """Issue 17's fused products: "f32": n^3 float32 with a bias and GELU (erf form), coopjit's one
    kernel against numpy (matmul, then + bias and GELU with scipy's erf) and torch (addmm, then
    gelu); "w8a8": int8 activations (64 x 4096) times a prepacked int8 weight (4096 x 4096), int32
    sums scaled per column, a bias, bfloat16 out: fused against the same coopjit product unfused
    followed by NumPy's epilogue (in the numpy column) and torch._int_mm followed by torch's."""
    def setup():
        rng = np.random.default_rng(17 + n)
        torch = _torch()
        gelu = _gelu_numpy()
        libs: dict = {}
        if kind == "f32":
            a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
            bias = rng.standard_normal(n, dtype=np.float32)
            libs["coopjit"] = lambda: coopjit.matmul(a, b, bias=bias, activation="gelu")
            libs["numpy"] = "scipy is not installed (NumPy has no erf)" if gelu is None else \
                (lambda: gelu(np.add(np.matmul(a, b), bias)))
            if torch is None:
                libs["torch"] = "torch is not installed"
            else:
                ta, tb, tbias = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(bias)
                libs["torch"] = lambda: torch.nn.functional.gelu(torch.addmm(tbias, ta, tb))
            y = a.astype(np.float64) @ b + bias
            import math
            erf = np.frompyfunc(math.erf, 1, 1)
            ref = 0.5 * y * (1.0 + erf(y / math.sqrt(2.0)).astype(np.float64))
            return libs, _rel_error_check(ref, 8 * np.sqrt(n) * np.finfo(np.float32).eps)
        import ml_dtypes
        m, k, nn = w8a8_shape
        x = rng.integers(-128, 128, (m, k), dtype=np.int8)
        w = rng.integers(-128, 128, (k, nn), dtype=np.int8)
        scale = (rng.random(nn, dtype=np.float32) * 1e-4).astype(np.float32)
        bias = rng.standard_normal(nn, dtype=np.float32)
        pw = coopjit.prepack(w)
        libs["coopjit"] = lambda: coopjit.matmul(x, pw, scale=scale, bias=bias, out_dtype=ml_dtypes.bfloat16)
        libs["numpy"] = lambda: (coopjit.matmul(x, pw) * scale + bias).astype(ml_dtypes.bfloat16)
        if torch is None:
            libs["torch"] = "torch is not installed"
        else:
            tx, tw = torch.from_numpy(x), torch.from_numpy(w)
            ts, tbias = torch.from_numpy(scale), torch.from_numpy(bias)
            libs["torch"] = lambda: (torch._int_mm(tx, tw) * ts + tbias).to(torch.bfloat16)
        ref = (x.astype(np.float64) @ w) * scale + bias
        return libs, _rel_error_check(ref, 2.0 ** -8)

    if kind == "f32":
        return Case("epilogue", f"f32 {n}^3 + bias, gelu", n, 2.0 * n ** 3, setup, "float32")
    m, k, nn = w8a8_shape
    return Case("epilogue", f"W8A8 {m}x{k}x{nn} * scale + bias -> bf16", nn, 2.0 * m * k * nn, setup, "int8")


def softmax_kernel(cols: int, rows_per_group: int = 4, width: int = 64):
    """A row softmax written with coopjit.ir.KernelBuilder (the README's): each work-group of the
    launch grid takes `rows_per_group` rows; three passes over them in chunks of `width` columns
    (the running max, the sum of exponentials, the result). Call it as k(x, y, rows,
    groups=ceil(rows / rows_per_group))."""
    from .ir import KernelBuilder

    b = KernelBuilder("row_softmax")
    X, Y, R = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>"), b.param("rows", "index")
    t = f"coopmatrix<f32, {rows_per_group}, {width}, acc, subgroup>"
    r0 = b.mul(b.work_id("group"), rows_per_group)

    def chunk(q, c):
        return q.load(t, X, r0, c, strides=(cols, 1), bounds=(R, cols), checked=True)

    def masked(q, c, m, value):  # columns past the row's end (checked loads read zeros there)
        return q.per_element(m, lambda e, r, cc, v, c0: e.select(e.lt(e.add(c0, cc), cols), v, value), [c])

    (mx,) = b.for_range(0, cols, width, [b.splat(t, -np.inf)],
                        lambda q, c, m: q.matrix_binary("max", m, masked(q, c, chunk(q, c), -np.inf)))
    mx = b.reduce(mx, "row", t, "max")

    def add_exp(q, c, s):
        e = q.per_element(chunk(q, c), lambda e, r, cc, v, m: e.exp(e.sub(v, m)), [mx])
        return q.matrix_binary("add", s, masked(q, c, e, 0.0))

    (s,) = b.for_range(0, cols, width, [b.splat(t, 0.0)], add_exp)
    inv = b.per_element(b.reduce(s, "row", t, "add"), lambda e, r, c, v: e.div(1.0, v))

    def write(q, c):
        y = q.per_element(chunk(q, c), lambda e, r, cc, v, m, i: e.mul(e.exp(e.sub(v, m)), i), [mx, inv])
        q.store(y, Y, r0, c, strides=(cols, 1), bounds=(R, cols), checked=True)

    b.for_range(0, cols, width, body=write)
    return b.compile()


def softmax_case(rows: int, cols: int) -> Case:
    """A float32 row softmax: the KernelBuilder kernel on the CPU's launch grid against NumPy
    (exp(x - max) / sum) and torch.softmax; work counted as the bytes read and written once."""
    def setup():
        x = (np.random.default_rng(rows).standard_normal((rows, cols)) * 4).astype(np.float32)
        y = np.empty_like(x)
        k = softmax_kernel(cols)
        torch = _torch()
        libs: dict = {"coopjit": lambda: (k(x, y, rows, groups=-(-rows // 4)), y)[1]}

        def numpy_softmax():
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        libs["numpy"] = numpy_softmax
        if torch is None:
            libs["torch"] = "torch is not installed"
        else:
            tx = torch.from_numpy(x)
            libs["torch"] = lambda: torch.softmax(tx, dim=1)
        ref = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        ref /= ref.sum(axis=1, keepdims=True)
        return libs, _rel_error_check(ref, 1e-5)

    return Case("softmax", f"row softmax {rows}x{cols} f32 (KernelBuilder)", cols, 8.0 * rows * cols, setup, "float32")


def shape_case(dtype: str, m: int, n: int, k: int, batch: int = 0, b_layout: str = "row") -> Case:
    """One case of the shape sweep: (batch x) M x K times K x N in `dtype`, against numpy.matmul
    (float32) and torch (matmul, or torch._int_mm for int8). b_layout "col": B column-major (the
    transpose of a row-major N x K array, as in a @ w.T), the same array for every library."""
    if b_layout not in ("row", "col") or (b_layout == "col" and (batch or dtype == "int8")):
        raise ValueError(f"shape_case: b_layout={b_layout!r} (batch={batch}, dtype={dtype}): 'row', or 'col' for a 2-D "
                         "float product")
    a_shape, b_shape = ((batch, m, k), (batch, k, n)) if batch else ((m, k), (k, n))
    label = f"{dtype} " + (f"{batch}x " if batch else "") + f"{m}x{n}x{k}" + (" B col-major" if b_layout == "col" else "")

    def setup():
        rng = np.random.default_rng(m * 7 + n * 3 + k)
        torch = _torch()
        libs: dict = {}
        if dtype == "int8":
            a, b = rng.integers(-128, 128, a_shape, dtype=np.int8), rng.integers(-128, 128, b_shape, dtype=np.int8)
            va, vb = a.astype(np.float64), b.astype(np.float64)
        else:
            a32, b32 = rng.standard_normal(a_shape, dtype=np.float32), rng.standard_normal(b_shape, dtype=np.float32)
            if b_layout == "col":
                b32 = np.asfortranarray(b32)
            a, b = _operand(a32, dtype), _operand(b32, dtype)
            if b is not None and b_layout == "col":
                b = np.asfortranarray(b)
            va, vb = (a32, b32) if a is None else (a.astype(np.float64), b.astype(np.float64))
        libs["coopjit"] = "ml_dtypes is not installed" if a is None else (lambda: coopjit.matmul(a, b))
        libs["numpy"] = (lambda: np.matmul(a, b)) if dtype == "float32" else "not compared"
        if torch is None:
            libs["torch"] = "torch is not installed"
        elif dtype == "int8":
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            if batch or m < 17 or n % 8 or k % 8:  # torch._int_mm's own limits (M > 16, N and K multiples of 8)
                libs["torch"] = "torch._int_mm needs M > 16 and N, K multiples of 8 (2-D)"
            else:
                libs["torch"] = lambda: torch._int_mm(ta, tb)
        else:
            tdt = getattr(torch, dtype)
            ta, tb = (torch.from_numpy(np.asarray(v, np.float32)).to(tdt) for v in (va, vb))
            if b_layout == "col":  # (torch's own column-major view: the transpose of a row-major N x K tensor)
                tb = tb.t().contiguous().t()
            libs["torch"] = lambda: torch.matmul(ta, tb)
        ref = np.matmul(va, vb)
        if dtype == "int8":
            return libs, _rel_error_check(ref, 0.0, exact=True)
        out_eps = 2.0**-8 if dtype == "bfloat16" else np.finfo(np.float32).eps
        return libs, _rel_error_check(ref, 8 * np.sqrt(k) * np.finfo(np.float32).eps + out_eps)

    return Case("shapes", label, None, 2.0 * m * n * k * (batch or 1), setup, dtype)


@functools.lru_cache(maxsize=1)
def _reduce_input(shape: tuple, dtype: str) -> np.ndarray:
    return np.random.default_rng(7).random(shape, dtype=np.dtype(dtype))


def reduce_case(op: str, axis: int | None, shape: tuple, dtype: str = "float32", section: str = "reduce") -> Case:
    def setup():
        a = _reduce_input(shape, dtype)
        torch = _torch()
        libs: dict = {}
        if not hasattr(coopjit, "reduce"):
            libs["coopjit"] = "coopjit.reduce does not exist yet"
        else:
            libs["coopjit"] = lambda: coopjit.reduce(a, axis=axis, op=op)
        libs["numpy"] = (lambda: np.sum(a, axis=axis)) if op == "sum" else (lambda: np.max(a, axis=axis))
        if torch is None:
            libs["torch"] = "torch is not installed"
        else:
            t = torch.from_numpy(a)
            dims = () if axis is None else axis
            libs["torch"] = (lambda: torch.sum(t, dim=dims)) if op == "sum" else (lambda: torch.amax(t, dim=dims))
        if op == "max":
            return libs, _rel_error_check(np.max(a, axis=axis).astype(np.float64), 0.0)
        ref = np.sum(a, axis=axis, dtype=np.float64)  # the data are >= 0, so |sum| bounds the error
        n = a.size if axis is None else a.shape[axis]
        return libs, _rel_error_check(ref, n * np.finfo(dtype).eps)

    label = f"{op} axis={axis} {dtype} {'x'.join(str(v) for v in shape)}"
    return Case(section, label, None, float(np.prod(shape)) * np.dtype(dtype).itemsize, setup, dtype)


def cases(cfg: Config) -> list[Case]:
    out = []
    for key in cfg.sections:
        if key in ("gemm_f32", "gemm_f64"):
            out += [gemm_case(key, "float" + key[-2:], n) for n in cfg.gemm_sizes]
        elif key == "small_f32":
            out += [gemm_case(key, "float32", n) for n in cfg.small_sizes]
        elif key == "batched_f32":
            count, n = cfg.batched
            out.append(gemm_case(key, "float32", n, batch=count, label=f"{count}x {n}x{n}x{n}"))
        elif key in ("gemm_bf16", "gemm_f16", "gemm_int8"):
            dtype = {"gemm_bf16": "bfloat16", "gemm_f16": "float16", "gemm_int8": "int8"}[key]
            out += [gemm_case(key, dtype, n) for n in cfg.lowp_sizes]
        elif key == "shapes":
            out += [shape_case(*c) for c in cfg.shapes]
            out += [reduce_case("sum", axis, shape, section="shapes_reduce") for shape, axis in cfg.shape_reductions]
        elif key == "epilogue":
            out += [epilogue_case("f32", n) for n in cfg.epilogue_sizes] + [epilogue_case("w8a8", 0, cfg.w8a8_shape)]
        elif key == "softmax":
            out.append(softmax_case(*cfg.softmax_shape))
        elif key in ("jit", "streamk", "scaling"):
            continue  # measured apart: their own tables
        elif key == "reduce":
            s = cfg.reduce_shape
            out += [reduce_case("sum", None, s), reduce_case("sum", 0, s), reduce_case("sum", 1, s),
                    reduce_case("max", 0, s), reduce_case("max", 1, s), reduce_case("sum", 1, s, "float64")]
        else:
            raise ValueError(f"unknown section {key!r}; known: {', '.join(Config().sections)}")
    return out


def stream_k_rows(cfg: Config) -> list[dict]:
    """The automatic plan against forced data-parallel on shapes with a partly empty last wave."""
    rows = []
    rng = np.random.default_rng(0)
    for m, n, k in cfg.streamk:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        auto = coopjit.compile_gemm(m, n, k, np.float32)
        dp = coopjit.compile_gemm(m, n, k, np.float32, plan={"split": "dp"})
        c = np.empty((m, n), np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)  # NumPy's BLAS threads spin for a while after
        times = {}
        for name, kern in (("auto", auto), ("dp", dp), ("auto", auto), ("dp", dp)):  # twice each, the faster kept
            time.sleep(max(cfg.pause, 0.2 if cfg.pause else 0.0))
            t = time_call(lambda kern=kern: (kern(a, b, c), c.copy())[1], cfg)
            err = float(np.max(np.abs(t["result"] - ref))) / float(np.max(np.abs(ref)))
            ok = bool(err <= (k + 2) * np.finfo(np.float32).eps)
            if name not in times or t["median_s"] < times[name]["median_s"]:
                times[name] = {"median_s": t["median_s"], "ok": ok and times.get(name, {}).get("ok", True)}
        cf = auto.config
        tiles = -(-m // int(cf["mr"])) * -(-n // int(cf["nr"]))
        rows.append({"shape": [m, n, k], "tiles": tiles, "workers": int(cf["threads"]), "split": cf["split"],
                     "auto_s": times["auto"]["median_s"], "dp_s": times["dp"]["median_s"],
                     "ok": times["auto"]["ok"] and times["dp"]["ok"],
                     "speedup": times["dp"]["median_s"] / times["auto"]["median_s"]})
    return rows


def scaling_rows(cfg: Config) -> list[dict]:
    """Thread scaling: float32 and bfloat16 GEMM (cfg.scaling_n cubed) and a float32 sum, on 1, 2, 4,
    ... workers up to the cores (and the cores themselves), coopjit (set_num_threads) against torch
    (set_num_threads) at the same count; each library in its own block after a pause."""
    cores = len(os.sched_getaffinity(0))
    counts = sorted({min(1 << i, cores) for i in range(cores.bit_length() + 1)} | {cores})
    torch = _torch()
    n = cfg.scaling_n
    rng = np.random.default_rng(3)
    a32 = rng.standard_normal((n, n), dtype=np.float32)
    b32 = rng.standard_normal((n, n), dtype=np.float32)
    x = rng.random(cfg.scaling_reduce, dtype=np.float32)
    ops = [("f32 GEMM", 2.0 * n**3, lambda: coopjit.matmul(a32, b32),
            (lambda ta=torch.from_numpy(a32), tb=torch.from_numpy(b32): torch.mm(ta, tb)) if torch else None),
           ("sum", float(x.nbytes), lambda: coopjit.reduce(x), (lambda tx=torch.from_numpy(x): torch.sum(tx)) if torch else None)]
    bf = _operand(a32, "bfloat16")
    if bf is not None:
        bb = _operand(b32, "bfloat16")
        ops.insert(1, ("bf16 GEMM", 2.0 * n**3, lambda: coopjit.matmul(bf, bb),
                       (lambda ta=torch.from_numpy(a32).bfloat16(), tb=torch.from_numpy(b32).bfloat16(): torch.mm(ta, tb))
                       if torch else None))
    saved = coopjit.get_num_threads(), torch.get_num_threads() if torch else None
    rows = []
    try:
        for t in counts:
            coopjit.set_num_threads(t)
            if torch:
                torch.set_num_threads(t)
            for name, work, ours, theirs in ops:
                row = {"op": name, "threads": t, "size": n if "GEMM" in name else x.size,
                       "unit": "GB/s" if name == "sum" else "GFLOP/s"}
                for lib, fn in (("coopjit", ours), ("torch", theirs)):
                    if fn is None:
                        continue
                    time.sleep(cfg.pause)
                    med = time_call(fn, cfg)["median_s"]
                    row[lib] = work / med / 1e9
                rows.append(row)
    finally:
        coopjit.set_num_threads(saved[0])
        if torch:
            torch.set_num_threads(saved[1])
    for row in rows:  # parallel efficiency: the rate per worker against one worker's
        one = next(r for r in rows if r["op"] == row["op"] and r["threads"] == counts[0])
        row["efficiency"] = row["coopjit"] / (one["coopjit"] * row["threads"] / counts[0])
    return rows


# ---- running


def run_cell(fn, check, cfg: Config) -> dict:
    """One library on one case: timing and, when `check` is given, the result checked."""
    if isinstance(fn, str):
        status = "-" if fn == "not compared" else "skipped" if fn.startswith("skipped") else "n/a"
        return {"status": status, "note": fn}
    time.sleep(cfg.pause)
    try:
        t = time_call(fn, cfg)
    except (NotImplementedError, TypeError, AttributeError) as e:
        return {"status": "n/a", "note": f"{type(e).__name__}: {e}"}
    except Exception as e:  # a bug in the library, reported in the cell instead of ending the run
        return {"status": "error", "note": f"{type(e).__name__}: {e}"}
    result = t.pop("result")
    wrong = check(result) if check else None
    return {"status": "WRONG" if wrong else "ok", "note": wrong or "", **t}


def run_case(case: Case, cfg: Config, last: dict) -> dict:
    """One row. `last` maps (section, library) to (work, seconds) of its previous case: a call
    predicted to take longer than cfg.slow (seconds scaled by work) is skipped."""
    libs, check = case.setup()
    row = {"section": case.section, "label": case.label, "size": case.size, "dtype": case.dtype, "work": case.work,
           "unit": report.SECTIONS[case.section].unit, "results": {}}
    for lib in LIBS:
        fn = libs.get(lib, "not compared")
        work, seconds = last.get((case.section, lib), (case.work, 0.0))
        if seconds * case.work / work > cfg.slow:
            fn = f"skipped: predicted {seconds * case.work / work:.0f} s per call (the previous size took {seconds:.1f} s)"
        cell = run_cell(fn, check if lib == "coopjit" else None, cfg)
        if cell.get("median_s"):
            cell["rate"] = case.work / cell["median_s"] / 1e9
            last[case.section, lib] = (case.work, cell["median_s"])
        row["results"][lib] = cell
    return row


def _wait_quiet(cfg: Config, until: float) -> None:
    """Waits (at most cfg.wait seconds, and not past `until`) for a second in which other processes
    take at most cfg.busy cores."""
    end = min(time.perf_counter() + cfg.wait, until)
    while time.perf_counter() < end:
        c0 = _cpu_seconds()
        time.sleep(1.0)
        c1 = _cpu_seconds()
        if not c0 or not c1 or (c1[0] - c0[0]) - (c1[1] - c0[1]) <= cfg.busy:
            return


def quietly(fn: Callable, cfg: Config, until: float) -> tuple:
    """fn(), called again (up to cfg.retries times, not past `until`, each time after waiting for a
    quiet moment) while other processes take more than cfg.busy cores during it. Returns the
    quietest call's result, the cores other processes took during it, and the number of calls."""
    best = None
    for attempt in range(1 + cfg.retries):
        c0, t0 = _cpu_seconds(), time.perf_counter()
        out = fn()
        c1, wall = _cpu_seconds(), time.perf_counter() - t0
        load = max(0.0, (c1[0] - c0[0]) - (c1[1] - c0[1])) / wall if c0 and c1 else 0.0
        if best is None or load < best[1]:
            best = (out, load)
        if load <= cfg.busy or time.perf_counter() >= until:
            break
        _wait_quiet(cfg, until)
    return best[0], best[1], attempt + 1


def run_case_quietly(case: Case, cfg: Config, last: dict, until: float) -> dict:
    """run_case, measured again while the machine is busy (quietly); the row records "other_load" and "tries"."""
    def once():
        trial = dict(last)
        return run_case(case, cfg, trial), trial

    (row, trial), load, tries = quietly(once, cfg, until)
    row["other_load"], row["tries"] = load, tries
    last.update(trial)
    return row


def machine_info() -> dict:
    torch = _torch()
    info = {"cpu": coopjit.cpu_info()["name"], "cores": len(os.sched_getaffinity(0)), "python": platform.python_version(),
            "coopjit": coopjit.__version__, "llvm": coopjit.llvm_version, "numpy": np.__version__,
            "torch": torch.__version__ if torch else None, "torch_threads": torch.get_num_threads() if torch else None,
            "coopjit_threads": coopjit.get_num_threads() if hasattr(coopjit, "get_num_threads") else 1}
    try:
        with open("/proc/cpuinfo") as f:
            info["model"] = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        info["model"] = platform.processor()
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["blas"] = f"{blas.get('name')} {blas.get('version')}"
    except Exception:
        info["blas"] = "unknown"
    feats = coopjit.cpu_info()["features"]
    info["features"] = [f for f in ("avx2", "fma", "avx512f", "avx512bf16", "avx512fp16", "avx512vnni", "amx-tile",
                                    "amx-bf16", "amx-int8") if feats.get(f)]
    return info


def _cpu_seconds() -> tuple[float, float] | None:
    """(CPU seconds the whole machine has been busy or stolen, CPU seconds of this process), Linux only."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    t = os.times()
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK"), t.user + t.system


def _progress(i: int, total: int, text: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write(f"\r[{i}/{total}] {text}"[:100].ljust(100) + ("\n" if i == total else ""))
        sys.stderr.flush()


def run(cfg: Config = FULL, out_dir: str | Path | None = "benchmarks/results", name: str = "coopjit-bench") -> dict:
    """Runs the benchmark; writes <name>.json, .txt and .png into out_dir (when given); returns the result."""
    todo = cases(cfg)
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    retry_until = t0 + cfg.retry_budget
    _progress(0, len(todo), "measuring the machine's peaks (coopjit.peak)")
    peak, peak_load, _ = quietly(lambda: coopjit.peak(refresh=True, seconds=cfg.peak_seconds), cfg, retry_until)
    result = {"meta": {**machine_info(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "command": " ".join(sys.argv), "config": dataclasses.asdict(cfg), "peak_other_load": peak_load},
              "peak": peak, "rows": []}
    last: dict = {}
    for i, case in enumerate(todo):
        _progress(i, len(todo), f"{report.SECTIONS[case.section].title}: {case.label}")
        result["rows"].append(run_case_quietly(case, cfg, last, retry_until))
    if "streamk" in cfg.sections:
        _progress(len(todo), len(todo), "Stream-K against data-parallel")
        result["streamk"] = stream_k_rows(cfg)
    if "scaling" in cfg.sections:
        _progress(len(todo), len(todo), "thread scaling")
        result["scaling"] = scaling_rows(cfg)
    if "jit" in cfg.sections:
        _progress(len(todo), len(todo), "JIT costs, in fresh processes")
        result["jit"] = _bench_jit.measure()
    _progress(len(todo), len(todo), "done")
    cpu1, wall = _cpu_seconds(), time.perf_counter() - t0
    result["meta"]["seconds"] = wall
    if cpu0 and cpu1:  # the cores other processes (or the hypervisor) took during the run
        result["meta"]["other_load"] = max(0.0, (cpu1[0] - cpu0[0]) - (cpu1[1] - cpu0[1])) / wall
    result["meta"]["busy_rows"] = sum(r["other_load"] > cfg.busy for r in result["rows"])
    _reduce_input.cache_clear()
    report.add_ratios(result)
    if out_dir is not None:
        result["files"] = report.write_all(result, Path(out_dir), name)
    return result


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m coopjit bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer sizes and samples (on 8+ cores it adds 4096^3 rows, and 8192^3 with AMX: 145 s on a 16-core Emerald Rapids host)")
    p.add_argument("--out", default="benchmarks/results", help="directory of the JSON, table and PNG files")
    p.add_argument("--only", nargs="+", choices=Config().sections, help="run only these sections")
    p.add_argument("--device", default=None,
                   help="cuda:N: the GPU benchmark (GEMM per dtype, int8, a fused epilogue, the memory) against torch")
    args = p.parse_args(argv)
    # The directory is made (and checked) before the run: it was made after it, so a --out that
    # could not be written lost a whole run to a FileNotFoundError traceback at the end.
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        if not os.access(args.out, os.W_OK | os.X_OK):
            raise PermissionError(f"[Errno 13] Permission denied: {args.out!r}")
    except OSError as e:
        p.error(f"--out {args.out}: cannot write the results there ({e})")
    if args.device is not None:
        if not str(args.device).startswith("cuda:"):
            p.error(f"--device takes cuda:N (an NVIDIA GPU); the CPU benchmark runs without it; got {args.device!r}")
        if args.device not in coopjit.devices():
            p.error(f"{args.device} is not here (devices: {', '.join(coopjit.devices())})")
        from . import _bench_cuda

        res = _bench_cuda.run(args.device, args.quick, args.out)
        print(_bench_cuda.format_table(res))
        for kind, path in res.get("files", {}).items():
            print(f"{kind}: {path}")
        return
    cfg = for_machine(QUICK if args.quick else FULL)
    if args.only:
        cfg = dataclasses.replace(cfg, sections=tuple(args.only))
    result = run(cfg, args.out, "coopjit-bench-quick" if args.quick else "coopjit-bench")
    print(report.format_table(result))
    for kind, path in result.get("files", {}).items():
        print(f"{kind}: {path}")


if __name__ == "__main__":
    main()
