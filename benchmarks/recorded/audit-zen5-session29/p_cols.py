"""Axis-0 / column reductions through session 28's column forms (column_rows 8 rows a step for
sums and products; the column form's 4-vector tiles over contiguous columns): pool sizes 1..17,
dtypes, rows around the step, widths with remainders, NaN / inf planted, stride-0 (broadcast)
rows and columns, reversed / strided views, 3-D arrays over axes (0, 1), out= into a strided view
in a guarded buffer. Against NumPy in float64 / int64; inputs unchanged. Usage: probe SEED CASES"""
import sys
import numpy as np
import ml_dtypes
import coopjit

seed, cases = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(seed)
DT = [np.float32, np.float64, np.int64, np.int32, np.int8, np.uint8, np.float16, ml_dtypes.bfloat16, np.bool_]
ran = failed = refused = 0
for case in range(cases):
    dt = DT[rng.integers(len(DT))]
    rows = int(rng.choice([1, 2, 7, 8, 9, 15, 16, 17, 33, 257, 1000, 3000]))
    cols = int(rng.choice([1, 3, 16, 100, 129, 257, 520, 1024, 2050, 3000, 5000]))
    threads = int(rng.integers(1, 18))
    coopjit.set_num_threads(threads)
    op = str(rng.choice(["sum", "sum", "prod", "max", "min"]))
    if np.dtype(dt).kind == "f" or dt == ml_dtypes.bfloat16:
        x = (rng.standard_normal((rows, cols)) * (0.99 if op == "prod" else 1)).astype(dt)
        if op == "prod":
            x = (1 + rng.uniform(-1e-3, 1e-3, (rows, cols))).astype(dt)
        if rng.random() < 0.3:
            for v in (np.nan, np.inf, -np.inf):
                if rng.random() < 0.5:
                    x[rng.integers(rows), rng.integers(cols)] = v
    elif dt == np.bool_:
        x = rng.random((rows, cols)) < 0.5
    else:
        lo, hi = (0, 3) if op == "prod" else (-100 if np.dtype(dt).kind == "i" else 0, 100)
        x = rng.integers(lo, hi, (rows, cols)).astype(dt)
    layout = rng.choice(["plain", "rev", "stride", "bcast_rows", "bcast_cols", "3d"])
    if layout == "rev":
        x = np.ascontiguousarray(x[::-1])[::-1]
    elif layout == "stride":
        buf = np.zeros((rows, 2 * cols), x.dtype); buf[:, ::2] = x; x = buf[:, ::2]
    elif layout == "bcast_rows":
        x = np.broadcast_to(x[:1], (rows, cols))
    elif layout == "bcast_cols":
        x = np.broadcast_to(x[:, :1], (rows, cols))
    axis = 0
    if layout == "3d" and rows % 1 == 0:
        x = np.stack([x, x[::-1]])  # (2, rows, cols)
        axis = (0, 1)
    keep = bool(rng.random() < 0.3)
    use_out = rng.random() < 0.3
    keep = keep and not use_out  # (reduce has no keepdims: expand_dims of its result)
    x0 = x.copy()
    try:
        want = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[op](
            x.astype(np.float64) if np.dtype(x.dtype).kind == "f" or x.dtype == ml_dtypes.bfloat16 else x.astype(np.int64) if op in ("sum", "prod") else x, axis=axis, keepdims=keep)
        if use_out:
            rdt = np.sum(x[:1, :1]).dtype if op in ("sum", "prod") and x.dtype != ml_dtypes.bfloat16 else x.dtype
            if op in ("sum", "prod") and x.dtype in (np.float16, ml_dtypes.bfloat16):
                rdt = coopjit.reduce(x[:2, :2], axis=0, op=op).dtype
            buf = np.full(want.shape[:-1] + (2 * want.shape[-1] + 2,), 7, rdt)
            out = buf[..., 1:-1:2]
            before = buf.copy()
            got = coopjit.reduce(x, axis=axis, op=op, out=out)
            outside = np.ones(buf.shape, bool); outside[..., 1:-1:2] = False
            assert np.array_equal(buf[outside], before[outside]), "written outside out"
            assert got is out or np.shares_memory(got, out)
        else:
            got = coopjit.reduce(x, axis=axis, op=op) if not keep else None
            if keep:
                got = np.expand_dims(coopjit.reduce(x, axis=axis, op=op), axis)
        assert np.array_equal(x, x0, equal_nan=True), "input changed"
        g = np.asarray(got).astype(np.float64)
        w = np.asarray(want).astype(np.float64)
        if np.dtype(x.dtype).kind in "fV" or x.dtype == ml_dtypes.bfloat16:
            n = rows * (2 if axis != 0 else 1)
            tol = 1e-5 * n if x.dtype in (np.float32, np.float16, ml_dtypes.bfloat16) else 1e-13 * n
            scale = np.sum(np.abs(x.astype(np.float64)), axis=axis, keepdims=keep) if op == "sum" else np.abs(w)
            if x.dtype in (np.float16, ml_dtypes.bfloat16) and op in ("max", "min"):
                tol = 0
            if x.dtype in (np.float16, ml_dtypes.bfloat16) and op in ("sum", "prod"):
                tol = max(tol, 2e-2 if x.dtype == ml_dtypes.bfloat16 else 2e-3)
            fin = np.isfinite(w)
            ok = np.array_equal(np.isnan(g), np.isnan(w)) and np.array_equal(g[~fin], w[~fin], equal_nan=True) and \
                np.all(np.abs(g[fin] - w[fin]) <= tol * scale[fin] + np.abs(w[fin]) * float(ml_dtypes.finfo(np.asarray(got).dtype).eps) + 1e-30)
        else:
            ok = np.array_equal(g, w)
        ran += 1
        if not ok:
            failed += 1
            bad = np.argwhere(~(np.isclose(g, w, rtol=1e-6) | (np.isnan(g) & np.isnan(w))))[:3]
            print("FAIL", case, np.dtype(x.dtype).name, (rows, cols), op, layout, threads, keep, use_out,
                  [(tuple(i), g[tuple(i)], w[tuple(i)]) for i in bad])
    except (ValueError, TypeError) as e:
        refused += 1
        print("refused", case, np.dtype(x.dtype).name, (rows, cols), op, layout, str(e)[:120])
    except AssertionError as e:
        failed += 1
        print("FAIL", case, np.dtype(x.dtype).name, (rows, cols), op, layout, threads, e)
print(f"seed {seed}: ran {ran}, refused {refused}, failed {failed}")
