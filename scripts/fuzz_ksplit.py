"""Differential fuzz of the K split of a whole block of C (plan field ksplit, session 26) and the
long-K sums (session 26's accuracy change) against NumPy in float64 (session 27's audit).

Each case draws a product through gemm / matmul / matmul with a fused epilogue / a prepacked B, of
one dtype pair (float32, float64, bfloat16 with bf16 or float32 C, int8, uint8 x int8, float16),
a plan naming ksplit (2-17 parts, threads 1-17, kt, order, pack, split, mr / nr) or none, alpha /
beta (0, 1, -2, 0.5, inf, -inf, nan, 1e38), C as a view of a guarded buffer (contiguous, strided,
negative strides, transposed) and operands as views (transposed, strided, reversed). Checked: the
result against alpha * (A @ B) + beta * C in float64 (then the epilogue); where the float64
reference is not finite, NaN where it is NaN and the same infinity where it is one -- except the
known gap: operands of 1e30 whose float32 partial sums overflow where the float64 sum does not,
counted as "nonfinite_gap" and not failed (an infinite alpha is applied once since session 27, a
large finite one since session 28: both checked); the
guarded buffer's bytes outside C; every input's bytes; a refusal must be a ValueError / TypeError.

    python scripts/fuzz_ksplit.py --seed 1 --cases 300
"""
from __future__ import annotations

import os
import sys
import traceback

import ml_dtypes
import numpy as np

import coopjit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzz_common  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
F32, F64, F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)
I8, U8, I32 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)
# (a dtype, b dtype, c dtype)
PAIRS = [(F32, F32, F32), (F32, F32, F32), (F64, F64, F64), (BF16, BF16, BF16), (BF16, BF16, F32),
         (I8, I8, I32), (U8, I8, I32), (F16, F16, F16)]
ENTRIES = ("gemm", "gemm", "matmul", "fused", "prepacked")
SCALARS = (1.0, 1.0, 0.5, -2.0, 0.0, np.inf, -np.inf, np.nan, 1e38)
C_LAYOUTS = ("c", "c", "strided", "rev", "t", "rev_rows")
OP_LAYOUTS = ("c", "c", "t", "strided", "rev")


def draw(rng):
    c = {"pair": int(rng.integers(len(PAIRS))), "entry": str(rng.choice(ENTRIES))}
    c["m"] = int(rng.choice([0, 1, 1, 2, 3, 7, 13, 33, 64, 70]))
    c["n"] = int(rng.choice([0, 1, 2, 5, 17, 33, 64, 100]))
    c["k"] = int(rng.choice([0, 1, 7, 64, 300, 1000, 2049, 2053, 4100, 9000]))
    plan = {}
    if rng.random() < 0.9:
        plan["ksplit"] = int(rng.choice([2, 3, 4, 5, 16, 17]))
    if rng.random() < 0.9:
        plan["threads"] = int(rng.integers(1, 18))
    if rng.random() < 0.5:
        plan["kt"] = int(rng.choice([8, 16, 32, 64, 256]))
    if rng.random() < 0.6:
        plan["order"] = str(rng.choice(["k_outer", "k_outer", "k_outer", "m_inner", "dot"]))
    if rng.random() < 0.3:
        plan["pack"] = int(rng.integers(0, 2))
    if rng.random() < 0.15:
        plan["split"] = str(rng.choice(["dp", "sk", "sk+dp"]))
    if rng.random() < 0.1:
        plan["mr"] = int(rng.choice([1, 2, 4, 6, 8]))
    c["plan"] = plan
    c["alpha"] = float(rng.choice(SCALARS)) if rng.random() < 0.6 else 1.0
    c["beta"] = float(rng.choice(SCALARS)) if rng.random() < 0.6 else 0.0
    c["c_lay"] = str(rng.choice(C_LAYOUTS))
    c["a_lay"], c["b_lay"] = str(rng.choice(OP_LAYOUTS)), str(rng.choice(OP_LAYOUTS))
    c["bias"] = rng.random() < 0.6
    c["act"] = str(rng.choice(["none", "relu", "gelu", "sigmoid"]))
    c["residual"] = rng.random() < 0.4
    c["big"] = rng.random() < 0.1  # values of 1e30 (partial sums overflow in f32)
    c["seed"] = int(rng.integers(2**31))
    return c


def describe(c):
    ad, bd, cd = PAIRS[c["pair"]]
    ep = f" bias {c['bias']:d} act {c['act']} res {c['residual']:d}" if c["entry"] == "fused" else ""
    return (f"{c['entry']} {ad}x{bd}->{cd} {c['m']}x{c['n']}x{c['k']} plan {c['plan']} alpha {c['alpha']} "
            f"beta {c['beta']} c {c['c_lay']} a {c['a_lay']} b {c['b_lay']}{ep} big {c['big']:d} seed {c['seed']}")


