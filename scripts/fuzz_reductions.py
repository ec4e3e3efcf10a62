"""Differential fuzz of coopjit.reduce and coopjit.reduce2x2 (session 23's audit) against NumPy.

Each case draws an array (0-4 dims, sizes around the kernels' tiles and the few-long-rows splits,
every dtype reduce takes), lays it out as one of many views (C / Fortran order, transposes, steps,
negative strides, zero strides, a byte offset into a buffer, big-endian, read-only, a bool array of
bytes other than 0 / 1), puts NaN / inf / integer extremes in it, and draws an axis (None, an int,
a negative int, a tuple in any order, ()), an op (sum, prod, min, max) and an out= (None; a
contiguous, strided or big-endian view inside a guarded buffer; out aliasing the input). Checked:
  - the result's dtype and shape are numpy.sum / numpy.min's (integer and bool sums int64 /
    uint64; float16 / bfloat16 / float32 kept);
  - integer results exactly NumPy's (int64 / uint64 wrap-around: the sums and products are exact
    modulo 2^64 whatever the order); min / max exactly NumPy's (NaN where NumPy has NaN);
  - float sums and products within a bound from float64: the accumulator's epsilon times the
    length times the sum of magnitudes (products: relative), plus the output's rounding;
  - bytes of the guarded buffer outside out's elements unchanged, the input's bytes unchanged;
  - a refusal is a ValueError / TypeError (AxisError is a ValueError); anything else fails.

    python scripts/fuzz_reductions.py --seed 1 --cases 400

Exit status 1 when anything failed.
"""
from __future__ import annotations

import os
import sys
import traceback

import ml_dtypes
import numpy as np

import coopjit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzz_common  # noqa: E402 (the sweep and report the fuzz scripts share)

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
                                np.float16, np.float32, np.float64, np.bool_)] + [BF16]
SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 64, 65, 127, 129, 300]
OPS = ("sum", "prod", "min", "max")
LAYOUTS = ("c", "f", "transpose", "step", "rev", "bcast", "offset", "bigendian", "readonly")


def draw_shape(rng):
    ndim = int(rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4]))
    if ndim == 0:
        return ()
    if ndim == 1 and rng.random() < 0.15:  # one long row: the split paths (4 * workers pieces of 4096+)
        return (int(rng.choice([4096, 4099, 40000, 70001, 140003])),)
    if ndim == 2 and rng.random() < 0.15:  # few long rows / many short rows
        return tuple(int(v) for v in rng.permutation([int(rng.choice([1, 2, 3, 5])),
                                                      int(rng.choice([5000, 9000, 33000]))]))
    if ndim == 2 and rng.random() < 0.1:
        return (int(rng.choice([4096, 5000])), int(rng.choice([2, 3, 5, 7, 16, 33])))
    total = 1
    shape = []
    for _ in range(ndim):
        s = int(rng.choice(SIZES))
        if total * max(s, 1) > 60000:
            s = int(rng.choice([0, 1, 2, 3]))
        total *= max(s, 1)
        shape.append(s)
    return tuple(shape)


