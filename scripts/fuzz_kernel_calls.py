"""Differential fuzz of compiled GEMM kernels' calls (session 22's audit): Kernel.__call__ and its
C++ fast path (GemmKernel.call_fast) against NumPy in float64.

Each case compiles (or fetches) a kernel of a drawn problem (f32 / f64 / bf16 -> f32 / int8 ->
int32, small and edge sizes, 0-sized dims) and calls it with operands laid out in one of many
ways: C-contiguous, Fortran-ordered, sliced, reversed (negative strides), zero strides
(broadcast_to), misaligned (a byte offset into a buffer), byte-swapped, read-only, non-ndarray
(lists, memoryviews, subclasses); c None, a view inside a guarded buffer, c aliasing a or b,
read-only c, c of the wrong dtype or shape; alpha / beta of int, float, NumPy scalar, NaN, huge
int. For every case:
  - a result is compared with NumPy float64 (tolerance from K and the dtype's epsilon);
  - guard bytes around c's view are unchanged, every input's buffer is unchanged;
  - a refusal must be a ValueError / TypeError / OverflowError; anything else is a failure.

    python scripts/fuzz_kernel_calls.py --seed 1 --cases 400

Exit status 1 when anything failed.
"""
from __future__ import annotations

import argparse
import sys
import traceback

import ml_dtypes
import numpy as np

import coopjit

BF16 = ml_dtypes.bfloat16
DTYPES = [(np.float32, np.float32), (np.float64, np.float64), (BF16, np.float32), (np.int8, np.int32)]
SIZES = [0, 1, 2, 3, 4, 7, 16, 17, 33, 64]


def values(rng, shape, dt):
    if np.dtype(dt) == np.int8:
        return rng.integers(-8, 8, size=shape).astype(np.int8)
    return (rng.integers(-8, 8, size=shape) / 4).astype(dt)


def layout(rng, x, kind):
    """x (C-contiguous) laid out as `kind`: (array passed, the buffer(s) to check afterwards)."""
    if kind == "c":
        return x, [x]
    if kind == "f":
        y = np.asfortranarray(x)
        return y, [y]
    if kind == "slice":
        big = np.zeros((x.shape[0] * 2 + 1, x.shape[1] * 3 + 2), x.dtype)
        v = big[1::2, 2::3]
        v[...] = x
        return v, [big]
    if kind == "rev":
        big = np.ascontiguousarray(x[::-1, ::-1])
        return big[::-1, ::-1], [big]
    if kind == "bcast":
        if x.shape[0] == 0 or x.shape[1] == 0:
            return x, [x]
        row = x[:1].copy()
        return np.broadcast_to(row, x.shape), [row]
    if kind == "misaligned":
        raw = np.zeros(x.nbytes + x.itemsize + 1, np.uint8)
        v = raw[1:1 + x.nbytes].view(x.dtype).reshape(x.shape)
        v[...] = x
        return v, [raw]
    if kind == "swapped":
        if x.dtype.itemsize == 1 or x.dtype == BF16:
            return x, [x]
        y = x.astype(x.dtype.newbyteorder(">"))
        return y, [y]
    if kind == "readonly":
        y = x.copy()
        y.flags.writeable = False
        return y, [y]
    if kind == "matrix":
        y = np.asmatrix(x) if x.ndim == 2 else x
        return y, [y]
    if kind == "list":
        if x.dtype in (np.float32, np.float64) and x.size:
            return x.tolist(), []
        return x, [x]
    if kind == "len1strides":  # dims of length 1 with odd strides (NumPy's flags call it contiguous)
        if x.shape[0] == 1 or x.shape[1] == 1:
            big = np.zeros((x.shape[0] * 5 + 3, x.shape[1] * 7 + 3), x.dtype)
            v = big[::5, ::7][: x.shape[0], : x.shape[1]]
            v[...] = x
            return v, [big]
        return x, [x]
    raise AssertionError(kind)


KINDS = ["c", "c", "c", "f", "slice", "rev", "bcast", "misaligned", "swapped", "readonly", "matrix", "list",
         "len1strides"]
C_KINDS = ["none", "none", "cnan", "cnan", "view", "view", "fview", "rview", "misaligned", "swapped", "readonly", "alias_a", "alias_b",
           "overlap", "wrongdtype", "wrongshape", "len1strides"]


