"""Differential fuzz of fused GEMM epilogues (session 24's audit) against NumPy in float64.

Each case draws a product (matmul, gemm with alpha / beta / transposes, a compiled kernel given
its operands at the call, matmul with a prepacked b) of one dtype pair (float32, float64,
float16, bfloat16, float8_e4m3fn, int8 and uint8 x int8 with scales: W8A8), the epilogue's steps
(scale, row_scale, bias per column or per row or a number, each activation, a residual that
broadcasts, out_dtype), operands laid out as views (C or Fortran order, steps, reversed, a byte
offset, big-endian, torch tensors), NaN / inf in a now and then, and the output (new; a view of a
guarded buffer, contiguous or strided or reversed; Fortran order; big-endian; np.matrix; a torch
tensor; a view overlapping a's buffer; a bias that is a row of the output). Checked: the result
against the documented order computed in float64 (tolerance from K, the compute and output types;
NaN where NumPy has NaN, infinities equal), the guarded buffer's bytes outside the output, every
input's bytes; a refusal must be a ValueError / TypeError.

    python scripts/fuzz_epilogues.py --seed 1 --cases 300
"""
from __future__ import annotations

import math
import os
import sys
import traceback

import ml_dtypes
import numpy as np

import coopjit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzz_common  # noqa: E402 (the sweep and report the fuzz scripts share)
from fuzz_reductions import _outside_changed  # noqa: E402 (the guarded buffer's bytes outside a view)

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
# (a dtype, b dtype, compute dtype)
PAIRS = [(np.dtype(np.float32),) * 2 + (np.float32,), (np.dtype(np.float64),) * 2 + (np.float64,),
         (np.dtype(np.float16),) * 2 + (np.float32,), (BF16, BF16, np.float32), (E4M3, E4M3, np.float32),
         (np.dtype(np.int8), np.dtype(np.int8), np.float32), (np.dtype(np.uint8), np.dtype(np.int8), np.float32)]
ACTS = [None, None, "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"]
_erf = np.frompyfunc(math.erf, 1, 1)
ACT = {
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64)),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
}
ENTRIES = ("matmul", "matmul", "gemm", "gemm", "kernel", "prepacked")
LAYOUTS = ("c", "c", "c", "f", "step", "rev", "offset", "bigendian", "torch")
OUTS = ("new", "new", "guarded", "strided", "f", "rev", "bigendian", "matrix", "torch", "overlap_a", "bias_in_out")


def values(rng, shape, dt):
    if dt.kind in "iu":
        lo = 0 if dt.kind == "u" else -128
        return rng.integers(lo, 128, size=shape).astype(dt)
    return (rng.integers(-8, 9, size=shape) / 4).astype(dt)  # exact in every float type here


def lay_out(rng, x, kind):
    """(a view of x's values laid out as `kind`, the object to pass)."""
    if kind == "f":
        y = np.asfortranarray(x)
    elif kind == "step" and x.ndim:
        big = np.zeros(tuple(2 * s + 1 for s in x.shape), x.dtype)
        y = big[tuple(slice(1, 1 + 2 * s, 2) for s in x.shape)]
        y[...] = x
    elif kind == "rev" and x.ndim:
        y = np.array(x[::-1])[::-1]
    elif kind == "offset" and x.dtype.itemsize > 1:
        raw = np.zeros(x.nbytes + 1, np.uint8)
        y = raw[1:].view(x.dtype).reshape(x.shape)
        y[...] = x
    elif kind == "bigendian" and x.dtype.itemsize > 1 and x.dtype.kind == "f":
        y = x.astype(x.dtype.newbyteorder(">"))
    elif kind == "torch" and x.dtype.kind in "fiu" and x.dtype != np.float16:
        import torch

        return x, torch.from_numpy(np.array(x))
    else:
        y = np.array(x)
    return y, y