def values(rng, shape, dt, big):
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -128, 128, size=shape).astype(dt)
    v = rng.uniform(-1, 1, size=shape)
    if big and dt != F16:
        v = v * (1e30 if dt != F64 else 1e300)
    return v.astype(dt)


def lay_out(x, kind):
    """A view holding x's values, laid out as `kind` (its own buffer)."""
    if kind == "t":
        return np.array(x.T).T
    if kind == "strided":
        big = np.zeros((2 * x.shape[0] + 1, 3 * x.shape[1] + 1), x.dtype)
        y = big[1::2, 1::3][: x.shape[0], : x.shape[1]]
        y[...] = x
        return y
    if kind == "rev":
        return np.array(x[::-1, ::-1])[::-1, ::-1]
    return np.array(x)


def guarded_c(rng, shape, dt, kind):
    """(the guarded buffer, C: a view of it laid out as `kind`)."""
    m, n = shape
    side = 2 * max(m, n) + 3
    buf = values(rng, (side, side), dt, False)
    if kind == "strided":
        return buf, buf[1 : 1 + 2 * m : 2, 2 : 2 + 2 * n : 2]
    if kind == "rev":
        return buf, buf[1 : 1 + m, 1 : 1 + n][::-1, ::-1]
    if kind == "t":
        return buf, buf[1 : 1 + n, 1 : 1 + m].T
    if kind == "rev_rows":
        return buf, buf[1 : 1 + m, 1 : 1 + n][::-1]
    return buf, buf[1 : 1 + m, 1 : 1 + n]


def _f64(x):
    return np.asarray(x).astype(np.float64)


def _act(name, x):
    with np.errstate(all="ignore"):
        if name == "relu":
            return np.where(np.isnan(x), x, np.maximum(x, 0.0))
        if name == "gelu":
            from scipy.special import erf

            return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))
        if name == "sigmoid":
            return 1.0 / (1.0 + np.exp(-x))
    return x