def run_case(rng, stats):
    dt, odt = DTYPES[rng.integers(len(DTYPES))]
    M, N, K = (int(rng.choice(SIZES)) for _ in range(3))
    trans_a, trans_b = bool(rng.integers(4) == 0), bool(rng.integers(4) == 0)
    accumulate = bool(rng.integers(2))
    kern = coopjit.compile_gemm(M, N, K, dt, trans_a=trans_a, trans_b=trans_b, accumulate=accumulate, out_dtype=odt)
    a0 = values(rng, (K, M) if trans_a else (M, K), dt)
    b0 = values(rng, (N, K) if trans_b else (K, N), dt)
    ka, kb, kc = rng.choice(KINDS), rng.choice(KINDS), rng.choice(C_KINDS)
    a, abufs = layout(rng, a0, ka)
    b, bbufs = layout(rng, b0, kb)
    alpha = [1.0, 1, 2, -0.5, np.float32(1.5), np.float64(0.25), 3][rng.integers(7)]
    beta = [0.0, 0, 1.0, 0.5, -1][rng.integers(5)] if accumulate else [0.0, 0][rng.integers(2)]
    c0 = values(rng, (M, N), odt) if odt != np.int32 else rng.integers(-8, 8, size=(M, N)).astype(np.int32)
    guard = None
    c = None
    expect_ok = True
    beta_eff = 0.0 if kc == "none" else float(beta)
    if kc == "none" and float(beta) != 0.0:  # beta without c: refused, naming beta (session 23)
        expect_ok = False
    if kc in ("view", "fview", "rview"):
        big = rng.integers(0, 255, size=((M + 2) * 2 * (N + 2) * 3 * np.dtype(odt).itemsize,), dtype=np.uint8)
        guard = big.copy()
        mat = big.view(odt).reshape((M + 2) * 2, (N + 2) * 3)
        c = mat[1:1 + 2 * M:2, 2:2 + 3 * N:3] if kc == "view" else mat[1:1 + M, 2:2 + N]
        if kc == "rview":
            c = c[::-1, ::-1]
        if kc == "fview":
            c = mat.T[2:2 + N, 1:1 + M].T if False else np.asfortranarray(c0)  # plain F-order
            guard = None
        c[...] = c0
        if float(beta) == 0.0 and np.dtype(odt).kind == "f":  # beta = 0: C is not read (NaN must not come through)
            c[...] = np.nan
        if guard is not None:
            guard = big.copy()
        cbuf = big if kc != "fview" else None
    elif kc == "cnan":  # a C-contiguous c (the fast path), NaN where beta = 0 (C must not be read)
        c = c0.copy()
        if float(beta) == 0.0 and np.dtype(odt).kind == "f":
            c[...] = np.nan
    elif kc == "misaligned":
        raw = np.zeros(c0.nbytes + c0.itemsize + 8, np.uint8)
        c = raw[1:1 + c0.nbytes].view(c0.dtype).reshape(c0.shape)
        c[...] = c0
    elif kc == "swapped":
        c = c0.astype(c0.dtype.newbyteorder(">")) if c0.itemsize > 1 else c0.copy()
    elif kc == "readonly":
        c = c0.copy()
        c.flags.writeable = False
        expect_ok = False
    elif kc == "alias_a":
        if a0.shape == c0.shape and np.dtype(dt) == np.dtype(odt) and isinstance(a, np.ndarray) and a.flags.writeable \
                and a.strides != (0, 0) and 0 not in a.strides:
            c = a
            c0 = np.array(a, dtype=odt)
            beta_eff = float(beta)
        else:
            c = c0.copy()
    elif kc == "alias_b":
        if b0.shape == c0.shape and np.dtype(dt) == np.dtype(odt) and isinstance(b, np.ndarray) and b.flags.writeable \
                and 0 not in b.strides:
            c = b
            c0 = np.array(b, dtype=odt)
        else:
            c = c0.copy()
    elif kc == "overlap":  # c shares a's buffer in part (a, c views of one array)
        if np.dtype(dt) == np.dtype(odt) and not trans_a and M > 1 and K == N and ka == "c":
            big = np.concatenate([a0, np.zeros((M, K), dt)], axis=0)
            a = big[:M]
            c = big[M // 2: M // 2 + M]
            c[M - M // 2:] = 0
            a0 = a.copy()
            c0 = c.copy()
            # c's first rows are a's last ones: the product must use a as it was
            abufs = []
        else:
            c = c0.copy()
    elif kc == "wrongdtype":
        c = np.zeros((M, N), np.float64 if np.dtype(odt) != np.float64 else np.float32)
        expect_ok = False
    elif kc == "wrongshape":
        c = np.zeros((M + 1, N), odt)
        expect_ok = False
    elif kc == "len1strides":
        if M == 1 or N == 1:
            big = np.zeros((M * 5 + 3, N * 7 + 3), odt)
            c = big[::5, ::7][:M, :N]
            c[...] = c0
        else:
            c = c0.copy()
    if kc in ("alias_a", "alias_b") and c is not a and c is not b:
        pass
    # snapshots of the inputs' buffers
    snaps = [(buf, np.array(buf, copy=True)) for buf in abufs + bbufs if buf is not c and not (
        isinstance(c, np.ndarray) and np.may_share_memory(buf, c))]
    if ka == "readonly" or kb == "readonly":
        pass
    av = np.array(np.asarray(a), np.float64)
    bv = np.array(np.asarray(b), np.float64)
    ref = alpha * (av.T if trans_a else av) @ (bv.T if trans_b else bv)
    if beta_eff != 0.0 and c is not None and expect_ok:
        ref = ref + beta_eff * np.array(c, np.float64)
    desc = (f"{np.dtype(dt).name} M={M} N={N} K={K} ta={trans_a} tb={trans_b} acc={accumulate} a={ka} b={kb} c={kc} "
            f"alpha={alpha!r} beta={beta!r}")
    try:
        out = kern(a, b, c, alpha=alpha, beta=beta)
    except (ValueError, TypeError, OverflowError) as e:
        stats["refused"] += 1
        msg = str(e)
        stats.setdefault("msgs", {}).setdefault(f"{type(e).__name__}: {msg[:90]}", desc)
        if expect_ok and not (kc == "readonly"):
            # acceptable refusals: a list of the wrong dtype, matrix subclasses of another dtype...
            if not any(s in msg for s in ("dtype", "shape", "read-only", "beta", "must be an integer")):
                stats["fail"].append(f"{desc}: unexpected refusal {type(e).__name__}: {msg}")
        return
    except Exception as e:  # noqa: BLE001
        stats["fail"].append(f"{desc}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        return
    if not expect_ok:
        stats["fail"].append(f"{desc}: accepted bad c")
        return
    if c is not None and out is not c:
        stats["fail"].append(f"{desc}: returned another array than c")
    got = np.array(out, np.float64)
    eps = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-14}.get(np.dtype(odt), 0)
    tol = eps * (K + 2) * (np.abs(ref).max() + 1 if ref.size else 1)
    if dt == BF16:
        tol = 1e-5 * (K + 2) * (np.abs(ref).max() + 1 if ref.size else 1)
    if got.shape != ref.shape or not (np.abs(got - ref) <= tol).all():  # (NaN fails too)
        err = np.abs(got - ref).max() if got.shape == ref.shape and ref.size else "shape"
        stats["fail"].append(f"{desc}: wrong result, err {err}")
    for buf, snap in snaps:
        if not np.array_equal(np.asarray(buf).view(np.uint8), snap.view(np.uint8)) if np.asarray(buf).flags.c_contiguous \
                else not np.array_equal(buf, snap):
            stats["fail"].append(f"{desc}: an input changed")
    if guard is not None:
        mat_mask = np.zeros(guard.shape, bool)
        bview = np.asarray(big).view(np.uint8)
        # every byte outside c's elements must be unchanged
        idx = np.zeros(big.shape, bool)
        cm = c.view(np.uint8) if False else None
        base = big.ctypes.data
        item = np.dtype(odt).itemsize
        for i in range(M):
            for j in range(N):
                off = c.ctypes.data + i * c.strides[0] + j * c.strides[1] - base
                idx[off:off + item] = True
        if not np.array_equal(bview[~idx], guard[~idx]):
            stats["fail"].append(f"{desc}: wrote outside c")
        del mat_mask, cm
    stats["ok"] += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    stats = {"ok": 0, "refused": 0, "fail": []}
    for i in range(args.cases):
        run_case(rng, stats)
    if args.verbose:
        for m, d in sorted(stats.get("msgs", {}).items()):
            print("REFUSED", m, "|", d)
    for f in stats["fail"][:40]:
        print("FAIL", f)
    print(f"cases {args.cases}: ok {stats['ok']}, refused {stats['refused']}, failed {len(stats['fail'])}")
    return 1 if stats["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