def draw(rng):
    c = {}
    c["pair"] = int(rng.integers(len(PAIRS)))
    ad, bd, _ = PAIRS[c["pair"]]
    c["entry"] = str(rng.choice(ENTRIES))
    dims = [int(rng.choice([0, 1, 1, 2, 3, 5, 8, 13, 17, 31, 40, 64])) if rng.random() < 0.95 else 0 for _ in range(3)]
    c["m"], c["n"], c["k"] = [d or 1 if rng.random() < 0.8 else d for d in dims]
    c["trans_a"] = c["entry"] in ("gemm", "kernel") and rng.random() < 0.3
    c["trans_b"] = c["entry"] in ("gemm", "kernel") and rng.random() < 0.3
    c["a_lay"], c["b_lay"] = str(rng.choice(LAYOUTS)), str(rng.choice(LAYOUTS))
    int8 = ad.kind in "iu"
    c["scale"] = rng.random() < (0.8 if int8 else 0.3)
    c["row_scale"] = rng.random() < 0.3
    c["bias"] = str(rng.choice(["none", "none", "col", "row", "number"]))
    c["activation"] = ACTS[int(rng.integers(len(ACTS)))]
    c["residual"] = str(rng.choice(["none", "none", "full", "row", "col", "number"]))
    c["out_dtype"] = None if rng.random() < 0.6 else str(rng.choice(["float32", "bfloat16", "float16"]))
    if ad == np.float64:
        c["out_dtype"] = None
    c["alpha"] = float(rng.choice([1.0, 1.0, 2.0, -0.5, 4096.0])) if c["entry"] in ("gemm", "kernel") else 1.0
    c["beta"] = float(rng.choice([0.0, 0.5])) if c["entry"] == "gemm" and not int8 else 0.0
    c["out"] = str(rng.choice(OUTS))
    c["nan"] = ad.kind == "f" and rng.random() < 0.15
    if not (c["scale"] or c["row_scale"] or c["bias"] != "none" or c["activation"] or c["residual"] != "none"):
        c["bias"] = "col"
    c["seed"] = int(rng.integers(2**31))
    return c


def describe(c):
    ad, bd, _ = PAIRS[c["pair"]]
    steps = [s for s in ("scale", "row_scale") if c[s]] + ([f"bias {c['bias']}"] if c["bias"] != "none" else []) + (
        [c["activation"]] if c["activation"] else []) + ([f"residual {c['residual']}"] if c["residual"] != "none" else [])
    return (f"{c['entry']} {ad}x{bd} {c['m']}x{c['n']}x{c['k']} trans {c['trans_a']:d}{c['trans_b']:d} a {c['a_lay']} "
            f"b {c['b_lay']} [{', '.join(steps)}] out_dtype {c['out_dtype']} alpha {c['alpha']} beta {c['beta']} "
            f"out {c['out']} nan {c['nan']:d} seed {c['seed']}")


def _values_of(x):
    """An output's values in float64 (NumPy arrays and subclasses, torch tensors)."""
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        x = (x.float() if str(x.dtype) == "torch.bfloat16" else x).numpy()
    return np.asarray(x).astype(np.float64)


def _np_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


