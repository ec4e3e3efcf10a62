# Short rows reduced along axis 0 (n x K, K*item < 64, n*K*item >= 1 MiB: the W-element rows path),
# plus the levels (long rows), against NumPy in float64; inputs unchanged; out= into views.
import numpy as np, coopjit, ml_dtypes, itertools, sys
rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
dts = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64, np.bool_]
fails = 0; ran = 0
def ref(x, axis, op):
    x64 = x.astype(np.float64) if x.dtype.kind in 'fV' else x
    return {'sum': np.sum, 'max': np.max, 'min': np.min, 'prod': np.prod}[op](x64, axis=axis)
def check(x, axis, op, tag):
    global fails, ran
    x0 = x.copy()
    try:
        with np.errstate(all='ignore'):
            got = coopjit.reduce(x, axis, op)
    except Exception as e:
        print('ERR', tag, type(e).__name__, e); fails += 1; return
    ran += 1
    if not np.array_equal(np.ascontiguousarray(x).view(np.uint8), np.ascontiguousarray(x0).view(np.uint8)):
        print('INPUT CHANGED', tag); fails += 1
    with np.errstate(all='ignore'):
        want = ref(x, axis, op)
    g = np.asarray(got).astype(np.float64) if np.asarray(got).dtype.kind in 'fV' else np.asarray(got)
    w = np.asarray(want)
    if x.dtype.kind in 'fV':
        w = w.astype(np.float64)
        # NumPy's dtype for the result: float sums in the input type
        same_nan = np.array_equal(np.isnan(g), np.isnan(w))
        fin = np.isfinite(w)
        inf_ok = np.array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)])
        if op == 'sum':
            scale = np.sum(np.abs(np.where(np.isfinite(x.astype(np.float64)), x.astype(np.float64), 0)), axis=axis)
            tol = {np.dtype(np.float64): 1e-13}.get(x.dtype, 1e-5) * 1 + (4e-3 if x.dtype in (np.float16, ml_dtypes.bfloat16) else 0)
            ok = np.all(np.abs(g[fin] - w[fin]) <= tol * (np.asarray(scale)[fin] if np.ndim(scale) else scale) + 1e-30)
        else:
            ok = np.array_equal(g[fin], w[fin])
        # float16 / bf16 outputs round: compare after rounding the reference
        if not ok and x.dtype in (np.float16, ml_dtypes.bfloat16):
            wr = w.astype(x.dtype).astype(np.float64)
            ok = np.allclose(g[fin], wr[fin], rtol=1e-2, atol=0)
            if not ok: inf_ok = inf_ok and True
        if not (same_nan and inf_ok and ok):
            print('MISMATCH', tag, 'got', np.ravel(g)[:5], 'want', np.ravel(w)[:5]); fails += 1
    else:
        if not np.array_equal(g.astype(np.int64) if op!='prod' else g, w.astype(np.int64) if op!='prod' else w):
            print('MISMATCH', tag, np.ravel(g)[:5], np.ravel(w)[:5]); fails += 1
for dt in dts:
    item = np.dtype(dt).itemsize
    for K in range(1, 64 // item + 2):
        n = (1 << 20) // (K * item) + int(rng.integers(0, 300))
        if dt == np.bool_:
            x = rng.random((n, K)) < 0.5
        elif np.dtype(dt).kind in 'iu':
            info = np.iinfo(dt); x = rng.integers(max(info.min, -100), min(info.max, 100), (n, K)).astype(dt)
        else:
            x = rng.standard_normal((n, K)).astype(dt)
        for op in ('sum', 'max', 'min'):
            if dt == np.bool_ and op != 'sum': continue
            check(x, 0, op, f'{np.dtype(dt).name} ({n},{K}) axis0 {op}')
        if np.dtype(dt).kind == 'f' or dt == ml_dtypes.bfloat16:
            y = x.copy(); y[int(rng.integers(n)), K - 1] = np.nan; y[int(rng.integers(n)), 0] = np.inf
            for op in ('sum', 'max', 'min'):
                check(y, 0, op, f'{np.dtype(dt).name} ({n},{K}) axis0 {op} naninf')
        # out= into a strided view, keepdims via out, reversed rows / sliced
        if dt in (np.float32, np.int8):
            big = np.zeros(3 * K + 5, np.float32 if dt == np.float32 else np.int64)
            out = big[2::3][:K]
            r = coopjit.reduce(x, 0, 'sum', out=out)
            w = x.astype(np.float64).sum(0)
            if not (np.allclose(out, w, rtol=1e-4, atol=1e-3 * np.sqrt(n)) and r is out and big[0] == 0 and big[1] == 0 and (big[3::3][:K-1] == 0).all()):
                print('OUT MISMATCH', dt, K); fails += 1
            check(x[::-1], 0, 'sum', f'{np.dtype(dt).name} ({n},{K}) reversed rows')
            check(x[1:], 0, 'max', f'{np.dtype(dt).name} ({n},{K}) offset one row')
            check(x.ravel()[1:1 + (n - 1) * K].reshape(n - 1, K), 0, 'sum', f'{np.dtype(dt).name} misaligned start')
print('ran', ran, 'fails', fails)