def values(rng, shape, dt, op):
    if dt == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if op == "prod" and rng.random() < 0.7:
            x = rng.integers(max(info.min, -2), min(info.max, 3), size=shape, endpoint=True)
        elif rng.random() < 0.3:  # extremes: wrap-around of the int64 sums of int64 / uint64
            x = rng.choice(np.array([info.min, info.max, info.min + 1, info.max - 1, 0, 1], dtype=dt), size=shape)
        else:
            x = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)
        return np.asarray(x).astype(dt)
    if op == "prod":
        x = rng.uniform(0.97, 1.03, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    else:
        x = rng.standard_normal(shape) * float(rng.choice([1.0, 1e3, 1e-3]))
    x = np.asarray(x)
    if x.size and rng.random() < 0.25:  # NaN / inf / -inf in a few places
        flat = x.reshape(-1)
        for _ in range(int(rng.integers(1, 4))):
            flat[int(rng.integers(0, flat.size))] = rng.choice([np.nan, np.inf, -np.inf])
    return x.astype(dt)


def lay_out(rng, x, kind):
    """(array passed, [(buffer, snapshot)] of every buffer the call must leave unchanged)."""
    if kind == "f" and x.ndim >= 2:
        y = np.asfortranarray(x)
    elif kind == "transpose" and x.ndim >= 2:
        perm = rng.permutation(x.ndim)
        y = np.ascontiguousarray(x.transpose(np.argsort(perm))).transpose(perm)
    elif kind == "step" and x.ndim >= 1:
        steps = [int(rng.integers(1, 4)) for _ in range(x.ndim)]
        big = np.zeros(tuple(max(s, 0) * st + 1 for s, st in zip(x.shape, steps)), x.dtype)
        y = big[tuple(slice(1, None if s == 0 else 1 + s * st, st) for s, st in zip(x.shape, steps))][
            tuple(slice(0, s) for s in x.shape)]
        y[...] = x
        return y, [(big, big.copy())]
    elif kind == "rev" and x.ndim >= 1:
        flips = tuple(slice(None, None, -1) if rng.random() < 0.6 else slice(None) for _ in range(x.ndim))
        base = np.ascontiguousarray(x[flips])
        return base[flips], [(base, base.copy())]
    elif kind == "bcast" and x.ndim >= 1 and x.size:
        d = int(rng.integers(0, x.ndim))
        row = np.ascontiguousarray(np.take(x, [0], axis=d))
        return np.broadcast_to(row, x.shape), [(row, row.copy())]
    elif kind == "offset" and x.ndim >= 1 and x.dtype.itemsize > 1:
        raw = np.zeros(x.nbytes + 1, np.uint8)
        y = raw[1:].view(x.dtype).reshape(x.shape)
        y[...] = x
        return y, [(raw, raw.copy())]
    elif kind == "bigendian" and x.dtype.itemsize > 1 and x.dtype != BF16:
        y = x.astype(x.dtype.newbyteorder(">"))
    elif kind == "readonly":
        y = x.copy()
        y.flags.writeable = False
    else:
        y = np.array(x)
    return y, [(y, y.copy())]


def draw_axis(rng, ndim):
    r = rng.random()
    if r < 0.2 or ndim == 0:
        return None if rng.random() < 0.9 else ()
    if r < 0.55:
        a = int(rng.integers(0, ndim))
        return a - ndim if rng.random() < 0.4 else a
    k = int(rng.integers(0, ndim + 1))
    axes = [int(a) - (ndim if rng.random() < 0.3 else 0) for a in rng.choice(ndim, size=k, replace=False)]
    return tuple(axes)


def expected(x, axis, op):
    """(dtype, float64 / exact reference, magnitude sum for the float tolerance) as NumPy has them."""
    fn = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}[op]
    dt = x.dtype.newbyteorder("=") if not x.dtype.isnative else x.dtype
    xn = np.asarray(x, dt)
    if dt.kind in "biu" and op in ("sum", "prod"):
        out_dt = np.dtype(np.uint64 if dt.kind == "u" else np.int64)
        return out_dt, fn(xn, axis=axis, dtype=out_dt), None
    if op in ("min", "max"):
        return dt, fn(xn, axis=axis), None
    x64 = xn.astype(np.float64)
    mag = np.sum(np.abs(x64), axis=axis) if op == "sum" else None
    return dt, fn(x64, axis=axis), mag


def guarded_out(rng, shape, dt, kind):
    """(out view, its buffer, the buffer's bytes before the call)."""
    if kind == "strided" and len(shape) >= 1:
        big = np.empty(tuple(2 * s + 3 for s in shape), dt)
        view = big[tuple(slice(1, 1 + 2 * s, 2) for s in shape)]
    elif kind == "bigendian" and dt.itemsize > 1 and dt != BF16:
        be = dt.newbyteorder(">")
        big = np.empty(int(np.prod(shape, dtype=np.int64)) + 4, be)
        view = big[2:2 + int(np.prod(shape, dtype=np.int64))].reshape(shape)
    else:
        big = np.empty(int(np.prod(shape, dtype=np.int64)) + 4, dt)
        view = big[2:2 + int(np.prod(shape, dtype=np.int64))].reshape(shape)
    big.reshape(-1).view(np.uint8)[...] = rng.integers(0, 256, size=big.nbytes, dtype=np.uint8)
    if dt == np.bool_:  # (a bool array's bytes must be 0 / 1 for its values to compare)
        big.reshape(-1).view(np.uint8)[...] &= 1
    return view, big, big.reshape(-1).view(np.uint8).copy()


