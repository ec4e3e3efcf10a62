"""Random GEMM calls through session 28's new paths (f32 N = 64 tall products, batches on the
unpacked tile walk, small int8 / uint8 products packed VNNI, K-split float products with large
alpha / beta) combined with pool sizes 1..17, strided / reversed / transposed operands and outputs,
out= aliasing an input, zero-size / 1-row / 1-column shapes, alpha / beta edge values. Each result
against NumPy in float64 (int8: exact int64 cast to int32), inputs unchanged, nothing written
outside C's elements (C lies in a larger guarded buffer). Usage: probe SEED CASES"""
import sys
import numpy as np
import coopjit

seed, cases = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(seed)
ran = refused = failed = 0
SHAPES = [(4096, 64, 300), (1543, 64, 700), (200, 64, 64), (1, 64, 5000), (64, 1, 3000), (32, 32, 32), (48, 40, 36),
          (63, 33, 100), (96, 96, 64), (64, 64, 200), (0, 64, 10), (5, 0, 10), (7, 9, 0), (1, 1, 1), (300, 64, 4100),
          (33, 64, 2049), (4, 5, 8192)]
BATCHES = [(), (3,), (2, 3), (8,), (4, 1)]
SCALARS = [0.0, 1.0, -1.0, 2.0, 0.5, -3.0, 1e30, -1e30, np.inf, np.nan]


def view(x, how):
    """x's values in another layout (same values): strided, reversed, transposed copy, F order."""
    if how == "plain":
        return x
    if how == "rev" and x.ndim >= 2:
        buf = np.ascontiguousarray(x[..., ::-1, :])
        return buf[..., ::-1, :]
    if how == "stride":
        buf = np.zeros(x.shape[:-1] + (2 * x.shape[-1] + 1,), x.dtype)
        v = buf[..., 1::2]
        v[...] = x
        return v
    if how == "F" and x.ndim == 2:
        return np.asfortranarray(x)
    return x


def draw(dt, shape):
    if dt in ("int8",):
        return rng.integers(-128, 128, shape, dtype=np.int8)
    if dt == "uint8":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return rng.uniform(-2, 2, shape).astype(dt)


for case in range(cases):
    m, n, k = SHAPES[rng.integers(len(SHAPES))]
    batch = BATCHES[rng.integers(len(BATCHES))] if m * n * k < 3_000_000 else ()
    kind = rng.choice(["f32", "f64", "int8", "u8i8", "f32"])
    da, db = {"f32": ("float32", "float32"), "f64": ("float64", "float64"), "int8": ("int8", "int8"),
              "u8i8": ("uint8", "int8")}[kind]
    threads = int(rng.integers(1, 18))
    coopjit.set_num_threads(threads)
    bcast = rng.random() < 0.3 and batch
    a = draw(da, batch + (m, k))
    b = draw(db, ((k, n) if bcast else batch + (k, n)))
    a = view(a, rng.choice(["plain", "rev", "stride", "F"]))
    b = view(b, rng.choice(["plain", "rev", "stride", "F"]))
    a0, b0 = a.copy(), b.copy()
    integer = kind in ("int8", "u8i8")
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    if integer:
        ref = np.matmul(a.astype(np.int64), b.astype(np.int64))
    cdt = np.int32 if integer else np.dtype(da)
    api = rng.choice(["matmul", "gemm", "kernel"] if kind != "u8i8" else ["matmul", "gemm"]) if not batch else "matmul"
    try:
        if api == "matmul":
            out_kind = rng.choice(["none", "guard", "alias"])
            if out_kind == "alias" and not integer and a.shape == ref.shape and a.dtype == cdt:
                got = coopjit.matmul(a, b, out=a)  # out= is a: the product of a's values before
                a0_used = True
            elif out_kind == "guard":
                buf = np.full(ref.shape[:-1] + (ref.shape[-1] + 3,), 77, cdt)
                out = buf[..., 1:-2]
                got = coopjit.matmul(a, b, out=out)
                assert np.all(buf[..., :1] == 77) and np.all(buf[..., -2:] == 77), "written outside out"
                a0_used = False
            else:
                got = coopjit.matmul(a, b)
                a0_used = False
            want = ref.astype(np.int32) if integer else ref
        else:
            alpha = SCALARS[rng.integers(len(SCALARS))]
            beta = SCALARS[rng.integers(len(SCALARS))]
            if integer:
                alpha, beta = int(rng.integers(-3, 4)), int(rng.integers(-3, 4))
            c0 = draw("float64" if not integer else "int8", ref.shape).astype(cdt)
            buf = np.full((ref.shape[0] + 2, 2 * ref.shape[1] + 3), 77, cdt)
            c = buf[1:-1, 1:-2:2] if rng.random() < 0.5 else buf[1:-1, 1:1 + ref.shape[1]]
            if rng.random() < 0.3:
                c = c[::-1]
            c[...] = c0
            guard = buf.copy()
            if api == "gemm":
                got = coopjit.gemm(a, b, c, alpha=alpha, beta=beta)
            else:
                kern = coopjit.compile_gemm(m, n, k, cdt if not integer else da, accumulate=True)
                got = kern(a, b, c, alpha=alpha, beta=beta)
            marker = np.full(buf.shape, 0, np.int8)
            cv = np.ndarray(c.shape, np.int8, marker, (c.__array_interface__["data"][0] - buf.__array_interface__["data"][0]) // buf.itemsize, tuple(s // buf.itemsize for s in c.strides))
            cv[...] = 1
            assert np.array_equal(buf[marker == 0], guard[marker == 0]), "written outside c"
            with np.errstate(all="ignore"):
                if integer:
                    want = (alpha * ref + beta * c0.astype(np.int64)).astype(np.int32)
                else:
                    want = alpha * ref + (beta * c0.astype(np.float64) if beta != 0 else 0.0)
            a0_used = False
        if not a0_used:
            assert np.array_equal(a, a0, equal_nan=True), "a changed"
        assert np.array_equal(b, b0, equal_nan=True), "b changed"
        got = np.asarray(got)
        if integer:
            ok = np.array_equal(got, want)
        else:
            eps = np.finfo(cdt).eps
            with np.errstate(all="ignore"):
                bound = 4 * (k + 2) * eps * (np.abs(np.matmul(np.abs(a0.astype(np.float64)), np.abs(b.astype(np.float64)))) * (abs(alpha) if api != "matmul" else 1)
                                            + (np.abs(beta * c0) if api != "matmul" and beta != 0 else 0)) + 1e-300
                want_c = want.astype(cdt).astype(np.float64)
                fin = np.isfinite(want_c)
                ok = np.array_equal(np.isnan(got), np.isnan(want_c)) and np.array_equal(got[~fin & ~np.isnan(want_c)], want_c[~fin & ~np.isnan(want_c)]) \
                    and np.all(np.abs(got[fin] - want_c[fin]) <= bound[fin] + np.abs(want_c[fin]) * eps)
        ran += 1
        if not ok:
            failed += 1
            print("FAIL", case, kind, (m, n, k), batch, api, threads, locals().get("alpha"), locals().get("beta"))
    except (ValueError, TypeError) as e:
        refused += 1
        if refused <= 5:
            print("refused", case, kind, (m, n, k), batch, api, str(e)[:150])
    except AssertionError as e:
        failed += 1
        print("FAIL", case, kind, (m, n, k), batch, api, threads, e)
print(f"seed {seed}: ran {ran}, refused {refused}, failed {failed}")
