"""Differential fuzz of coopjit.matmul's stacks of matrices (session 23's audit) against NumPy.

Each case draws a product whose operands have 0-3 batch dims that broadcast (sizes 0, 1 and
more, a 1-D operand now and then), lays each operand out as a view (C order, a stack-dim
transpose, steps, reversed, zero strides, a byte offset, big-endian), and draws out= (None; a view
of a guarded buffer, contiguous or strided; a view overlapping an input; a wrong batch shape).
Checked: the result against NumPy in float64 (tolerance from K and the dtype), NumPy's shape, the
guarded buffer's bytes outside out, every input's bytes; a refusal must be a ValueError /
TypeError, and a wrong batch shape must be refused.

    python scripts/fuzz_batched.py --seed 1 --cases 300
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
from fuzz_reductions import _outside_changed  # noqa: E402 (the guarded buffer's bytes outside a view)

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [(np.dtype(np.float32), np.dtype(np.float32)), (np.dtype(np.float64), np.dtype(np.float64)),
          (BF16, BF16), (np.dtype(np.int8), np.dtype(np.int32))]
LAYOUTS = ("c", "c", "stack_t", "step", "rev", "bcast", "offset", "bigendian")


def values(rng, shape, dt):
    if dt == np.int8:
        return rng.integers(-9, 9, size=shape).astype(np.int8)
    return (rng.integers(-8, 8, size=shape) / 4).astype(dt)


def lay_out(rng, x, kind):
    if x.ndim >= 3 and kind == "stack_t":
        perm = list(rng.permutation(x.ndim - 2)) + [x.ndim - 2, x.ndim - 1]
        base = np.ascontiguousarray(x.transpose(perm))
        return base.transpose(np.argsort(perm)), base
    if kind == "step" and x.ndim >= 1:
        big = np.zeros(tuple(2 * s + 1 for s in x.shape), x.dtype)
        v = big[tuple(slice(1, 1 + 2 * s, 2) for s in x.shape)]
        v[...] = x
        return v, big
    if kind == "rev" and x.ndim >= 1:
        flips = tuple(slice(None, None, -1) if rng.random() < 0.5 else slice(None) for _ in range(x.ndim))
        base = np.array(x[flips])
        return base[flips], base
    if kind == "bcast" and x.ndim >= 3 and x.shape[0] > 0:
        row = np.array(x[:1])
        return np.broadcast_to(row, x.shape), row
    if kind == "offset" and x.dtype.itemsize > 1:
        raw = np.zeros(x.nbytes + 1, np.uint8)
        y = raw[1:].view(x.dtype).reshape(x.shape)
        y[...] = x
        return y, raw
    if kind == "bigendian" and x.dtype.itemsize > 1 and x.dtype != BF16:
        y = x.astype(x.dtype.newbyteorder(">"))
        return y, y
    y = np.array(x)
    return y, y


def draw(rng):
    nb = int(rng.choice([0, 1, 1, 2, 2, 3]))
    batch = [int(rng.choice([0, 1, 2, 3, 5])) if rng.random() < 0.9 else 0 for _ in range(nb)]
    if 0 in batch and rng.random() < 0.7:
        batch = [b or 2 for b in batch]
    ba = [b if rng.random() < 0.7 else 1 for b in batch]
    bb = [b if rng.random() < 0.7 else 1 for b in batch]
    # drop leading dims of one operand (broadcast by rank)
    if ba and rng.random() < 0.3:
        ba = ba[int(rng.integers(1, len(ba) + 1)):]
    elif bb and rng.random() < 0.3:
        bb = bb[int(rng.integers(1, len(bb) + 1)):]
    m, n, k = (int(rng.choice([0, 1, 2, 3, 5, 8, 17, 33])) for _ in range(3))
    di = int(rng.integers(0, len(DTYPES)))
    return {"a": tuple(ba) + (m, k), "b": tuple(bb) + (k, n), "dt": di, "la": str(rng.choice(LAYOUTS)),
            "lb": str(rng.choice(LAYOUTS)), "vec": str(rng.choice(["none"] * 6 + ["a", "b"])),
            "out": str(rng.choice(["none", "none", "contig", "strided", "overlap", "wrong"])),
            "seed": int(rng.integers(0, 2**31))}


def describe(c):
    return f"{DTYPES[c['dt']][0]} a{c['a']} {c['la']} b{c['b']} {c['lb']} vec={c['vec']} out={c['out']} seed={c['seed']}"


def _same(buf, snap):
    a, b = np.ascontiguousarray(buf), np.ascontiguousarray(snap)
    return np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


def run_case(c, stats):
    rng = np.random.default_rng(c["seed"])
    dt, odt = DTYPES[c["dt"]]
    sa, sb = c["a"], c["b"]
    if c["vec"] == "a":
        sa = sa[-1:]
    elif c["vec"] == "b":
        sb = sb[-2:-1]
    a0, b0 = values(rng, sa, dt), values(rng, sb, dt)
    a, abuf = lay_out(rng, a0, c["la"])
    b, bbuf = lay_out(rng, b0, c["lb"])
    snaps = [(abuf, abuf.copy()), (bbuf, bbuf.copy())]
    try:
        ref = np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))  # (a broadcast view repeats its first row)
    except ValueError:
        ref = None
    kw = {}
    big = None
    if ref is not None and c["out"] in ("contig", "strided"):
        shape = ref.shape
        if c["out"] == "strided" and shape:
            big = np.empty(tuple(2 * s + 1 for s in shape), odt)
            out = big[tuple(slice(0, 2 * s, 2) for s in shape)]
        else:
            big = np.empty(int(np.prod(shape, dtype=np.int64)) + 6, odt)
            out = big[3:3 + int(np.prod(shape, dtype=np.int64))].reshape(shape)
        big.reshape(-1).view(np.uint8)[...] = rng.integers(0, 256, big.nbytes, dtype=np.uint8)
        before = big.reshape(-1).view(np.uint8).copy()
        kw["out"] = out
    elif ref is not None and c["out"] == "wrong" and ref.ndim >= 1:
        kw["out"] = np.empty((ref.shape[0] + 1,) + ref.shape[1:], odt)
    elif ref is not None and c["out"] == "overlap" and a.flags.writeable and a.dtype == odt and a.dtype.isnative \
            and ref.shape and a.shape[-2:] == ref.shape[-2:] and a.ndim >= ref.ndim \
            and a.shape[a.ndim - ref.ndim:] == ref.shape:
        kw["out"] = a[(0,) * (a.ndim - ref.ndim)] if a.ndim > ref.ndim else a
        snaps = [(bbuf, bbuf.copy())] if not np.shares_memory(bbuf, a) else []
    try:
        got = coopjit.matmul(a, b, **kw)
    except (ValueError, TypeError) as e:
        stats["refused"] += 1
        if ref is not None and c["out"] != "wrong":
            return f"refused ({type(e).__name__}: {e}) what NumPy computes"
        return None
    except Exception as e:  # noqa: BLE001
        return f"raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
    if ref is None:
        return f"computed shape {np.shape(got)} where NumPy refuses"
    if c["out"] == "wrong" and "out" in kw:
        return "took an out of the wrong shape"
    stats["ran"] += 1
    g = np.asarray(got)
    if g.shape != ref.shape:
        return f"shape {g.shape}, NumPy's {ref.shape}"
    k = sa[-1]
    eps = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-14, BF16: 1e-2}.get(dt, 0)
    tol = eps * (k + 2) * (np.abs(ref).max() + 1 if ref.size else 1)
    if dt == BF16:  # a bf16 result is rounded to bf16
        tol = 2 ** -7 * (np.abs(ref).max() + 1 if ref.size else 1)
    if ref.size and not (np.abs(g.astype(np.float64) - ref) <= tol).all():
        return f"wrong result, err {np.abs(g.astype(np.float64) - ref).max()}"
    for buf, snap in snaps:
        if not _same(buf, snap):
            return "an input changed"
    if big is not None and _outside_changed(kw["out"], big, before):
        return "wrote outside out"
    return None


def main(argv=None):
    return fuzz_common.main(__doc__, draw, run_case, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