def run_case(c, stats):
    """None, or what is wrong."""
    rng = np.random.default_rng(c["seed"])
    ad, bd, compute = PAIRS[c["pair"]]
    m, n, k = c["m"], c["n"], c["k"]
    A = values(rng, (m, k), ad)
    B = values(rng, (k, n), bd)
    if c["nan"] and A.size:
        for v in (np.nan, np.inf, -np.inf):
            if rng.random() < 0.6 and not (v != v and ad == E4M3) and not (abs(v) == np.inf and ad == E4M3):
                A.flat[int(rng.integers(A.size))] = v
    opA = A.T.copy() if c["trans_a"] else A  # what is passed (gemm's op(a) = a.T)
    opB = B.T.copy() if c["trans_b"] else B
    a_val, a_obj = lay_out(rng, opA, c["a_lay"])
    b_val, b_obj = lay_out(rng, opB, c["b_lay"])
    kw = {}
    scale = (rng.integers(1, 9, n) / 4).astype(np.float32) if c["scale"] else None
    row_scale = (rng.integers(1, 9, m) / 4).astype(np.float32) if c["row_scale"] else None
    bias = {"none": None, "col": (rng.integers(-8, 9, n) / 4).astype(np.float32),
            "row": (rng.integers(-8, 9, m) / 4).astype(np.float32), "number": 0.75}[c["bias"]]
    residual = {"none": None, "full": (rng.integers(-8, 9, (m, n)) / 4).astype(np.float32),
                "row": (rng.integers(-8, 9, n) / 4).astype(np.float64), "col": (rng.integers(-8, 9, (m, 1)) / 4),
                "number": -1.25}[c["residual"]]
    if ad == np.float64:
        scale, row_scale = [None if v is None else v.astype(np.float64) for v in (scale, row_scale)]
    for name, v in (("scale", scale), ("row_scale", row_scale), ("bias", bias), ("residual", residual)):
        if v is not None:
            kw[name] = v
    if c["bias"] == "row":
        kw["bias_axis"] = 0
    if c["activation"]:
        kw["activation"] = c["activation"]
    out_dt = _np_dtype(c["out_dtype"]) if c["out_dtype"] else (np.dtype(np.float32) if ad.kind in "iu" or ad == E4M3
                                                                else ad)
    c0 = (rng.integers(-8, 9, (m, n)) / 4).astype(out_dt)
    # the output
    out = guard = before = None
    form = c["out"]
    if c["entry"] == "kernel" or (c["entry"] == "prepacked" and form in ("matrix", "torch")):
        form = "new" if form in ("overlap_a", "bias_in_out", "matrix", "torch") else form
    if c["beta"] and form == "new":
        form = "guarded"
    if form in ("guarded", "strided", "rev"):
        step = 2 if form == "strided" else 1
        guard = np.zeros((m * step + 2) * (n * step + 2) + 8, out_dt)
        guard.view(np.uint8)[...] = rng.integers(0, 256, guard.nbytes, dtype=np.uint8)
        body = guard[3:3 + (m * step + 2) * (n * step + 2)].reshape(m * step + 2, n * step + 2)
        out = body[1:1 + m * step:step, 1:1 + n * step:step]
        if form == "rev":
            out = out[::-1, ::-1]
        out[...] = c0
        before = guard.view(np.uint8).copy()
    elif form == "f":
        out = np.asfortranarray(c0)
    elif form == "bigendian" and out_dt.itemsize > 1 and out_dt != BF16:
        out = c0.astype(out_dt.newbyteorder(">"))
    elif form == "matrix":
        out = np.matrix(c0)
    elif form == "torch" and out_dt != np.float16:
        import torch

        out = torch.from_numpy(c0.astype(np.float32)).to(getattr(torch, str(out_dt))) if out_dt == BF16 else \
            torch.from_numpy(c0.copy())
    elif form == "overlap_a" and a_obj is a_val and isinstance(a_val, np.ndarray) and a_val.dtype == out_dt \
            and a_val.flags.c_contiguous and a_val.size and m * n:
        buf = np.zeros(a_val.size + m * n, out_dt)
        buf[:a_val.size] = a_val.reshape(-1)
        a_obj = a_val = buf[:a_val.size].reshape(a_val.shape)
        start = a_val.size // 2
        out = buf[start:start + m * n].reshape(m, n)
    elif form == "bias_in_out" and c["bias"] == "col" and m and n and bias is not None:
        out = np.zeros((m, n), out_dt)
        out[0] = bias.astype(out_dt)
        if out_dt == np.dtype(np.float32):
            kw["bias"] = out[0]  # the bias is a row of the output itself
    elif c["beta"]:
        out = np.array(c0)
    alpha = c["alpha"]
    if c["entry"] == "kernel" and ad.kind in "iu" and not (c["scale"] or c["row_scale"]) and \
            abs(alpha) * k * 128 * 255 >= 2**31:
        alpha = 1.0  # (a kernel without a scale refuses an alpha that could wrap: a test names it)
    # the reference: the documented order in float64
    with np.errstate(all="ignore"):
        y = alpha * (A.astype(np.float64) @ B.astype(np.float64)) if k else np.zeros((m, n))
    if scale is not None:
        y = y * scale.astype(np.float64)
    if row_scale is not None:
        y = y * row_scale.astype(np.float64)[:, None]
    if c["beta"]:  # gemm reads c: what the output holds before the call
        y = y + c["beta"] * _values_of(out)
    if bias is not None:
        bv = np.asarray(bias, np.float64)
        y = y + (bv[:, None] if c["bias"] == "row" else bv)
    with np.errstate(all="ignore"):
        if c["activation"]:
            y = ACT[c["activation"]](y)
        if residual is not None:
            y = y + np.asarray(residual, np.float64)
    with np.errstate(all="ignore"):
        if out_dt.itemsize < 4:  # (the output type's range: float16 overflows to inf from 65520)
            y = y.astype(out_dt).astype(np.float64) if out_dt != BF16 else y
        mag = np.abs(np.nan_to_num(A.astype(np.float64))) @ np.abs(np.nan_to_num(B.astype(np.float64))) * abs(alpha)
        for v, ax in ((scale, 1), (row_scale, 0)):
            if v is not None:
                mag = mag * (np.abs(v.astype(np.float64)) if ax else np.abs(v.astype(np.float64))[:, None])
        eps = np.finfo(compute).eps
        out_eps = float(ml_dtypes.finfo(out_dt).eps) if out_dt == BF16 else float(np.finfo(out_dt).eps)
        bound = 2.0 * (k + 4) * eps * mag + 64 * eps * (np.abs(np.nan_to_num(y)) + 1.0) + out_eps * np.abs(np.nan_to_num(y))

    out_np = out if isinstance(out, np.ndarray) else None  # (torch outputs share nothing with the inputs)
    inputs = [x for x in (a_obj, b_obj, scale, row_scale, residual, kw.get("bias"))
              if isinstance(x, np.ndarray) and (out_np is None or not np.shares_memory(x, out_np))]
    snap = [(x, np.array(x, copy=True)) for x in inputs]
    if c["out_dtype"] and out is None:
        kw["out_dtype"] = out_dt
    try:
        if c["entry"] == "matmul":
            got = coopjit.matmul(a_obj, b_obj, out=out, **kw)
        elif c["entry"] == "prepacked":
            got = coopjit.matmul(a_obj, coopjit.prepack(b_obj) if bd == ad else b_obj, out=out, **kw)
        elif c["entry"] == "gemm":
            got = coopjit.gemm(a_obj, b_obj, out, alpha=alpha, beta=c["beta"], trans_a=c["trans_a"],
                               trans_b=c["trans_b"], **kw)
        else:
            if ad != bd:
                stats["refused"] += 1
                return None
            steps = {name: True for name in ("scale", "row_scale", "bias", "residual") if name in kw}
            kern = coopjit.compile_gemm(m, n, k, ad, trans_a=c["trans_a"], trans_b=c["trans_b"],
                                        bias_axis=kw.get("bias_axis", 1), activation=kw.get("activation"),
                                        out_dtype=kw.get("out_dtype", out_dt if c["out_dtype"] else None), **steps)
            got = kern(a_obj, b_obj, out, alpha=alpha, **{s: kw[s] for s in steps})
    except (ValueError, TypeError) as e:
        stats["refused"] += 1
        stats.setdefault("reasons", {}).setdefault(str(e)[:90], 0)
        stats["reasons"][str(e)[:90]] += 1
        return None
    except Exception:  # noqa: BLE001 - a crash of another kind is a failure
        return "raised " + traceback.format_exc(limit=3)
    stats["ran"] += 1
    if out is not None and got is not out:
        return f"returned {type(got).__name__}, not the out object"
    res = _values_of(got)
    if res.shape != y.shape:
        return f"shape {res.shape}, want {y.shape}"
    nan_want, nan_got = np.isnan(y), np.isnan(res)
    if not np.array_equal(nan_want, nan_got):
        return f"NaN at {np.argwhere(nan_want != nan_got)[0]}: got {res[nan_want != nan_got][0]}, want {y[nan_want != nan_got][0]}"
    inf = np.isinf(y)
    if not np.array_equal(res[inf], y[inf]):
        return f"infinities differ at {np.argwhere(inf & (res != y))[0]}"
    fin = ~nan_want & ~inf
    err = np.abs(res - y)
    if fin.any() and not np.all(err[fin] <= bound[fin]):
        i = np.argwhere(fin & ~(err <= bound))[0]
        return f"off by {err[tuple(i)]:.3g} (bound {bound[tuple(i)]:.3g}) at {tuple(i)}: got {res[tuple(i)]}, want {y[tuple(i)]}"
    if guard is not None and _outside_changed(out, guard, before):
        return "bytes outside out changed"
    for x, s in snap:
        if not np.array_equal(x.view(np.uint8) if x.dtype.itemsize == 1 else x, s, equal_nan=True) if x.dtype.kind == "f" \
                else not np.array_equal(x, s):
            return f"an input ({x.dtype} {x.shape}) was modified"
    return None


def report(stats):
    for reason, count in sorted(stats.get("reasons", {}).items(), key=lambda t: -t[1])[:15]:
        print(f"refused x{count}: {reason}")


def main(argv=None):
    return fuzz_common.main(__doc__, draw, run_case, describe, argv, report=report)


if __name__ == "__main__":
    sys.exit(main())