def run_case(c, stats):
    rng = np.random.default_rng(c["seed"])
    ad, bd, cd = PAIRS[c["pair"]]
    m, n, k = c["m"], c["n"], c["k"]
    A = values(rng, (m, k), ad, c["big"])
    B = values(rng, (k, n), bd, c["big"])
    a, b = lay_out(A, c["a_lay"]), lay_out(B, c["b_lay"])
    a0, b0 = a.copy(), b.copy()
    alpha, beta = c["alpha"], c["beta"]
    integer = cd == I32
    entry = c["entry"]
    if integer and entry != "fused":
        alpha = 1.0 if not np.isfinite(alpha) or abs(alpha) > 1e9 else float(int(alpha))
        beta = 0.0 if not np.isfinite(beta) or abs(beta) > 1e9 else float(int(beta))
    if entry == "prepacked" and c["b_lay"] != "c":
        b = np.array(B)
    if entry == "fused" and integer:
        cd, integer = F32, False  # (a fused int8 product writes floats)
    buf, cv = guarded_c(rng, (m, n), cd, c["c_lay"])
    buf0 = buf.copy()
    c_before = _f64(cv).copy()
    kw = {}
    if entry == "fused":
        if c["bias"]:
            kw["bias"] = rng.uniform(-1, 1, n).astype(np.float32)
        if c["act"] != "none":
            kw["activation"] = c["act"]
        if c["residual"]:
            kw["residual"] = rng.uniform(-1, 1, (m, n)).astype(np.float32)
        if not kw:
            kw["bias"] = rng.uniform(-1, 1, n).astype(np.float32)
    kw0 = {name: v.copy() for name, v in kw.items() if isinstance(v, np.ndarray)}
    plan = dict(c["plan"])
    plan0 = dict(plan)
    try:
        with np.errstate(all="ignore"):
            if entry == "matmul":
                got = coopjit.matmul(a, b, out=cv, plan=plan)
                alpha, beta = 1.0, 0.0
            elif entry == "prepacked":
                pb = coopjit.prepack(b, plan=plan)
                got = coopjit.gemm(a, pb, cv, alpha=alpha, beta=beta, plan=plan)
            else:
                got = coopjit.gemm(a, b, cv, alpha=alpha, beta=beta, plan=plan, **kw)
    except (ValueError, TypeError) as e:
        stats["refused"] += 1
        stats.setdefault("refusals", {}).setdefault(str(e)[:90], 0)
        stats["refusals"][str(e)[:90]] += 1
        if not np.array_equal(buf.view(np.uint8), buf0.view(np.uint8)):
            return "refused but wrote into C's buffer"
        return None
    except Exception:
        return "raised " + traceback.format_exc(limit=3).strip().splitlines()[-1]
    stats["ran"] += 1
    if got is not cv and not np.shares_memory(got, cv):
        return "the result is not C"
    if not (np.array_equal(_bytes(a), _bytes(a0)) and np.array_equal(_bytes(b), _bytes(b0))):
        return "an input changed"
    if plan != plan0 or any(not np.array_equal(_bytes(kw[name]), _bytes(v)) for name, v in kw0.items()):
        return "the plan or an epilogue operand changed"
    inside = np.zeros(buf.shape, bool)
    if cv.size:
        tag = np.zeros(buf.shape, np.int8)
        # mark C's elements through the same view of a buffer of the same shape
        tv = np.lib.stride_tricks.as_strided(tag.ravel()[_offset(buf, cv):], cv.shape,
                                             tuple(s // buf.itemsize for s in cv.strides))
        tv[...] = 1
        inside = tag.astype(bool)
    if not np.array_equal(buf[~inside].view(np.uint8), buf0[~inside].view(np.uint8)):
        return "wrote outside C"
    with np.errstate(all="ignore"):
        prod = _f64(A) @ _f64(B)
        ref = alpha * prod
        if beta != 0.0:
            ref = ref + beta * c_before
        if entry == "fused":
            if "bias" in kw:
                ref = ref + kw["bias"]
            ref = _act(c["act"], ref)
            if "residual" in kw:
                ref = ref + kw["residual"]
    out = _f64(cv)
    if integer:
        want = (ref.astype(np.int64) if ref.size else ref).astype(np.int64)
        want = ((want + 2**31) % 2**32 - 2**31)
        if not np.array_equal(out.astype(np.int64), want):
            return f"int mismatch: max diff {np.abs(out - want).max()}"
        return None
    with np.errstate(all="ignore"):
        ref_c = ref.astype(cd).astype(np.float64)  # the output's own rounding (overflow to inf)
    fin = np.isfinite(ref_c)
    if not np.array_equal(np.isnan(out[~fin]), np.isnan(ref_c[~fin])) or not np.array_equal(
            out[~fin & ~np.isnan(ref_c)], ref_c[~fin & ~np.isnan(ref_c)]):
        gap = c["big"] or abs(beta) >= 1e30
        if gap:
            stats["nonfinite_gap"] = stats.get("nonfinite_gap", 0) + 1
        else:
            return f"non-finite pattern differs: got {out[~fin][:4]} want {ref_c[~fin][:4]}"
    if fin.any():
        eps = {F32: 2.0**-23, F64: 2.0**-52, BF16: 2.0**-8, F16: 2.0**-10}[cd]
        if ad in (BF16, F16) or cd in (BF16, F16):
            eps = max(eps, 2.0**-23)
        scale = np.abs(alpha) * (np.abs(_f64(A)) @ np.abs(_f64(B))) + abs(beta) * np.abs(c_before) + 1e-300
        if entry == "fused":
            scale = scale + np.abs(kw.get("residual", 0)) + np.abs(kw.get("bias", 0)) + 1.0
        tol = (4 * eps if cd in (BF16, F16) else 0) + (np.sqrt(max(k, 1)) * 8 + 16) * (2.0**-23 if cd != F64 else 2.0**-52)
        with np.errstate(all="ignore"):
            err = np.abs(out - ref)[fin] / scale[fin]
        err = np.where(np.isfinite(scale[fin]), err, 0)
        bad = ~(err <= tol)
        if bad.any() and c["big"]:
            stats["nonfinite_gap"] = stats.get("nonfinite_gap", 0) + 1  # (f32 partial sums overflow)
        elif bad.any():
            return f"max error {float(np.nanmax(np.where(bad, err, 0))):.3g} > {tol:.3g} (over scale)"
    return None


def _offset(buf, v):
    return (v.__array_interface__["data"][0] - buf.__array_interface__["data"][0]) // buf.itemsize


def _bytes(x):
    return np.ascontiguousarray(x).view(np.uint8)


def report(stats):
    for msg, cnt in sorted(stats.get("refusals", {}).items(), key=lambda t: -t[1])[:25]:
        print(f"  refused x{cnt}: {msg}")
    print(f"  nonfinite_gap {stats.get('nonfinite_gap', 0)}")


if __name__ == "__main__":
    sys.exit(fuzz_common.main(__doc__, draw, run_case, describe, report=report))