def _outside_changed(view, big, before):
    mask = np.ones(big.nbytes, bool)
    start = view.__array_interface__["data"][0] - big.__array_interface__["data"][0]
    if view.size:
        offs = np.full(view.shape, start, np.int64)
        for d in range(view.ndim):
            shape = [1] * view.ndim
            shape[d] = view.shape[d]
            offs = offs + (np.arange(view.shape[d]) * view.strides[d]).reshape(shape)
        offs = offs.reshape(-1)
        for b in range(view.itemsize):
            mask[offs + b] = False
    return not np.array_equal(big.reshape(-1).view(np.uint8)[mask], before.reshape(-1)[mask])


def _same_bytes(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


def check(got, x, axis, op, desc):
    """None, or what is wrong with `got` (the call's result)."""
    dt, ref, mag = expected(x, axis, op)
    gdt = np.asarray(got).dtype
    if gdt.newbyteorder("=") != dt:
        return f"dtype {gdt}, NumPy's is {dt}"
    if np.shape(got) != np.shape(ref):
        return f"shape {np.shape(got)}, NumPy's is {np.shape(ref)}"
    g = np.asarray(got, dt)
    if dt.kind in "biu":
        if not np.array_equal(g, ref):
            bad = np.argwhere(np.asarray(g != ref).reshape(np.shape(g) or (1,)))[:3].tolist()
            return f"integer result differs from NumPy at {bad}"
        return None
    g64 = np.atleast_1d(g.astype(np.float64))
    r64 = np.atleast_1d(np.asarray(ref, np.float64))
    if not np.array_equal(np.isnan(g64), np.isnan(r64)):
        return "NaN where NumPy has none (or the reverse)"
    fin = ~np.isnan(r64)
    if op in ("min", "max"):
        return None if np.array_equal(g64[fin], r64[fin]) else "min / max differ from NumPy"
    inf = np.isinf(r64)
    if not np.array_equal(g64[inf], r64[inf]):
        return "inf differs"
    acc_eps = 2.0 ** -52 if dt == np.float64 else 2.0 ** -23
    out_eps = {np.dtype(np.float16): 2.0 ** -10, BF16: 2.0 ** -7}.get(dt, acc_eps)
    n = max(1, x.size // max(1, np.size(ref)))
    fin = fin & ~inf
    if op == "sum":
        tol = acc_eps * (n + 2) * np.atleast_1d(mag)[fin] + out_eps * np.abs(r64[fin]) + 1e-300
    else:
        tol = (acc_eps * (2 * n + 2) + out_eps) * np.abs(r64[fin]) + 1e-300
        if dt.kind == "f" and dt.itemsize < 4 or dt == BF16:  # the inputs' own rounding is in the reference
            tol = tol + out_eps * np.abs(r64[fin])
    if op == "prod":  # past the accumulator's or the output's range (0.97^4096): inf / 0 / subnormals, not checked
        fi = ml_dtypes.finfo(dt) if dt == BF16 else np.finfo(np.float32 if dt.itemsize < 8 else dt)
        fo = ml_dtypes.finfo(dt) if dt == BF16 else np.finfo(dt)
        lo, hi = max(float(fi.tiny), float(fo.tiny)) * 16, min(float(fi.max), float(fo.max)) / 16
        keep = (np.abs(r64[fin]) >= lo) & (np.abs(r64[fin]) <= hi) | (r64[fin] == 0)
        tol = tol[keep]
        fin[fin] = keep
    err = np.abs(g64[fin] - r64[fin])
    # overflow of the output type (float16 sums past 65504): NumPy gives inf too; skip those
    over = np.isinf(g64[fin])
    if not np.all((err <= tol) | over):
        return f"float result off by {err.max():.3g} (tolerance {tol.min():.3g})"
    return None


def draw(rng):
    shape = draw_shape(rng)
    dt = DTYPES[int(rng.integers(0, len(DTYPES)))]
    op = OPS[int(rng.integers(0, 4))]
    return {"shape": shape, "dtype": dt, "op": op, "layout": LAYOUTS[int(rng.integers(0, len(LAYOUTS)))],
            "axis": draw_axis(rng, len(shape)),
            "out": str(rng.choice(["none", "none", "contig", "strided", "bigendian", "alias"])),
            "seed": int(rng.integers(0, 2**31))}


def describe(c):
    return (f"{c['op']} {c['dtype']} {c['shape']} layout={c['layout']} axis={c['axis']} out={c['out']} "
            f"seed={c['seed']}")


def run_case(c, stats, device=None):
    """None, or what failed (device: reduce's device=, a NumPy array's reduction run there)."""
    rng = np.random.default_rng(c["seed"])
    x0 = values(rng, c["shape"], c["dtype"], c["op"])
    x, snaps = lay_out(rng, x0, c["layout"])
    if c["dtype"] == np.bool_ and x.size and x.flags.writeable and c["layout"] == "c" and rng.random() < 0.5:
        x.view(np.uint8)[...] *= 3  # bool bytes of 3: True, as NumPy reads them
        snaps = [(x, x.copy())]
    axis, op = c["axis"], c["op"]
    try:
        dt, ref, _ = expected(x, axis, op)
        ref_err = None
    except (ValueError, TypeError) as e:
        ref_err = e
    out = big = before = None
    kw = {}
    if ref_err is None and c["out"] != "none":
        if c["out"] == "alias" and np.ndim(ref) >= 1 and x.size and x.flags.writeable and x.dtype == dt and x.dtype.isnative:
            # out a view of the input's own memory (its first slice along the first kept dim)
            red = tuple(range(x.ndim)) if axis is None else np.lib.array_utils.normalize_axis_tuple(axis, x.ndim)
            kept = [d for d in range(x.ndim) if d not in red]
            idx = tuple(slice(None) if d in kept else 0 for d in range(x.ndim))
            out = x[idx]
            if out.shape != np.shape(ref):
                out = None
            else:
                snaps = [(b, s) for b, s in snaps if b is not x and not np.shares_memory(b, x)]
                kw["out"] = out
        elif c["out"] != "alias":
            out, big, before = guarded_out(rng, np.shape(ref), dt, c["out"])
            kw["out"] = out
    x_before = np.array(x, copy=True)
    if device is not None:
        kw["device"] = device
    try:
        got = coopjit.reduce(x, axis, op, **kw)
    except (ValueError, TypeError) as e:
        stats["refused"] += 1
        if ref_err is None:
            return f"refused ({type(e).__name__}: {e}) what NumPy computes"
        if not str(e):
            return f"refused with an empty message ({type(e).__name__})"
        return None
    except Exception as e:  # noqa: BLE001
        return f"raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
    if ref_err is not None:
        return f"computed {got!r} where NumPy raises {type(ref_err).__name__}: {ref_err}"
    stats["ran"] += 1
    if "out" in kw and got is not kw["out"]:
        return "did not return out"
    err = check(got, x_before, axis, op, describe(c))  # (the input as it was: out may lie inside it)
    if err:
        return err
    for buf, snap in snaps:
        if not _same_bytes(buf, snap):
            return "an input changed"
    if big is not None and _outside_changed(out, big, before):
        return "wrote outside out"
    return None


def run_2x2_case(rng, stats):
    rows, cols = (int(rng.choice([0, 2, 4, 6, 8, 34, 66])) for _ in range(2))
    dt = DTYPES[int(rng.integers(0, len(DTYPES)))]
    op = OPS[int(rng.integers(0, 4))]
    x0 = values(rng, (rows, cols), dt, op)
    x, snaps = lay_out(rng, x0, str(rng.choice(LAYOUTS)))
    xn = np.asarray(x, x.dtype.newbyteorder("="))
    blocks = xn.reshape(rows // 2, 2, cols // 2, 2).transpose(0, 2, 1, 3).reshape(rows // 2, cols // 2, 4)
    try:
        got = coopjit.reduce2x2(x, op)
    except (ValueError, TypeError) as e:
        return f"reduce2x2 {op} {dt} {x.shape}: refused ({e})"
    except Exception as e:  # noqa: BLE001
        return f"reduce2x2 raised {type(e).__name__}: {e}"
    stats["ran"] += 1
    err = check(got, blocks, 2, op, "2x2")
    for buf, snap in snaps:
        if not _same_bytes(buf, snap):
            return f"reduce2x2 {op} {dt} {x.shape}: an input changed"
    return f"reduce2x2 {op} {dt} {x.shape} {x.strides}: {err}" if err else None


def main(argv=None):
    def options(ap):
        ap.add_argument("--device", default=None, help="reduce's device= (opencl:0, ...); default the CPU")

    def every_fourth_2x2(i, rng, stats):
        return run_2x2_case(rng, stats) if i % 4 == 0 else None

    def setup(args):  # a 2x2 reduction after every fourth case, on the CPU
        return {"run_args": (args.device,), "extra": None if args.device is not None else every_fourth_2x2}

    return fuzz_common.main(__doc__, draw, run_case, describe, argv, options=options, setup=setup)


if __name__ == "__main__":
    sys.exit(main())
